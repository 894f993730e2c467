"""SearchVectorEnv: make_vec, one batch_search per step, next-step autoreset, infos, trajectories."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from searchgym.envs import SearchEnv, SearchVectorEnv
from searchgym.envs.vector import stack_infos
from searchgym.errors import ConfigError


class CountingRetriever:
    """A real retriever, with its batch_search calls counted."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, q, k=3):
        return self.batch_search([q], k)[0]

    def batch_search(self, queries, k=3):
        self.calls.append(list(queries))
        return self.inner.batch_search(queries, k)


def _actions(n, t):
    out = []
    for i in range(n):
        r = (i + t) % 4
        out.append("<search> capital of a country </search>" if r in (0, 1) else
                   "bad" if r == 2 else "<answer> something </answer>")
    return out


def test_make_vec_returns_the_batched_env():
    vec = gym.make_vec("searchgym/SearchQA-v0", num_envs=4, vectorization_mode="vector_entry_point")
    assert isinstance(vec.unwrapped, SearchVectorEnv) and vec.num_envs == 4
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    obs, infos = vec.reset(seed=0)
    assert isinstance(obs, tuple) and len(obs) == 4 and obs in vec.observation_space
    assert infos["question_id"].shape == (4,) and infos["_question_id"].all()
    vec.close()


def test_one_batch_search_per_step():
    base = SearchEnv().retriever
    counting = CountingRetriever(base)
    vec = SearchVectorEnv(8, retriever=counting, split="train")  # the world's own questions, on purpose
    vec.reset(seed=0)
    for t in range(6):
        before = len(counting.calls)
        acts = _actions(8, t)
        _, _, _, _, infos = vec.step(acts)
        n_search = int(np.sum(infos.get("kind", np.array([])) == "search"))
        assert len(counting.calls) - before == (1 if n_search else 0)
        if n_search:
            assert len(counting.calls[-1]) == n_search


def test_vector_matches_single_envs():
    n, steps = 5, 9
    vec = SearchVectorEnv(n)
    singles = [SearchEnv() for _ in range(n)]
    vobs, _ = vec.reset(seed=10)
    sobs = [e.reset(seed=10 + i)[0] for i, e in enumerate(singles)]
    assert list(vobs) == sobs
    needs_reset = [False] * n
    for t in range(steps):
        acts = _actions(n, t)
        vobs, vrew, vterm, vtrunc, vinfo = vec.step(acts)
        for i, e in enumerate(singles):
            if needs_reset[i]:  # next-step autoreset: this step resets, the action is ignored
                o, info = e.reset()
                r, te, tr = 0.0, False, False
                needs_reset[i] = False
                assert vinfo["_question_id"][i] and vinfo["question_id"][i] == info["question_id"]
            else:
                o, r, te, tr, info = e.step(acts[i])
                needs_reset[i] = te or tr
                assert vinfo["kind"][i] == info["kind"] and list(vinfo["doc_ids"][i]) == info["doc_ids"]
            assert (vobs[i], vrew[i], vterm[i], vtrunc[i]) == (o, r, te, tr)


def test_pop_finished_trajectories_and_labels():
    vec = SearchVectorEnv(4)
    vec.set_agent("heuristic", policy_step=2)
    vec.reset(seed=0)
    done = 0
    for t in range(8):
        _, _, te, tr, _ = vec.step(_actions(4, t))
        done += int(np.sum(te | tr))
    trajs = vec.pop_finished_trajectories()
    assert len(trajs) == done > 0 and vec.pop_finished_trajectories() == []
    assert all(t.agent == "heuristic" and t.policy_step == 2 for t in trajs)
    assert all(t.steps and t.steps[-1].kind in ("answer", "invalid", "search") for t in trajs)


def test_same_step_and_disabled_autoreset():
    vec = SearchVectorEnv(2, autoreset_mode="SameStep")
    vec.reset(seed=0)
    obs, _, te, _, info = vec.step(["<answer> a </answer>", "<search> b </search>"])
    assert te[0] and obs[0].startswith("Answer the given question")
    assert info["final_obs"][0] == "" and info["_final_obs"].tolist() == [True, False]
    assert info["final_info"]["kind"][0] == "answer" and info["final_info"]["_em"].tolist() == [True, False]

    vec = SearchVectorEnv(2, autoreset_mode=AutoresetMode.DISABLED)
    vec.reset(seed=0)
    vec.step(["<answer> a </answer>", "<search> b </search>"])
    with pytest.raises(gym.error.ResetNeeded):
        vec.step(["<answer> a </answer>", "<search> b </search>"])
    obs, infos = vec.reset(options={"reset_mask": np.array([True, False])})
    assert infos["_question_id"].tolist() == [True, False] and obs[1] == ""
    vec.step(["<answer> a </answer>", "<answer> b </answer>"])


def test_reset_per_env_options_and_errors():
    vec = SearchVectorEnv(3)
    qids = [ex.id for ex in vec.envs[0].examples[:1]] * 3
    _, infos = vec.reset(seed=0, options={"per_env": [{"question_id": q} for q in qids]})
    assert list(infos["question_id"]) == qids  # one question, three rollouts (GRPO groups)
    with pytest.raises(ConfigError):
        vec.step(["x"])
    with pytest.raises(ConfigError):
        vec.reset(seed=[1, 2])
    with pytest.raises(ConfigError):
        SearchVectorEnv(0)


def test_stack_infos_dtypes_do_not_depend_on_order():
    infos = stack_infos([{"a": True, "b": 1, "c": None}, None, {"a": False, "c": "x", "d": 1.5}], 3)
    assert infos["a"].dtype == np.bool_ and infos["_a"].tolist() == [True, False, True]
    assert infos["b"].dtype == np.int64 and infos["b"].tolist() == [1, 0, 0]
    assert infos["c"].dtype == object and infos["c"].tolist() == [None, None, "x"]
    assert infos["d"].dtype == np.float64 and infos["_d"].tolist() == [False, False, True]


def test_finished_queue_is_bounded():
    vec = SearchVectorEnv(4, max_finished=3)
    vec.reset(seed=0)
    for _ in range(4):
        vec.step(["<answer> a </answer>"] * 4)  # every other step ends 4 episodes (next-step autoreset)
    assert len(vec.pop_finished_trajectories()) == 3 and vec.dropped_trajectories == 8 - 3
    off = SearchVectorEnv(2, max_finished=0)
    off.reset(seed=0)
    off.step(["<answer> a </answer>"] * 2)
    assert off.pop_finished_trajectories() == []
