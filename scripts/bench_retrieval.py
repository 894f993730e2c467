#!/usr/bin/env python
"""Retrieval benchmark: searchgym BM25 (numba / numpy) vs bm25s called directly vs rank-bm25, and dense
FAISS Flat vs HNSW.

The corpus is generated here (no download): passages of ~100 words drawn from a Zipfian vocabulary whose most
frequent words are English stopwords, and queries of 5-12 words drawn from the same distribution (so, like
real text, queries carry common words that touch many postings). Sizes: 10k and 100k passages (+1M with
--large), 2,000 queries, k=10.

Each configuration runs in its own subprocess so that its peak RSS (``ru_maxrss``) is its own; the table shows
the peak and the growth over the process's baseline after generating the corpus (so mostly the index).
Single = one ``search`` call per query, one thread, latency per call (tokenisation included). Batched = one
``batch_search`` call for all queries (2 threads). numba compilation is excluded (warm-up before timing).

    python scripts/bench_retrieval.py            # 10k + 100k, dense on 2k passages (~6-8 min on 2 cores)
    python scripts/bench_retrieval.py --quick    # 2k passages, 300 queries, dense on 300 (~1-2 min)
    python scripts/bench_retrieval.py --large    # adds 1M passages (BM25 only; ~15 min more)
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


def time_single(fn, queries: list) -> dict:
    lat = []
    t_end = time.perf_counter() + MAX_SECONDS
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        t1 = time.perf_counter()
        lat.append(t1 - t0)
        if t1 > t_end:
            break
    a = np.array(lat)
    return {"single_qps": len(a) / a.sum(), "p50_ms": float(np.percentile(a, 50) * 1e3),
            "p99_ms": float(np.percentile(a, 99) * 1e3), "single_n": len(a)}


def time_batch(fn, queries: list, reps: int = 3) -> dict:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(queries)
        best = min(best, time.perf_counter() - t0)
        if best * reps > MAX_SECONDS:
            break
    return {"batch_qps": len(queries) / best}


# -- one configuration (runs in a subprocess) ----------------------------------------------------------
def run_config(name: str, n: int, n_queries: int) -> dict:
    passages, queries = make_corpus(n, n_queries)
    base = rss_mb()
    out: dict = {"config": name, "n": n, "queries": len(queries)}
    if name.startswith("searchgym-bm25"):
        from searchgym.retrieval import BM25Retriever

        backend = name.rsplit("-", 1)[1]
        t0 = time.perf_counter()
        r = BM25Retriever(passages, backend=backend, n_threads=2)
        out["build_s"] = time.perf_counter() - t0
        r.warmup()
        out |= time_single(lambda q: r.search(q, K), queries)
        out |= time_batch(lambda qs: r.batch_search(qs, K), queries)
    elif name.startswith("bm25s-direct"):
        import bm25s

        t0 = time.perf_counter()
        corpus_tokens = bm25s.tokenize([p.contents for p in passages], stopwords="en", show_progress=False)
        bm = bm25s.BM25(backend="numba")
        bm.index(corpus_tokens, show_progress=False)
        out["build_s"] = time.perf_counter() - t0
        bm.retrieve([["x"]], k=K, show_progress=False)  # compile
        bm.retrieve([["x"]] * 8, k=K, show_progress=False, n_threads=2)
        if name.endswith("pretok"):
            # the kernel alone: queries tokenised (to strings) beforehand, outside the timing
            toks = bm25s.tokenize(queries, stopwords="en", show_progress=False, return_ids=False)
            toks = [t or ["x"] for t in toks]
            it = iter(range(len(toks)))
            out |= time_single(lambda q: bm.retrieve([toks[next(it)]], k=K, show_progress=False), queries)
            out |= time_batch(lambda qs: bm.retrieve(toks, k=K, show_progress=False, n_threads=2), queries)
        else:
            # documented usage: bm25s.tokenize(query) then retrieve
            def one(q):
                return bm.retrieve(bm25s.tokenize(q, stopwords="en", show_progress=False), k=K,
                                   show_progress=False)

            def many(qs):
                return bm.retrieve(bm25s.tokenize(qs, stopwords="en", show_progress=False), k=K,
                                   show_progress=False, n_threads=2)

            out |= time_single(one, queries)
            out |= time_batch(many, queries)
    elif name == "rank-bm25":
        from searchgym.retrieval import BM25Retriever

        t0 = time.perf_counter()
        r = BM25Retriever(passages, backend="rank_bm25")
        out["build_s"] = time.perf_counter() - t0
        out |= time_single(lambda q: r.search(q, K), queries[:200])
    elif name.startswith("dense"):
        from searchgym.retrieval import DenseRetriever

        t0 = time.perf_counter()
        flat = DenseRetriever(passages, index_type="flat", show_progress=False)
        out["encode_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        hnsw = DenseRetriever(passages, index_type="hnsw", embeddings=flat.embeddings, hnsw_m=32, ef_search=128)
        out["hnsw_build_s"] = time.perf_counter() - t0
        qv = flat.encode(queries)
        for label, r in (("flat", flat), ("hnsw", hnsw)):
            t0 = time.perf_counter()
            _, idx = r.index.search(qv, K)
            out[f"{label}_search_qps"] = len(queries) / (time.perf_counter() - t0)
            out[f"{label}_idx"] = idx
            s = time_single(lambda q, r=r: r.search(q, K), queries[:300])
            out |= {f"{label}_{k}": v for k, v in s.items()}
            out[f"{label}_batch_qps"] = time_batch(lambda qs, r=r: r.batch_search(qs, K), queries, reps=1)["batch_qps"]
        fi, hi = out.pop("flat_idx"), out.pop("hnsw_idx")
        out["hnsw_recall10"] = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(fi, hi)]))
    else:
        raise SystemExit(f"unknown config {name}")
    out["peak_rss_mb"] = peak_mb()
    out["index_rss_mb"] = peak_mb() - base
    return out


def run_in_subprocess(name: str, n: int, n_queries: int) -> dict | None:
    cmd = [sys.executable, __file__, "--worker", name, "--n", str(n), "--queries", str(n_queries)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        print(f"  {name} @ {n:,}: FAILED\n{p.stderr[-3000:]}", file=sys.stderr)
        return None
    res = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"  {name} @ {n:,}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return res


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
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--queries", type=int, default=2000, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        res = run_config(a.worker, a.n, a.queries)
        print(json.dumps({k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in res.items()}))
        return

    sizes = [2_000] if a.quick else [10_000, 100_000] + ([1_000_000] if a.large else [])
    n_queries = 300 if a.quick else 2000
    dense_n = a.dense_n or (300 if a.quick else 2_000)
    print(f"# searchgym retrieval benchmark — {os.cpu_count()} CPU(s), k={K}, {n_queries} queries of 5-12 words, "
          f"passages of ~100 words\n", flush=True)

    rows = []
    for n in sizes:
        for name in ("searchgym-bm25-numba", "searchgym-bm25-numpy", "bm25s-direct", "bm25s-direct-pretok",
                     "rank-bm25"):
            if name == "rank-bm25" and n > 10_000:
                rows.append({"config": name, "n": n, "skipped": "skipped above 10k passages (≈3 q/s at 100k)"})
                continue
            res = run_in_subprocess(name, n, n_queries)
            if res:
                rows.append(res)

    labels = {"searchgym-bm25-numba": "searchgym BM25 (bm25s numba)",
              "searchgym-bm25-numpy": "searchgym BM25 (bm25s numpy)",
              "bm25s-direct": "bm25s direct, numba (bm25s.tokenize + retrieve)",
              "bm25s-direct-pretok": "bm25s direct, numba (retrieve on pre-tokenised queries)",
              "rank-bm25": "rank-bm25 BM25Okapi (via searchgym)"}
    print("## BM25\n")
    print("| passages | configuration | build s | peak RSS MB (index Δ) | single q/s | p50 ms | p99 ms | batched q/s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['n']:,} | {labels[r['config']]} | – | – | {r['skipped']} | – | – | – |")
            continue
        print(f"| {r['n']:,} | {labels[r['config']]} | {fmt(r['build_s'], 1)} | {fmt(r['peak_rss_mb'])} "
              f"({fmt(r['index_rss_mb'])}) | {fmt(r['single_qps'])} | {fmt(r['p50_ms'], 3)} | {fmt(r['p99_ms'], 3)} "
              f"| {fmt(r.get('batch_qps'))} |")

    print("\n## Ratios (same run, same queries)\n")
    print("| passages | searchgym numba / rank-bm25 (single) | searchgym numba / bm25s direct (single, batched) "
          "| searchgym numba / bm25s pre-tokenised (single, batched) |")
    print("|---:|---:|---:|---:|")
    for n in sizes:
        by = {r["config"]: r for r in rows if r["n"] == n and "skipped" not in r}
        sg = by.get("searchgym-bm25-numba")
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
    print("\nNotes: single-query timings include searchgym's query tokenisation and Hit construction; the "
          "'pre-tokenised' bm25s row times bm25s' retrieve alone. Loops stop after "
          f"{MAX_SECONDS:.0f} s (rank-bm25 answers 200 queries). Synthetic Zipfian text: HNSW recall on it is lower "
          "than on real text embeddings.")


if __name__ == "__main__":
    main()
