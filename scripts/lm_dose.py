"""The RL dose that moves the LM (issue 21 §3): GRPO from one SFT start at several learning rates, per step.

For each learning rate, GRPO (the squeeze experiment's `grpo` arm: same rollouts, minibatches and filter) runs
``--steps`` steps from the same SFT start, logging per step the rollout reward, the KL of the rollouts to the
start (k3 on the agent's tokens), token entropy by segment (reasoning / query / answer) and the share of forking
tokens; before and after, success on a fixed pool of train questions. A learning rate *moves* the LM when train
success rises by >= 0.15 over the start or the final KL to the start is >= 0.1; the smallest such is the dose.

    python scripts/lm_dose.py --start shipped --lrs 3e-4,5e-4,1e-3 --steps 40 --plot docs/img/rl_dose.png
    python scripts/lm_dose.py --start runs/squeeze/sft/model            # a finished squeeze run's SFT start
    python scripts/lm_dose.py                                           # builds the default SFT start first

``--start shipped`` is the package's SFT start (the default pipeline's; searchgym/experiments/squeeze/sft_start/).

Prints one table per learning rate and a summary line; ``--json FILE`` keeps everything.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

KEYS = ("charts/reward", "charts/kl_to_start", "charts/token_entropy_reasoning", "charts/token_entropy_query",
        "charts/token_entropy_answer", "charts/forking_share")


def pool_success(ctx: Any, model_dir: Path, questions: int, samples: int, seed: int = 0) -> float:
    import torch

    from searchgym.experiments.squeeze.stages import question_pool, sample_questions
    from searchgym.train.rollout import LMPolicy
    from searchgym.train.tiny_lm import load_lm

    model, tok = load_lm(model_dir, device=ctx.cfg.device)
    idx = question_pool(ctx, "train", questions)
    pol = LMPolicy(model, tok, temperature=ctx.cfg.eval_temperature, max_new_tokens=ctx.cfg.rl.max_new_tokens,
                   device=ctx.cfg.device, generator=torch.Generator().manual_seed(seed))
    eps = sample_questions(ctx, pol, ctx.envs(len(idx) * samples), idx, samples, "dose-eval")
    return float(np.mean([e.em for e in eps]))


def run_comparator(ctx: Any, arm: str, seed: int, start: Path, d: Path, questions: int, samples: int,
                   s0: float, kl_target: float | None = None) -> dict[str, Any]:
    """The comparator arm (``sft``: continued SFT for as many optimizer steps as GRPO; ``sft_kl``: continued SFT
    at matched KL) from ``start`` with ``seed``: its train-pool success, change and final KL to the start.
    ``kl_target`` (sft_kl): the KL to stop at, this seed's GRPO final KL; None keeps ``cfg.kl_target``."""
    from searchgym.experiments.squeeze.controls import run_sft_control
    from searchgym.experiments.squeeze.stages import run_sft_arm

    t0 = time.time()
    if kl_target is not None and arm == "sft_kl":
        ctx.cfg.kl_target = kl_target
    hist = run_sft_arm(ctx, seed, start, d) if arm == "sft" else run_sft_control(ctx, arm, seed, start, d)
    s1 = pool_success(ctx, d / "final_model", questions, samples)
    kls = [r.get("charts/kl_to_start") for r in hist if r.get("charts/kl_to_start") is not None]
    return {"arm": arm, "success": s1, "success_change": s1 - s0, "kl_last": kls[-1] if kls else None,
            "kl_target": ctx.cfg.kl_target if arm == "sft_kl" else None, "steps": len(hist),
            "seconds": time.time() - t0}


