"""Routing share of the mixed-split organism over a training budget (issue 31 §6).

Runs GRPO and rejection-sampling SFT (``--arms``) plus the supervised routing fit (the learnability control:
cross-entropy on each train question's best strategy, same features, start, questions and optimizer steps) at
every budget in ``--steps``, ``--seeds`` seeds each, on the world of a default ``searchgym squeeze`` run
(version 3, 4,000 entities, preset squeeze2). Prints one progress line per arm and budget, then a markdown
table: routing share k/n of the held-out nicknames with its Wilson 95% interval, softmax entropy (all train
questions and the nickname family), MI(family; strategy) and its split over the seeds that route vs stay mixed,
held-out nickname success; then GRPO - rs_sft per budget (difference of means over seeds, Welch 95% interval).

    python scripts/organism_budget.py --steps 60,300,600 --seeds 20 --jobs 2 --json out.json --table out.md
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    from searchgym.experiments.squeeze.organism_budget import DEFAULT_ARMS, DEFAULT_STEPS

    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n    python")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--steps",
        default=",".join(map(str, DEFAULT_STEPS)),
        help="comma-separated step budgets; each arm trains this many steps from the SFT start "
        "(default %(default)s)",
    )
    ap.add_argument("--seeds", type=int, default=20, help="seeds per arm and budget (default %(default)s)")
    ap.add_argument(
        "--arms",
        default=",".join(DEFAULT_ARMS),
        help="comma-separated arms of the organism (default %(default)s); the supervised fit always runs",
    )
    ap.add_argument("--world-seed", type=int, default=0, help="world seed (default %(default)s)")
    ap.add_argument(
        "--jobs", type=int, default=1, help="worker processes for the seeds (default %(default)s)"
    )
    ap.add_argument("--json", default=None, help="write the full result here")
    ap.add_argument("--table", default=None, help="also write the markdown table here")
    a = ap.parse_args(argv)

    from searchgym.experiments.squeeze.organism_budget import budget_table, default_base, run_budget

    t0 = time.perf_counter()
    res = run_budget(
        steps=[int(s) for s in a.steps.split(",") if s.strip()],
        seeds=a.seeds,
        arms=[x for x in a.arms.split(",") if x.strip()],
        base=default_base(a.world_seed),
        jobs=a.jobs,
        log=lambda s: print(s, flush=True),
    )
    sp = res["split"]
    head = (
        f"World {a.world_seed}: {sp['minority_train']} nickname questions in {sp['train_questions']} train "
        f"questions, {sp['minority_heldout']} held out ({sp['nicknames_heldout']} unseen nicknames); "
        f"{a.seeds} seeds per arm and budget; wall {time.perf_counter() - t0:.0f} s."
    )
    table = "\n".join([head, "", *budget_table(res)])
    print("\n" + table)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(res, indent=1))
    if a.table:
        Path(a.table).parent.mkdir(parents=True, exist_ok=True)
        Path(a.table).write_text(table + "\n")


if __name__ == "__main__":
    main()
