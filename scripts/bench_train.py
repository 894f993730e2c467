"""Benchmark the CPU training path: tiny-LM rollout throughput, one GRPO step, and training GFLOP/s.

Measures, on the embedded world with a BM25 index and a tiny Llama-style LM (trained for a few SFT steps on
diverse-agent demonstrations first, so it speaks the grammar and stops on ``</search>``/``</answer>``):

1. batched rollouts: episodes/s for 64 concurrent multi-turn episodes (target >= 50);
2. one GRPO step of 64 episodes (8 questions x 8 samples): rollout + update seconds (target <= 5 s, <= 5M params);
3. training GFLOP/s (forward+backward FLOPs counted by ``torch.utils.flop_counter``) against a plain
   ``torch.mm`` measured in the same run (the machine's practical peak);
4. ``run_episodes`` with the SFT demonstrator (diverse heuristic agent, no LM) stepping the envs one by one
   vs batched (one ``batch_search`` per turn), alternated in the same run, the retriever's cache cleared before
   each (``--search-batching`` runs only this, in seconds).

    python scripts/bench_train.py [--quick] [--threads N] [--search-batching]
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def search_batching_rows(ctx: Any, tok: Any, n: int, reps: int) -> list[str]:
    """Markdown rows: demonstrator episodes/s of run_episodes, per-env steps vs one batch_search per turn."""
    import numpy as np

    from searchgym.agents.heuristics import DiverseAgent
    from searchgym.agents.reader import Reader
    from searchgym.train.rollout import AgentPolicy, run_episodes

    n_train = len(ctx.world.split("train"))
    reader = Reader(ctx.world)
    rates: dict[bool, list[float]] = {False: [], True: []}
    calls: dict[bool, int] = {}
    inner = ctx.retriever.retriever  # the BM25 behind the context's CachedRetriever
    orig = inner.batch_search
    count = [0]

    def counted(queries: Any, k: int = 3, **kw: Any) -> Any:
        count[0] += 1
        return orig(queries, k, **kw)

    inner.batch_search = counted
    try:
        for r in range(reps):
            for batched in ((False, True) if r % 2 == 0 else (True, False)):
                envs = ctx.envs(n)
                ctx.retriever.clear()
                count[0] = 0
                pol = AgentPolicy(DiverseAgent(seed=r, think=False, reader=reader, max_searches=ctx.cfg.max_turns),
                                  tok)
                t0 = time.perf_counter()
                run_episodes(pol, envs, [None] * n, options=[{"index": (r * n + i) % n_train} for i in range(n)],
                             batch_search=batched)
                rates[batched].append(n / (time.perf_counter() - t0))
                calls[batched] = count[0]
    finally:
        inner.batch_search = orig
    per, bat = float(np.median(rates[False])), float(np.median(rates[True]))
    per_row = (f"| run_episodes, diverse demonstrator, {n} episodes, per-env steps ({calls[False]} BM25 calls "
               f"behind the cache) | {per:.0f} episodes/s | - |")
    bat_row = (f"| run_episodes, same, one batch_search per turn ({calls[True]} BM25 calls) "
               f"| {bat:.0f} episodes/s ({bat / per:.2f}x) | - |")
    return [per_row, bat_row]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and SFT steps")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1, as `searchgym squeeze` uses for the tiny LM)")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--search-batching", action="store_true",
                    help="only measure run_episodes per-env vs batched retrieval (demonstrator policy, no LM)")
    a = ap.parse_args()

    import numpy as np
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers.utils import logging as hf_logging

    from searchgym.experiments.squeeze.experiment import Context, SqueezeConfig, make_demos
    from searchgym.train.rl import RLArgs, train_rl
    from searchgym.train.rollout import LMPolicy, collate, policy_forward, run_episodes
    from searchgym.train.sft import SFTArgs, train_sft
    from searchgym.train.tiny_lm import count_parameters, create_tiny_lm, world_texts

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    if a.threads:
        torch.set_num_threads(a.threads)
    reps = 2 if a.quick else 4
    cfg = SqueezeConfig.preset(True, out="/tmp/bench_train")
    ctx = Context(cfg, print)
    import tempfile

    if a.search_batching:
        from searchgym.train.tiny_lm import train_tokenizer

        tok = train_tokenizer(world_texts(ctx.world, prompts=["Question: {question}\n"]), cfg.tiny.vocab_size)
        print(f"\nrun_episodes retrieval batching ({len(ctx.world.passages)} passages, BM25, "
              f"median of {reps * 2} alternated runs each)\n")
        print("| measurement | result | target |")
        print("|---|---|---|")
        print("\n".join(search_batching_rows(ctx, tok, 4 * a.episodes, reps * 2)))
        return
    tmp = tempfile.mkdtemp(prefix="bench_train_")
    tiny = cfg.tiny  # the --quick squeeze model (about 0.5M parameters)
    model, tok = create_tiny_lm(world_texts(ctx.world, prompts=["Question: {question}\n"]), tmp, tiny)
    n_params = count_parameters(model)
    demos, _ = make_demos(ctx, tok, 2, seed=0)
    # enough SFT that the model speaks the grammar (stops on </search> / </answer>) as a trained policy does
    train_sft(model, tok, demos, SFTArgs(learning_rate=3e-3, max_steps=60 if a.quick else 150, batch_size=16,
                                         micro_batch_size=16, warmup_steps=5, context_loss_weight=0.5))
    model.eval()

    # 1. rollouts
    n = a.episodes
    envs = ctx.envs(n)
    n_train = len(ctx.world.split("train"))
    rates, agent_toks = [], []
    for r in range(reps):
        pol = LMPolicy(model, tok, max_new_tokens=24, generator=torch.Generator().manual_seed(r))
        t0 = time.perf_counter()
        eps = run_episodes(pol, envs, [None] * n, options=[{"index": (r * n + i) % n_train} for i in range(n)],
                           max_new_tokens=24)
        rates.append(n / (time.perf_counter() - t0))
        agent_toks.append(np.mean([e.num_agent_tokens for e in eps]))
    eps_per_s = float(np.median(rates))

    # 2. one GRPO step of 64 episodes
    # skip_zero_adv=False: the update runs on all 64 episodes (the worst case)
    args = RLArgs(total_steps=reps, prompts_per_step=8, group_size=8, max_new_tokens=24, micro_batch_size=32,
                  checkpoint_every=0, skip_zero_adv=False)
    rows = train_rl(model, tok, ctx.envs(64), args)
    step_s = [r["charts/time_rollout"] + r["charts/time_update"] for r in rows]
    upd_s = [r["charts/time_update"] for r in rows]

    # 3. GFLOP/s of a training forward+backward vs a plain matmul
    batch = collate(eps[:32], tok.pad_token_id)
    model.train()

    def fwd_bwd() -> None:
        lp, ent, _ = policy_forward(model, batch)
        (-(lp * batch["mask"]).sum() - 0.01 * (ent * batch["mask"]).sum()).backward()
        model.zero_grad(set_to_none=True)

    with FlopCounterMode(display=False) as fc:
        fwd_bwd()
    flops = fc.get_total_flops()
    fwd_bwd()
    t0 = time.perf_counter()
    for _ in range(reps * 2):
        fwd_bwd()
    train_gflops = flops * reps * 2 / (time.perf_counter() - t0) / 1e9
    x = torch.randn(1024, 1024)
    y = torch.randn(1024, 1024)
    torch.mm(x, y)
    t0 = time.perf_counter()
    k = 10 * reps
    for _ in range(k):
        torch.mm(x, y)
    mm_gflops = 2 * 1024**3 * k / (time.perf_counter() - t0) / 1e9

    tokens = int(batch["attention_mask"].sum())
    search_rows = search_batching_rows(ctx, tok, 4 * n, reps)
    print(f"\nTiny LM: {n_params / 1e6:.2f}M parameters (vocab {len(tok)}, width {tiny.hidden_size}, "
          f"{tiny.num_layers} layers); torch threads {torch.get_num_threads()}\n")
    print("| measurement | result | target |")
    print("|---|---|---|")
    print(f"| batched rollouts, {n} episodes x <= {cfg.max_turns + 1} turns (mean {np.mean(agent_toks):.0f} agent "
          f"tokens/episode) | {eps_per_s:.0f} episodes/s | >= 50 |")
    print(f"| one GRPO step, 64 episodes (8 x 8): rollout + update of all 64 | {np.median(step_s):.2f} s "
          f"(update {np.median(upd_s):.2f} s) | <= 5 s |")
    print(f"| training forward+backward, {tokens} tokens | {train_gflops:.1f} GFLOP/s "
          f"({flops / 1e9:.2f} GFLOP per pass) | - |")
    print(f"| plain torch.mm 1024x1024 fp32 (same run) | {mm_gflops:.1f} GFLOP/s | reference peak |")
    print(f"| training / matmul | {100 * train_gflops / mm_gflops:.0f}% | - |")
    print("\n".join(search_rows))


if __name__ == "__main__":
    main()