def dose_sweep(ctx: Any, start: Path, lrs: list[float], steps: int, out: Path, *, questions: int = 128,
               samples: int = 2, seeds: tuple[int, ...] = (1,), json_path: Path | None = None,
               comparator: str | None = None, match_kl: bool = False) -> dict[str, Any]:
    """GRPO at each learning rate from ``start``, once per seed; returns per lr each seed's per-step rows and move
    criterion (``runs``), and across seeds: the per-step mean (``rows``), the mean success change and final KL,
    their ranges, ``moved`` (the criterion on the means) and ``moved_seeds`` (seeds that moved on their own).
    With ``comparator`` (``sft`` or ``sft_kl``), each seed also runs that arm from the same start (the RL steps
    of this lr) and records GRPO − comparator on train-pool success (``vs_comparator``, a t-interval over seeds);
    ``match_kl``: sft_kl stops at the same seed's GRPO final KL instead of ``cfg.kl_target``."""
    from searchgym.experiments.squeeze.stages import run_rl_arm

    cfg = ctx.cfg
    s0 = pool_success(ctx, start, questions, samples)
    res: dict[str, Any] = {"start_success": s0, "steps": steps, "questions": questions, "samples": samples,
                           "seeds": list(seeds), "lrs": {}}
    for lr in lrs:
        cfg.rl = replace(cfg.rl, learning_rate=lr, total_steps=steps)
        runs = []
        for seed in seeds:
            d = out / (f"lr{lr:g}" if seed == 1 else f"lr{lr:g}-s{seed}")
            t0 = time.time()
            hist = run_rl_arm(ctx, "grpo", seed, start, d)
            s1 = pool_success(ctx, d / "final_model", questions, samples)
            rows = [{"step": int(r["step"]), **{k.split("/")[1]: r.get(k) for k in KEYS}} for r in hist]
            kl_last = next((r["kl_to_start"] for r in reversed(rows) if r["kl_to_start"] is not None), None)
            runs.append({"seed": seed, "rows": rows, "success": s1, "success_change": s1 - s0, "kl_last": kl_last,
                         "moved": _moved(s1 - s0, kl_last), "first_step_kl_0.1": _first_step_kl(rows),
                         "seconds": time.time() - t0})
            print(f"lr {lr:g} seed {seed}: success {s0:.3f} -> {s1:.3f}, final KL {kl_last} "
                  f"({time.time() - t0:.0f}s)", flush=True)
            if comparator:
                c = run_comparator(ctx, comparator, seed, start, d.with_name(f"{d.name}-{comparator}"), questions,
                                   samples, s0, kl_target=kl_last if match_kl else None)
                runs[-1]["comparator"] = c
                print(f"lr {lr:g} seed {seed} {comparator}: success {s0:.3f} -> {c['success']:.3f}, final KL "
                      f"{c['kl_last']}; GRPO − {comparator} {s1 - c['success']:+.3f} ({c['seconds']:.0f}s)", flush=True)
            res["lrs"][f"{lr:g}"] = _across_seeds(runs)
            if comparator:
                res["lrs"][f"{lr:g}"]["vs_comparator"] = _vs_comparator(runs, comparator)
            if json_path is not None:  # every finished seed survives an interrupted sweep
                json_path.write_text(json.dumps(res, indent=1))
    moved = [float(k) for k, v in res["lrs"].items() if v["moved"]]
    res["dose_lr"] = min(moved) if moved else None
    return res


def _vs_comparator(runs: list[dict[str, Any]], arm: str) -> dict[str, Any]:
    """GRPO − comparator train-pool success per seed (same seed, same start), its mean and 95% t-interval."""
    from searchgym.experiments.squeeze.stats import t_interval

    d = [r["success"] - r["comparator"]["success"] for r in runs]
    return {"arm": arm, "diffs": d, "mean": float(np.mean(d)), "ci": t_interval(d), "n_seeds": len(d)}


def _moved(success_change: float | None, kl_last: float | None) -> bool:
    """The move criterion: train success +0.15 over the start, or final per-token KL to the start >= 0.1."""
    return bool((success_change or 0) >= 0.15 or (kl_last or 0) >= 0.1)


def _first_step_kl(rows: list[dict[str, Any]]) -> int | None:
    return next((r["step"] for r in rows if (r["kl_to_start"] or 0) >= 0.1), None)


