"""msgpack on /retrieve, for GEM's SearchTool (msgpack body, no Content-Type, flat one-query answer), over real
HTTP on 127.0.0.1: GEM's own client against the server, the raw wire forms, and bad msgpack as clean 4xx."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
msgspec = pytest.importorskip("msgspec")
import httpx
from helpers import load_server_fixture

live = load_server_fixture("live")

from test_server_api import F1, H1, Z1  # the hand-written contract passages (same corpus as the JSON tests)

MAX_QUERIES = 50


@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    return live.build_bm25(tmp_path_factory.mktemp("server_msgpack") / "idx")


@pytest.fixture(scope="module")
def server(bm25):
    from searchgym.retrieval.server import create_app

    with live.LiveServer(create_app(bm25[0], default_topk=2, max_queries=MAX_QUERIES)) as srv:
        yield srv


def _post(server, payload, **headers) -> httpx.Response:
    body = payload if isinstance(payload, bytes) else msgspec.msgpack.encode(payload)
    return server.post("/retrieve", content=body, headers=headers)


def _msgpack(r: httpx.Response):
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/msgpack"
    return msgspec.msgpack.decode(r.content)


# --- GEM's own client ------------------------------------------------------------------------------------
def test_gem_search_tool_gets_real_passages(server):
    search_tool = pytest.importorskip("gem.tools.search_tool")
    tool = search_tool.SearchTool(search_url=server.url + "/retrieve", topk=2)
    valid, has_error, observation, parsed = tool.execute_action("<think>hm</think><search>zebra stripes</search>")
    assert "[SearchTool Error" not in observation
    assert (valid, has_error) == (True, False)
    assert parsed == "<think>hm</think><search>zebra stripes</search>"
    assert observation == ("\n\n<information>"
                           'Doc 1(Title: "Zebra") The zebra is a striped animal. A zebra herd grazes and every '
                           "zebra has stripes.\n"
                           'Doc 2(Title: "Horse") The horse is a domesticated animal that is related to the zebra.\n'
                           "</information>\n\n")
    assert tool._search("capital of France").startswith('Doc 1(Title: "Paris") Paris is the capital of France')


# --- the raw wire forms ----------------------------------------------------------------------------------
def test_one_query_form_answers_flat_like_gems_server(server):
    body = _msgpack(_post(server, {"query": "zebra stripes", "topk": 2, "return_scores": True}))
    assert set(body) == {"result"}
    assert [item["document"] for item in body["result"]] == [Z1, H1]
    scores = [item["score"] for item in body["result"]]
    assert all(type(s) is float for s in scores) and scores[0] > scores[1] > 0
    # the same request as JSON keeps SkyRL's nested JSON answer
    for headers in ({}, {"content-type": "application/json; charset=utf-8"}):
        r = server.post("/retrieve", json={"query": "zebra stripes", "topk": 1}, headers=headers)
        assert r.headers["content-type"] == "application/json"
        assert r.json() == {"result": [[Z1]]}


@pytest.mark.parametrize("payload", [{"query": "zebra stripes", "return_scores": False},
                                     {"query": "zebra stripes", "topk": None}])
def test_one_query_form_without_scores_keeps_gems_items(server, payload):
    """GEM's server answers {"document": doc, "score": None} when scores are not asked for."""
    assert _msgpack(_post(server, payload)) == {"result": [{"document": Z1, "score": None},
                                                           {"document": H1, "score": None}]}  # default_topk=2


def test_queries_form_answers_nested_search_r1_shape(server):
    body = _msgpack(_post(server, {"queries": ["capital of France", "zebra stripes"], "topk": 1}))
    assert body == {"result": [[F1], [Z1]]}
    body = _msgpack(_post(server, {"queries": ["capital of France", "zebra stripes"], "topk": 1,
                                   "return_scores": True}))
    assert [[item["document"] for item in hits] for hits in body["result"]] == [[F1], [Z1]]
    assert all(type(hits[0]["score"]) is float for hits in body["result"])


@pytest.mark.parametrize("content_type", ["application/msgpack", "application/x-msgpack",
                                          "Application/MsgPack; charset=binary"])
def test_msgpack_content_type_is_honoured(server, content_type):
    r = _post(server, {"query": "capital of France", "topk": 1}, **{"content-type": content_type})
    assert _msgpack(r) == {"result": [{"document": F1, "score": None}]}


def test_large_msgpack_request_is_answered_off_the_loop_in_order(server):
    """A body over the inline size is parsed, searched and rendered on the search pool."""
    queries = ["capital of France", "zebra stripes"] * 25
    pad = "x" * 70_000  # unknown keys are ignored; this pushes the body over _INLINE_BODY_BYTES
    body = _msgpack(_post(server, {"queries": queries, "topk": 1, "pad": pad}))
    assert body["result"] == [[F1], [Z1]] * 25


# --- bad msgpack: a 4xx with a reason, never a 500, and the server stays up ------------------------------
def _enc(obj) -> bytes:
    return msgspec.msgpack.encode(obj)


