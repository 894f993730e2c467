"""The LM controls that make a squeeze RL's (issue 31 §2), beside continued SFT and GRPO:

- ``sft_kl``: continued SFT **toward matched KL**: the warm start's loss on fresh diverse demonstrations at
  ``cfg.sft_kl_learning_rate`` (None: the RL arms' rate), its KL to the SFT start logged every step, stopped once
  that KL reaches ``cfg.kl_target`` (the RL dose's KL) or after ``cfg.sft_kl_max_factor`` × the RL arms' steps
  (on world 0 it plateaus below the target: docs/squeeze.md);
- ``rs_sft``: **rejection-sampling SFT**: every step samples the RL arms' questions from the current policy
  (group size as RL), keeps the successful episodes and takes the RL arms' optimizer steps of SFT on them;
- ``grpo_shuffled``: GRPO with the rewards **permuted within each step's batch** (:func:`shuffled_rewards`):
  the same reward distribution, no relation to what the episode did;
- ``grpo_positive``: the **positive control**: a reward that pays one query template only
  (:class:`OneTemplateReward`), so the template measure must fire.

The two SFT controls share one loop (:func:`run_sft_control`) that writes rows in the RL arms' shape (``step``,
``charts/reward``, ``charts/kl_to_start``, the tracker's ``diversity/*``), so the summary reads them like RL.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

SFT_CONTROLS = ("sft_kl", "rs_sft")


def kl_to_start(ref: Any, episodes: list[Any], pad: int, device: str, temperature: float = 1.0,
                micro: int = 32) -> float | None:
    """Per-token KL(policy || start) of ``episodes`` sampled from the policy: the k3 estimator on the agent's
    tokens from the episodes' own behaviour log-probs and the start's (``ref``) log-probs, as ``train_rl`` logs
    ``charts/kl_to_start``. None for episodes without agent tokens.

    Not ``train_sft(ref_model=)``'s ``charts/kl_to_start``: that one is the exact KL on the *demonstrations'*
    tokens (what SFT trains on), this one the k3 estimate on the policy's *own rollouts*, RL's measure, so the
    SFT arms' KL and ``sft_kl``'s stopping rule compare with GRPO's; and ``sft_kl`` / ``rs_sft`` do not run
    ``train_sft`` at all."""
    import torch

    from searchgym.train.losses import kl_penalty
    from searchgym.train.rollout import collate, policy_forward

    eps = [e for e in episodes if sum(e.mask) > 0]
    tot, n = 0.0, 0.0
    with torch.no_grad():
        for i in range(0, len(eps), micro):
            b = collate(eps[i:i + micro], pad, device)
            ref_lp = policy_forward(ref, b, temperature=temperature, with_entropy=False)[0]
            tot += float((kl_penalty(b["old_logp"], ref_lp, "k3") * b["mask"]).sum())
            n += float(b["mask"].sum())
    return tot / n if n else None


def shuffled_rewards(seed: int) -> Callable[[int, list[Any], list[float]], list[float]]:
    """``shape_rewards`` that permutes the step's rewards over its episodes (a function of seed and step)."""

    def shape(step: int, episodes: list[Any], rewards: list[float]) -> list[float]:
        perm = np.random.default_rng([seed, step, 31]).permutation(len(rewards))
        return [float(rewards[int(i)]) for i in perm]

    return shape


class OneTemplateReward:
    """``shape_rewards`` of the positive control: 1 when every query of the episode has the target slot template,
    else 0. The target is the most common query template of the arm's first rollout batch (ties: the
    lexicographically first), saved to ``out_dir/positive_target.json`` so a resumed run pays the same one."""

    def __init__(self, templater: Any, out_dir: Path):
        self.templater = templater
        self.path = Path(out_dir) / "positive_target.json"
        self.target: str | None = json.loads(self.path.read_text())["template"] if self.path.exists() else None

    def __call__(self, step: int, episodes: list[Any], rewards: list[float]) -> list[float]:
        from collections import Counter

        from searchgym.train.shaping import query_classes

        classes = query_classes([e.trajectory for e in episodes], self.templater)
        if self.target is None:
            counts = Counter(t for c in classes for t in c)
            self.target = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counts else ""
            from searchgym.train.checkpoint import atomic_write_text

            atomic_write_text(self.path, json.dumps({"template": self.target, "chosen_at_step": step}))
        return [1.0 if c and all(t == self.target for t in c) else 0.0 for c in classes]


def _demo_source(ctx: Any, tok: Any, seed: int) -> Callable[[Any, Any, int], list[Any]]:
    """sft_kl's data: batches of fresh diverse demonstrations (the continued-SFT arm's recipe)."""
    from searchgym.experiments.squeeze.stages import arm_demos

    demos = [e for e in arm_demos(ctx, tok, 3000 + seed) if sum(e.mask) > 0]

    def batch(rng: Any, _eps: Any, size: int) -> list[Any]:
        idx = rng.choice(len(demos), size=min(size, len(demos)), replace=False)
        return [demos[int(i)] for i in idx]

    return batch


def _own_successes(rng: Any, eps: list[Any], size: int) -> list[Any]:
    """rs_sft's data: the step's successful samples of the policy (all of them; ``size`` is unused)."""
    return [e for e in eps if e.em > 0 and sum(e.mask) > 0]


