"""EM of each heuristic query strategy per world split under an env preset, and the SFT demonstrations' shares.

Every cell is one ``searchgym rollout`` run, through the same code path as the CLI (``make_agent`` +
``rollout`` on ``searchgym/SearchQA-v0`` with the preset's env kwargs, 32 env slots, seed 0). On the embedded
default world (no ``--n-entities``)

    searchgym rollout --agent NAME --preset squeeze --split SPLIT -n N

prints the same EM as the cell (N = the cell's n). With ``--n-entities`` the world is
``World.generate(seed=--world-seed, n_entities=..., version=--world-version)`` (the squeeze experiment's world;
its default is n_entities 4000, version 3, preset ``squeeze2``) and the env gets its split and a BM25 index
over it. ``--demo-share`` adds the share of the SFT demonstrations per strategy: the ``diverse`` agent (its
DEFAULT_WEIGHTS) over every train question ``--demo-passes`` times, successful episodes only, as the squeeze
experiment's demo stage makes them. Usage:

    python scripts/strategy_table.py [--preset squeeze2] [--n-entities 4000] [--world-version 3]
        [--world-seed 0] [--n 500] [--splits train,test,shift_strategy] [--agents question,...]
        [--demo-share] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections import Counter
from typing import Any

from searchgym.agents.heuristics import STRATEGIES

AGENTS = (*STRATEGIES, "diverse")
SPLITS = ("train", "dev", "test", "shift_phrasing", "shift_family", "shift_type", "shift_strategy")
SPLITS_V3 = (*SPLITS, "shift_renamed", "shift_homonym")
ENV_ID = "searchgym/SearchQA-v0"
NUM_ENVS = 32  # the CLI's default --num-envs (random strategies draw per env slot)


@functools.lru_cache(maxsize=4)
def world(seed: int = 0, n_entities: int | None = None, version: int | None = None) -> Any:
    """The embedded default world (``n_entities=None``) or a generated one."""
    from searchgym.data import World, default_world
    from searchgym.data.world.world import GENERATOR_VERSION

    if n_entities is None:
        if version not in (None, GENERATOR_VERSION):
            raise SystemExit(f"--world-version {version} needs --n-entities (the embedded world is version "
                             f"{GENERATOR_VERSION})")
        return default_world(seed)
    return World.generate(seed=seed, n_entities=n_entities, version=version or GENERATOR_VERSION)


@functools.lru_cache(maxsize=4)
def _retriever(seed: int, n_entities: int, version: int | None) -> Any:
    from searchgym.retrieval import build_retriever

    return build_retriever(world(seed, n_entities, version).passages, kind="bm25")


def env_kwargs(preset: str, split: str, seed: int = 0, n_entities: int | None = None,
               version: int | None = None) -> dict[str, Any]:
    """The preset's env kwargs, plus the split's questions and a retriever when the world is a generated one."""
    from searchgym.envs.presets import get_preset

    kw = get_preset(preset)
    if n_entities is None:
        kw["world_seed"] = seed
    else:
        kw.update(dataset=list(world(seed, n_entities, version).split(split)),
                  retriever=_retriever(seed, n_entities, version))
    return kw


def cell(agent: str, split: str, n: int, preset: str, seed: int = 0, *, world_seed: int = 0,
         n_entities: int | None = None, version: int | None = None) -> tuple[float, int]:
    """EM and number of episodes of ``searchgym rollout --agent agent --preset preset --split split -n n``."""
    from searchgym.agents.registry import make_agent
    from searchgym.agents.rollout import rollout, summarize

    trajs = rollout(make_agent(agent, seed=seed), ENV_ID, n, samples=1, split=split, seed=seed, num_envs=NUM_ENVS,
                    progress=False, env_kwargs=env_kwargs(preset, split, world_seed, n_entities, version))
    row = summarize(trajs)["all"]
    return float(row["em"]), int(row["episodes"])


def split_size(split: str, world_seed: int = 0, n_entities: int | None = None, version: int | None = None) -> int:
    return len(world(world_seed, n_entities, version).split(split))


def table(agents, splits, n: int | None, preset: str, seed: int = 0, *, world_seed: int = 0,
          n_entities: int | None = None, version: int | None = None) -> dict[str, dict[str, tuple[float, int]]]:
    """``{agent: {split: (EM, n)}}``; ``n=None`` rolls out every question of each split once."""
    wk = {"world_seed": world_seed, "n_entities": n_entities, "version": version}
    return {a: {s: cell(a, s, n if n is not None else split_size(s, world_seed, n_entities, version), preset, seed,
                        **wk) for s in splits} for a in agents}


def demo_share(preset: str, passes: int = 4, seed: int = 0, *, world_seed: int = 0, n_entities: int | None = None,
               version: int | None = None, n: int | None = None) -> dict[str, Any]:
    """Share of the successful ``diverse`` demonstrations per strategy: ``passes`` passes over the train
    questions (agent seeds ``seed * 1000 + pass``, as the squeeze demo stage), Reader over the world, at most
    the preset's ``max_turns`` searches. ``n``: the first ``n`` train questions only (tests)."""
    from searchgym.agents.heuristics import DiverseAgent
    from searchgym.agents.reader import Reader
    from searchgym.agents.rollout import rollout

    w = world(world_seed, n_entities, version)
    kw = env_kwargs(preset, "train", world_seed, n_entities, version)
    if n is not None:
        kw["dataset"] = list(w.split("train"))[:n]
        kw.setdefault("retriever", _retriever(world_seed, n_entities, version) if n_entities is not None else None)
        if kw["retriever"] is None:
            kw.pop("retriever")
    total = len(kw["dataset"]) if "dataset" in kw else len(w.split("train"))
    kept: Counter[str] = Counter()
    drawn: Counter[str] = Counter()
    for p in range(passes):
        picked: dict[str, str] = {}

        class Recording(DiverseAgent):
            def _start(self, slot, obs, info):
                st = super()._start(slot, obs, info)
                picked[st.question] = st.strategy.name  # noqa: B023 - the class is used in this pass only
                return st

        agent = Recording(seed=seed * 1000 + p, think=False, reader=Reader(w), max_searches=kw["max_turns"])
        for t in rollout(agent, ENV_ID, total, split="train", seed=p, num_envs=NUM_ENVS, progress=False,
                         env_kwargs=kw):
            drawn[picked[t.question]] += 1
            if t.em > 0:
                kept[picked[t.question]] += 1
    n_kept = sum(kept.values())
    return {"demos": sum(drawn.values()), "kept": n_kept,
            "share": {s: kept[s] / max(1, n_kept) for s in sorted(drawn)},
            "drawn": {s: drawn[s] / max(1, sum(drawn.values())) for s in sorted(drawn)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="squeeze2")
    ap.add_argument("--n", type=int, default=None, help="questions per cell (default: the whole split)")
    ap.add_argument("--splits", default=None, help="default: every split of the world")
    ap.add_argument("--agents", default=",".join(STRATEGIES))
    ap.add_argument("--seed", type=int, default=0, help="agent and sampling seed")
    ap.add_argument("--world-seed", type=int, default=0)
    ap.add_argument("--n-entities", type=int, default=4000, help="0: the embedded default world (version 2)")
    ap.add_argument("--world-version", type=int, default=3)
    ap.add_argument("--demo-share", action="store_true", help="also the SFT demonstrations' share per strategy")
    ap.add_argument("--demo-passes", type=int, default=4)
    ap.add_argument("--json", default=None, help="also write {agent: {split: [EM, n]}} (and demo_share) here")
    args = ap.parse_args()
    n_ent = args.n_entities or None
    version = args.world_version if n_ent else None
    w = world(args.world_seed, n_ent, version)
    agents = args.agents.split(",")
    splits = args.splits.split(",") if args.splits else list(w.splits)
    wk = {"world_seed": args.world_seed, "n_entities": n_ent, "version": version}
    t0 = time.perf_counter()
    res = table(agents, splits, args.n, args.preset, args.seed, **wk)
    where = (f"world seed {args.world_seed}, " + (f"n_entities {n_ent}, version {version}" if n_ent else
                                                  "the embedded default world"))
    print(f"EM per strategy x split, preset {args.preset!r}, {where} (cell: EM (n)); "
          f"{time.perf_counter() - t0:.0f} s\n")
    print("| strategy | " + " | ".join(splits) + " |")
    print("|---|" + "---:|" * len(splits))
    for a in agents:
        print(f"| `{a}` | " + " | ".join(f"{res[a][s][0]:.3f} ({res[a][s][1]})" for s in splits) + " |")
    out: dict[str, Any] = {a: {s: list(v) for s, v in row.items()} for a, row in res.items()}
    if args.demo_share:
        d = demo_share(args.preset, args.demo_passes, args.seed, **wk)
        print(f"\nSFT demonstrations (diverse, {args.demo_passes} passes over train, successful only): "
              f"{d['kept']} of {d['demos']} kept\n")
        print("| strategy | share of draws | share of kept demos |")
        print("|---|---:|---:|")
        for s in sorted(d["share"], key=lambda k: -d["share"][k]):
            print(f"| `{s}` | {d['drawn'][s]:.3f} | {d['share'][s]:.3f} |")
        out["demo_share"] = d
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
