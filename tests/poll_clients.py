"""Long polls through every front end, each on its own connection, that a test can abandon.

A `Poll` sends its request at once and `answer()` reads the answer, or, at `cancel_at`, closes
the connection unanswered, as a client that goes away does. Kinds: mq's REST fetch (`rest`),
its batch fetch (`rest_batch`, ?max=), MessagePack-RPC `pull` (`rpc`) and the SQS API's
ReceiveMessage with WaitTimeSeconds (`sqs`, JSON protocol); and the REST pull-any
(`rest_any`, /_mq/messages?qre= with the queue's name as the pattern). Every answer comes back
in the same words: the deliveries (id, receipt) it carried, and whether it was empty.
"""

import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

import msgpack

KINDS = ("rest", "rest_batch", "rpc", "sqs")
#: Most messages a rest_batch or sqs poll asks for.
BATCH = 3


@dataclass
class Answer:
    """What a poll got: its status (HTTP, or "ok"/"empty"/"error" over RPC), the deliveries
    (id, receipt), when it came (monotonic), and the raw body for a failure's message."""

    status: object
    deliveries: list = field(default_factory=list)
    at: float = 0.0
    body: object = None

    @property
    def empty(self) -> bool:
        """True when the poll was answered with no message."""
        return self.status in (204, "empty") or (self.status == 200 and not self.deliveries)

    @property
    def failed(self) -> bool:
        """True for any answer that is neither a message nor empty."""
        return self.status not in (200, 204, "ok", "empty")


class Poll:
    """One long poll of `wait` seconds on its own connection (rpc_port: the RPC server's)."""

    def __init__(self, kind: str, port: int, queue: str, wait: float, rpc_port: int = 0):
        assert kind in KINDS or kind == "rest_any", kind
        self.kind, self.queue, self.wait = kind, queue, wait
        self.sock = socket.create_connection(("127.0.0.1", rpc_port if kind == "rpc" else port),
                                             timeout=30)
        self.sent = time.monotonic()
        self.sock.sendall(self._request())

    def _request(self) -> bytes:
        if self.kind == "rpc":
            return msgpack.packb([0, 1, "pull", [self.queue, self.wait]], use_bin_type=True)
        if self.kind == "sqs":
            body = json.dumps({"QueueUrl": self.queue, "WaitTimeSeconds": int(self.wait),
                               "MaxNumberOfMessages": BATCH}).encode()
            head = ("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: AmazonSQS.ReceiveMessage\r\n"
                    f"Content-Type: application/x-amz-json-1.0\r\nContent-Length: {len(body)}\r\n\r\n")
            return head.encode() + body
        path, query, accept = f"/{self.queue}/messages", {"wait": self.wait}, ""
        if self.kind == "rest_batch":
            query["max"], accept = BATCH, "Accept: application/json\r\n"
        elif self.kind == "rest_any":
            path, query["qre"] = "/_mq/messages", self.queue
        return (f"GET {path}?{urlencode(query)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"{accept}\r\n").encode()

    def answer(self, cancel_at: float | None = None, limit: float = 30.0) -> Answer | None:
        """The poll's answer; None when `cancel_at` (monotonic) came first: the connection is
        then closed unanswered. Waits at most `limit` seconds past the poll's wait."""
        until = self.sent + self.wait + limit if cancel_at is None else cancel_at
        try:
            self.sock.settimeout(max(0.001, until - time.monotonic()))
            return self._read_rpc() if self.kind == "rpc" else self._read_http()
        except TimeoutError:
            if cancel_at is None:
                raise AssertionError(f"{self.kind} poll of {self.wait} s: no answer in "
                                     f"{limit} s past its wait") from None
            return None
        finally:
            self.sock.close()

    def _read_rpc(self) -> Answer:
        unpacker = msgpack.Unpacker(raw=False)
        while True:
            data = self.sock.recv(65536)
            assert data, "the RPC server closed the connection unanswered"
            unpacker.feed(data)
            for _, _, error, result in unpacker:
                at = time.monotonic()
                if error is not None:
                    return Answer("error", at=at, body=error)
                if result == "empty":
                    return Answer("empty", at=at)
                return Answer("ok", [(result["id"], result["receipt"])], at, result)

    def _read_http(self) -> Answer:
        resp = http.client.HTTPResponse(self.sock)
        resp.begin()
        body = resp.read()
        at = time.monotonic()
        if resp.status != 200:
            return Answer(resp.status, at=at, body=body)
        if self.kind == "sqs":
            got = [(m["MessageId"], m["ReceiptHandle"]) for m in json.loads(body).get("Messages", [])]
        elif self.kind == "rest_batch":
            got = [(m["id"], m["receipt"]) for m in json.loads(body)["messages"]]
        else:
            got = [(resp.headers["X-Message-Id"], resp.headers["X-Receipt"])]
        return Answer(200, got, at, body)
