"""The squeeze experiment's two organism stages (the strategy policy and the mixed train split) on several world
seeds: a finding on one world is a finding about that world (issue 21 §6).

Each world seed runs exactly what ``searchgym squeeze`` runs as its stage 0 (``run_strategy_stage`` and
``run_contextual_stage`` with the default ``SqueezeConfig``: world version 3, preset ``squeeze2``, 20 seeds per
arm), so a row here is the row a default run on that world would report. It prints one table per stage and
writes the full results to ``--out``/world-SEED/.

    python scripts/organism_worlds.py --world-seeds 0,1,2 --out runs/organism-worlds    # ~5 min per world
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-seeds", default="0,1,2", help="comma-separated world seeds (default 0,1,2)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per arm of both stages (default: the run's, 20)")
    ap.add_argument("--out", default="runs/organism-worlds", help="output directory")
    a = ap.parse_args()

    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.strategy_stage import (
        run_contextual_stage,
        run_strategy_stage,
        strategy_block,
    )

    rows_sp, rows_ctx = [], []
    for ws in [int(x) for x in a.world_seeds.split(",") if x.strip()]:
        cfg = SqueezeConfig(world_seed=ws)
        if a.seeds:
            cfg.strategy_seeds = cfg.contextual_seeds = a.seeds
        out = Path(a.out) / f"world-{ws}"
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        sp = strategy_block(run_strategy_stage(cfg, out, lambda s: print(s, flush=True)))
        ctx = run_contextual_stage(cfg, out, lambda s: print(s, flush=True))
        (out / "organisms.json").write_text(json.dumps({"strategy_policy": sp, "contextual": ctx}, indent=1,
                                                       default=str))
        print(f"world {ws}: {time.time() - t0:.0f}s", flush=True)
        rows_sp.append((ws, sp))
        rows_ctx.append((ws, ctx))

    def ci(d: dict | None) -> str:
        if not d or d.get("mean") is None:
            return "–"
        lo, hi = d.get("ci") or (None, None)
        return f"{d['mean']:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None else f"{d['mean']:.3f}"

    ss = "shift_strategy"
    print("\nStrategy policy: strategy entropy (nats) and shift_strategy success, mean [95% CI] over seeds")
    print("| world | arm | strategy entropy | shift_strategy success |\n|---|---|---|---|")
    for ws, sp in rows_sp:
        print(f"| {ws} | SFT start | {ci(sp['start']['strategy_entropy'])} | {ci(sp['start']['shift_success'][ss])} |")
        for arm, b in sp["arms"].items():
            print(f"| {ws} | {arm} | {ci(b['strategy_entropy'])} | {ci(b['shift_success'][ss])} |")
    print("\nMixed train split: seeds routing the held-out minority (Wilson 95% CI), softmax entropy, MI(family; "
          "strategy)")
    print("| world | arm | routing | softmax entropy | MI |\n|---|---|---|---|---|")
    for ws, ctx in rows_ctx:
        for arm, b in {"start": ctx["start"], **ctx["arms"]}.items():
            r = b["routing_share"]
            print(f"| {ws} | {arm} | {r['k']}/{r['n']} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] | "
                  f"{ci(b.get('softmax_entropy'))} | {ci(b.get('mi_family_strategy'))} |")


if __name__ == "__main__":
    main()
