"""The squeeze experiment's summary, plots, ``report.md`` / ``report.html`` and README headline."""

from __future__ import annotations

import base64
import html
import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

SHIFT_SPLITS = ("shift_phrasing", "shift_family", "shift_type", "shift_strategy")


def _ms(values: list[float]) -> dict[str, Any]:
    v = [float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return {"mean": None, "sd": None, "ci": None, "values": []}
    sd = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
    m = float(np.mean(v))
    ci = None
    if len(v) > 1:  # 95% t-interval of the mean over seeds
        from scipy.stats import t

        h = float(t.ppf(0.975, len(v) - 1)) * sd / math.sqrt(len(v))
        ci = [m - h, m + h]
    return {"mean": m, "sd": sd, "ci": ci, "values": v}


def _read_rows(path: Path) -> list[dict]:
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


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
        })
    return out


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
    if arm == "sft":
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
    if arm == "grpo_sft_refresh":  # acted when SFT refresh steps were taken
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


def diff_ci(a: list[float], b: list[float], *, power: float = 0.8, alpha: float = 0.05) -> dict[str, Any]:
    """Difference of means ``mean(a) - mean(b)`` over seeds with a 95% Welch interval, and the minimum
    detectable effect at ``power`` (two-sided ``alpha``); ``detectable`` is False when the interval covers 0.
    With fewer than 2 seeds on a side there is no interval (None)."""
    a = [float(x) for x in a if x is not None]
    b = [float(x) for x in b if x is not None]
    out: dict[str, Any] = {"diff": (float(np.mean(a)) - float(np.mean(b))) if a and b else None,
                           "ci": None, "mde": None, "detectable": None, "n": [len(a), len(b)]}
    if len(a) < 2 or len(b) < 2:
        return out
    from scipy.stats import t

    va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        out.update(ci=[out["diff"], out["diff"]], mde=0.0, detectable=out["diff"] != 0)
        return out
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    h = float(t.ppf(1 - alpha / 2, df)) * se
    out["ci"] = [out["diff"] - h, out["diff"] + h]
    out["mde"] = (float(t.ppf(1 - alpha / 2, df)) + float(t.ppf(power, df))) * se
    out["detectable"] = not (out["ci"][0] <= 0 <= out["ci"][1])
    return out


COMPARED = (("test_success", "test success"), ("strategy_entropy", "strategy entropy"),
            ("slot_entropy", "template entropy (slot)"),
            ("well_formed_slot_entropy", "template entropy, well-formed queries"))


