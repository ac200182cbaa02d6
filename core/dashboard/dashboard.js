// The mq dashboard: polls GET /_mq/queues (a page of the queues' figures; the processes, GET
// /_mq/health; the last hour, GET /_mq/history) every second and shows either the overview or
// the page of one queue (#/queue/NAME), both through the ordinary HTTP API. Plain JavaScript
// modules, no build step, no third-party code.
"use strict";

import { $ } from "./common.js";
import * as history from "./history.js";
import * as overview from "./overview.js";
import * as queuePage from "./queue.js";

const POLL_MS = 1000;

function routedQueue() {
  const match = /^#\/queue\/(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function route() {
  const queue = routedQueue();
  $("overview").hidden = queue !== null;
  $("queue-page").hidden = queue === null;
  document.title = queue === null ? "mq dashboard" : `${queue} · mq dashboard`;
  if (queue === null) queuePage.close();
  else queuePage.open(queue);
}

async function poll() {
  const status = $("status");
  try {
    // The overview is kept current behind a queue's page too: its chart needs every sample.
    const stats = await overview.refresh(routedQueue());
    queuePage.update(stats);
    await history.refresh();
    const down = Object.entries(stats.actors).filter(([, state]) => state !== "ok");
    status.textContent = down.length
      ? "not answering: " + down.map(([name]) => name).join(", ")
      : `${stats.count} queue(s), updated ${new Date(stats.time * 1000).toLocaleTimeString()}`;
    status.classList.toggle("bad", down.length > 0);
  } catch (err) {
    status.textContent = "unreachable: " + err.message;
    status.classList.add("bad");
  }
}

$("token").value = localStorage.getItem("mq-token") || "";
$("token").addEventListener("change", (e) => localStorage.setItem("mq-token", e.target.value));
window.addEventListener("hashchange", () => { route(); poll(); });
route();
// The next poll a second after the last one ended: a daemon slow to answer (10,000 queues on a
// busy machine) is not asked again before it answered.
(async function loop() {
  await poll();
  setTimeout(loop, POLL_MS);
})();
