"""run_episodes steps its SearchEnvs as the vector env does (one batch_search per turn for a shared retriever),
and the episodes are the per-env path's, token for token: a real world, a real BM25 index, real SearchEnvs, a
real tokenizer and the heuristic demonstrator the SFT stage uses."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from helpers import CountingRetriever  # tests/ is on sys.path under pytest

from searchgym.envs.env import SearchEnv
from searchgym.envs.vector import batchable, step_batched

PROMPT = "Question: {question}\n"
MAX_TURNS = 3


@pytest.fixture(scope="module")
def world_bits():
    from searchgym.agents.reader import Reader
    from searchgym.data import World
    from searchgym.retrieval import build_retriever
    from searchgym.train.tiny_lm import train_tokenizer, world_texts

    world = World.generate(seed=0, n_entities=60)
    retr = build_retriever(world.passages, kind="bm25")
    tok = train_tokenizer(world_texts(world, prompts=[PROMPT]), vocab_size=600)
    return world, retr, tok, Reader(world)


def make_env(world, retr, **kw):
    return SearchEnv(dataset=world.split("train"), retriever=retr, split="train", top_k=3, max_turns=MAX_TURNS,
                     prompt_template=PROMPT, passage_chars=160, **kw)


def policy(world_bits, seed):
    from searchgym.agents.heuristics import DiverseAgent
    from searchgym.train.rollout import AgentPolicy

    _, _, tok, reader = world_bits
    return AgentPolicy(DiverseAgent(seed=seed, think=False, reader=reader, max_searches=MAX_TURNS), tok)


def _comparable(ep):
    """Everything an Episode holds except the env's random episode id."""
    d = dataclasses.asdict(ep)
    d["trajectory"].pop("episode_id")
    return d


def _run(world_bits, envs, *, batch_search, seed=5, **kw):
    from searchgym.train.rollout import run_episodes

    n = len(envs)
    return run_episodes(policy(world_bits, seed), envs, [None] * n,
                        options=[{"index": i // 2} for i in range(n)],  # pairs pose one question (as GRPO does)
                        groups=[i // 2 for i in range(n)], agent_name="diverse", batch_search=batch_search, **kw)


def test_batched_rollouts_equal_per_env_rollouts(world_bits):
    world, retr, _, _ = world_bits
    n = 24
    per_env = _run(world_bits, [make_env(world, retr) for _ in range(n)], batch_search=False)
    batched = _run(world_bits, [make_env(world, retr) for _ in range(n)], batch_search=True)
    assert [_comparable(e) for e in batched] == [_comparable(e) for e in per_env]
    # the comparison has teeth: several turns, searches, invalid/refused actions or answers, rewards both ways
    assert sum(e.trajectory.num_searches for e in per_env) >= n
    assert max(len(e.trajectory.steps) for e in per_env) >= 2
    assert {e.em for e in per_env} == {0.0, 1.0}


def test_batched_equal_with_seeds_truncated_observations_and_a_context_limit(world_bits):
    from searchgym.train.rollout import run_episodes

    world, retr, _, _ = world_bits
    n = 10
    out = []
    for b in (False, True):
        envs = [make_env(world, retr) for _ in range(n)]
        out.append(run_episodes(policy(world_bits, 11), envs, list(range(100, 100 + n)), obs_max_words=6,
                                max_context=160, max_new_tokens=8, batch_search=b))
    assert [_comparable(e) for e in out[1]] == [_comparable(e) for e in out[0]]
    assert any(e.info.get("context_overflow") for e in out[0]) and not all(
        e.info.get("context_overflow") for e in out[0])


def test_one_batch_search_per_turn(world_bits):
    world, inner, _, _ = world_bits
    n = 16
    counting = CountingRetriever(inner)
    eps = _run(world_bits, [make_env(world, counting) for _ in range(n)], batch_search=True)
    # the retriever saw, at turn t, exactly the queries of every episode's t-th action if it searched, in env order
    turns = max(len(e.trajectory.steps) for e in eps)
    expected = []
    for t in range(turns):
        qs = [q for e in eps if t < len(e.trajectory.steps) and e.trajectory.steps[t].kind == "search"
              for q in e.trajectory.steps[t].queries]
        if qs:
            expected.append(qs)
    assert len(expected) >= 2
    assert counting.queries == expected
    # the per-env path: one call per search
    counting.calls.clear()
    eps = _run(world_bits, [make_env(world, counting) for _ in range(n)], batch_search=False)
    assert len(counting.calls) == sum(e.trajectory.num_searches for e in eps) > len(expected)


def test_envs_not_sharing_a_retriever_or_wrapped_fall_back(world_bits):
    """Two retrievers: one batch call each per turn; a wrapped env (not a plain SearchEnv) steps by itself;
    the episodes still equal the per-env path's."""
    world, inner, _, _ = world_bits
    a, b, c = CountingRetriever(inner), CountingRetriever(inner), CountingRetriever(inner)

    def envs():
        return ([make_env(world, a) for _ in range(4)] + [make_env(world, b) for _ in range(4)]
                + [gym.wrappers.OrderEnforcing(make_env(world, c)) for _ in range(2)])

    ref = _run(world_bits, envs(), batch_search=False)
    for r in (a, b, c):
        r.calls.clear()
    got = _run(world_bits, envs(), batch_search=True)
    assert [_comparable(e) for e in got] == [_comparable(e) for e in ref]
    assert not batchable(envs()[-1]) and batchable(envs()[0])
    for r, lo, hi in ((a, 0, 4), (b, 4, 8)):
        turns = max(len(e.trajectory.steps) for e in got[lo:hi])
        searching = sum(1 for t in range(turns) if any(
            t < len(e.trajectory.steps) and e.trajectory.steps[t].kind == "search" for e in got[lo:hi]))
        assert len(r.calls) == searching >= 1
    # the wrapped envs searched one env at a time
    assert len(c.calls) == sum(e.trajectory.num_searches for e in got[8:])


class RefusingRetriever(CountingRetriever):
    """The real retriever behind a server that refuses some queries (a QueryError, as RemoteRetriever raises on
    a 4xx answer)."""

    def batch_search(self, queries, k=3):
        from searchgym.errors import QueryError

        self.calls.append((list(queries), k))
        if any("forbidden" in q for q in queries):
            raise QueryError("the server refused a query")
        return self.inner.batch_search(queries, k)


def test_step_batched_matches_step_and_isolates_a_bad_query(world_bits):
    """A query the retriever refuses (QueryError) fails only its own env, as SearchEnv.step does."""
    world, inner, _, _ = world_bits
    actions = ["<search> capital city </search>", "<search> forbidden words </search>", "<answer> x </answer>",
               "no tags", "<search> river </search>"]
    out = []
    for batched in (False, True):
        retr = RefusingRetriever(inner)
        envs = [make_env(world, retr) for _ in actions]
        for k, e in enumerate(envs):
            e.reset(options={"index": k})
        out.append(step_batched(envs, actions) if batched else [e.step(x) for e, x in zip(envs, actions)])
        if batched:  # the batch was refused, then each searching env retried on its own
            assert retr.queries == [["capital city", "forbidden words", "river"], ["capital city"],
                                  ["forbidden words"], ["river"]]
    assert out[1] == out[0]
    kinds = [o[4]["kind"] for o in out[1]]
    assert kinds == ["search", "invalid", "answer", "invalid", "search"]
    assert out[1][1][4]["error"] == "the server refused a query"