def comparisons(arms: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every RL arm against continued SFT on the compared figures (and mean shift success), per-seed values."""
    if "sft" not in arms:
        return {}
    out: dict[str, dict[str, Any]] = {}
    sft = arms["sft"]
    for arm, b in arms.items():
        if arm == "sft":
            continue
        row = {key: diff_ci((b.get(key) or {}).get("values", []), (sft.get(key) or {}).get("values", []))
               for key, _ in COMPARED}
        for split, ms in (b.get("shift") or {}).items():
            row[f"shift:{split}"] = diff_ci(ms.get("values", []), ((sft.get("shift") or {}).get(split) or {})
                                            .get("values", []))
        out[f"{arm}_vs_sft"] = row
    return out


def _verdict_note(summary: dict[str, Any], arm: str, fig: str) -> str:
    """What the seeds allow one to say of ``arm`` minus continued SFT on ``fig``."""
    d = ((summary.get("comparisons") or {}).get(f"{arm}_vs_sft") or {}).get(fig) or {}
    if d.get("ci") is None:
        return " — fewer than 2 seeds per arm: no interval, not a finding"
    return "" if d["detectable"] else " — but the 95% CI covers 0: no detectable difference"


def comparison_lines(summary: dict[str, Any]) -> list[str]:
    """Headline lines: each arm minus continued SFT with its 95% CI and MDE; 'no detectable difference' when
    the interval covers 0."""
    comp = summary.get("comparisons") or {}
    out = []
    for key, row in comp.items():
        arm = key[: -len("_vs_sft")]
        label = summary["arms"][arm]["label"]
        parts = []
        for fig, name in COMPARED:
            d = row.get(fig) or {}
            if d.get("diff") is None:
                continue
            if d.get("ci") is None:
                parts.append(f"{name} {d['diff']:+.3f} (one seed: no interval)")
            else:
                verdict = "" if d["detectable"] else ", no detectable difference"
                parts.append(f"{name} {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] "
                             f"(MDE {d['mde']:.3f}{verdict})")
        if parts:
            out.append(f"- {label} − continued SFT: " + "; ".join(parts) + ".")
    return out


def competence(cfg: Any, start_eval: dict) -> dict[str, Any]:
    """The competence gate: the SFT start's success on unseen test questions must reach ``cfg.competence_gate``
    for the LM findings to mean anything (None when the run evaluated no test split)."""
    ts = (start_eval.get("test") or {}).get("success")
    gate = float(getattr(cfg, "competence_gate", 0.3))
    return {"test_success": ts, "gate": gate, "passed": bool(ts is not None and ts >= gate)}


def build_summary(cfg: Any, out: Path, start_eval: dict, arm_results: dict[str, list[dict]], *, n_params: int,
                  wall_s: float, stages: dict) -> dict[str, Any]:
    from searchgym.train.squeeze_config import ARM_LABELS

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
    rl_arms = [a for a in arms if a != "sft"]
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
    }


# ------------------------------------------------------------------------------------------------ pass@k, entropy law
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
    from searchgym.train.squeeze_config import ARM_LABELS

    res["sentences"] = {split: passk_sentence(split, res["crossing"][split],
                                              {a: ARM_LABELS.get(a, a) for a in arms}, ks_all)
                        for split in start}
    return res


def passk_crossing(start: dict[str, Any], arm: dict[str, Any]) -> dict[str, Any]:
    """The ks at which the SFT start's CI lies wholly above the arm's (``start_above``) and below it
    (``arm_above``); ``first_start_above``: the smallest such k (None: no detectable crossing)."""
    above, below = [], []
    for k in sorted((int(x) for x in start if x in arm), key=int):
        s, a = start[str(k)].get("ci"), arm[str(k)].get("ci")
        if not s or not a or None in s or None in a:
            continue
        if s[0] > a[1]:
            above.append(k)
        elif a[0] > s[1]:
            below.append(k)
    return {"start_above": above, "arm_above": below, "first_start_above": above[0] if above else None}


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
        if arm == "sft":
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


# ------------------------------------------------------------------------------------------------ plots
def make_plots(summary: dict[str, Any], out: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    images: dict[str, str] = {}
    arms = summary["arms"]
    colors = dict(zip(arms, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))

    def save(fig: Any, name: str, title: str) -> None:
        tmp = out / f".{name}.tmp.png"
        fig.savefig(tmp, dpi=80, format="png")
        plt.close(fig)
        os.replace(tmp, out / name)
        images[title] = name

    def curves(keys: list[tuple[str, str]], name: str, title: str) -> None:
        fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 3.4), squeeze=False)
        for ax, (key, label) in zip(axes[0], keys):
            for arm, b in arms.items():
                steps, mean, lo, hi = _mean_series(b["series"], key)
                if not steps:
                    continue
                ax.plot(steps, mean, marker="o", ms=2.5, color=colors[arm], label=f"{b['label']} (n={b['seeds']})")
                if b["seeds"] > 1:
                    ax.fill_between(steps, lo, hi, color=colors[arm], alpha=0.15, lw=0)
            ax.set_xlabel("policy step", fontsize=8)
            ax.set_title(label, fontsize=9)
            ax.tick_params(labelsize=7)
        axes[0][0].legend(fontsize=6.5)
        fig.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.15, wspace=0.25)
        save(fig, name, title)

    curves([("reward", "rollout reward (train split; band = seed min..max)")], "reward.png", "Reward")
    curves([("slot_entropy", "query-template entropy (slot level, nats)"),
            ("effective_number", "effective number of templates exp(H)")],
           "template_entropy.png", "Template entropy and effective number")
    curves([("token_entropy", "policy token entropy (agent tokens, nats)")], "token_entropy.png", "Token entropy")

    # pass@k on the train split
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    entries = [("SFT start", summary["start"], "black")] + [(b["label"], b, colors[a]) for a, b in arms.items()]
    for label, b, col in entries:
        ks = sorted(int(k) for k in b["pass_at_k"])
        ax.plot(ks, [b["pass_at_k"][str(k)] for k in ks], marker="o", ms=3, color=col, label=label)
    ax.set_xlabel("k", fontsize=8)
    ax.set_ylabel("pass@k (train split)", fontsize=8)
    ax.legend(fontsize=6.5)
    ax.set_ylim(0, 1)
    fig.subplots_adjust(left=0.12, right=0.97, top=0.95, bottom=0.13)
    save(fig, "pass_at_k.png", "pass@k")
    if summary.get("passk"):
        _plot_passk_large(summary, plt, colors, save)
    if any(f.get("n") for f in (summary.get("entropy_law") or {}).values()):
        _plot_entropy_law(summary, plt, colors, save)

    def bars(groups: list[str], getter: Any, name: str, title: str, ylabel: str, with_err: bool = False) -> None:
        fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(groups) + 2), 3.6))
        width = 0.8 / len(entries)
        x = np.arange(len(groups))
        for j, (label, b, col) in enumerate(entries):
            vals, errs = [], []
            for g in groups:
                v = getter(b, g)
                if isinstance(v, dict):
                    vals.append(v.get("mean") if v.get("mean") is not None else np.nan)
                    ci = v.get("ci")  # half-width of the 95% t-interval over seeds
                    errs.append((ci[1] - ci[0]) / 2 if ci else 0.0)
                else:
                    vals.append(np.nan if v is None else v)
                    errs.append(0.0)
            ax.bar(x + j * width, vals, width, color=col, label=label,
                   yerr=errs if with_err and any(errs) else None, capsize=2)
        ax.set_xticks(x + 0.4 - width / 2)
        ax.set_xticklabels(groups, fontsize=7, rotation=15)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=6.5)
        fig.subplots_adjust(left=0.09, right=0.98, top=0.95, bottom=0.18)
        save(fig, name, title)

    fams = sorted({f for _, b, _ in entries for f in b["per_family"]})
    bars(fams, lambda b, f: b["per_family"].get(f), "per_family.png", "Success per question family",
         "success (train split)")
    splits = ["train", "test", *[s for s in SHIFT_SPLITS if s in summary["start"]["shift"]]]
    bars(splits, lambda b, s: b.get(f"{s}_success") if s in ("train", "test") else b["shift"].get(s), "shift.png",
         "Success on the train pool, unseen test questions and the shift splits",
         "success (mean over seeds, bar = 95% CI)", with_err=True)
    if summary.get("strategy_policy"):
        from searchgym.train.squeeze_strategy import strategy_plots

        strategy_plots(summary["strategy_policy"], out, save)
    return images


def _plot_passk_large(summary: dict[str, Any], plt: Any, colors: dict[str, Any], save: Any) -> None:
    """``pass_at_k_large.png``: pass@k vs k (log2 axis), one panel per split, SFT start vs each arm, CI bands."""
    pk = summary["passk"]
    splits = list(pk["start"])
    if not splits:
        return
    fig, axes = plt.subplots(1, len(splits), figsize=(5.2 * len(splits), 3.6), squeeze=False)
    entries = [("SFT start", pk["start"], "black")] + [
        (summary["arms"].get(a, {}).get("label", a) + f" (n={len(pk['seeds'].get(a, []))})", b, colors.get(a))
        for a, b in pk["arms"].items()]
    for ax, split in zip(axes[0], splits):
        for label, b, col in entries:
            cur = b.get(split) or {}
            ks = sorted(int(k) for k in cur)
            if not ks:
                continue
            mean = [cur[str(k)]["mean"] for k in ks]
            ax.plot(ks, mean, marker="o", ms=3, color=col, label=label)
            cis = [cur[str(k)].get("ci") for k in ks]
            if all(c and None not in c for c in cis):
                ax.fill_between(ks, [c[0] for c in cis], [c[1] for c in cis], color=col, alpha=0.12, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(pk["ks"], [str(k) for k in pk["ks"]])
        ax.set_xlabel("k (samples per question, log2)", fontsize=8)
        ax.set_title(f"pass@k, {split} ({pk['questions'].get(split, '?')} questions)", fontsize=9)
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("pass@k (band: 95% CI)", fontsize=8)
    axes[0][0].legend(fontsize=6.5)
    fig.subplots_adjust(left=0.07, right=0.98, top=0.9, bottom=0.15, wspace=0.2)
    save(fig, "pass_at_k_large.png", "pass@k up to large k (held-out splits)")


def _plot_entropy_law(summary: dict[str, Any], plt: Any, colors: dict[str, Any], save: Any) -> None:
    """``entropy_law.png``: rollout reward vs token entropy per RL arm (every step of every seed) with the fitted
    R = -a*exp(H) + b (dashed for arms that change entropy on purpose)."""
    from searchgym.train.entropy_law import entropy_law

    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    for arm, fit in summary["entropy_law"].items():
        b = summary["arms"].get(arm) or {}
        pts = [(x, y) for ser in b.get("series") or [] for x, y in zip(ser.get("token_entropy", []),
                                                                          ser.get("reward", []))
               if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
        if not pts:
            continue
        col = colors.get(arm)
        label = fit.get("label", arm) + (" (intervention)" if fit.get("intervention") else "")
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=9, color=col, alpha=0.6, label=label)
        if fit.get("ok"):
            lo, hi = fit["h_range"]
            hs = np.linspace(lo, hi, 50)
            ax.plot(hs, entropy_law(hs, fit["a"], fit["b"]), color=col, lw=1.2,
                    ls="--" if fit.get("intervention") else "-")
    ax.set_xlabel("token entropy H (nats, train-pool rollouts)", fontsize=8)
    ax.set_ylabel("rollout reward R (train pool)", fontsize=8)
    ax.set_title("Entropy law R = -a·exp(H) + b per RL arm (dashed: entropy intervention)", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6.5)
    fig.subplots_adjust(left=0.11, right=0.97, top=0.92, bottom=0.12)
    save(fig, "entropy_law.png", "Entropy law (reward vs token entropy over training)")


def passk_section(summary: dict[str, Any]) -> list[str]:
    """The report's pass@k-at-large-k table (mean [95% CI] per k) and its generated crossing sentences."""
    pk = summary.get("passk")
    if not pk:
        return []
    lines = ["", "## pass@k up to large k (held-out splits)", "",
             (f"{pk['samples']} samples per question at the evaluation temperature on a fixed pool of questions per "
              "split; unbiased pass@k (Chen et al.). SFT start: 95% bootstrap CI over questions; arms: mean over "
              "the seeds evaluated, 95% t-interval over those seeds when there are >= 2, else that seed's "
              "bootstrap CI over questions (the two kinds of interval are not the same quantity: a seed interval "
              "holds the questions fixed).")]
    ks = [str(k) for k in pk["ks"]]
    for split, st in pk["start"].items():
        lines += ["", f"**{split}** ({pk['questions'].get(split, '?')} questions)", "",
                  "| model | seeds | " + " | ".join(f"k={k}" for k in ks) + " |", "|" + "---|" * (len(ks) + 2)]

        def cell(v: dict | None) -> str:
            if not v or v.get("mean") is None:
                return "–"
            ci = v.get("ci")
            return f"{v['mean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and None not in ci else f"{v['mean']:.3f}"

        lines.append("| SFT start | – | " + " | ".join(cell(st.get(k)) for k in ks) + " |")
        for arm, b in pk["arms"].items():
            label = summary["arms"].get(arm, {}).get("label", arm)
            lines.append(f"| {label} | {len(pk['seeds'].get(arm, []))} | "
                         + " | ".join(cell((b.get(split) or {}).get(k)) for k in ks) + " |")
    lines += ["", *[f"- {s}" for s in pk.get("sentences", {}).values()]]
    return lines


def entropy_law_section(summary: dict[str, Any]) -> list[str]:
    """The report's entropy-law paragraph and table."""
    el = summary.get("entropy_law")
    if not el:
        return []
    lines = ["", "## Entropy law over training", "",
             ("Fit of R = −a·exp(H) + b (Cui et al. 2025) by nonlinear least squares per RL arm, on every policy "
              "step of every seed pooled. **R here is the mean rollout reward on the train question pool during "
              "training (the arm's own rollouts), not held-out performance**, and H is the mean token entropy "
              "of the agent's tokens in those rollouts; b − a is the reward the fit predicts once token entropy "
              "is exhausted (H = 0). The law is stated for runs without an entropy intervention; arms marked "
              "'yes' change entropy on purpose (KL, entropy bonus, Clip-Cov, KL-Cov, count bonus, DARLING) and "
              "are shown for comparison only."), "",
             "| arm | intervention | points | a | b | ceiling b − a | RMSE | note |", "|---|---|---|---|---|---|---|---|"]
    for arm, f in el.items():
        lab = f.get("label", arm)
        note = "" if f.get("ok") else (f.get("reason") or "no fit")
        lines.append(f"| {lab} | {'yes' if f.get('intervention') else 'no'} | {f.get('n', 0)} | {_g(f.get('a'))} | "
                     f"{_g(f.get('b'))} | {_g(f.get('ceiling'))} | {_g(f.get('rmse'))} | {note} |")
    return lines


# ------------------------------------------------------------------------------------------------ text
def _f(v: Any, nd: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{nd}f}"


def _g(v: Any) -> str:
    """Three significant digits (for small figures such as a log-ratio of 1e-5)."""
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3g}"


