// The mq dashboard: polls GET /_mq/stats every second, shows every queue's depths and
// counters, draws the adds and fetches per second on a canvas, and peeks at or purges a queue
// through the ordinary HTTP API. Plain JavaScript, no build step, no third-party code.
"use strict";

const POLL_MS = 1000;
const HISTORY = 120;           // samples kept for the chart: two minutes at one a second
const COLUMNS = ["ready", "delayed", "in_flight", "dead"];
const history = [];            // {adds, fetches} per second, oldest first
let previous = null;           // the last stats answer, for the rates between two polls

const $ = (id) => document.getElementById(id);

function headers() {
  // A bearer token typed in the page is kept in this browser only, for daemons that ask one.
  const token = localStorage.getItem("mq-token");
  return token ? { Authorization: "Bearer " + token } : {};
}

async function api(method, path) {
  const response = await fetch(path, { method, headers: headers(), cache: "no-store" });
  const text = await response.text();
  const body = text ? JSON.parse(text) : {};
  if (!response.ok) {
    throw new Error(`${method} ${path}: ${response.status} ${body.message || ""}`);
  }
  return body;
}

function queuePath(queue, rest) {
  return "/" + encodeURIComponent(queue) + "/" + rest;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function sum(stats, event) {
  return Object.values(stats.queues).reduce((total, q) => total + q.totals[event], 0);
}

function sample(stats) {
  // Rates from the difference of the totals between two polls; a total that went down is an
  // actor that restarted and counts from zero again. An answer older than the last one (two
  // polls crossed: a purge asks at once) is not a sample.
  if (previous !== null && stats.time <= previous.time) return;
  if (previous !== null) {
    const seconds = Math.max(0.001, stats.time - previous.time);
    const rate = (event) => Math.max(0, sum(stats, event) - sum(previous, event)) / seconds;
    history.push({ adds: rate("adds"), fetches: rate("fetches") });
    if (history.length > HISTORY) history.shift();
    $("add-rate").textContent = rate("adds").toFixed(1);
    $("fetch-rate").textContent = rate("fetches").toFixed(1);
  }
  previous = stats;
}

function drawChart() {
  const canvas = $("chart");
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  const pad = { left: 48, right: 8, top: 10, bottom: 20 };
  ctx.clearRect(0, 0, width, height);
  const top = Math.max(1, ...history.map((s) => Math.max(s.adds, s.fetches)));
  const x = (i) => pad.left + (width - pad.left - pad.right) * (i + HISTORY - history.length) / (HISTORY - 1);
  const y = (v) => height - pad.bottom - (height - pad.top - pad.bottom) * v / top;
  ctx.strokeStyle = "#d5d9de";
  ctx.fillStyle = "#6b7580";
  ctx.font = "11px system-ui, sans-serif";
  for (const fraction of [0, 0.5, 1]) {
    ctx.beginPath();
    ctx.moveTo(pad.left, y(top * fraction));
    ctx.lineTo(width - pad.right, y(top * fraction));
    ctx.stroke();
    ctx.fillText((top * fraction).toFixed(top < 10 ? 1 : 0), 4, y(top * fraction) + 4);
  }
  ctx.fillText("now", width - pad.right - 22, height - 5);
  for (const [event, color] of [["adds", "#1f77b4"], ["fetches", "#e6550d"]]) {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    history.forEach((s, i) => (i ? ctx.lineTo(x(i), y(s[event])) : ctx.moveTo(x(i), y(s[event]))));
    ctx.stroke();
  }
}

function cell(row, className, text) {
  let td = row.querySelector("td." + className);
  if (!td) {
    td = document.createElement("td");
    td.className = className;
    row.appendChild(td);
  }
  td.textContent = text;
}

function button(label, className, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.className = className;
  b.addEventListener("click", onClick);
  return b;
}

function renderQueues(stats) {
  const body = document.querySelector("#queues tbody");
  const names = Object.keys(stats.queues);
  const rows = new Map([...body.rows].map((row) => [row.dataset.queue, row]));
  for (const [name, row] of rows) if (!(name in stats.queues)) row.remove();
  for (const name of names) {
    const q = stats.queues[name];
    let row = rows.get(name);
    if (!row) {
      row = document.createElement("tr");
      row.dataset.queue = name;
      cell(row, "name", name);
      body.appendChild(row);
    }
    for (const column of COLUMNS) cell(row, column, String(q[column]));
    cell(row, "oldest", age(q.oldest_ready_age_s));
    cell(row, "adds", String(q.totals.adds));
    cell(row, "fetches", String(q.totals.fetches));
    cell(row, "acks", String(q.totals.acks));
    cell(row, "add-rate", q.rates.adds.toFixed(2));
    cell(row, "fetch-rate", q.rates.fetches.toFixed(2));
    if (!row.querySelector("td.actions")) {
      const td = document.createElement("td");
      td.className = "actions";
      td.append(button("Peek", "peek", () => peek(name)), " ",
                button("Purge", "purge", () => purge(name)));
      row.appendChild(td);
    }
  }
  // Keep the rows in the order of the names (the stats list queues alphabetically).
  names.forEach((name) => body.appendChild(body.querySelector(`tr[data-queue="${CSS.escape(name)}"]`)));
  $("empty").hidden = names.length > 0;
}

function decode(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return `(${bytes.length} bytes of binary data)`;
  }
}

async function peek(queue) {
  try {
    const answer = await api("GET", queuePath(queue, "peek?max=10"));
    const body = document.querySelector("#peek-messages tbody");
    body.replaceChildren();
    for (const m of answer.messages) {
      const row = document.createElement("tr");
      for (const text of [m.id, String(m.attempts), m.content_type, decode(m.body)]) {
        const td = document.createElement("td");
        td.textContent = text;
        row.appendChild(td);
      }
      body.appendChild(row);
    }
    $("peek-queue").textContent = queue;
    $("peek").hidden = false;
    notice(`${answer.messages.length} ready message(s) of ${queue} shown, none claimed`);
  } catch (err) {
    notice(err.message, true);
  }
}

async function purge(queue) {
  if (!confirm(`Remove every message of ${queue}: ready, delayed and in flight?`)) return;
  try {
    const answer = await api("POST", queuePath(queue, "purge"));
    notice(`purged ${answer.purged} message(s) from ${queue}`);
    await poll();
  } catch (err) {
    notice(err.message, true);
  }
}

function notice(text, bad = false) {
  const p = $("notice");
  p.textContent = text;
  p.classList.toggle("bad", bad);
}

async function poll() {
  const status = $("status");
  try {
    const stats = await api("GET", "/_mq/stats");
    sample(stats);
    renderQueues(stats);
    drawChart();
    const down = Object.entries(stats.actors).filter(([, state]) => state !== "ok");
    status.textContent = down.length
      ? "not answering: " + down.map(([name]) => name).join(", ")
      : `${Object.keys(stats.queues).length} queue(s), updated ${new Date(stats.time * 1000).toLocaleTimeString()}`;
    status.classList.toggle("bad", down.length > 0);
  } catch (err) {
    status.textContent = "unreachable: " + err.message;
    status.classList.add("bad");
  }
}

$("token").value = localStorage.getItem("mq-token") || "";
$("token").addEventListener("change", (e) => localStorage.setItem("mq-token", e.target.value));
$("peek-close").addEventListener("click", () => { $("peek").hidden = true; });
poll();
setInterval(poll, POLL_MS);
