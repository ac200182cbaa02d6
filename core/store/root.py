"""The root: the path of everything under an mq root, and the root's creation and checks.

Nothing else in mq joins a path under a root or builds an ipc:// address (docs/FORMAT.md).
"""

import os
import tempfile

from mq.errors import Invalid, Unavailable
from mq.ids import new_id
from mq.store.disk import Disk
from mq.store.names import entry_name, queued_name

#: Version of the layout and file format; stored in {root}/FORMAT.
FORMAT_VERSION = 1
#: The file holding the root's identity, "mq-root {uuid}", written once when the root is made.
ID_FILE = "ID"
#: The folders every root has, created at every start if missing.
FOLDERS = ("new", "queues", "delay", "remove", "run", "dedup", "props", "notices", "corrupt",
           "accum", "spare", "groups")
#: The file in props/ holding the default property rules (a queue of this name is refused).
DEFAULT_RULES = "_defaults"
#: The file in a daemon's run folder naming its socket folder, when that is elsewhere.
IPC_POINTER = "ipc"


class RootMissing(Unavailable):
    """The path does not lead to the root a daemon sharing it may use: no FORMAT there (the
    shared file system not mounted yet: an empty mount point), or another root's ID."""


class Root:
    """The paths of one mq root."""

    def __init__(self, root: str):
        # Paths are built by formatting, not os.path.join (a fetch builds several): the root
        # is absolute and normalized, and every name put after it was validated first.
        self.root = os.path.abspath(root)

    def folder(self, name: str) -> str:
        """Path of one of the root's top-level folders."""
        return f"{self.root}/{name}"

    def format_path(self) -> str:
        """The FORMAT file."""
        return os.path.join(self.root, "FORMAT")

    def id_path(self) -> str:
        """The ID file: the root's identity."""
        return os.path.join(self.root, ID_FILE)

    def read_identity(self) -> tuple[list[str], str]:
        """(the words of FORMAT, the root's id or "" when ID is missing); OSError when FORMAT
        cannot be read."""
        with open(self.format_path()) as f:
            found = f.read().split()
        try:
            with open(self.id_path()) as f:
                words = f.read().split()
        except FileNotFoundError:
            return found, ""
        return found, words[1] if len(words) == 2 and words[0] == "mq-root" else ""

    # -- messages -------------------------------------------------------------------------

    def queue_dir(self, queue: str) -> str:
        """Folder of a queue's ready messages."""
        return f"{self.root}/queues/{queue}"

    def new_path(self, queue: str, message_id: str) -> str:
        """Where a message is written before it is delivered."""
        return f"{self.root}/new/{queued_name(queue, message_id)}"

    def ready_path(self, queue: str, message_id: str, attempts: int = 0) -> str:
        """Where a ready message waits to be fetched (delivered `attempts` times so far)."""
        return f"{self.root}/queues/{queue}/{entry_name(message_id, attempts)}"

    def delay_path(self, queue: str, message_id: str, attempts: int = 0) -> str:
        """Where a delayed (attempts 0) or in-flight message waits for its due time (mtime)."""
        return f"{self.root}/delay/{queued_name(queue, entry_name(message_id, attempts))}"

    def remove_path(self, queue: str, message_id: str) -> str:
        """Where a removed message waits for the reaper."""
        return f"{self.root}/remove/{queued_name(queue, message_id)}"

    def spare_path(self, name: str) -> str:
        """A spare file: a removed message's file, kept to be written again (spares.py)."""
        return f"{self.root}/spare/{name}"

    def trash_path(self, queue: str, what: str) -> str:
        """A unique name in remove/ for something of a deleted queue (its folder, keys, props).

        Short whatever the queue's name: '{queue}:{uuid}.{what}' stays under NAME_MAX.
        """
        return os.path.join(self.root, "remove", queued_name(queue, f"{new_id()}.{what}"))

    def corrupt_path(self, queue: str, message_id: str, attempts: int) -> str:
        """Where a file that is not a message is kept for an operator to look at."""
        return os.path.join(self.root, "corrupt", queued_name(queue, entry_name(message_id, attempts)))

    # -- accumulation windows (docs/FORMAT.md, "Accumulation") ----------------------------

    def accum_dir(self, queue: str) -> str:
        """Folder of a queue's accumulation windows."""
        return os.path.join(self.root, "accum", queue)

    def window_dir(self, queue: str, window: str) -> str:
        """Folder of one accumulation window (open, closing or combined) of a queue."""
        return os.path.join(self.root, "accum", queue, window)

    def part_path(self, queue: str, window: str, part_id: str) -> str:
        """A part (or, named by the compound's id, the compound) in a window's folder."""
        return os.path.join(self.root, "accum", queue, window, part_id)

    # -- queue metadata -------------------------------------------------------------------

    def dedup_dir(self, queue: str) -> str:
        """Folder of a queue's de-duplication keys."""
        return os.path.join(self.root, "dedup", queue)

    def dedup_digest_path(self, queue: str, digest: str) -> str:
        """The symlink recording a de-duplication key (by its digest); it points at the id."""
        return os.path.join(self.root, "dedup", queue, digest)

    def props_path(self, queue: str) -> str:
        """The JSON file of a queue's own properties."""
        return os.path.join(self.root, "props", f"{queue}.json")

    def default_props_path(self) -> str:
        """The JSON file of the default property rules."""
        return os.path.join(self.root, "props", f"{DEFAULT_RULES}.json")

    def notice_path(self, queue: str | None = None) -> str:
        """The notice file of a queue's ready messages, or (queue None) of delay/."""
        return os.path.join(self.root, "notices", f"ready:{queue}" if queue else "delay")

    def notice_temp_path(self) -> str:
        """A new temporary name in notices/ (swept by the reaper when a writer died)."""
        return os.path.join(self.root, "notices", f".{new_id()}.tmp")

    # -- daemons --------------------------------------------------------------------------

    def run_dir(self) -> str:
        """The folder holding one sub-folder per daemon using this root."""
        return os.path.join(self.root, "run")

    def daemon_dir(self, host: str, pid: int) -> str:
        """The folder of one daemon (its health.json, and its sockets or a pointer to them)."""
        return os.path.join(self.root, "run", f"{host}-{pid}")

    def daemon_dirs(self) -> list[str]:
        """The folders of the daemons that use this root (live or left by a crash)."""
        try:
            return [os.path.join(self.run_dir(), n) for n in sorted(os.listdir(self.run_dir()))]
        except FileNotFoundError:
            return []

    # -- the Spark pipeline ---------------------------------------------------------------

    def stage_dir(self, job: str = "", task: str = "") -> str:
        """{root}/stage[/{job}[/{task}]]: where a Spark write job's tasks stage their files."""
        return os.path.join(self.root, "stage", *(part for part in (job, task) if part))

    def stream_dir(self, consumer: str) -> str:
        """{root}/streams/{consumer}: the batch manifests of one streaming consumer."""
        return os.path.join(self.root, "streams", consumer)

    def manifest_path(self, consumer: str, seq: int) -> str:
        """The manifest of a consumer's micro-batch `seq`."""
        return os.path.join(self.root, "streams", consumer, f"{int(seq):012d}.json")

    # -- creation -------------------------------------------------------------------------

    def create(self, disk: Disk, make: bool = True, expect_id: str = "") -> str:
        """Create the folders, ID and FORMAT (each name made durable), or check an existing
        root; return the root's id.

        make False (a daemon sharing the root, --peers): a path without FORMAT is not made a
        root but refused with RootMissing, before anything is written: it may be the empty
        mount point of the shared file system, and a root made there would be a second one.
        expect_id: refuse (RootMissing) a root whose ID is another. Refuses a root whose
        folders are symbolic links or mount points: syncfs of the root would flush another
        file system than the one holding them.
        """
        if not make or expect_id:
            self.require_format()
        if expect_id and (found_id := self.read_identity()[1]) != expect_id:
            raise RootMissing(f"{self.root} is another root (ID {found_id or 'missing'}, not "
                              f"{expect_id}, --root-id)")
        try:
            missing, path = [], self.root
            while not os.path.isdir(path) and path != os.path.dirname(path):
                missing.append(path)
                path = os.path.dirname(path)
            # Each new folder's name made durable too: else a power cut can take the new root.
            for path in reversed(missing):
                disk.mkdir(path)
            for name in FOLDERS:
                disk.mkdir(self.folder(name))
        except OSError as err:
            raise Unavailable(f"cannot create root {self.root}: {err.strerror}") from err
        self.check_one_file_system()
        # ID before FORMAT: a root whose FORMAT is there has its ID (but for one made by a
        # release before ID, which gets one here, by whichever process links it first).
        root_id = self.publish_id(disk)
        try:
            # Linked into place whole: processes opening a new root at once never read it empty.
            disk.publish(self.format_path(), f"mq-format {FORMAT_VERSION}\n".encode())
            disk.flush(self.root, {self.root})
        except FileExistsError:
            found, _ = self.read_identity()
            if found != ["mq-format", str(FORMAT_VERSION)]:
                raise Invalid(f"{self.format_path()}: unsupported format {' '.join(found)!r}") from None
        return root_id

    def require_format(self, create: str = "mq --create-root") -> None:
        """Raise RootMissing when the path has no FORMAT (an OSError when it cannot tell);
        create: how the caller's user makes a root, for the message."""
        try:
            os.stat(self.format_path())
        except (FileNotFoundError, NotADirectoryError):
            raise RootMissing(f"{self.root} is not an mq root (no FORMAT file): the shared file "
                              "system is not mounted there, or the root was never created "
                              f"({create})") from None

    def require_creatable(self) -> None:
        """Raise Invalid unless a root may be made here: the folder missing, empty or a root
        already (a root is never laid out where a typo points)."""
        if os.path.isdir(self.root) and os.listdir(self.root) and not os.path.exists(self.format_path()):
            raise Invalid(f"{self.root} is neither empty nor an mq root (no FORMAT file)")

    def publish_id(self, disk: Disk) -> str:
        """The root's id, from its ID file, made (durably) when missing."""
        try:
            with open(self.id_path()) as f:
                words = f.read().split()
            if len(words) == 2 and words[0] == "mq-root":
                return words[1]
            raise Invalid(f"{self.id_path()}: not an mq root id: {' '.join(words)!r}")
        except FileNotFoundError:
            pass
        root_id = new_id()
        try:
            disk.publish(self.id_path(), f"mq-root {root_id}\n".encode())
            disk.flush(self.root, {self.root})
        except FileExistsError:
            return self.publish_id(disk)  # Another process made it first: its id is the root's.
        return root_id

    def check_one_file_system(self) -> None:
        """Raise Invalid when a top-level folder is a symlink or on another file system."""
        device = os.stat(self.root).st_dev
        for name in FOLDERS:
            path = self.folder(name)
            info = os.lstat(path)
            if os.path.islink(path) or info.st_dev != device:
                raise Invalid(f"{path} is a symbolic link or another file system: every folder "
                              "of a root must be on the root's own file system (one flush covers "
                              "them all); point --root at a folder that holds them")


