"""W3C trace context (`traceparent`, `tracestate`) kept with a message: read from an add,
stored in the message header's `a` map (keys `tp`, `ts`: docs/FORMAT.md), given back with every
fetch, and translated to and from the SQS API's `AWSTraceHeader` (AWS X-Ray's form), so a trace
crosses the queue whichever API each side uses. The daemon's fronts and mq.local, which writes
and reads the root itself, store and read it by these same functions."""

import re

#: Longest traceparent kept, in characters: 55 for version 00; a later version's further
#: fields within it. Both values go back as reply headers, so they are bounded and printable.
MAX_TRACEPARENT = 512
#: traceparent: version, 32 hex of trace id, 16 hex of parent id, 2 hex of flags, and, after a
#: version other than 00, possibly more fields (W3C Trace Context, level 1), printable ASCII
#: without spaces (a header value must not hold a control character).
TRACEPARENT = re.compile(r"(?P<version>[0-9a-f]{2})-(?P<trace>[0-9a-f]{32})-"
                         r"(?P<parent>[0-9a-f]{16})-(?P<flags>[0-9a-f]{2})"
                         r"(?P<rest>-[\x21-\x7e]*)?")
#: tracestate: printable ASCII, at most the 512 characters every implementation must carry.
TRACESTATE = re.compile(r"[\x20-\x7e]{1,512}")
#: AWSTraceHeader: Root=1-{8 hex time}-{24 hex}; Parent={16 hex}; Sampled=0|1 (any order).
XRAY_ROOT = re.compile(r"1-([0-9a-f]{8})-([0-9a-f]{24})")
STORED = {"traceparent": "tp", "tracestate": "ts"}
#: The headers (and JSON record fields) a fetched message's trace context is answered in.
HEADERS = tuple(STORED)


def parse(traceparent: str | None, tracestate: str | None = None) -> dict:
    """The `a` entries of a message's trace context ({} when there is none). A traceparent that
    does not parse is ignored, with its tracestate, as W3C Trace Context has receivers do; a
    tracestate that does not parse is dropped alone."""
    if not isinstance(traceparent, str) or len(traceparent.strip()) > MAX_TRACEPARENT:
        return {}
    value = traceparent.strip().lower()
    found = TRACEPARENT.fullmatch(value)
    if (found is None or found["version"] == "ff" or set(found["trace"]) == {"0"}
            or set(found["parent"]) == {"0"} or (found["version"] == "00" and found["rest"])):
        return {}
    stored = {"tp": value}
    if isinstance(tracestate, str) and TRACESTATE.fullmatch(tracestate.strip()):
        stored["ts"] = tracestate.strip()
    return stored


def well_formed(attributes: dict) -> bool:
    """Whether the trace context of an `a` map (`tp`, `ts`; either may be absent) is as parse
    keeps it: an add's check (mq.adds), so that no writer stores one a fetch cannot send."""
    given = {key: attributes[key] for key in STORED.values() if key in attributes}
    return not given or parse(given.get("tp"), given.get("ts")) == given


def of_message(attributes: dict | None) -> dict:
    """{"traceparent", "tracestate"} of a fetched message's `a` map (either may be absent): its
    own, else the one its AWSTraceHeader (sent through the SQS API) carries. The stored one is
    read by parse again, so that one a writer stored unchecked (an older mq) is left out, not
    sent as a header no reply may carry."""
    attributes = attributes or {}
    if attributes.get("tp"):
        stored = parse(attributes.get("tp"), attributes.get("ts"))
        return {name: stored[key] for name, key in STORED.items() if key in stored}
    header = ((attributes.get("s") or {}).get("AWSTraceHeader") or {}).get("StringValue")
    traceparent = from_xray(header)
    return {"traceparent": traceparent} if traceparent else {}


def from_xray(header: str | None) -> str | None:
    """The traceparent of an X-Ray trace header (None without a Root and a Parent)."""
    if not isinstance(header, str):
        return None
    fields = dict(part.strip().partition("=")[::2] for part in header.split(";") if "=" in part)
    root = XRAY_ROOT.fullmatch(fields.get("Root", "").lower())
    parent = fields.get("Parent", "").lower()
    if root is None or not re.fullmatch(r"[0-9a-f]{16}", parent) or set(parent) == {"0"}:
        return None
    return f"00-{root[1]}{root[2]}-{parent}-{'01' if fields.get('Sampled') == '1' else '00'}"


def to_xray(traceparent: str) -> str:
    """The X-Ray trace header of a traceparent (parse's `tp`)."""
    _, trace, parent, flags = traceparent.split("-")[:4]
    sampled = int(flags, 16) & 1
    return f"Root=1-{trace[:8]}-{trace[8:]};Parent={parent};Sampled={sampled}"
