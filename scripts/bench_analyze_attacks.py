"""The analyze attacks of issue 33 (tests/hostile/test_analyze_bounds.py builds them) through the real CLI, one
subprocess each: exit code, wall and CPU seconds, peak RSS polled from outside, and the error line.

    python scripts/bench_analyze_attacks.py                          # this checkout
    python scripts/bench_analyze_attacks.py --reference /tmp/ref     # a source tree holding searchgym/ (before)
    python scripts/bench_analyze_attacks.py --only gzip,csv          # attacks whose name holds a word

A run is killed past ``--kill-s`` seconds or ``--kill-mb`` MB of RSS (the figures say so).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile import test_analyze_bounds as T  # (the attack builders)


def attacks(d: Path) -> dict:
    return {
        "gzip bomb (1e9 newlines)": lambda: T.gzip_bomb(d),
        "gzip cut at a flush point": lambda: T.cut_gzip(d),
        "parquet dictionary bomb": lambda: T.parquet_dictionary_bomb(d),
        "parquet unknown time zone": lambda: T.parquet_bad_timezone(d),
        "parquet date32 out of range": lambda: T.parquet_bad_date(d),
        "31M {} gzipped": lambda: T.empty_objects_gz(d),
        "3M {} raw": lambda: T.empty_objects_raw(d),
        "/dev/zero": lambda: Path("/dev/zero"),
        "csv of 200,000 columns": lambda: T.wide_csv(d),
        "x + 1 MB blanks": lambda: T.blank_run(d),
        "80,000-turn loop": lambda: T.loop_episode(d),
        "80,000 distinct searches": lambda: T.loop_episode(d, distinct=True),
        "6,000 calls, one observation": lambda: T.one_observation_many_calls(d),
        "6,000 queries in one searchgym step": lambda: T.parallel_searchgym_step(d),
        "8,000 queries, one sidecar entry": lambda: T.shared_sidecar(d),
    }


def measure(src: Path, out: Path, tree: str | None, kill_s: float, kill_mb: float) -> dict:
    import psutil

    env = {**os.environ, "MPLBACKEND": "Agg"}
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree)
    t0 = time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen([sys.executable, "-m", "searchgym.cli", "analyze", str(src), "--out", str(out), "--no-plots",
                          "--n-boot", "5", "--strict"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         cwd=tempfile.gettempdir())
    ps, peak, why = psutil.Process(p.pid), 0, ""
    while p.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.Error:
            pass
        if time.monotonic() - t0 > kill_s or peak > kill_mb * 2**20:
            why = f"killed at {kill_s:.0f} s" if time.monotonic() - t0 > kill_s else f"killed past {kill_mb:.0f} MB"
            p.kill()
            break
        time.sleep(0.02)
    stdout, stderr = p.communicate()
    secs = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    err = stderr.decode(errors="replace")
    line = next((ln for ln in err.splitlines() if ln.startswith("error:")), "")
    read = next((ln for ln in stdout.decode(errors="replace").splitlines() if ln.startswith("read ")), "")
    return {"rc": p.returncode, "wall_s": round(secs, 1), "cpu_s": round(cpu, 1), "peak_mb": round(peak / 2**20),
            "killed": why, "traceback": "Traceback" in err, "error": line[:200], "read": read[:200]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", default=None, help="a source tree holding searchgym/ to run instead")
    ap.add_argument("--only", default="", help="comma-separated words: run the attacks whose name holds one")
    ap.add_argument("--kill-s", type=float, default=120.0)
    ap.add_argument("--kill-mb", type=float, default=3000.0)
    args = ap.parse_args()
    words = [w.strip().lower() for w in args.only.split(",") if w.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name, make in attacks(d).items():
            if words and not any(w in name.lower() for w in words):
                continue
            src = make()
            size = src.stat().st_size if src.is_file() else 0
            r = measure(src, d / "out", args.reference, args.kill_s, args.kill_mb)
            print(json.dumps({"attack": name, "bytes": size, **r}), flush=True)
            if src.is_file():
                src.unlink()


if __name__ == "__main__":
    main()
