"""The organism on a mixed train split (issue 21 §2): does RL keep a question-dependent strategy mix?

    python scripts/strategy_contextual.py [--seeds 20] [--steps 60] [--share 0.08] [--lr 0.05] [--json out.json]

Prints the mixed split, the per-strategy EM it is built from, the per-arm table (mean [95% CI] over seeds;
routing share with its Wilson interval; KL to the SFT start at the common learning rate), per-family entropies,
the generated findings and the wall time (the issue's budget: >= 20 seeds in <= 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import time

from searchgym.experiments.squeeze.organism import (
    DEFAULT_ARMS,
    ContextualConfig,
    contextual_sentences,
    contextual_table,
    run_contextual,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=ContextualConfig.seeds)
    ap.add_argument("--steps", type=int, default=ContextualConfig.steps)
    ap.add_argument("--share", type=float, default=ContextualConfig.minority_share)
    ap.add_argument("--lr", type=float, default=None, help="the common learning rate (default StrategyConfig's)")
    ap.add_argument("--arms", default=",".join(DEFAULT_ARMS))
    ap.add_argument("--json", default=None, help="also write the full result here")
    args = ap.parse_args()
    base = {} if args.lr is None else {"lr": args.lr}
    t0 = time.perf_counter()
    res = run_contextual(ContextualConfig(seeds=args.seeds, steps=args.steps, minority_share=args.share,
                                          arms=tuple(args.arms.split(",")), base=base))
    wall = time.perf_counter() - t0
    print(f"Mixed split: {res['split']}; majority strategy {res['majority_strategy']!r}\n")
    print("| strategy | " + " | ".join(res["oracle"]) + " |\n|---|" + "---:|" * len(res["oracle"]))
    for s, row in res["per_strategy"].items():
        print(f"| `{s}` | " + " | ".join(f"{v:.3f}" for v in row.values()) + " |")
    print(f"\n{res['seeds']} seeds x {res['steps']} steps per arm; wall {wall:.0f} s\n")
    print("\n".join(contextual_table(res)))
    print("\nPer-family softmax entropy (mean [95% CI]):\n")
    fams = list(res["start"]["per_family"])
    print("| arm | " + " | ".join(fams) + " |\n|---|" + "---:|" * len(fams))
    for name, b in [("SFT start", res["start"]), *res["arms"].items()]:
        cells = []
        for f in fams:
            d = b["per_family"][f]["softmax_entropy"]
            cells.append(f"{d['mean']:.3f} [{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]" if d.get("ci") else "–")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("\n".join(contextual_sentences(res)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
