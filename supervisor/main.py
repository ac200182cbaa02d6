"""The mq command: check options, prepare the root, run the supervised tree."""

import os
import sys
import time

import setproctitle

from mq import logs
from mq.config import Options, read_command_line
from mq.config_file import sample_config
from mq.errors import OUTAGE_ERRNOS, Invalid, MqError
from mq.store import Store
from mq.store.disk import filesystem_type
from mq.store.renames import check_exclusive
from mq.store.replicas import SAFE_COPIES, replica_layout
from mq.store.root import Root, RootMissing
from mq.supervisor.ports import hold_ports
from mq.supervisor.run_dirs import (
    choose_run_dir,
    clean_stale_run_dirs,
    discard_run_dirs,
    live_daemons,
    socket_dir,
)
from mq.supervisor.tree import Tree
from mq.tokens import load as load_tokens

#: With peers, files in new/ younger than this (seconds) may be another daemon's work in progress.
PEER_NEW_GRACE_SECONDS = 60.0
#: What a replica set of fewer than SAFE_COPIES copies risks (measured: bench/RESULTS.md).
REPLICA_RISK = ("a brick's loss and return may hand a message to two consumers within its "
                "timer (docs/CLUSTER.md)")
#: Seconds between two tries to prepare a root whose file system is away.
RETRY_SECONDS = 1.0


def check_renames(store: Store, options: Options) -> tuple[str, str]:
    """How the root's file system keeps two daemons from claiming one message (mode, why:
    renames.check_exclusive). Raises Invalid when it cannot and other daemons share the
    root (--peers), unless --rename-check=warn."""
    mode, why = check_exclusive(store.folder("notices"))
    if mode == "none" and options.peers and options.rename_check == "refuse":
        raise Invalid(f"root {store.root}: {why}; with --peers two daemons could hand out one "
                      "message at once (docs/CLUSTER.md, \"Exclusive renames\"); use a file system "
                      "that supports it, or --rename-check=warn to run anyway")
    return mode, why


def log_rename_check(checked: tuple[str, str], options: Options) -> None:
    """Log the outcome of the start-up rename check (a warning unless the flag works)."""
    mode, why = checked
    if mode == "noreplace":
        logs.get().info("supervisor.rename_check", mode=mode, why=why)
    else:
        logs.get().warning("supervisor.rename_check", mode=mode, why=why, peers=options.peers,
                           risk=("a message may go to two consumers at once" if mode == "none"
                                 else "a cached name expiring mid-rename (docs/CLUSTER.md)")
                           if options.peers else "none while this daemon is alone on the root")


def check_replicas(root: str, options: Options) -> str:
    """Log the replica layout of a GlusterFS root (supervisor.replica_check); return the
    warning health.json carries (with --peers, where the risk is real), else ""."""
    layout = replica_layout(root)
    if layout is None:
        return ""
    log = logs.get()
    if layout.error:
        log.warning("supervisor.replica_check", layout="unknown", error=layout.error)
        return ""
    sets = [s.describe() for s in layout.sets]
    weak = layout.weak()
    if not weak:
        log.info("supervisor.replica_check", layout=sets, copies=min(len(s.bricks) for s in layout.sets))
        return ""
    copies = min(len(s.bricks) for s in weak)
    log.warning("supervisor.replica_check", layout=sets, copies=copies, peers=options.peers,
                risk=REPLICA_RISK if options.peers else "none while this daemon is alone on the root",
                advice=f"use replica {SAFE_COPIES} or an arbiter")
    if not options.peers:
        return ""
    return f"replica_check: a GlusterFS replica set of {copies} copies; {REPLICA_RISK}"


def prepare(options: Options, chosen_by: str, ipc_dir: str = ""):
    """Create or check the root, clean what crashes left, choose the socket folders; return
    (store, rename check, files cleaned from new/, daemon folder, socket folder).

    A daemon sharing the root (--peers), or told its ID (--root-id), never makes a root: where
    the path has none (the shared file system not mounted: an empty mount point) or another,
    RootMissing, before anything is written or even the file system's type read.
    """
    if options.peers or options.root_id:
        Root(options.root).require_format()
    if chosen_by == "auto":
        filesystem_type(options.root)  # Raises while the file system is away.
    store = Store(options.root, chosen_by, options.auto_create)
    options.sync = store.sync  # Children are given the mode chosen, not "auto".
    # Children are given the id too: their root checks expect this root and no other.
    options.root_id = store.init(make=not (options.peers or options.root_id),
                                 expect_id=options.root_id)
    clean_stale_run_dirs(store.root)
    # This daemon's folder is made before it looks for the others': of two daemons started
    # at once, the one that looks last sees the other (looking first, each could see none).
    daemon_dir, run_dir = choose_run_dir(options, ipc_dir)
    try:
        others = live_daemons(store.root)
        if others and not options.peers:
            # Alone on a root, a daemon takes every file in new/ for a crash's leftover and
            # removes it: another daemon's adds in progress would fail.
            raise Invalid(f"root {store.root} is in use by {len(others)} other daemon(s) "
                          f"({', '.join(others)}); start every daemon of a shared root with "
                          f"--peers=N, N the number of other daemons")
        exclusive = check_renames(store, options)
        cleaned = store.recovery.clean_new(PEER_NEW_GRACE_SECONDS if options.peers else 0.0)
    except BaseException:
        # Refused: nothing of this daemon stays (sockets bound already, in ipc_dir, are the
        # caller's to remove).
        discard_run_dirs(options, daemon_dir, run_dir if run_dir != ipc_dir else "")
        raise
    return store, exclusive, cleaned, daemon_dir, run_dir


