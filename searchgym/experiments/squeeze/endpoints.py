"""The squeeze summary's endpoints fixed in advance (issue 31 §3, docs/squeeze.md "Pre-registered endpoints").

Per evaluated split (:func:`split_measures`, called by ``stages.evaluate``): template entropy rarefied to a common
number of queries with and without the queries that copy the question, the copy rate beside it, and on the
rename splits the share of episodes that query the entity a former-name passage points to
(``rename_follow_rate``). Per arm of the summary (:func:`endpoints_block`): the KL to the SFT start per step, the
train-success change against the start with a CI over seeds, those template measures, and every shift split's
start value with a mark where the start is too low to show a loss. And the pre-registered rule that calls a
change RL's (:func:`rl_specific_block`): GRPO must differ from continued SFT, from rejection-sampling SFT and from
GRPO with shuffled rewards, all in the same direction.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from searchgym.experiments.squeeze.stats import t_interval

TEMPLATE_RAREFY_N = 96   # queries behind the rarefied template entropy: one n for every arm, split and filter
FLOOR = 0.2              # a shift split whose start is under this cannot show a loss
RENAME_SPLITS = ("shift_renamed", "shift_homonym")


def _h(xs: np.ndarray) -> float:
    _, c = np.unique(xs, return_counts=True)
    p = c / c.sum()
    return float(-(p * np.log(p)).sum())


def rarefied_entropy(labels: list[str], n: int, *, seed: int, draws: int = 50) -> float | None:
    """Plug-in entropy of ``labels`` averaged over ``draws`` subsamples of ``n`` without replacement (None when
    fewer than ``n``)."""
    arr = np.asarray(labels)
    if len(arr) < n or n < 1:
        return None
    rng = np.random.default_rng([seed, n, 11])
    return float(np.mean([_h(rng.choice(arr, n, replace=False)) for _ in range(draws)]))


def split_measures(episodes: list[Any], templater: Any, *, seed: int, examples: list[Any] | None = None,
                   n: int = TEMPLATE_RAREFY_N, labels: Any = None) -> dict[str, Any]:
    """``template_entropy_rarefied`` (slot templates of every query), ``template_entropy_rarefied_no_copy``
    (without the queries that copy the question), ``copy_rate`` and ``template_rarefy_n``; with ``examples``
    (each episode's question, in order) on a rename split, ``rename_follow_rate``: the share of episodes with a
    query that names the entity the former name was given to (``metadata['renamed_to']``)."""
    from searchgym.diversity.core import label_episodes

    lab = labels or label_episodes(episodes, templater=templater, levels=("slot",), group_by_step=False)
    slots, copies = lab.levels["slot"], lab.copies
    out: dict[str, Any] = {
        "template_entropy_rarefied": rarefied_entropy(slots, n, seed=seed),
        "template_entropy_rarefied_no_copy": rarefied_entropy([t for t, c in zip(slots, copies) if not c], n,
                                                              seed=seed),
        "copy_rate": float(np.mean(copies)) if copies else None,
        "template_rarefy_n": n,
    }
    if examples is not None:
        out["rename_follow_rate"] = rename_follow_rate(episodes, examples)
    return out


def rename_follow_rate(episodes: list[Any], examples: list[Any]) -> float | None:
    """Share of episodes (with a question that has ``renamed_to``) whose queries name that entity."""
    hits = []
    for ep, ex in zip(episodes, examples):
        target = ((getattr(ex, "metadata", None) or {}).get("renamed_to") or "").lower()
        if target:
            hits.append(any(target in (q or "").lower() for q in ep.queries))
    return float(np.mean(hits)) if hits else None


def _mean_ci(xs: list[float | None]) -> dict[str, Any]:
    a = [float(x) for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    out: dict[str, Any] = {"mean": float(np.mean(a)) if a else None, "ci": None, "n": len(a), "values": a}
    if len(a) >= 2:
        from scipy.stats import t

        h = float(t.ppf(0.975, len(a) - 1)) * float(np.std(a, ddof=1)) / math.sqrt(len(a))
        out["ci"] = [out["mean"] - h, out["mean"] + h]
    return out


_TEMPLATE_KEYS = ("template_entropy_rarefied", "template_entropy_rarefied_no_copy", "copy_rate")


def arm_endpoints(evs: list[dict[str, Any]], start_eval: dict[str, Any], dose: dict[str, Any] | None
                  ) -> dict[str, Any]:
    """One arm's endpoints from its seeds' evaluations, the start's evaluation and its dose block."""
    s0 = (start_eval.get("train") or {}).get("success")
    out: dict[str, Any] = {
        "kl_to_start": {"steps": (dose or {}).get("steps"), "mean": (dose or {}).get("kl_to_start")},
        # the start is one model evaluated once: the interval is over the arm's seeds
        "train_success_change": _mean_ci([e["train"]["success"] - s0 for e in evs] if s0 is not None else []),
    }
    for key in _TEMPLATE_KEYS:
        out[key] = _mean_ci([e["train"].get(key) for e in evs])
    out["rename_follow_rate"] = {sp: _mean_ci([(e.get(sp) or {}).get("rename_follow_rate") for e in evs])
                                 for sp in RENAME_SPLITS if sp in evs[0]}
    return out


def shift_floor(start_eval: dict[str, Any], splits: tuple[str, ...]) -> dict[str, Any]:
    """Every shift split's start value; ``cannot_show_loss`` where it is under :data:`FLOOR`."""
    out = {}
    for sp in splits:
        v = (start_eval.get(sp) or {}).get("success")
        if v is not None:
            out[sp] = {"start": v, "cannot_show_loss": bool(v < FLOOR),
                       "rename_follow_rate": (start_eval.get(sp) or {}).get("rename_follow_rate")}
    return out


def endpoints_block(summary: dict[str, Any], start_eval: dict[str, Any],
                    arm_results: dict[str, list[dict[str, Any]]]) -> None:
    """Add the endpoints to ``summary`` in place: per arm under ``arms[ARM]`` (see :func:`arm_endpoints`), the
    start's template measures under ``start``, ``shift_floor`` and the pre-registered endpoints' names."""
    from searchgym.experiments.squeeze.config import SHIFT_SPLITS
    from searchgym.experiments.squeeze.random_effects import PRIMARY_COST_ENDPOINT, PRIMARY_ENDPOINT

    dose = summary.get("dose") or {}
    for arm, evs in arm_results.items():
        summary["arms"][arm].update(arm_endpoints(evs, start_eval, dose.get(arm)))
    for key in _TEMPLATE_KEYS:
        summary["start"][key] = (start_eval.get("train") or {}).get(key)
    summary["start"]["rename_follow_rate"] = {sp: (start_eval.get(sp) or {}).get("rename_follow_rate")
                                              for sp in RENAME_SPLITS if sp in start_eval}
    summary["shift_floor"] = shift_floor(start_eval, SHIFT_SPLITS)
    summary["primary_endpoints"] = {"primary": PRIMARY_ENDPOINT, "primary_cost": PRIMARY_COST_ENDPOINT}
    rs = rl_specific_block(summary["arms"])
    if rs is not None:
        summary["rl_specific"] = rs


RL_CONTROLS = ("rs_sft", "grpo_shuffled")  # the arms GRPO must also differ from for a change to be RL's
RL_SPECIFIC_KEYS = ("strategy_entropy_rarefied", "slot_entropy", "template_entropy_rarefied",
                    "template_entropy_rarefied_no_copy", "copy_rate", "train_success", "test_success")


def rl_specific_verdict(vs_sft: dict[str, Any], vs_controls: dict[str, dict[str, Any]]) -> str:
    """``rl_specific``: GRPO differs from continued SFT and from every control, each interval excluding 0 on the
    same side; ``not_rl_specific``: it differs from continued SFT but not so from some control; ``no_change``: it
    does not differ from continued SFT; ``unknown``: an interval is missing (under 2 seeds on a side)."""
    from searchgym.experiments.squeeze.stats import excludes_zero

    if vs_sft.get("ci") is None or any(c.get("ci") is None for c in vs_controls.values()):
        return "unknown"
    if not excludes_zero(vs_sft["ci"]):
        return "no_change"
    sign = vs_sft["diff"] > 0
    same = all(excludes_zero(c["ci"]) and (c["diff"] > 0) == sign for c in vs_controls.values())
    return "rl_specific" if same else "not_rl_specific"


def rl_specific_block(arms: dict[str, Any], arm: str = "grpo") -> dict[str, Any] | None:
    """GRPO against continued SFT and against each of :data:`RL_CONTROLS` on the endpoints and every shift split
    (Welch intervals over seeds), with :func:`rl_specific_verdict` per endpoint. None when the run lacks GRPO,
    continued SFT or a control."""
    from searchgym.experiments.squeeze.stats import contrast, seed_values

    if any(a not in arms for a in (arm, "sft", *RL_CONTROLS)):
        return None
    vs = {other: contrast(arms[arm], arms[other], RL_SPECIFIC_KEYS) for other in ("sft", *RL_CONTROLS)}
    out: dict[str, Any] = {}
    for key in vs["sft"]:
        if not seed_values(arms[arm], key):
            continue
        controls = {c: vs[c][key] for c in RL_CONTROLS}
        out[key] = {"vs_" + k: v[key] for k, v in vs.items()} | {"verdict": rl_specific_verdict(vs["sft"][key],
                                                                                               controls)}
    return {"arm": arm, "controls": list(RL_CONTROLS), "endpoints": out}


def read_controls(dirs: list[str]) -> list[dict[str, Any]]:
    """The summaries of runs that carry the controls (``--controls DIR,...``). A run without the ``rl_specific``
    block is an error that says which arms it needs."""
    import json
    from pathlib import Path

    from searchgym.errors import ConfigError

    out = []
    for d in dirs:
        p = Path(d) / "summary.json"
        try:
            s = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"--controls {d}: cannot read {p}: {e}") from e
        if not s.get("rl_specific"):
            raise ConfigError(f"--controls {d}: its summary has no rl_specific block; run it with --arms "
                              f"sft,grpo,{','.join(RL_CONTROLS)}")
        out.append(s)
    return out


