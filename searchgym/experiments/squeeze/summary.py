"""The squeeze experiment's ``summary.json``: per-arm figures with CIs over seeds from the stages' evaluations
and training logs, whether each control acted, the competence gate, pass@k and the entropy-law fits."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.experiments.squeeze.config import SFT_ARMS, SHIFT_SPLITS
from searchgym.experiments.squeeze.stats import comparisons, passk_crossing, t_interval


def _ms(values: list[float]) -> dict[str, Any]:
    v = [float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return {"mean": None, "sd": None, "ci": None, "values": []}
    sd = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
    # 95% t-interval of the mean over seeds
    return {"mean": float(np.mean(v)), "sd": sd, "ci": t_interval(v), "values": v}


def _read_rows(path: Path) -> list[dict]:
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def _mean_series(series: list[dict[str, list[float]]], key: str) -> tuple[list[int], list[float], list[float],
                                                                           list[float]]:
    steps = sorted({s for ser in series for s in ser["step"]})
    mean, lo, hi = [], [], []
    for s in steps:
        vals = [ser[key][ser["step"].index(s)] for ser in series if s in ser["step"]]
        vals = [v for v in vals if v is not None]
        if not vals:
            mean.append(float("nan"))
            lo.append(float("nan"))
            hi.append(float("nan"))
            continue
        mean.append(float(np.mean(vals)))
        lo.append(float(np.min(vals)))
        hi.append(float(np.max(vals)))
    return steps, mean, lo, hi


DOSE_KEYS = ("kl_to_start", "token_entropy_reasoning", "token_entropy_query", "token_entropy_answer",
             "forking_share")


def dose_block(arms: dict[str, Any], start: dict[str, Any]) -> dict[str, Any]:
    """Per arm, the RL dose: per step (mean over seeds) the rollout reward, KL of the rollouts to the SFT start
    and token entropy by segment (reasoning / query / answer) with the share of forking tokens; the train-success
    change over the start; and ``moved``: train success +0.15 over the start or final KL to the start >= 0.1
    (issue 21 §3), None for an arm that logs no KL (continued SFT)."""
    s0 = (start.get("train_success") or {}).get("mean")
    out: dict[str, Any] = {}
    for arm, b in arms.items():
        series = b.get("series") or []
        if not series:
            continue
        blk: dict[str, Any] = {}
        for key in ("reward", *DOSE_KEYS):
            steps, mean, _, _ = _mean_series(series, key)
            blk["steps"] = steps
            blk[key] = [None if math.isnan(m) else m for m in mean]  # NaN (not logged) -> None
        s1 = (b.get("train_success") or {}).get("mean")
        blk["train_success_change"] = None if s1 is None or s0 is None else s1 - s0
        kls = [k for k in blk["kl_to_start"] if k is not None]
        blk["kl_to_start_last"] = kls[-1] if kls else None
        if blk["kl_to_start_last"] is None:
            blk["moved"] = None
        else:
            blk["moved"] = bool((blk["train_success_change"] or 0) >= 0.15 or blk["kl_to_start_last"] >= 0.1)
        out[arm] = blk
    return out


def _series(arm_dir: Path, arm: str) -> list[dict[str, list[float]]]:
    """Per seed: step, reward, slot entropy, effective number, token entropy (one point per tracked step)."""
    out = []
    for sd in sorted(arm_dir.glob("seed*")):
        rows = _read_rows(sd / "metrics.jsonl")
        if arm == "sft":
            rows = [dict(r, step=int(r["charts/tracked_step"])) for r in rows if "charts/tracked_step" in r]
        by_step: dict[int, dict] = {}
        for r in rows:
            by_step[int(r["step"])] = r  # last write wins (a resumed run rewrites its steps)
        steps = sorted(by_step)
        out.append({
            "step": steps,
            "reward": [by_step[s].get("charts/reward") for s in steps],
            "slot_entropy": [by_step[s].get("diversity/slot/entropy") for s in steps],
            "effective_number": [by_step[s].get("diversity/slot/effective_number") for s in steps],
            "token_entropy": [by_step[s].get("charts/token_entropy") for s in steps],
            **{k: [by_step[s].get(f"charts/{k}") for s in steps] for k in DOSE_KEYS},
        })
    return out


def _edge_mean(series: list[dict[str, list[float]]], key: str, first: bool, n: int = 3) -> float | None:
    vals = []
    for ser in series:
        xs = [v for v in ser[key] if v is not None]
        if xs:
            part = xs[:n] if first else xs[-n:]
            vals.append(float(np.mean(part)))
    return float(np.mean(vals)) if vals else None


def _div(split_eval: dict, *path: str) -> Any:
    """A figure of the analysis core's ``compact()`` block of one split's evaluation (``diversity``), read
    under the core's own names; None for evaluations written before the block existed."""
    cur: Any = split_eval.get("diversity")
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def _col_mean(rows: list[dict], key: str) -> float | None:
    vals = [float(r[key]) for r in rows if r.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def arm_controls(cfg: Any, arm: str, arm_dir: Path) -> dict[str, Any]:
    """Whether an arm's control acted, from its training metrics over all seeds (``acted`` is None for an arm
    without one). Clip-Cov/KL-Cov act when they selected tokens (share > 0) while the ratio moved (mean
    |log ratio| > 1e-4: with one on-policy update per batch the ratio is exactly 1); the KL arm when its
    coefficient and the measured KL to the reference are > 0; the entropy arm when its bonus coefficient is > 0."""
    if arm in SFT_ARMS:
        return {"control": None, "acted": None}
    rows = [r for sd in sorted(arm_dir.glob("seed*")) for r in _read_rows(sd / "metrics.jsonl")]
    a = cfg.arm_args(arm, 1)
    share = _col_mean(rows, "losses/cov_selected_share")
    ratio = _col_mean(rows, "losses/abs_log_ratio")
    kl = _col_mean(rows, "losses/kl_ref")
    out: dict[str, Any] = {
        "minibatches": a.num_minibatches * a.update_epochs, "clip_fraction": _col_mean(rows, "losses/clip_fraction"),
        "abs_log_ratio": ratio, "cov_selected_share": share, "kl_coef": a.kl_coef, "kl_ref": kl,
        "ent_coef": a.ent_coef, "steps_logged": len(rows),
    }
    if arm == "grpo_critique":  # acted when failed episodes got a critique and a refinement attempt
        out["control"] = "critique"
        out["refinements"] = _col_mean(rows, "charts/refinements")
        out["refinement_em"] = _col_mean(rows, "charts/refinement_em")
        out["acted"] = bool((out["refinements"] or 0) > 0)
    elif arm == "grpo_sft_refresh":  # acted when SFT refresh steps were taken
        out["control"] = "sft_refresh"
        out["acted"] = any(r.get("losses/sft_refresh") is not None for r in rows)
    elif arm in ("grpo_darling", "grpo_count"):  # acted when the shaping changed some step's rewards
        out["control"] = "darling" if arm == "grpo_darling" else "count_bonus"
        out["acted"] = any(r.get("charts/shaped_reward") is not None
                           and abs(r["charts/shaped_reward"] - r.get("charts/reward", 0.0)) > 1e-12 for r in rows)
    elif a.policy_loss in ("clip_cov", "kl_cov"):
        out["control"] = a.policy_loss
        out["acted"] = bool((share or 0) > 0 and (ratio or 0) > 1e-4)
    elif a.kl_coef > 0:
        out["control"] = "kl_ref"
        out["acted"] = bool(a.kl_coef > 0 and (kl or 0) > 0)
    elif a.ent_coef > 0:
        out["control"] = "entropy_bonus"
        out["acted"] = bool(a.ent_coef > 0)
    else:
        out["control"] = None
        out["acted"] = None
    return out


def competence(cfg: Any, start_eval: dict) -> dict[str, Any]:
    """The competence gate: the 95% Wilson LOWER bound of the SFT start's success on unseen test questions must
    reach ``cfg.competence_gate`` for the LM findings to mean anything (a point estimate of 48/128 = 0.375 has a
    lower bound of 0.29: it does not pass 0.3). ``n`` is the number of test questions (samples of one question
    are not independent); ``passed`` is False when the run evaluated no test split."""
    from searchgym.experiments.squeeze.stats import wilson

    gate = float(getattr(cfg, "competence_gate", 0.3))
    g = start_eval.get("gate")
    if g and g.get("questions"):  # the gate's own, larger pool of test questions (cfg.gate_questions)
        ci = [float(x) for x in g["ci"]]
        return {"test_success": g["success"], "gate": gate, "questions": g["questions"], "ci": ci,
                "lower_bound": ci[0], "successes": g.get("successes"), "samples": g.get("samples"),
                "source": g.get("source"), "gated_on": "wilson_lower_bound", "passed": bool(ci[0] >= gate)}
    test = start_eval.get("test") or {}
    ts = test.get("success")
    n = test.get("questions") or (test.get("episodes", 0) // max(1, int(start_eval.get("k") or 1)))
    ci = list(wilson(float(ts) * n, n)) if ts is not None and n else None
    lower = ci[0] if ci else None
    return {"test_success": ts, "gate": gate, "questions": n or None, "ci": ci, "lower_bound": lower,
            "gated_on": "wilson_lower_bound", "passed": bool(lower is not None and lower >= gate)}


def build_summary(cfg: Any, out: Path, start_eval: dict, arm_results: dict[str, list[dict]], *, n_params: int,
                  wall_s: float, stages: dict) -> dict[str, Any]:
    from searchgym.experiments.squeeze.config import ARM_LABELS

    def ev_block(evs: list[dict]) -> dict[str, Any]:
        k = evs[0]["k"]
        fams = sorted({f for e in evs for f in e["train"]["per_family"]})
        return {
            "train_success": _ms([e["train"]["success"] for e in evs]),
            "slot_entropy": _ms([e["train"]["slot_entropy"] for e in evs]),
            "slot_effective_number": _ms([e["train"]["slot_effective_number"] for e in evs]),
            "string_entropy": _ms([e["train"]["string_entropy"] for e in evs]),
            "grounded_share": _ms([_div(e["train"], "grounded_share") for e in evs]),
            "question_copy_rate": _ms([_div(e["train"], "question_copy_rate") for e in evs]),
            "well_formed_slot_entropy": _ms([_div(e["train"], "well_formed", "levels", "slot", "entropy")
                                             for e in evs]),
            "slot_mi_question": _ms([_div(e["train"], "levels", "slot", "mi_question") for e in evs]),
            # the strategy classes' entropy (strategy.py: copy-question, entity-lookup, ...) on the train pool
            "strategy_entropy": _ms([_div(e["train"], "strategy", "entropy") for e in evs]),
            # the same classes, two more quantities under distinct names: pooled plug-in rarefied to one n of
            # queries, and the mean over questions of each question's own samples' entropy
            "strategy_entropy_rarefied": _ms([e["train"].get("strategy_entropy_rarefied") for e in evs]),
            "strategy_entropy_per_question": _ms([e["train"].get("strategy_entropy_per_question") for e in evs]),
            "malformed_share": _ms([_div(e["train"], "malformed_share") for e in evs]),
            "token_entropy": _ms([e["train"]["token_entropy"] for e in evs]),
            "queries_per_episode": _ms([e["train"]["queries_per_episode"] for e in evs]),
            "pass_at_k": {str(j): _ms([e["train"]["pass_at_k"][str(j)] for e in evs])["mean"]
                          for j in range(1, k + 1)},
            "per_family": {f: _ms([e["train"]["per_family"].get(f) for e in evs])["mean"] for f in fams},
            "test_success": _ms([e["test"]["success"] for e in evs if "test" in e]),
            "shift": {s: _ms([e[s]["success"] for e in evs]) for s in SHIFT_SPLITS if s in evs[0]},
            "shift_slot_entropy": {s: _ms([e[s]["slot_entropy"] for e in evs])["mean"] for s in SHIFT_SPLITS
                                   if s in evs[0]},
        }

    start = ev_block([start_eval])
    start["shift_success"] = start["shift"]
    arms = {}
    for arm, evs in arm_results.items():
        series = _series(out / "arms" / arm, arm)
        block = ev_block(evs)
        block.update({
            "label": ARM_LABELS.get(arm, arm), "seeds": len(evs),
            "rollout_reward_first": _edge_mean(series, "reward", True),
            "rollout_reward_last": _edge_mean(series, "reward", False),
            "rollout_slot_entropy_first": _edge_mean(series, "slot_entropy", True),
            "rollout_slot_entropy_last": _edge_mean(series, "slot_entropy", False),
            "rollout_token_entropy_first": _edge_mean(series, "token_entropy", True),
            "rollout_token_entropy_last": _edge_mean(series, "token_entropy", False),
            "series": series,
            "train_time_s": _ms([e.get("train_time_s") for e in evs])["mean"],
            "controls": arm_controls(cfg, arm, out / "arms" / arm),
        })
        block["shift_success"] = block["shift"]  # the summary contract's name
        arms[arm] = block

    findings: dict[str, Any] = {}
    s0 = start["train_success"]["mean"]
    h0 = start["slot_entropy"]["mean"]
    for arm, b in arms.items():
        findings[arm] = {
            "train_success_delta": (b["train_success"]["mean"] - s0) if b["train_success"]["mean"] is not None
            else None,
            "slot_entropy_delta": (b["slot_entropy"]["mean"] - h0) if b["slot_entropy"]["mean"] is not None
            and h0 is not None else None,
            "rollout_reward_delta": (b["rollout_reward_last"] - b["rollout_reward_first"])
            if b["rollout_reward_last"] is not None and b["rollout_reward_first"] is not None else None,
        }
    if "sft" in findings and "grpo" in findings:
        a, b = findings["grpo"]["slot_entropy_delta"], findings["sft"]["slot_entropy_delta"]
        if a is not None and b is not None:
            findings["rl_squeezes_more_than_sft"] = bool(a < b)
    rl_arms = [a for a in arms if a not in SFT_ARMS]  # rejection-sampling SFT is a control, not an RL arm
    findings["rl_improves_train_reward"] = {a: bool((findings[a]["train_success_delta"] or 0) > 0) for a in rl_arms}

    comp = competence(cfg, start_eval)
    findings["lm_findings_usable"] = comp["passed"]  # False: the competence gate failed (see `competence`)
    cfg_d = asdict(cfg)
    pk = passk_block(cfg, out, list(arm_results))  # pass@k at large k, SFT start vs every arm (None: disabled)
    return {
        "schema": 1,
        "config": cfg_d,
        "model": cfg.model or "a tiny LM trained on the world",
        "n_params": n_params,
        "device": cfg.device,
        "wall_s": wall_s,
        "world": {"passages": None, "n_entities": cfg.n_entities, "seed": cfg.world_seed},
        "demos": stages.get("sft", {}),
        "start": start,
        "arms": arms,
        "findings": findings,
        "competence": comp,
        "comparisons": comparisons(arms),
        **({"passk": pk} if pk else {}),
        "entropy_law": entropy_law_block(cfg, arms),
        "dose": dose_block(arms, start),
        "sft_start": stages.get("start"),  # where the arms started: trained in this run, or the shipped start
        "stage_times_s": {k: v.get("time_s") for k, v in stages.items() if isinstance(v, dict) and "time_s" in v},
    }


def _seed_num(d: Path) -> int | None:
    try:
        return int(d.name[len("seed"):])
    except ValueError:
        return None


def passk_block(cfg: Any, out: Path, arm_names: list[str]) -> dict[str, Any] | None:
    """The summary's ``passk`` block from ``start_eval/passk.json`` and ``arms/ARM/seedN/passk.json``:
    ``{"start": {split: {k: {mean, ci}}}, "arms": {ARM: {split: {k: {mean, ci, n_seeds, ci_kind}}}}, "ks",
    "seeds": {ARM: [seed, ...]}, "crossing": {split: {ARM: {...}}}, "sentences": {split: str}}``. An arm's mean
    is the mean over the seeds that have the file; its CI is the 95% t-interval over those seeds when there are
    >= 2, else that seed's bootstrap CI over questions. None when pass@k is disabled or the start has no file."""
    if not int(getattr(cfg, "passk_max", 0) or 0):
        return None
    sp = Path(out) / "start_eval" / "passk.json"
    if not sp.exists():
        return None
    start_raw = json.loads(sp.read_text())
    start = {split: dict(v["pass_at_k"]) for split, v in start_raw.get("splits", {}).items()}
    n_seeds = int(getattr(cfg, "seeds", 0) or 0)
    arms: dict[str, Any] = {}
    seeds: dict[str, list[int]] = {}
    for arm in arm_names:
        files = []
        for sd in sorted((Path(out) / "arms" / arm).glob("seed*"), key=lambda d: _seed_num(d) or 0):
            s = _seed_num(sd)
            if s is None or (n_seeds and s > n_seeds) or not (sd / "passk.json").exists():
                continue
            try:
                files.append((s, json.loads((sd / "passk.json").read_text())))
            except json.JSONDecodeError:
                continue
        if not files:
            continue
        seeds[arm] = [s for s, _ in files]
        block: dict[str, Any] = {}
        for split in sorted({sp_ for _, f in files for sp_ in f.get("splits", {})}, key=str):
            have = [f["splits"][split]["pass_at_k"] for _, f in files if split in f.get("splits", {})]
            ks = sorted({int(k) for h in have for k in h})
            per_k: dict[str, Any] = {}
            for k in ks:
                vals = [h[str(k)] for h in have if str(k) in h]
                if len(vals) >= 2:
                    ms = _ms([v["mean"] for v in vals])
                    ci = [max(0.0, ms["ci"][0]), min(1.0, ms["ci"][1])] if ms.get("ci") else None
                    kind = "seeds_t"
                    if ci is None or ms["sd"] == 0:  # identical seeds: a zero-width interval says nothing;
                        kind = "bootstrap_questions_mean"  # the seeds' question-bootstrap bounds, averaged
                        ci = [float(np.mean([v["ci"][0] for v in vals])), float(np.mean([v["ci"][1] for v in vals]))]
                    per_k[str(k)] = {"mean": ms["mean"], "ci": ci, "n_seeds": len(vals), "ci_kind": kind}
                else:
                    per_k[str(k)] = {"mean": vals[0]["mean"], "ci": vals[0]["ci"], "n_seeds": 1,
                                     "ci_kind": "bootstrap_questions"}
            block[split] = per_k
        arms[arm] = block
    ks_all = sorted({int(k) for v in start.values() for k in v})
    res = {"start": start, "arms": arms, "ks": ks_all, "seeds": seeds,
           "questions": {split: len(v.get("pairs", [])) for split, v in start_raw.get("splits", {}).items()},
           "samples": int(cfg.passk_max)}
    res["crossing"] = {split: {arm: passk_crossing(start[split], b.get(split) or {}) for arm, b in arms.items()}
                       for split in start}
    from searchgym.experiments.squeeze.config import ARM_LABELS

    res["sentences"] = {split: passk_sentence(split, res["crossing"][split],
                                              {a: ARM_LABELS.get(a, a) for a in arms}, ks_all)
                        for split in start}
    return res


def passk_sentence(split: str, crossing: dict[str, dict[str, Any]], labels: dict[str, str], ks: list[int]) -> str:
    """One generated sentence: at which k the SFT start's 95% CI lies above each arm's, or "no detectable
    crossing"."""
    if not crossing:
        return f"{split}: no arm has a pass@k evaluation."
    kmax = max(ks) if ks else "?"
    yes = [(labels[a], c) for a, c in crossing.items() if c["start_above"]]
    no = [labels[a] for a, c in crossing.items() if not c["start_above"]]
    parts = []
    for lab, c in yes:
        parts.append(f"above {lab}'s from k = {c['first_start_above']} (at k = "
                     f"{', '.join(str(k) for k in c['start_above'])})")
    if yes:
        s = f"{split}: the SFT start's 95% CI lies " + "; ".join(parts)
        if no:
            s += f"; no detectable crossing for {', '.join(no)}"
    else:
        s = (f"{split}: no detectable crossing — the SFT start's 95% CI lies above no arm's at any k up to {kmax} "
             f"({', '.join(no)})")
    wins = [f"{labels[a]}'s CI lies above the start's at k = {', '.join(str(k) for k in c['arm_above'])}"
            for a, c in crossing.items() if c["arm_above"]]
    if wins:
        s += " (the other way round: " + "; ".join(wins) + ")"
    return s + "."


INTERVENTION_ARMS = ("grpo_kl", "grpo_ent", "grpo_clipcov", "grpo_klcov", "grpo_count", "grpo_darling")


def _intervention(cfg: Any, arm: str) -> bool:
    """Whether an RL arm changes entropy on purpose (KL, entropy bonus, Clip-Cov, KL-Cov, count bonus,
    DARLING): the entropy law is stated for runs without."""
    if arm in INTERVENTION_ARMS:
        return True
    from searchgym.errors import ConfigError

    try:
        a = cfg.arm_args(arm, 1)
    except (ConfigError, AttributeError):
        return False
    return bool(a.kl_coef > 0 or a.ent_coef > 0 or a.policy_loss in ("clip_cov", "kl_cov"))


def entropy_law_block(cfg: Any, arms: dict[str, Any]) -> dict[str, Any]:
    """Per RL arm, the entropy-law fit R = -a*exp(H) + b over its training steps (H: mean token entropy of the
    rollouts, R: mean rollout reward on the train pool; every seed's steps pooled)."""
    from searchgym.train.entropy_law import fit_entropy_law

    out: dict[str, Any] = {}
    for arm, b in arms.items():
        if arm in SFT_ARMS:
            continue
        h, r = [], []
        for ser in b.get("series") or []:
            for x, y in zip(ser.get("token_entropy", []), ser.get("reward", [])):
                h.append(x)
                r.append(y)
        fit = fit_entropy_law(h, r)
        fit["intervention"] = _intervention(cfg, arm)
        fit["label"] = b.get("label", arm)
        out[arm] = fit
    return out

