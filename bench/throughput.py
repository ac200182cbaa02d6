#!/usr/bin/env python3
"""Throughput: durable adds and fetch+delete at N concurrent HTTP clients,
against two ceilings measured in the same run.

    .venv/bin/python bench/throughput.py [--clients 64] [--duration 10] [--workers 2]

What it runs, in order, on 127.0.0.1 (free ports) with a temporary root:

1. The disk's raw limit: single-threaded exclusive create + write (100 bytes) + fsync + rename +
   fsync of the target directory, in a temporary folder on the same file system as the root.
2. The echo ceiling: a Tornado process whose one handler does one ZeroMQ round trip (an asyncio
   DEALER, like the front's links to actors) to an echo process (a ROUTER that sends every
   message back), and nothing else; driven by the same client, at the same concurrency, with the
   same 100-byte POSTs as the adds.
3. mq (the whole supervised tree, `mq --workers W`): durable adds, POST /{queue}/messages with
   100-byte bodies, each answered 201 only once its message is durably in its queue.
4. mq: fetch+delete of the messages just added (GET /{queue}/messages, then DELETE of its id).

With --rounds N, steps 2 and 3 alternate N times, so that other work on this shared machine
falls on both alike. The client is wrk (Debian's package; installed with apt-get when missing
and this runs as root) with bench/wrk/*.lua, or, with --client asyncio or when wrk cannot be
had, a keep-alive HTTP/1.1 client on raw asyncio streams in this process.

Target: durable adds at 64 clients at least 0.8 times the echo ceiling of the same run, with
p99 under 100 ms. The exit status is 0 when it is met, 1 when not.
"""

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BODY = b"m" * 100
QUEUE = "throughput"


# -- the echo ceiling: two processes, started by this same file -----------------------------

def serve_echo_actor(endpoint: str) -> None:
    """The echo process: a ROUTER that returns every message to its sender, unchanged."""
    import zmq

    context = zmq.Context()
    sock = context.socket(zmq.ROUTER)
    sock.linger = 0
    sock.bind(endpoint)
    while True:
        sock.send_multipart(sock.recv_multipart())


def serve_echo_front(port: int, endpoint: str) -> None:
    """A Tornado HTTP server whose handler does one ZeroMQ round trip and nothing else."""
    import itertools

    import tornado.web
    import zmq
    import zmq.asyncio

    class Link:
        """An asyncio DEALER with one future per request id (as mq's front does)."""

        def __init__(self):
            self.sock = zmq.asyncio.Context().socket(zmq.DEALER)
            self.sock.linger = 0
            self.sock.sndhwm = self.sock.rcvhwm = 100_000
            self.sock.connect(endpoint)
            self.pending: dict[bytes, asyncio.Future] = {}
            self.numbers = itertools.count(1)
            self.reader = asyncio.ensure_future(self.read())

        async def call(self, payload: bytes) -> bytes:
            rid = next(self.numbers).to_bytes(8, "big")
            future = asyncio.get_running_loop().create_future()
            self.pending[rid] = future
            await self.sock.send_multipart([rid, payload])
            try:
                return await future
            finally:
                self.pending.pop(rid, None)

        async def read(self) -> None:
            while True:
                rid, payload = await self.sock.recv_multipart()
                future = self.pending.get(rid)
                if future is not None and not future.done():
                    future.set_result(payload)

    class EchoHandler(tornado.web.RequestHandler):
        async def post(self, queue: str) -> None:
            await self.application.settings["link"].call(self.request.body)
            self.set_status(201)
            self.set_header("Content-Type", "application/json")
            self.finish(b'{"id":"00000000-0000-7000-8000-000000000000","queue":"echo"}')

    async def main() -> None:
        app = tornado.web.Application([(r"/([^/]+)/messages", EchoHandler)], link=Link(),
                                      log_function=lambda handler: None)
        app.listen(port, "127.0.0.1")
        await asyncio.Event().wait()

    asyncio.run(main())