def controls_blocks(dirs: list[str], summaries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """worlds.json's ``controls`` (per controls run: its directory, world seed, seeds per arm and ``rl_specific``
    block) and ``controls_random_effects`` (:func:`rl_specific_random_effects` over those runs; None under two
    worlds). ``summaries``: the runs' summaries when already read (:func:`read_controls`)."""
    summaries = read_controls(dirs) if summaries is None else summaries
    runs = [{"run": str(d), "world": (s.get("world") or {}).get("seed"), "seeds": (s.get("config") or {}).get("seeds"),
             "rl_specific": s["rl_specific"]} for d, s in zip(dirs, summaries)]
    return {"controls": runs, "controls_random_effects": rl_specific_random_effects(summaries)}


def rl_specific_random_effects(summaries: list[dict[str, Any]], arm: str = "grpo") -> dict[str, Any] | None:
    """:func:`rl_specific_block` with the controls runs' worlds as random effects: per endpoint (and shift split),
    GRPO − continued SFT and GRPO − each control pooled over the worlds (DerSimonian–Laird, t on k − 1 df;
    :func:`~searchgym.experiments.squeeze.random_effects.random_effects_block`), and the verdict of
    :func:`rl_specific_verdict` on those intervals. None with fewer than two worlds."""
    from searchgym.experiments.squeeze.random_effects import random_effects_block
    from searchgym.experiments.squeeze.worlds import _world_seed

    worlds = sorted({_world_seed(s) for s in summaries})
    if len(worlds) < 2:
        return None
    splits = sorted({sp for s in summaries for sp in ((s["arms"].get(arm) or {}).get("shift") or {})})
    keys = tuple((k, k) for k in (*RL_SPECIFIC_KEYS, *(f"shift:{sp}" for sp in splits)))
    vs = {base: random_effects_block(summaries, arm, base, keys) for base in ("sft", *RL_CONTROLS)}
    out: dict[str, Any] = {}
    for key, _ in keys:
        cells = {base: _re_cell(vs[base]["endpoints"][key]) for base in vs}
        if cells["sft"]["diff"] is None:
            continue
        out[key] = {"vs_" + b: c for b, c in cells.items()} | {
            "verdict": rl_specific_verdict(cells["sft"], {c: cells[c] for c in RL_CONTROLS})}
    return {"arm": arm, "controls": list(RL_CONTROLS), "worlds": worlds, "k_worlds": len(worlds),
            "starts_per_world": vs["sft"]["starts_per_world"], "method": vs["sft"]["method"], "endpoints": out}


def _re_cell(e: dict[str, Any]) -> dict[str, Any]:
    """One random-effects estimate in :func:`rl_specific_verdict`'s shape (``diff``, ``ci``), with τ², k and the
    HKSJ interval beside it."""
    return {"diff": e["estimate"], "ci": e["ci"], "tau2": e["tau2"], "k": e["k"],
            "hksj_ci": (e.get("hksj") or {}).get("ci")}


# The question type of the rename splits: renames.py asks them as one-hop attribute questions by the former name.
SAME_TYPE_FAMILY = {"shift_renamed": "attribute", "shift_homonym": "attribute"}


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def _arm_mean(s: dict[str, Any], arm: str, split: str) -> float | None:
    return ((s["arms"].get(arm) or {}).get("shift") or {}).get(split, {}).get("mean")


def _family_losses(units: list[dict[str, Any]], family: str | None, arm: str, base: str) -> list[float]:
    """Per unit (run), ``arm`` − ``base`` on train-pool success of ``family`` questions (the arms' means)."""
    out = []
    for s in units:
        a, b = ((s["arms"].get(x) or {}).get("per_family") or {} for x in (arm, base))
        if family is not None and a.get(family) is not None and b.get(family) is not None:
            out.append(float(a[family]) - float(b[family]))
    return out


def shift_cost_block(units: list[dict[str, Any]], shuffled_runs: list[dict[str, Any]],
                     re_endpoints: dict[str, Any], arm: str = "grpo", base: str = "sft") -> dict[str, Any]:
    """The pre-registered cost rule (docs/squeeze.md "Measures fixed in advance") per shift split that can show a
    loss: a loss of ``arm`` against ``base`` on the split (its random-effects interval below 0) is a **cost** only
    where it exceeds both the in-distribution loss on the same question type (``arm`` − ``base`` on train-pool
    success of that family, the mean over ``units``) and the shuffled-reward arm's loss on the split
    (``grpo_shuffled`` − ``base``, the mean over ``shuffled_runs``).

    The rule compares the loss with the two comparators' means; beside each mean is its t interval over the runs
    (``in_distribution_ci``, ``shuffled_ci``; None under two runs): the summaries keep per-family success as a
    mean per arm, not per seed, so a run is the unit, and runs on one world are not independent. Verdicts:
    ``cost``, ``not_a_cost`` (a loss that does not exceed both; ``why`` says which), ``no_loss`` (the interval is
    not below 0), ``unknown`` (no interval, or a comparator is missing: ``why``)."""
    out: dict[str, Any] = {}
    for key, e in re_endpoints.items():
        sp = key.removeprefix("shift:")
        if not key.startswith("shift:") or any(((s.get("start") or {}).get("shift") or {}).get(sp, {}).get("mean", 0)
                                               < FLOOR for s in units):
            continue
        fam = SAME_TYPE_FAMILY.get(sp)
        ind = _family_losses(units, fam, arm, base)
        shuf = [x - y for s in shuffled_runs
                if (x := _arm_mean(s, "grpo_shuffled", sp)) is not None and (y := _arm_mean(s, base, sp)) is not None]
        row = {"loss": {"estimate": e.get("estimate"), "ci": e.get("ci")}, "family": fam,
               "in_distribution_loss": _mean(ind), "in_distribution_ci": t_interval(ind),
               "in_distribution_units": len(ind),
               "shuffled_loss": _mean(shuf), "shuffled_ci": t_interval(shuf), "shuffled_runs": len(shuf)}
        row["verdict"], row["why"] = _cost_verdict(row)
        out[sp] = row
    return out


def _cost_verdict(row: dict[str, Any]) -> tuple[str, str]:
    est, ci = row["loss"]["estimate"], row["loss"]["ci"]
    if ci is None or est is None:
        return "unknown", "no interval for the loss"
    if ci[1] >= 0:
        return "no_loss", "the interval is not below 0"
    ind, shuf = row["in_distribution_loss"], row["shuffled_loss"]
    if ind is None or shuf is None:
        return "unknown", ("no in-distribution figure for the split's question type" if ind is None
                           else "no shuffled-reward arm to compare with")
    short = [w for w, ok in ((f"the in-distribution loss on {row['family']} questions ({ind:+.3f}) is at least as large",
                              est < ind), (f"shuffled-reward GRPO loses at least as much ({shuf:+.3f})", est < shuf)) if not ok]
    return ("cost", "exceeds both") if not short else ("not_a_cost", "; ".join(short))