def run_sft_control(ctx: Any, arm: str, seed: int, start_dir: Path, out_dir: Path) -> list[dict]:
    """Train ``sft_kl`` or ``rs_sft`` from the SFT start (see the module docstring); returns the metric rows
    (also in ``out_dir/metrics.jsonl``) and saves ``out_dir/final_model``. A resumed run restarts the arm."""
    import torch

    from searchgym.diversity import DiversityTracker
    from searchgym.experiments.squeeze.stages import _tracker_extra, continued_sft_args, train_pool
    from searchgym.train.runlog import append_metrics, sync_metrics
    from searchgym.train.tiny_lm import load_lm

    c, rl = ctx.cfg, ctx.cfg.rl
    model, tok = load_lm(start_dir, device=c.device)
    ref, _ = load_lm(start_dir, device=c.device)
    ref.eval().requires_grad_(False)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    lr = c.sft_kl_learning_rate if arm == "sft_kl" and c.sft_kl_learning_rate else rl.learning_rate
    sargs = replace(continued_sft_args(c), learning_rate=lr)  # the RL arms' rate unless sft_kl has its own
    opt = torch.optim.AdamW(model.parameters(), lr=sargs.learning_rate, weight_decay=sargs.weight_decay)
    data = _demo_source(ctx, tok, seed) if arm == "sft_kl" else _own_successes
    k = c.sft_steps_per_step()
    steps = rl.total_steps * (c.sft_kl_max_factor if arm == "sft_kl" else 1)
    sync_metrics(out_dir, [], resumed=False)
    tracker = DiversityTracker(levels=("string", "slot"), log_dir=out_dir, titles=ctx.world.titles,
                               tensorboard=False)
    sampler = _Sampler(ctx, seed, train_pool(ctx))
    rows: list[dict] = []
    for step in range(1, steps + 1):
        t0 = time.time()
        eps = sampler(model, tok, step)
        row = {"step": step, "charts/reward": float(np.mean([e.reward for e in eps])),
               "charts/em": float(np.mean([e.em for e in eps])),
               "charts/token_entropy": float(np.mean([x for e in eps for x, m in zip(e.entropies, e.mask) if m]
                                                     or [0.0])),
               "charts/kl_to_start": kl_to_start(ref, eps, pad, c.device, rl.temperature),
               "charts/learning_rate": sargs.learning_rate,
               "charts/time_rollout": time.time() - t0}
        m = tracker.update(step, [e.trajectory for e in eps],
                           token_entropies=[x for e in eps for x, mm in zip(e.entropies, e.mask) if mm])
        row.update(_tracker_extra(m))
        t1 = time.time()
        row.update(_sft_updates(model, opt, data(np.random.default_rng([seed, step, 29]), eps, sargs.batch_size * k),
                                k, sargs, pad))
        row["charts/time_update"] = time.time() - t1
        rows.append(row)
        append_metrics(out_dir, row)
        ctx.log(f"  [{arm} s{seed}] step {step:3d}  reward {row['charts/reward']:.3f}  KL to start "
                f"{_f(row['charts/kl_to_start'])}  slot-H {_f(row.get('diversity/slot/entropy'))}")
        if arm == "sft_kl" and (row["charts/kl_to_start"] or 0.0) >= c.kl_target:
            break  # matched: the RL dose's KL to the start
    tracker.close()
    model.eval()
    ctx.save_model(model, tok, out_dir / "final_model")
    return rows


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


class _Sampler:
    """The RL arms' rollouts of one step: the same questions (``step_seeds``) and group size, sampled from the
    current policy at the RL temperature."""

    def __init__(self, ctx: Any, seed: int, pool: list[int]):
        self.ctx, self.seed, self.pool = ctx, seed, pool
        rl = ctx.cfg.rl
        self.n = rl.prompts_per_step * rl.group_size
        self.envs = ctx.envs(self.n)

    def __call__(self, model: Any, tok: Any, step: int) -> list[Any]:
        import torch

        from searchgym.train.rl import _torch_gen, step_seeds
        from searchgym.train.rollout import LMPolicy, run_episodes

        c, rl = self.ctx.cfg, self.ctx.cfg.rl
        G = rl.group_size
        qs = [{"index": self.pool[s % len(self.pool)]} for s in step_seeds(self.seed, step - 1, rl.prompts_per_step)]
        model.eval()
        pol = LMPolicy(model, tok, temperature=rl.temperature, max_new_tokens=rl.max_new_tokens, device=c.device,
                       generator=_torch_gen(self.seed, step - 1, 1, c.device))
        with torch.no_grad():
            eps = run_episodes(pol, self.envs, [None] * self.n, options=[qs[i // G] for i in range(self.n)],
                               groups=[i // G for i in range(self.n)], max_context=rl.max_context,
                               max_new_tokens=rl.max_new_tokens, agent_name="sft_control", policy_step=step)
        model.train()
        return eps


def _sft_updates(model: Any, opt: Any, batch: list[Any], k: int, sargs: Any, pad: int) -> dict[str, float]:
    """``k`` optimizer steps of the SFT loss over ``batch`` split in ``k`` parts (none when it is empty)."""
    import torch

    from searchgym.train.sft import sft_backward

    losses = []
    for part in (batch[i::k] for i in range(k)):
        if not part:
            continue
        opt.zero_grad(set_to_none=True)
        losses.append(sft_backward(model, part, sargs, pad))
        torch.nn.utils.clip_grad_norm_(model.parameters(), sargs.max_grad_norm)
        opt.step()
    return {"losses/sft": float(np.mean(losses)) if losses else 0.0, "charts/sft_updates": float(len(losses)),
            "charts/sft_examples": float(len(batch))}
