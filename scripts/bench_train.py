"""Benchmark the CPU training path. By default: one GRPO step of the squeeze preset, timed.

The step (``step``): the default squeeze preset's RL step (8 questions x 8 samples, 20 new tokens per turn, 4
minibatches, learning rate 5e-4; ``--quick`` uses the quick preset's 4 x 8) from the shipped SFT start on the
preset's world (4,000 entities, BM25, 3 searches of 2 passages), on one torch thread as each arm worker of
``searchgym squeeze`` has. Every timed step starts from the same weights and questions, so each does the same work.

``--reference DIR`` times the same step with another tree's ``searchgym`` (a subprocess with ``PYTHONPATH=DIR``)
next to this tree's (another subprocess), alternating one step each, and prints both medians and the median
step-time ratio reference / this tree. On a shared machine only the ratio of interleaved runs means much.

``--full`` prints the older table instead: rollout throughput of 64 concurrent episodes, one GRPO step of all 64
episodes, training GFLOP/s against a plain ``torch.mm``, and ``run_episodes`` with the SFT demonstrator per-env vs
one ``batch_search`` per turn (``--search-batching`` runs only that).

    python scripts/bench_train.py [--reps N] [--quick] [--threads N] [--reference DIR]
    python scripts/bench_train.py --full [--quick] [--threads N] [--search-batching]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
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


def full_table(a: argparse.Namespace) -> None:
    """The --full table: rollout throughput, a GRPO step of all 64 episodes, GFLOP/s, retrieval batching."""
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


def step_worker(quick: bool, threads: int) -> None:
    """Set the step up once, then time one GRPO step per ``step`` line on stdin (a JSON line each on stdout)."""
    import contextlib
    import io
    from dataclasses import replace

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    import searchgym.experiments.squeeze as sq
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.stages import Context
    from searchgym.train.rl import train_rl

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(threads)
    cfg = SqueezeConfig.preset(name="quick" if quick else "default", out="/tmp/bench_train")
    with contextlib.redirect_stdout(io.StringIO()):
        ctx = Context(cfg, print)
    start = Path(sq.__file__).parent / "sft_start"
    model, tok = AutoModelForCausalLM.from_pretrained(start), AutoTokenizer.from_pretrained(start)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    args = replace(cfg.rl, total_steps=1, num_minibatches=cfg.minibatches, checkpoint_every=0)
    envs = ctx.envs(args.prompts_per_step * args.group_size)
    print(json.dumps({"ready": str(Path(sq.__file__).parents[2])}), flush=True)
    for line in sys.stdin:
        if line.strip() != "step":
            break
        model.load_state_dict(weights)
        t0 = time.perf_counter()
        row = train_rl(model, tok, envs, args)[0]
        print(json.dumps({"step_s": time.perf_counter() - t0, "rollout_s": row["charts/time_rollout"],
                          "update_s": row["charts/time_update"], "reward": row["charts/reward"],
                          "tokens": row["charts/response_tokens"]}), flush=True)


class Worker:
    """A ``step_worker`` subprocess on one tree (``PYTHONPATH=tree``)."""

    def __init__(self, tree: Path, quick: bool, threads: int):
        env = dict(os.environ, PYTHONPATH=str(tree))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--threads", str(threads)]
        self.proc = subprocess.Popen(cmd + (["--quick"] if quick else []), env=env, cwd=str(tree), text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.tree = json.loads(self._line())["ready"]

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the benchmark worker exited (code {self.proc.wait()}); see its stderr above")
        return line

    def step(self) -> dict[str, float]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("step\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def step_bench(a: argparse.Namespace) -> None:
    """Time the GRPO step on this tree, and with ``--reference`` on that tree too, alternating."""
    import numpy as np

    here = Path(__file__).resolve().parents[1]
    trees = {"this tree": here}
    if a.reference:
        ref = Path(a.reference).expanduser().resolve()
        if not (ref / "searchgym" / "__init__.py").is_file():
            raise SystemExit(f"--reference {a.reference}: no searchgym package there (give a checkout's root)")
        trees = {"reference": ref, "this tree": here}
    workers = {name: Worker(tree, a.quick, a.threads) for name, tree in trees.items()}
    times: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    try:
        for w in workers.values():
            w.step()  # warm-up (first-call allocations, lazy imports)
        for r in range(a.reps):
            names = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for name in names:
                times[name].append(workers[name].step())
                print(f"rep {r + 1} {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in times[name][-1].items()),
                      flush=True)
    finally:
        for w in workers.values():
            w.close()
    preset = "quick" if a.quick else "default"
    print(f"\nOne GRPO step of the {preset} squeeze preset, shipped SFT start, {a.threads} torch thread(s), "
          f"median of {a.reps}:\n")
    print("| tree | step s | rollout s | update s |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        med = {k: float(np.median([t[k] for t in ts])) for k in ("step_s", "rollout_s", "update_s")}
        print(f"| {name} ({trees[name]}) | {med['step_s']:.2f} | {med['rollout_s']:.2f} | {med['update_s']:.2f} |")
    if a.reference:
        ratios = [r["step_s"] / n["step_s"] for r, n in zip(times["reference"], times["this tree"])]
        print(f"\nstep-time ratio reference / this tree: median {np.median(ratios):.2f} "
              f"(per rep: {', '.join(f'{x:.2f}' for x in ratios)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the quick preset (step) / fewer repetitions (--full)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1, as `searchgym squeeze` uses for the tiny LM)")
    ap.add_argument("--reps", type=int, default=3, help="timed steps per tree (after one warm-up step)")
    ap.add_argument("--reference", metavar="DIR", help="also time the step on the searchgym tree at DIR, "
                    "interleaved, and print the step-time ratio")
    ap.add_argument("--full", action="store_true", help="the older table (rollouts, GFLOP/s, retrieval batching)")
    ap.add_argument("--episodes", type=int, default=64, help="--full: concurrent episodes")
    ap.add_argument("--search-batching", action="store_true",
                    help="--full: only measure run_episodes per-env vs batched retrieval (demonstrator, no LM)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        step_worker(a.quick, a.threads)
    elif a.full or a.search_batching:
        full_table(a)
    else:
        step_bench(a)


if __name__ == "__main__":
    main()
