"""Telling the daemons on this host about messages the pipeline put in a root (best effort).

A daemon learns of messages it did not store itself only by re-listing: a fetch actor
re-lists a queue whose index is empty (every 0.5 s at most), the mover lists delay/ when it
starts. These notifications, the same one-way ZeroMQ frames the front and the fetch actors
send (docs/PROTOCOL.md), make new messages servable at once when the daemon runs on the
host where the Spark driver commits. Nothing is lost when one is dropped.
"""

import os

import zmq

from mq import protocol
from mq import store as fmt
from mq.operations import Delayed, Ready
from mq.store.root import actor_endpoint, ipc_dir_of, mover_endpoint, socket_path

#: Ids per "ready" notification frame.
CHUNK = 5000
#: Milliseconds a socket may take to hand queued notifications over before it is dropped.
LINGER_MS = 2000
#: Most fetch actors probed for in a daemon's run folder (the daemon's --workers limit).
MAX_WORKERS = 256


def fetch_actor_count(run_dir: str) -> int:
    """How many fetch actors a daemon runs: its fetch-{i}.sock files, counted from 0."""
    count = 0
    while count < MAX_WORKERS and os.path.exists(socket_path(actor_endpoint(run_dir, "fetch", count))):
        count += 1
    return count


def tell_daemons(store: fmt.Store, ready: dict[str, list[tuple[str, int]]],
                 delayed: list[tuple[str, str, int, float]]) -> int:
    """Send "ready" ids to each queue's fetch actor and "delayed" entries to the mover of
    every daemon with a run folder under the root; return how many daemons were told."""
    told = 0
    context: zmq.Context = zmq.Context.instance()
    for run_dir in map(ipc_dir_of, store.daemon_dirs()):
        workers = fetch_actor_count(run_dir)
        if not workers:
            continue
        sockets: list[zmq.Socket] = []
        try:
            fetchers = [_dealer(context, actor_endpoint(run_dir, "fetch", i), sockets)
                        for i in range(workers)]
            for queue, ids in ready.items():
                owner = fetchers[protocol.fetch_actor_for(queue, workers)]
                for start in range(0, len(ids), CHUNK):
                    chunk = [[i, a] for i, a in ids[start:start + CHUNK]]
                    _send(owner, protocol.encode_notification(Ready(queue=queue, ids=chunk)))
            if delayed and os.path.exists(socket_path(mover_endpoint(run_dir))):
                mover = _dealer(context, mover_endpoint(run_dir), sockets)
                for queue, message_id, attempts, due in delayed:
                    _send(mover, protocol.encode_notification(
                        Delayed(queue=queue, id=message_id, attempts=attempts, due=due)))
            told += 1
        finally:
            for sock in sockets:
                sock.close()  # Lingers up to LINGER_MS to hand the frames over.
    return told


def _dealer(context: zmq.Context, endpoint: str, sockets: list[zmq.Socket]) -> zmq.Socket:
    sock = context.socket(zmq.DEALER)
    sock.linger = LINGER_MS
    sock.sndhwm = 0  # Queue every frame until the connection is up.
    sock.connect(endpoint)
    sockets.append(sock)
    return sock


def _send(sock: zmq.Socket, frames: list[bytes]) -> None:
    try:
        sock.send_multipart(frames, zmq.NOBLOCK)
    except zmq.Again:
        pass  # The daemon re-lists the queue (or delay/) by itself in time.
