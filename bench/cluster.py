"""Several mq daemons on one root (--peers), and a nemesis that kills, pauses and restarts them.

Each node is a whole `mq` tree in its own process group on a fixed port of 127.0.0.1, so
kill -9 of the group is a daemon dying at once, and a restart brings it back where clients
expect it. Shared by bench/chaos.py, bench/soak.py and tests/chaos/ (which put bench/ on
sys.path); not part of the installed package.
"""

import ctypes
import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
from ports import free_port

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Adopt the children of killed supervisors, so that their exit status can be collected."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_zombies(keep: set[int]) -> None:
    """Collect every adopted child that has exited, except the pids in keep (our Popens)."""
    for child in psutil.Process().children():
        try:
            if child.pid not in keep and child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.NoSuchProcess, ChildProcessError):
            pass


def mq_command() -> str:
    """The `mq` script beside the running interpreter, else the module form."""
    path = os.path.join(os.path.dirname(sys.executable), "mq")
    return path if os.path.exists(path) else ""


def create_root(root: str) -> str:
    """Make a shared root before its daemons start, as an operator does (a daemon with --peers
    never makes one: docs/CLUSTER.md); return its ID. A root already there is kept."""
    script = mq_command()
    argv = ([script] if script else [sys.executable, "-m", "mq.supervisor.main"]) + [
        f"--root={root}", "--create-root"]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def process_name(cmdline: list[str]) -> str:
    """"fetch actor 0", "front"...: from the process title, or, for a child that has not set
    it yet, from its command line (python -m mq.supervisor.child fetch 0 ...)."""
    title = " ".join(cmdline)
    if title.startswith("mq: "):
        return title.split(" [")[0].removeprefix("mq: ")
    if "mq.supervisor.child" in cmdline:
        kind, index = (cmdline[cmdline.index("mq.supervisor.child") + 1:] + ["", ""])[:2]
        return "front" if kind == "front" else f"{kind} actor {index}"
    return title


def listened(port: int) -> bool:
    """True while something listens on 127.0.0.1:port (the daemon's own check at start)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def port_holders(port: int) -> list[str]:
    """"pid title (state, wchan)" of each process listening on 127.0.0.1:port or holding its
    lock (supervisor/ports.py): what refuses a daemon's restart there."""
    lock = f"@mq-listen-127.0.0.1-{port}"
    found = []
    for conn in psutil.net_connections("tcp") + psutil.net_connections("unix"):
        tcp = conn.status == psutil.CONN_LISTEN and getattr(conn.laddr, "port", None) == port
        if (tcp or conn.laddr == lock) and conn.pid:
            try:
                proc = psutil.Process(conn.pid)
                with open(f"/proc/{conn.pid}/wchan") as f:
                    wchan = f.read()
                what = "listens" if tcp else "holds the lock"
                found.append(f"{conn.pid} {' '.join(proc.cmdline())[:60]} ({proc.status()}, "
                             f"{wchan}) {what}")
            except (psutil.Error, OSError):
                pass
    return found


