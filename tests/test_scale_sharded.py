"""Sharded BM25 (issue 23 §1-2): exact parity with one unsharded bm25s index, resumable and atomic builds,
damaged shards named in a typed error, duplicate ids, constant-memory streaming (slow)."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from searchgym.errors import DuplicateIdError, IndexCorruptError
from searchgym.retrieval import Passage, build_index, load_index, write_jsonl
from searchgym.retrieval.bm25 import BM25Retriever
from searchgym.retrieval.sharded import ShardedBM25Retriever

QUERIES = ["w1 w2 w3", "alpha", "w5 w5 w77 alpha", "nothing-known", "", "the of and", "w250 w299 w10 w3",
           "beta gamma w0", "w7"]


def _corpus(n: int = 1500, seed: int = 0) -> list[Passage]:
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    weights = [1 / (r + 1) for r in range(300)]
    ps = [Passage(str(i), f"T{i % 17}", " ".join(rnd.choices(words, weights=weights, k=rnd.randint(0, 30))))
          for i in range(n)]
    # exact ties: identical passages spread over the corpus, so they land in different shards
    for j in range(12):
        ps.insert(rnd.randrange(len(ps)), Passage(f"tie{j}", "same", "alpha beta gamma"))
    return ps


def _expected(ref: BM25Retriever, passages: list[Passage], q: str, k: int) -> list[tuple[str, float]]:
    """The unsharded bm25s index's full score vector, ranked by (score desc, row asc), positive only."""
    ids = ref._qenc.ids(q)
    if not ids:
        return []
    full = ref._engine.bm.get_scores_from_ids(ids)
    order = [i for i in np.lexsort((np.arange(len(full)), -full)) if full[i] > 0][:k]
    return [(passages[i].id, float(full[i])) for i in order]


@pytest.fixture(scope="module")
def corpus() -> list[Passage]:
    return _corpus()


@pytest.mark.parametrize("method", ["lucene", "robertson"])
@pytest.mark.parametrize("n_shards", [1, 2, 3, 7, 40])
def test_sharded_top_k_and_scores_equal_the_unsharded_index(tmp_path, corpus, method, n_shards):
    ref = BM25Retriever(corpus, method=method, backend="numpy")
    r = load_index(build_index(corpus, tmp_path / "ix", shards=n_shards, method=method, show_progress=False))
    assert isinstance(r, ShardedBM25Retriever) and r.n_shards == n_shards
    by_id = {p.id: p for p in corpus}
    for k in (1, 5, 12, 30):
        got = r.batch_search(QUERIES, k)
        for q, hits in zip(QUERIES, got):
            assert [(h.id, h.score) for h in hits] == _expected(ref, corpus, q, k), (q, k)
            assert all(h.passage == by_id[h.id] for h in hits)
    # where no tie straddles rank k, the unsharded retriever's own hits agree too
    for q in ("w1 w2 w3", "w250 w299 w10 w3"):
        a, b = ref.search(q, 10), r.search(q, 10)
        assert [h.score for h in a] == [h.score for h in b]


def test_ties_across_shards_break_by_row(tmp_path, corpus):
    r = load_index(build_index(corpus, tmp_path / "ix", shards=5, show_progress=False))
    hits = r.search("alpha beta gamma", 6)
    assert len({h.score for h in hits}) == 1  # all twelve tie passages score the same
    rows = [next(i for i, p in enumerate(corpus) if p.id == h.id) for h in hits]
    assert rows == sorted(rows)  # the lowest rows win, in row order, whichever shard holds them


def test_stemmer_shard_size_threads_and_batch_agree(tmp_path, corpus):
    ref = BM25Retriever(corpus, stemmer="english", backend="numpy")
    r = load_index(build_index(corpus, tmp_path / "ix", shard_size=400, stemmer="english", show_progress=False))
    assert r.n_shards == 4
    one = [r.search(q, 8) for q in QUERIES]
    assert r.batch_search(QUERIES, 8, n_threads=2) == one == r.batch_search(QUERIES, 8)
    for q, hits in zip(QUERIES, one):
        assert [(h.id, h.score) for h in hits] == _expected(ref, corpus, q, 8)


