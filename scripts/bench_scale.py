"""Benchmark: sharded, memory-mapped BM25 at wiki-18 scale on this machine (issue 23 §5).

For each size N (synthetic wiki-18-like corpus, ``searchgym.retrieval.synth``), in fresh processes so peak RSS
is each phase's own:
  build     streaming sharded build: wall time, peak RSS, index size on disk
  serve     load_index (verify=False: a trusted index) time and RSS after load; single queries (p50/p99, q/s);
            batches of 64 (p50/p99 per batch, q/s) with 1 and 2 threads
  reference an unsharded in-memory bm25s index (BM25Retriever, numba) in the same run where N <= --parity-max:
            build time, peak RSS, q/s, and exact parity of the sharded top 10 (ids and scores, ties by row)

    python scripts/bench_scale.py --sizes 100000            # a quick run
    python scripts/bench_scale.py --sizes 1000000 --shard-size 250000 --workdir /tmp/scale
    python scripts/bench_scale.py --sizes 1000000 --compare --keep --skip-build   # MaxScore vs exhaustive kernel

Past one machine (shards on Ray Serve): scripts/bench_serve_ray.py.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

K = 10
REFERENCE_MD = "/work/shared/reference/retrieval-bench.md (1M, bm25s numba: 326 single q/s, 697 batched, " \
               "build 159 s at 3.1 GB peak)"


def _rss_mb(field: str = "VmRSS") -> float:
    """Resident MB; ``RssAnon`` is the process's own memory, ``RssFile`` the mapped files' pages (the page cache,
    shared and reclaimable)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


def phase_build(a: argparse.Namespace) -> dict:
    from searchgym.retrieval.sharded import build_sharded_index

    t0 = time.perf_counter()
    build_sharded_index(a.corpus, a.index, shard_size=a.shard_size, overwrite=True, show_progress=True)
    secs = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in Path(a.index).rglob("*") if f.is_file())
    return {"build_s": secs, "build_peak_mb": _peak_mb(), "disk_mb": size / 1e6}