def log_start(options: Options, chosen_by: str, prepared, warnings: list[str]) -> str:
    """Log what prepare() found (the start, the rename check, the sync mode, the replica
    layout); add the warnings health.json carries to warnings; return the daemon folder."""
    store, exclusive, cleaned, daemon_dir, run_dir = prepared
    logs.get().info("supervisor.start", root=store.root, workers=options.workers, peers=options.peers,
                    cleaned_new=cleaned, run_dir=run_dir, daemon_dir=daemon_dir,
                    root_id=options.root_id)
    log_rename_check(exclusive, options)
    if chosen_by == "auto":
        logs.get().info("supervisor.sync_chosen", sync=store.sync, filesystem=store.filesystem,
                        why="per-file fsync: syncfs may not reach stable storage here"
                        if store.sync == "file" else "syncfs reaches stable storage here")
    if (warning := check_replicas(store.root, options)):
        warnings.append(warning)
    return daemon_dir


def create_root(options: Options) -> int:
    """mq --create-root: make the root (or check the one there), print its ID; exit 0.

    Never lays a root out where a typo points: the folder must be missing, empty or a root."""
    Root(options.root).require_creatable()
    root_id = Store(options.root, options.sync, options.auto_create).init(expect_id=options.root_id)
    print(root_id)
    return 0


def prepare_while_unavailable(options: Options):
    """prepare(), tried again every RETRY_SECONDS while the root's file system is away (a
    network file system without its server or quorum, a FUSE daemon gone): a daemon started
    before its file system waits for it rather than exit. SIGTERM stops the wait."""
    chosen_by = options.sync
    while True:
        try:
            return prepare(options, chosen_by)
        except (MqError, OSError) as err:
            cause = err if isinstance(err, OSError) else err.__cause__
            if not (isinstance(cause, OSError) and cause.errno in OUTAGE_ERRNOS):
                raise
            logs.get().warning("supervisor.root_unavailable", root=options.root,
                               error=os.strerror(cause.errno), retry_in=RETRY_SECONDS)
            time.sleep(RETRY_SECONDS)


def main(argv: list[str] | None = None) -> int:
    """Run mq until SIGTERM; exit 0 after a drain, 1 when the front keeps crashing, 2 on bad options."""
    missing = None
    try:
        options, action = read_command_line(argv)
        if action == "print-config":
            sys.stdout.write(sample_config(options))
            return 0
        if options.token_file:
            load_tokens(options.token_file)  # A bad token file stops mq here, with status 2.
        logs.configure("supervisor", options.log_level, options.log_file)
        if action == "create-root":
            return create_root(options)
        # Before anything else, and held until the exit: no front may join a port another
        # program holds, nor another daemon one of this daemon's (supervisor/ports.py).
        held = hold_ports(options)
        chosen_by = options.sync
        try:
            prepared = prepare_while_unavailable(options)
            run_dir = prepared[4]
        except RootMissing as err:
            # Not a root (yet): serve 503 from fronts whose sockets are outside the path, and
            # start the rest once a root is there (Tree.finish_start).
            missing, run_dir = err, socket_dir(options)
    except MqError as err:
        print(f"mq: {err.message}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"mq: {options.root}: {err.strerror}", file=sys.stderr)
        return 2
    setproctitle.setproctitle(f"mq: supervisor [{options.root}] {options.host}:{options.port}")
    warnings: list[str] = []  # The tree publishes them in health.json.
    if missing is None:
        tree = Tree(options, run_dir, log_start(options, chosen_by, prepared, warnings),
                    warnings=warnings)
    else:
        tree = Tree(options, run_dir, missing=missing.message, warnings=warnings,
                    finish_start=lambda: log_start(
                        options, chosen_by, prepare(options, chosen_by, run_dir), warnings))
    try:
        return tree.run()
    finally:
        discard_run_dirs(options, tree.daemon_dir, run_dir)
        held.close()


if __name__ == "__main__":
    sys.exit(main())
