"""The strategy-policy squeeze: SFT start vs every arm, mean +- 95% CI over seeds (issue 13 §2).

    python scripts/strategy_squeeze.py [--seeds 20] [--steps 60] [--arms grpo,grpo_kl,...] [--json out.json]

Prints the per-strategy EM table the outcomes come from, then per arm: exact strategy entropy (mean over train
questions of the policy's softmax entropy; and of the marginal choice distribution), train / test success and
each shift split's success (exact expectations under the policy), the final strategy shares, and whether
Clip-Cov / KL-Cov acted.
"""

from __future__ import annotations

import argparse
import json
import time

from searchgym.experiments.squeeze.strategy_policy import ARMS, StrategyConfig, run_strategy_experiment


def _f(d: dict) -> str:
    return f"{d['mean']:.3f} [{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=StrategyConfig.seeds)
    ap.add_argument("--steps", type=int, default=StrategyConfig.steps)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--preset", default=StrategyConfig.preset)
    ap.add_argument("--n-entities", type=int, default=None, help="a generated world instead of the embedded one")
    ap.add_argument("--json", default=None, help="also write the full result (histories included) here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cfg = StrategyConfig(seeds=args.seeds, steps=args.steps, arms=tuple(args.arms.split(",")), preset=args.preset,
                         n_entities=args.n_entities)
    res = run_strategy_experiment(cfg)
    wall = time.perf_counter() - t0
    splits = list(cfg.splits)
    print(f"Strategy EM per split (preset {cfg.preset!r}; outcome precompute {res['outcome_seconds']:.1f} s):\n")
    print("| strategy | demo share | " + " | ".join(splits) + " |")
    print("|---|---:|" + "---:|" * len(splits))
    for s, row in res["per_strategy"].items():
        print(f"| `{s}` | {res['demo_distribution'][s]:.3f} | " + " | ".join(f"{row[sp]:.3f}" for sp in splits) + " |")
    print("| oracle (best per question) | – | " + " | ".join(f"{res['oracle'][sp]:.3f}" for sp in splits) + " |")
    shift = [s for s in splits if s.startswith("shift_")]
    print(f"\nArms: {cfg.seeds} seeds each, {cfg.steps} steps of {cfg.prompts_per_step}x{cfg.group_size} choices, "
          f"{cfg.num_minibatches} minibatch updates per batch; mean [95% CI] over seeds; wall {wall:.0f} s\n")
    print("| arm | strategy entropy | marginal entropy | train success | test success | "
          + " | ".join(shift) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(shift))
    for name, a in [("SFT start", res["start"]), *res["arms"].items()]:
        print(f"| {name} | {_f(a['strategy_entropy'])} | {_f(a['marginal_entropy'])} | {_f(a['train_success'])} | "
              f"{_f(a['test_success'])} | " + " | ".join(_f(a["shift_success"][s]) for s in shift) + " |")
    print("\nFinal strategy shares on train (mean over seeds):\n")
    strategies = res["strategies"]
    print("| arm | " + " | ".join(strategies) + " |")
    print("|---|" + "---:|" * len(strategies))
    for name, a in [("SFT start", res["start"]), *res["arms"].items()]:
        print(f"| {name} | " + " | ".join(f"{a['shares'][s]:.3f}" for s in strategies) + " |")
    print("\nControls (mean per arm over seeds and updates):\n")
    for name, a in res["arms"].items():
        c = a["controls"]
        acted = f", acted: {c['acted']}" if "acted" in c else ""
        print(f"- {name}: {c['updates']:.0f} updates, clip fraction {c['clip_fraction']:.3f}, mean |log ratio| "
              f"{c['mean_abs_log_ratio']:.4f}, share of choices selected {c['selected_share']:.3f}{acted}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
