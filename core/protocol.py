"""The ZeroMQ frames between the front, the actors and the mover: built and parsed only here.

See docs/PROTOCOL.md. A request travels DEALER -> ROUTER as [request_id, payload]; the ROUTER
side sees [peer, request_id, payload] and answers a batch's requests from one peer in one
message, [peer, [[request_id, payload], ...]]. A request whose
id is empty is a notification and gets no answer. Payloads are msgpack maps with "v" = VERSION.
"""

import struct
import zlib

import msgpack

from mq.errors import MqError, from_value

#: Version of the frame layout; a peer that sees another version answers "invalid".
VERSION = 2

_counter = struct.Struct(">Q")


def request_id(number: int) -> bytes:
    """The 8-byte id frame of the n-th request a client sends."""
    return _counter.pack(number)


def encode_request(rid: bytes, request) -> list[bytes]:
    """Frames a DEALER sends, [request_id, payload], for a request of mq.operations: its
    fields, "v" and its "op"."""
    payload = request.to_payload()
    payload["v"] = VERSION
    payload["op"] = request.op
    return [rid, msgpack.packb(payload, use_bin_type=True)]


def _request_payload(request, deadline: float | None = None) -> dict:
    payload = request.to_payload()
    payload["v"] = VERSION
    payload["op"] = request.op
    if deadline is not None:
        payload["deadline"] = deadline
    return payload


def encode_requests(requests: list) -> list[bytes]:
    """The one frame a DEALER sends for several (request_id, request) pairs, or (request_id,
    request, deadline) triples, at once, a msgpack array of [request_id, payload]: the front
    sends the requests one turn of its event loop made for an actor together, one ZeroMQ
    send instead of one each (bench/RESULTS.md). A deadline (the host's monotonic clock, in
    seconds) is when the sender stops waiting: a save actor refuses what is past it, and
    stores no add a commit would end after it (actors/pace.py)."""
    return [msgpack.packb([[sent[0], _request_payload(*sent[1:])] for sent in requests],
                          use_bin_type=True)]


def encode_notification(request) -> list[bytes]:
    """Frames of a one-way message (no reply is sent)."""
    return encode_request(b"", request)


def decode_request(frames: list[bytes]) -> tuple[bytes, bytes, dict]:
    """(peer, request_id, payload) of what a ROUTER received as one request."""
    if len(frames) != 3:
        raise ValueError(f"expected 3 frames, got {len(frames)}")
    payload = msgpack.unpackb(frames[2], raw=False)
    if not isinstance(payload, dict) or payload.get("v") != VERSION:
        raise ValueError("unsupported protocol version")
    return frames[0], frames[1], payload


def decode_requests(frames: list[bytes]) -> list[tuple[bytes, bytes, dict | ValueError]]:
    """(peer, request_id, payload) of each request a ROUTER received: one, as three frames,
    or several, as [peer, array of [request_id, payload]] (encode_requests). A pair whose
    payload is not a map of this version comes with a ValueError in its place, so that its
    request alone is answered "invalid"; a message that is neither raises ValueError."""
    if len(frames) == 3:
        return [decode_request(frames)]
    if len(frames) != 2:
        raise ValueError(f"expected 2 or 3 frames, got {len(frames)}")
    pairs = msgpack.unpackb(frames[1], raw=False)
    if not isinstance(pairs, list):
        raise ValueError("requests must be an array")
    out: list[tuple[bytes, bytes, dict | ValueError]] = []
    for pair in pairs:
        if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], bytes):
            raise ValueError("each request must be [request_id, payload]")
        rid, payload = pair
        if not isinstance(payload, dict) or payload.get("v") != VERSION:
            out.append((frames[0], rid, ValueError("unsupported protocol version")))
        else:
            out.append((frames[0], rid, payload))
    return out


#: Bodies, in bytes, past which a reply message takes no more replies (a batch of fetches of
#: large messages is split over several messages rather than built as one).
REPLY_BYTES = 1 << 20


def _reply_payload(result: dict | MqError) -> dict:
    if isinstance(result, MqError):
        return {"v": VERSION, "ok": False, "error": result.to_value()}
    return {"v": VERSION, "ok": True, **result}


def encode_replies(peer: bytes, replies: list) -> list[list[bytes]]:
    """The messages a ROUTER sends back for (request_id, result or MqError) pairs to one peer:
    each [peer, msgpack array of [request_id, payload] pairs], as few as REPLY_BYTES allows.

    A batch answers its requests together, and one message for all of them spares a send
    (and a wake-up of ZeroMQ's I/O threads) per request on both sides (bench/RESULTS.md).
    """
    messages: list[list[bytes]] = []
    pairs: list = []
    size = 0
    for rid, result in replies:
        if pairs and size >= REPLY_BYTES:
            messages.append([peer, msgpack.packb(pairs, use_bin_type=True)])
            pairs, size = [], 0
        pairs.append([rid, _reply_payload(result)])
        if isinstance(result, dict):
            size += len(result.get("body") or b"")
    if pairs:
        messages.append([peer, msgpack.packb(pairs, use_bin_type=True)])
    return messages


def encode_reply(peer: bytes, rid: bytes, result: dict | MqError) -> list[bytes]:
    """Frames a ROUTER sends back for one request: an ok result, or an error as a value."""
    return [peer, msgpack.packb([[rid, _reply_payload(result)]], use_bin_type=True)]


def decode_replies(frames: list[bytes]) -> list[tuple[bytes, dict | MqError]]:
    """(request_id, result or error) of each reply in what a DEALER received."""
    if len(frames) != 1:
        raise ValueError(f"expected 1 frame, got {len(frames)}")
    pairs = msgpack.unpackb(frames[0], raw=False)
    if not isinstance(pairs, list):
        raise ValueError("replies must be an array")
    out: list[tuple[bytes, dict | MqError]] = []
    for rid, payload in pairs:
        if not payload.get("ok"):
            out.append((rid, from_value(payload.get("error", {}))))
        else:
            out.append((rid, payload))
    return out


def fetch_actor_for(queue: str, workers: int) -> int:
    """Which fetch actor owns a queue: a stable hash of its name modulo the worker count."""
    return zlib.crc32(queue.encode()) % workers
