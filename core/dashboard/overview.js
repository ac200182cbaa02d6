// The overview: one page of the queues whose names contain the text in the Find field, with
// their depths, counters and consumers (GET /_mq/queues filters and pages on the daemon, so
// 10,000 queues are never 10,000 rows), a chart of the adds and fetches per second drawn from
// the difference of the totals between two polls, and the process table from the
// supervisor's health.json (GET /_mq/health). Peek and Purge act on a queue from its row;
// the form beside the pager creates one.
"use strict";

import { $, api, button, cell, duration, mebibytes, messageRows, notice, queueLink, queuePath, size,
  age } from "./common.js";

const PAGE = 50;               // queues per page of the table
const HISTORY = 120;           // samples kept for the chart: two minutes at one a second
const COLUMNS = ["ready", "delayed", "in_flight", "dead"];
// What each kind of process does (mqctl status says the same).
const ROLES = { supervisor: "supervises the others", mover: "times delay/",
  reaper: "empties remove/", fetch: "fetch actor", save: "save actor", front: "HTTP front" };
const history = [];            // {adds, fetches} per second, oldest first
let previous = null;           // the last answer, for the rates between two polls
let filter = "";               // the text queue names must contain
let offset = 0;                // the first row of the page shown

function sum(answer, event) {
  return answer.sums.totals[event];
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

function renderQueues(answer) {
  const body = document.querySelector("#queues tbody");
  const names = answer.queues.map((q) => q.name);
  const shown = new Set(names);
  const rows = new Map([...body.rows].map((row) => [row.dataset.queue, row]));
  for (const [name, row] of rows) if (!shown.has(name)) row.remove();
  for (const q of answer.queues) {
    const name = q.name;
    let row = rows.get(name);
    if (!row) {
      row = document.createElement("tr");
      row.dataset.queue = name;
      const link = document.createElement("a");
      link.href = queueLink(name);
      link.textContent = name;
      cell(row, "name", "").appendChild(link);
      body.appendChild(row);
    }
    for (const column of COLUMNS) cell(row, column, String(q[column]));
    cell(row, "bytes", size(q.bytes));
    cell(row, "oldest", age(q.oldest_ready_age_s));
    cell(row, "adds", String(q.totals.adds));
    cell(row, "fetches", String(q.totals.fetches));
    cell(row, "acks", String(q.totals.acks));
    cell(row, "add-rate", q.rates.adds.toFixed(2));
    cell(row, "fetch-rate", q.rates.fetches.toFixed(2));
    cell(row, "waiting", String(q.waiting));
    cell(row, "clients", String(q.clients));
    if (!row.querySelector("td.actions")) {
      const td = document.createElement("td");
      td.className = "actions";
      td.append(button("Peek", "peek", () => peek(name)), " ",
                button("Purge", "purge", () => purge(name)));
      row.appendChild(td);
    }
  }
  // Keep the rows in the order of the names (the daemon lists queues alphabetically).
  names.forEach((name) => body.appendChild(body.querySelector(`tr[data-queue="${CSS.escape(name)}"]`)));
  $("empty").hidden = answer.count > 0;
  $("no-match").hidden = answer.count === 0 || answer.matched > 0;
  const last = Math.min(answer.offset + answer.queues.length, answer.matched);
  $("page-info").textContent = answer.matched
    ? `${answer.offset + 1}–${last} of ${answer.matched}` + (filter ? ` matching (${answer.count} queues)` : "")
    : "";
  $("page-prev").disabled = answer.offset === 0;
  $("page-next").disabled = last >= answer.matched;
  renderAbout(answer);
}

/** The sums over every queue, the version and the root's free space. */
function renderAbout(answer) {
  const s = answer.sums;
  $("totals").textContent = `${answer.count} queue(s): ${s.ready} ready, ${s.in_flight} in flight, ` +
    `${s.delayed} delayed, ${size(s.bytes)}, ${s.waiting} long poll(s) waiting`;
  $("version").textContent = answer.version;
  $("disk-free").textContent = answer.root_free_bytes === null ? "unknown" : size(answer.root_free_bytes);
  $("disk-inodes").textContent = answer.root_free_inodes === null ? "–" : String(answer.root_free_inodes);
}

/** The process table: the supervisor, then every child as health.json lists them. */
export function renderProcesses(health, now) {
  const body = document.querySelector("#processes tbody");
  const rows = [{ name: "supervisor", pid: health.supervisor_pid, alive: true,
    restarts: null, started: health.started }, ...health.children];
  body.replaceChildren();
  for (const p of rows) {
    const row = document.createElement("tr");
    row.dataset.process = p.name;
    row.classList.toggle("down", !p.alive);
    cell(row, "name", p.name);
    cell(row, "role", ROLES[p.name.split("-")[0]] || "");
    cell(row, "pid", p.pid ? String(p.pid) : "–");
    cell(row, "state", p.alive ? "up" : "down");
    cell(row, "uptime", p.alive && p.started ? duration(now - p.started) : "–");
    cell(row, "restarts", p.restarts === null ? "–" : String(p.restarts));
    cell(row, "memory", mebibytes(p.rss_bytes));
    cell(row, "cpu", p.cpu_s === undefined ? "–" : p.cpu_s.toFixed(2) + " s");
    body.appendChild(row);
  }
}

async function peek(queue) {
  try {
    const answer = await api("GET", queuePath(queue, "peek?max=10"));
    messageRows(document.querySelector("#peek-messages tbody"), answer.messages);
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
    if ($("peek-queue").textContent === queue) $("peek").hidden = true;  // its rows are gone
    await refresh();
  } catch (err) {
    notice(err.message, true);
  }
}

async function create(event) {
  event.preventDefault();
  const name = $("create-name").value.trim();
  try {
    const answer = await api("PUT", queuePath(name));
    notice(answer.created ? `created queue ${name}` : `queue ${name} exists already`);
    $("create-name").value = "";
    await refresh();
  } catch (err) {
    notice(err.message, true);
  }
}

function findQueues() {
  if (location.hash.startsWith("#/queue/")) return;
  filter = $("queue-filter").value;
  offset = 0;
  refresh().catch((err) => notice(err.message, true));
}

function turn(pages) {
  offset = Math.max(0, offset + pages * PAGE);
  refresh().catch((err) => notice(err.message, true));
}

/** One poll: a page of the queues' figures (or, with a queue's page open, that queue's
 *  alone: one gathering of the statistics a second is enough), and the processes. */
export async function refresh(queueShown = null) {
  const query = queueShown === null
    ? new URLSearchParams({ offset: String(offset), limit: String(PAGE) })
    : new URLSearchParams({ name: queueShown });
  if (filter && queueShown === null) query.set("filter", filter);
  const [stats, health] = await Promise.all([
    api("GET", "/_mq/queues?" + query),
    // health.json answers 503 with its body when a process is down; not published yet: none.
    api("GET", "/_mq/health", undefined, [503]).catch(() => null),
  ]);
  sample(stats);
  // A page asked before the Find text or the page changed is not the one to show.
  const current = queueShown === null && stats.offset === offset && (query.get("filter") || "") === filter;
  if (current) renderQueues(stats);
  else renderAbout(stats);
  // Queues deleted since the page was turned: show the last page there is.
  if (current && stats.offset > 0 && stats.offset >= stats.matched) {
    offset = Math.max(0, Math.floor((stats.matched - 1) / PAGE) * PAGE);
  }
  drawChart();
  if (health && health.children) renderProcesses(health, stats.time);
  stats.shown = queueShown;    // the queue asked for alone, or null
  return stats;
}

$("peek-close").addEventListener("click", () => { $("peek").hidden = true; });
$("create-form").addEventListener("submit", create);
$("queue-filter").addEventListener("input", findQueues);
$("page-prev").addEventListener("click", () => turn(-1));
$("page-next").addEventListener("click", () => turn(1));
