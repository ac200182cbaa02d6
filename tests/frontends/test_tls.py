"""TLS on every port (--tls-cert, --tls-key): a certificate authority made here signs the
daemon's certificate, and clients that verify it against that authority (httpx, mq's Client
and mqctl with a CA, boto3 with verify=, a MessagePack-RPC client over ssl) talk to the HTTP,
SQS and RPC ports; clients that do not trust it are refused, and a long poll over TLS still
sees its client hang up."""

import itertools
import os
import socket
import ssl
import subprocess
import time

import httpx
import msgpack
import pytest

from cli_support import run_ctl
from support import Daemon, Response, command, free_port, poll_for, request

trustme = pytest.importorskip("trustme")


class TlsDaemon(Daemon):
    """A daemon whose ports speak TLS; its own requests verify the test's authority."""

    def __init__(self, *args, ca_file, **kwargs):
        super().__init__(*args, **kwargs)
        self.context = ssl.create_default_context(cafile=str(ca_file))

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None, timeout: float = 15.0) -> Response:
        """One HTTPS request to this daemon, verified against the test's authority."""
        return request(self.port, method, path, body, headers, timeout, context=self.context)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """An authority and a certificate it signed for 127.0.0.1, as PEM files."""
    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    paths = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    leaf.private_key_pem.write_to_path(str(paths["key"]))
    for i, pem in enumerate(leaf.cert_chain_pems):  # The certificate, then its chain.
        pem.write_to_path(str(paths["cert"]), append=i > 0)
    return paths


@pytest.fixture(scope="module")
def tls_mq(tmp_path_factory, pki):
    """A daemon with TLS on its HTTP, SQS and RPC ports."""
    workdir = tmp_path_factory.mktemp("tls")
    daemon = TlsDaemon(workdir / "root", workdir, workers=2, timeout=30, ca_file=pki["ca"], args=(
        f"--tls-cert={pki['cert']}", f"--tls-key={pki['key']}",
        f"--sqs-port={free_port()}", f"--rpc-port={free_port()}"))
    daemon.sqs_port = int(daemon.args[2].split("=")[1])
    daemon.rpc_port = int(daemon.args[3].split("=")[1])
    try:
        daemon.start().wait_ready()
        yield daemon
    finally:
        daemon.cleanup()


