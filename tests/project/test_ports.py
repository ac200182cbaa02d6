"""The ports tests and benchmarks start daemons on (bench/ports.py): below the kernel's range
for outgoing connections, from this process's own block, never one something listens on."""

import socket

from support import free_port

from ports import BLOCK, FIRST_PORT, WORKER_BLOCKS, cursor, ephemeral_start, listenable, own_block


def test_ports_come_from_below_the_range_client_connections_draw_from():
    block = own_block()
    assert FIRST_PORT <= block.start and block.stop <= ephemeral_start()
    assert FIRST_PORT > 10080, "a browser refuses port 10080: the dashboard's tests browse daemons"
    ports = {free_port() for _ in range(50)}
    assert all(port in block for port in ports)
    assert len(ports) == 50, "a port handed out twice in a row"


def test_each_xdist_worker_has_a_block_of_its_own(monkeypatch):
    blocks = set()
    for n in range(WORKER_BLOCKS):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{n}")
        blocks.add(own_block().start)
    assert len(blocks) == WORKER_BLOCKS
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert own_block().start >= FIRST_PORT + WORKER_BLOCKS * BLOCK, "a lone process in a worker's block"


def test_a_port_something_listens_on_is_skipped():
    block, _ = cursor()
    spare = next(port for port in block if listenable(port))
    taken = []
    try:
        # Listen on the whole block but one port (as a daemon binds: SO_REUSEADDR, so a port
        # an earlier daemon's connection holds in TIME_WAIT is taken too): that one is the
        # only answer. A port that refuses even this is another listener's: not free either.
        for port in block:
            if port == spare:
                continue
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
                sock.listen()
                taken.append(sock)
            except OSError:
                sock.close()
        assert free_port() == spare
    finally:
        for sock in taken:
            sock.close()
