"""`searchgym serve-openenv` under hostile clients (issue 24 item 3): idle WebSocket upgrades that hold every
session, a 64 MB header. A real server in a subprocess on 127.0.0.1, its RSS read from outside."""

from __future__ import annotations

import base64
import os
import socket
import time

import pytest

from .conftest import SEARCHGYM, PeakRSS, ServerProcess, free_port

pytest.importorskip("openenv.core")

IDLE_UPGRADES = 80        # more than the 64-session default cap
RESET_BUDGET_S = 60       # a new client still resets within this (docs/reliability.md)
HEADER_MB = 64
HEADER_RISE_MB = 100


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    cwd = tmp_path_factory.mktemp("openenv_hostile")
    port = free_port()
    srv = ServerProcess([SEARCHGYM, "serve-openenv", "--port", str(port), "--split", "dev"], port, cwd)
    yield srv
    srv.stop()


def _upgrade(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    return s


@pytest.mark.slow  # a soak of idle upgrades (about 16 s with its server); .ci/run runs it
def test_idle_websocket_upgrades_do_not_lock_out_a_new_client(server):
    from openenv.core import GenericEnvClient

    socks = [_upgrade(server.port) for _ in range(IDLE_UPGRADES)]
    try:
        time.sleep(1.0)
        t0 = time.monotonic()
        with GenericEnvClient(base_url=server.url, connect_timeout_s=RESET_BUDGET_S).sync() as env:
            r = env.reset(index=0)
            elapsed = time.monotonic() - t0
            assert r.observation["question"]
            r = env.step({"kind": "search", "query": "capital"})
            assert r.observation["kind"] == "search"
        assert elapsed < RESET_BUDGET_S
        # the idle ones that made room were closed by the server with a reason, not left hanging
        closed = 0
        for s in socks:
            s.settimeout(0.05)
            try:
                data = s.recv(65536)
                closed += data == b"" or b"\x88" in data  # EOF, or a WebSocket close frame
            except OSError:
                pass
        assert closed >= 1
    finally:
        for s in socks:
            s.close()


def test_a_64_mb_header_is_refused_without_buffering_it(server):
    with PeakRSS(server.pid) as peak:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        chunk = b"a" * (1 << 20)
        sent = 0
        try:
            for _ in range(HEADER_MB):
                s.sendall(chunk)
                sent += 1
        except OSError:  # the server answered and closed: the rest is not read
            pass
        s.settimeout(10)
        try:
            answer = s.recv(4096)
        except OSError:
            answer = b""
        s.close()
    assert sent < HEADER_MB or answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert peak.rise_mb < HEADER_RISE_MB, f"RSS rose {peak.rise_mb:.0f} MB"
    assert server.health_seconds()[0] == 200
