"""The measured runs of bench/throughput.py: wrk (with bench/wrk/*.lua) or a keep-alive asyncio
client drives adds or fetch+delete at N connections, and the servers' processes' CPU time is
taken before and after, to give CPU microseconds per request by process role.
"""

import asyncio
import os
import re
import shutil
import subprocess
import time

from harness import AsyncClient, percentile
from throughput_ceilings import BODY, HERE

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



async def asyncio_load(mode: str, port: int, path: str, clients: int, duration: float) -> dict:
    """One run of the asyncio client; mode "add" (POST) or "fetch_delete" (GET, then DELETE)."""
    latencies: list[float] = []
    counts = {"requests": 0, "errors": 0, "messages": 0}
    deadline = time.monotonic() + duration

    async def one_client() -> None:
        conn = await AsyncClient(port).open()
        try:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                if mode == "add":
                    status, headers, _ = await conn.request("POST", path, BODY,
                                                            {"Content-Type": "text/plain"})
                else:
                    status, headers, _ = await conn.request("GET", path)
                counts["requests"] += 1
                if mode == "add":
                    counts["messages" if status == 201 else "errors"] += 1
                elif status == 200:
                    status, _, _ = await conn.request("DELETE",
                                                      f"{path}/{headers['x-message-id']}")
                    counts["requests"] += 1
                    counts["messages" if status == 204 else "errors"] += 1
                elif status != 204:
                    counts["errors"] += 1
                else:
                    continue  # Nothing to fetch: not a message, not timed.
                latencies.append(time.perf_counter() - started)
        finally:
            conn.close()

    started = time.monotonic()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    seconds = time.monotonic() - started
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
        result = asyncio.run(asyncio_load(mode, port, path, args.clients, args.duration))
    cpu: dict[str, float] = {}
    busiest = ("", 0.0)  # The one process that would saturate a core first.
    for proc in procs:
        try:
            used = sum(proc.cpu_times()[:2]) - before[proc.pid]
        except Exception:
            continue
        role = cpu_role(proc)
        cpu[role] = cpu.get(role, 0.0) + used
        if used > busiest[1]:
            busiest = (f"{role} (pid {proc.pid})", used)
    requests = max(result["requests"], 1)
    result["cpu_us"] = {role: used / requests * 1e6 for role, used in cpu.items() if used > 0}
    result["busiest"] = (busiest[0], busiest[1] / requests * 1e6)
    return result


def cpu_text(result: dict) -> str:
    """CPU microseconds per request, by process role."""
    parts = sorted(result.get("cpu_us", {}).items(), key=lambda kv: -kv[1])
    total = sum(v for _, v in parts)
    text = f"{total:.0f} us (" + ", ".join(f"{k} {v:.0f}" for k, v in parts) + ")"
    name, used = result.get("busiest", ("", 0.0))
    if name:
        text += f"; busiest process {name} {used:.0f} us, {used / max(total, 1e-9):.0%}"
    return text


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