def test_streams_a_corpus_file_and_the_cli_builds_and_searches(tmp_path, corpus):
    write_jsonl(corpus, tmp_path / "c.jsonl")
    exe = str(Path(sys.executable).with_name("searchgym"))
    r = subprocess.run([exe, "index", "build", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "ix"),
                        "--shards", "3"], check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "%|" not in r.stderr  # no progress bars on a small corpus
    m = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    assert list(m["backends"]) == ["bm25_sharded"] and len(m["backends"]["bm25_sharded"]["shards"]) == 3
    from searchgym.retrieval.corpus import corpus_fingerprint

    assert m["corpus_fingerprint"] == corpus_fingerprint(corpus)
    assert not list(tmp_path.glob(".ix.*"))  # the work directory is gone
    r = subprocess.run([exe, "search", str(tmp_path / "ix"), "alpha beta gamma", "-k", "2"], check=False,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0 and "tie" in r.stdout, r.stdout + r.stderr


def test_a_killed_build_resumes_from_its_finished_shards(tmp_path, corpus):
    src = tmp_path / "c.jsonl"
    write_jsonl(corpus, src)
    out = tmp_path / "ix"
    script = textwrap.dedent(f"""
        import os, signal
        from searchgym.retrieval.sharded import build_sharded_index
        def die(i):
            if i == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        build_sharded_index({str(src)!r}, {str(out)!r}, shards=5, show_progress=False, _after_shard=die)
    """)
    r = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, timeout=300)
    assert r.returncode == -9, r.stderr
    assert not out.exists()  # nothing half-built at the final name
    work = tmp_path / ".ix.building"
    state = json.loads((work / "state.json").read_text())
    assert sorted(state["shards"]) == ["0", "1"]
    done = work / "index" / "bm25_sharded" / "shards" / "000" / "data.npy"
    before = done.stat().st_mtime_ns
    from searchgym.retrieval.sharded import build_sharded_index

    with pytest.MonkeyPatch.context() as mp:
        built: list[int] = []
        mp.setattr("searchgym.retrieval.sharded._pass1", lambda *a, **k: pytest.fail("pass 1 was redone"))
        build_sharded_index(src, out, shards=5, show_progress=False, _after_shard=built.append)
    assert built == [2, 3, 4]  # only the unfinished shards
    assert (out / "bm25_sharded" / "shards" / "000" / "data.npy").stat().st_mtime_ns == before
    assert not work.exists()
    fresh = build_index(corpus, tmp_path / "fresh", shards=5, show_progress=False)
    a, b = load_index(out), load_index(fresh)
    assert a.batch_search(QUERIES, 10) == b.batch_search(QUERIES, 10)


def test_a_changed_corpus_is_not_resumed(tmp_path, corpus):
    src = tmp_path / "c.jsonl"
    write_jsonl(corpus[:500], src)
    from searchgym.retrieval.sharded import build_sharded_index

    def stop(i):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_sharded_index(src, tmp_path / "ix", shards=3, show_progress=False, _after_shard=stop)
    write_jsonl(corpus, src)  # other content, other size
    build_sharded_index(src, tmp_path / "ix", shards=3, show_progress=False)
    assert len(load_index(tmp_path / "ix")) == len(corpus)


@pytest.fixture
def sharded(tmp_path, corpus) -> Path:
    return build_index(corpus, tmp_path / "ix", shards=4, show_progress=False)


def test_a_modified_shard_fails_its_checksum_naming_the_shard(sharded):
    f = sharded / "bm25_sharded" / "shards" / "002" / "data.npy"
    b = bytearray(f.read_bytes())
    b[-3] ^= 0xFF
    f.write_bytes(bytes(b))
    with pytest.raises(IndexCorruptError, match="shards/002"):
        load_index(sharded)


def test_a_damaged_shard_without_verify_is_a_typed_error_naming_the_shard(sharded):
    f = sharded / "bm25_sharded" / "shards" / "002" / "indices.npy"
    arr = np.load(f)
    arr[:] = 10**9  # document ids far out of range, same size: only the kernel's bounds checks can catch it
    np.save(f, arr)
    r = load_index(sharded, verify=False)
    with pytest.raises(IndexCorruptError, match="shard 2 of 4"):
        r.batch_search(["w1 w2 w3 alpha"], 5)
    assert load_index(sharded, verify=False)  # still loadable; the other shards were not touched


