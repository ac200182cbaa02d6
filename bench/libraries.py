#!/usr/bin/env python3
"""mq's hand-written pieces against the maintained libraries that could replace them: what each
gives back for the edge cases mq must hold, and how fast it is where the piece is on a hot path.

    .venv/bin/python bench/libraries.py [--rounds 2000]

The libraries are not mq's dependencies; those not installed are reported as such
(`.venv/bin/pip install lxml xmltodict tabulate rich tenacity backoff configargparse`; the
otel extra brings OpenTelemetry). docs/ARCHITECTURE.md, "Libraries, and why", holds the
conclusions drawn from this script's figures.

- The SQS query protocol's XML answers (http/sqs/query.py, f-strings and
  xml.sax.saxutils.escape) against xml.etree.ElementTree, lxml and xmltodict: each body read
  back by expat (the parser botocore uses) and compared with what was sent, and the time to
  write one ReceiveMessage answer of 10 messages.
- The traceparent parser (core/trace_context.py) against OpenTelemetry's
  TraceContextTextMapPropagator: what each keeps of the cases tests/frontends/test_stored_values.py
  holds mq to, and the time per parse (one per add that carries a traceparent).
- The client's Retry-After reading (core/client/retry.py) against urllib3's Retry: what each
  makes of the header's forms (tenacity and backoff read no header: they would only replace
  the loop around it).
- Flag/environment/TOML merging (core/config.py) against ConfigArgParse: what it reads of a
  file `mq --print-config` writes.
- mqctl's text table (core/ctl/status.py) against tabulate and rich: the same rows, and the time
  for 10,000 queues (rich for 1,000: it is that much slower).
"""

import argparse
import hashlib
import importlib.util
import io
import logging
import os
import tempfile
import timeit
import xml.etree.ElementTree as ET

from mq import trace_context
from mq.ctl.status import table
from mq.http.sqs import query
from mq.http.sqs.query import ESCAPES, RESULT_LISTS, RESULT_MAPS, XMLNS

#: Bodies an SQS answer must carry: markup, a CDATA end, CR and CR LF, a tab, astral and
#: non-Latin characters, and a control character XML 1.0 cannot carry at all.
BODIES = {
    "markup": "a<b>&amp;c</b>",
    "cdata end": "x]]>y",
    "quotes": "it's \"quoted\"",
    "CR LF": "line\r\nnext\rlast\n",
    "tab": "a\tb",
    "non-BMP": "\U0001f600 \u00e9t\u00e9 \u4e2d",
    "control": "bell\x07",
}


def installed(name: str) -> bool:
    """Whether a module can be imported."""
    return importlib.util.find_spec(name) is not None


def receive_result(bodies: list[str]) -> dict:
    """A ReceiveMessage result in the JSON shape, as http/sqs/receiving.py builds it."""
    return {"Messages": [
        {"MessageId": f"01a2076a-c3ab-7000-914c-3d6642fc8a{n:02d}",
         "ReceiptHandle": f"01a2076a-c3ab-7000-914c-3d6642fc8a{n:02d}.1",
         "MD5OfBody": hashlib.md5(body.encode()).hexdigest(), "Body": body,
         "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "order"}},
         "MD5OfMessageAttributes": "0" * 32,
         "Attributes": {"SenderId": "000000000000", "SentTimestamp": "1795451256663",
                        "ApproximateReceiveCount": "1",
                        "ApproximateFirstReceiveTimestamp": "1795451256700"}}
        for n, body in enumerate(bodies)]}


def tree_members(sub, parent, result: dict) -> None:
    """A result's members under parent, flattened as query.py flattens them, with an
    ElementTree-like API's SubElement."""
    for key, value in result.items():
        if key in RESULT_MAPS and isinstance(value, dict):
            element, key_name, value_name = RESULT_MAPS[key]
            for k, v in value.items():
                entry = sub(parent, element)
                tree_value(sub, entry, key_name, k)
                tree_value(sub, entry, value_name, v)
        elif key in RESULT_LISTS:
            for item in value:
                tree_value(sub, parent, RESULT_LISTS[key], item)
        else:
            tree_value(sub, parent, key, value)


def tree_value(sub, parent, name: str, value) -> None:
    """One element of a result value."""
    node = sub(parent, name)
    if isinstance(value, dict):
        tree_members(sub, node, value)
    else:
        node.text = str(value)


def with_tree(module, result: dict, **options) -> bytes:
    """The answer written by an ElementTree API (xml.etree or lxml.etree)."""
    root = module.Element("ReceiveMessageResponse", xmlns=XMLNS)
    tree_members(module.SubElement, module.SubElement(root, "ReceiveMessageResult"), result)
    meta = module.SubElement(root, "ResponseMetadata")
    module.SubElement(meta, "RequestId").text = "r-1"
    return module.tostring(root, encoding="UTF-8", xml_declaration=True, **options)


