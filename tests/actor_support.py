"""Actors served in-process on a real temporary root: no sockets, the batch loop as it runs."""

from mq.actors.batch import Request
from mq.actors.fetch import FetchActor
from mq.actors.save import SaveActor
from mq.config import Options
from mq.store import Disk, Store


class Actors:
    """A root with save actors and a fetch actor sharing one Store (and so one Disk)."""

    def __init__(self, tmp_path, disk: Disk | None = None, timeout: float = 30.0, **options):
        self.root = str(tmp_path / "root")
        self.run_dir = str(tmp_path / "run")
        self.disk = disk or Disk("fs")
        self.store = Store(self.root, self.disk.sync, disk=self.disk)
        armed = getattr(self.disk, "armed", None)
        if armed is not None:
            self.disk.armed = False  # A failing disk fails what the test does, not the set-up.
        self.store.init()
        if armed is not None:
            self.disk.armed = armed
        self.options = Options(root=self.root, workers=1, timeout=timeout, sync=self.disk.sync,
                               **options)
        self.save = SaveActor(self.options, 0, self.run_dir, self.store)
        self.fetcher = FetchActor(self.options, 0, self.run_dir, self.store)

    def saver(self, index: int) -> SaveActor:
        """Another save actor of the same daemon (a restarted one, or a sibling)."""
        return SaveActor(self.options, index, self.run_dir, self.store)

    def add(self, *adds: dict, actor: SaveActor | None = None) -> list:
        """One batch of adds ({"queue", "body", ...}); the result of each."""
        return (actor or self.save).handle([request("add", **a) for a in adds]).results

    def call(self, op: str, **fields):
        """One request to the fetch actor; its result (a dict or an MqError)."""
        return self.fetcher.handle([request(op, **fields)]).results[0]


def request(op: str, **fields) -> Request:
    """A request as the loop decodes it, with a peer and request id."""
    return Request(b"peer", b"\x00" * 7 + b"\x01", dict(fields, op=op, v=1))
