"""RemoteRetriever over real HTTP: against a minimal server written here to the Search-R1 contract (not only
against searchgym's own server), retries and backoff, batching, typed errors, and recovery after the server
is killed and restarted on the same port."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from helpers import load_server_fixture

from searchgym.errors import ConfigError, QueryError, RetrieverUnavailableError
from searchgym.retrieval.base import Passage, Retriever
from searchgym.retrieval.remote import RemoteRetriever, document_to_passage

live = load_server_fixture("live")

FAST = {"timeout": 2.0, "max_retries": 2, "backoff": 0.02}  # small backoff keeps failure tests short


def minimal_search_r1_app(log: list, fail_first: int = 0, fail_status: int = 503, delay: float = 0.0,
                          scores: bool = True):
    """A stand-in for Search-R1's retrieval_server.py: documents carry only id + contents, like its dense
    retriever; scores only when asked. Query q, rank i -> id "q#i", title "T q", score 10 - i."""
    app = FastAPI()

    @app.post("/retrieve")
    async def retrieve(request: Request):
        req = await request.json()
        log.append(req)
        if len(log) <= fail_first:
            return JSONResponse({"detail": "not ready"}, status_code=fail_status)
        if delay:
            await asyncio.sleep(delay)
        topk = req.get("topk") or 3
        docs = [[{"id": f"{q}#{i}", "contents": f'"T {q}"\nabout {q}, rank {i}\nsecond line'} for i in range(topk)]
                for q in req["queries"]]
        if scores and req.get("return_scores"):
            return {"result": [[{"document": d, "score": 10.0 - i} for i, d in enumerate(ds)] for ds in docs]}
        return {"result": docs}

    return app


def test_client_against_minimal_search_r1_server():
    log: list = []
    with live.LiveServer(minimal_search_r1_app(log)) as srv, RemoteRetriever(srv.url, **FAST) as rr:
        assert isinstance(rr, Retriever)
        hits = rr.search("volcano", k=2)
        assert log == [{"queries": ["volcano"], "topk": 2, "return_scores": True}]
        assert [h.id for h in hits] == ["volcano#0", "volcano#1"]
        assert [h.score for h in hits] == [10.0, 9.0]
        assert hits[0].passage == Passage("volcano#0", "T volcano", "about volcano, rank 0\nsecond line")
        assert hits[0].passage.contents == '"T volcano"\nabout volcano, rank 0\nsecond line'
        assert [h.id for h in rr.search("x")] == ["x#0", "x#1", "x#2"]  # k_default=3


def test_client_accepts_documents_without_scores():
    """A server that ignores return_scores and sends bare documents still parses (scores are 0.0)."""
    log: list = []
    with live.LiveServer(minimal_search_r1_app(log, scores=False)) as srv, RemoteRetriever(srv.url, **FAST) as rr:
        hits = rr.search("lava", k=2)
        assert [(h.id, h.score, h.passage.title) for h in hits] == [("lava#0", 0.0, "T lava"), ("lava#1", 0.0, "T lava")]


def test_client_batches_large_query_lists_in_order():
    log: list = []
    with live.LiveServer(minimal_search_r1_app(log)) as srv, \
            RemoteRetriever(srv.url + "/retrieve", batch_size=2, **FAST) as rr:  # a /retrieve url works too
        queries = [f"q{i}" for i in range(5)]
        results = rr.batch_search(queries, k=1)
        assert [req["queries"] for req in log] == [["q0", "q1"], ["q2", "q3"], ["q4"]]
        assert [[h.id for h in hits] for hits in results] == [[f"q{i}#0"] for i in range(5)]
        assert rr.batch_search([], k=1) == [] and len(log) == 3  # nothing to ask: no request
        # blank queries get [] without being sent (a foreign server might answer them with anything)
        results = rr.batch_search(["", "q9", "  \n"], k=1)
        assert [[h.id for h in hits] for hits in results] == [[], ["q9#0"], []]
        assert log[-1]["queries"] == ["q9"] and len(log) == 4


def test_client_retries_5xx_then_succeeds():
    log: list = []
    with live.LiveServer(minimal_search_r1_app(log, fail_first=2)) as srv, RemoteRetriever(srv.url, **FAST) as rr:
        assert [h.id for h in rr.search("a", k=1)] == ["a#0"]
        assert len(log) == 3  # two 503s, then the answer


def test_client_gives_up_on_persistent_5xx_with_typed_error():
    log: list = []
    with live.LiveServer(minimal_search_r1_app(log, fail_first=100)) as srv, \
            RemoteRetriever(srv.url, **FAST) as rr:
        with pytest.raises(RetrieverUnavailableError, match=r"3 attempt.*HTTP 503: not ready"):
            rr.search("a")
        assert len(log) == 3  # 1 + max_retries


@pytest.mark.parametrize(("status", "error"), [(422, QueryError), (400, QueryError), (401, ConfigError)])
def test_client_does_not_retry_4xx(status, error):
    log: list = []
    with live.LiveServer(minimal_search_r1_app(log, fail_first=100, fail_status=status)) as srv, \
            RemoteRetriever(srv.url, **FAST) as rr:
        with pytest.raises(error, match=f"HTTP {status}: not ready"):
            rr.search("a")
        assert len(log) == 1


def test_client_timeout_is_retried_then_reported():
    log: list = []
    with live.LiveServer(minimal_search_r1_app(log, delay=3.0)) as srv, \
            RemoteRetriever(srv.url, timeout=0.2, max_retries=1, backoff=0.01) as rr:
        with pytest.raises(RetrieverUnavailableError, match="Timeout"):
            rr.search("slow")
        assert len(log) == 2


def test_client_no_server_is_typed_error():
    with RemoteRetriever(f"http://127.0.0.1:{live.free_port()}", **FAST) as rr:
        with pytest.raises(RetrieverUnavailableError, match="ConnectError"):
            rr.search("anyone there")
        with pytest.raises(RetrieverUnavailableError):
            rr.health()


def test_client_rejects_bad_arguments():
    with pytest.raises(ConfigError):
        RemoteRetriever("localhost:8000")
    with pytest.raises(ConfigError):
        RemoteRetriever("http://127.0.0.1:1", batch_size=0)
    rr = RemoteRetriever("http://127.0.0.1:1")
    with pytest.raises(QueryError):
        rr.batch_search("one string")
    with pytest.raises(QueryError):
        rr.search("q", k=0)
    rr.close()
    with pytest.raises(RetrieverUnavailableError, match="closed"):
        rr.search("q")


def test_client_reports_broken_contract():
    app = FastAPI()

    @app.post("/retrieve")
    async def retrieve():
        return {"results": []}

    with live.LiveServer(app) as srv, RemoteRetriever(srv.url, **FAST) as rr, \
            pytest.raises(RetrieverUnavailableError, match="broke the contract"):
        rr.search("q")


@pytest.mark.parametrize(("doc", "expected"), [
    ({"id": "7", "contents": '"Evan Morris"\nEvan Morris Evan L. Morris (January 26, 1977 -'},
     Passage("7", "Evan Morris", "Evan Morris Evan L. Morris (January 26, 1977 -")),
    # Search-R1's Lucene BM25 documents: title/text/contents, maybe no id
    ({"title": "Paris", "text": "Capital of France.", "contents": '"Paris"\nCapital of France.'},
     Passage("", "Paris", "Capital of France.")),
    ({"id": 3, "contents": "one line, no title"}, Passage("3", "", "one line, no title")),
    ({"id": "a", "title": "T", "text": "x", "contents": "ignored"}, Passage("a", "T", "x")),
])
def test_document_shapes(doc, expected):
    assert document_to_passage(doc) == expected


# --- against searchgym's own server on a real BM25 index --------------------------------------------------
@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    return live.build_bm25(tmp_path_factory.mktemp("server_client") / "idx")


def test_client_against_searchgym_server_equals_local_search(bm25):
    from searchgym.retrieval.server import create_app

    retriever, _ = bm25
    queries = ["zebra stripes", "capital of France", "Café Zürich", "", "tulips roses garden 3"]
    with live.LiveServer(create_app(retriever, api_key="k")) as srv, \
            RemoteRetriever(srv.url, api_key="k", batch_size=2, **FAST) as rr:
        assert rr.health() == {"status": "ok"}
        assert rr.info()["corpus_size"] == len(live.CORPUS)
        remote = rr.batch_search(queries, k=3)
        local = retriever.batch_search(queries, 3)
        assert [[h.id for h in hits] for hits in remote] == [[h.id for h in hits] for hits in local]
        for r_hits, l_hits in zip(remote, local):
            for r, l in zip(r_hits, l_hits):
                assert r.passage == l.passage
                assert r.score == pytest.approx(float(l.score), rel=1e-6)
        assert remote[0][0].id == "z1" and remote[3] == []
        # lone surrogates cannot be sent as UTF-8; the client escapes them and the server answers
        assert rr.search("\ud800zebra stripes", k=1)[0].id in {"z1", "h1"}
    with live.LiveServer(create_app(retriever, api_key="k")) as srv, RemoteRetriever(srv.url, **FAST) as rr, \
            pytest.raises(ConfigError, match="401"):
        rr.search("zebra")


def test_client_survives_server_kill_and_restart(bm25):
    """Kill the server while a client thread is querying: the client raises RetrieverUnavailableError after
    its bounded retries; restart on the same port: the same client object works again."""
    from searchgym.retrieval.server import create_app

    app = create_app(bm25[0])
    srv = live.LiveServer(app).start()
    rr = RemoteRetriever(srv.url, timeout=1.0, max_retries=2, backoff=0.05)
    outcome: dict = {"ok": 0}
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                assert rr.search("zebra stripes", k=1)[0].id == "z1"
                outcome["ok"] += 1
            except RetrieverUnavailableError as e:
                outcome["error"] = e
                outcome["failed_at"] = time.monotonic()
                return

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        while outcome["ok"] < 20 and t.is_alive():
            time.sleep(0.01)
        assert outcome["ok"] >= 20
        srv.stop()  # the server dies mid-stream
        t.join(10)
        assert not t.is_alive()
        err = outcome["error"]
        assert "3 attempt" in str(err) and srv.url in str(err)

        srv.start()  # same port, same client object
        assert rr.search("zebra stripes", k=1)[0].id == "z1"
        assert rr.health() == {"status": "ok"}
    finally:
        stop.set()
        rr.close()
        srv.stop()
