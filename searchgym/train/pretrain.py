"""Causal-LM pretraining of the tiny LM on its world, before SFT: the passages (as the env shows them) and the
train split's question/answer text in the agent's grammar. Without it the from-scratch LM has only ever seen
its tokenizer's corpus, never a next-token objective on the world, and SFT must teach language and task at once.

Only the ``train`` split's questions are used, so test and shift questions stay unseen. Text is packed into
fixed-length blocks; the block order is a pure function of the seed and the step, so ``resume=True`` continues
from the last checkpoint exactly (the metrics log is truncated to it, as in SFT and RL).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.train.runlog import append_metrics, sync_metrics


@dataclass
class PretrainArgs:
    seed: int = 0                      # seed of the block order
    max_steps: int = 300               # optimizer steps (0 = no pretraining)
    learning_rate: float = 3e-3        # AdamW learning rate
    warmup_steps: int = 20             # linear warm-up steps
    batch_size: int = 16               # blocks per optimizer step
    block_len: int = 128               # tokens per block
    max_grad_norm: float = 1.0         # gradient clipping
    qa: str = "reading"                # train Q/A text: after its supporting passages | closed | none
    checkpoint_every: int = 100        # steps between checkpoints (and always at the end)
    device: str = "cpu"

    def validate(self) -> None:
        if self.max_steps < 0:
            raise ConfigError(f"pretrain max_steps must be >= 0, got {self.max_steps}")
        if self.batch_size < 1 or self.block_len < 8:
            raise ConfigError("pretrain batch_size must be >= 1 and block_len >= 8")
        if self.learning_rate <= 0:
            raise ConfigError(f"pretrain learning_rate must be > 0, got {self.learning_rate}")
        if self.qa not in ("reading", "closed", "none"):
            raise ConfigError(f"pretrain qa must be 'reading', 'closed' or 'none', got {self.qa!r}")


def pretrain_texts(world: Any, prompt: str = "Question: {question}\n", qa: str = "reading") -> list[str]:
    """Passages, and the train questions with their answers in the agent's prompt and answer grammar.

    ``qa="reading"`` (default) puts each train question after its supporting passages, so the answer is read from
    the context; ``"closed"`` gives question and answer alone (closed book: the LM learns to recall the train
    answers, a shortcut that does not transfer to unseen questions); ``"none"`` leaves the questions out."""
    if qa not in ("reading", "closed", "none"):
        raise ConfigError(f"pretrain qa must be 'reading', 'closed' or 'none', got {qa!r}")
    out = [f"Doc 1(Title: {p.title}) {p.text}" for p in world.passages]
    if qa == "none":
        return out
    by_id = {p.id: p for p in world.passages}
    for ex in world.split("train"):
        qa_text = prompt.format(question=ex.question) + f"<answer> {ex.answers[0]} </answer>"
        if qa == "reading":
            docs = [by_id[i] for i in ex.supporting_ids if i in by_id]
            qa_text = "".join(f"Doc {j}(Title: {d.title}) {d.text}\n" for j, d in enumerate(docs, 1)) + qa_text
        out.append(qa_text)
    return out


def pack_blocks(tokenizer: Any, texts: list[str], block_len: int) -> np.ndarray:
    """Token ids of ``texts`` joined by EOS, cut into ``[n_blocks, block_len]`` (the tail is dropped)."""
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    ids: list[int] = []
    for t in texts:
        ids.extend(tokenizer.encode(t, add_special_tokens=False))
        ids.append(eos)
    n = len(ids) // block_len
    if n < 1:
        raise ConfigError(f"{len(ids)} tokens of pretraining text do not fill one block of {block_len}")
    return np.asarray(ids[: n * block_len], dtype=np.int64).reshape(n, block_len)


def train_pretrain(model: Any, tokenizer: Any, texts: list[str], args: PretrainArgs, *,
                   out_dir: str | Path | None = None, resume: bool = False,
                   log: Callable[[dict[str, float]], None] | None = None,
                   stop_after: int | None = None) -> list[dict[str, float]]:
    """Next-token training of ``model`` in place on ``texts``; returns the metric rows. ``stop_after`` ends the
    run after that many steps as if killed right after a checkpoint (tests)."""
    import torch

    from searchgym.train.checkpoint import load_checkpoint, save_checkpoint, set_rng_state

    args.validate()
    history: list[dict[str, float]] = []
    if args.max_steps == 0:
        return history
    blocks = pack_blocks(tokenizer, texts, args.block_len)
    dev = args.device
    model.to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, args.warmup_steps)))
    out = Path(out_dir) if out_dir is not None else None
    ckpt = out / "checkpoint" if out is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    start = 0
    if resume and ckpt is not None and ckpt.exists():
        from transformers import AutoModelForCausalLM

        c = load_checkpoint(ckpt, device=dev)
        model.load_state_dict(AutoModelForCausalLM.from_pretrained(c["model_dir"]).state_dict())
        opt.load_state_dict(c["optimizer"])
        sched.load_state_dict(c["extra"]["scheduler"])
        set_rng_state(c["rng"])
        start, history = int(c["state"]["step"]), list(c["state"]["history"])
    sync_metrics(out, history, resumed=start > 0)

    n = len(blocks)

    def batch(step: int) -> np.ndarray:
        rows = []
        for k in range(step * args.batch_size, (step + 1) * args.batch_size):
            epoch, pos = divmod(k, n)
            rows.append(int(np.random.default_rng([args.seed, epoch, 5]).permutation(n)[pos]))
        return blocks[rows]

    t0 = time.time()
    for step in range(start, args.max_steps):
        if stop_after is not None and step >= stop_after:
            break
        x = torch.as_tensor(batch(step), device=dev)
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=x, labels=x, use_cache=False).loss
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm).item()
        opt.step()
        sched.step()
        row = {"step": step + 1, "losses/lm": float(loss.item()), "charts/grad_norm": gnorm,
               "charts/learning_rate": opt.param_groups[0]["lr"], "charts/time": time.time() - t0}
        history.append(row)
        append_metrics(out, row)
        if log is not None:
            log(row)
        if ckpt is not None and ((args.checkpoint_every and (step + 1) % args.checkpoint_every == 0)
                                 or step + 1 == args.max_steps):
            save_checkpoint(ckpt, model=model, tokenizer=tokenizer, optimizer=opt,
                            state={"step": step + 1, "history": history, "args": asdict(args), "kind": "pretrain"},
                            extra={"scheduler": sched.state_dict()})
    if out is not None and len(history) == args.max_steps:
        from searchgym.train.checkpoint import atomic_write_text

        atomic_write_text(out / "pretrain_done.json", json.dumps({"steps": args.max_steps}))
    model.eval()
    return history