def test_a_truncated_or_missing_shard_file_is_named(sharded):
    f = sharded / "bm25_sharded" / "shards" / "001" / "indptr.npy"
    f.write_bytes(f.read_bytes()[:-8])
    with pytest.raises(IndexCorruptError, match="shards/001/indptr.npy"):
        load_index(sharded, verify=False)


def test_a_shard_dir_outside_the_index_is_refused(sharded, tmp_path):
    m = json.loads((sharded / "manifest.json").read_text())
    m["backends"]["bm25_sharded"]["shards"][0]["dir"] = "../elsewhere"
    (sharded / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexCorruptError, match="outside the index directory"):
        load_index(sharded, verify=False)


def test_duplicate_ids_are_refused(tmp_path, corpus):
    ps = [*corpus[:100], Passage(corpus[5].id, "x", "another text")]
    with pytest.raises(DuplicateIdError, match=repr(corpus[5].id)):
        build_index(ps, tmp_path / "ix", shards=2, show_progress=False)
    assert not (tmp_path / "ix").exists()


def test_the_passage_store_reads_rows_lazily(sharded, corpus):
    r = load_index(sharded)
    store = r.passages
    assert len(store) == len(corpus) and store[0] == corpus[0] and store[-1] == corpus[-1]
    assert store[10:13] == corpus[10:13]
    with pytest.raises(IndexError):
        store[len(corpus)]


@pytest.mark.slow
def test_streaming_build_memory_does_not_grow_with_the_corpus(tmp_path):
    """Peak RSS of a build of 30k and of 180k passages (same shard size) in fresh processes: the six-fold
    corpus may add a few MB (ids' hashes and lengths are read back in pass 1's last step), never its text."""
    from searchgym.retrieval.synth import write_synthetic_corpus

    peaks = {}
    for n in (30_000, 180_000):
        src = tmp_path / f"c{n}.jsonl"
        write_synthetic_corpus(src, n, vocab_size=20_000, seed=1)
        code = textwrap.dedent(f"""
            import resource
            from searchgym.retrieval.sharded import build_sharded_index
            build_sharded_index({str(src)!r}, {str(tmp_path / f"ix{n}")!r}, shard_size=30_000, show_progress=False)
            print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """)
        r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=900)
        peaks[n] = int(r.stdout.split()[-1]) / 1024  # MB
    text_mb = (tmp_path / "c180000.jsonl").stat().st_size / 1e6
    grew = peaks[180_000] - peaks[30_000]
    assert grew < 0.15 * text_mb, (peaks, text_mb)


# -- MaxScore pruning: exactly the exhaustive kernel's results --------------------------------------------
def _zipf_corpus(n: int = 4000, seed: int = 3) -> list[Passage]:
    """Zipfian words, so queries mix long low-IDF posting lists (pruned) with short high-IDF ones; plus
    identical passages spread over the corpus (exact ties) and passages holding one word many times."""
    rnd = random.Random(seed)
    words = [f"z{i}" for i in range(600)]
    weights = [1 / (r + 1) ** 1.1 for r in range(600)]
    ps = [Passage(str(i), "", " ".join(rnd.choices(words, weights=weights, k=rnd.randint(1, 40))))
          for i in range(n)]
    for j in range(15):
        ps.insert(rnd.randrange(len(ps)), Passage(f"tie{j}", "", "z0 z1 z2 z400 z401"))
    for j in range(5):
        ps.insert(rnd.randrange(len(ps)), Passage(f"rep{j}", "", " ".join(["z3"] * (5 + j))))
    return ps


def _zipf_queries(n: int = 150, seed: int = 5) -> list[str]:
    rnd = random.Random(seed)
    weights = [1 / (r + 1) ** 1.1 for r in range(600)]
    qs = [" ".join(rnd.choices([f"z{i}" for i in range(600)], weights=weights, k=rnd.randint(1, 9)))
          for _ in range(n)]
    return qs + [
        "z0 z1 z2 z3 z4",                 # only common terms
        "z590 z597 z599",                 # only rare terms
        "z0 z0 z0 z1 z598 z598",          # terms repeated in the query
        "z400 z401 z0",                   # the tie passages
        "unknown words only", "",         # out of vocabulary, empty
        "z599 unknownword",               # one rare term, fewer matches than k
        "z3",                             # one term: no pruning possible, ties broken by row
    ]