BAD = {
    "truncated map": (b"\x83\xa5query", 400, "malformed msgpack"),
    "map32 claiming 4G entries": (b"\xdf\xff\xff\xff\xff", 413, "more than 64 keys"),
    "array key": (b"\x81\x91\x01\x02", 422, "\"queries\" is required"),
    "map key": (b"\x81\x81\x01\x02\x03", 400, "malformed msgpack"),
    "deep nesting": (b"\x81\xa7queries" + b"\x91" * 200_000 + b"\xc0", 400, "malformed msgpack"),
    "invalid UTF-8 str": (b"\x81\xa5query\xa2\xff\xfe", 400, "malformed msgpack"),
    "trailing bytes": (_enc({"query": "zebra"}) + b"\x00", 400, "malformed msgpack"),
    "empty body with msgpack type": (b"", 400, "empty body"),
    "query bytes": (_enc({"query": b"zebra"}), 422, '"query" must be a string'),
    "query a list": (_enc({"query": ["zebra"]}), 422, '"query" must be a string'),
    "query and queries": (_enc({"query": "zebra", "queries": ["horse"]}), 422, "not both"),
    "queries a string": (_enc({"queries": "zebra"}), 422, '"queries" must be a list'),
    "queries of ints": (_enc({"queries": [1, 2]}), 422, "queries[0] must be a string"),
    "queries missing": (_enc({"topk": 3}), 422, '"queries" is required'),
    "empty queries": (_enc({"queries": []}), 422, "is empty"),
    "int keys": (_enc({1: "zebra"}), 422, '"queries" is required'),
    "topk string": (_enc({"query": "zebra", "topk": "3"}), 422, '"topk" must be'),
    "topk float": (_enc({"query": "zebra", "topk": 2.0}), 422, '"topk" must be'),
    "topk bool": (_enc({"query": "zebra", "topk": True}), 422, '"topk" must be'),
    "topk 0": (_enc({"query": "zebra", "topk": 0}), 422, "between 1 and"),
    "topk huge": (_enc({"query": "zebra", "topk": 2**63}), 422, "between 1 and"),
    "return_scores int": (_enc({"query": "zebra", "return_scores": 1}), 422, '"return_scores" must be'),
    "timestamp query": (b"\x81\xa5query\xd6\xff\x00\x00\x00\x00", 422, '"query" must be a string'),
    "query too long": (_enc({"query": "zebra " * 1000}), 422, "the limit is 4,096"),
    "too many queries": (_enc({"queries": ["zebra"] * (MAX_QUERIES + 1)}), 413, "the limit is 50"),
    "10 MB body": (_enc({"query": "a" * (10 * 1024 * 1024)}), 413, "byte limit"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_msgpack_is_a_clean_4xx(server, name):
    body, status, reason = BAD[name]
    r = _post(server, body, **{"content-type": "application/msgpack"} if not body else {})
    assert r.status_code == status, (name, r.text)
    assert r.headers["content-type"] == "application/json"
    assert reason in r.json()["detail"]
    assert "Traceback" not in r.text
    assert _msgpack(_post(server, {"query": "zebra stripes", "topk": 1}))["result"][0]["document"] == Z1


def test_hit_limit_applies_to_msgpack(bm25):
    from searchgym.retrieval.server import create_app

    with live.LiveServer(create_app(bm25[0], default_topk=2, max_hits=10)) as srv:
        r = _post(srv, {"queries": ["zebra"] * 6, "topk": 2})
        assert r.status_code == 413 and "the limit is 10 per request" in r.json()["detail"]
        assert _msgpack(_post(srv, {"queries": ["zebra"] * 5, "topk": 2}))["result"][0][0] == Z1


def test_without_msgspec_the_answer_is_415_naming_the_package(server, monkeypatch):
    body = _enc({"query": "zebra", "topk": 1})
    monkeypatch.setitem(sys.modules, "msgspec", None)  # `import msgspec` now raises ImportError
    r = server.post("/retrieve", content=body)
    assert r.status_code == 415
    assert "pip install msgspec" in r.json()["detail"]
    monkeypatch.undo()
    assert json.loads(server.post("/retrieve", json={"queries": ["zebra"], "topk": 1}).content)["result"][0] == [Z1]


def test_msgpack_through_fastapi_when_the_app_is_mounted(bm25):
    """Mounted under another app, /retrieve goes through the FastAPI route, not the ASGI fast path."""
    from fastapi import FastAPI

    from searchgym.retrieval.server import create_app

    outer = FastAPI()
    outer.mount("/search", create_app(bm25[0], default_topk=1))
    with live.LiveServer(outer) as srv:
        r = srv.post("/search/retrieve", content=_enc({"query": "capital of France", "return_scores": True}))
        body = _msgpack(r)
        assert [item["document"] for item in body["result"]] == [F1]
        r = srv.post("/search/retrieve", content=b"\x81\xa5query\xa2\xff\xfe")
        assert r.status_code == 400 and r.headers["content-type"] == "application/json"
        assert srv.post("/search/retrieve", json={"query": "capital of France"}).json() == {"result": [[F1]]}
