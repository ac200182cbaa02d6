"""Stream manifests: streams/{consumer}/{seq}.json, the messages one micro-batch claimed."""

import os

import orjson

from mq.store.disk import Disk
from mq.store.names import validate_queue
from mq.store.root import Root


class Streams:
    """The manifests of Spark streaming reads: a member of Store (store.streams), given the
    root's paths and its Disk."""

    def __init__(self, paths: Root, disk: Disk):
        self.paths = paths
        self.disk = disk

    def stream_folder(self, consumer: str) -> str:
        """{root}/streams/{consumer}: the batch manifests of one streaming consumer."""
        return self.paths.stream_dir(validate_queue(consumer))

    def list_manifests(self, consumer: str) -> list[int]:
        """The batch numbers of a consumer's manifests, in order."""
        try:
            names = os.listdir(self.stream_folder(consumer))
        except FileNotFoundError:
            return []
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def write_manifest(self, consumer: str, seq: int, claimed: list) -> None:
        """Record durably the [queue, id, delivery] triples micro-batch seq claimed."""
        folder = self.stream_folder(consumer)
        if not os.path.isdir(folder):
            if not os.path.isdir(self.paths.folder("streams")):
                self.disk.mkdir(self.paths.folder("streams"))
            self.disk.mkdir(folder)
        self.disk.replace(self.paths.manifest_path(consumer, seq), orjson.dumps(claimed))

    def remove_manifests(self, consumer: str, seqs: list[int]) -> None:
        """Unlink manifests whose batches are acknowledged."""
        for seq in seqs:
            self.disk.unlink(self.paths.manifest_path(consumer, seq))


def load_manifest(path: str) -> list:
    """The [queue, id, delivery] triples a manifest lists."""
    with open(path, "rb") as f:
        return orjson.loads(f.read())
