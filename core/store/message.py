"""The message file: magic, header length, msgpack header, body (docs/FORMAT.md)."""

import hashlib
import struct
import zlib
from dataclasses import dataclass

import msgpack

#: First bytes of every message file: "MQ" and the file-format version.
MAGIC = b"MQ\x01"
#: Default content type of a message added without one.
DEFAULT_CONTENT_TYPE = "application/octet-stream"
_LENGTH = struct.Struct(">I")


class CorruptMessage(ValueError):
    """Raised when a file's bytes are not a message file."""


@dataclass
class Message:
    """A message as read from its file."""

    queue: str
    id: str
    body: bytes
    content_type: str
    created_ms: int
    dedup_digest: str = ""
    parts: int = 0  # a compound message's number of parts (docs/FORMAT.md); 0 for others
    group: str = ""
    attributes: dict | None = None


def dedup_digest(key: str) -> str:
    """The file name a de-duplication key is recorded under (any key fits a name)."""
    return hashlib.sha256(key.encode()).hexdigest()[:40]


def encode_message(body: bytes, content_type: str, created_ms: int, message_id: str = "",
                   dedup_key: str = "", writer: str = "", parts: int = 0, group: str = "",
                   attributes: dict | None = None) -> bytes:
    """The bytes of a message file: magic, header length, msgpack header, body.

    writer names the save actor that wrote it, so that one restarted after a crash can tell
    its predecessor's leftovers in new/ from the work of live actors. parts marks a compound
    message (docs/FORMAT.md, "Accumulation"). group is the message group (a queue with the
    fifo property hands out one message of a group at a time); attributes are a protocol
    layer's metadata (the SQS API's message attributes), kept as given. The body's length and
    CRC-32 let a reader tell a whole file from one a power cut tore (docs/FORMAT.md).
    """
    header = {"ct": content_type, "t": created_ms, "n": len(body), "c": zlib.crc32(body)}
    if message_id:
        header["id"] = message_id
    if dedup_key:
        header["dk"] = dedup_digest(dedup_key)
    if writer:
        header["w"] = writer
    if parts:
        header["p"] = parts
    if group:
        header["g"] = group
    if attributes:
        header["a"] = attributes
    packed = msgpack.packb(header)
    return MAGIC + _LENGTH.pack(len(packed)) + packed + body


def decode_header(queue: str, message_id: str, data: bytes) -> tuple[dict, int]:
    """(header, offset of the body) of a message file's bytes; CorruptMessage when not one."""
    if data[:3] != MAGIC or len(data) < 7:
        raise CorruptMessage(f"{queue}/{message_id}: not an mq message file")
    (length,) = _LENGTH.unpack(data[3:7])
    if 7 + length > len(data):
        raise CorruptMessage(f"{queue}/{message_id}: header runs past the end of the file")
    try:
        header = msgpack.unpackb(data[7:7 + length])
    except Exception as err:  # msgpack raises several unrelated types for bad input.
        raise CorruptMessage(f"{queue}/{message_id}: bad header: {err}") from None
    if (not isinstance(header, dict) or not isinstance(header.get("ct"), str)
            or not isinstance(header.get("t"), int) or not isinstance(header.get("dk", ""), str)
            or not isinstance(header.get("p", 0), int)
            or not isinstance(header.get("g", ""), str) or not isinstance(header.get("a", {}), dict)
            or not isinstance(header.get("n", 0), int) or not isinstance(header.get("c", 0), int)):
        raise CorruptMessage(f"{queue}/{message_id}: header is not a message header")
    if header.get("id", message_id) != message_id:
        # Another message's file: a spare being written again, or a misnamed file.
        raise CorruptMessage(f"{queue}/{message_id}: the file holds message {header['id']!r}")
    return header, 7 + length


def decode_message(queue: str, message_id: str, data: bytes) -> Message:
    """Parse a message file's bytes; raise CorruptMessage when they are not one, or when its
    body is not the length or the CRC-32 its header records (a file torn by a power cut)."""
    header, start = decode_header(queue, message_id, data)
    body = data[start:]
    if "n" in header and len(body) != header["n"]:
        raise CorruptMessage(f"{queue}/{message_id}: the body is {len(body)} bytes, its header "
                             f"says {header['n']}")
    if "c" in header and zlib.crc32(body) != header["c"]:
        raise CorruptMessage(f"{queue}/{message_id}: the body does not match its CRC-32")
    return Message(queue, message_id, body, header["ct"], header["t"], header.get("dk", ""),
                   header.get("p", 0), header.get("g", ""), header.get("a"))
