"""export: a queue to JSON lines (stdout or a file) or to a folder of one file per message.

By default it only reads (peek pages after the last id), so the queue is left as it was and
only messages ready at the time are written. --consume claims messages a batch at a time,
writes them, makes the output durable, then acknowledges them: a crash at any point leaves a
message in the queue, in the output, or (delivered again later) in both, never in neither.
Durable means fsync'd for a file or a folder; a pipe only gets the records flushed to it.
"""

import os
import stat
import sys
import time
from itertools import islice

from mq.client import Message
from mq.ctl.errors import FAILED, OK, CtlError
from mq.ctl.progress import bar, wanted
from mq.ctl.records import print_json, to_line
from mq.ctl.scan import ready_after
from mq.ids import is_id

#: Most messages claimed before they are written and acknowledged (--consume).
BATCH = 200


def fsync_path(path: str) -> None:
    """Flush a file or a folder's names to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LineSink:
    """Records as JSON lines on a binary stream: standard output or a file."""

    def __init__(self, stream, path: str | None):
        self.stream, self.path = stream, path
        # fsync means something for a regular file only (not /dev/stdout, a FIFO, a terminal).
        self.durable = path is not None and stat.S_ISREG(os.fstat(stream.fileno()).st_mode)

    def write(self, message) -> None:
        """Append one record."""
        self.stream.write(to_line(message))

    def sync(self) -> None:
        """Make what was written durable (anything else than a file only gets it flushed)."""
        self.stream.flush()
        if self.durable:
            os.fsync(self.stream.fileno())

    def close(self) -> None:
        """Close the file; standard output stays open."""
        if self.path is None:
            self.stream.flush()
        else:
            self.stream.close()


class FolderSink:
    """One file per message, named by its id, holding its body."""

    def __init__(self, folder: str):
        self.folder = folder
        self.unsynced: list[str] = []
        os.makedirs(folder, exist_ok=True)

    def write(self, message) -> None:
        """Write a message's file, whole or not at all."""
        if not is_id(message.id):  # The id becomes a file name: no path may hide in it.
            raise CtlError(f"message id {message.id!r} is not an id", FAILED)
        path = os.path.join(self.folder, message.id)
        # A hidden temporary name, renamed when complete: load skips hidden files, so a cut
        # export never loads a truncated body.
        part = os.path.join(self.folder, f".{message.id}.part")
        with open(part, "wb") as f:
            f.write(message.body)
        os.replace(part, path)
        self.unsynced.append(path)

    def sync(self) -> None:
        """Make every file written so far, and its name, durable."""
        for path in self.unsynced:
            fsync_path(path)
        fsync_path(self.folder)
        self.unsynced.clear()

    def close(self) -> None:
        """Nothing stays open between files."""


def open_sink(args):
    """Where the records go: --folder, --output, or standard output."""
    if args.folder is not None and args.output is not None:
        raise CtlError("give --output or --folder, not both")
    if args.folder is None and args.output in (None, "-"):
        return LineSink(sys.stdout.buffer, None)
    target = args.folder if args.folder is not None else args.output
    try:
        if args.folder is not None:
            return FolderSink(args.folder)
        return LineSink(open(args.output, "wb"), args.output)
    except OSError as err:
        raise CtlError(f"cannot write {target}: {err.strerror}") from None


def copied(client, queue: str, sink, limit: int | None):
    """Write the messages ready now without claiming any; yield 1 per message."""
    for message in islice(ready_after(client, queue), limit):
        sink.write(message)
        yield 1
    sink.sync()


def consumed(client, queue: str, sink, limit: int | None, timeout: float):
    """Claim, write, sync, then acknowledge a batch at a time; yield each batch's size.

    A batch stops growing after a quarter of the queue's redelivery timeout, so that its
    receipts are still valid when they are acknowledged.
    """
    left = limit
    while left is None or left > 0:
        want = BATCH if left is None else min(BATCH, left)
        claimed: list[Message] = []
        started = time.monotonic()
        while len(claimed) < want and (not claimed or time.monotonic() - started < timeout / 4):
            message = client.get(queue)
            if message is None:
                break
            claimed.append(message)
        if not claimed:
            return
        for message in claimed:
            sink.write(message)
        sink.sync()
        for message in claimed:
            client.ack(message)
        yield len(claimed)
        if left is not None:
            left -= len(claimed)


def export(client, args) -> int:
    """Write a queue's messages as records or files; print a summary unless stdout is the output."""
    state = client.stat(args.queue)  # A missing queue fails here, before any file is made.
    total = state["ready"] if args.max is None else min(state["ready"], args.max)
    sink = open_sink(args)
    to_stdout = isinstance(sink, LineSink) and sink.path is None
    exported = 0
    try:
        if args.consume:
            steps = consumed(client, args.queue, sink, args.max, state["properties"]["timeout"])
        else:
            steps = copied(client, args.queue, sink, args.max)
        with bar(total, f"export {args.queue}", wanted(data_on_stdout=to_stdout)) as progress:
            for count in steps:
                exported += count
                progress.update(count)
    finally:
        sink.close()
    if not to_stdout:
        print_json({"queue": args.queue, "exported": exported, "consumed": args.consume,
                    "to": args.folder or args.output})
    return OK
