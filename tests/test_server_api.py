"""The retrieval server over real HTTP on 127.0.0.1: the Search-R1 contract field by field, limits,
bad input (always a 4xx with a reason, never a 500, server still up), auth, /health and /info."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
import httpx
from helpers import CountingRetriever, load_server_fixture  # tests/ is on sys.path under pytest

from searchgym.errors import QueryError

live = load_server_fixture("live")

MAX_QUERIES = 50


@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    return live.build_bm25(tmp_path_factory.mktemp("server_api") / "idx")


@pytest.fixture(scope="module")
def counting(bm25):
    return CountingRetriever(bm25[0])


@pytest.fixture(scope="module")
def server(bm25, counting):
    from searchgym.retrieval.server import create_app, retriever_info

    retriever, index_dir = bm25
    app = create_app(counting, default_topk=2, max_queries=MAX_QUERIES,
                     info=retriever_info(retriever, index_dir))
    with live.LiveServer(app) as srv:
        yield srv


# --- the contract, written by hand from DESIGN.md §2 / anchors.md §3 -----------------------------------
Z1 = {"id": "z1", "contents": '"Zebra"\nThe zebra is a striped animal. A zebra herd grazes and every zebra has stripes.',
      "title": "Zebra", "text": "The zebra is a striped animal. A zebra herd grazes and every zebra has stripes."}
H1 = {"id": "h1", "contents": '"Horse"\nThe horse is a domesticated animal that is related to the zebra.',
      "title": "Horse", "text": "The horse is a domesticated animal that is related to the zebra."}
F1 = {"id": "f1", "contents": '"Paris"\nParis is the capital of France, on the Seine river.',
      "title": "Paris", "text": "Paris is the capital of France, on the Seine river."}


def _scores_out(body: dict) -> tuple[dict, list[list[float]]]:
    """Checks every score is a JSON number and returns the body with scores set to None, plus the scores."""
    scores = []
    for hits in body["result"]:
        row = []
        for item in hits:
            assert set(item) == {"document", "score"}
            assert type(item["score"]) is float
            row.append(item["score"])
            item["score"] = None
        scores.append(row)
    return body, scores


def test_retrieve_with_scores_matches_contract(server):
    r = server.post("/retrieve", json={"queries": ["zebra stripes"], "topk": 2, "return_scores": True})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body, scores = _scores_out(r.json())
    assert body == {"result": [[{"document": Z1, "score": None}, {"document": H1, "score": None}]]}
    assert scores[0][0] > scores[0][1] > 0


@pytest.mark.parametrize("payload", [
    {"queries": ["zebra stripes"], "topk": 2, "return_scores": False},
    {"queries": ["zebra stripes"], "topk": 2},  # return_scores defaults to false
])
def test_retrieve_without_scores_items_are_documents(server, payload):
    r = server.post("/retrieve", json=payload)
    assert r.status_code == 200
    assert r.json() == {"result": [[Z1, H1]]}


def test_two_queries_get_one_list_each_in_order(server):
    # exactly two queries is where the reference server goes silently wrong without scores
    r = server.post("/retrieve", json={"queries": ["capital of France", "zebra stripes"], "topk": 1,
                                       "return_scores": False})
    assert r.json() == {"result": [[F1], [Z1]]}
    r = server.post("/retrieve", json={"queries": ["capital of France", "zebra stripes"], "topk": 1,
                                       "return_scores": True})
    body, _ = _scores_out(r.json())
    assert body == {"result": [[{"document": F1, "score": None}], [{"document": Z1, "score": None}]]}


@pytest.mark.parametrize("payload", [{"queries": ["zebra stripes"], "topk": None, "return_scores": False},
                                     {"queries": ["zebra stripes"]}])
def test_topk_null_or_missing_uses_server_default(server, payload):
    assert server.post("/retrieve", json=payload).json() == {"result": [[Z1, H1]]}  # default_topk=2


@pytest.mark.parametrize(("payload", "expected"), [
    ({"query": "zebra stripes", "topk": 1, "return_scores": False}, {"result": [[Z1]]}),
    ({"query": "capital of France", "topk": 1}, {"result": [[F1]]}),
    ({"query": "zebra stripes"}, {"result": [[Z1, H1]]}),  # default_topk=2
])
def test_one_query_string_form_of_skyrl_and_gem(server, payload, expected):
    """SkyRL's and GEM's search tools post {"query": str, "topk": k}; the answer is that of a one-query batch,
    read by them as result[0]."""
    assert server.post("/retrieve", json=payload).json() == expected
    r = server.post("/retrieve", json={**payload, "return_scores": True})
    body, _ = _scores_out(r.json())
    assert [[item["document"] for item in hits] for hits in body["result"]] == expected["result"]


def test_one_batch_search_call_per_request(server, counting):
    counting.calls.clear()
    r = server.post("/retrieve", json={"queries": ["zebra", "horse", "Paris"], "topk": 3})
    assert r.status_code == 200
    assert counting.calls == [(["zebra", "horse", "Paris"], 3)]


def test_health_and_info(server, bm25):
    assert server.get("/health").json() == {"status": "ok"}
    info = server.get("/info").json()
    assert info["corpus_size"] == len(live.CORPUS)
    assert isinstance(info["backend"], str) and info["backend"]
    assert isinstance(info["parameters"], dict)
    assert info["default_topk"] == 2
    assert info["limits"]["max_queries"] == MAX_QUERIES
    assert info["index_dir"] == str(bm25[1])


def test_concurrent_requests_get_their_own_answers(server):
    """Searches run concurrently (batches this large go to the server's search pool; small ones run
    inline): every answer must still belong to its request."""
    from concurrent.futures import ThreadPoolExecutor

    queries = [["zebra stripes"], ["capital of France"], ["Café Zürich"], ["horse domesticated"],
               ["tulips roses garden 7"], ["Python programming language"], ["Berlin Spree"], ["zebra", "Paris"]]
    queries = [q * 32 for q in queries] + [q[:1] for q in queries]
    with httpx.Client(base_url=server.url) as c:
        expected = [c.post("/retrieve", json={"queries": q, "topk": 3}).json() for q in queries]

        def ask(i: int) -> tuple[int, dict]:
            q = queries[i % len(queries)]
            return i, c.post("/retrieve", json={"queries": q, "topk": 3}).json()

        with ThreadPoolExecutor(16) as pool:
            for i, got in pool.map(ask, range(96)):
                assert got == expected[i % len(queries)]


# --- bad input: a 4xx with a reason, never a 500, and the server stays up ------------------------------
TEN_MB = 10 * 1024 * 1024
BAD_BODIES = {
    "malformed JSON": (b'{"queries": ["zebra"', 400),
    "empty body": (b"", 400),
    "invalid UTF-8": (b'{"queries": ["\xff\xfe"]}', 400),
    "deep nesting": (b"[" * 200_000 + b"]" * 200_000, 400),
    "not an object": (b'["zebra"]', 422),
    "queries missing": (b'{"topk": 3}', 422),
    "query a list": (b'{"query": ["zebra"]}', 422),
    "query a number": (b'{"query": 3}', 422),
    "query and queries": (b'{"query": "zebra", "queries": ["horse"]}', 422),
    "query too long": (json.dumps({"query": "zebra " * 1000}).encode(), 422),
    "queries a string": (b'{"queries": "x"}', 422),
    "queries of numbers": (b'{"queries": [1, 2]}', 422),
    "query null": (b'{"queries": [null]}', 422),
    "empty queries": (b'{"queries": []}', 422),
    "topk 0": (b'{"queries": ["zebra"], "topk": 0}', 422),
    "topk negative": (b'{"queries": ["zebra"], "topk": -3}', 422),
    "topk huge": (b'{"queries": ["zebra"], "topk": 1000000000000}', 422),
    "topk string": (b'{"queries": ["zebra"], "topk": "3"}', 422),
    "topk float": (b'{"queries": ["zebra"], "topk": 2.5}', 422),
    "topk bool": (b'{"queries": ["zebra"], "topk": true}', 422),
    "return_scores string": (b'{"queries": ["zebra"], "return_scores": "yes"}', 422),
    "too many queries": (json.dumps({"queries": ["zebra"] * (MAX_QUERIES + 1)}).encode(), 413),
    "2 MB query": (json.dumps({"queries": ["zebra " * 350_000]}).encode(), 422),
    "10 MB body": (b'{"queries": ["' + b"a" * TEN_MB + b'"]}', 413),
}


def _assert_still_up(server):
    assert server.get("/health").status_code == 200
    r = server.post("/retrieve", json={"queries": ["zebra stripes"], "topk": 1})
    assert r.json() == {"result": [[Z1]]}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_input_is_4xx_with_reason(server, name):
    body, status = BAD_BODIES[name]
    r = server.post("/retrieve", content=body, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == status, r.text[:300]
    detail = r.json()["detail"]
    assert isinstance(detail, str) and len(detail) > 10
    _assert_still_up(server)


def test_10mb_body_streamed_without_content_length_is_413(server):
    def chunks():
        yield b'{"queries": ["'
        for _ in range(10):
            yield b"a" * (1024 * 1024)
        yield b'"]}'

    r = server.post("/retrieve", content=chunks(), timeout=30)
    assert "content-length" not in r.request.headers  # chunked: the limit is enforced while streaming
    assert r.status_code == 413
    assert "limit" in r.json()["detail"]
    _assert_still_up(server)


def test_unknown_routes_and_methods_are_4xx(server):
    assert server.get("/retrieve").status_code == 405
    assert server.post("/nothing", json={}).status_code == 404
    _assert_still_up(server)


def test_unicode_and_control_characters_are_answered(server):
    queries = ["zebra\x00\x01\x1f\x7f stripes", "Café Zürich crème brûlée", "🦓 zebra 斑马", "zebra\u202e\ufeff",
               "\t\n\r zebra \u2028", "", "   "]
    raw = json.dumps({"queries": queries, "topk": 1}).encode()
    # a lone surrogate is valid JSON but not valid UTF-8 text: it is answered as well
    raw = raw.replace(b'"   "', b'"\\ud800 zebra"')
    r = server.post("/retrieve", content=raw)
    assert r.status_code == 200, r.text[:300]
    result = r.json()["result"]
    assert len(result) == len(queries)
    assert [hits[0]["id"] for i, hits in enumerate(result) if i not in (1, 5)] == ["z1", "z1", "z1", "z1", "z1"]
    assert result[1][0]["id"] == "u1"
    assert result[5] == []  # the empty query finds nothing (Retriever contract)
    _assert_still_up(server)


# --- auth, internal errors ------------------------------------------------------------------------------
def test_bearer_token(bm25):
    from searchgym.retrieval.server import create_app

    with live.LiveServer(create_app(bm25[0], api_key="s3cret")) as srv:
        payload = {"queries": ["zebra stripes"], "topk": 1}
        r = srv.post("/retrieve", json=payload)
        assert r.status_code == 401 and "bearer" in r.json()["detail"].lower()
        assert r.headers["www-authenticate"] == "Bearer"
        assert srv.post("/retrieve", json=payload, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert srv.get("/info").status_code == 401
        assert srv.get("/health").status_code == 200  # probes need no key
        r = srv.post("/retrieve", json=payload, headers={"Authorization": "Bearer s3cret"})
        assert r.json() == {"result": [[Z1]]}


class BrokenRetriever:
    """A retriever that fails the way a real backend can: a bug (RuntimeError) or a refused query."""

    def search(self, query, k=3):
        return self.batch_search([query], k)[0]

    def batch_search(self, queries, k=3):
        if queries[0] == "refuse":
            raise QueryError("this backend refuses the query 'refuse'")
        raise RuntimeError("backend exploded")


def test_internal_error_is_clean_json_500_and_query_error_is_422():
    from searchgym.retrieval.server import create_app

    with live.LiveServer(create_app(BrokenRetriever(), info={})) as srv:
        r = srv.post("/retrieve", json={"queries": ["zebra"]})
        assert r.status_code == 500
        assert r.json() == {"detail": "internal error (RuntimeError); the server log has the details"}
        r = srv.post("/retrieve", json={"queries": ["refuse"]})
        assert r.status_code == 422 and "refuses" in r.json()["detail"]
        assert srv.get("/health").status_code == 200


def test_create_app_rejects_bad_default_topk(bm25):
    from searchgym.retrieval.server import create_app

    with pytest.raises(ValueError, match="default_topk"):
        create_app(bm25[0], default_topk=0)


def test_httpx_sees_no_server_error_for_any_bad_input(server):
    """A sweep of odd bodies: nothing reaches the catch-all 500."""
    odd = [b"null", b"0", b'"x"', b"{}", b'{"queries": {}}', b'{"queries": [[]]}', b'{"queries": [{}]}',
           b'{"queries": ["a"], "topk": null, "return_scores": null}', b'{"queries": ["a"], "topk": 1e999}',
           b'{"queries": ["a"], "topk": NaN}', b"\x00\x01", "{\"queries\": [\"\u00e9\"]}".encode("latin-1")]
    with httpx.Client(base_url=server.url) as c:
        for body in odd:
            r = c.post("/retrieve", content=body)
            assert r.status_code < 500, (body, r.status_code, r.text[:200])
    _assert_still_up(server)


# --- the command line: `searchgym serve INDEX_DIR` in a subprocess ------------------------------------------
def _start_cli(index_dir, *args: str, env: dict | None = None):
    import os
    import subprocess
    import sys
    import time

    port = live.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "searchgym.cli", "serve", str(index_dir), "--port", str(port),
                             *args], env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
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


def test_serve_command_subprocess(bm25):
    proc, url = _start_cli(bm25[1], "--topk", "1", "--max-topk", "5", env={"SEARCHGYM_API_KEY": "from-env"})
    try:
        payload = {"queries": ["zebra stripes"]}
        assert httpx.post(url + "/retrieve", json=payload).status_code == 401
        r = httpx.post(url + "/retrieve", json=payload, headers={"Authorization": "Bearer from-env"})
        assert r.json() == {"result": [[Z1]]}  # --topk 1 is the default
        r = httpx.post(url + "/retrieve", json={**payload, "topk": 6}, headers={"Authorization": "Bearer from-env"})
        assert r.status_code == 422 and "between 1 and 5" in r.json()["detail"]
        info = httpx.get(url + "/info", headers={"Authorization": "Bearer from-env"}).json()
        assert info["corpus_size"] == len(live.CORPUS) and info["default_topk"] == 1 and info["auth"] is True
        assert info["limits"]["max_topk"] == 5
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.slow
def test_serve_command_workers(bm25):
    proc, url = _start_cli(bm25[1], "--workers", "2", "--api-key", "w", "--max-queries", "2")
    try:
        with httpx.Client(base_url=url, headers={"Authorization": "Bearer w"}) as c:
            for _ in range(8):  # new connections spread over both worker processes
                r = c.post("/retrieve", json={"queries": ["zebra stripes"], "topk": 1}, headers={"Connection": "close"})
                assert r.json() == {"result": [[Z1]]}
            assert httpx.post(url + "/retrieve", json={"queries": ["zebra"]}).status_code == 401
            assert c.post("/retrieve", json={"queries": ["a", "b", "c"]}).status_code == 413  # --max-queries
    finally:
        proc.terminate()
        proc.wait(30)


def test_serve_command_bad_topk_is_clean_error(bm25):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "searchgym.cli", "serve", str(bm25[1]), "--topk", "50", "--max-topk",
                        "10", "--port", str(live.free_port())], check=False, capture_output=True, text=True,
                       timeout=90)
    assert r.returncode == 1 and "default_topk" in r.stderr and "Traceback" not in r.stderr


def test_serve_command_missing_index_is_clean_error(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "searchgym.cli", "serve", str(tmp_path / "nope"),
                        "--port", str(live.free_port())], check=False, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert "no index directory" in r.stderr and "Traceback" not in r.stderr


def test_mounted_app_answers_through_the_fastapi_route(bm25):
    """Mounted under a prefix, /retrieve goes through the regular FastAPI route (not the fast path):
    same answers, same errors."""
    from fastapi import FastAPI

    from searchgym.retrieval.server import create_app

    parent = FastAPI()
    parent.mount("/search", create_app(bm25[0], api_key="k"))
    with live.LiveServer(parent) as srv:
        auth = {"Authorization": "Bearer k"}
        r = srv.post("/search/retrieve", json={"queries": ["zebra stripes"], "topk": 1}, headers=auth)
        assert r.json() == {"result": [[Z1]]}
        assert srv.post("/search/retrieve", json={"queries": ["zebra"]}).status_code == 401
        r = srv.post("/search/retrieve", json={"queries": "x"}, headers=auth)
        assert r.status_code == 422 and "list of strings" in r.json()["detail"]
        r = srv.post("/search/retrieve", content=b"a" * (9 * 1024 * 1024), headers=auth)
        assert r.status_code == 413
        assert srv.get("/search/health").json() == {"status": "ok"}
