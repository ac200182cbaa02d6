"""The asyncio clients of bench/peers.py: beanstalkd, Redis (RESP) and mq (HTTP), each speaking
its raw protocol on keep-alive connections, and the loop that drives N of them at once.

Each client has put(), which adds one message, and take(), which takes the oldest and
acknowledges it (beanstalkd reserve + delete; Redis LMOVE to a work list + LREM, the reliable
queue pattern; mq GET + DELETE). mq also has put_batch() and take_batch() (the batch API).
Each returns how many messages it handled, so that an empty queue shows as 0; mq's calls return
None for a 503 (overload, or an actor slower than --actor-timeout), which the loop counts and
retries.
"""

import asyncio
import time

import orjson
from harness import AsyncClient

BODY = b"m" * 100


class Unsupported(Exception):
    """The server answered a request this workload needs in a way that shows it lacks it."""


class Beanstalk:
    """beanstalkd: put, reserve-with-timeout 0 + delete, on one tube."""

    def __init__(self, port: int, tube: str):
        self.port, self.tube = port, tube

    async def open(self) -> "Beanstalk":
        """Connect, use and watch the tube."""
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        for line in (f"use {self.tube}", f"watch {self.tube}", "ignore default"):
            self.writer.write(line.encode() + b"\r\n")
            await self.reader.readline()
        return self

    async def put(self) -> int:
        """put: answered INSERTED once the binlog has it (fsync with -f0)."""
        self.writer.write(b"put 0 0 60 %d\r\n%s\r\n" % (len(BODY), BODY))
        line = await self.reader.readline()
        if not line.startswith(b"INSERTED"):
            raise RuntimeError(f"beanstalkd put: {line!r}")
        return 1

    async def take(self) -> int:
        """reserve-with-timeout 0, then delete the job."""
        self.writer.write(b"reserve-with-timeout 0\r\n")
        line = await self.reader.readline()
        if line.startswith(b"TIMED_OUT"):
            return 0
        _, job, size = line.split()
        await self.reader.readexactly(int(size) + 2)
        self.writer.write(b"delete %s\r\n" % job)
        line = await self.reader.readline()
        if not line.startswith(b"DELETED"):
            raise RuntimeError(f"beanstalkd delete: {line!r}")
        return 1

    def close(self) -> None:
        """Close the connection."""
        self.writer.close()


class Redis:
    """Redis in RESP: LPUSH; LMOVE to a work list then LREM from it (take and acknowledge)."""

    def __init__(self, port: int, key: str):
        self.port, self.key = port, key.encode()
        self.work = self.key + b":work"

    async def open(self) -> "Redis":
        """Connect."""
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def command(self, *words: bytes):
        """Send one command; return its reply (an int, bytes, or None for a null)."""
        out = [b"*%d\r\n" % len(words)]
        for word in words:
            out.append(b"$%d\r\n%s\r\n" % (len(word), word))
        self.writer.write(b"".join(out))
        line = await self.reader.readline()
        if line[:1] == b":":
            return int(line[1:])
        if line[:1] == b"$":
            size = int(line[1:])
            return None if size < 0 else (await self.reader.readexactly(size + 2))[:-2]
        if line[:1] == b"+":
            return line[1:].strip()
        raise RuntimeError(f"redis: {line!r}")

    async def put(self) -> int:
        """LPUSH (with appendfsync always, answered after the AOF's fsync)."""
        await self.command(b"LPUSH", self.key, BODY)
        return 1

    async def take(self) -> int:
        """LMOVE key key:work RIGHT LEFT, then LREM key:work 1 (the acknowledgement)."""
        body = await self.command(b"LMOVE", self.key, self.work, b"RIGHT", b"LEFT")
        if body is None:
            return 0
        await self.command(b"LREM", self.work, b"1", body)
        return 1

    def close(self) -> None:
        """Close the connection."""
        self.writer.close()