class RootWatch:
    """Whether a root's path still leads to the root: its file system mounted, not an empty
    mount point or another folder put in its place (docs/OPERATIONS.md, "The root's file
    system").

    The root's identity is its FORMAT file and its ID: a FUSE mount killed fails the stat
    (ENOTCONN), an unmounted one or a bind mount over it leaves a folder where FORMAT is
    missing, another root put there (a root made on the empty mount point, a folder renamed
    into its place) has another ID. FORMAT's device and inode numbers are a shortcut: while
    they are the ones last seen one stat is enough; new ones (the same root mounted again, a
    new FUSE connection) have FORMAT and ID read and checked once, then are adopted.
    """

    def __init__(self, root: str, expect_id: str = ""):
        self.root = Root(root)
        #: The root's id; "" until one is known (then the first root seen is adopted).
        self.expect_id = expect_id
        self.seen: tuple[int, int] | None = None

    def expect(self, root_id: str) -> None:
        """From now on, only the root with this id is the root."""
        if root_id != self.expect_id:
            self.expect_id, self.seen = root_id, None

    def check(self) -> str:
        """"" while the root is there; else why not, in words for a log line."""
        try:
            info = os.stat(self.root.format_path())
            if (info.st_dev, info.st_ino) == self.seen:
                return ""
            found, root_id = self.root.read_identity()
        except (FileNotFoundError, NotADirectoryError):
            return "FORMAT is missing: the root's file system is not mounted there"
        except OSError as err:
            return os.strerror(err.errno) if err.errno else str(err)
        if found[:1] != ["mq-format"]:
            return "FORMAT does not name an mq root"
        if self.expect_id and root_id != self.expect_id:
            return (f"another root is there (ID {root_id or 'missing'}, not {self.expect_id}): "
                    "a root made on the empty mount point, or a folder put in the root's place")
        self.seen = (info.st_dev, info.st_ino)
        return ""


