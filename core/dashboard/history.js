// The charts of the last hour: the daemon keeps a sample of its figures every 10 s or so, an
// hour of them (GET /_mq/history); the page asks for the samples newer than those it has,
// every few seconds, and draws three charts on the time axis of the last hour.
"use strict";

import { $, api } from "./common.js";

const ASK_MS = 5000;           // how often the page asks for new samples
const MIB = 1048576;
const CHARTS = [
  { id: "history-rates", unit: "/s", series: [["adds", "#1f77b4"], ["fetches", "#e6550d"], ["acks", "#31a354"]] },
  { id: "history-depths", unit: "", series: [["ready", "#756bb1"], ["in_flight", "#e6550d"], ["waiting", "#31a354"]] },
  { id: "history-disk", unit: " MiB", scale: 1 / MIB,
    series: [["root_free_bytes", "#636363"], ["bytes", "#1f77b4"]] },
];

let samples = [];              // oldest first, as the daemon sent them
let span = 3600;               // seconds the daemon keeps
let asked = 0;                 // Date.now() of the last request

function draw(chart, now) {
  const canvas = $(chart.id);
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  const pad = { left: 56, right: 8, top: 10, bottom: 20 };
  const scale = chart.scale || 1;
  const value = (s, key) => (s[key] === null || s[key] === undefined ? null : s[key] * scale);
  ctx.clearRect(0, 0, width, height);
  const values = samples.flatMap((s) => chart.series.map(([key]) => value(s, key))).filter((v) => v !== null);
  const top = Math.max(1, ...values);
  const x = (t) => pad.left + (width - pad.left - pad.right) * (1 - (now - t) / span);
  const y = (v) => height - pad.bottom - (height - pad.top - pad.bottom) * v / top;
  ctx.strokeStyle = "#d5d9de";
  ctx.fillStyle = "#6b7580";
  ctx.font = "11px system-ui, sans-serif";
  ctx.lineWidth = 1;
  for (const fraction of [0, 0.5, 1]) {
    ctx.beginPath();
    ctx.moveTo(pad.left, y(top * fraction));
    ctx.lineTo(width - pad.right, y(top * fraction));
    ctx.stroke();
    ctx.fillText((top * fraction).toFixed(top < 10 ? 1 : 0) + chart.unit, 2, y(top * fraction) + 4);
  }
  ctx.fillText("-60 min", pad.left, height - 5);
  ctx.fillText("-30 min", (pad.left + width - pad.right) / 2 - 18, height - 5);
  ctx.fillText("now", width - pad.right - 22, height - 5);
  for (const [key, color] of chart.series) {
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    let drawn = 0;
    for (const s of samples) {
      const v = value(s, key);
      if (v === null) continue;
      if (drawn++) ctx.lineTo(x(s.time), y(v));
      else ctx.moveTo(x(s.time), y(v));
    }
    ctx.stroke();
    if (drawn === 1) {           // one sample: a dot, not a line
      const last = samples[samples.length - 1];
      ctx.fillRect(x(last.time) - 2, y(value(last, key)) - 2, 4, 4);
    }
  }
}

/** Ask for the samples taken since the last one the page has (every ASK_MS at most). */
export async function refresh() {
  if (Date.now() - asked < ASK_MS) return;
  asked = Date.now();
  const since = samples.length ? samples[samples.length - 1].time : 0;
  const answer = await api("GET", `/_mq/history?since=${since}`);
  span = answer.span_s;
  samples = samples.concat(answer.samples).filter((s) => s.time > answer.time - span);
  $("history-interval").textContent = String(answer.interval_s);
  $("history-count").textContent = String(samples.length);
  for (const chart of CHARTS) draw(chart, answer.time);
}

/** Ask at the next refresh, whatever the time (a restarted front has a new ring). */
export function reset() {
  samples = [];
  asked = 0;
}
