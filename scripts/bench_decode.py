"""Where a tiny LM's one-token decode step spends its time, by context length: attention against the rest.

The squeeze's GRPO rollout is mostly one-token decode steps of up to 64 rows (8 questions x 8 samples) with a KV
cache of a few hundred positions. This script decodes ``--rows`` prompts of each ``--lens`` length with
:func:`searchgym.agents.lm.generate` (the project's sampler, no stop strings, so every row decodes every step)
from the shipped SFT start on one torch thread, and splits a decode step into the time inside
``scaled_dot_product_attention`` and everything else (the linear layers, sampling, the Hugging Face module
stack). Beside it: the bytes of keys and values that attention reads per step (rows x heads x length x head
dim x 4 bytes x 2 x layers) and the rate that implies. A step whose attention time grows with the length at a
steady GB/s is bound by memory traffic, not by per-call overhead.

    python scripts/bench_decode.py [--rows 64] [--lens 100,200,400,800] [--steps 16] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import Self


class _AttentionTimer:
    """Wraps ``torch.nn.functional.scaled_dot_product_attention`` (Hugging Face's sdpa path looks it up at each
    call) and adds up the seconds spent inside it."""

    def __init__(self) -> None:
        import torch

        self.seconds = 0.0
        self._fn = torch.nn.functional.scaled_dot_product_attention

    def __enter__(self) -> Self:
        import torch

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return self._fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        torch.nn.functional.scaled_dot_product_attention = timed
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        torch.nn.functional.scaled_dot_product_attention = self._fn


def _timed_generate(model: Any, tok: Any, prompts: list[list[int]], new_tokens: int) -> tuple[float, float]:
    """``(wall seconds, seconds in attention)`` of one :func:`generate` call of ``new_tokens`` tokens per row."""
    import torch

    from searchgym.agents.lm import generate

    with _AttentionTimer() as att:
        t0 = time.perf_counter()
        generate(model, tok, prompts, max_new_tokens=new_tokens, stop_strings=(), stop_at_eos=False,
                 generator=torch.Generator().manual_seed(0))
        wall = time.perf_counter() - t0
    return wall, att.seconds


def decode_row(model: Any, tok: Any, rows: int, length: int, steps: int, reps: int) -> dict[str, float]:
    """One context length: the median over ``reps`` of (decode of ``steps`` + 1 tokens) − (prefill and 1 token),
    per decode step, for the whole step and for attention."""
    import numpy as np
    import torch

    gen = torch.Generator().manual_seed(length)
    vocab = int(model.config.vocab_size)
    prompts = [torch.randint(8, vocab, (length,), generator=gen).tolist() for _ in range(rows)]
    step_s, att_s = [], []
    for _ in range(reps):
        w1, a1 = _timed_generate(model, tok, prompts, 1)
        w2, a2 = _timed_generate(model, tok, prompts, steps + 1)
        step_s.append((w2 - w1) / steps)
        att_s.append((a2 - a1) / steps)
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    mean_len = length + 1 + steps / 2  # the cache grows by one position per step
    kv_bytes = rows * c.num_key_value_heads * mean_len * head_dim * 4 * 2 * c.num_hidden_layers
    step, att = float(np.median(step_s)), float(np.median(att_s))
    return {"length": length, "rows": rows, "step_ms": step * 1e3, "attention_ms": att * 1e3,
            "rest_ms": (step - att) * 1e3, "attention_share": att / step if step > 0 else 0.0,
            "kv_mb_per_step": kv_bytes / 1e6, "attention_gb_s": kv_bytes / att / 1e9 if att > 0 else 0.0}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model directory (default: the shipped squeeze SFT start)")
    p.add_argument("--rows", type=int, default=64, help="sequences decoded together (the squeeze step's 8 x 8)")
    p.add_argument("--lens", default="100,200,400,800", help="comma-separated prompt lengths in tokens")
    p.add_argument("--steps", type=int, default=16, help="decode steps timed per length")
    p.add_argument("--reps", type=int, default=3, help="repetitions per length (the median is printed)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (an arm worker's: 1)")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    try:
        a.lens = [int(x) for x in a.lens.split(",") if x.strip()]
    except ValueError:
        p.error(f"--lens must be comma-separated integers, got {a.lens!r}")
    if not a.lens or min(a.lens) < 1 or a.rows < 1 or a.steps < 1 or a.reps < 1:
        p.error("--lens, --rows, --steps and --reps must be positive")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch
    from transformers.utils import logging as hf_logging

    from searchgym.experiments.squeeze.start import SHIPPED_DIR
    from searchgym.train.tiny_lm import load_lm

    hf_logging.disable_progress_bar()
    torch.set_num_threads(a.threads)
    model, tok = load_lm(a.model or SHIPPED_DIR)
    model.eval()
    limit = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    if limit and max(a.lens) + a.steps + 1 > limit:
        print(f"error: --lens up to {max(a.lens)} plus {a.steps + 1} new tokens exceeds the model's "
              f"{limit} positions", file=sys.stderr)
        return 2
    rows = [decode_row(model, tok, a.rows, n, a.steps, a.reps) for n in a.lens]
    print(f"\nOne decode step of {a.rows} rows, {a.threads} torch thread(s), median of {a.reps}\n")
    print("| context (tokens) | decode step | in attention | rest | K+V read per step | attention rate |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['length']} | {r['step_ms']:.1f} ms | {r['attention_ms']:.1f} ms ({r['attention_share']:.0%}) "
              f"| {r['rest_ms']:.1f} ms | {r['kv_mb_per_step']:.0f} MB | {r['attention_gb_s']:.1f} GB/s |")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "threads": a.threads}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
