"""Changes: the folders store operations changed, flushed once before anyone hears of them.

A store operation that renames, creates or unlinks a message's file records the folders whose
entries it changed on the Changes it is given; whoever answers for the change (an actor's
batch, a call of mq.local) flushes them all at once before its reply (docs/FORMAT.md,
"Flushing"). So no caller names folders: the operation that made a change says where it is.
"""

from collections.abc import Callable, Iterable

#: The store's timed flush of some folders' entries (Store.flush), as its parts are given it.
Flush = Callable[[Iterable[str]], None]


class Changes(set[str]):
    """A set of folders to flush; store operations add to it, Store.flush takes it whole.

    The paths are the root's own, absolute and normalized (mq.store.root), so a folder is
    what comes before the last "/": cut there, not by os.path.dirname, which costs more than
    the set itself on a fetch actor's path (two renames per fetch and delete).
    """

    def renamed(self, source: str, target: str) -> None:
        """A file moved from source to target: both folders' entries changed."""
        self.add(source[:source.rindex("/")])
        self.add(target[:target.rindex("/")])

    def changed(self, path: str) -> None:
        """A file was created, unlinked or given a new mtime: its folder changed."""
        self.add(path[:path.rindex("/")])

    def entered(self, *folders: str) -> None:
        """Folders whose entries a reply depends on (a peer's rename it reports as done)."""
        self.update(folders)


def tracked(changes: "Changes | None") -> Changes:
    """The caller's change set, or a new one whose folders nobody flushes (the caller flushes
    by other means: the pipeline's own flush, a test looking at a single rename)."""
    return Changes() if changes is None else changes
