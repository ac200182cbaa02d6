// The page of one queue (#/queue/NAME): its figures, its properties in a form that PATCHes
// /{queue}/properties, its oldest ready messages (GET /{queue}/peek, nothing claimed), and its
// dead letters with a button that moves them back (POST /{queue}/redrive), a form that
// publishes a message, one that peeks or fetches (then acks or nacks what it fetched), and
// the deletion of the queue once its name is typed again (queue_actions.js). Every change goes
// through the ordinary API, so a refused value shows the API's own error.
"use strict";

import { $, ApiError, age, api, messageRows, notice, queuePath, size } from "./common.js";
import * as actions from "./queue_actions.js";

const FIGURES = [
  ["ready", (q) => q.ready], ["delayed", (q) => q.delayed], ["in_flight", (q) => q.in_flight],
  ["dead", (q) => q.dead], ["bytes", (q) => size(q.bytes)], ["oldest", (q) => age(q.oldest_ready_age_s)],
  ["adds", (q) => q.totals.adds], ["fetches", (q) => q.totals.fetches],
  ["acks", (q) => q.totals.acks], ["nacks", (q) => q.totals.nacks],
  ["redeliveries", (q) => q.totals.redeliveries], ["dead_letters", (q) => q.totals.dead_letters],
  ["waiting", (q) => q.waiting], ["clients", (q) => q.clients],
];
const PAGE = 10;               // messages shown per list

let current = null;            // the queue shown, or null on the overview
let shown = { ready: null, dead: null };  // the counts the lists were last loaded for
let original = {};             // property -> its text in the form as last loaded
let deadLetterQueue = null;

/** Show the page of a queue: load its properties and both lists. */
export function open(queue) {
  current = queue;
  shown = { ready: null, dead: null };
  $("q-name").textContent = queue;
  $("q-missing").hidden = true;
  $("props-error").textContent = "";
  document.querySelector("#props tbody").replaceChildren();
  for (const id of ["q-messages", "dlq-messages"]) document.querySelector(`#${id} tbody`).replaceChildren();
  actions.open(queue);
  loadProperties();
}

export function close() {
  current = null;
}

/** An answer of GET /_mq/queues?name= (overview.refresh's): the queue's figures (none: no
 *  such queue) shown, and the lists loaded again when their counts changed. */
export function update(answer) {
  if (current === null || answer.shown !== current) return;
  const q = answer.queues[0];
  $("q-missing").hidden = q !== undefined;
  const row = document.querySelector("#q-figures tbody tr");
  for (const [name, value] of FIGURES) {
    row.querySelector("td." + name).textContent = q === undefined ? "–" : String(value(q));
  }
  if (q === undefined) return;
  if (q.ready !== shown.ready) peekReady();
  if (q.dead !== shown.dead) peekDead();
  shown = { ready: q.ready, dead: q.dead };
}

function format(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

function parse(key, text) {
  // A string property takes the text as typed; any other is JSON (a number, true, an object),
  // and text that is not JSON goes as a string, for the API to refuse with its own message.
  if (typeof original[key].value === "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function renderProperties(answer) {
  const body = document.querySelector("#props tbody");
  body.replaceChildren();
  original = {};
  for (const [key, value] of Object.entries(answer.properties)) {
    original[key] = { value, text: format(value) };
    const row = document.createElement("tr");
    row.dataset.property = key;
    const name = document.createElement("th");
    name.scope = "row";
    const label = document.createElement("label");
    label.htmlFor = "prop-" + key;
    label.textContent = key;
    name.appendChild(label);
    const input = document.createElement("input");
    input.id = "prop-" + key;
    input.name = key;
    input.value = format(value);
    input.spellcheck = false;
    const field = document.createElement("td");
    field.className = "value";
    field.appendChild(input);
    const origin = document.createElement("td");
    origin.className = "origin";
    origin.textContent = key in answer.own ? "set on the queue" : "default";
    row.append(name, field, origin);
    body.appendChild(row);
  }
  deadLetterQueue = answer.properties.dead_letter_queue || null;
  $("dlq-name").textContent = deadLetterQueue || "–";
}

async function loadProperties() {
  const queue = current;
  try {
    const answer = await api("GET", queuePath(queue, "properties"));
    if (queue !== current) return;
    renderProperties(answer);
    shown.dead = null;         // the dead-letter queue may be another one now
  } catch (err) {
    $("props-error").textContent = err.message;
  }
}

function showError(err) {
  const box = $("props-error");
  box.textContent = err instanceof ApiError
    ? `Not saved: ${err.status} ${err.kind}: ${err.detail}` : `Not saved: ${err.message}`;
  // Mark the field the API named, e.g. "property 'timeout' must be a number, not str".
  const named = err instanceof ApiError ? /propert(?:y|ies) '([^']+)'/.exec(err.detail) : null;
  for (const input of document.querySelectorAll("#props input")) {
    input.classList.toggle("invalid", named !== null && input.name === named[1]);
  }
}