def _time_queries(r, queries: list[str], batch: int, threads: int) -> dict:
    lat = []
    t0 = time.perf_counter()
    for i in range(0, len(queries), batch):
        t = time.perf_counter()
        if batch == 1:
            r.search(queries[i], K)
        else:
            r.batch_search(queries[i:i + batch], K, n_threads=threads)
        lat.append(time.perf_counter() - t)
    total = time.perf_counter() - t0
    return {"qps": len(queries) / total, "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99)}


def _time_pair(r, queries: list[str], batch: int, threads: int) -> dict:
    """The exhaustive kernel and MaxScore on the same batches, alternating which goes first: wall-clock q/s,
    p50/p99 per batch, and q/s per CPU-second of this process (less sensitive to other jobs on the machine)."""
    lat: dict[bool, list[float]] = {False: [], True: []}
    cpu = {False: 0.0, True: 0.0}
    for j, i in enumerate(range(0, len(queries), batch)):
        for pruning in ((False, True) if j % 2 == 0 else (True, False)):
            r.pruning = pruning
            t, c = time.perf_counter(), time.process_time()
            if batch == 1:
                r.search(queries[i], K)
            else:
                r.batch_search(queries[i:i + batch], K, n_threads=threads)
            cpu[pruning] += time.process_time() - c
            lat[pruning].append(time.perf_counter() - t)
    r.pruning = True
    return {name: {"qps": len(queries) / sum(lat[p]), "cpu_qps": len(queries) / cpu[p], "p50_ms": _pct(lat[p], 50),
                   "p99_ms": _pct(lat[p], 99)} for name, p in (("exhaustive", False), ("maxscore", True))}


def phase_serve(a: argparse.Namespace) -> dict:
    from searchgym.retrieval import load_index
    from searchgym.retrieval.synth import synthetic_queries

    rss0 = _rss_mb()
    t0 = time.perf_counter()
    r = load_index(a.index, verify=False)
    load_s = time.perf_counter() - t0
    rss_load, anon_load = _rss_mb(), _rss_mb("RssAnon")
    r.warmup()
    qs = synthetic_queries(a.queries, vocab_size=a.vocab_size, seed=7)
    out = {"load_s": load_s, "rss_after_load_mb": rss_load, "rss_before_mb": rss0, "shards": r.n_shards}
    if a.compare:
        # the first pass pays the page faults and each term's MaxScore bound (computed on its first query);
        # then both kernels are timed on the same warm pages, batch by batch in turn, so that the load of a
        # shared machine falls on both alike
        out["batch64_1t_first_pass"] = _time_queries(r, qs, 64, 1)
        out["compare"] = {"single": _time_pair(r, qs[: a.single], 1, 1), "batch64_1t": _time_pair(r, qs, 64, 1),
                          "batch64_2t": _time_pair(r, qs, 64, 2)}
        r.pruning = False
        full = r.batch_search(qs, K)
        r.pruning = True
        pruned = r.batch_search(qs, K)
        same = sum(1 for x, y in zip(full, pruned) if [(h.id, h.score) for h in x] == [(h.id, h.score) for h in y])
        out["maxscore_vs_exhaustive"] = f"{same}/{len(qs)}"
    out.update({"single": _time_queries(r, qs[: a.single], 1, 1),
                "batch64_1t": _time_queries(r, qs, 64, 1), "batch64_2t": _time_queries(r, qs, 64, 2),
                "rss_after_queries_mb": _rss_mb(), "anon_after_queries_mb": _rss_mb("RssAnon"),
                "file_after_queries_mb": _rss_mb("RssFile"), "anon_after_load_mb": anon_load})
    if a.dump:
        res = r.batch_search(qs[: a.parity_queries], K)
        Path(a.dump).write_text(json.dumps([[(h.id, h.score) for h in hits] for hits in res]))
    return out


def phase_reference(a: argparse.Namespace) -> dict:
    """Unsharded bm25s in memory: build, speed, and its exact ranking for the parity check."""
    from searchgym.retrieval import load_corpus
    from searchgym.retrieval.bm25 import BM25Retriever
    from searchgym.retrieval.synth import synthetic_queries

    t0 = time.perf_counter()
    ps = load_corpus(a.corpus)
    r = BM25Retriever(ps, backend="auto")
    build_s = time.perf_counter() - t0
    r.warmup()
    qs = synthetic_queries(a.queries, vocab_size=a.vocab_size, seed=7)
    out = {"build_s": build_s, "peak_mb": _peak_mb(), "single": _time_queries(r, qs[: a.single], 1, 1),
           "batch64_1t": _time_queries(r, qs, 64, 1)}
    bm = r._engine.bm
    exp = []
    for q in qs[: a.parity_queries]:
        ids = r._qenc.ids(q)
        if not ids:
            exp.append([])
            continue
        full = bm.get_scores_from_ids(ids)
        top = np.argpartition(-full, K * 4)[: K * 4] if len(full) > K * 4 else np.arange(len(full))
        kth = np.sort(full[top])[::-1][K - 1] if len(top) >= K else 0
        cand = np.flatnonzero(full >= kth)  # every passage tied at rank K, so the tie rule can be applied
        order = cand[np.lexsort((cand, -full[cand]))]
        exp.append([(ps[i].id, float(full[i])) for i in order if full[i] > 0][:K])
    got = json.loads(Path(a.dump).read_text())
    same = sum(1 for e, g in zip(exp, got) if [tuple(x) for x in g] == e)
    out["parity"] = f"{same}/{len(exp)}"
    return out


def _run_phase(phase: str, a: argparse.Namespace, extra: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--phase", phase, "--corpus", str(a.corpus), "--index", str(a.index),
           "--shard-size", str(a.shard_size), "--queries", str(a.queries), "--single", str(a.single),
           "--vocab-size", str(a.vocab_size), "--parity-queries", str(a.parity_queries),
           *(["--compare"] if a.compare else []), *extra]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"phase {phase} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000", help="comma-separated corpus sizes")
    ap.add_argument("--shard-size", type=int, default=250_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/searchgym-bench-scale"))
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--single", type=int, default=300)
    ap.add_argument("--vocab-size", type=int, default=2_000_000)
    ap.add_argument("--parity-max", type=int, default=1_000_000, help="largest N with the unsharded reference")
    ap.add_argument("--parity-queries", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep corpora and indexes")
    ap.add_argument("--skip-build", action="store_true", help="reuse an index kept by an earlier --keep run")
    ap.add_argument("--compare", action="store_true", help="also time the exhaustive kernel (pruning off) in the "
                                                           "same process and count identical top-10s")
    ap.add_argument("--no-reference", action="store_true", help="skip the unsharded reference and its parity")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--index", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.phase:
        phases = {"build": phase_build, "serve": phase_serve, "reference": phase_reference}
        print(json.dumps(phases[a.phase](a)))
        return
    from searchgym.retrieval.synth import write_synthetic_corpus

    a.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(s) for s in a.sizes.split(",")):
        a.corpus = a.workdir / f"synth-{n}.jsonl"
        a.index = a.workdir / f"index-{n}"
        if not a.corpus.exists():
            t = time.perf_counter()
            write_synthetic_corpus(a.corpus, n, vocab_size=a.vocab_size)
            print(f"[{n:,}] corpus written in {time.perf_counter() - t:.0f} s "
                  f"({a.corpus.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
        if a.skip_build and (a.index / "manifest.json").exists():
            b = json.loads((a.workdir / f"build-{n}.json").read_text())
        else:
            b = _run_phase("build", a, [])
            (a.workdir / f"build-{n}.json").write_text(json.dumps(b))
        print(f"[{n:,}] built: {b}", file=sys.stderr)
        dump = a.workdir / f"sharded-top{K}-{n}.json"
        s = _run_phase("serve", a, ["--dump", str(dump)])
        print(f"[{n:,}] served: {s}", file=sys.stderr)
        ref = _run_phase("reference", a, ["--dump", str(dump)]) if n <= a.parity_max and not a.no_reference \
            else None
        print(f"[{n:,}] reference: {ref}", file=sys.stderr)
        rows.append((n, b, s, ref))
        if not a.keep:
            import shutil

            shutil.rmtree(a.index, ignore_errors=True)
    print(f"\nsharded BM25, shard size {a.shard_size:,}, k={K}, synthetic wiki-18-like corpus "
          f"(vocab {a.vocab_size:,}), {os.cpu_count()} cores; reference: {REFERENCE_MD}\n")
    print("| passages | engine | build s | build peak RSS MB | disk MB | load s | RSS after load MB | "
          "single q/s (p50/p99 ms) | batch 64 q/s 1 thread (p50/p99 ms per batch) | 2 threads | parity top-10 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, b, s, ref in rows:
        sg, b1, b2 = s["single"], s["batch64_1t"], s["batch64_2t"]
        print(f"| {n:,} | sharded ({s['shards']} shards, mmap) | {b['build_s']:.0f} | {b['build_peak_mb']:.0f} | "
              f"{b['disk_mb']:.0f} | {s['load_s']:.1f} | {s['rss_after_load_mb']:.0f} | "
              f"{sg['qps']:.0f} ({sg['p50_ms']:.1f}/{sg['p99_ms']:.1f}) | "
              f"{b1['qps']:.0f} ({b1['p50_ms']:.0f}/{b1['p99_ms']:.0f}) | "
              f"{b2['qps']:.0f} ({b2['p50_ms']:.0f}/{b2['p99_ms']:.0f}) | "
              f"{ref['parity'] if ref else 'not run'} |")
        if "compare" in s:
            c, fp = s["compare"], s["batch64_1t_first_pass"]
            for name, label in (("exhaustive", "exhaustive kernel (before)"), ("maxscore", "MaxScore (after)")):
                cg, c1, c2 = c["single"][name], c["batch64_1t"][name], c["batch64_2t"][name]
                print(f"| {n:,} | sharded, {label}, batches in turn with the other | – | – | – | – | – | "
                      f"{cg['qps']:.0f} ({cg['p50_ms']:.1f}/{cg['p99_ms']:.1f}); {cg['cpu_qps']:.0f} per CPU-s | "
                      f"{c1['qps']:.0f} ({c1['p50_ms']:.0f}/{c1['p99_ms']:.0f}); {c1['cpu_qps']:.0f} per CPU-s | "
                      f"{c2['qps']:.0f} ({c2['p50_ms']:.0f}/{c2['p99_ms']:.0f}) | "
                      f"MaxScore = exhaustive: {s['maxscore_vs_exhaustive']} |")
            print(f"| {n:,} | sharded, MaxScore, first pass (cold pages, bounds computed on first use) | – | – | – | "
                  f"– | – | – | {fp['qps']:.0f} ({fp['p50_ms']:.0f}/{fp['p99_ms']:.0f}) | – | – |")
        if ref:
            rs, r1 = ref["single"], ref["batch64_1t"]
            print(f"| {n:,} | unsharded bm25s in memory (same run) | {ref['build_s']:.0f} | {ref['peak_mb']:.0f} | "
                  f"– | – | {ref['peak_mb']:.0f} (peak) | {rs['qps']:.0f} ({rs['p50_ms']:.1f}/{rs['p99_ms']:.1f}) | "
                  f"{r1['qps']:.0f} ({r1['p50_ms']:.0f}/{r1['p99_ms']:.0f}) | – | reference |")


if __name__ == "__main__":
    main()