def with_xmltodict(result: dict) -> bytes:
    """The answer written by xmltodict.unparse."""
    import xmltodict

    def shaped(value):
        if not isinstance(value, dict):
            return str(value)
        out: dict = {}
        for key, item in value.items():
            if key in RESULT_MAPS and isinstance(item, dict):
                element, key_name, value_name = RESULT_MAPS[key]
                out[element] = [{key_name: k, value_name: shaped(v)} for k, v in item.items()]
            elif key in RESULT_LISTS:
                out[RESULT_LISTS[key]] = [shaped(i) for i in item]
            else:
                out[key] = shaped(item)
        return out

    document = {"ReceiveMessageResponse": {"@xmlns": XMLNS, "ReceiveMessageResult": shaped(result),
                                           "ResponseMetadata": {"RequestId": "r-1"}}}
    return xmltodict.unparse(document, encoding="utf-8").encode()


def xml_writers() -> dict:
    """name -> a function of a result giving the document; those installed."""
    writers = {"mq (f-strings, saxutils.escape)": lambda r: query.encode("ReceiveMessage", r, "r-1"),
               "xml.etree.ElementTree": lambda r: with_tree(ET, r)}
    if installed("lxml"):
        from lxml import etree
        writers["lxml.etree"] = lambda r: with_tree(etree, r)
    if installed("xmltodict"):
        writers["xmltodict.unparse"] = with_xmltodict
    return writers


def read_back(document: bytes) -> str:
    """The first Body of a document as expat (botocore's parser) reads it."""
    found = ET.fromstring(document).find(f".//{{{XMLNS}}}Body")
    return found.text or "" if found is not None else ""


def xml_report(rounds: int) -> None:
    """Each writer's answers to the edge cases, and its time per ReceiveMessage of 10."""
    print("== SQS XML answers: each body read back by expat")
    writers = xml_writers()
    for name, write in writers.items():
        verdicts = []
        for case, body in BODIES.items():
            try:
                back = read_back(write(receive_result([body])))
                verdicts.append(f"{case}: {'ok' if back == body else 'CHANGED ' + repr(back)}")
            except Exception as err:  # noqa: BLE001 - a library's refusal is a finding here
                verdicts.append(f"{case}: {type(err).__name__}")
        print(f"{name}:\n    " + "\n    ".join(verdicts))
    print("== time to write a ReceiveMessage answer of 10 messages (256-character bodies)")
    result = receive_result([f"message {n} " + "x" * 245 for n in range(10)])
    for name, write in writers.items():
        seconds = min(timeit.repeat(lambda write=write: write(result), number=rounds, repeat=3))
        print(f"{name:36} {seconds / rounds * 1e6:8.1f} us")
    _ = ESCAPES  # query.py's one extra escape (CR): the reason the table above differs


TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
V00 = f"00-{TRACE}-{PARENT}-01"
LATER = f"01-{TRACE}-{PARENT}-01-more.fields"
#: (traceparent, tracestate) -> what mq keeps: tests/frontends/test_stored_values.py's cases.
TRACES = [
    ((V00, "congo=t61rcWkgMzE"), (V00, "congo=t61rcWkgMzE")),
    ((LATER, None), (LATER, None)),
    ((LATER + "\r", None), (LATER, None)),
    ((LATER + "-x\ry", "a=b"), (None, None)),
    ((LATER + "-\x00", None), (None, None)),
    ((LATER + " x", None), (None, None)),
    ((LATER + "-" + "a" * 600, None), (None, None)),
    ((V00, "a=b\rc"), (V00, None)),
    ((V00, "a=" + "b" * 600), (V00, None)),
    ((V00, "not a list member"), (V00, "not a list member")),
]


