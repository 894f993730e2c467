"""The LM's two strategy-entropy quantities under distinct names (issue 21 §6): pooled plug-in rarefied to one n
of queries, and the mean per-question plug-in entropy; on real heuristic episodes through the analysis core."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def episodes():
    from searchgym.agents.heuristics import HeuristicAgent
    from searchgym.agents.rollout import rollout
    from searchgym.data import World
    from searchgym.diversity.core import episode_from_trajectory
    from searchgym.envs.vector import SearchVectorEnv
    from searchgym.retrieval import build_retriever

    world = World.generate(seed=3, n_entities=60)
    qs = list(world.split("train"))[:12]
    retr = build_retriever(world.passages, kind="bm25")
    out = {}
    for s in ("question", "decompose"):
        vec = SearchVectorEnv(num_envs=4, dataset=qs, retriever=retr, split="train", max_turns=3)
        try:
            trajs = list(rollout(HeuristicAgent(s, seed=0), vec, len(qs), seed=0, progress=False))
        finally:
            vec.close()
        out[s] = [episode_from_trajectory(t) for t in trajs]
    return world, out


def test_rarefied_and_per_question_strategy_entropy(episodes):
    from searchgym.diversity import Templater
    from searchgym.experiments.squeeze.stages import strategy_entropies

    world, eps = episodes
    tpl = Templater(world.titles)
    mixed = eps["question"] + eps["decompose"]
    groups = list(range(len(eps["question"]))) * 2  # question i's two samples: one per strategy
    a = strategy_entropies(mixed, groups, tpl, seed=0, n=8)
    b = strategy_entropies(mixed, groups, tpl, seed=0, n=8)
    assert a == b and a["rarefy_n"] == 8  # deterministic for a seed
    assert 0 < a["strategy_entropy_rarefied"] and 0 <= a["strategy_entropy_per_question"]
    # one strategy alone: copying the question is one class -> both quantities 0
    only = strategy_entropies(eps["question"], list(range(len(eps["question"]))), tpl, seed=0, n=8)
    assert only["strategy_entropy_rarefied"] == pytest.approx(0.0)
    assert only["strategy_entropy_per_question"] == pytest.approx(0.0)
    # fewer queries than n: no rarefied figure (never a figure at another n)
    assert strategy_entropies(mixed[:2], [0, 0], tpl, seed=0, n=1000)["strategy_entropy_rarefied"] is None
