"""EM of each heuristic query strategy per world split under an env preset (default: ``squeeze``).

Every cell is one ``searchgym rollout`` run, through the same code path as the CLI (``make_agent`` +
``rollout`` on ``searchgym/SearchQA-v0`` with the preset's env kwargs, 32 env slots, seed 0), so

    searchgym rollout --agent NAME --preset squeeze --split SPLIT -n N

prints the same EM as the cell (N = the cell's n). Usage:

    python scripts/strategy_table.py [--preset squeeze] [--n 500] [--splits train,test,shift_strategy]
                                     [--agents question,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from searchgym.agents.heuristics import STRATEGIES

AGENTS = (*STRATEGIES, "diverse")
SPLITS = ("train", "dev", "test", "shift_phrasing", "shift_family", "shift_type", "shift_strategy")
ENV_ID = "searchgym/SearchQA-v0"
NUM_ENVS = 32  # the CLI's default --num-envs (random strategies draw per env slot)


def cell(agent: str, split: str, n: int, preset: str, seed: int = 0) -> tuple[float, int]:
    """EM and number of episodes of ``searchgym rollout --agent agent --preset preset --split split -n n``."""
    from searchgym.agents.registry import make_agent
    from searchgym.agents.rollout import rollout, summarize
    from searchgym.envs.presets import get_preset

    trajs = rollout(make_agent(agent, seed=seed), ENV_ID, n, samples=1, split=split, seed=seed, num_envs=NUM_ENVS,
                    progress=False, env_kwargs=get_preset(preset))
    row = summarize(trajs)["all"]
    return float(row["em"]), int(row["episodes"])


def split_size(split: str) -> int:
    from searchgym.data import default_world

    return len(default_world().split(split))


def table(agents, splits, n: int | None, preset: str, seed: int = 0) -> dict[str, dict[str, tuple[float, int]]]:
    """``{agent: {split: (EM, n)}}``; ``n=None`` rolls out every question of each split once."""
    return {a: {s: cell(a, s, n if n is not None else split_size(s), preset, seed) for s in splits} for a in agents}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="squeeze")
    ap.add_argument("--n", type=int, default=None, help="questions per cell (default: the whole split)")
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write {agent: {split: [EM, n]}} here")
    args = ap.parse_args()
    agents, splits = args.agents.split(","), args.splits.split(",")
    t0 = time.perf_counter()
    res = table(agents, splits, args.n, args.preset, args.seed)
    print(f"EM per strategy x split, preset {args.preset!r} (cell: EM (n)); {time.perf_counter() - t0:.0f} s\n")
    print("| strategy | " + " | ".join(splits) + " |")
    print("|---|" + "---:|" * len(splits))
    for a in agents:
        print(f"| `{a}` | " + " | ".join(f"{res[a][s][0]:.3f} ({res[a][s][1]})" for s in splits) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({a: {s: list(v) for s, v in row.items()} for a, row in res.items()}, f, indent=2)


if __name__ == "__main__":
    main()
