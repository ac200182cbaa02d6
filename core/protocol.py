"""The ZeroMQ frames between the front, the actors and the mover: built and parsed only here.

See docs/PROTOCOL.md. A request travels DEALER -> ROUTER as [request_id, payload]; the ROUTER
side sees [peer, request_id, payload] and answers [peer, request_id, payload]. A request whose
id is empty is a notification and gets no answer. Payloads are msgpack maps with "v" = VERSION.
"""

import struct
import zlib

import msgpack

from mq.errors import MqError, from_value

#: Version of the frame layout; a peer that sees another version answers "invalid".
VERSION = 1

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


def encode_notification(request) -> list[bytes]:
    """Frames of a one-way message (no reply is sent)."""
    return encode_request(b"", request)


def decode_request(frames: list[bytes]) -> tuple[bytes, bytes, dict]:
    """(peer, request_id, payload) of what a ROUTER received."""
    if len(frames) != 3:
        raise ValueError(f"expected 3 frames, got {len(frames)}")
    payload = msgpack.unpackb(frames[2], raw=False)
    if not isinstance(payload, dict) or payload.get("v") != VERSION:
        raise ValueError("unsupported protocol version")
    return frames[0], frames[1], payload


def encode_reply(peer: bytes, rid: bytes, result: dict | MqError) -> list[bytes]:
    """Frames a ROUTER sends back: an ok result, or an error as a value."""
    if isinstance(result, MqError):
        payload = {"v": VERSION, "ok": False, "error": result.to_value()}
    else:
        payload = {"v": VERSION, "ok": True, **result}
    return [peer, rid, msgpack.packb(payload, use_bin_type=True)]


def decode_reply(frames: list[bytes]) -> tuple[bytes, dict | MqError]:
    """(request_id, result or error) of what a DEALER received."""
    rid, payload = frames[0], msgpack.unpackb(frames[1], raw=False)
    if not payload.get("ok"):
        return rid, from_value(payload.get("error", {}))
    return rid, payload


def fetch_actor_for(queue: str, workers: int) -> int:
    """Which fetch actor owns a queue: a stable hash of its name modulo the worker count."""
    return zlib.crc32(queue.encode()) % workers
