"""The retrieval server's bounds, attacked with real sockets on 127.0.0.1: idle and half-sent connections are
closed, oversized heads answered 431, a saturated server answers 503, /health answers while a large request is
being rendered, and the API key reaches --workers processes without their environment or argv."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
import httpx
from helpers import load_server_fixture

from searchgym.retrieval.base import Hit, Passage

live = load_server_fixture("live")

QUICK = {"keep_alive_s": 0.3, "header_s": 0.5, "body_s": 0.5}
REQUEST = b'{"queries": ["zebra stripes"], "topk": 1}'


@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    return live.build_bm25(tmp_path_factory.mktemp("server_guards") / "idx")


def _guards(**kw):
    from searchgym.retrieval.server import ServerGuards

    return ServerGuards(**{**QUICK, **kw})


def _app(retriever, **kw):
    from searchgym.retrieval.server import create_app

    return create_app(retriever, **kw)


def _connect(srv) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.settimeout(5)
    return s


def _read_until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes; socket.timeout (5 s) if it never does."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
        if len(data) > 1 << 20:
            raise AssertionError("the server keeps sending")


def _post_head(length: int, extra: bytes = b"") -> bytes:
    return (b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n" % length) + extra + b"\r\n"


# --- idle and half-sent connections ------------------------------------------------------------------------
def test_idle_connection_is_closed(bm25):
    """A connection that never sends a byte used to stay open forever (1,100 of them exhausted the fds)."""
    with live.LiveServer(_app(bm25[0]), guards=_guards()) as srv:
        socks = [_connect(srv) for _ in range(20)]
        try:
            for s in socks:
                assert _read_until_closed(s) == b""
            assert srv.post("/retrieve", content=REQUEST).status_code == 200  # and the server still serves
        finally:
            for s in socks:
                s.close()


def test_connection_idle_after_a_request_is_closed(bm25):
    with live.LiveServer(_app(bm25[0]), guards=_guards()) as srv, _connect(srv) as s:
        s.sendall(_post_head(len(REQUEST)) + REQUEST)
        reply = _read_until_closed(s)
        assert reply.startswith(b"HTTP/1.1 200") and b'"z1"' in reply


@pytest.mark.parametrize("sent", [
    b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # half a head
    b"POST /retr",  # half a request line
    b"\r\n",  # not even a request line
])
def test_half_sent_head_gets_408_and_is_closed(bm25, sent):
    with live.LiveServer(_app(bm25[0]), guards=_guards()) as srv, _connect(srv) as s:
        s.sendall(sent)
        reply = _read_until_closed(s)
        if sent != b"\r\n":  # a stray CRLF is no request yet: closed as idle
            assert reply.startswith(b"HTTP/1.1 408") and b"headers not received" in reply


def test_dripped_head_cannot_outlive_the_header_timeout(bm25):
    """One header byte every 0.05 s keeps every read short; the head as a whole must still arrive in time."""
    head = _post_head(len(REQUEST), b"X-Padding: " + b"a" * 400 + b"\r\n")  # ~25 s of dripping
    with live.LiveServer(_app(bm25[0]), guards=_guards()) as srv, _connect(srv) as s:
        closed = False
        for i in range(len(head)):
            try:
                s.sendall(head[i:i + 1])
            except OSError:
                closed = True
                break
            if select.select([s], [], [], 0.05)[0]:  # the server answered (408) or closed
                closed = True
                break
        assert closed, "the server read the whole dripped head"
        assert _read_until_closed(s).startswith(b"HTTP/1.1 408")


def test_half_sent_body_gets_408_and_is_closed(bm25):
    with live.LiveServer(_app(bm25[0]), guards=_guards()) as srv, _connect(srv) as s:
        s.sendall(_post_head(len(REQUEST)) + REQUEST[:10])
        reply = _read_until_closed(s)
        assert reply.startswith(b"HTTP/1.1 408") and b"body not received" in reply


# --- header size ------------------------------------------------------------------------------------------
def test_oversized_head_is_431(bm25):
    with live.LiveServer(_app(bm25[0]), guards=_guards(max_header_bytes=8192)) as srv, _connect(srv) as s:
        s.sendall(_post_head(len(REQUEST), b"X-Big: " + b"a" * 20_000 + b"\r\n") + REQUEST)
        reply = _read_until_closed(s)
        assert reply.startswith(b"HTTP/1.1 431") and b"8,192-byte limit" in reply
        # a head under the limit is answered as usual
        assert srv.post("/retrieve", content=REQUEST, headers={"X-Pad": "a" * 4000}).status_code == 200


def test_endless_head_is_not_read_in_full(bm25):
    """A 256 MB header used to be buffered whole; now the server stops reading it at the limit."""
    with live.LiveServer(_app(bm25[0]), guards=_guards(max_header_bytes=65536)) as srv, _connect(srv) as s:
        s.sendall(b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        chunk = b"a" * 65536
        sent = 0
        with pytest.raises(OSError):  # reset or broken pipe once the server has closed
            for _ in range(256 * 16):  # at most 256 MB
                s.sendall(chunk)
                sent += len(chunk)
        assert sent < 64 << 20


# --- saturation -------------------------------------------------------------------------------------------
class BlockingRetriever:
    """Delegates to a real retriever once ``release`` is set; counts the calls that started."""

    def __init__(self, inner):
        self.inner, self.release, self.started = inner, threading.Event(), 0

    def search(self, query, k=3):
        return self.batch_search([query], k)[0]

    def batch_search(self, queries, k=3):
        self.started += 1
        self.release.wait(20)
        return self.inner.batch_search(queries, k)


def test_requests_over_the_inflight_limit_get_503(bm25):
    blocking = BlockingRetriever(bm25[0])
    app = _app(blocking, max_inflight=2)
    with live.LiveServer(app) as srv:
        results: list = []
        threads = [threading.Thread(target=lambda: results.append(srv.post("/retrieve", content=REQUEST, timeout=30)))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for _ in range(500):  # both requests are in the search (bounded wait)
            if blocking.started == 2:
                break
            time.sleep(0.01)
        assert blocking.started == 2
        r = srv.post("/retrieve", content=REQUEST, timeout=10)
        assert r.status_code == 503 and r.headers["retry-after"] == "1" and "busy" in r.json()["detail"]
        assert srv.get("/health", timeout=10).status_code == 200  # probes are not limited
        blocking.release.set()
        for t in threads:
            t.join(30)
        assert [x.status_code for x in results] == [200, 200]
        assert srv.post("/retrieve", content=REQUEST, timeout=10).status_code == 200


def test_requests_over_the_connection_limit_get_503(bm25):
    with live.LiveServer(_app(bm25[0]), guards=_guards(max_connections=4, keep_alive_s=5.0)) as srv:
        idle = [_connect(srv) for _ in range(4)]
        try:
            time.sleep(0.2)  # let the server accept them
            assert srv.post("/retrieve", content=REQUEST, timeout=10).status_code == 503
        finally:
            for s in idle:
                s.close()
        for _ in range(100):  # the closed sockets leave the server's books (bounded wait)
            r = srv.post("/retrieve", content=REQUEST, timeout=10)
            if r.status_code == 200:
                break
            time.sleep(0.05)
        assert r.status_code == 200


# --- large answers are rendered off the event loop --------------------------------------------------------
class GatedPassage(Passage):
    gate = threading.Event()

    @property
    def contents(self) -> str:  # the renderer reads this: it blocks until /health has answered
        self.gate.wait(10)
        return super().contents


class GatedRetriever:
    def search(self, query, k=3):
        return self.batch_search([query], k)[0]

    def batch_search(self, queries, k=3):
        return [[Hit(f"{qi}-{i}", 1.0, GatedPassage(f"{qi}-{i}", "T", "x")) for i in range(k)]
                for qi in range(len(queries))]


def test_health_answers_while_a_large_answer_is_rendered():
    GatedPassage.gate.clear()
    with live.LiveServer(_app(GatedRetriever(), max_topk=10)) as srv:
        big: list = []
        body = {"queries": [f"q{i}" for i in range(400)], "topk": 10, "return_scores": True}
        t = threading.Thread(target=lambda: big.append(srv.post("/retrieve", json=body, timeout=30)))
        t.start()
        try:
            time.sleep(0.2)  # the big request is being rendered (and blocked in it)
            assert srv.get("/health", timeout=5).json() == {"status": "ok"}
        finally:
            GatedPassage.gate.set()
            t.join(30)
        assert big[0].status_code == 200 and len(big[0].json()["result"]) == 400


# --- the API key, and what worker processes can see -------------------------------------------------------
def _start(index_dir, *args, env=None):
    port = live.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "searchgym.cli", "serve", str(index_dir), "--port", str(port),
                             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read().decode()[-2000:])
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("server did not come up")
        time.sleep(0.1)


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def _env_without_key() -> dict:
    return {k: v for k, v in os.environ.items() if k != "SEARCHGYM_API_KEY"}


def test_api_key_file(bm25, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("s3cret-from-file\n")
    key_file.chmod(0o600)
    proc, url = _start(bm25[1], "--api-key-file", str(key_file), env=_env_without_key())
    try:
        assert httpx.post(url + "/retrieve", content=REQUEST).status_code == 401
        r = httpx.post(url + "/retrieve", content=REQUEST, headers={"Authorization": "Bearer s3cret-from-file"})
        assert r.status_code == 200
        assert b"s3cret" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    finally:
        proc.terminate()
        proc.wait(20)


def test_api_key_file_errors_are_clean(bm25, tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for args in (["--api-key-file", str(empty)], ["--api-key-file", str(tmp_path / "missing")],
                 ["--api-key-file", str(empty), "--api-key", "x"]):
        r = subprocess.run([sys.executable, "-m", "searchgym.cli", "serve", str(bm25[1]), "--port",
                            str(live.free_port()), *args], check=False, capture_output=True, text=True, timeout=90)
        assert r.returncode == 1 and "Traceback" not in r.stderr and "key" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", ["env", "file"])
def test_api_key_never_reaches_worker_environment_or_argv(bm25, tmp_path, how):
    secret = "w0rker-s3cret"
    env = _env_without_key()
    args = ["--workers", "2"]
    if how == "env":
        env["SEARCHGYM_API_KEY"] = secret
    else:
        (tmp_path / "key").write_text(secret)
        args += ["--api-key-file", str(tmp_path / "key")]
    proc, url = _start(bm25[1], *args, env=env)
    try:
        auth = {"Authorization": f"Bearer {secret}"}
        for _ in range(6):  # new connections spread over both workers
            r = httpx.post(url + "/retrieve", content=REQUEST, headers={**auth, "Connection": "close"})
            assert r.status_code == 200
        assert httpx.post(url + "/retrieve", content=REQUEST).status_code == 401
        workers = _descendants(proc.pid)
        assert len(workers) >= 2
        for pid in workers:
            for name in ("environ", "cmdline"):
                try:
                    data = Path(f"/proc/{pid}/{name}").read_bytes()
                except OSError:
                    continue
                assert secret.encode() not in data, f"the key is in /proc/{pid}/{name}"
        assert secret.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    finally:
        proc.terminate()
        proc.wait(30)
