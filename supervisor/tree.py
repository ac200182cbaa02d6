"""Tree: spawn the front and the actors, watch them (psutil, heartbeats), restart with backoff."""

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from mq import logs
from mq.config import Options
from mq.errors import OUTAGE_ERRNOS, MqError
from mq.store.root import (
    RootMissing,
    actor_endpoint,
    health_path,
    is_under,
    mover_endpoint,
    socket_path,
    standby_health_path,
)
from mq.supervisor.forking import ForkedChild, fork_child, preload
from mq.supervisor.heartbeat import Heartbeats, Slot
from mq.supervisor.root_state import ROOT_CHECK_SECONDS, RootState

#: First wait before restarting a dead process, in seconds; doubled per quick crash.
MIN_BACKOFF_SECONDS = 0.1
#: Longest wait before a restart, in seconds.
MAX_BACKOFF_SECONDS = 5.0
#: A process that ran this many seconds before dying starts again at the minimum backoff.
STABLE_SECONDS = 10.0
#: The front may crash this many times within FRONT_WINDOW_SECONDS before the tree gives up.
FRONT_MAX_CRASHES = 5
FRONT_WINDOW_SECONDS = 60.0
#: Seconds the front gets to drain on SIGTERM before the actors are stopped.
DRAIN_SECONDS = 10.0
#: Longest wait at start for the actors to bind before the front starts anyway, in seconds.
ACTORS_READY_SECONDS = 10.0

#: A turn of the supervisor's own loop this late (seconds) means it was stopped or starved
#: itself: every child gets a whole --hang-timeout again rather than being judged on a gap
#: that was the supervisor's (a SIGSTOP of the whole daemon stops its children too).
SUPERVISOR_GAP_SECONDS = 1.0

#: Most doublings of --hang-timeout for a child that hangs again and again (16 times it).
MAX_HANG_DOUBLINGS = 4

#: Seconds between two log lines saying the path is no root yet.
ROOT_MISSING_LOG_SECONDS = 10.0


@dataclass
class Child:
    """One supervised process and its restart bookkeeping."""

    kind: str
    index: int
    critical: bool = False
    proc: ForkedChild | subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = MIN_BACKOFF_SECONDS
    restart_at: float | None = None
    crashes: list = field(default_factory=list)
    slot: Slot | None = None  # its heartbeat (supervisor/heartbeat.py)
    hung: int = 0  # restarts after it was killed for going --hang-timeout without a heartbeat
    killed_hung: bool = False  # killed so; counted in hung with the restart, once it is dead
    hang_streak: int = 0  # hangs in a row, each doubling the next deadline

    @property
    def name(self) -> str:
        """The name logs and health use, e.g. save-3."""
        return f"{self.kind}-{self.index}"

    @property
    def heartbeat(self) -> Slot:
        """Its heartbeat slot, which a Tree gives each of its children before it spawns one."""
        assert self.slot is not None, f"{self.name} belongs to no Tree"
        return self.slot