class Node:
    """One daemon of the cluster: its port, its log file, its process group."""

    def __init__(self, name: str, root: str, workdir: str, peers: int, timeout: float,
                 workers: int = 2, extra: tuple = ()):
        self.name = name
        self.port = free_port()
        self.log_path = os.path.join(workdir, f"{name}.log")
        script = mq_command()
        self.argv = ([script] if script else [sys.executable, "-m", "mq.supervisor.main"]) + [
            f"--root={root}", f"--port={self.port}", f"--workers={workers}",
            f"--peers={peers}", f"--timeout={timeout}", "--no-access-log",
            f"--log-file={self.log_path}", *extra]
        self.proc: subprocess.Popen | None = None
        self.paused = False

    def start(self) -> "Node":
        """Start the supervisor as the leader of a new process group."""
        with open(self.log_path + ".stderr", "ab") as err:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=err,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def running(self) -> bool:
        """True while the supervisor has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def answers(self) -> bool:
        """True when the front answers HTTP (any status)."""
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            conn.request("GET", "/_mq/health")
            conn.getresponse().read()
            conn.close()
            return True
        except OSError:
            return False

    def wait_answering(self, timeout: float = 60.0) -> None:
        """Wait until the front answers; RuntimeError when the supervisor exits or time is up."""
        deadline = time.monotonic() + timeout
        while not self.answers():
            if not self.running() or time.monotonic() > deadline:
                held = "; ".join(port_holders(self.port)) or "nothing"
                raise RuntimeError(f"{self.name} did not start; see {self.log_path}.stderr "
                                   f"(its port held by: {held})")
            time.sleep(0.1)

    def processes(self) -> dict[str, psutil.Process]:
        """{title: process} of the tree, the supervisor included."""
        if not self.running():
            return {}
        try:
            top = psutil.Process(self.proc.pid)
            out = {"supervisor": top}
            for child in top.children(recursive=True):
                out[process_name(child.cmdline())] = child
            return out
        except psutil.Error:
            return {}

    def signal_group(self, sig: int) -> None:
        """Send sig to the whole tree at once."""
        if self.proc.returncode is None:
            try:  # Not collected yet, so its pid (the group's id) is nobody else's.
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            return
        # Collected: an emptied group's number may be another tree's by now, so only the
        # members still here (orphans adopted by this subreaper) get the signal.
        for proc in psutil.Process().children(recursive=True):
            try:
                if os.getpgid(proc.pid) == self.proc.pid:
                    proc.send_signal(sig)
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass

    def kill(self) -> None:
        """kill -9 of the whole tree (the daemon dies at once, as in a machine crash)."""
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGKILL)
        self.proc.wait()
        self.paused = False
        # A front stuck in a file call that no signal ends (a FUSE request its file system
        # has taken) listens on until the call returns, and a daemon started meanwhile is
        # refused the port; a crashed machine comes back with it free. Actors stuck so hold
        # nothing a restart needs, and are left to linger.
        deadline = time.monotonic() + 60
        while listened(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        """Resume if paused, SIGTERM, and wait; kill -9 if it does not drain in 30 s."""
        stop_all([self])


def stop_all(nodes: list[Node]) -> None:
    """Node.stop of every node, the SIGTERMs sent at once: each drains while the others do."""
    running = [node for node in nodes if node.running()]
    for node in running:
        node.signal_group(signal.SIGCONT)
        node.proc.terminate()
    deadline = time.monotonic() + 30
    for node in running:
        try:
            node.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            node.kill()


class Nemesis(threading.Thread):
    """Every `interval` seconds (at random around it), one fault: kill -9 an actor, pause a
    process or a whole daemon (SIGSTOP, then SIGCONT), or kill -9 a daemon and restart it."""

    FAULTS = ("kill actor", "kill actor", "kill actor", "pause process", "pause process",
              "pause daemon", "kill daemon", "kill daemon")

    def __init__(self, nodes: list[Node], interval: float, rng: random.Random, say=print):
        super().__init__(daemon=True)
        self.nodes, self.interval, self.rng, self.say = nodes, interval, rng, say
        self.stopping = threading.Event()
        self.counts: dict[str, int] = {}

    def run(self) -> None:
        """Inject faults until stopped: FAULTS in a new random order each round, so that every
        kind comes once a round however short the run."""
        order: list[str] = []
        while not self.stopping.wait(self.rng.uniform(0.5, 1.5) * self.interval):
            order = order or self.rng.sample(self.FAULTS, len(self.FAULTS))
            fault = order.pop()
            try:
                done = getattr(self, fault.replace(" ", "_"))()
            except Exception as err:  # A failed fault is told, and the next one tried.
                self.say(f"  nemesis: {fault} failed: {type(err).__name__}: {err}")
                done = None
            if done:
                self.counts[fault] = self.counts.get(fault, 0) + 1
                self.say(f"  nemesis: {fault}: {done}")
            keep = {n.proc.pid for n in self.nodes if n.proc}
            reap_zombies(keep)

    def up(self) -> list[Node]:
        """The nodes running now."""
        return [n for n in self.nodes if n.running()]

    def kill_actor(self) -> str | None:
        """kill -9 one child (front, an actor, the mover, the reaper) of a random daemon."""
        node = self.rng.choice(self.up())
        children = {k: v for k, v in node.processes().items() if k != "supervisor"}
        if not children:
            return None
        title = self.rng.choice(sorted(children))
        children[title].kill()
        return f"{node.name} {title}"

    def pause_process(self) -> str | None:
        """SIGSTOP one process of a random daemon (supervisor included) for up to 3 s."""
        node = self.rng.choice(self.up())
        procs = node.processes()
        if not procs:
            return None
        title = self.rng.choice(sorted(procs))
        seconds = self.rng.uniform(0.2, 3.0)
        procs[title].suspend()
        try:
            self.stopping.wait(seconds)
        finally:
            try:
                procs[title].resume()
            except psutil.NoSuchProcess:
                pass
        return f"{node.name} {title} for {seconds:.1f} s"

    def pause_daemon(self) -> str:
        """SIGSTOP a whole daemon for up to 4 s (a stalled machine), then SIGCONT."""
        node = self.rng.choice(self.up())
        seconds = self.rng.uniform(0.5, 4.0)
        node.signal_group(signal.SIGSTOP)
        try:
            self.stopping.wait(seconds)
        finally:
            node.signal_group(signal.SIGCONT)
        return f"{node.name} for {seconds:.1f} s"

    def kill_daemon(self) -> str | None:
        """kill -9 a whole daemon, leave it down up to 4 s, start it again (one stays up)."""
        up = self.up()
        if len(up) < 2:
            return None
        node = self.rng.choice(up)
        node.kill()
        seconds = self.rng.uniform(0.5, 4.0)
        self.stopping.wait(seconds)
        node.start()
        return f"{node.name}, down {seconds:.1f} s"

    def stop(self) -> None:
        """Stop injecting faults, wait for the one in progress, resume and restart every node."""
        self.stopping.set()
        self.join(60)
        for node in self.nodes:
            if node.running():
                node.signal_group(signal.SIGCONT)
            else:
                node.start()
        for node in self.nodes:
            node.wait_answering()