class Mq:
    """mq over HTTP/1.1 keep-alive: single and batch adds, fetch + delete, batch fetch + ack."""

    def __init__(self, port: int, queue: str, batch: int = 100):
        self.port, self.path, self.batch = port, f"/{queue}/messages", batch
        lines = [orjson.dumps({"body": BODY.decode()}) for _ in range(batch)]
        self.batch_body = b"\n".join(lines) + b"\n"

    async def open(self) -> "Mq":
        """Connect."""
        self.http = await AsyncClient(self.port).open()
        return self

    async def put(self) -> int:
        """POST one message: 201 once durable."""
        status, _, body = await self.http.request("POST", self.path, BODY,
                                                  {"Content-Type": "text/plain"})
        if status == 503:
            return None
        if status != 201:
            raise RuntimeError(f"mq add: {status} {body[:200]!r}")
        return 1

    async def take(self) -> int:
        """GET the oldest, then DELETE it with its receipt."""
        status, headers, body = await self.http.request("GET", self.path)
        if status == 204:
            return 0
        if status == 503:
            return None
        if status != 200:
            raise RuntimeError(f"mq fetch: {status} {body[:200]!r}")
        receipt = headers.get("x-receipt")
        target = f"{self.path}/{headers['x-message-id']}"
        target += f"?receipt={receipt}" if receipt else ""
        status, _, body = await self.http.request("DELETE", target)
        if status == 503:
            return None  # The message comes back after the queue's timeout.
        if status != 204:
            raise RuntimeError(f"mq delete: {status} {body[:200]!r}")
        return 1

    async def put_batch(self) -> int:
        """POST self.batch messages as JSON lines: 201 with every id once all are durable."""
        status, _, body = await self.http.request("POST", self.path, self.batch_body,
                                                  {"Content-Type": "application/x-ndjson"})
        added = orjson.loads(body).get("messages") if status in (200, 201) else None
        if status // 100 == 4 or (status == 201 and not isinstance(added, list)):
            raise Unsupported(f"a batch add answered {status} {body[:120]!r}")
        if status == 503:
            return None
        if status != 201 or len(added) != self.batch:
            raise RuntimeError(f"mq batch add: {status} {body[:200]!r}")
        return self.batch

    async def take_batch(self) -> int:
        """GET ?max=batch as JSON, then POST their receipts to .../ack."""
        status, headers, body = await self.http.request(
            "GET", f"{self.path}?max={self.batch}", None, {"Accept": "application/json"})
        if status == 204:
            return 0
        if status == 503:
            return None
        if status // 100 == 4 or (status == 200 and "x-count" not in headers):
            raise Unsupported(f"a batch fetch answered {status} without X-Count")
        receipts = [m["receipt"] for m in orjson.loads(body)["messages"]]
        status, _, body = await self.http.request(
            "POST", f"{self.path}/ack", orjson.dumps({"receipts": receipts}),
            {"Content-Type": "application/json"})
        if status // 100 == 4:
            raise Unsupported(f"a batch ack answered {status} {body[:120]!r}")
        if status == 503:
            return None  # The messages come back after the queue's timeout.
        if status != 200 or orjson.loads(body)["acked"] != len(receipts):
            raise RuntimeError(f"mq batch ack: {status} {body[:200]!r}")
        return len(receipts)

    def close(self) -> None:
        """Close the connection."""
        self.http.close()


async def drive(make, op: str, connections: int, seconds: float | None) -> dict:
    """Run op on `connections` clients made by make(), each in a loop, for `seconds` (None:
    until op finds the queue empty); return messages, seconds, and each call's latency."""
    clients = [await make().open() for _ in range(connections)]
    latencies: list[float] = []
    counts = [0, 0]  # Messages handled, calls refused.

    async def loop(client) -> None:
        call = getattr(client, op)
        while seconds is None or time.perf_counter() < deadline:
            t0 = time.perf_counter()
            done = await call()
            if done is None:
                counts[1] += 1
                await asyncio.sleep(0.05)
                continue
            if not done:
                return
            latencies.append(time.perf_counter() - t0)
            counts[0] += done

    started = time.perf_counter()
    deadline = started + (seconds or 0)
    try:
        await asyncio.gather(*(loop(c) for c in clients))
    finally:
        for client in clients:
            client.close()
    return {"messages": counts[0], "seconds": time.perf_counter() - started,
            "latencies": latencies, "refused": counts[1]}
