"""The squeeze report's figures (``plots/*.png``): curves over training, pass@k, the entropy law and the strategy
policy's panels."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.experiments.squeeze.config import SHIFT_SPLITS
from searchgym.experiments.squeeze.summary import _mean_series


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
        from searchgym.experiments.squeeze.strategy_stage import strategy_plots

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