async function save(event) {
  event.preventDefault();
  const changed = {};
  for (const input of document.querySelectorAll("#props input")) {
    if (input.value !== original[input.name].text) changed[input.name] = parse(input.name, input.value);
  }
  if (Object.keys(changed).length === 0) {
    notice("no property changed");
    return;
  }
  try {
    const answer = await api("PATCH", queuePath(current, "properties"), changed);
    $("props-error").textContent = "";
    renderProperties(answer);
    shown.dead = null;
    notice(`saved ${Object.keys(changed).join(", ")} of ${current}`);
  } catch (err) {
    showError(err);
    notice("the properties were not saved", true);
  }
}

async function reset() {
  if (!confirm(`Drop every property set on ${current}? Its defaults apply again.`)) return;
  try {
    renderProperties(await api("DELETE", queuePath(current, "properties")));
    $("props-error").textContent = "";
    notice(`the properties of ${current} are its defaults again`);
  } catch (err) {
    showError(err);
  }
}

async function peekReady() {
  const queue = current;
  try {
    const answer = await api("GET", queuePath(queue, `peek?max=${PAGE}`));
    if (queue === current) messageRows(document.querySelector("#q-messages tbody"), answer.messages);
  } catch (err) {
    // A queue gone meanwhile (deleted here or elsewhere) is said by its figures ("no such
    // queue"); a notice would only cover what the page said last, such as its deletion.
    if (queue === current && !(err instanceof ApiError && err.status === 404)) notice(err.message, true);
  }
}

async function peekDead() {
  const queue = current;
  const tbody = document.querySelector("#dlq-messages tbody");
  if (!deadLetterQueue) return;
  try {
    const answer = await api("GET", queuePath(deadLetterQueue, `peek?max=${PAGE}`));
    if (queue !== current) return;
    messageRows(tbody, answer.messages);
    $("dlq-empty").hidden = answer.messages.length > 0;
    $("redrive").disabled = answer.messages.length === 0;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      // No dead letter yet: the dead-letter queue is made by its first one.
      tbody.replaceChildren();
      $("dlq-empty").hidden = false;
      $("redrive").disabled = true;
    } else {
      notice(err.message, true);
    }
  }
}

async function redrive() {
  try {
    const answer = await api("POST", queuePath(current, "redrive"));
    notice(`moved ${answer.moved} message(s) from ${answer.dead_letter_queue} back to ${current}`);
    shown = { ready: null, dead: null };
  } catch (err) {
    notice(err.message, true);
  }
}

async function purge() {
  if (!confirm(`Remove every message of ${current}: ready, delayed and in flight?`)) return;
  try {
    const answer = await api("POST", queuePath(current, "purge"));
    notice(`purged ${answer.purged} message(s) from ${current}`);
    shown = { ready: null, dead: null };
  } catch (err) {
    notice(err.message, true);
  }
}

$("props").closest("form").addEventListener("submit", save);
$("props-reset").addEventListener("click", reset);
$("redrive").addEventListener("click", redrive);
$("q-purge").addEventListener("click", purge);
$("q-refresh").addEventListener("click", () => { shown = { ready: null, dead: null }; });
actions.onChange(() => { shown = { ready: null, dead: null }; loadProperties(); });