def _msd(b: dict | None, nd: int = 3) -> str:
    if not b or b.get("mean") is None:
        return "–"
    if len(b.get("values", [])) > 1 and b.get("ci"):  # mean ± half-width of the 95% t-interval over seeds
        return f"{b['mean']:.{nd}f} ± {(b['ci'][1] - b['ci'][0]) / 2:.{nd}f}"
    return f"{b['mean']:.{nd}f}"


def headline_table(summary: dict[str, Any]) -> list[str]:
    st = summary["start"]
    shifts = [s for s in SHIFT_SPLITS if s in st["shift"]]
    head = ["arm", "seeds", "train success", "test success", "strategy entropy", "template entropy (slot)",
            "effective # templates",
            "grounded share", "slot entropy (well-formed)", "token entropy",
            *[f"{s.replace('shift_', 'shift: ')}" for s in shifts]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append("| SFT start (warm start) | – | " + " | ".join(
        [_msd(st["train_success"]), _msd(st.get("test_success")), _msd(st.get("strategy_entropy")),
         _msd(st["slot_entropy"]), _msd(st["slot_effective_number"], 1),
         _msd(st.get("grounded_share")), _msd(st.get("well_formed_slot_entropy")),
         _msd(st["token_entropy"]), *[_msd(st["shift"][s]) for s in shifts]]) + " |")
    for b in summary["arms"].values():
        lines.append(f"| {b['label']} | {b['seeds']} | " + " | ".join(
            [_msd(b["train_success"]), _msd(b.get("test_success")), _msd(b.get("strategy_entropy")),
             _msd(b["slot_entropy"]), _msd(b["slot_effective_number"], 1),
             _msd(b.get("grounded_share")), _msd(b.get("well_formed_slot_entropy")),
             _msd(b["token_entropy"]), *[_msd(b["shift"].get(s)) for s in shifts]]) + " |")
    return lines


def findings_text(summary: dict[str, Any]) -> list[str]:
    st = summary["start"]
    out = []
    s0, h0 = st["train_success"]["mean"], st["slot_entropy"]["mean"]
    for b in summary["arms"].values():
        s1, h1 = b["train_success"]["mean"], b["slot_entropy"]["mean"]
        out.append(f"- **{b['label']}**: train success {_f(s0)} → {_f(s1)}; query-template entropy {_f(h0)} → "
                   f"{_f(h1)} nats (effective number {_f(st['slot_effective_number']['mean'], 1)} → "
                   f"{_f(b['slot_effective_number']['mean'], 1)}); rollout reward over training "
                   f"{_f(b['rollout_reward_first'])} → {_f(b['rollout_reward_last'])}.")
    f = summary["findings"]
    if "rl_squeezes_more_than_sft" in f:
        g, s = summary["arms"]["grpo"], summary["arms"]["sft"]
        verdict = "squeezes the query templates more than" if f["rl_squeezes_more_than_sft"] else \
            "does not squeeze the query templates more than"
        out.append(f"- In this run GRPO {verdict} continued SFT (template-entropy change "
                   f"{_f(f['grpo']['slot_entropy_delta'])} vs {_f(f['sft']['slot_entropy_delta'])} nats; "
                   f"{g['seeds']} vs {s['seeds']} seed(s))" + _verdict_note(summary, "grpo", "slot_entropy") + ".")
    improves = f.get("rl_improves_train_reward") or {}
    if improves:
        yes = [summary["arms"][a]["label"] for a, v in improves.items() if v]
        no = [summary["arms"][a]["label"] for a, v in improves.items() if not v]
        out.append(f"- RL improves train success over its SFT start in {len(yes)} of {len(improves)} RL arms"
                   + (f" (not: {', '.join(no)})." if no else "."))
    out.extend(comparison_lines(summary))
    out.extend(_shift_finding(summary))
    return out


def _shift_mean(block: dict[str, Any]) -> float | None:
    vals = [v.get("mean") for v in (block.get("shift") or {}).values()]
    vals = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


def _shift_finding(summary: dict[str, Any]) -> list[str]:
    """One line on what the shift splits show: the mean success over them for the SFT start and every arm."""
    means = {"SFT start": _shift_mean(summary["start"])}
    means.update({b["label"]: _shift_mean(b) for b in summary["arms"].values()})
    means = {k: v for k, v in means.items() if v is not None}
    if "SFT start" not in means:
        return []
    line = ("- Shift-split success (mean over " + ", ".join(summary["start"]["shift"]) + "): "
            + ", ".join(f"{k} {_f(v)}" for k, v in means.items()) + ".")
    if max(means.values()) < 0.1:
        line += (" All are near the floor: this model barely transfers to held-out phrasings, families and entity "
                 "types, so differences between arms here are a few questions, not a finding.")
    return [line]


def _gate_warning(summary: dict[str, Any]) -> list[str]:
    comp = summary.get("competence")
    if not comp or comp.get("passed"):
        return []
    return [(f"**COMPETENCE GATE FAILED: the SFT start solves {_f(comp.get('test_success'))} of unseen test "
             f"questions (gate {comp['gate']}). Every LM finding below is unusable**: the policy is too weak for "
             "its query strategy to matter."), ""]


def headline_markdown(summary: dict[str, Any]) -> str:
    c = summary["config"]
    lines = [
        (f"**RL vs SFT on the embedded world** ({summary['model']}, {summary['n_params'] / 1e6:.2f}M parameters, "
        f"{c['seeds']} seed(s) per arm, {c['rl']['total_steps']} policy steps of "
        f"{c['rl']['prompts_per_step']}×{c['rl']['group_size']} episodes; evaluation: {c['eval_samples']} samples "
        f"per question at T={c['eval_temperature']}; wall time {summary['wall_s'] / 60:.1f} min on "
        f"{summary['device']}). Produced by `searchgym squeeze{' --quick' if c['quick'] else ''}`; table cells are "
        "the mean over seeds ± the half-width of its 95% t-interval:"),
        "",
        *_gate_warning(summary),
        *headline_table(summary),
        "",
        *findings_text(summary),
        *_strategy_section(summary),
    ]
    return "\n".join(lines) + "\n"


def _strategy_section(summary: dict[str, Any]) -> list[str]:
    """The strategy-policy table and its computed findings (absent when the stage was disabled)."""
    block = summary.get("strategy_policy")
    if not block:
        return []
    from searchgym.train.squeeze_strategy import strategy_findings, strategy_table

    return ["", (f"**Strategy policy** (one heuristic query strategy chosen per question; exact success; "
                 f"{block['seeds']} seeds per arm, mean ± 95% CI; env preset `{block['preset']}`):"), "",
            *strategy_table(block), "", *strategy_findings(block)]


def render_markdown(summary: dict[str, Any], images: dict[str, str]) -> str:
    c = summary["config"]
    demos = summary.get("demos") or {}
    lines = [
        "# RL squeezes, SFT expands? — query-strategy diversity of a search agent",
        "",
        headline_markdown(summary),
        "## Setup",
        "",
        (f"- World: seed {c['world_seed']}, {c['n_entities']} entities; BM25 top-{c['top_k']}, "
        f"{c['max_turns']} searches per episode, passages cut to {c['passage_chars']} characters."),
        (f"- Demonstrations: the `diverse` heuristic agent, {c['demo_passes']} passes over the train questions: "
        f"{demos.get('demos', '–')} episodes, EM {_f(demos.get('demo_em'))}, kept {demos.get('demos_kept', '–')} "
        f"{'successful ' if c['demo_success_only'] else ''}ones for SFT."),
        f"- SFT warm start: {demos.get('steps', '–')} steps, final loss {_f(demos.get('final_loss'))}.",
        (f"- RL: GRPO (group-normalised advantages), token-mean PPO-clip loss (ε={c['rl']['clip_low']}), "
        f"lr {c['rl']['learning_rate']}, T={c['rl']['temperature']}; KL-Cov k={c['kl_cov_ratio']} (β=1), "
        f"Clip-Cov r={c['clip_cov_ratio']} band (1, 5) with PPO clip 1; entropy bonus {c['ent_coef']}."),
        (f"- Questions: the RL arms train on a fixed pool of {c['eval_questions']} train-split questions (the "
         "same questions per step for every arm); 'train success' is the success on that pool, shift-split "
         f"success is on {c['eval_shift_questions']} questions per shift split; {c['eval_samples']} samples per "
         "question."),
        ("- Continued SFT: fresh diverse demonstrations over the whole train split; its policy is sampled on the "
         "RL arms' questions at every step (these samples feed the tracker; they are not trained on)."),
        ("- Template entropy: Shannon entropy (nats) of the slot-level query templates (entities and numbers "
        "masked into typed slots) of all queries in the evaluation samples / step rollouts, from the same "
        "analysis core as `searchgym analyze`. Grounded share: queries that are neither malformed nor off-task "
        "(naming nothing from the question or earlier evidence); 'well-formed' entropy is over those only, so a "
        "squeeze that is only noise going away shows there as no change."),
        "",
        "## Plots",
        "",
    ]
    for title, fname in images.items():
        lines += [f"### {title}", "", f"![{title}](plots/{fname})", ""]
    lines += ["## Per-family success (train split)", ""]
    fams = sorted(summary["start"]["per_family"])
    lines.append("| model | " + " | ".join(fams) + " |")
    lines.append("|" + "---|" * (len(fams) + 1))
    lines.append("| SFT start | " + " | ".join(_f(summary["start"]["per_family"].get(f)) for f in fams) + " |")
    for b in summary["arms"].values():
        lines.append(f"| {b['label']} | " + " | ".join(_f(b["per_family"].get(f)) for f in fams) + " |")
    lines += ["", "## pass@k (train split)", ""]
    ks = sorted(int(k) for k in summary["start"]["pass_at_k"])
    lines.append("| model | " + " | ".join(f"k={k}" for k in ks) + " |")
    lines.append("|" + "---|" * (len(ks) + 1))
    lines.append("| SFT start | " + " | ".join(_f(summary["start"]["pass_at_k"][str(k)]) for k in ks) + " |")
    for b in summary["arms"].values():
        lines.append(f"| {b['label']} | " + " | ".join(_f(b["pass_at_k"].get(str(k))) for k in ks) + " |")
    lines += passk_section(summary)
    lines += entropy_law_section(summary)
    ctl = [b for b in summary["arms"].values() if (b.get("controls") or {}).get("control")]
    if ctl:
        lines += ["", "## Did each control act?", "",
                  ("Means over steps and seeds of the training log. Clip-Cov/KL-Cov act when they select tokens "
                  "while the ratio moves (|log ratio| > 1e-4); the KL arm when KL to the SFT start is > 0."), "",
                  ("| arm | control | acted | mini-batches/batch | clip fraction | mean abs log ratio | "
                  "cov-selected share | KL to ref |"), "|---|---|---|---|---|---|---|---|"]
        for b in ctl:
            c = b["controls"]
            lines.append(f"| {b['label']} | {c['control']} | {'yes' if c['acted'] else '**no**'} | "
                         f"{c['minibatches']} | {_g(c['clip_fraction'])} | {_g(c['abs_log_ratio'])} | "
                         f"{_g(c['cov_selected_share'])} | {_g(c['kl_ref'])} |")
    lines += ["", (f"Wall time: {summary['wall_s']:.0f} s. Files: `summary.json` (all numbers), "
              "`arms/<arm>/seed<k>/metrics.jsonl` (training scalars), `.../diversity.jsonl` (tracker), "
              "`.../eval_trajectories.jsonl` (evaluation episodes, analysable with `searchgym analyze`)."), ""]
    return "\n".join(lines)


def _md_to_html(md: str, out: Path) -> str:
    """A small markdown renderer for this report (headings, tables, lists, images, paragraphs)."""
    import re

    def inline(s: str) -> str:
        s = html.escape(s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
        s = re.sub(r"`(.+?)`", r"<code>\1</code>", s)
        return s

    body: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.match(r"^\|(\s*-+\s*\|)+\s*$", lines[i]):
                    rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            body.append("<table>" + "".join(
                "<tr>" + "".join(f"<{'th' if r == 0 else 'td'}>{inline(c)}</{'th' if r == 0 else 'td'}>"
                                 for c in row) + "</tr>" for r, row in enumerate(rows)) + "</table>")
            continue
        m = re.match(r"^!\[(.*?)\]\((.*?)\)$", ln)
        if m:
            p = out / m.group(2)
            if p.exists():
                data = base64.b64encode(p.read_bytes()).decode()
                body.append(f'<p><img alt="{html.escape(m.group(1))}" src="data:image/png;base64,{data}"></p>')
        elif ln.startswith("#"):
            n = len(ln) - len(ln.lstrip("#"))
            body.append(f"<h{n}>{inline(ln[n:].strip())}</h{n}>")
        elif ln.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{inline(lines[i][2:])}</li>")
                i += 1
            body.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif ln.strip():
            body.append(f"<p>{inline(ln)}</p>")
        i += 1
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.4}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px}"
             "img{max-width:100%}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>squeeze report</title><style>{style}</style>" \
           f"</head><body>{''.join(body)}</body></html>"


def write_report(summary: dict[str, Any], out: Path) -> None:
    from searchgym.train.checkpoint import atomic_write_text

    images = make_plots(summary, out / "plots")
    md = render_markdown(summary, images)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", _md_to_html(md, out))
