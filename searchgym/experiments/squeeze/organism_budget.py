"""The organism on the mixed train split, said plainly (issue 31 §6): routing share over a training budget.

Three questions about :mod:`organism`'s result that "RL never routes the held-out nicknames":

- **Is the squeeze specific to RL?** GRPO against rejection-sampling SFT (``rs_sft``: cross-entropy on the
  policy's own successful samples, the data RL rewards, without its negative samples and baselines), the same
  seeds, starts, questions and optimizer steps: their differences (GRPO - rs_sft) over seeds with Welch intervals.
- **Can the routing be learned at all?** The supervised routing fit (arm ``supervised`` of
  :mod:`strategy_policy`): the same features, policy class, SFT start, questions and optimizer steps, trained by
  cross-entropy on the outcome table's best strategy of each question. If it routes and RL does not, the features
  suffice and the objective (or its budget) is what fails.
- **Is "never" a budget?** Every arm at several step budgets (default 60, 300, 600 RL steps), each seed's routing
  counted with a Wilson interval.

And what the MI(family; strategy) of an arm means: its per-seed MI averaged over the seeds that route the
held-out nicknames and over those that stay mixed (a rise can come from the minority's strategy staying less
collapsed, not from routing it).

Each budget is one :func:`organism.run_contextual` call (every arm from each seed's SFT start; the seeds in worker
processes), so every figure is the organism's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from searchgym.experiments.squeeze.organism import MINORITY, ContextualConfig, run_contextual
from searchgym.experiments.squeeze.parallel import worker_pool
from searchgym.experiments.squeeze.stats import diff_ci, margin_for
from searchgym.experiments.squeeze.strategy_policy import Outcomes, StrategyConfig, mean_ci, outcomes_for

SUPERVISED = "supervised"
DEFAULT_STEPS = (60, 300, 600)
DEFAULT_ARMS = ("grpo", "rs_sft")
CONTRAST = ("grpo", "rs_sft")  # the RL-specific contrast: GRPO - rejection-sampling SFT
MI_KEYS = ("mi_family_strategy", "mi_minority_strategy")  # MI over all families; nickname vs the rest
CONTRASTED = ("softmax_entropy", "minority_heldout_success", *MI_KEYS)
SPLITS = ("train", "test", "shift_strategy")  # what the mixed split is built from (the others are not needed)


def default_base(world_seed: int = 0) -> dict[str, Any]:
    """The world and env of a default ``searchgym squeeze`` run on ``world_seed`` (version 3, 4,000 entities,
    preset ``squeeze2``: the world of ``results/organism-worlds-v3``), only the splits the mixed split needs."""
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.strategy_stage import world_kwargs

    return {**world_kwargs(SqueezeConfig(world_seed=world_seed)), "splits": SPLITS}


def run_budget(
    steps: Sequence[int] = DEFAULT_STEPS,
    seeds: int = 20,
    arms: Sequence[str] = DEFAULT_ARMS,
    base: dict[str, Any] | None = None,
    jobs: int = 1,
    log: Callable[[str], None] = print,
    outcomes: Outcomes | None = None,
    minority_share: float = 0.08,
) -> dict[str, Any]:
    """Every arm (plus the supervised fit) at every budget in ``steps``; ``rows`` (one per arm x budget, the SFT
    start first), ``contrasts`` (GRPO - rs_sft per budget, when both ran), the mixed split's ``split``."""
    base = dict(default_base() if base is None else base)
    arms = tuple(dict.fromkeys([*arms, SUPERVISED]))
    t0 = time.perf_counter()
    out = outcomes if outcomes is not None else outcomes_for(StrategyConfig(**base), jobs)
    log(f"outcome table: {time.perf_counter() - t0:.0f} s")
    rows: list[dict[str, Any]] = []
    contrasts: list[dict[str, Any]] = []
    split: dict[str, Any] = {}
    with worker_pool(jobs, seeds) as pool:
        for n_steps in steps:
            t1 = time.perf_counter()
            cfg = ContextualConfig(
                seeds=seeds, steps=int(n_steps), arms=arms, base=base, minority_share=minority_share
            )
            res = run_contextual(cfg, outcomes=out, jobs=pool or 1, per_seed=True)
            split = res["split"]
            if not rows:
                rows.append(budget_row("SFT start", 0, res["start"], None))
            for arm in arms:
                row = budget_row(arm, int(n_steps), res["arms"][arm], res["per_seed"][arm])
                rows.append(row)
                r = row["routing"]
                log(
                    f"{arm} at {n_steps} steps: routes {r['k']}/{r['n']} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}], "
                    f"softmax entropy {row['softmax_entropy']['mean']:.3f} "
                    f"({time.perf_counter() - t1:.0f} s for this budget, {time.perf_counter() - t0:.0f} s in all)"
                )
            if all(a in arms for a in CONTRAST):
                contrasts.append(
                    contrast(int(n_steps), res["per_seed"][CONTRAST[0]], res["per_seed"][CONTRAST[1]])
                )
    return {
        "config": {
            "steps": [int(s) for s in steps],
            "seeds": seeds,
            "arms": list(arms),
            "base": base,
            "minority_share": minority_share,
        },
        "split": split,
        "rows": rows,
        "contrasts": contrasts,
        "seconds": time.perf_counter() - t0,
    }


