"""The daemon's folders: its folder in the root's run/ (seen by the other daemons), its socket
folder, and the clean-up of those a crash left (docs/FORMAT.md, "Folders")."""

import os
import shutil
import socket
import tempfile
import time

from mq.config import Options
from mq.liveness import supervisor_running_here
from mq.store.root import Root, health_path, ipc_dir_of, is_under, point_to_ipc_dir

#: A daemon on another host whose run folder or health.json changed less than this many seconds
#: ago is running.
LIVE_HEALTH_SECONDS = 10.0

#: Longest ipc:// socket path the kernel accepts, less room for the socket's own name.
MAX_RUN_DIR = 90

#: Prefix of the socket folders mq makes under $TMPDIR when the root's path is too long.
TEMP_RUN_PREFIX = "mq-run-"


def choose_run_dir(options: Options, ipc_dir: str = "") -> tuple[str, str]:
    """(daemon folder, socket folder) of this daemon.

    The daemon folder is always {root}/run/{host}-{pid}, so every daemon on a root is seen
    there (the shared-root check, the pipeline's notifications). The sockets go there too,
    unless --run-dir names another folder, the path is too long for ipc://, or they are in
    ipc_dir already (bound while the root was not there yet); then a file in the daemon
    folder points at them.
    """
    daemon_dir = Root(options.root).daemon_dir(socket.gethostname(), os.getpid())
    os.makedirs(daemon_dir, exist_ok=True)
    if not ipc_dir and options.run_dir:
        os.makedirs(options.run_dir, exist_ok=True)
        ipc_dir = options.run_dir
    elif not ipc_dir and len(daemon_dir) > MAX_RUN_DIR:
        ipc_dir = tempfile.mkdtemp(prefix=TEMP_RUN_PREFIX)
    elif not ipc_dir:
        return daemon_dir, daemon_dir
    point_to_ipc_dir(daemon_dir, ipc_dir)
    return daemon_dir, ipc_dir


def discard_run_dirs(options: Options, daemon_dir: str, ipc_dir: str) -> None:
    """Remove this daemon's folder and its socket folder ("" for none) on its way out; a
    folder given with --run-dir is the operator's and stays."""
    if daemon_dir:
        shutil.rmtree(daemon_dir, ignore_errors=True)
    if ipc_dir and not options.run_dir:
        shutil.rmtree(ipc_dir, ignore_errors=True)


def socket_dir(options: Options) -> str:
    """A socket folder outside the root, for a daemon whose root is not there yet: --run-dir,
    or a new one under $TMPDIR."""
    if options.run_dir and not is_under(options.run_dir, options.root):
        os.makedirs(options.run_dir, exist_ok=True)
        return options.run_dir
    return tempfile.mkdtemp(prefix=TEMP_RUN_PREFIX)


def clean_stale_run_dirs(root: str) -> None:
    """Remove run folders of daemons on this host whose supervisor is gone (killed by -9, or
    before a reboot)."""
    host = socket.gethostname()
    for folder in Root(root).daemon_dirs():
        owner, _, pid = os.path.basename(folder).rpartition("-")
        if owner == host and pid.isdigit() and not supervisor_running_here(int(pid)):
            sockets = ipc_dir_of(folder)
            # A socket folder mq made itself under $TMPDIR goes too; --run-dir's is the operator's.
            if sockets != folder and os.path.basename(sockets).startswith(TEMP_RUN_PREFIX):
                shutil.rmtree(sockets, ignore_errors=True)
            shutil.rmtree(folder, ignore_errors=True)


def last_sign_of_life(folder: str) -> float:
    """When a daemon of another host last showed itself in its run folder: the folder's own
    mtime (its making, each health.json renamed into it) or its health.json's, the later;
    0 when neither can be read."""
    times = [0.0]
    for path in (folder, health_path(folder)):
        try:
            times.append(os.stat(path).st_mtime)
        except OSError:
            pass
    return max(times)


def live_daemons(root: str) -> list[str]:
    """Names of the run folders of other daemons using this root now.

    On this host a daemon is running when its supervisor's pid is; on another host, when its
    folder was made or its health.json (rewritten every second) replaced lately: a daemon
    starting there counts from the moment it made its folder, before its first health.json.
    """
    host = socket.gethostname()
    live = []
    for folder in Root(root).daemon_dirs():
        name = os.path.basename(folder)
        owner, _, pid = name.rpartition("-")
        if not pid.isdigit():
            continue
        if owner == host:
            running = int(pid) != os.getpid() and supervisor_running_here(int(pid))
        else:
            running = time.time() - last_sign_of_life(folder) < LIVE_HEALTH_SECONDS
        if running:
            live.append(name)
    return live