def _across_seeds(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One learning rate's seeds together: per-step means, mean and range of the success change and final KL."""
    def mean(xs: list[Any]) -> float | None:
        xs = [x for x in xs if x is not None]
        return float(np.mean(xs)) if xs else None

    steps = sorted({r["step"] for run in runs for r in run["rows"]})
    by = [{r["step"]: r for r in run["rows"]} for run in runs]
    rows = [{"step": st, **{k.split("/")[1]: mean([b[st].get(k.split("/")[1]) for b in by if st in b])
                            for k in KEYS}} for st in steps]
    sc = [r["success_change"] for r in runs]
    kl = [r["kl_last"] for r in runs if r["kl_last"] is not None]
    sc_m, kl_m = mean(sc), mean(kl)
    return {"runs": runs, "rows": rows, "success": mean([r["success"] for r in runs]), "success_change": sc_m,
            "success_change_range": [min(sc), max(sc)], "kl_last": kl_m,
            "kl_last_range": [min(kl), max(kl)] if kl else None,
            "moved": _moved(sc_m, kl_m), "moved_seeds": sum(r["moved"] for r in runs), "n_seeds": len(runs),
            "first_step_kl_0.1": _first_step_kl(rows),
            "seconds": sum(r["seconds"] for r in runs)}


def plot(res: dict[str, Any], path: Path) -> None:
    """Per learning rate and step: rollout reward, KL to the start, token entropy of query tokens, forking share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("reward", "rollout reward"), ("kl_to_start", "KL to the SFT start (per token)"),
              ("token_entropy_query", "token entropy, query tokens"), ("forking_share", "forking-token share"))
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for ax, (k, title) in zip(axes, panels):
        for lr, v in res["lrs"].items():
            pts = [(r["step"], r[k]) for r in v["rows"] if r[k] is not None]
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker=".", label=f"lr {lr}")
        if k == "kl_to_start":
            ax.axhline(0.1, color="grey", ls="--", lw=1, label="KL 0.1 (moved)")
            ax.set_yscale("symlog", linthresh=0.01)  # 0.01 .. 3 on one panel
            ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.set_xlabel("GRPO step")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _f(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}"


def main(argv: list[str] | None = None) -> None:
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.stages import Context
    from searchgym.experiments.squeeze.start import build_start, shipped_start

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", default=None, help="an SFT start (model directory, or `shipped`: the package's); "
                                                  "default: build the default pipeline's")
    ap.add_argument("--world-seed", type=int, default=0,
                    help="the procedural world (default 0, the shipped start's); another world needs its own start: "
                         "give --start DIR, or none to build one into OUT (about 35 minutes on one core)")
    ap.add_argument("--lrs", default="3e-4,5e-4,1e-3")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", default="1", help="comma-separated RL seeds per learning rate (seed 1 writes "
                                                 "OUT/lrLR, seed s OUT/lrLR-sS)")
    ap.add_argument("--questions", type=int, default=128, help="train-pool questions of the success figure")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="runs/dose")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None, help="write the per-step curves to this PNG")
    ap.add_argument("--comparator", choices=("sft", "sft_kl"), default=None,
                    help="also run this arm per seed from the same start (sft: continued SFT, as many optimizer "
                         "steps; sft_kl: continued SFT at matched KL) and report GRPO − it on train-pool success")
    ap.add_argument("--match-seed-kl", action="store_true",
                    help="sft_kl stops at the same seed's GRPO final KL (default: the config's kl_target)")
    ap.add_argument("--sft-kl-max-factor", type=int, default=None,
                    help="sft_kl runs at most this many times GRPO's steps (default: the config's)")
    ap.add_argument("--sft-kl-lr", type=float, default=None,
                    help="sft_kl's learning rate (default: each swept GRPO rate, as in the 2026-11-27 probe; the "
                         "squeeze experiment's sft_kl arm runs at its config's sft_kl_learning_rate)")
    a = ap.parse_args(argv)

    import torch

    torch.set_num_threads(a.threads)
    out = Path(a.out)
    cfg = SqueezeConfig.preset(out=str(out), strategy_seeds=0, world_seed=a.world_seed)
    if a.sft_kl_max_factor is not None:
        cfg.sft_kl_max_factor = a.sft_kl_max_factor
    cfg.sft_kl_learning_rate = a.sft_kl_lr  # None: the swept GRPO rate
    ctx = Context(cfg, print)
    if a.start == "shipped":
        start, why = shipped_start(cfg, ctx.world)
        if start is None:
            raise SystemExit(f"--start shipped: {why}")
    else:
        start = Path(a.start) if a.start else out / "sft" / "model"
    if not (start / "config.json").exists():
        start, _ = build_start(ctx, out, print)
    res = dose_sweep(ctx, start, [float(x) for x in a.lrs.split(",")], a.steps, out, questions=a.questions,
                     samples=a.samples, seeds=tuple(int(x) for x in a.seeds.split(",")),
                     json_path=Path(a.json) if a.json else None, comparator=a.comparator,
                     match_kl=a.match_seed_kl)
    print(f"\nSFT start: train-pool success {res['start_success']:.3f} ({a.questions} questions x {a.samples})")
    for lr, v in res["lrs"].items():
        sr, kr = v["success_change_range"], v["kl_last_range"] or [None, None]
        print(f"\nlr {lr}, {v['n_seeds']} seed(s): success {v['success']:.3f} ({v['success_change']:+.3f}, range "
              f"{sr[0]:+.3f} to {sr[1]:+.3f}), final KL to start {_f(v['kl_last'])} (range {_f(kr[0])} to "
              f"{_f(kr[1])}), moved: {v['moved']} ({v['moved_seeds']}/{v['n_seeds']} seeds; {v['seconds']:.0f} s)\n")
        vc = v.get("vs_comparator")
        if vc:
            ci = f" [{vc['ci'][0]:+.3f}, {vc['ci'][1]:+.3f}]" if vc["ci"] else " (one seed: no interval)"
            print(f"GRPO − {vc['arm']} on train-pool success: {vc['mean']:+.3f}{ci} over {vc['n_seeds']} seed(s); "
                  "per seed " + ", ".join(f"{x:+.3f}" for x in vc["diffs"]) + "\n")
        print("(per-step means over the seeds)")
        print("| step | reward | KL to start | H reasoning | H query | H answer | forking share |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in v["rows"]:
            print(f"| {r['step']} | {_f(r['reward'])} | {_f(r['kl_to_start'])} | {_f(r['token_entropy_reasoning'])} "
                  f"| {_f(r['token_entropy_query'])} | {_f(r['token_entropy_answer'])} | {_f(r['forking_share'])} |")
    print(f"\ndose (smallest lr that moves the LM): {res['dose_lr']}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    if a.plot:
        plot(res, Path(a.plot))


if __name__ == "__main__":
    main()
