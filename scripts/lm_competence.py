"""How competent is the squeeze experiment's tiny LM after pretraining + SFT, and does it generalise?

Builds the world, trains tokenizer and tiny LM, pretrains and SFTs it exactly as ``searchgym squeeze`` does
(the stages of :mod:`searchgym.experiments.squeeze.stages`), then samples episodes on a fixed pool of **train**
questions (seen in SFT) and of unseen **test** questions, at T=1 (the gate's temperature) and a lower one. A
train figure far above the test figure means the LM memorised train answers instead of learning to search and
read. Prints one table row per evaluation; the recipe knobs are flags (defaults: the squeeze defaults).

    python scripts/lm_competence.py                          # the default recipe (~15 min on 2 cores)
    python scripts/lm_competence.py --n-entities 400 --sft-steps 500 --pretrain-qa closed
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np


def main() -> None:
    from searchgym.experiments.squeeze.config import TINY_PROMPT, SqueezeConfig

    d = SqueezeConfig()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-entities", type=int, default=d.n_entities)
    ap.add_argument("--max-turns", type=int, default=d.max_turns)
    ap.add_argument("--top-k", type=int, default=d.top_k)
    ap.add_argument("--passage-chars", type=int, default=d.passage_chars)
    ap.add_argument("--pretrain-steps", type=int, default=d.pretrain.max_steps)
    ap.add_argument("--pretrain-qa", default=d.pretrain.qa, choices=("reading", "closed", "none"))
    ap.add_argument("--sft-steps", type=int, default=d.sft.max_steps)
    ap.add_argument("--final-lr-ratio", type=float, default=d.sft.final_lr_ratio)
    ap.add_argument("--questions", type=int, default=40, help="questions per split")
    ap.add_argument("--samples", type=int, default=4, help="samples per question")
    ap.add_argument("--temperatures", default="1.0,0.5")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="keep the models here (default: a temp dir, removed)")
    a = ap.parse_args()

    import torch

    from searchgym.experiments.squeeze.stages import Context, pretrain_stage, question_pool, warm_start
    from searchgym.train.rollout import LMPolicy, run_episodes
    from searchgym.train.tiny_lm import create_tiny_lm, world_texts

    torch.set_num_threads(a.threads)
    out = Path(a.out or tempfile.mkdtemp(prefix="lm_competence_"))
    cfg = SqueezeConfig(out=str(out), n_entities=a.n_entities, max_turns=a.max_turns, top_k=a.top_k,
                        passage_chars=a.passage_chars, strategy_seeds=0)
    cfg.pretrain = replace(cfg.pretrain, max_steps=a.pretrain_steps, qa=a.pretrain_qa)
    cfg.sft = replace(cfg.sft, max_steps=a.sft_steps, final_lr_ratio=a.final_lr_ratio)
    cfg.validate()
    ctx = Context(cfg, print)
    t0 = time.time()
    model, tok = create_tiny_lm(world_texts(ctx.world, prompts=[TINY_PROMPT]), out / "base_model", cfg.tiny)
    if a.pretrain_steps:
        pretrain_stage(ctx, model, tok, out / "pretrain")
    warm_start(ctx, model, tok, out / "sft")
    model.eval()
    print(f"trained in {time.time() - t0:.0f}s")
    rows = []
    for split in ("train", "test"):
        idx = question_pool(ctx, split, a.questions)
        for temp in (float(x) for x in a.temperatures.split(",")):
            envs = ctx.envs(len(idx) * a.samples, split)
            pol = LMPolicy(model, tok, temperature=temp, max_new_tokens=cfg.rl.max_new_tokens,
                           generator=torch.Generator().manual_seed(1))
            eps = run_episodes(pol, envs, [None] * len(envs),
                               options=[{"index": idx[i // a.samples]} for i in range(len(envs))],
                               max_context=cfg.rl.max_context, max_new_tokens=cfg.rl.max_new_tokens)
            per_q = np.array([np.mean([e.em for e in eps[q * a.samples:(q + 1) * a.samples]])
                              for q in range(len(idx))])
            se = float(per_q.std(ddof=1) / np.sqrt(len(per_q))) if len(per_q) > 1 else float("nan")
            rows.append((split, temp, float(np.mean(per_q)), 1.96 * se, len(eps)))
    print(f"\nworld {a.n_entities} entities ({len(ctx.world.split('train'))} train questions), "
          f"{a.max_turns} searches x {a.top_k} passages x {a.passage_chars} chars, pretrain {a.pretrain_steps} "
          f"steps (Q/A: {a.pretrain_qa}), SFT {a.sft_steps} steps (final lr ratio {a.final_lr_ratio})")
    print("| split | T | success | 95% CI (over questions) | episodes |\n|---|---:|---:|---:|---:|")
    for split, temp, m, h, n in rows:
        print(f"| {split} | {temp} | {m:.3f} | ± {h:.3f} | {n} |")
    if a.out is None:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
