"""The squeeze experiment's first stage: the strategy policy (``strategy_policy``) on the squeeze config's world.

It is exact and fast (seconds), so it runs before the LM stages; its full result is saved as
``strategy_policy.json`` in the run directory and reused by ``--resume`` when its settings match. The summary
gets :func:`strategy_block` (the contract: ``{"seeds", "arms": {ARM: {"strategy_entropy", "train_success",
"shift_success": {SPLIT: ...}, ...}}}``); the report its table (:func:`strategy_table`), findings computed from
the numbers (:func:`strategy_findings`) and plots (:func:`strategy_plots`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.experiments.squeeze.progress import STAGE

FILE = "strategy_policy.json"


def strategy_config(cfg: Any) -> Any:
    from searchgym.experiments.squeeze.strategy_policy import StrategyConfig

    return StrategyConfig(**world_kwargs(cfg), seeds=cfg.strategy_seeds, arms=tuple(cfg.strategy_arms),
                          steps=cfg.strategy_steps)


def world_kwargs(cfg: Any) -> dict[str, Any]:
    """The StrategyConfig fields that make the squeeze run's world and env: seed, size, generator version,
    preset and the world's splits (shared by the strategy and the contextual stage, so the outcomes are computed
    once)."""
    from searchgym.experiments.squeeze.strategy_policy import eval_splits

    version = getattr(cfg, "world_version", None)
    return {"world_seed": cfg.world_seed, "n_entities": cfg.n_entities, "world_version": version,
            "preset": getattr(cfg, "env_preset", "squeeze"), "splits": eval_splits(version)}


RESULT_FORMAT = 2  # 2: every ``ci`` is the interval [lo, hi] (1: its half-width); a saved result of another
#                    format is recomputed on --resume


def _key(scfg: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {**json.loads(json.dumps(asdict(scfg))), "format": RESULT_FORMAT}  # tuples -> lists, as read back


def _saved(path: Path, stage_cfg: Any) -> dict[str, Any] | None:
    """The result saved at ``path`` when it was computed with the same settings (and result format), else None."""
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return saved["result"] if isinstance(saved, dict) and saved.get("key") == _key(stage_cfg) else None


def _run_or_reuse(resume: bool, path: Path, stage_cfg: Any, title: str, run: Callable[[], dict[str, Any]],
                  log: Callable[[str], None]) -> dict[str, Any]:
    """A stage's result: the one saved at ``path`` on ``--resume`` with the same settings, else ``run()``'s,
    saved there with its settings."""
    from searchgym.experiments.squeeze.stages import _write_json

    saved = _saved(path, stage_cfg) if resume else None
    if saved is not None:
        log(f"{STAGE}{title}: reusing {path}")
        return saved
    t0 = time.time()
    res = run()
    _write_json(path, {"key": _key(stage_cfg), "result": res})
    log(f"      done in {time.time() - t0:.1f}s: {path}")
    return res


def run_organism_stages(cfg: Any, out: Path, log: Callable[[str], None] = print
                        ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The strategy-policy stage and the organism on the mixed train split, in one pool of ``cfg.arm_jobs()``
    worker processes (spawned once, on the first piece of work; a resumed run that reuses both spawns none)."""
    from searchgym.experiments.squeeze.parallel import worker_pool

    with worker_pool(cfg.arm_jobs(), tasks=cfg.arm_jobs()) as pool:
        jobs = pool or 1
        return run_strategy_stage(cfg, out, log, jobs), run_contextual_stage(cfg, out, log, jobs)


def run_strategy_stage(cfg: Any, out: Path, log: Callable[[str], None] = print, jobs: Any = None
                       ) -> dict[str, Any] | None:
    """Run (or, on ``--resume`` with the same settings, reuse) the strategy-policy experiment; None if disabled.
    ``jobs``: worker processes or a pool (None: ``cfg.arm_jobs()``)."""
    from searchgym.experiments.squeeze.strategy_policy import run_strategy_experiment

    if cfg.strategy_seeds <= 0:
        return None
    scfg = strategy_config(cfg)

    def run() -> dict[str, Any]:
        log(f"{STAGE}strategy policy: {len(scfg.arms)} arms x {scfg.seeds} seeds, {scfg.steps} steps "
            f"(preset {scfg.preset!r})")
        res = run_strategy_experiment(scfg, jobs=cfg.arm_jobs() if jobs is None else jobs)
        for arm in res["arms"].values():
            arm.pop("control_steps", None)  # per step per seed: bulky, and the controls' means are kept
        return res

    return _run_or_reuse(cfg.resume, out / FILE, scfg, "strategy policy", run, log)


CONTEXTUAL_FILE = "organism_contextual.json"


def contextual_config(cfg: Any) -> Any:
    from searchgym.experiments.squeeze.organism import ContextualConfig

    arms = getattr(cfg, "contextual_arms", None)
    return ContextualConfig(seeds=cfg.contextual_seeds, steps=cfg.contextual_steps,
                            **({"arms": tuple(arms)} if arms else {}),
                            base=world_kwargs(cfg))  # = strategy_config's


