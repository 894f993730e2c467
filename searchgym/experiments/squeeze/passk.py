"""pass@k at large k for the squeeze experiment: does the SFT start beat the RL arms when many samples are
drawn ("does base beat RL at large k?", ``literature.md`` §4)?

:func:`passk_eval` samples ``cfg.passk_max`` episodes per question on a fixed pool of ``cfg.passk_questions``
questions of each of ``cfg.passk_splits`` (``stages.question_pool``, sampled as
``stages.evaluate`` samples, at ``cfg.eval_temperature`` with a seeded generator) and returns, per split,
the per-question ``(n, correct)`` pairs and the unbiased pass@k (Chen et al.;
:func:`searchgym.diversity.mean_pass_at_k`) at k = 1, 2, 4, ..., passk_max with a 95% percentile bootstrap CI
over questions. :func:`passk_stage` runs it once per model directory and writes ``passk.json`` there
(reused on ``--resume`` when its settings match).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

N_BOOT = 2000


def passk_ks(k_max: int) -> list[int]:
    """1, 2, 4, ... up to ``k_max`` (``k_max`` itself included when it is not a power of two)."""
    ks, k = [], 1
    while k <= k_max:
        ks.append(k)
        k *= 2
    if k_max >= 1 and ks[-1] != k_max:
        ks.append(int(k_max))
    return ks


def passk_from_pairs(pairs: Sequence[Sequence[int]], ks: Sequence[int], *, seed: int = 0,
                     n_boot: int = N_BOOT) -> dict[str, dict[str, Any]]:
    """``{str(k): {"mean", "ci": [lo, hi]}}``: dataset pass@k over the questions' ``(n, c)`` pairs and its 95%
    percentile bootstrap interval (questions resampled with replacement; one set of resamples for every k,
    so the curves' bands are coherent). The interval is widened to contain the estimate if needed; k larger
    than some question's n is skipped."""
    from searchgym.diversity import mean_pass_at_k
    from searchgym.diversity.metrics import pass_at_k

    pairs = [(int(n), int(c)) for n, c in pairs]
    out: dict[str, dict[str, Any]] = {}
    if not pairs:
        return out
    rng = np.random.default_rng([int(seed), 31337])
    q = len(pairs)
    boot_idx = rng.integers(0, q, size=(n_boot, q))
    n_min = min(n for n, _ in pairs)
    for k in ks:
        if k < 1 or k > n_min:
            continue
        per_q = np.array([pass_at_k(n, c, k) for n, c in pairs])
        est = mean_pass_at_k(pairs, k)
        reps = per_q[boot_idx].mean(axis=1)
        lo, hi = (float(x) for x in np.quantile(reps, [0.025, 0.975]))
        out[str(k)] = {"mean": est, "ci": [min(lo, est), max(hi, est)]}
    return out


def passk_settings(cfg: Any) -> dict[str, Any]:
    """What a ``passk.json`` depends on besides the model (a resumed run reuses a file only when these match)."""
    return {"n": int(cfg.passk_max), "questions": int(cfg.passk_questions), "splits": list(cfg.passk_splits),
            "temperature": float(cfg.eval_temperature), "max_new_tokens": int(cfg.rl.max_new_tokens),
            "world_seed": int(cfg.world_seed), "n_entities": int(cfg.n_entities)}


def passk_eval(ctx: Any, model: Any, tokenizer: Any, *, seed: int, name: str,
               chunk_questions: int = 8) -> dict[str, Any]:
    """Sample ``cfg.passk_max`` episodes per question on each of ``cfg.passk_splits`` (its fixed question pool of
    ``cfg.passk_questions``), ``chunk_questions`` questions per batched ``run_episodes`` call so memory stays
    small. Returns ``{"name", "seed", "ks", "settings", "splits": {split: {"questions", "pairs",
    "pass_at_k": {k: {"mean", "ci"}}, "success", "episodes"}}, "missing_splits"}``."""
    import torch

    from searchgym.experiments.squeeze.stages import question_pool, sample_questions
    from searchgym.train.rollout import LMPolicy

    c = ctx.cfg
    n = int(c.passk_max)
    ks = passk_ks(n)
    res: dict[str, Any] = {"name": name, "seed": seed, "ks": ks, "settings": passk_settings(c), "splits": {},
                           "missing_splits": []}
    if n < 1:
        return res
    chunk_questions = max(1, int(chunk_questions))
    for split in c.passk_splits:
        if split not in ctx.world.splits or not ctx.world.split(split):
            res["missing_splits"].append(split)
            continue
        idx = question_pool(ctx, split, c.passk_questions)
        # its own stream (not evaluate()'s): seed, split and this stage
        gen = torch.Generator(device=c.device).manual_seed(seed * 7919 + len(split) + 104_729)
        pol = LMPolicy(model, tokenizer, temperature=c.eval_temperature, max_new_tokens=c.rl.max_new_tokens,
                       device=c.device, generator=gen)
        envs = ctx.envs(min(chunk_questions, len(idx)) * n, split)
        pairs: list[list[int]] = []
        for q0 in range(0, len(idx), chunk_questions):
            qs = idx[q0:q0 + chunk_questions]
            with torch.no_grad():
                eps = sample_questions(ctx, pol, envs, qs, n, name)
            correct = [0] * len(qs)
            for e in eps:
                correct[int(e.group)] += int(e.em > 0)
            pairs.extend([n, cc] for cc in correct)
        res["splits"][split] = {
            "questions": idx, "pairs": pairs,
            "success": float(sum(cc for _, cc in pairs) / max(1, sum(nn for nn, _ in pairs))),
            "episodes": int(sum(nn for nn, _ in pairs)),
            "pass_at_k": passk_from_pairs(pairs, ks, seed=seed),
        }
    return res


def passk_stage(ctx: Any, out_dir: Path, load: Callable[[], tuple[Any, Any]], *, seed: int, name: str
                ) -> dict[str, Any] | None:
    """``out_dir/passk.json``: reused on ``--resume`` when its settings match, else computed with the model
    ``load()`` returns and written atomically. None when ``cfg.passk_max`` is 0."""
    from searchgym.experiments.squeeze.stages import _write_json

    c = ctx.cfg
    if not c.passk_max:
        return None
    path = Path(out_dir) / "passk.json"
    if c.resume and path.exists():
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError:
            old = None
        if old and old.get("settings") == passk_settings(c) and old.get("seed") == seed:
            return old
    t0 = time.time()
    model, tok = load()
    res = passk_eval(ctx, model, tok, seed=seed, name=name)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_json(path, res)
    top = str(res["ks"][-1]) if res["ks"] else None
    figs = ", ".join(f"{sp} pass@1 {v['pass_at_k'].get('1', {}).get('mean', float('nan')):.3f} "
                     f"pass@{top} {v['pass_at_k'].get(top, {}).get('mean', float('nan')):.3f}"
                     for sp, v in res["splits"].items())
    ctx.log(f"      pass@k ({c.passk_max} samples x {c.passk_questions} questions per split): {figs} "
            f"({time.time() - t0:.1f}s)")
    return res


def passk_seed_wanted(cfg: Any, seed: int) -> bool:
    """Whether arm seed ``seed`` (1-based) gets a pass@k evaluation (``passk_seeds`` 0: every seed)."""
    return bool(cfg.passk_max) and (cfg.passk_seeds == 0 or seed <= cfg.passk_seeds)
