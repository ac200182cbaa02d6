"""The digests SQS sends with a message, computed as SQS computes them (SDKs check them)."""

import hashlib
import struct

_LENGTH = struct.Struct(">I")
#: The transport type byte of a value: 1 for text (String, Number), 2 for Binary.
STRING_TYPE, BINARY_TYPE = 1, 2


def md5_of_body(body: str) -> str:
    """MD5OfMessageBody: the hex MD5 of the body's UTF-8 bytes."""
    return hashlib.md5(body.encode("utf-8")).hexdigest()


def _with_length(digest, data: bytes) -> None:
    digest.update(_LENGTH.pack(len(data)))
    digest.update(data)


def md5_of_attributes(attributes: dict) -> str:
    """MD5OfMessageAttributes (and ...SystemAttributes): for each attribute in name order, the
    length-prefixed name, the length-prefixed data type, the transport type byte and the
    length-prefixed value (UTF-8 text, or the raw bytes of a binary one).

    attributes: name -> {"DataType", "StringValue" or "BinaryValue" (bytes)}.
    """
    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        _with_length(digest, name.encode("utf-8"))
        _with_length(digest, value["DataType"].encode("utf-8"))
        if value.get("StringValue") is not None:
            digest.update(bytes([STRING_TYPE]))
            _with_length(digest, value["StringValue"].encode("utf-8"))
        else:
            digest.update(bytes([BINARY_TYPE]))
            _with_length(digest, value["BinaryValue"])
    return digest.hexdigest()
