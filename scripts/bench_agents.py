"""Benchmark the heuristic agents: a per-strategy, per-family quality table and CLI throughput.

1. Quality: every heuristic strategy on the embedded world (train split for the training families, the
   shift_family split for ``comparison``), EM / F1 / gold-passage recall per question family, through the
   public ``searchgym.agents.rollout`` API. The same numbers come from the CLI, e.g.::

       searchgym rollout --agent decompose -n 500 --split train --out decompose.jsonl

2. Throughput through the CLI on a ~10k-passage world (``searchgym data export-world --size 10000``, then
   ``searchgym rollout --corpus ... --dataset ...`` in a subprocess): episodes per minute as the command reports
   it (BM25 index build + rollout) and wall-clock including process start-up (imports).

Targets (from the issue): heuristic agents >= 2,000 episodes/min through the CLI on the 10k world; ``decompose``
EM >= 0.5 on the two-hop ``bridge`` family. The last lines say PASS or FAIL for each.

    python scripts/bench_agents.py            # full: 500 + 200 questions per strategy, 2,000 episodes per CLI run
    python scripts/bench_agents.py --quick    # small version (a minute or so)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_EPM = 2000.0
TARGET_BRIDGE_EM = 0.5
STRATEGIES = ("question", "keywords", "entity", "rephrase", "decompose", "prf", "random", "diverse")
FAMILIES = ("attribute", "bridge", "three_hop", "yesno", "intersection", "comparison")


def quality_table(n_train: int, n_shift: int, num_envs: int) -> tuple[str, dict]:
    import gymnasium as gym

    import searchgym  # noqa: F401
    from searchgym.agents import make_agent
    from searchgym.agents.rollout import rollout, summarize

    envs = {split: gym.make_vec("searchgym/SearchQA-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                                split=split) for split in ("train", "shift_family")}
    results: dict[str, dict] = {}
    for name in STRATEGIES:
        trajs = rollout(make_agent(name, seed=0), envs["train"], n_train, progress=False, seed=0)
        trajs += rollout(make_agent(name, seed=0), envs["shift_family"], n_shift, progress=False, seed=0)
        results[name] = summarize(trajs)
    for e in envs.values():
        e.close()
    fams = [f for f in FAMILIES if any(f in r for r in results.values())]
    fams += sorted({f for r in results.values() for f in r} - set(fams) - {"all"})
    lines = ["| strategy | " + " | ".join(fams) + " | searches/ep |",
             "|---|" + "---|" * (len(fams) + 1)]
    for name, summ in results.items():
        cells = []
        for f in fams:
            r = summ.get(f)
            cells.append("-" if r is None else f"{r['em']:.2f} / {r['f1']:.2f} / {r['recall']:.2f}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {summ['all']['searches']:.2f} |")
    return "\n".join(lines), results


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "searchgym.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), check=False)


def throughput(size: int, n: int, agents: tuple[str, ...], workdir: Path) -> tuple[str, dict]:
    world = workdir / "world"
    t0 = time.perf_counter()
    r = cli("data", "export-world", "--size", str(size), "--out", str(world))
    if r.returncode != 0:
        raise SystemExit(f"export-world failed:\n{r.stderr}")
    export_s = time.perf_counter() - t0
    n_passages = sum(1 for _ in (world / "corpus.jsonl").open())
    rows, out = [], {}
    for name in agents:
        summ = workdir / f"{name}.json"
        t0 = time.perf_counter()
        r = cli("rollout", "--agent", name, "--corpus", str(world / "corpus.jsonl"), "--dataset",
                str(world / "train.jsonl"), "-n", str(n), "--out", str(workdir / f"{name}.jsonl"), "--no-progress",
                "--summary-json", str(summ), "--num-envs", "32")
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"rollout {name} failed:\n{r.stderr}\n{r.stdout}")
        data = json.loads(summ.read_text())
        s = data["summary"]
        out[name] = {"epm": data["episodes_per_min"], "wall_epm": data["episodes"] / wall * 60, "summary": s}
        bridge = s.get("bridge", {}).get("em", float("nan"))
        rows.append(f"| `{name}` | {data['episodes']:,} | {data['episodes_per_min']:,.0f} | "
                    f"{data['episodes'] / wall * 60:,.0f} | {s['all']['em']:.3f} | {bridge:.3f} | "
                    f"{'PASS' if data['episodes_per_min'] >= TARGET_EPM else 'FAIL'} |")
    head = (f"World: {n_passages:,} passages (export {export_s:.1f} s). Rollouts: `searchgym rollout --agent NAME "
            f"--corpus corpus.jsonl --dataset train.jsonl -n {n} --num-envs 32`.\n\n"
            "| agent | episodes | episodes/min (command: index build + rollout) | episodes/min (wall: + process "
            "start-up) "
            f"| EM | bridge EM | >= {TARGET_EPM:,.0f}/min |\n|---|---|---|---|---|---|---|")
    return head + "\n" + "\n".join(rows), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small version")
    ap.add_argument("--size", type=int, default=10_000, help="passages of the throughput world")
    ap.add_argument("--n", type=int, default=None, help="episodes per CLI throughput run")
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    n_train, n_shift = (100, 50) if args.quick else (500, 200)
    n_cli = args.n or (500 if args.quick else 2000)
    verdicts = []
    if not args.skip_table:
        t0 = time.perf_counter()
        table, results = quality_table(n_train, n_shift, num_envs=32)
        print(f"## Heuristic strategies on the embedded world (EM / F1 / gold recall per family; {n_train} train "
              f"questions + {n_shift} shift_family questions each, {time.perf_counter() - t0:.0f} s)\n")
        print(table)
        print("\nSame numbers from the CLI: `searchgym rollout --agent NAME -n 500 --split train` (and `--split "
              "shift_family` for comparison).\n")
        em = results["decompose"]["bridge"]["em"]
        verdicts.append(f"decompose EM on bridge (embedded world): {em:.3f} (target >= {TARGET_BRIDGE_EM}) "
                        f"{'PASS' if em >= TARGET_BRIDGE_EM else 'FAIL'}")
    if not args.skip_throughput:
        with tempfile.TemporaryDirectory() as d:
            table, out = throughput(args.size, n_cli, ("question", "decompose", "diverse", "prf"), Path(d))
        print(f"## CLI throughput on a {args.size:,}-passage world\n")
        print(table + "\n")
        slowest = min(v["epm"] for v in out.values())
        verdicts.append(f"slowest heuristic through the CLI: {slowest:,.0f} episodes/min (target >= "
                        f"{TARGET_EPM:,.0f}) {'PASS' if slowest >= TARGET_EPM else 'FAIL'}")
        em = out["decompose"]["summary"].get("bridge", {}).get("em", 0.0)
        verdicts.append(f"decompose EM on bridge ({args.size:,}-passage world): {em:.3f} (target >= "
                        f"{TARGET_BRIDGE_EM}) {'PASS' if em >= TARGET_BRIDGE_EM else 'FAIL'}")
    print("\n".join(f"- {v}" for v in verdicts))


if __name__ == "__main__":
    main()