class Echo:
    """The echo process and its Tornado front, as child processes of this benchmark."""

    def __init__(self, base: str):
        from harness import free_port

        self.port = free_port()
        endpoint = f"ipc://{base}/echo.sock"
        me = [sys.executable, os.path.abspath(__file__)]
        self.procs = [
            subprocess.Popen([*me, "--serve-echo-actor", endpoint], stdin=subprocess.DEVNULL),
            subprocess.Popen([*me, "--serve-echo-front", str(self.port), endpoint],
                             stdin=subprocess.DEVNULL),
        ]
        from harness import Client

        deadline = time.monotonic() + 30
        while True:
            try:
                client = Client(self.port, timeout=5)
                status, _, _ = client.request("POST", "/echo/messages", BODY)
                client.close()
                if status == 201:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                raise RuntimeError("the echo front did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


# -- the disk's raw limit ---------------------------------------------------------------------

def disk_ceiling(folder: str, seconds: float) -> float:
    """Exclusive create + write + fsync + rename + directory fsync per second, one thread."""
    work = os.path.join(folder, "work")
    done = os.path.join(folder, "done")
    os.makedirs(work)
    os.makedirs(done)
    done_fd = os.open(done, os.O_RDONLY | os.O_DIRECTORY)
    count = 0
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            name = f"{count:09d}"
            fd = os.open(os.path.join(work, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, BODY)
            os.fsync(fd)
            os.close(fd)
            os.rename(os.path.join(work, name), os.path.join(done, name))
            os.fsync(done_fd)
            count += 1
    finally:
        os.close(done_fd)
    return count / (time.monotonic() - started)


# -- the clients ------------------------------------------------------------------------------

def find_wrk(say) -> str | None:
    """wrk's path; installed from Debian's packages when missing and we are root."""
    path = shutil.which("wrk")
    if path or os.geteuid() != 0 or not shutil.which("apt-get"):
        return path
    say("wrk is missing: apt-get update && apt-get install -y wrk")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "wrk"]):
        if subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode:
            return None
    return shutil.which("wrk")


