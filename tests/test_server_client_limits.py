"""RemoteRetriever against servers that misbehave on purpose (real sockets on 127.0.0.1): a server that drips
its answer a byte at a time, answers that are not the /retrieve contract (nested, wrong shapes and types),
answers far over the size cap, 429 / 503 with Retry-After, and the API key read from the environment."""

from __future__ import annotations

import json
import threading
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from helpers import load_server_fixture

from searchgym.errors import ConfigError, RetrieverProtocolError, RetrieverUnavailableError
from searchgym.retrieval.remote import RemoteRetriever

live = load_server_fixture("live")
raw = load_server_fixture("raw")

GOOD = json.dumps({"result": [[{"document": {"id": "a", "contents": '"T"\nx'}, "score": 1.0}]]}).encode()


# --- an overall deadline -----------------------------------------------------------------------------------
@pytest.mark.parametrize("part", ["head", "body"])
def test_dripping_server_is_cut_off_at_the_deadline(part):
    """The server sends its (valid) answer one byte every 0.1 s, ~9 s in all; every single read is far
    inside the 1 s timeout. The call must end at its deadline, not when the drip ends."""
    state = {"finished": False}

    def handler(conn):
        raw.read_request(conn)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(GOOD)
        dripped = head if part == "head" else GOOD
        if part == "body":
            conn.sendall(head)
        for i in range(len(dripped)):
            conn.sendall(dripped[i:i + 1])
            time.sleep(0.1)
        if part == "head":
            conn.sendall(GOOD)
        state["finished"] = True

    with raw.RawServer(handler) as srv, \
            RemoteRetriever(srv.url, timeout=1.0, max_retries=1, backoff=0.01, deadline=2.0) as rr, \
            pytest.raises(RetrieverUnavailableError, match="Timeout"):
        rr.search("q", k=1)
    assert not state["finished"]  # the client hung up mid-drip


# --- the /retrieve contract --------------------------------------------------------------------------------
def _fixed_app(body: bytes, status: int = 200, headers: dict | None = None):
    app = FastAPI()

    @app.post("/retrieve")
    async def retrieve():
        return Response(body, status_code=status, media_type="application/json", headers=headers)

    return app