@pytest.fixture(scope="module")
def zipf_corpus() -> list[Passage]:
    return _zipf_corpus()


@pytest.mark.parametrize("method", ["lucene", "atire", "robertson"])
@pytest.mark.parametrize("n_shards", [1, 3, 8])
def test_maxscore_equals_the_exhaustive_kernel_and_the_unsharded_index(tmp_path, zipf_corpus, method, n_shards):
    """Ids and scores, ties included, for common-only, rare-only, repeated, out-of-vocabulary and empty
    queries and k beyond the matches; robertson's negative IDF (a term in over half the passages) takes the
    exhaustive kernel for that query."""
    ref = BM25Retriever(zipf_corpus, method=method, backend="numpy")
    r = load_index(build_index(zipf_corpus, tmp_path / "ix", shards=n_shards, method=method, show_progress=False))
    assert r.pruning
    qs = _zipf_queries()
    few = ["z599 unknownword", "z590 z597 z599", "z400 z401 z0", "z0 z0 z0 z1 z598 z598"]
    for k, batch in ((1, qs), (3, qs), (10, qs), (50, qs), (len(zipf_corpus) + 10, few)):
        r.pruning = True
        pruned = r.batch_search(batch, k)
        r.pruning = False
        full = r.batch_search(batch, k)
        for q, a, b in zip(batch, pruned, full):
            assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b], (q, k)
        r.pruning = True
        for threads in (2, 3):  # threads split the queries, or the shards for a batch smaller than the threads
            assert r.batch_search(batch, k, n_threads=threads) == pruned, (k, threads)
            assert r.batch_search(batch[:1], k, n_threads=threads) == pruned[:1], (k, threads)
        if k in (3, 50) or batch is few:
            for q, a in zip(batch, pruned):
                assert [(h.id, h.score) for h in a] == _expected(ref, zipf_corpus, q, k), (q, k)
    r.pruning = True
    assert len(r.search("z599 unknownword", 50)) < 50  # k beyond the matches: all of them, no padding
    hits = r.search("z400 z401 z0", 20)
    row = {p.id: i for i, p in enumerate(zipf_corpus)}
    for a, b in itertools.pairwise(hits):  # ties broken by row, across shards
        assert a.score > b.score or (a.score == b.score and row[a.id] < row[b.id])
    assert r.search("unknown words only", 5) == [] and r.search("", 5) == []


def test_maxscore_pure_python_kernel_matches_the_compiled_one(tmp_path, zipf_corpus):
    """Without numba the same kernel runs as Python: same results (a handful of queries: it is slow)."""
    from searchgym.retrieval import sharded as sh

    r = load_index(build_index(zipf_corpus[:800], tmp_path / "ix", shards=2, show_progress=False))
    qs = ["z0 z1 z2 z3 z4", "z5 z0 z0 z77", "z400 z401 z0", "z3"]
    encoded = [np.asarray(r._qenc.ids(q), dtype=np.int64) for q in qs]
    qptr = np.zeros(len(qs) + 1, np.int64)
    np.cumsum([len(q) for q in encoded], out=qptr[1:])
    qids = np.concatenate(encoded)
    floors = (np.full(len(qs), -1.0), np.array([-1.0, 2.0, 4.0, 1.5]))  # none, and some from earlier shards
    for shard, floor in itertools.product(r._shards, floors):
        want = shard.topk_batch(qids, qptr, 7, floor, r._bufs())
        out = (np.empty((len(qs), 7), np.float32), np.empty((len(qs), 7), np.int64), np.empty(len(qs), np.int64))
        bufs = r._bufs()
        rc = sh._maxscore_py(qids, qptr, shard.data, shard.indices, shard.indptr, shard.n,
                             np.full(len(shard.indptr) - 1, np.nan, np.float32), 7, floor, bufs["acc"][: shard.n],
                             bufs["touched"], *out)
        assert rc == 0
        for q in range(len(qs)):
            n = int(want[2][q])
            assert int(out[2][q]) == n
            assert out[0][q, :n].tolist() == want[0][q, :n].tolist()
            assert out[1][q, :n].tolist() == want[1][q, :n].tolist()
        assert not bufs["acc"].any()  # the scratch space is left clean for the next query