def is_under(path: str, root: str) -> bool:
    """Whether path is the root or inside it (by name: the root may be away)."""
    path, root = os.path.abspath(path), os.path.abspath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def actor_endpoint(ipc_dir: str, kind: str, index: int) -> str:
    """The ipc:// address actor `kind` number `index` binds."""
    return f"ipc://{ipc_dir}/{kind}-{index}.sock"


def mover_endpoint(ipc_dir: str) -> str:
    """The ipc:// address the mover binds for due-time notifications."""
    return f"ipc://{ipc_dir}/mover.sock"


def socket_path(endpoint: str) -> str:
    """The file an ipc:// address names."""
    return endpoint[len("ipc://"):]


def health_path(daemon_dir: str) -> str:
    """The health.json the supervisor publishes in its daemon folder."""
    return os.path.join(daemon_dir, "health.json")


def standby_health_path(supervisor_pid: int) -> str:
    """Where a supervisor whose socket folder is inside the root publishes health.json while
    the root is away (a file of the host's temporary folder, removed when the root is back)."""
    return os.path.join(tempfile.gettempdir(), f"mq-health-{supervisor_pid}.json")


def ipc_dir_of(daemon_dir: str) -> str:
    """The socket folder of a daemon: its own folder, or the one its pointer file names."""
    try:
        with open(os.path.join(daemon_dir, IPC_POINTER)) as f:
            return f.read().strip() or daemon_dir
    except OSError:
        return daemon_dir


def point_to_ipc_dir(daemon_dir: str, ipc_dir: str) -> None:
    """Record in a daemon folder that its sockets are in another folder."""
    with open(os.path.join(daemon_dir, IPC_POINTER), "w") as f:
        f.write(ipc_dir)