BROKEN = {
    "string_items": {"result": ["abc"]},  # used to become three passages "a", "b", "c"
    "number_item": {"result": [[1]]},
    "string_document": {"result": [[{"document": "just text", "score": 1.0}]]},
    "list_document": {"result": [[{"document": ["x"], "score": 1.0}]]},
    "contents_not_string": {"result": [[{"document": {"id": "a", "contents": 5}, "score": 1.0}]]},
    "no_text_fields": {"result": [[{"document": {"id": "a"}, "score": 1.0}]]},
    "score_string": {"result": [[{"document": {"id": "a", "contents": "x"}, "score": "high"}]]},
    "score_bool": {"result": [[{"document": {"id": "a", "contents": "x"}, "score": True}]]},
    "id_object": {"result": [[{"document": {"id": {"x": 1}, "contents": "x"}, "score": 1.0}]]},
    "too_many_hits": {"result": [[{"document": {"id": str(i), "contents": "x"}, "score": 1.0} for i in range(3)]]},
    "result_not_list": {"result": {"a": 1}},
    "wrong_count": {"result": [[], []]},
    "not_object": [1, 2],
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_off_contract_answers_are_protocol_errors(name):
    with live.LiveServer(_fixed_app(json.dumps(BROKEN[name]).encode())) as srv, \
            RemoteRetriever(srv.url, timeout=2.0, max_retries=0) as rr, \
            pytest.raises(RetrieverProtocolError, match="broke the contract"):
        rr.search("q", k=2)


@pytest.mark.parametrize("body", [b"[" * 200_000 + b"]" * 200_000, b'{"result": [[{"document": ' * 50_000,
                                  b"not json", b"\xff\xfe{}"])
def test_nested_or_non_json_answers_are_protocol_errors(body):
    with live.LiveServer(_fixed_app(body)) as srv, RemoteRetriever(srv.url, timeout=2.0, max_retries=0) as rr, \
            pytest.raises(RetrieverProtocolError, match="not JSON"):
        rr.search("q", k=1)


def test_valid_shapes_still_parse():
    """Strictness keeps every shape of the contract: bare documents, null scores, integer ids, fewer hits."""
    body = {"result": [[{"id": 7, "contents": '"T"\nx'}, {"document": {"title": "U", "text": "y"}, "score": None}],
                       []]}
    with live.LiveServer(_fixed_app(json.dumps(body).encode())) as srv, \
            RemoteRetriever(srv.url, timeout=2.0, max_retries=0) as rr:
        a, b = rr.batch_search(["q", "r"], k=2)
    assert [(h.id, h.score, h.passage.title, h.passage.text) for h in a] == [("7", 0.0, "T", "x"), ("", 0.0, "U", "y")]
    assert b == []


# --- the response-size cap ---------------------------------------------------------------------------------
CAP = 1 << 20
TOTAL = 64 << 20


@pytest.mark.parametrize("announced", [True, False])
def test_answer_over_the_cap_stops_reading(announced):
    """64 MiB of JSON whitespace before a valid answer (so a client that reads it whole gets a valid answer):
    the client stops at its 1 MiB cap; the server never gets to send it all."""
    state = {"sent": 0}

    def handler(conn):
        raw.read_request(conn)
        if announced:
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                         % (TOTAL + len(GOOD)))
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
        chunk = b" " * 65536
        for _ in range(TOTAL // len(chunk)):
            conn.sendall(chunk)
            state["sent"] += len(chunk)
        conn.sendall(GOOD)
        state["sent"] += len(GOOD)

    with raw.RawServer(handler) as srv, \
            RemoteRetriever(srv.url, timeout=20.0, max_retries=0, max_response_bytes=CAP) as rr, \
            pytest.raises(RetrieverProtocolError, match="1,048,576"):
        rr.search("q", k=1)
    assert state["sent"] < TOTAL


# --- 429 / 503 and Retry-After -----------------------------------------------------------------------------
def _flaky_app(log: list, statuses: list[int], retry_after: str | None):
    app = FastAPI()

    @app.post("/retrieve")
    async def retrieve(request: Request):
        log.append(await request.json())
        if len(log) <= len(statuses):
            headers = {"Retry-After": retry_after} if retry_after is not None else None
            return JSONResponse({"detail": "slow down"}, status_code=statuses[len(log) - 1], headers=headers)
        return Response(GOOD, media_type="application/json")

    return app


@pytest.mark.parametrize("statuses", [[429], [429, 503], [503, 429]])
def test_429_and_503_are_retried(statuses):
    log: list = []
    with live.LiveServer(_flaky_app(log, statuses, "0")) as srv, \
            RemoteRetriever(srv.url, timeout=2.0, max_retries=2, backoff=0.01) as rr:
        assert [h.id for h in rr.search("q", k=1)] == ["a"]
    assert len(log) == len(statuses) + 1


def test_retry_after_within_the_deadline_is_waited_for():
    log: list = []
    with live.LiveServer(_flaky_app(log, [429], "1")) as srv, \
            RemoteRetriever(srv.url, timeout=2.0, max_retries=1, backoff=0.01, deadline=10.0) as rr:
        assert [h.id for h in rr.search("q", k=1)] == ["a"]
    assert len(log) == 2


def test_retry_after_past_the_deadline_gives_up_at_once():
    """A server asking for 30 s when the call has 3 s left: no sleeping into the deadline, one request."""
    log: list = []
    with live.LiveServer(_flaky_app(log, [429, 429, 429], "30")) as srv, \
            RemoteRetriever(srv.url, timeout=1.0, max_retries=2, backoff=0.01, deadline=3.0) as rr, \
            pytest.raises(RetrieverUnavailableError, match=r"HTTP 429: slow down.*retry after 30s"):
        rr.search("q", k=1)
    assert len(log) == 1


def test_persistent_429_ends_in_typed_error():
    log: list = []
    with live.LiveServer(_flaky_app(log, [429] * 10, None)) as srv, \
            RemoteRetriever(srv.url, timeout=1.0, max_retries=2, backoff=0.01) as rr, \
            pytest.raises(RetrieverUnavailableError, match="3 attempt.*HTTP 429"):
        rr.search("q", k=1)
    assert len(log) == 3


# --- the API key -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    return live.build_bm25(tmp_path_factory.mktemp("client_limits") / "idx")


def test_api_key_is_read_from_the_environment(bm25, monkeypatch):
    from searchgym.retrieval.server import create_app

    monkeypatch.setenv("SEARCHGYM_API_KEY", "from-env")
    with live.LiveServer(create_app(bm25[0], api_key="from-env")) as srv:
        with RemoteRetriever(srv.url, timeout=2.0) as rr:
            assert rr.search("zebra stripes", k=1)[0].id == "z1"
        with RemoteRetriever(srv.url, timeout=2.0, api_key="") as rr, pytest.raises(ConfigError, match="401"):
            rr.search("zebra stripes", k=1)  # api_key="" sends none
        with RemoteRetriever(srv.url, timeout=2.0, api_key="wrong") as rr, pytest.raises(ConfigError, match="401"):
            rr.search("zebra stripes", k=1)  # an explicit key wins over the environment


def test_many_threads_share_one_client_under_deadlines(bm25):
    """The deadline is per thread: concurrent calls on one client neither cut each other short nor fail."""
    from searchgym.retrieval.server import create_app

    errors: list = []
    with live.LiveServer(create_app(bm25[0])) as srv, RemoteRetriever(srv.url, timeout=5.0) as rr:
        def work():
            try:
                for _ in range(20):
                    assert rr.search("zebra stripes", k=1)[0].id == "z1"
            except Exception as e:  # noqa: BLE001 - collected for the assertion below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert errors == []
