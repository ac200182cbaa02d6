// What every view of the dashboard shares: the calls to mq's HTTP API (with the token typed
// in the page), the notice line, and the formatting of ages, sizes and message bodies.
"use strict";

export const $ = (id) => document.getElementById(id);

/** An answer of the API that is not 2xx: its status, and the error's kind and message. */
export class ApiError extends Error {
  constructor(method, path, status, body) {
    super(`${method} ${path}: ${status} ${body.error || ""}: ${body.message || "no message"}`);
    this.status = status;
    this.kind = body.error;
    this.detail = body.message || "";
    this.body = body;
  }
}

function headers(json) {
  // A bearer token typed in the page is kept in this browser only, for daemons that ask one.
  const token = localStorage.getItem("mq-token");
  const h = token ? { Authorization: "Bearer " + token } : {};
  if (json) h["Content-Type"] = "application/json";
  return h;
}

/** One call to the API; the JSON answer, or an ApiError. keep: statuses answered with a body
 *  worth having (health's 503 names what is down). */
export async function api(method, path, body = undefined, keep = []) {
  const response = await fetch(path, {
    method, headers: headers(body !== undefined), cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed = {};
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = { error: "unreadable", message: text.slice(0, 200) };
  }
  if (!response.ok && !keep.includes(response.status)) {
    throw new ApiError(method, path, response.status, parsed);
  }
  return parsed;
}

/** One call to the API with a body as it is (a message's), or none: the Response once 2xx
 *  (its headers and body for the caller to read), else an ApiError. */
export async function raw(method, path, body = undefined, contentType = undefined) {
  const h = headers(false);
  if (contentType) h["Content-Type"] = contentType;
  const response = await fetch(path, { method, headers: h, cache: "no-store", body });
  if (!response.ok) {
    const text = await response.text();
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { error: "unreadable", message: text.slice(0, 200) };
    }
    throw new ApiError(method, path, response.status, parsed);
  }
  return response;
}

export function queuePath(queue, rest = "") {
  return "/" + encodeURIComponent(queue) + (rest ? "/" + rest : "");
}

export function queueLink(queue) {
  return "#/queue/" + encodeURIComponent(queue);
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

/** Seconds as 42s, 3m07s, 5h02m, 2d03h (as mqctl status writes them). */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "–";
  const s = Math.max(0, Math.floor(seconds));
  const pad = (n) => String(n).padStart(2, "0");
  if (s >= 86400) return `${Math.floor(s / 86400)}d${pad(Math.floor((s % 86400) / 3600))}h`;
  if (s >= 3600) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  return `${s}s`;
}

export function mebibytes(bytes) {
  return bytes === undefined ? "–" : (bytes / 1048576).toFixed(1) + " MiB";
}

/** A size in bytes as people read it: 512 B, 3.4 KiB, 12.0 MiB, 1.5 GiB. */
export function size(bytes) {
  if (bytes === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let n = bytes, unit = 0;
  while (n >= 1024 && unit < units.length - 1) { n /= 1024; unit++; }
  return unit ? `${n.toFixed(1)} ${units[unit]}` : `${n} B`;
}

export function decode(base64) {
  return text(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)));
}

/** A body's bytes as text when they are UTF-8, else a line saying how many there are. */
export function text(bytes) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return `(${bytes.length} bytes of binary data)`;
  }
}

export function notice(text, bad = false) {
  const p = $("notice");
  p.textContent = text;
  p.classList.toggle("bad", bad);
}

export function button(label, className, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.className = className;
  b.addEventListener("click", onClick);
  return b;
}

/** Set the text of a row's cell of this class, creating the cell at the row's end if needed. */
export function cell(row, className, text) {
  let td = row.querySelector("td." + className);
  if (!td) {
    td = document.createElement("td");
    td.className = className;
    row.appendChild(td);
  }
  td.textContent = text;
  return td;
}

/** Fill a table body with one row per message: id, attempts, content type, added, body. */
export function messageRows(tbody, messages) {
  tbody.replaceChildren();
  for (const m of messages) {
    const row = document.createElement("tr");
    const added = m.created_ms ? new Date(m.created_ms).toLocaleTimeString() : "–";
    for (const [name, text] of [["id", m.id], ["attempts", String(m.attempts)],
      ["type", m.content_type], ["added", added], ["body", decode(m.body)]]) {
      cell(row, name, text);
    }
    tbody.appendChild(row);
  }
}
