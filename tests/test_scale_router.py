"""The router over shard servers (issue 23 §4): real `searchgym serve` apps on loopback, one per shard of a
split sharded index; the router merges exactly, serves the same /retrieve contract, and a shard that is down
is a typed error naming it (or an explicitly flagged partial result), never fewer hits in silence."""

from __future__ import annotations

import json
import random

import pytest

from searchgym.errors import RetrieverUnavailableError
from searchgym.retrieval import Passage, build_index, load_index
from searchgym.retrieval.router import (
    ShardRouter,
    ShardUnavailableError,
    write_router_index,
)
from searchgym.retrieval.split import split_sharded_index

pytest.importorskip("uvicorn")
from helpers import load_server_fixture

live = load_server_fixture("live")

QUERIES = ["w1 w2 w3", "alpha beta gamma", "w5 w5 w77 alpha", "nothing-known", "w250 w299 w10 w3", "w7 w8"]


def _corpus(n: int = 800) -> list[Passage]:
    rnd = random.Random(3)
    words = [f"w{i}" for i in range(300)]
    weights = [1 / (r + 1) for r in range(300)]
    ps = [Passage(str(i), f"T{i}", " ".join(rnd.choices(words, weights=weights, k=rnd.randint(1, 30))))
          for i in range(n)]
    for j in range(10):  # ties spread over all shards
        ps.insert(rnd.randrange(len(ps)), Passage(f"tie{j}", "same", "alpha beta gamma"))
    return ps


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from searchgym.retrieval.server import load_app

    tmp = tmp_path_factory.mktemp("router")
    single = build_index(_corpus(), tmp / "single", shards=4, show_progress=False)
    dirs = split_sharded_index(single, tmp / "split")
    servers = [live.LiveServer(load_app(d)).start() for d in dirs]
    router_dir = write_router_index(tmp / "router", [s.url for s in servers], timeout=3.0, max_retries=0)
    yield single, servers, router_dir
    for s in servers:
        s.stop()


def _pairs(results):
    return [[(h.id, h.score) for h in hits] for hits in results]


def test_the_router_merges_exactly_like_the_single_sharded_index(cluster):
    single, _servers, router_dir = cluster
    ref = load_index(single)
    router = load_index(router_dir)
    assert isinstance(router, ShardRouter)
    for k in (1, 3, 7, 15):
        assert _pairs(router.batch_search(QUERIES, k)) == _pairs(ref.batch_search(QUERIES, k)), k
    hits = router.search("alpha beta gamma", 5)
    assert {h.id for h in hits} <= {f"tie{j}" for j in range(10)}
    assert hits[0].passage.title == "same"
    router.close()


def test_the_router_is_served_unchanged_with_the_same_contract(cluster):
    from searchgym.retrieval.remote import RemoteRetriever
    from searchgym.retrieval.server import load_app

    single, _servers, router_dir = cluster
    ref = load_index(single)
    with live.LiveServer(load_app(router_dir)) as front, RemoteRetriever(front.url) as client:
        assert _pairs(client.batch_search(QUERIES, 5)) == _pairs(ref.batch_search(QUERIES, 5))
        info = client.info()
        assert info["retriever"] == "ShardRouter"


def test_a_shard_down_is_an_error_naming_it_or_a_flagged_partial_result(cluster, tmp_path):
    from searchgym.retrieval.remote import RemoteRetriever
    from searchgym.retrieval.server import load_app

    single, servers, router_dir = cluster
    ref = load_index(single)
    router = load_index(router_dir)
    front = live.LiveServer(load_app(router_dir)).start()
    servers[2].stop()
    try:
        with pytest.raises(ShardUnavailableError, match=f"shard 2 \\({servers[2].url}\\)"):
            router.batch_search(QUERIES, 5)
        part = router.batch_search_partial(QUERIES, 5)
        assert not part.complete and len(part.missing) == 1 and part.missing[0].startswith("shard 2 ")
        full = ref.batch_search(QUERIES, 50)
        # the partial answer is the exact merge of the shards that answered (shard 2's rows left out)
        m = json.loads((single / "manifest.json").read_text())["backends"]["bm25_sharded"]["shards"][2]
        down = {p.id for p in ref.passages[m["start"]:m["start"] + m["n"]]}
        assert _pairs(part.hits) == [[(h.id, h.score) for h in hits if h.id not in down][:5] for hits in full]
        # through the served router a client gets an error, not fewer hits
        with RemoteRetriever(front.url, max_retries=0, timeout=10) as client, \
                pytest.raises(RetrieverUnavailableError, match="shard 2"):
            client.batch_search(QUERIES, 5)
    finally:
        front.stop()
        servers[2].start()
    assert _pairs(router.batch_search(QUERIES, 5)) == _pairs(ref.batch_search(QUERIES, 5))  # back: complete
    router.close()


def test_split_refuses_an_index_that_is_not_sharded(tmp_path):
    from searchgym.errors import ConfigError

    ix = build_index(_corpus(50), tmp_path / "plain", show_progress=False)
    with pytest.raises(ConfigError, match="not a sharded index"):
        split_sharded_index(ix, tmp_path / "out")