def run_wrk(wrk: str, mode: str, port: int, path: str, clients: int, threads: int,
            duration: float) -> dict:
    """One wrk run; mode "add" (POST) or "fetch_delete". Returns the RESULT line's figures."""
    script = os.path.join(HERE, "wrk", "post.lua" if mode == "add" else "fetch_delete.lua")
    argv = [wrk, f"-t{min(threads, clients)}", f"-c{clients}", f"-d{duration:g}s",
            "--timeout", "30s", "-s", script, f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    match = re.search(r"^RESULT (.*)$", out, re.M)
    if not match:
        raise RuntimeError(f"no RESULT line from wrk:\n{out}")
    figures = {k: int(v) for k, v in (kv.split("=") for kv in match.group(1).split())}
    seconds = figures["duration_us"] / 1e6
    ok = figures["requests"] - figures["non2xx"]
    messages = ok if mode == "add" else figures["deletes"]
    return {"requests_per_s": figures["requests"] / seconds, "messages_per_s": messages / seconds,
            "p50_ms": figures["p50_us"] / 1000, "p99_ms": figures["p99_us"] / 1000,
            "max_ms": figures["max_us"] / 1000, "errors": figures["non2xx"] + figures["socket_errors"],
            "requests": figures["requests"], "seconds": seconds,
            "latency_of": "request" if mode == "add" else "request (GET or DELETE)",
            "command": " ".join(argv[:-3] + ["bench/wrk/" + os.path.basename(script), argv[-1]])}


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    if length:
        await reader.readexactly(length)
    return status, headers


async def _asyncio_load(mode: str, port: int, path: str, clients: int, duration: float) -> dict:
    post = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY
    get = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    latencies: list[float] = []
    counts = {"requests": 0, "errors": 0, "messages": 0}
    deadline = time.monotonic() + duration

    async def one_client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                writer.write(post if mode == "add" else get)
                status, headers = await _read_response(reader)
                counts["requests"] += 1
                if mode == "add":
                    counts["messages" if status == 201 else "errors"] += 1
                elif status == 200:
                    writer.write(f"DELETE {path}/{headers['x-message-id']} HTTP/1.1\r\n"
                                 "Host: 127.0.0.1\r\n\r\n".encode())
                    status, _ = await _read_response(reader)
                    counts["requests"] += 1
                    counts["messages" if status == 204 else "errors"] += 1
                elif status != 204:
                    counts["errors"] += 1
                else:
                    continue  # Nothing to fetch: not a message, not timed.
                latencies.append(time.perf_counter() - started)
        finally:
            writer.close()

    started = time.monotonic()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    seconds = time.monotonic() - started
    from harness import percentile

    return {"requests_per_s": counts["requests"] / seconds,
            "messages_per_s": counts["messages"] / seconds,
            "p50_ms": percentile(latencies, 50) * 1000, "p99_ms": percentile(latencies, 99) * 1000,
            "max_ms": max(latencies, default=0) * 1000, "errors": counts["errors"],
            "requests": counts["requests"], "seconds": seconds,
            "latency_of": "request" if mode == "add" else "GET + DELETE pair",
            "command": f"asyncio client, {clients} connections, {duration:g} s"}


def server_processes(root_pids: list[int]) -> list:
    """The processes of the servers (each pid and its descendants), for their CPU time."""
    import psutil

    procs = []
    for pid in root_pids:
        try:
            proc = psutil.Process(pid)
            procs += [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return procs


def cpu_role(proc) -> str:
    """A short name for what a server process is: front, save, fetch, echo, ..."""
    try:
        args = proc.cmdline()
    except Exception:
        return "gone"
    text = " ".join(args)
    if "--serve-echo-front" in text:
        return "echo front (Tornado)"
    if "--serve-echo-actor" in text:
        return "echo process"
    for role in ("front", "save", "fetch", "mover", "reaper"):
        if f"mq: {role}" in text or f"mq.supervisor.child {role}" in text:
            return "mq " + role
    return "mq supervisor"


def batch_stats(log_path: str) -> str:
    """Sizes of the save actors' batches, from the debug lines "actor.batch" in the daemon log."""
    import json

    sizes = []
    with open(log_path, errors="replace") as f:
        for line in f:
            if '"actor.batch"' not in line or '"save-' not in line:
                continue
            try:
                sizes.append(json.loads(line)["size"])
            except (ValueError, KeyError):
                continue
    if not sizes:
        return "none logged"
    from harness import percentile

    return (f"{len(sizes)} batches, mean {sum(sizes) / len(sizes):.1f} requests, "
            f"p50 {percentile(sizes, 50)}, p90 {percentile(sizes, 90)}, max {max(sizes)}")


def load_run(client: str | None, mode: str, port: int, path: str, args,
             servers: list[int] = ()) -> dict:
    """One measured run with the chosen client; with servers, their CPU per request too."""
    procs = server_processes(list(servers))
    before = {}
    for proc in procs:
        try:
            before[proc.pid] = sum(proc.cpu_times()[:2])
        except Exception:
            pass
    if client:
        result = run_wrk(client, mode, port, path, args.clients, args.threads, args.duration)
    else:
        result = asyncio.run(_asyncio_load(mode, port, path, args.clients, args.duration))
    cpu: dict[str, float] = {}
    for proc in procs:
        try:
            used = sum(proc.cpu_times()[:2]) - before[proc.pid]
        except Exception:
            continue
        role = cpu_role(proc)
        cpu[role] = cpu.get(role, 0.0) + used
    requests = max(result["requests"], 1)
    result["cpu_us"] = {role: used / requests * 1e6 for role, used in cpu.items() if used > 0}
    return result


def cpu_text(result: dict) -> str:
    """CPU microseconds per request, by process role."""
    parts = sorted(result.get("cpu_us", {}).items(), key=lambda kv: -kv[1])
    total = sum(v for _, v in parts)
    return f"{total:.0f} us (" + ", ".join(f"{k} {v:.0f}" for k, v in parts) + ")"


def warm_up(client: str | None, port: int, path: str, args) -> None:
    """A short unmeasured run, so that both servers are measured warm."""
    if args.warmup <= 0:
        return
    saved = args.duration
    args.duration = args.warmup
    try:
        load_run(client, "add", port, path, args)
    finally:
        args.duration = saved


# -- the run ----------------------------------------------------------------------------------

def main(argv=None) -> int:
    from harness import add_calm_options

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64, help="concurrent connections (default 64)")
    parser.add_argument("--duration", type=float, default=10, help="seconds per measured run (default 10)")
    parser.add_argument("--warmup", type=float, default=2, help="unmeasured seconds before the first runs")
    parser.add_argument("--rounds", type=int, default=1,
                        help="echo and add runs alternate this many times (default 1)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument("--client", choices=("auto", "wrk", "asyncio"), default="auto",
                        help="auto: wrk if it is or can be installed, else asyncio")
    parser.add_argument("--workers", type=int, default=2, help="mq --workers (default 2)")
    parser.add_argument("--sync", default="fs", choices=("fs", "file"), help="mq --sync (default fs)")
    parser.add_argument("--daemon-args", default="",
                        help="more mq options, one string, e.g. '--no-access-log'")
    parser.add_argument("--batch-stats", action="store_true",
                        help="run mq with --log-level debug and report the save actors' batch sizes")
    parser.add_argument("--disk-seconds", type=float, default=5, help="seconds of the disk ceiling")
    add_calm_options(parser, "root")
    parser.add_argument("--keep", action="store_true", help="keep the temporary root and logs")
    parser.add_argument("--serve-echo-actor", metavar="ENDPOINT", help=argparse.SUPPRESS)
    parser.add_argument("--serve-echo-front", nargs=2, metavar=("PORT", "ENDPOINT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_echo_actor:
        serve_echo_actor(args.serve_echo_actor)
        return 0
    if args.serve_echo_front:
        serve_echo_front(int(args.serve_echo_front[0]), args.serve_echo_front[1])
        return 0

    from harness import (Daemon, code_under_test, filesystem, loadavg, machine,
                         wait_for_calm)

    def say(text: str) -> None:
        print(text, flush=True)

    client = None
    if args.client != "asyncio":
        client = find_wrk(say)
        if client is None and args.client == "wrk":
            say("wrk is not available")
            return 2
    base = tempfile.mkdtemp(prefix="mq-bench-tp-", dir=args.tmp)
    root = os.path.join(base, "root")
    say(f"machine: {machine()}, file system: {filesystem(base)}")
    say(f"mq: {code_under_test()}")
    say(f"client: {client or 'asyncio'}; {args.clients} clients; {args.duration:g} s per run; "
        f"rounds: {args.rounds}")
    echo = daemon = None
    results: dict[str, list] = {"echo": [], "add": []}
    try:
        load = wait_for_calm(args.max_load, args.calm_wait, say)
        load_before = loadavg()
        say(f"load before: {load_before}")

        os.makedirs(os.path.join(base, "disk"))
        disk = disk_ceiling(os.path.join(base, "disk"), args.disk_seconds)
        shutil.rmtree(os.path.join(base, "disk"))
        say(f"disk raw limit: {disk:,.0f} create+write+fsync+rename+dir-fsync per second")

        echo = Echo(base)
        extra = args.daemon_args.split() + (["--log-level", "debug"] if args.batch_stats else [])
        daemon = Daemon(root, args.workers, args.sync, extra=extra).start()
        say(f"daemon: {daemon.command}")
        path = f"/{QUEUE}/messages"
        warm_up(client, echo.port, "/echo/messages", args)
        warm_up(client, daemon.port, f"/{QUEUE}-warmup/messages", args)
        for r in range(args.rounds):
            say(f"round {r + 1}: load {loadavg()}")
            results["echo"].append(load_run(client, "add", echo.port, "/echo/messages", args,
                                            [p.pid for p in echo.procs]))
            e = results["echo"][-1]
            say(f"  echo ceiling: {e['requests_per_s']:,.0f} requests/s, p50 {e['p50_ms']:.1f} ms, "
                f"p99 {e['p99_ms']:.1f} ms, errors {e['errors']}")
            say(f"    CPU per request: {cpu_text(e)}")
            results["add"].append(load_run(client, "add", daemon.port, path, args,
                                           [daemon.proc.pid]))
            a = results["add"][-1]
            say(f"  mq adds:      {a['messages_per_s']:,.0f} messages/s, p50 {a['p50_ms']:.1f} ms, "
                f"p99 {a['p99_ms']:.1f} ms, errors {a['errors']}")
            say(f"    CPU per request: {cpu_text(a)}")
        echo.stop()
        echo = None
        say(f"fetch+delete: load {loadavg()}")
        from harness import Client

        warm = Client(daemon.port)
        status, headers, _ = warm.request("GET", path)  # Builds the fetch actor's index.
        if status == 200:
            warm.request("DELETE", f"{path}/{headers['X-Message-Id']}")
        warm.close()
        fetch = load_run(client, "fetch_delete", daemon.port, path, args, [daemon.proc.pid])
        say(f"  mq fetch+delete: {fetch['messages_per_s']:,.0f} messages/s "
            f"({fetch['requests_per_s']:,.0f} requests/s), p50 {fetch['p50_ms']:.1f} ms, "
            f"p99 {fetch['p99_ms']:.1f} ms per {fetch['latency_of']}, errors {fetch['errors']}")
        say(f"    CPU per request: {cpu_text(fetch)}")
        load_after = loadavg()
        batches = batch_stats(daemon.log_path) if args.batch_stats else ""
    finally:
        if echo:
            echo.stop()
        if daemon:
            daemon.stop()
        if args.keep:
            say(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)

    echo_rate = statistics.median(r["requests_per_s"] for r in results["echo"])
    add_rate = statistics.median(r["messages_per_s"] for r in results["add"])
    add_p99 = max(r["p99_ms"] for r in results["add"])
    ratios = [a["messages_per_s"] / e["requests_per_s"]
              for a, e in zip(results["add"], results["echo"])]
    ratio = statistics.median(ratios)
    errors = sum(r["errors"] for r in results["add"])
    say("")
    say(f"load before {load_before} (1-minute {load:.2f}), after {load_after}")
    say(f"client: {results['add'][0]['command']}")
    say("")
    say("| what | per second | p50 ms | p99 ms | errors |")
    say("|---|---:|---:|---:|---:|")
    say(f"| disk raw limit (create+write+fsync+rename+dir fsync, 1 thread) | {disk:,.0f} | | | |")
    for i, (e, a) in enumerate(zip(results["echo"], results["add"])):
        n = f" (round {i + 1})" if args.rounds > 1 else ""
        say(f"| echo ceiling: Tornado + 1 ZeroMQ round trip, {args.clients} clients{n} "
            f"| {e['requests_per_s']:,.0f} | {e['p50_ms']:.1f} | {e['p99_ms']:.1f} | {e['errors']} |")
        say(f"| mq durable adds, {args.clients} clients{n} "
            f"| {a['messages_per_s']:,.0f} | {a['p50_ms']:.1f} | {a['p99_ms']:.1f} | {a['errors']} |")
    say(f"| mq fetch+delete, {args.clients} clients (messages; latency per {fetch['latency_of']}) "
        f"| {fetch['messages_per_s']:,.0f} | {fetch['p50_ms']:.1f} | {fetch['p99_ms']:.1f} "
        f"| {fetch['errors']} |")
    say("")
    say("CPU per request, summed over each server's processes (microseconds; the client's not "
        "counted):")
    say(f"  echo ceiling:     {cpu_text(results['echo'][-1])}")
    say(f"  mq adds:          {cpu_text(results['add'][-1])}")
    say(f"  mq fetch+delete:  {cpu_text(fetch)}")
    if args.batch_stats:
        say(f"  save batches:     {batches}")
    say("")
    say(f"adds / echo ceiling: {ratio:.2f} (per round: {', '.join(f'{r:.2f}' for r in ratios)}); "
        f"adds / disk raw limit: {add_rate / disk:.2f}")
    met = ratio >= 0.8 and add_p99 < 100 and errors == 0
    say(f"target (adds >= 0.8 x echo, p99 < 100 ms, no errors): "
        f"{'met' if met else 'MISSED'} (ratio {ratio:.2f}, worst p99 {add_p99:.1f} ms, "
        f"echo {echo_rate:,.0f}/s, adds {add_rate:,.0f}/s)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
