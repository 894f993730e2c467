"""``"allow_partial": true`` on /retrieve: the answer names its missing shards (``missing_shards``) in every answer
form (JSON, msgpack, small and streamed); a server over one index has none, and without the field nothing changes.
A sharded ``serve-ray`` app with a shard down is in tests/test_serve_ray.py."""

from __future__ import annotations

import json

import pytest

from searchgym.data import World
from searchgym.retrieval import BM25Retriever

pytest.importorskip("uvicorn")
msgspec = pytest.importorskip("msgspec")
from helpers import load_server_fixture

live = load_server_fixture("live")


@pytest.fixture(scope="module")
def srv():
    from searchgym.retrieval.server import create_app

    passages = World.generate_for_passages(80, seed=5).passages
    with live.LiveServer(create_app(BM25Retriever(passages), max_topk=200)) as s:
        s.queries = [p.title for p in passages[:40]]
        yield s


def test_the_field_adds_missing_shards_and_changes_nothing_else(srv):
    body = {"queries": srv.queries[:3], "topk": 3, "return_scores": True}
    plain = srv.post("/retrieve", json=body).json()
    asked = srv.post("/retrieve", json={**body, "allow_partial": True}).json()
    assert set(plain) == {"result"} and asked == {**plain, "missing_shards": []}
    assert srv.post("/retrieve", json={**body, "allow_partial": False}).json() == plain
    bad = srv.post("/retrieve", json={**body, "allow_partial": "yes"})
    assert bad.status_code == 422 and "allow_partial" in bad.text


def test_streamed_and_msgpack_answers_carry_it_too(srv):
    big = {"queries": srv.queries * 3, "topk": 100, "allow_partial": True}  # 12,000 hits: streamed in pieces
    r = srv.post("/retrieve", json=big, timeout=60)
    got = json.loads(r.content)
    assert r.status_code == 200 and got["missing_shards"] == [] and len(got["result"]) == len(big["queries"])
    plain = srv.post("/retrieve", json={**big, "allow_partial": False}, timeout=60).json()
    assert got["result"] == plain["result"]
    for body in ({"query": srv.queries[0], "topk": 3}, {"queries": srv.queries[:2], "topk": 3}, big):
        m = srv.post("/retrieve", content=msgspec.msgpack.encode({**body, "allow_partial": True}), timeout=60)
        out = msgspec.msgpack.decode(m.content)
        plain = msgspec.msgpack.decode(srv.post("/retrieve", content=msgspec.msgpack.encode(
            {**body, "allow_partial": False}), timeout=60).content)
        assert out == {**plain, "missing_shards": []}
