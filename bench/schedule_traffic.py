"""The traffic of bench/schedule_lateness.py: the two fills (the store's own calls with no
daemon running, or concurrent POST ?at=DUE), the long-polling consumers, and the PATCH that
holds fetched messages for 12 h so that none comes back during the run.
"""

import asyncio
import time

from harness import AsyncClient as Http

from mq import store as fmt
from mq.ids import new_id

QUEUE = "sched"
HOLD_TIMEOUT = 12 * 3600.0  # the queue's visibility timeout: no redelivery during the run


# -- fills ------------------------------------------------------------------------------------

def store_fill(root, dues):
    """Write every delayed message with the store's own calls, one flush at the end."""
    store = fmt.Store(root, sync="fs")
    store.init()
    ids = {}
    for due in dues:
        message_id = new_id()
        data = fmt.encode_message(f"{due:.6f}".encode(), "text/plain", int(time.time() * 1000),
                                  message_id)
        store.write_new(QUEUE, message_id, data, due)
        store.states.deliver_new(QUEUE, message_id, delayed=True)
        ids[message_id] = due
    store.flush({store.folder("new"), store.folder("delay"), store.folder("queues")})
    return ids


async def http_fill(port, dues, producers):
    """POST every message with ?at=DUE from `producers` concurrent connections."""
    ids, todo = {}, list(dues)
    errors = []

    async def producer():
        conn = await Http(port).open()
        try:
            while todo:
                due = todo.pop()
                status, hdrs, _ = await conn.request(
                    "POST", f"/{QUEUE}/messages?at={due:.6f}", f"{due:.6f}".encode(),
                    {"Content-Type": "text/plain"})
                if status == 503:  # an actor still connecting at start: try again
                    todo.append(due)
                    errors.append(status)
                    await asyncio.sleep(0.1)
                    continue
                if status != 201:
                    errors.append(status)
                    continue
                ids[hdrs["x-message-id"]] = due
        finally:
            conn.close()

    await asyncio.gather(*(producer() for _ in range(producers)))
    return ids, errors


# -- consumers ----------------------------------------------------------------------------------

async def consume(port, consumers, expected, deadline, got, statuses):
    """`consumers` connections long-polling until `expected` messages are in `got` or deadline."""
    done = asyncio.Event()

    async def consumer():
        conn = await Http(port).open()
        try:
            while not done.is_set():
                status, hdrs, body = await conn.request("GET", f"/{QUEUE}/messages?wait=20")
                now = time.time()
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200:
                    got[hdrs["x-message-id"]] = (now, float(body))
                    if len(got) >= expected:
                        done.set()
        finally:
            conn.close()

    tasks = [asyncio.ensure_future(consumer()) for _ in range(consumers)]
    try:
        await asyncio.wait_for(done.wait(), max(1.0, deadline - time.time()))
    except TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def set_timeout(port):
    """PATCH the queue's timeout to 12 h; retry while the actors are still connecting (503)."""
    deadline = time.time() + 30
    while True:
        conn = await Http(port).open()
        status, _, body = await conn.request("PATCH", f"/{QUEUE}/properties",
                                             f'{{"timeout": {HOLD_TIMEOUT}}}'.encode(),
                                             {"Content-Type": "application/json"})
        conn.close()
        if status == 200:
            return
        if status != 503 or time.time() > deadline:
            raise RuntimeError(f"PATCH properties: {status} {body!r}")
        await asyncio.sleep(0.2)
