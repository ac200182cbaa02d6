"""load: messages into a queue from export's JSON lines, a folder of files, or plain lines.

Messages go in batches (up to BATCH_MESSAGES per request, each stored all or none), in input
order. The input is read as it is loaded, so a bad record stops the load where it is: the error names
its line and how many messages went in before it. --dedup makes a retried load add nothing
twice (within the queue's de-duplication window) by using each record's id, or each file's
name, as the de-duplication key.
"""

import os
import stat
import sys

from mq.ctl.errors import OK, CtlError, describe, status_of
from mq.ctl.progress import bar, wanted
from mq.ctl.records import Item, from_line, print_json

#: The content type of messages read as plain lines, unless --content-type says otherwise.
LINES_TYPE = "text/plain"
#: Messages sent in one request (a batch add: stored all or none, one flush for all).
BATCH_MESSAGES = 100
#: Bytes of bodies after which a batch is sent even when it has fewer messages.
BATCH_BYTES = 4 << 20


def nonblank_lines(stream):
    """(line number, line without its newline) for each line that holds more than blanks."""
    for number, line in enumerate(stream, 1):
        line = line.rstrip(b"\n")
        if line.strip():
            yield number, line


def folder_items(folder: str, names: list[str]):
    """One Item per file: its body, its name as id."""
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            yield Item(f.read(), None, name)


def line_items(stream, label: str, plain: bool):
    """One Item per non-blank line: the line itself (plain), else the record it holds."""
    for number, line in nonblank_lines(stream):
        yield Item(line.rstrip(b"\r")) if plain else from_line(line, f"{label} line {number}")


def open_input(args, count: bool):
    """(the items to load, how many there are or None, the stream to close or None).

    count: read a file once more to know how many (for the progress bar's ETA).
    """
    source = args.input
    if source != "-" and os.path.isdir(source):
        if args.lines:
            raise CtlError(f"--lines reads a file or standard input; {source} is a folder")
        # Hidden files are export's half-written temporaries; ids sort by the time of the add.
        names = sorted(name for name in os.listdir(source) if not name.startswith(".")
                       and os.path.isfile(os.path.join(source, name)))
        return folder_items(source, names), len(names), None
    if source == "-":
        return line_items(sys.stdin.buffer, "stdin", args.lines), None, None
    try:
        stream = open(source, "rb")
    except OSError as err:
        raise CtlError(f"cannot read {source}: {err.strerror}") from None
    total = None
    if count and stat.S_ISREG(os.fstat(stream.fileno()).st_mode):  # A FIFO is read only once.
        total = sum(1 for _ in nonblank_lines(stream))
        stream.seek(0)
    return line_items(stream, source, args.lines), total, stream


def batches(items):
    """The items in lists of up to BATCH_MESSAGES (or BATCH_BYTES); when reading the input
    fails, the list read before the failure comes first, then the error."""
    pending: list = []
    size, source = 0, iter(items)
    while True:
        try:
            item = next(source)
        except StopIteration:
            break
        except Exception:
            if pending:
                yield pending
            raise
        pending.append(item)
        size += len(item.body)
        if len(pending) >= BATCH_MESSAGES or size >= BATCH_BYTES:
            yield pending
            pending, size = [], 0
    if pending:
        yield pending


def add_batch(client, queue: str, messages: list[dict]) -> None:
    """One batch add over HTTP; the broker-less client, which has no batch, adds one by one."""
    if hasattr(client, "add_many"):
        client.add_many(queue, messages)
        return
    for message in messages:
        client.put(queue, message.pop("body"), **message)


def load(client, args) -> int:
    """Add every message of the input to the queue, in input order; print how many."""
    show = wanted(data_on_stdout=False)
    items, total, stream = open_input(args, count=show)
    default_type = LINES_TYPE if args.lines else None
    loaded = 0
    try:
        with bar(total, f"load {args.queue}", show) as progress:
            for batch in batches(items):
                add_batch(client, args.queue, [
                    {"body": item.body,
                     "content_type": args.content_type or item.content_type or default_type,
                     "dedup_id": item.id if args.dedup else None} for item in batch])
                loaded += len(batch)
                progress.update(len(batch))
    except Exception as err:
        if not loaded:
            raise
        raise CtlError(f"{describe(err)}; {loaded} loaded before it", status_of(err)) from err
    finally:
        if stream is not None:
            stream.close()
    print_json({"queue": args.queue, "loaded": loaded})
    return OK
