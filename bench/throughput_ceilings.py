"""The two ceilings of bench/throughput.py: the echo ceiling (a Tornado front doing one ZeroMQ
round trip to an echo process, and nothing else) and the disk's raw limit (create + write +
fsync + rename + directory fsync, one thread).

The echo's two processes are started as `bench/throughput.py --serve-echo-actor ENDPOINT` and
`--serve-echo-front PORT ENDPOINT`, which call serve_echo_actor and serve_echo_front here.
"""

import asyncio
import os
import subprocess
import sys
import time

from harness import Client
from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
BODY = b"m" * 100

# -- the echo ceiling: two processes, started by bench/throughput.py---------------------------

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
    """A Tornado HTTP server whose handler does one ZeroMQ round trip and nothing else, on the
    event loop mq's front runs by default (`--event-loop auto`), so that a ratio to the echo
    compares mq's work, not two loops."""
    import itertools

    import tornado.web
    import zmq
    import zmq.asyncio

    from mq import event_loops

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

    with asyncio.Runner(loop_factory=event_loops.factory(event_loops.pick()[0])) as runner:
        runner.run(main())


class Echo:
    """The echo process and its Tornado front, as child processes of this benchmark."""

    def __init__(self, base: str):
        self.port = free_port()
        endpoint = f"ipc://{base}/echo.sock"
        me = [sys.executable, os.path.join(HERE, "throughput.py")]
        self.procs = [
            subprocess.Popen([*me, "--serve-echo-actor", endpoint], stdin=subprocess.DEVNULL),
            subprocess.Popen([*me, "--serve-echo-front", str(self.port), endpoint],
                             stdin=subprocess.DEVNULL),
        ]
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
