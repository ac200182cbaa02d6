"""What the access-control tests share: a token file with SQS access keys, a daemon that
serves mq's API, MessagePack-RPC and SQS with it, and clients of the three that act as a token.
"""

import hashlib
import itertools
import json
import socket

import msgpack

from support import Daemon, free_port, poll_for, request

REGION = "us-east-1"


def entry(name: str, secret: str, scopes: list[str], queues: str | None = None,
          key: str | None = None) -> str:
    """One [[tokens]] table of a token file (key: its SQS aws_access_key_id)."""
    lines = ["[[tokens]]", f'name = "{name}"',
             f'sha256 = "{hashlib.sha256(secret.encode()).hexdigest()}"',
             f"scopes = {json.dumps(scopes)}"]
    if queues is not None:
        lines.append(f"queues = '{queues}'")  # A TOML literal string: no escapes in the regex.
    if key is not None:
        lines.append(f'aws_access_key_id = "{key}"')
    return "\n".join(lines) + "\n\n"


def sqs_secret(key: str) -> str:
    """The SQS secret key of an access key id in the tests' credentials file."""
    return f"secret-of-{key}"


class AccessDaemon(Daemon):
    """A daemon with a token file, MessagePack-RPC and the SQS API checking signatures; its own
    helper requests (wait_ready, add) carry the admin token `admin_secret`."""

    def __init__(self, workdir, tokens: str, keys: list[str], admin_secret: str):
        self.token_path = workdir / "tokens.toml"
        self.token_path.write_text(tokens)
        credentials = workdir / "credentials"
        credentials.write_text("".join(
            f"[k{n}]\naws_access_key_id = {key}\naws_secret_access_key = {sqs_secret(key)}\n\n"
            for n, key in enumerate(keys)))
        self.rpc_port = free_port()
        self.admin_secret = admin_secret
        super().__init__(workdir / "root", workdir, workers=2, log_file=workdir / "mq.log",
                         args=(f"--token-file={self.token_path}", f"--rpc-port={self.rpc_port}",
                               f"--sqs-credentials={credentials}"))

    def request(self, method, path, body=None, headers=None, timeout=15.0):
        """One HTTP request, with the admin token unless headers give another."""
        return super().request(method, path, body, {
            "Authorization": f"Bearer {self.admin_secret}", **(headers or {})}, timeout)

    def ready(self) -> "AccessDaemon":
        """Started, answering HTTP and accepting RPC connections."""
        self.start().wait_ready()
        poll_for(lambda: socket.create_connection(("127.0.0.1", self.rpc_port)).close() or True,
                 10, what="the RPC port to accept", ignore=(OSError,))
        return self

    def as_token(self, method, path, secret, body=None, headers=None):
        """One HTTP request with a bearer token."""
        return request(self.port, method, path, body,
                       {"Authorization": f"Bearer {secret}", **(headers or {})})

    def sqs(self, key: str):
        """A boto3 SQS client signing with an access key of the credentials file."""
        import boto3
        from botocore.config import Config
        return boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{self.port}",
                            region_name=REGION, aws_access_key_id=key,
                            aws_secret_access_key=sqs_secret(key),
                            config=Config(retries={"max_attempts": 0}))

    def arn(self, queue: str) -> str:
        """The ARN of a queue as this daemon's SQS API names it."""
        return f"arn:aws:sqs:{REGION}:000000000000:{queue}"

    def queue_url(self, queue: str) -> str:
        """The SQS URL of a queue."""
        return f"http://127.0.0.1:{self.port}/000000000000/{queue}"


class RpcClient:
    """A MessagePack-RPC client on one TCP connection, one request at a time."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.unpacker = msgpack.Unpacker(raw=False)
        self.ids = itertools.count(1)

    def answer(self, method: str, *params) -> tuple:
        """(error, result) of one call."""
        msgid = next(self.ids)
        self.sock.sendall(msgpack.packb([0, msgid, method, list(params)], use_bin_type=True))
        while True:
            for value in self.unpacker:
                kind, got, error, result = value
                assert (kind, got) == (1, msgid), value
                return error, result
            data = self.sock.recv(65536)
            assert data, "the RPC server closed the connection"
            self.unpacker.feed(data)

    def close(self) -> None:
        """Hang up."""
        self.sock.close()
