// What a queue's page does to the queue, through the ordinary API: publish a message
// (POST /{queue}/messages, with its content type and a delay), peek (GET /{queue}/peek) or
// fetch one (GET /{queue}/messages) and then ack or nack it (POST /{queue}/messages/{id}
// ?reply=ack|nack with its receipt), create the queue (PUT /{queue}) and delete it
// (DELETE /{queue}) once its name is typed again.
"use strict";

import { $, api, messageRows, notice, queuePath, raw, text } from "./common.js";

let current = null;            // the queue of the page
let fetched = null;            // {id, receipt} of the message fetched and not replied to yet
let changed = () => {};        // what the page does when the queue changed under it

/** Have `callback` run after an action changed the queue (its lists are loaded again). */
export function onChange(callback) {
  changed = callback;
}

/** A new queue's page: nothing fetched, no deletion asked, the forms empty. */
export function open(queue) {
  current = queue;
  fetched = null;
  $("fetched").hidden = true;
  $("got-messages").hidden = true;
  $("delete-confirm").hidden = true;
  $("publish-body").value = "";
  $("publish-delay").value = "";
}

async function publish(event) {
  event.preventDefault();
  const delay = $("publish-delay").value.trim();
  const path = queuePath(current, "messages") + (delay ? "?" + new URLSearchParams({ delay }) : "");
  try {
    const response = await raw("POST", path, $("publish-body").value, $("publish-type").value || undefined);
    const answer = await response.json();
    notice(`published ${answer.id} to ${current}` + (answer.due ? `, due ${new Date(answer.due * 1000).toLocaleTimeString()}` : ""));
    $("publish-body").value = "";
    changed();
  } catch (err) {
    notice(err.message, true);
  }
}

function count() {
  return Math.max(1, Math.min(100, parseInt($("get-max").value, 10) || 10));
}

async function peek() {
  try {
    const answer = await api("GET", queuePath(current, `peek?max=${count()}`));
    messageRows(document.querySelector("#got-messages tbody"), answer.messages);
    $("got-messages").hidden = false;
    notice(`${answer.messages.length} ready message(s) of ${current} shown, none claimed`);
  } catch (err) {
    notice(err.message, true);
  }
}

async function fetchOne() {
  try {
    const response = await raw("GET", queuePath(current, "messages"));
    if (response.status === 204) {
      notice(`no message ready in ${current}`);
      return;
    }
    const id = response.headers.get("X-Message-Id");
    fetched = { id, receipt: response.headers.get("X-Receipt") };
    const body = text(new Uint8Array(await response.arrayBuffer()));
    $("fetched-id").textContent = id;
    $("fetched-attempts").textContent = response.headers.get("X-Attempts");
    $("fetched-type").textContent = response.headers.get("Content-Type") || "";
    $("fetched-body").textContent = body;
    $("fetched").hidden = false;
    $("fetched-ack").disabled = $("fetched-nack").disabled = false;
    notice(`fetched ${id} from ${current}: ack or nack it`);
    changed();
  } catch (err) {
    notice(err.message, true);
  }
}

async function reply(kind) {
  if (fetched === null) return;
  const { id, receipt } = fetched;
  const query = new URLSearchParams({ reply: kind, receipt });
  try {
    const response = await raw("POST", queuePath(current, `messages/${encodeURIComponent(id)}?${query}`));
    const dead = response.status === 200 ? (await response.json()).dead_letter_queue : null;
    notice(kind === "ack" ? `acked ${id}` : `nacked ${id}` + (dead ? `: moved to ${dead}` : ": ready again"));
    fetched = null;
    $("fetched-ack").disabled = $("fetched-nack").disabled = true;
    changed();
  } catch (err) {
    notice(err.message, true);
  }
}

async function create() {
  try {
    await api("PUT", queuePath(current));
    notice(`created queue ${current}`);
    changed();
  } catch (err) {
    notice(err.message, true);
  }
}

function askDelete() {
  $("delete-queue").textContent = current;
  $("delete-confirm-name").value = "";
  $("delete-confirm-go").disabled = true;
  $("delete-confirm").hidden = false;
  $("delete-confirm-name").focus();
}

async function confirmDelete() {
  if ($("delete-confirm-name").value !== current) return;
  const queue = current;
  try {
    await api("DELETE", queuePath(queue));
    $("delete-confirm").hidden = true;
    location.hash = "#/";
    notice(`deleted queue ${queue}`);
  } catch (err) {
    notice(err.message, true);
  }
}

$("publish-form").addEventListener("submit", publish);
$("get-peek").addEventListener("click", peek);
$("get-fetch").addEventListener("click", fetchOne);
$("fetched-ack").addEventListener("click", () => reply("ack"));
$("fetched-nack").addEventListener("click", () => reply("nack"));
$("q-create").addEventListener("click", create);
$("q-delete").addEventListener("click", askDelete);
$("delete-confirm-name").addEventListener("input", (e) => {
  $("delete-confirm-go").disabled = e.target.value !== current;
});
$("delete-confirm-go").addEventListener("click", confirmDelete);
$("delete-cancel").addEventListener("click", () => { $("delete-confirm").hidden = true; });
