#!/usr/bin/env python
"""Index load time with and without checksum verification (``load_index(verify=True/False)``).

Builds a BM25 index over the synthetic Zipfian corpus of ``bench_retrieval.py`` (100k passages; 1M with
--large), then loads it in alternating rounds with and without verification and keeps each one's best time
(the machine's load drifts). Both loads check file sizes and the BM25 structure (ids within the corpus,
monotone offsets, vocabulary ids in range); verification adds one checksum pass over every file. Also printed:
the checksum pass and the structural validation on their own.

    python scripts/bench_index_load.py            # 100k passages (~1-2 min)
    python scripts/bench_index_load.py --large    # 1M passages (~10 min, ~4 GB RAM)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true", help="1M passages instead of 100k")
    ap.add_argument("--n", type=int, default=None, help="passages (overrides --large)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to build the index (default: a temp dir)")
    args = ap.parse_args()
    n = args.n or (1_000_000 if args.large else 100_000)

    from bench_retrieval import make_corpus

    from searchgym.retrieval import build_index, load_index
    from searchgym.retrieval.bm25 import validate_bm25s_arrays
    from searchgym.retrieval.checksums import file_checksum
    from searchgym.retrieval.index import read_manifest

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        t = time.perf_counter()
        passages, _ = make_corpus(n, 10)
        print(f"corpus: {n:,} passages in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        ix = build_index(passages, Path(tmp) / "idx", show_progress=False)
        del passages
        m = read_manifest(ix)
        size = sum(m["files"].values())
        print(f"build: {time.perf_counter() - t:.1f} s, {size / 1e6:.0f} MB on disk, "
              f"checksum {m['checksums']['algorithm']}", flush=True)
        best = {True: float("inf"), False: float("inf")}
        for r in range(args.rounds):
            for verify in (False, True) if r % 2 == 0 else (True, False):
                t = time.perf_counter()
                retr = load_index(ix, backend="numpy", verify=verify)
                best[verify] = min(best[verify], time.perf_counter() - t)
                del retr
        t = time.perf_counter()
        algo = m["checksums"]["algorithm"]
        for rel in m["files"]:
            file_checksum(ix / rel, algo)
        t_hash = time.perf_counter() - t
        import bm25s

        bm = bm25s.BM25.load(str(ix / "bm25"), load_corpus=False, allow_pickle=False, backend="numpy",
                             show_progress=False)
        t = time.perf_counter()
        validate_bm25s_arrays(ix / "bm25", bm, m["n_passages"])
        t_valid = time.perf_counter() - t
    res = {"n_passages": n, "bytes": size, "load_s_verify": round(best[True], 3),
           "load_s_no_verify": round(best[False], 3), "ratio": round(best[True] / best[False], 3),
           "checksum_s": round(t_hash, 3), "checksum_GB_per_s": round(size / 1e9 / t_hash, 2),
           "structure_check_s": round(t_valid, 3), "load_avg": os.getloadavg()[0]}
    print(f"\nload, verify=False: {best[False]:.2f} s   load, verify=True: {best[True]:.2f} s   "
          f"ratio {res['ratio']:.2f}x (target <= 1.5x)")
    print(f"checksum pass alone: {t_hash:.3f} s ({res['checksum_GB_per_s']} GB/s); "
          f"structure check alone: {t_valid:.3f} s; load average {res['load_avg']:.1f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