def run_contextual_stage(cfg: Any, out: Path, log: Callable[[str], None] = print, jobs: Any = None
                         ) -> dict[str, Any] | None:
    """The organism on the mixed train split (``organism.py``), reused on ``--resume`` when its settings match;
    None when disabled (``contextual_seeds`` 0 or the strategy stage off). ``jobs`` as for the strategy stage."""
    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.organism import run_contextual

    if cfg.strategy_seeds <= 0 or getattr(cfg, "contextual_seeds", 0) <= 0:
        return None
    ccfg = contextual_config(cfg)

    def run() -> dict[str, Any]:
        log(f"{STAGE}organism on the mixed train split: {len(ccfg.arms)} arms x {ccfg.seeds} seeds, "
            f"{ccfg.steps} steps")
        return run_contextual(ccfg, jobs=cfg.arm_jobs() if jobs is None else jobs)

    try:
        return _run_or_reuse(cfg.resume, out / CONTEXTUAL_FILE, ccfg, "organism on the mixed train split", run, log)
    except ConfigError as e:  # e.g. a small world without enough nickname questions for the mixed split
        log(f"      skipped: {e}")
        return None


def _share_history(hist: list[list[dict[str, Any]]], strategies: list[str]) -> dict[str, Any]:
    """Mean over seeds of the train strategy shares at each recorded step."""
    steps = [h["step"] for h in hist[0]]
    shares = np.mean([[h["shares"] for h in seed] for seed in hist], axis=0)  # [steps, strategies]
    return {"steps": steps, "shares": {s: shares[:, j].round(4).tolist() for j, s in enumerate(strategies)},
            "train_success": np.mean([[h["train_success"] for h in seed] for seed in hist], axis=0).round(4).tolist()}


def strategy_block(res: dict[str, Any] | None) -> dict[str, Any] | None:
    """The summary's ``strategy_policy`` block (contract names kept) from a :func:`run_strategy_stage` result."""
    if res is None:
        return None
    keep = ("strategy_entropy", "marginal_entropy", "choice_entropy", "train_success", "test_success",
            "shift_success", "shares")
    arms: dict[str, Any] = {}
    for arm, a in res["arms"].items():
        b = {k: a[k] for k in keep if k in a}
        b["controls"] = a.get("controls", {})
        b["share_history"] = _share_history(a["history"], res["strategies"])
        arms[arm] = b
    c = res["config"]
    return {"seeds": res["seeds"], "steps": c["steps"], "preset": c["preset"], "strategies": res["strategies"],
            "start": {k: res["start"][k] for k in keep if k in res["start"]}, "arms": arms,
            "per_strategy": res["per_strategy"], "oracle": res["oracle"],
            "demo_distribution": res["demo_distribution"], "seconds": res["seconds"]}


# ------------------------------------------------------------------------------------------------ text
def _ci(d: dict[str, Any] | None) -> str:
    if not d or d.get("mean") is None or (isinstance(d["mean"], float) and math.isnan(d["mean"])):
        return "–"
    return f"{d['mean']:.3f} [{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]"


def _label(arm: str) -> str:
    from searchgym.experiments.squeeze.config import ARM_LABELS

    return ARM_LABELS.get(arm, arm).replace("rare templates", "rare strategies")