def budget_row(
    arm: str, steps: int, block: dict[str, Any], seeds: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """One arm at one budget: its routing share (Wilson interval), mean [95% CI] figures, and the MI split (the
    per-seed MI over the seeds that route vs those that stay mixed; needs the per-seed figures)."""
    keep = ("softmax_entropy", *MI_KEYS, "minority_heldout_success", "train_success", "kl_to_start")
    row: dict[str, Any] = {
        "arm": arm,
        "steps": steps,
        "seeds": block["seeds"],
        "routing": block["routing_share"],
        **{k: block.get(k) for k in keep},
        "minority_softmax_entropy": block["per_family"].get(MINORITY, {}).get("softmax_entropy"),
    }
    if seeds is not None:
        row["mi_split"] = mi_split(seeds)
    return row


def mi_split(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each MI figure (``MI_KEYS``) averaged over the seeds that route the held-out minority and over those that
    stay mixed: ``{"routes": {"n", KEY: {"mean", "ci", "half"}}, "mixed": {...}}`` (``mean`` None for no seed)."""
    out: dict[str, Any] = {}
    for name, want in (("routes", True), ("mixed", False)):
        sub = [s for s in seeds if s["routes"] == want]
        out[name] = {"n": len(sub)}
        for key in MI_KEYS:
            vals = [s[key] for s in sub if s.get(key) is not None]
            out[name][key] = mean_ci(vals) if vals else {"mean": None, "ci": None, "half": None}
    return out


def contrast(steps: int, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """GRPO - rs_sft at one budget: the difference of means over seeds of each compared figure, with its Welch
    interval and equivalence verdict (:func:`stats.diff_ci`)."""
    return {
        "steps": steps,
        "arms": list(CONTRAST),
        **{k: diff_ci([s[k] for s in a], [s[k] for s in b], margin=margin_for(k)) for k in CONTRASTED},
    }


# ------------------------------------------------------------------------------------------------ text
def _c(d: dict[str, Any] | None, nd: int = 3) -> str:
    if not d or d.get("mean") is None:
        return "–"
    ci = d.get("ci")
    return f"{d['mean']:.{nd}f} [{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]" if ci else f"{d['mean']:.{nd}f}"


def _split_cell(split: dict[str, Any], key: str) -> str:
    """``routing / mixed (n routing / n mixed)``: the MI figure averaged over each group of seeds."""
    if not split:
        return "–"
    r, m = split["routes"], split["mixed"]

    def v(d: dict[str, Any]) -> str:
        return "–" if d[key]["mean"] is None else f"{d[key]['mean']:.3f}"

    return f"{v(r)} / {v(m)} ({r['n']}/{m['n']})"


def budget_table(res: dict[str, Any]) -> list[str]:
    """Markdown: per arm x budget, routing share k/n [Wilson 95%], mean [95% CI] over seeds of the entropies, the
    MIs and held-out nickname success, and the MI split; then GRPO - rs_sft per budget."""
    head = [
        "arm",
        "steps",
        "routes k/n [Wilson 95%]",
        "softmax entropy",
        f"{MINORITY} entropy",
        "MI(family; strategy)",
        f"MI({MINORITY} or not; strategy)",
        "MI(family), routing / mixed seeds (n)",
        f"MI({MINORITY} or not), routing / mixed seeds (n)",
        f"{MINORITY} held-out success",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in res["rows"]:
        rs = r["routing"]
        split = r.get("mi_split") or {}
        lines.append(
            f"| {r['arm']} | {r['steps']} | {rs['k']}/{rs['n']} [{rs['ci'][0]:.2f}, {rs['ci'][1]:.2f}] | "
            f"{_c(r['softmax_entropy'])} | {_c(r['minority_softmax_entropy'])} | "
            f"{_c(r['mi_family_strategy'])} | {_c(r['mi_minority_strategy'])} | "
            + " | ".join(_split_cell(split, k) for k in MI_KEYS)
            + f" | {_c(r['minority_heldout_success'])} |"
        )
    if res["contrasts"]:
        a, b = CONTRAST
        cols = [
            "steps",
            "softmax entropy",
            f"{MINORITY} held-out success",
            "MI(family; strategy)",
            f"MI({MINORITY} or not; strategy)",
        ]
        lines += [
            "",
            f"{a} − {b}, difference of means over seeds [95% Welch interval], verdict:",
            "",
            "| " + " | ".join(cols) + " |",
            "|" + "---:|" * len(cols),
        ]
        for c in res["contrasts"]:
            lines.append(f"| {c['steps']} | " + " | ".join(_diff_cell(c[k]) for k in CONTRASTED) + " |")
    return lines


def _diff_cell(d: dict[str, Any]) -> str:
    if d.get("ci") is None:
        return "–" if d.get("diff") is None else f"{d['diff']:+.3f}"
    return f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] {d['verdict']}"


__all__ = [
    "CONTRAST",
    "DEFAULT_ARMS",
    "DEFAULT_STEPS",
    "MI_KEYS",
    "SUPERVISED",
    "budget_row",
    "budget_table",
    "contrast",
    "default_base",
    "mi_split",
    "run_budget",
]