class Tree:
    """The supervised process tree of one daemon."""

    def __init__(self, options: Options, run_dir: str, daemon_dir: str = "", missing: str = "",
                 finish_start: Callable[[], str] | None = None, warnings: list[str] | None = None):
        """missing: why the path is no root yet (then only the fronts start, answering 503,
        and finish_start() prepares the root once the root watch finds it; it returns the
        daemon folder)."""
        self.options = options
        #: What the start-up checks found risky, published in health.json (may grow once a
        #: missing root is prepared).
        self.warnings = warnings if warnings is not None else []
        self.run_dir = run_dir
        self.daemon_dir = daemon_dir
        self.finish_start: Callable[[], str] | None = finish_start if missing else None
        self.missing_logged = float("-inf")
        # health.json goes to the socket folder (the front reads it there) and, when that is
        # elsewhere, to the daemon folder under the root too (other hosts' shared-root check).
        self.health_dirs = sorted({run_dir, daemon_dir or run_dir})
        self.log = logs.get()
        self.stopping = False
        self.started = time.time()  # Unix seconds, published in health.json
        self.children = [Child("mover", 0), Child("reaper", 0)]
        self.children += [Child("fetch", i) for i in range(options.workers)]
        self.children += [Child("save", i) for i in range(options.workers)]
        # Every front is critical: each one's crash loop is the whole daemon's (see check).
        self.children += [Child("front", i, critical=True) for i in range(options.fronts)]
        self.heartbeats = Heartbeats(len(self.children))
        for position, child in enumerate(self.children):
            child.slot = self.heartbeats.slot(position)
        self.root_state = RootState(options.root, self.heartbeats.root_state, options.root_id,
                                    missing)
        # While the root is away: health.json only where it is not under the root, or (none
        # left) in the host's temporary folder, where the front looks then (http/health.py).
        self.standby_health = standby_health_path(os.getpid())

    def spawn(self, child: Child) -> None:
        """Fork a child process running mq.supervisor.child.run (supervisor/forking.py)."""
        child.started = time.monotonic()
        child.heartbeat.stamp(child.started)  # Its start up counts against the deadline too.
        child.proc = fork_child(child.kind, child.index, self.run_dir, self.options, child.heartbeat)
        child.restart_at = None
        self.log.info("supervisor.spawn", child=child.name, child_pid=child.proc.pid)

    def check(self, child: Child, now: float) -> bool:
        """Notice a death and schedule its restart; False when the tree must give up."""
        if child.proc is None:
            return True
        # waitpid(WNOHANG) collects a child that exited (a zombie) as soon as it is one: no
        # need to ask psutil each turn (20 times a second for every child: 17 us each).
        code = child.proc.poll()
        if code is None:
            return True
        uptime = now - child.started
        child.backoff = MIN_BACKOFF_SECONDS if uptime > STABLE_SECONDS else min(
            MAX_BACKOFF_SECONDS, child.backoff * 2 if child.restarts else child.backoff)
        child.restarts += 1
        if child.killed_hung:
            child.hung, child.killed_hung = child.hung + 1, False
        child.restart_at = now + (MIN_BACKOFF_SECONDS if uptime > STABLE_SECONDS else child.backoff)
        child.proc = None
        self.log.error("supervisor.crash", child=child.name, exit_code=code,
                       uptime_s=round(uptime, 3), restart_in_s=round(child.restart_at - now, 3))
        if child.critical:
            child.crashes = [t for t in child.crashes if now - t < FRONT_WINDOW_SECONDS] + [now]
            if len(child.crashes) >= FRONT_MAX_CRASHES:
                self.log.error("supervisor.give_up", child=child.name, crashes=len(child.crashes))
                return False
        return True

    def check_answering(self, child: Child, now: float) -> None:
        """Kill a running child whose heartbeat is older than --hang-timeout (a busy loop, a
        deadlock, a stopped process); check() then sees it dead and restarts it."""
        if not self.options.hang_timeout or child.proc is None or child.proc.poll() is not None:
            return  # Off, or not running: a death is check()'s, whatever its heartbeat says.
        # Each hang in a row doubles the next deadline: work that is slow rather than stuck (a
        # first listing of a huge queue on a slow disk) gets done instead of restarted forever.
        deadline = self.options.hang_timeout * 2 ** min(child.hang_streak, MAX_HANG_DOUBLINGS)
        silent = now - child.heartbeat.read()
        if silent <= deadline:
            if child.hang_streak and now - child.started > 2 * deadline:
                child.hang_streak = 0  # It turned its loop after its first deadline: it runs.
            return
        child.killed_hung = True
        child.hang_streak += 1
        self.log.error("supervisor.hung", child=child.name, role=child.kind,
                       child_pid=child.proc.pid, silent_s=round(silent, 3),
                       hang_timeout_s=deadline)
        child.proc.kill()  # SIGKILL: a stopped process cannot handle SIGTERM.
        child.heartbeat.stamp(now)  # Killed once; check() reaps it on a later turn.

    def excuse_gap(self, now: float) -> None:
        """Give every child a fresh deadline: the supervisor itself did not run for a while."""
        for child in self.children:
            child.heartbeat.stamp(now)

    def health(self) -> list[dict]:
        """Each child's pid, state, restarts, CPU and memory, as psutil sees them."""
        rows = []
        for child in self.children:
            row = {"name": child.name, "pid": None, "alive": False, "restarts": child.restarts,
                   "hung": child.hung}
            if child.proc is not None:
                try:
                    proc = psutil.Process(child.proc.pid)
                    with proc.oneshot():
                        row.update(pid=proc.pid, alive=proc.status() != psutil.STATUS_ZOMBIE,
                                   rss_bytes=proc.memory_info().rss, cpu_s=sum(proc.cpu_times()[:2]),
                                   started=proc.create_time())
                except psutil.NoSuchProcess:
                    pass
            rows.append(row)
        return rows

    def health_paths(self) -> list[str]:
        """Where health.json goes now: never into a root that is away (its empty mount point)."""
        paths = [health_path(folder) for folder in self.health_dirs]
        if self.root_state.lost:
            paths = [p for p in paths if not is_under(p, self.options.root)] or [self.standby_health]
        return paths

    def may_start(self, child: Child) -> bool:
        """Whether a dead child may be restarted now: not while the root is away, unless it is
        a front whose socket folder is not under the root (an actor's start reads the root, and
        a socket bound there would go into the empty mount point)."""
        return not self.root_state.lost or (
            child.kind == "front" and not is_under(self.run_dir, self.options.root))

    def write_health(self) -> None:
        """Publish health.json (written whole, then renamed)."""
        text = json.dumps({"supervisor_pid": os.getpid(), "started": self.started,
                           "root": self.options.root, "root_state": self.root_state.health(),
                           "warnings": self.warnings, "children": self.health()})
        try:
            for path in self.health_paths():
                with open(path + ".tmp", "w") as f:
                    f.write(text)
                os.replace(path + ".tmp", path)
        except OSError as err:
            # A full or failing disk must not take the supervisor (and so the tree) down.
            self.log.warning("supervisor.health_unwritten", error=str(err))

    def run(self) -> int:
        """Start everything and supervise until SIGTERM (exit 0) or a front crash loop (exit 1)."""
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        signal.signal(signal.SIGHUP, self._forward_hup)
        preload()
        if self.finish_start is None:
            self.start_actors()
        for child in self.children:
            if child.critical:
                self.spawn(child)
        code = 0
        last_health = 0.0
        last_turn = time.monotonic()
        while not self.stopping:
            now = time.monotonic()
            if now - last_turn > SUPERVISOR_GAP_SECONDS:
                self.excuse_gap(now)
            last_turn = now
            if self.root_state.poll(now):
                if not self.root_state.lost:
                    self.discard_standby_health()
                last_health = 0.0  # Published at once, where it goes now.
            if self.finish_start is not None and not self.wait_for_root(now):
                self.stopping, code = True, 2
            for child in self.children:
                self.check_answering(child, now)
                if not self.check(child, now):
                    self.stopping, code = True, 1
                    break
                if (child.proc is None and child.restart_at is not None
                        and now >= child.restart_at and self.may_start(child)):
                    self.spawn(child)
            if now - last_health > 1.0:
                self.write_health()
                last_health = now
            time.sleep(0.05)
        self.shutdown()
        self.discard_standby_health()
        return code

    def start_actors(self) -> None:
        """Start every actor, and wait for them to bind (so the front's first requests find them)."""
        for child in self.children:
            if not child.critical:
                self.spawn(child)
        self.wait_for_actors(ACTORS_READY_SECONDS)

    def wait_for_root(self, now: float) -> bool:
        """While the path is no root yet (only the fronts run, answering 503): say so now and
        then; once the root watch finds a root, prepare it and start the actors. False when
        the root found must be refused (a bad FORMAT, the rename check...): exit status 2."""
        if self.root_state.lost:
            if now - self.missing_logged >= ROOT_MISSING_LOG_SECONDS:
                self.missing_logged = now
                self.log.warning("supervisor.root_missing", root=self.options.root,
                                 error=self.root_state.error, retry_in=ROOT_CHECK_SECONDS,
                                 action="answering 503 until a root is there: made by another "
                                 "daemon or by mq --create-root (docs/CLUSTER.md)")
            return True
        if self.finish_start is None:
            return True
        try:
            self.daemon_dir = self.finish_start()
        except (MqError, OSError) as err:
            cause = err if isinstance(err, OSError) else err.__cause__
            if not (isinstance(err, RootMissing) or (isinstance(cause, OSError)
                                                      and cause.errno in OUTAGE_ERRNOS)):
                self.log.error("supervisor.refused", root=self.options.root,
                               error=err.message if isinstance(err, MqError) else str(err))
                return False
            self.root_state.set_missing(err.message if isinstance(err, MqError) else str(err))
            return True
        self.finish_start = None
        self.health_dirs = sorted({self.run_dir, self.daemon_dir})
        self.root_state.watch.expect(self.options.root_id)
        self.start_actors()
        return True

    def discard_standby_health(self) -> None:
        """Remove the health.json written outside the root while it was away."""
        try:
            os.unlink(self.standby_health)
        except FileNotFoundError:
            pass

    def wait_for_actors(self, timeout: float) -> None:
        """Wait until every actor has bound its socket, so the front's first requests find them."""
        sockets = [mover_endpoint(self.run_dir)] + [
            actor_endpoint(self.run_dir, kind, i)
            for kind in ("save", "fetch") for i in range(self.options.workers)]
        paths = [socket_path(s) for s in sockets]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stopping:
            if all(os.path.exists(p) for p in paths):
                return
            time.sleep(0.02)
        missing = [os.path.basename(p) for p in paths if not os.path.exists(p)]
        self.log.warning("supervisor.actors_slow", missing=missing)

    def _stop(self, *_):
        self.stopping = True

    def _forward_hup(self, *_):
        if logs._sink:
            logs._sink.reopen()
        for child in self.children:
            if child.proc is not None:
                child.proc.send_signal(signal.SIGHUP)

    def shutdown(self) -> None:
        """Drain the front first, then stop the actors; kill what does not stop in time."""
        front = [c for c in self.children if c.kind == "front"]
        self._terminate(front, DRAIN_SECONDS + 2)
        self._terminate([c for c in self.children if c.kind != "front"], 5.0)
        self.log.info("supervisor.stop")

    def _terminate(self, children: list[Child], grace: float) -> None:
        procs = [c.proc for c in children if c.proc is not None]
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