def strategy_table(block: dict[str, Any]) -> list[str]:
    """Markdown: arm, strategy entropy, train / test / shift_strategy success (mean [95% CI] over seeds)."""
    head = ["arm", "strategy entropy (nats)", "train success", "test success", "shift_strategy success"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, b in [("SFT start", block["start"]), *((_label(a), b) for a, b in block["arms"].items())]:
        lines.append(f"| {name} | {_ci(b['strategy_entropy'])} | {_ci(b['train_success'])} | "
                     f"{_ci(b.get('test_success'))} | {_ci(b['shift_success'].get('shift_strategy'))} |")
    return lines


def _below(a: dict[str, Any], b: dict[str, Any]) -> str:
    """'below' / 'above' when the two 95% CIs do not overlap, else 'overlapping'."""
    if a["ci"][1] < b["ci"][0]:
        return "below"
    if a["ci"][0] > b["ci"][1]:
        return "above"
    return "overlapping"


def strategy_findings(block: dict[str, Any]) -> list[str]:
    """One sentence per finding, each computed from the block (CI overlap against the SFT start)."""
    st = block["start"]
    out: list[str] = []
    split = "shift_strategy" if "shift_strategy" in st["shift_success"] else None
    rel: dict[str, list[str]] = {"below": [], "above": [], "overlapping": []}
    ent: dict[str, list[str]] = {"below": [], "above": [], "overlapping": []}
    tr: dict[str, list[str]] = {"below": [], "above": [], "overlapping": []}
    for arm, b in block["arms"].items():
        ent[_below(b["strategy_entropy"], st["strategy_entropy"])].append(_label(arm))
        tr[_below(b["train_success"], st["train_success"])].append(_label(arm))
        if split:
            rel[_below(b["shift_success"][split], st["shift_success"][split])].append(_label(arm))
    n = len(block["arms"])

    def names(xs: list[str]) -> str:
        return ", ".join(xs) if xs else "none"

    out.append(f"- Strategy policy ({block['seeds']} seeds, {block['steps']} steps): strategy entropy is below the "
               f"SFT start's ({_ci(st['strategy_entropy'])} nats; 95% CIs apart) in {len(ent['below'])} of {n} "
               f"arms ({names(ent['below'])}); above it in {len(ent['above'])} ({names(ent['above'])}).")
    out.append(f"- Train success rises above the SFT start's ({_ci(st['train_success'])}) in {len(tr['above'])} "
               f"of {n} arms ({names(tr['above'])}); CIs overlap in {len(tr['overlapping'])}, below in "
               f"{len(tr['below'])}.")
    if split:
        grpo_like = [a for a in block["arms"] if a.startswith("grpo")]
        below = [a for a in grpo_like if _label(a) in rel["below"]]
        out.append(f"- shift_strategy success (questions whose best strategy differs from train's): "
                   f"{len(below)} of {len(grpo_like)} GRPO arms end with a 95% CI below the SFT start's "
                   f"({_ci(st['shift_success'][split])})" + (f": {names([_label(a) for a in below])}" if below else "")
                   + f"; above it: {names([_label(a) for a in grpo_like if _label(a) in rel['above']])}; "
                   f"overlapping: {names([_label(a) for a in grpo_like if _label(a) in rel['overlapping']])}.")
        if "sft" in block["arms"]:
            b = block["arms"]["sft"]["shift_success"][split]
            rel_sft = _below(b, st["shift_success"][split])
            how = {"below": "below", "above": "above", "overlapping": "not separable (95% CIs overlap) from"}
            out.append(f"- Continued SFT's shift_strategy success ({_ci(b)}) is {how[rel_sft]} the SFT start's.")
    return out


# ------------------------------------------------------------------------------------------------ plots
def strategy_plots(block: dict[str, Any], plots: Path, save: Callable[[Any, str, str], None]) -> None:
    """Shares over training per arm (stacked areas, one panel per arm) and success per split with 95% CIs."""
    import matplotlib.pyplot as plt

    strategies = block["strategies"]
    arms = list(block["arms"])
    cmap = plt.get_cmap("tab10")
    colors = {s: cmap(i % 10) for i, s in enumerate(strategies)}
    ncol = min(3, len(arms))
    nrow = math.ceil(len(arms) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 2.7 * nrow + 0.6), squeeze=False, sharey=True)
    for ax, arm in zip(axes.flat, arms):
        h = block["arms"][arm]["share_history"]
        ax.stackplot(h["steps"], [h["shares"][s] for s in strategies], colors=[colors[s] for s in strategies],
                     labels=strategies)
        ax.set_title(_label(arm), fontsize=9)
        ax.set_ylim(0, 1)
        ax.set_xlim(h["steps"][0], h["steps"][-1])
        ax.tick_params(labelsize=7)
        ax.set_xlabel("RL step", fontsize=7)
    for ax in axes.flat[len(arms):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("share (train)", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(len(strategies), 9), fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.06, right=0.99, top=1 - 0.55 / (2.7 * nrow + 0.6), bottom=0.07, hspace=0.45,
                        wspace=0.08)
    save(fig, "strategy_shares.png", f"Strategy policy: strategy shares over training (mean of {block['seeds']} seeds)")

    st = block["start"]
    splits = ["train", *(["test"] if "test_success" in st else []), *st["shift_success"]]

    def get(b: dict[str, Any], sp: str) -> dict[str, Any]:
        if sp == "train":
            return b["train_success"]
        if sp == "test":
            return b["test_success"]
        return b["shift_success"][sp]

    entries = [("SFT start", st), *((_label(a), block["arms"][a]) for a in arms)]
    fig, ax = plt.subplots(figsize=(max(9.0, 1.45 * len(splits) + 5.0), 4.0))
    w = 0.85 / len(entries)
    acmap = plt.get_cmap("tab10")
    for i, (name, b) in enumerate(entries):
        xs = [j + (i - (len(entries) - 1) / 2) * w for j in range(len(splits))]
        ms = [get(b, sp)["mean"] for sp in splits]
        ci = [get(b, sp)["half"] for sp in splits]
        ax.bar(xs, ms, w, yerr=ci, capsize=1.5, color="black" if i == 0 else acmap((i - 1) % 10), label=name,
               error_kw={"elinewidth": 0.8})
    ax.set_xticks(range(len(splits)))
    ax.set_xticklabels(splits, fontsize=8)
    ax.set_ylabel("success (exact, mean ± 95% CI)", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.subplots_adjust(left=0.06, right=0.74, top=0.96, bottom=0.09)
    save(fig, "strategy_success.png", "Strategy policy: success per split (95% CI over seeds)")
