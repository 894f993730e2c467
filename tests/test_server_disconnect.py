"""A client that disconnects while its /retrieve search waits for a pool thread has that search dropped (it never
runs); one that leaves while its search runs has the answer released. A real server on 127.0.0.1, a real BM25
index behind a gate that holds the searches until the test lets them go."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from helpers import load_server_fixture

live = load_server_fixture("live")


class GatedRetriever:
    """A real retriever whose searches wait for ``gate`` (set by the test), each call recorded first."""

    def __init__(self, inner):
        self.inner, self.gate, self.calls = inner, threading.Event(), []

    def search(self, query, k=3):
        return self.batch_search([query], k)[0]

    def batch_search(self, queries, k=3):
        self.calls.append(list(queries))
        assert self.gate.wait(30), "the test never opened the gate"
        return self.inner.batch_search(queries, k)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _send_and_leave_open(port: int, payload: dict) -> socket.socket:
    """POST /retrieve on a raw socket and return it unread (closing it is the client going away)."""
    body = json.dumps(payload).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


@pytest.fixture
def gated(tmp_path):
    from searchgym.retrieval.server import create_app

    retriever = GatedRetriever(live.build_bm25(tmp_path / "idx")[0])
    app = create_app(retriever, default_topk=2)
    with live.LiveServer(app) as srv:
        yield retriever, app.retrieve_handler, srv
        retriever.gate.set()


def test_a_queued_search_of_a_gone_client_never_runs(gated):
    retriever, handler, srv = gated
    workers = handler.pool._max_workers
    answers: list[int] = []

    def post(i: int) -> None:
        answers.append(srv.post("/retrieve", json={"queries": [f"zebra {i}"], "topk": 2}, timeout=30).status_code)

    busy = [threading.Thread(target=post, args=(i,)) for i in range(workers)]
    for t in busy:
        t.start()
    _until(lambda: len(retriever.calls) == workers)  # every pool thread holds a search
    doomed = _send_and_leave_open(srv.port, {"queries": ["doomed horse"], "topk": 2})
    _until(lambda: handler.inflight == workers + 1)  # read and queued behind them
    doomed.close()
    _until(lambda: handler.inflight == workers)  # dropped as soon as the client left
    retriever.gate.set()
    for t in busy:
        t.join(30)
    assert answers == [200] * workers
    assert ["doomed horse"] not in retriever.calls
    r = srv.post("/retrieve", json={"queries": ["paris"], "topk": 1}, timeout=10)
    assert r.status_code == 200 and r.json()["result"][0][0]["id"] == "f1"
    assert handler.inflight == 0


def test_the_answer_of_a_client_gone_while_its_search_runs_is_released(gated):
    retriever, handler, srv = gated
    queries = [f"zebra stripes {i}" for i in range(100)]
    leaver = _send_and_leave_open(srv.port, {"queries": queries, "topk": 50})  # 5,000 hits: a streamed answer
    _until(lambda: retriever.calls and retriever.calls[-1] == queries)  # running on a pool thread
    leaver.close()
    _until(lambda: handler.inflight == 0)  # the request is over for the server
    retriever.gate.set()
    _until(lambda: handler.inflight_hits == 0)  # and the answer computed after the client left is released
    assert srv.post("/retrieve", json={"queries": ["paris"], "topk": 1}, timeout=10).status_code == 200
    assert handler.inflight == 0 and handler.inflight_hits == 0
