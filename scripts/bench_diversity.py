"""Benchmark: the DiversityTracker's per-update overhead against the rollouts it watches.

For each batch size B, it rolls out B episodes per policy step on the embedded world
(``searchgym/SearchQA-v0`` vector env, BM25, the ``diverse`` heuristic agent), times the rollout, then
times ``DiversityTracker.update`` on the finished trajectories (template levels only: string, slot,
content, pos, plus moves, CTAR and process metrics). The issue's budget is overhead <= 5% of rollout
time. It also reports the tracker's absolute cost per 1,000 queries, which is what matters when the
rollout is an LLM generation (seconds per step) rather than a heuristic agent (milliseconds).

    python scripts/bench_diversity.py            # B = 64, 256; 8 policy steps each, best of 3 runs
    python scripts/bench_diversity.py --quick    # B = 64; 3 steps, one run

Timing on a shared machine is noisy: each configuration is run ``--repeats`` times (fresh environment and
tracker each time); a run reports the median over its policy steps, and the table shows the best (lowest)
of those medians for the rollout and for the tracker separately, and the lowest CPU-time ratio.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def rollout_step(vec, agent, obs, infos, n_episodes: int):
    """Step the vector env until ``n_episodes`` episodes have finished; return them and the new state."""
    finished = []
    while len(finished) < n_episodes:
        actions = agent.act(obs, infos)
        obs, _, _, _, infos = vec.step_lists(actions)
        finished.extend(vec.pop_finished_trajectories())
    return finished[:n_episodes], obs, infos


def bench_once(batch: int, steps: int, seed: int, levels: tuple[str, ...], mi_every: int = 1) -> dict[str, float]:
    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the environments)
    from searchgym.agents.heuristics import DiverseAgent
    from searchgym.diversity import DiversityTracker

    vec = gym.make_vec("searchgym/SearchQA-v0", num_envs=batch, vectorization_mode="vector_entry_point")
    agent = DiverseAgent(seed=seed)
    tracker = DiversityTracker(levels=levels, tensorboard=False, mi_every=mi_every)
    obs, infos = vec.reset_lists(seed=seed)
    # warm-up: caches, first BM25 calls, first tracker update
    trajs, obs, infos = rollout_step(vec, agent, obs, infos, batch)
    tracker.update(-1, trajs)
    roll, track, roll_cpu, track_cpu, nq = [], [], [], [], []
    for s in range(steps):
        vec.set_agent("diverse", s)
        t0, c0 = time.perf_counter(), time.process_time()
        trajs, obs, infos = rollout_step(vec, agent, obs, infos, batch)
        t1, c1 = time.perf_counter(), time.process_time()
        tracker.update(s, trajs)
        t2, c2 = time.perf_counter(), time.process_time()
        roll.append(t1 - t0)
        track.append(t2 - t1)
        roll_cpu.append(c1 - c0)
        track_cpu.append(c2 - c1)
        nq.append(sum(len(t.queries) for t in trajs))
    vec.close()
    rc, kc = float(np.sum(roll_cpu)), float(np.sum(track_cpu))
    return {"rollout_s": float(np.median(roll)), "tracker_s": float(np.median(track)), "queries": float(np.median(nq)),
            "cpu_ratio": kc / rc, "tracker_cpu_per_q": kc / max(1, sum(nq)), "rollout_cpu_per_q": rc / max(1, sum(nq))}


def bench(batch: int, steps: int, seed: int, levels: tuple[str, ...], repeats: int = 1,
          mi_every: int = 1) -> dict[str, float]:
    """Best of ``repeats`` runs: the lowest median rollout and tracker times, the lowest CPU ratio."""
    runs = [bench_once(batch, steps, seed, levels, mi_every) for _ in range(max(1, repeats))]
    r = min(x["rollout_s"] for x in runs)
    k = min(x["tracker_s"] for x in runs)
    q = float(np.median([x["queries"] for x in runs]))
    best_cpu = min(runs, key=lambda x: x["cpu_ratio"])
    return {"batch": batch, "levels": ",".join(levels), "steps": steps, "repeats": len(runs), "queries": q,
            "rollout_ms": 1e3 * r, "tracker_ms": 1e3 * k, "overhead_pct": 100.0 * k / r,
            "overhead_cpu_pct": 100.0 * best_cpu["cpu_ratio"],
            "tracker_cpu_us_per_q": 1e6 * min(x["tracker_cpu_per_q"] for x in runs),
            "rollout_cpu_us_per_q": 1e6 * min(x["rollout_cpu_per_q"] for x in runs),
            "ms_per_1k_queries": 1e3 * k / q * 1000 if q else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256], help="episodes per policy step")
    ap.add_argument("--steps", type=int, default=8, help="policy steps per batch size (median is reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration (best of; see above)")
    ap.add_argument("--quick", action="store_true", help="B = 64, 3 steps, one run")
    ap.add_argument("--levels", nargs="+", default=["string,slot,content,pos", "slot"],
                    help="template-level sets to time (comma-separated levels, one set per argument)")
    ap.add_argument("--llm-step-s", type=float, default=30.0,
                    help="a stated LLM rollout time per policy step (seconds) to compare the tracker against")
    ap.add_argument("--mi-every", type=int, default=1,
                    help="the tracker's mi_every: question MI on every n-th update only (default 1: every one)")
    args = ap.parse_args()
    sizes, steps, repeats = ([64], 3, 1) if args.quick else (args.batch_sizes, args.steps, args.repeats)
    level_sets = [tuple(x.split(",")) for x in args.levels]
    rows = [bench(b, steps, args.seed, lv, repeats, args.mi_every) for lv in level_sets for b in sizes]
    print("| levels | episodes/step | queries/step | heuristic rollout ms/step | tracker ms/update | overhead vs "
          "heuristic rollout (wall) | (CPU time) | tracker CPU µs/query | rollout CPU µs/query | overhead vs "
          f"{args.llm_step_s:g} s LLM step | 5% budget |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        llm = 100.0 * r["tracker_ms"] / (1e3 * args.llm_step_s)
        ok = ("met" if max(r["overhead_pct"], r["overhead_cpu_pct"]) <= 5.0 else
              "met vs an LLM rollout only" if llm <= 5 else "missed")
        print(f"| {r['levels']} | {r['batch']} | {r['queries']:.0f} | {r['rollout_ms']:.1f} | {r['tracker_ms']:.1f} | "
              f"{r['overhead_pct']:.1f}% | {r['overhead_cpu_pct']:.1f}% | {r['tracker_cpu_us_per_q']:.0f} | "
              f"{r['rollout_cpu_us_per_q']:.0f} | {llm:.3f}% | {ok} |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nbest of {repeats} run(s), each the median of {steps} policy steps after one warm-up step (CPU-time "
          "ratio and CPU µs/query: sums over a run's steps, lowest run); "
          "every row also computes (through the analysis core) strategy classes, question MI, Hill numbers, "
          "the well-formed block, moves, CTAR, distinct-n and process metrics; heuristic rollout = "
          "DiverseAgent on searchgym/SearchQA-v0 (BM25, embedded world, vector env); "
          f"{os.cpu_count()} CPUs, load average {load:.1f} during the run; tracker mi_every={args.mi_every}.")


if __name__ == "__main__":
    main()
