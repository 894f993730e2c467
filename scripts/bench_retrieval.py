#!/usr/bin/env python
"""Retrieval benchmark: searchgym BM25 (numba / numpy) vs bm25s called directly vs rank-bm25, and dense
FAISS Flat vs HNSW.

The corpus is generated here (no download): passages of ~100 words drawn from a Zipfian vocabulary whose most
frequent words are English stopwords, and queries of 5-12 words drawn from the same distribution (so, like
real text, queries carry common words that touch many postings). Sizes: 10k and 100k passages (+1M with
--large), 2,000 queries, k=10.

Build time and peak RSS come from one subprocess per index builder (``ru_maxrss``: the peak, and in brackets its
growth over the process's baseline after generating the corpus, i.e. mostly the index). Query speeds come from
one process holding every engine, timed in alternating rounds with the best round kept, because this machine's
load changes over minutes (the load average is printed). Single = one ``search`` call per query, one thread,
latency per call (tokenisation and Hit objects included); batched = one ``batch_search`` call for all queries
(2 threads). numba compilation is excluded (warm-up before timing).

    python scripts/bench_retrieval.py            # 10k + 100k, dense on 2k passages (~6-8 min on 2 cores)
    python scripts/bench_retrieval.py --quick    # 2k passages, 300 queries, dense on 300 (~1-2 min)
    python scripts/bench_retrieval.py --large    # adds 1M passages (BM25 only; ~30 min more)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

K = 10
SEED = 13
VOCAB = 60_000
MAX_SECONDS = 25.0  # per timed loop: slow configurations answer fewer queries (the count is reported)


# -- synthetic data -------------------------------------------------------------------------------------
def _vocabulary(n: int) -> list[str]:
    from bm25s.stopwords import STOPWORDS_EN

    rng = np.random.default_rng(SEED)
    syll = ["ka", "to", "ri", "mel", "an", "dor", "vi", "su", "len", "par", "qua", "ste", "lo", "ne", "gra", "fu",
            "ish", "om", "bel", "tra", "zo", "cy", "mir", "ad", "hel", "un", "sor", "pe", "dri", "wan"]
    words, seen = list(STOPWORDS_EN), set(STOPWORDS_EN)
    while len(words) < n:
        w = "".join(rng.choice(syll, size=int(rng.integers(2, 5))))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def make_corpus(n: int, n_queries: int, seed: int = SEED) -> tuple[list, list[str]]:
    """``n`` passages of ~100 words and ``n_queries`` queries of 5-12 words (deterministic)."""
    from searchgym.retrieval import Passage

    words = np.array(_vocabulary(VOCAB), dtype=object)
    p = 1.0 / np.arange(1, VOCAB + 1) ** 1.07
    p /= p.sum()
    rng = np.random.default_rng(seed)
    passages = []
    chunk = 10_000
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        lens = rng.integers(80, 121, size=m)
        toks = words[rng.choice(VOCAB, size=int(lens.sum()), p=p)]
        off = 0
        for i, ln in enumerate(lens):
            t = toks[off:off + ln]
            off += ln
            passages.append(Passage(str(start + i), " ".join(t[:3]).title(), " ".join(t)))
    stop = set(_stopwords())
    queries: list[str] = []
    while len(queries) < n_queries:  # drop the rare all-stopword query (every backend would return nothing)
        q = words[rng.choice(VOCAB, size=int(rng.integers(5, 13)), p=p)]
        if any(w not in stop for w in q):
            queries.append(" ".join(q))
    return passages, queries


def _stopwords() -> tuple[str, ...]:
    from bm25s.stopwords import STOPWORDS_EN

    return tuple(STOPWORDS_EN)


# -- measurement helpers ------------------------------------------------------------------------------
def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_single(fn, queries: list, budget: float) -> tuple[float, list[float]]:
    """One pass of single-query calls (stops after ``budget`` seconds); returns (q/s, latencies)."""
    lat = []
    t_end = time.perf_counter() + budget
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        t1 = time.perf_counter()
        lat.append(t1 - t0)
        if t1 > t_end:
            break
    return len(lat) / sum(lat), lat


def time_batch(fn, queries: list) -> float:
    t0 = time.perf_counter()
    fn(queries)
    return len(queries) / (time.perf_counter() - t0)


# -- build-only configurations (one subprocess each: build time and peak RSS are its own) ----------------
def run_build(name: str, n: int) -> dict:
    passages, _ = make_corpus(n, 10)
    base = rss_mb()
    t0 = time.perf_counter()
    if name == "searchgym":
        from searchgym.retrieval import BM25Retriever

        BM25Retriever(passages, backend="numpy")  # the index is the same for both engines
    elif name == "bm25s":
        import bm25s

        bm = bm25s.BM25()
        bm.index(bm25s.tokenize([p.contents for p in passages], stopwords="en", show_progress=False),
                 show_progress=False)
    elif name == "rank-bm25":
        from searchgym.retrieval import BM25Retriever

        BM25Retriever(passages, backend="rank_bm25")
    else:
        raise SystemExit(f"unknown build config {name}")
    return {"build_s": time.perf_counter() - t0, "peak_rss_mb": peak_mb(), "index_rss_mb": peak_mb() - base}


# -- query speed: every engine in one process, measured in alternating rounds ----------------------------
def run_speed(n: int, n_queries: int, rounds: int = 3) -> dict:
    """Machine load moves over minutes, so engines are timed round-robin in one process and the best round
    counts (as timeit does); p50/p99 pool all rounds."""
    import bm25s

    from searchgym.retrieval import BM25Retriever

    passages, queries = make_corpus(n, n_queries)
    nb = BM25Retriever(passages, backend="numba", n_threads=2)
    nb.warmup()
    npy = BM25Retriever(passages, backend="numpy", n_threads=2)
    bm = bm25s.BM25(backend="numba")
    bm.index(bm25s.tokenize([p.contents for p in passages], stopwords="en", show_progress=False), show_progress=False)
    pretok = bm25s.tokenize(queries, stopwords="en", show_progress=False, return_ids=False)
    tok_of = dict(zip(queries, pretok))
    bm.retrieve(pretok[:8], k=K, show_progress=False)
    bm.retrieve(pretok[:8], k=K, show_progress=False, n_threads=2)  # numba compiles outside the timing

    engines = {
        "searchgym-numba": (lambda q: nb.search(q, K), lambda qs: nb.batch_search(qs, K)),
        "searchgym-numpy": (lambda q: npy.search(q, K), lambda qs: npy.batch_search(qs, K)),
        # documented bm25s usage: bm25s.tokenize(query) then retrieve
        "bm25s-direct": (
            lambda q: bm.retrieve(bm25s.tokenize(q, stopwords="en", show_progress=False), k=K, show_progress=False),
            lambda qs: bm.retrieve(bm25s.tokenize(qs, stopwords="en", show_progress=False), k=K,
                                   show_progress=False, n_threads=2)),
        # the kernel alone: queries tokenised (to strings) before the clock starts
        "bm25s-direct-pretok": (
            lambda q: bm.retrieve([tok_of[q]], k=K, show_progress=False),
            lambda qs: bm.retrieve(pretok, k=K, show_progress=False, n_threads=2)),
    }
    res: dict = {name: {"single": 0.0, "lat": [], "batch": 0.0} for name in engines}
    for rnd in range(rounds):
        for name, (one, many) in engines.items():
            qps, lat = time_single(one, queries, MAX_SECONDS / rounds)
            r = res[name]
            r["single"] = max(r["single"], qps)
            r["lat"] += lat
            if name != "searchgym-numpy" or n <= 100_000 or rnd == 0:
                r["batch"] = max(r["batch"], time_batch(many, queries))
    out = {}
    for name, r in res.items():
        a = np.array(r["lat"])
        out[name] = {"single_qps": r["single"], "p50_ms": float(np.percentile(a, 50) * 1e3),
                     "p99_ms": float(np.percentile(a, 99) * 1e3), "batch_qps": r["batch"], "single_n": len(a)}
    return out


def run_rank_bm25(n: int, n_queries: int) -> dict:
    from searchgym.retrieval import BM25Retriever

    passages, queries = make_corpus(n, n_queries)
    r = BM25Retriever(passages, backend="rank_bm25")
    qps, lat = time_single(lambda q: r.search(q, K), queries[:200], MAX_SECONDS)
    a = np.array(lat)
    return {"single_qps": qps, "p50_ms": float(np.percentile(a, 50) * 1e3),
            "p99_ms": float(np.percentile(a, 99) * 1e3), "batch_qps": None, "single_n": len(a)}


def run_dense(n: int, n_queries: int) -> dict:
    from searchgym.retrieval import DenseRetriever

    passages, queries = make_corpus(n, n_queries)
    out: dict = {}
    t0 = time.perf_counter()
    flat = DenseRetriever(passages, index_type="flat", show_progress=False)
    out["encode_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    hnsw = DenseRetriever(passages, index_type="hnsw", embeddings=flat.embeddings, hnsw_m=32, ef_search=128)
    out["hnsw_build_s"] = time.perf_counter() - t0
    qv = flat.encode(queries)
    idx = {}
    for label, r in (("flat", flat), ("hnsw", hnsw)):
        t0 = time.perf_counter()
        _, idx[label] = r.index.search(qv, K)
        out[f"{label}_search_qps"] = len(queries) / (time.perf_counter() - t0)
        qps, lat = time_single(lambda q, r=r: r.search(q, K), queries[:300], MAX_SECONDS)
        a = np.array(lat)
        out |= {f"{label}_single_qps": qps, f"{label}_p50_ms": float(np.percentile(a, 50) * 1e3),
                f"{label}_p99_ms": float(np.percentile(a, 99) * 1e3)}
        out[f"{label}_batch_qps"] = time_batch(lambda qs, r=r: r.batch_search(qs, K), queries)
    out["hnsw_recall10"] = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(idx["flat"], idx["hnsw"])]))
    out["peak_rss_mb"] = peak_mb()
    return out


def run_worker(job: str, n: int, n_queries: int) -> dict:
    if job.startswith("build:"):
        return run_build(job.split(":", 1)[1], n)
    if job == "speed":
        return run_speed(n, n_queries)
    if job == "rank-bm25":
        return run_rank_bm25(n, n_queries)
    if job == "dense":
        return run_dense(n, n_queries)
    raise SystemExit(f"unknown job {job}")


def run_in_subprocess(job: str, n: int, n_queries: int) -> dict | None:
    cmd = [sys.executable, __file__, "--worker", job, "--n", str(n), "--queries", str(n_queries)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        print(f"  {job} @ {n:,}: FAILED\n{p.stderr[-3000:]}", file=sys.stderr)
        return None
    print(f"  {job} @ {n:,}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


# -- report ---------------------------------------------------------------------------------------------
def fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small smoke run (2k passages, 300 queries)")
    ap.add_argument("--large", action="store_true", help="add 1M passages (BM25 configurations only)")
    ap.add_argument("--dense-n", type=int, default=None, help="passages for the dense part (default 2000)")
    ap.add_argument("--no-dense", action="store_true", help="skip the dense part")
    ap.add_argument("--large-bm25s", action="store_true", help="with --large, also build bm25s directly at 1M")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--queries", type=int, default=2000, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        res = run_worker(a.worker, a.n, a.queries)
        print(json.dumps({k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in res.items()}))
        return

    sizes = [2_000] if a.quick else [10_000, 100_000] + ([1_000_000] if a.large else [])
    n_queries = 300 if a.quick else 2000
    dense_n = a.dense_n or (300 if a.quick else 2_000)
    load = os.getloadavg()[0]
    print(f"# searchgym retrieval benchmark — {os.cpu_count()} CPU(s), load average {load:.1f} at start, k={K}, "
          f"{n_queries} queries of 5-12 words, passages of ~100 words\n", flush=True)

    labels = {"searchgym-numba": "searchgym BM25 (bm25s numba)", "searchgym-numpy": "searchgym BM25 (bm25s numpy)",
              "bm25s-direct": "bm25s direct, numba (bm25s.tokenize + retrieve)",
              "bm25s-direct-pretok": "bm25s direct, numba (retrieve on pre-tokenised queries)",
              "rank-bm25": "rank-bm25 BM25Okapi (via searchgym)"}
    build_of = {"searchgym-numba": "searchgym", "searchgym-numpy": "searchgym", "bm25s-direct": "bm25s",
                "bm25s-direct-pretok": "bm25s", "rank-bm25": "rank-bm25"}
    results: dict[int, dict] = {}
    for n in sizes:
        builds = {b: run_in_subprocess(f"build:{b}", n, n_queries) for b in ("searchgym", "bm25s")
                  if not (b == "bm25s" and n > 100_000 and not a.large_bm25s)}
        speed = run_in_subprocess("speed", n, n_queries) or {}
        if n <= 10_000:
            builds["rank-bm25"] = run_in_subprocess("build:rank-bm25", n, n_queries)
            speed["rank-bm25"] = run_in_subprocess("rank-bm25", n, n_queries)
        results[n] = {"builds": builds, "speed": speed}

    print("## BM25\n")
    print("| passages | configuration | build s | peak RSS MB (index Δ) | single q/s | p50 ms | p99 ms | batched q/s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        builds, speed = results[n]["builds"], results[n]["speed"]
        for name, label in labels.items():
            if name == "rank-bm25" and n > 10_000:
                print(f"| {n:,} | {label} | – | – | skipped above 10k passages (≈3 q/s at 100k) | – | – | – |")
                continue
            b, sp = builds.get(build_of[name]) or {}, speed.get(name)
            if not sp:
                continue
            rss = f"{fmt(b.get('peak_rss_mb'))} ({fmt(b.get('index_rss_mb'))})" if b else "–"
            print(f"| {n:,} | {label} | {fmt(b.get('build_s'), 1)} | {rss} | {fmt(sp['single_qps'])} | "
                  f"{fmt(sp['p50_ms'], 3)} | {fmt(sp['p99_ms'], 3)} | {fmt(sp.get('batch_qps'))} |")

    print("\n## Ratios (same process, same queries, alternating rounds)\n")
    print("| passages | searchgym numba / rank-bm25 (single) | searchgym numba / bm25s direct (single, batched) "
          "| searchgym numba / bm25s pre-tokenised (single, batched) |")
    print("|---:|---:|---:|---:|")
    for n in sizes:
        by = results[n]["speed"]
        sg = by.get("searchgym-numba")
        if not sg:
            continue
        rb, bd, bp = by.get("rank-bm25"), by.get("bm25s-direct"), by.get("bm25s-direct-pretok")
        c1 = f"{sg['single_qps'] / rb['single_qps']:,.0f}×" if rb else "– (rank-bm25 skipped)"
        c2 = f"{sg['single_qps'] / bd['single_qps']:.2f}×, {sg['batch_qps'] / bd['batch_qps']:.2f}×" if bd else "–"
        c3 = f"{sg['single_qps'] / bp['single_qps']:.2f}×, {sg['batch_qps'] / bp['batch_qps']:.2f}×" if bp else "–"
        print(f"| {n:,} | {c1} | {c2} | {c3} |")

    if not a.no_dense:
        d = run_in_subprocess("dense", dense_n, n_queries)
        if d:
            print(f"\n## Dense (all-MiniLM-L6-v2, 384-d, {dense_n:,} passages; encoding took {d['encode_s']:.0f} s "
                  f"= {dense_n / d['encode_s']:.0f} passages/s; HNSW M=32 efSearch=128 built in "
                  f"{d['hnsw_build_s']:.2f} s; peak RSS {d['peak_rss_mb']:,.0f} MB)\n")
            print("| index | single q/s (encode + search) | p50 ms | p99 ms | batched q/s (encode + search) "
                  "| search-only q/s (batch) | recall@10 vs Flat |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for label, rec in (("flat", "1"), ("hnsw", f"{d['hnsw_recall10']:.3f}")):
                print(f"| {label.upper() if label == 'hnsw' else 'Flat IP'} | {fmt(d[f'{label}_single_qps'])} | "
                      f"{fmt(d[f'{label}_p50_ms'], 2)} | {fmt(d[f'{label}_p99_ms'], 2)} | "
                      f"{fmt(d[f'{label}_batch_qps'])} | {fmt(d[f'{label}_search_qps'])} | {rec} |")
    print(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}.")
    print("\nNotes: searchgym rows include query tokenisation and building Hit(id, score, passage) objects; "
          "'bm25s direct' returns arrays of indices and scores; the 'pre-tokenised' row times bm25s' retrieve alone. "
          f"Single-query passes stop after {MAX_SECONDS / 3:.0f} s (the p50/p99 pool every round); rank-bm25 answers "
          "200 queries. Synthetic Zipfian text: HNSW recall on it is lower than on real text embeddings.")


if __name__ == "__main__":
    main()