def otel_keeps(traceparent, tracestate):
    """(traceparent, tracestate) OpenTelemetry's propagator would pass on, read and written."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    propagator = TraceContextTextMapPropagator()
    carrier = {"traceparent": traceparent}
    if tracestate is not None:
        carrier["tracestate"] = tracestate
    context = propagator.extract(carrier)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None, None
    out: dict = {}
    propagator.inject(out, context)
    return out.get("traceparent"), out.get("tracestate")


def mq_keeps(traceparent, tracestate):
    """(traceparent, tracestate) mq stores and answers."""
    stored = trace_context.parse(traceparent, tracestate)
    return stored.get("tp"), stored.get("ts")


def trace_report(rounds: int) -> None:
    """What each parser keeps of the cases, and its time per parse."""
    print("== traceparent: what is kept (mq's rule, then each parser's)")
    parsers = {"mq (core/trace_context.py)": mq_keeps}
    if installed("opentelemetry"):
        parsers["opentelemetry TraceContextTextMapPropagator"] = otel_keeps
    for name, keep in parsers.items():
        wrong = [f"{sent!r} -> {keep(*sent)!r} (mq's rule: {want!r})"
                 for sent, want in TRACES if keep(*sent) != want]
        print(f"{name}: {len(TRACES) - len(wrong)}/{len(TRACES)} as mq's rules want")
        for line in wrong:
            print("    " + line[:160])
    print("== time per traceparent read (with a tracestate)")
    for name, keep in parsers.items():
        seconds = min(timeit.repeat(lambda keep=keep: keep(V00, "congo=t61rcWkgMzE"),
                                    number=rounds, repeat=3))
        print(f"{name:44} {seconds / rounds * 1e6:8.2f} us")


#: Retry-After values: delta seconds, a fraction (mq's fronts send whole seconds; a proxy may
#: not), an HTTP date in the past, garbage, a negative number.
RETRY_AFTERS = ["2", "0.5", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "-1"]


def retry_report() -> None:
    """Seconds each reading makes of each Retry-After value."""
    import httpx

    from mq.client.retry import retry_after
    print("== Retry-After: seconds to wait (an error is a refusal of the value)")
    readers = {"mq (core/client/retry.py)":
               lambda v: retry_after(httpx.Response(503, headers={"Retry-After": v}))}
    if installed("urllib3"):
        from urllib3.util import Retry
        readers["urllib3 Retry.parse_retry_after"] = Retry().parse_retry_after
    for name, read in readers.items():
        seen = []
        for value in RETRY_AFTERS:
            try:
                seen.append(f"{value!r}: {read(value):g}")
            except Exception as err:  # noqa: BLE001 - a library's refusal is a finding here
                seen.append(f"{value!r}: {type(err).__name__}")
        print(f"{name}: " + "; ".join(seen))


def config_report() -> None:
    """What ConfigArgParse reads of the TOML file mq --print-config writes (top-level keys)."""
    print("== TOML config: a file as `mq --print-config` writes it (workers = 3)")
    if not installed("configargparse"):
        print("ConfigArgParse: not installed")
        return
    import configargparse
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("workers = 3\n")
    parser = configargparse.ArgParser(
        config_file_parser_class=configargparse.TomlConfigParser(["mq"]))
    parser.add_argument("--config", is_config_file=True)
    parser.add_argument("--workers", type=int, env_var="MQ_WORKERS")
    print(f"ConfigArgParse (TomlConfigParser): workers = {parser.parse_args(['--config', f.name]).workers}"
          " (it reads only the keys of the tables it is given; mq's file has none)")
    os.unlink(f.name)


def table_report() -> None:
    """mqctl's table, tabulate's and rich's: the same rows, and the time for 10,000 queues."""
    print("== mqctl's text table, 10,000 queues of 15 columns (rich: 1,000)")
    rows = [["QUEUE", "READY", "IN FLIGHT", "BYTES", "ADDS/S"]] + \
        [[f"queue-{n}", n, 0, f"{n * 7} B", f"{n / 7:.2f}"] for n in range(10_000)]
    wide = [row * 3 for row in rows]
    makers = {"mq (core/ctl/status.py)": table}
    if installed("tabulate"):
        from tabulate import tabulate
        makers["tabulate (plain, left-aligned)"] = lambda r: tabulate(
            r[1:], headers=r[0], tablefmt="plain", stralign="left", numalign="left",
            disable_numparse=True)
    if installed("rich"):
        from rich.console import Console
        from rich.table import Table

        def with_rich(r):
            out = Console(file=io.StringIO(), width=None, color_system=None)
            grid = Table(*r[0], box=None)
            for row in r[1:]:
                grid.add_row(*map(str, row))
            out.print(grid)
            return out.file.getvalue()
        makers["rich.table (no box, not a terminal)"] = with_rich
    for name, make in makers.items():
        some = wide[:1001] if name.startswith("rich") else wide
        seconds = min(timeit.repeat(lambda make=make, some=some: make(some), number=1, repeat=2))
        first = make(rows[:3]).splitlines()
        widest = max(len(line) for line in make(wide[:3]).splitlines())
        print(f"{name:38} {seconds * 1000:8.1f} ms for {len(some) - 1} rows; 15 columns -> "
              f"lines of {widest} chars; first lines {first[:2]!r}")


def main() -> None:
    """Print every comparison's figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000, help="calls per timing")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # OpenTelemetry logs each traceparent it refuses.
    xml_report(args.rounds)
    trace_report(args.rounds * 10)
    retry_report()
    config_report()
    table_report()


if __name__ == "__main__":
    main()