def test_a_pair_that_cannot_serve_stops_mq_before_it_starts(pki, tmp_path):
    from mq.config import load_options
    from mq.errors import Invalid
    with pytest.raises(Invalid, match="give both or neither"):
        load_options([f"--tls-cert={pki['cert']}"], environ={})
    other = tmp_path / "other-key.pem"
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(other))
    with pytest.raises(Invalid, match="cannot load the pair"):
        load_options([f"--tls-cert={pki['cert']}", f"--tls-key={other}"], environ={})
    with pytest.raises(Invalid, match="No such file"):
        load_options([f"--tls-cert={tmp_path / 'none.pem'}", f"--tls-key={other}"], environ={})
    bad = subprocess.run([command("mq"), f"--root={tmp_path / 'root'}", f"--port={free_port()}",
                          f"--tls-cert={pki['cert']}", f"--tls-key={other}"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--tls-cert" in bad.stderr


def test_the_http_port_serves_clients_that_trust_the_authority(tls_mq, pki):
    url = f"https://127.0.0.1:{tls_mq.port}"
    with httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=str(pki["ca"]))) as client:
        assert client.post("/tls-h/messages", content=b"over tls").status_code == 201
        got = client.get("/tls-h/messages")
        assert (got.status_code, got.content) == (200, b"over tls")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(url + "/_mq/health")  # The system's authorities do not know the test's.
    with socket.create_connection(("127.0.0.1", tls_mq.port), timeout=10) as plain:
        plain.sendall(b"GET /_mq/health HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            answer = plain.recv(4096)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"HTTP/")  # No plain HTTP on it.


def test_mq_s_client_and_mqctl_take_a_ca(tls_mq, pki):
    from mq.client import Client
    url = f"https://127.0.0.1:{tls_mq.port}"
    with Client(url, ca=str(pki["ca"])) as client:
        message_id = client.put("tls-c", b"from the client")
    put = run_ctl(["--url", url, "--ca", str(pki["ca"]), "put", "tls-c", "from mqctl"])
    assert put.returncode == 0, put.stderr
    got = run_ctl(["--url", url, "get", "tls-c", "--ack"], env={**os.environ, "MQ_CA": str(pki["ca"])})
    assert got.returncode == 0 and message_id in got.stdout.decode(), got.stderr
    # Without the authority: refused at once, not tried again (backoff 30 s would show).
    with Client(url, retries=1, backoff=30, max_backoff=30) as client:
        started = time.monotonic()
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            client.put("tls-c", b"untrusted")
        assert time.monotonic() - started < 20
    refused = run_ctl(["--url", url, "get", "tls-c"])
    assert refused.returncode != 0 and b"certificate verify failed" in refused.stderr
    for where in (["--ca", str(pki["ca"])], []):
        status = run_ctl(["--url", url, *where, "status"], env={**os.environ, "MQ_CA": str(pki["ca"])})
        assert status.returncode == 0 and f"mq at {url}: ok" in status.stdout.decode(), status.stderr


def test_the_sqs_port_serves_boto3_verifying_the_authority(tls_mq, pki):
    import boto3
    from botocore.config import Config

    endpoint = f"https://127.0.0.1:{tls_mq.sqs_port}"
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                       verify=str(pki["ca"]), aws_access_key_id="any", aws_secret_access_key="any",
                       config=Config(retries={"max_attempts": 0}))
    url = sqs.create_queue(QueueName="tls-sqs")["QueueUrl"]
    assert url == f"{endpoint}/000000000000/tls-sqs"
    sqs.send_message(QueueUrl=url, MessageBody="secure")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    assert [m["Body"] for m in got] == ["secure"]
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") is None


def test_the_rpc_port_speaks_tls(tls_mq, pki):
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    raw = socket.create_connection(("127.0.0.1", tls_mq.rpc_port), timeout=30)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        unpacker, ids = msgpack.Unpacker(raw=False), itertools.count(1)

        def call(method, *params):
            sock.sendall(msgpack.packb([0, next(ids), method, list(params)], use_bin_type=True))
            while True:
                for value in unpacker:
                    return value
                unpacker.feed(sock.recv(65536))

        assert call("push", "tls-rpc", "over rpc")[2:] == [None, "ok"]
        _, _, error, pulled = call("pull", "tls-rpc")
        assert error is None and pulled["content"] == "over rpc"
    with pytest.raises(ssl.SSLCertVerificationError):
        ssl.create_default_context().wrap_socket(
            socket.create_connection(("127.0.0.1", tls_mq.rpc_port), timeout=30),
            server_hostname="127.0.0.1")


def test_a_long_poll_over_tls_sees_its_client_hang_up(tls_mq):
    def polls():
        return [e for e in tls_mq.events("http.request") if e.get("path") == "/tls-poll/messages"]

    assert tls_mq.request("PUT", "/tls-poll").status in (200, 201)
    before = len(polls())
    raw = socket.create_connection(("127.0.0.1", tls_mq.port), timeout=30)
    with tls_mq.context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(b"GET /tls-poll/messages?wait=20 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        # One more round trip to the front before hanging up, so it has read the request.
        poll_for(lambda: tls_mq.request("GET", "/_mq/health").status == 200, 30)
    # The poll ends (and is logged) when the front sees the client gone, long before 20 s.
    poll_for(lambda: len(polls()) > before, 10, what="the abandoned poll to end")
    tls_mq.add("tls-poll", b"kept")
    assert tls_mq.fetch("tls-poll").body == b"kept"
