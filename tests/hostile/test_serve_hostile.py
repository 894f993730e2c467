"""`searchgym serve` under hostile requests (issue 24 items 2, 4, 9, 11 and the smaller ones): a real server
in a subprocess on 127.0.0.1, attacked over raw sockets and httpx, its RSS read from outside."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import require

from .conftest import SEARCHGYM, PeakRSS, ServerProcess, free_port, httpx

# /health must answer while the server is under attack. This is liveness, not speed: a blocked event loop would
# answer only after the 30 s write timeout frees it. The latencies themselves (0.06-0.7 s here; 2.06 s once on a
# loaded CI machine) are measured figures in docs/reliability.md, never assertions.
HEALTH_HANG_S = 10.0
UNREAD_CLIENTS = 60
UNREAD_RISE_MB = 600
MSGPACK_RISE_MB = 400


@pytest.fixture(scope="module")
def server(world_index: Path, tmp_path_factory: pytest.TempPathFactory):
    cwd = tmp_path_factory.mktemp("serve_hostile")
    port = free_port()
    srv = ServerProcess([SEARCHGYM, "serve", str(world_index), "--port", str(port)], port, cwd)
    yield srv
    srv.stop()


def _raw_post(port: int, body: bytes, content_type: bytes = b"application/json", extra: bytes = b"",
              rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf:  # before connect, so the advertised window stays small: a client that reads nothing
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /retrieve HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: " + content_type +
              b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)
    return s


def _no_repr(text: str) -> None:
    assert " at 0x" not in text and "<object" not in text, text


# --- item 9: nesting --------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [500, 900, 990, 5000])
@pytest.mark.parametrize("where", ["queries", "unknown key", "large body"])
def test_deeply_nested_json_gets_a_4xx(server, depth, where):
    nested = "[" * depth + "]" * depth
    if where == "queries":
        body = '{"queries": ' + nested + "}"
    elif where == "unknown key":
        body = '{"queries": ["capital"], "x": ' + nested + "}"
    else:  # over 64 KB: parsed on the search pool instead of the event loop
        body = '{"pad": "' + "p" * 70_000 + '", "queries": [' + nested + "]}"
    r = httpx.post(server.url + "/retrieve", content=body.encode(), headers={"content-type": "application/json"},
                   timeout=60)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    _no_repr(r.text)
    assert "detail" in r.json()


def test_error_bodies_show_no_object_repr(server):
    import msgspec

    ext = msgspec.msgpack.Ext(5, b"\x00" * 8)
    for payload in ({"query": ext}, {"queries": [ext]}, {"query": "q", "topk": ext},
                    {"query": "q", "return_scores": ext}, {"queries": [b"bytes"]}):
        r = httpx.post(server.url + "/retrieve", content=msgspec.msgpack.encode(payload),
                       headers={"content-type": "application/msgpack"}, timeout=30)
        assert 400 <= r.status_code < 500, r.text
        _no_repr(r.text)


def _probe_health_while(server, threads: list[threading.Thread], budget_s: float = 120) -> list[tuple[int, float]]:
    """Start ``threads`` and probe /health until they end (or ``budget_s`` passes): the (status, seconds) seen."""
    for t in threads:
        t.start()
    health = []
    deadline = time.monotonic() + budget_s
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        health.append(server.health_seconds())
        time.sleep(0.05)
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return health


# --- item 4: msgpack bodies of empty maps -----------------------------------------------------------------
def _msgpack_bombs() -> list[bytes]:
    n = 8 * 1024 * 1024 - 64  # just under the 8 MiB body limit
    arr = b"\xdd" + struct.pack(">I", n) + b"\x80" * n  # an array of n empty maps
    return [b"\x81\xa7queries" + arr, b"\x82\xa5query\xa1q\xa1x" + arr, b"\x81\xa4topk" + arr,
            b"\x81\xa7queries" + b"\xdd" + struct.pack(">I", n) + b"\x90" * n]  # n empty arrays


def test_four_msgpack_bodies_of_empty_maps_stay_small_and_health_answers(server):
    bombs = _msgpack_bombs()
    statuses: dict[int, int] = {}

    def post(i: int, body: bytes) -> None:
        # a raw socket: sendall runs without the GIL, so this process's own /health probe is not slowed by it
        s = _raw_post(server.port, body, content_type=b"application/msgpack")
        s.settimeout(120)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        s.close()
        statuses[i] = int(answer.split(b" ", 2)[1])
        _no_repr(answer.decode("latin-1"))

    with PeakRSS(server.pid) as peak:
        threads = [threading.Thread(target=post, args=(i, b)) for i, b in enumerate(bombs)]
        health = _probe_health_while(server, threads)
    # the unknown key's value is never decoded, so that request is simply answered
    assert statuses == {0: 413, 1: 200, 2: 422, 3: 413}, statuses
    assert peak.rise_mb < MSGPACK_RISE_MB, f"RSS rose {peak.rise_mb:.0f} MB"
    assert all(code == 200 for code, _ in health)
    assert max(s for _, s in health) < HEALTH_HANG_S, health


def test_four_json_bodies_of_empty_objects_stay_small_and_health_answers(server):
    n = (8 * 1024 * 1024 - 64) // 3
    bomb = b'{"queries": [' + b"{}," * (n - 1) + b"{}]}"
    statuses: list[int] = []

    def post() -> None:
        s = _raw_post(server.port, bomb)
        s.settimeout(120)
        answer = b""
        while not answer.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        s.close()
        statuses.append(int(answer.split(b" ", 2)[1]))

    with PeakRSS(server.pid) as peak:
        threads = [threading.Thread(target=post) for _ in range(4)]
        health = _probe_health_while(server, threads)
    assert len(statuses) == 4 and all(400 <= s < 500 or s == 503 for s in statuses), statuses
    assert peak.rise_mb < MSGPACK_RISE_MB, f"RSS rose {peak.rise_mb:.0f} MB"
    assert all(code == 200 for code, _ in health)
    assert max(s for _, s in health) < HEALTH_HANG_S, health


@pytest.mark.parametrize("surrogate", [False, True])
def test_a_large_valid_body_full_of_braces_is_still_answered(server, surrogate):
    """Bodies with many "{" / "[" take the bounded decoding path; valid ones are answered as before (a lone
    surrogate escape, valid JSON the typed decoder refuses, falls back to the full decoder)."""
    queries = ["{[ capital " * 300] * 40 + ["capital \ud800" if surrogate else "capital"]
    body = json.dumps({"queries": queries, "topk": 1}).encode()
    assert len(body) > 64 * 1024 and body.count(b"{") > 4160
    r = httpx.post(server.url + "/retrieve", content=body, headers={"content-type": "application/json"},
                   timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["result"]) == 41


# --- item 2: clients that do not read their answers ---------------------------------------------------------
def _big_request() -> bytes:
    return json.dumps({"queries": [f"capital of country {i}" for i in range(650)], "topk": 100}).encode()


@pytest.mark.slow  # a soak: sixty stalled clients (about 13 s); .ci/run runs it
def test_sixty_clients_that_never_read_stay_bounded_and_health_answers(server):
    body = _big_request()  # 650 x 100 = 65,000 hits, the per-request limit
    socks: list[socket.socket] = []
    health: list[tuple[int, float]] = []
    with PeakRSS(server.pid) as peak:
        try:
            for _ in range(UNREAD_CLIENTS):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client that reads nothing
                s.connect(("127.0.0.1", server.port))
                s.sendall(b"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                          b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                socks.append(s)
            deadline = time.monotonic() + 12  # long enough for the searches to run and the answers to pile up
            while time.monotonic() < deadline:
                health.append(server.health_seconds())
                time.sleep(0.2)
        finally:
            for s in socks:
                s.close()
    assert peak.rise_mb < UNREAD_RISE_MB, f"RSS rose {peak.rise_mb:.0f} MB"
    assert all(code == 200 for code, _ in health)
    assert max(s for _, s in health) < HEALTH_HANG_S, health
    # the server still answers a reading client afterwards (admitted once the dropped answers are released)
    deadline = time.monotonic() + 60
    while True:
        r = httpx.post(server.url + "/retrieve", content=_big_request(), timeout=120,
                       headers={"content-type": "application/json"})
        if r.status_code != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.status_code == 200
    result = r.json()["result"]
    assert len(result) == 650 and sum(map(len, result)) > 0


def test_a_streamed_answer_is_the_same_answer(server):
    """A large answer is streamed (chunked) piece by piece; its JSON equals the queries answered one by one."""
    queries = ["capital of country", "population census", "river length", "mountain height"] * 300
    r = httpx.post(server.url + "/retrieve", json={"queries": queries, "topk": 5, "return_scores": True},
                   timeout=120)
    assert r.status_code == 200 and r.headers.get("transfer-encoding") == "chunked"
    big = r.json()["result"]
    small = httpx.post(server.url + "/retrieve", json={"queries": queries[:4], "topk": 5, "return_scores": True},
                       timeout=60).json()["result"]
    assert big[:4] == small and len(big) == len(queries)


# --- item 11: curl --http2 (h2c upgrade offer) ------------------------------------------------------------
H2C = b"connection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n"


def test_h2c_upgrade_offer_keeps_the_body(server):
    s = _raw_post(server.port, json.dumps({"queries": ["capital"], "topk": 2}).encode(), extra=H2C)
    data = b""
    deadline = time.monotonic() + 30
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 20:
        chunk = s.recv(65536)
        if not chunk or time.monotonic() > deadline:
            break
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:300]
    assert b'"result"' in data


def test_curl_http2_post(server):
    require(shutil.which("curl"), "curl not installed")
    out = subprocess.run(["curl", "-sS", "--http2", "-X", "POST", "-H", "content-type: application/json",
                          "-d", '{"queries": ["capital"], "topk": 1}', server.url + "/retrieve"],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["result"][0]) == 1


# --- write timeout, in-flight counting, API key file permissions -------------------------------------------
@pytest.fixture(scope="module")
def strict_server(world_index: Path, tmp_path_factory: pytest.TempPathFactory):
    cwd = tmp_path_factory.mktemp("serve_strict")
    key = cwd / "key.txt"
    key.write_text("s3cret\n")
    os.chmod(key, 0o644)
    port = free_port()
    srv = ServerProcess([SEARCHGYM, "serve", str(world_index), "--port", str(port), "--write-timeout", "2",
                         "--max-inflight", "4", "--api-key-file", str(key)], port, cwd)
    yield srv
    srv.stop()


AUTH = b"authorization: Bearer s3cret\r\n"


def test_world_readable_key_file_is_warned_about(strict_server):
    text = strict_server.stderr_text()
    assert "warning" in text and "chmod 600" in text and "0644" in text, text[-1000:]


def test_unread_answers_count_in_flight_and_are_dropped_after_the_write_timeout(strict_server):
    body = _big_request()
    unread = [_raw_post(strict_server.port, body, extra=AUTH, rcvbuf=4096) for _ in range(4)]
    time.sleep(1.0)
    # the four unread answers hold every in-flight place (--max-inflight 4): one more request is refused
    r = httpx.post(strict_server.url + "/retrieve", json={"queries": ["capital"]}, timeout=30,
                   headers={"authorization": "Bearer s3cret"})
    assert r.status_code == 503 and "busy" in r.json()["detail"], (r.status_code, r.text)
    # reading nothing, each is dropped after the 2 s write timeout (the server logs it); bounded wait
    deadline = time.monotonic() + 90
    while strict_server.stderr_text().count("read none of its answer") < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert strict_server.stderr_text().count("read none of its answer") >= 4
    for s in unread:  # what the kernel had buffered, then the end (reset or EOF), not a whole answer
        s.settimeout(10)
        total = 0
        try:
            while chunk := s.recv(1 << 20):
                total += len(chunk)
        except OSError:
            pass
        s.close()
        assert total < 8 * 1024 * 1024
    # their places are free again
    r = httpx.post(strict_server.url + "/retrieve", json={"queries": ["capital"]}, timeout=30,
                   headers={"authorization": "Bearer s3cret"})
    assert r.status_code == 200
