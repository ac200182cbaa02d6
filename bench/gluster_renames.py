"""GlusterFS and the checked rename: claims and acks through a store whose Disk asks for
renameat2's RENAME_NOREPLACE before every rename (as before) and through one that remembers
the refusal, alternately on one mount of a replica-3 volume, counted by the bricks
themselves (`gluster volume profile`, per claim+ack and per brick; bench/RESULTS.md, "File
operations per message").

    python bench/gluster_renames.py --messages 150

Run as root (glusterd, the mount).
"""

import argparse
import os
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cluster_fs import GlusterVolume  # noqa: E402
from harness import code_under_test, machine_line  # noqa: E402

from mq.ids import new_id  # noqa: E402
from mq.store import Changes, Disk, Store, encode_message  # noqa: E402


class AskingDisk(Disk):
    """A Disk that forgets the refusal before every rename: renameat2 is asked each time."""

    def rename(self, source: str, target: str) -> None:
        """Disk.rename, the flag asked for again."""
        self.refuses_noreplace = False
        super().rename(source, target)


def brick_ops(volume: GlusterVolume) -> Counter:
    """The bricks' operations since the last call, by kind, summed over the bricks."""
    out = volume.cli("volume", "profile", volume.name, "info", "incremental").stdout
    ops: Counter = Counter()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 9 and fields[-1].isupper() and fields[-2].isdigit():
            ops[fields[-1]] += int(fields[-2])
    return ops


def claims_and_acks(volume: GlusterVolume, store: Store, n: int) -> float:
    """Add n messages, then claim and ack each, flushed one by one; the seconds of the latter."""
    ids = []
    for _ in range(n):
        message_id, changes = new_id(), Changes()
        store.write_new("q", message_id, encode_message(b"x" * 100, "text/plain", 1, message_id), None)
        store.states.deliver_new("q", message_id, False, changes)
        store.flush(changes)
        ids.append(message_id)
    brick_ops(volume)
    started = time.perf_counter()
    for message_id in ids:
        changes = Changes()
        assert store.states.claim("q", message_id, time.time() + 30, 0, changes) is not None
        store.flush(changes)
        changes = Changes()
        assert store.states.ack("q", message_id, 1, changes)
        store.flush(changes)
    return time.perf_counter() - started


def main() -> int:
    """Build the volume, run each Disk twice in turn, print a line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=150)
    args = parser.parse_args()
    if GlusterVolume.missing():
        print(f"cannot run: {GlusterVolume.missing()}", file=sys.stderr)
        return 2
    n = args.messages
    with tempfile.TemporaryDirectory(prefix="mq-gluster-renames-") as workdir:
        with GlusterVolume(workdir, mounts=1) as volume:
            print(f"# {machine_line(volume.mounts[0])}")
            print(f"# {code_under_test()}")
            root = os.path.join(volume.mounts[0], "root")
            Store(root, "file").init()
            volume.cli("volume", "profile", volume.name, "start")
            for name, disk in (("asked each time", AskingDisk("file")), ("remembered", Disk("file"))) * 2:
                seconds = claims_and_acks(volume, Store(root, disk=disk), n)
                ops = brick_ops(volume)
                per = ", ".join(f"{kind} {count / n / volume.replica:.2f}"
                                for kind, count in ops.most_common())
                print(f"{name}: {n} claim+ack in {seconds:.2f} s ({seconds / n * 1000:.1f} ms each); "
                      f"brick operations per claim+ack per brick: {per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
