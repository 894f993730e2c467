"""Supervised fine-tuning on demonstration episodes (CleanRL style: hyperparameters at the top, one loop).

Demonstrations are :class:`~searchgym.train.rollout.Episode` token sequences recorded against the real
environment (heuristic strategies via ``AgentPolicy``, or replayed trajectory files); the loss is the masked
token-mean cross-entropy over the agent's own tokens only (prompt and ``<information>`` tokens are context).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.train.runlog import append_metrics, sync_metrics


@dataclass
class SFTArgs:
    seed: int = 1                      # seed of data order
    learning_rate: float = 2e-3        # AdamW learning rate (tiny LM; use ~1e-5 for a pretrained model)
    weight_decay: float = 0.0          # AdamW weight decay
    warmup_steps: int = 10             # linear warm-up steps
    epochs: float = 3.0                # passes over the demonstrations (fractions allowed)
    max_steps: int | None = None       # stop after this many optimizer steps (overrides epochs)
    batch_size: int = 32               # episodes per optimizer step
    micro_batch_size: int = 16         # episodes per forward pass (gradient accumulation)
    max_grad_norm: float = 1.0         # gradient clipping
    final_lr_ratio: float = 1.0        # learning rate at the last step / learning_rate (linear decay after the
    #                                    warm-up; 1.0 = constant)
    context_loss_weight: float = 0.0   # also predict prompt/observation tokens with this weight (an LM
    #                                    pretraining signal for a from-scratch model; 0 = masked SFT only)
    checkpoint_every: int = 0          # optimizer steps between checkpoints (0 = only at the end)
    log_every: int = 10                # steps between log lines
    device: str = "cpu"                # cpu | cuda

    def validate(self) -> None:
        if self.batch_size < 1 or self.micro_batch_size < 1:
            raise ConfigError("batch_size and micro_batch_size must be >= 1")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.epochs <= 0 and not self.max_steps:
            raise ConfigError("give epochs > 0 or max_steps")
        if not 0.0 < self.final_lr_ratio <= 1.0:
            raise ConfigError(f"final_lr_ratio must be in (0, 1], got {self.final_lr_ratio}")


def lr_factor(args: SFTArgs, total: int) -> Callable[[int], float]:
    """The learning-rate multiplier at optimizer step s: linear warm-up, then a linear decay to
    ``final_lr_ratio`` at the last step (constant when it is 1)."""
    w = max(1, args.warmup_steps)

    def f(s: int) -> float:
        if s + 1 < w:
            return (s + 1) / w
        span = max(1, total - w)
        return 1.0 - (1.0 - args.final_lr_ratio) * min(1.0, (s + 1 - w) / span)

    return f


def num_steps(args: SFTArgs, n_examples: int) -> int:
    if args.max_steps:
        return int(args.max_steps)
    return max(1, int(np.ceil(args.epochs * n_examples / args.batch_size)))


def sft_backward(model: Any, batch_eps: Sequence[Any], args: SFTArgs, pad: int) -> float:
    """Accumulate the gradient of one batch's SFT loss (token-mean over the agent tokens, plus
    ``context_loss_weight`` x the LM loss on prompt/observation tokens); returns the loss. The caller zeroes
    gradients and steps the optimizer (train_sft, or an RL arm's periodic SFT refresh)."""
    from searchgym.train.losses import masked_mean, sft_loss
    from searchgym.train.rollout import collate, policy_forward

    n_tok = sum(sum(e.mask) for e in batch_eps)
    loss_sum = 0.0
    # micro-batches of similar length pad less; the loss is token-weighted, so the grouping does not change it
    batch_eps = sorted(batch_eps, key=lambda e: len(e.ids))
    for m in range(0, len(batch_eps), args.micro_batch_size):
        mb = batch_eps[m:m + args.micro_batch_size]
        b = collate(mb, pad, args.device)
        mb_tok = float(b["mask"].sum().item())
        if args.context_loss_weight > 0:
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
            ctx_mask = b["attention_mask"][:, 1:].float() * (1.0 - b["mask"])
            agent = sft_loss(logits[:, :-1], b["targets"], b["mask"])
            loss = (agent + args.context_loss_weight * sft_loss(logits[:, :-1], b["targets"], ctx_mask))
        else:  # the LM head only on the agent's tokens
            lp, _, _ = policy_forward(model, b, with_entropy=False)
            loss = -masked_mean(lp, b["mask"])
        # token-mean over the whole batch: weight each micro-batch by its share of agent tokens
        loss = loss * (mb_tok / max(1, n_tok))
        loss.backward()
        loss_sum += loss.item()
    return loss_sum


def _kl_row(model: Any, ref: Any, batch_eps: Sequence[Any], args: SFTArgs, pad: int) -> dict[str, float]:
    """``{"charts/kl_to_start": ...}`` of the step's batch when a reference is given (else empty)."""
    if ref is None:
        return {}
    from searchgym.train.rollout import kl_to_reference

    ref.eval()
    was_training = model.training
    model.eval()
    try:
        s, n = kl_to_reference(model, ref, batch_eps, pad, args.device, args.micro_batch_size)
    finally:
        model.train(was_training)
    return {"charts/kl_to_start": s / n if n else 0.0}


def train_sft(model: Any, tokenizer: Any, episodes: Sequence[Any], args: SFTArgs, *, out_dir: str | Path | None = None,
              log: Callable[[dict[str, float]], None] | None = None, resume: bool = False,
              eval_fn: Callable[[int], dict[str, float]] | None = None,
              ref_model: Any = None) -> list[dict[str, float]]:
    """Train ``model`` in place on ``episodes``; returns the list of logged metric rows.

    With ``out_dir``, metrics go to ``out_dir/metrics.jsonl`` and checkpoints to ``out_dir/checkpoint``
    (atomic); ``resume=True`` continues from that checkpoint exactly (data order is a function of the seed and
    the step). With ``ref_model`` (e.g. a frozen copy of the start), every row logs ``charts/kl_to_start``: the
    mean per-token KL(model || ref_model) on the step's trained (agent) tokens, before the step's update, as
    ``train_rl`` logs it for the rollouts (there a k3 estimate on the policy's own samples; here exact over the
    vocabulary, since the demonstrations were not sampled from the model). One extra no-grad forward of each
    model per step."""
    import torch

    from searchgym.train.checkpoint import atomic_write_text, load_checkpoint, save_checkpoint, set_rng_state

    args.validate()
    episodes = [e for e in episodes if sum(e.mask) > 0]
    if not episodes:
        raise ConfigError("no demonstration has any agent token to imitate")
    total = num_steps(args, len(episodes))
    model.to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(args, total))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    history: list[dict[str, float]] = []
    start = 0
    ckpt = Path(out_dir) / "checkpoint" if out_dir is not None else None
    if resume and ckpt is not None and ckpt.exists():
        from transformers import AutoModelForCausalLM

        c = load_checkpoint(ckpt, device=args.device)
        loaded = AutoModelForCausalLM.from_pretrained(c["model_dir"])
        model.load_state_dict(loaded.state_dict())
        opt.load_state_dict(c["optimizer"])
        sched.load_state_dict(c["extra"]["scheduler"])
        set_rng_state(c["rng"])
        start, history = int(c["state"]["step"]), list(c["state"]["history"])
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    sync_metrics(out_dir, history, resumed=start > 0)  # a resume drops rows written after the checkpoint

    # Data order: a fixed permutation per epoch, derived from the seed (so resume needs no RNG state).
    n = len(episodes)

    def batch_indices(step: int) -> list[int]:
        out = []
        for k in range(step * args.batch_size, (step + 1) * args.batch_size):
            epoch, pos = divmod(k, n)
            perm = np.random.default_rng([args.seed, epoch]).permutation(n)
            out.append(int(perm[pos]))
        return out

    t0 = time.time()
    for step in range(start, total):
        batch_eps = [episodes[i] for i in batch_indices(step)]
        n_tok = sum(sum(e.mask) for e in batch_eps)
        opt.zero_grad(set_to_none=True)
        kl = _kl_row(model, ref_model, batch_eps, args, pad)
        loss_sum = sft_backward(model, batch_eps, args, pad)
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm).item()
        opt.step()
        sched.step()
        row = {"step": step + 1, "losses/sft": loss_sum, "charts/grad_norm": gnorm,
               "charts/learning_rate": opt.param_groups[0]["lr"], "charts/agent_tokens": float(n_tok),
               "charts/time": time.time() - t0, **kl}
        if eval_fn is not None and ((step + 1) % max(1, args.log_every) == 0 or step + 1 == total):
            row.update(eval_fn(step + 1))
        history.append(row)
        if log is not None:
            log(row)
        append_metrics(out_dir, row)
        if ckpt is not None and ((args.checkpoint_every and (step + 1) % args.checkpoint_every == 0)
                                 or step + 1 == total):
            save_checkpoint(ckpt, model=model, tokenizer=tokenizer, optimizer=opt,
                            state={"step": step + 1, "history": history, "args": asdict(args), "kind": "sft"},
                            extra={"scheduler": sched.state_dict()})
    if out_dir is not None:
        atomic_write_text(Path(out_dir) / "sft_done.json", json.dumps({"steps": total}))
    model.eval()
    return history
