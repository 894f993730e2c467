"""Hostile input: hypothesis property tests on env.step, and check_search_env on every registered env id."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import searchgym
from searchgym.data import World
from searchgym.envs import SearchEnv
from searchgym.testing import check_search_env

# Cheap and deterministic: generation only, no example database, lists of texts per example.
FUZZ = settings(deadline=None, database=None, phases=[Phase.explicit, Phase.generate], derandomize=True,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def env():
    return SearchEnv(invalid_penalty=0.1, max_turns=2)


def _step_ok(env, action):
    if env.unwrapped.done:
        env.reset()
    obs, reward, term, trunc, info = env.step(action)
    assert obs in env.observation_space
    assert isinstance(reward, float) and math.isfinite(reward)
    assert isinstance(term, bool) and isinstance(trunc, bool)
    assert info["kind"] in ("search", "answer", "invalid")
    if info["kind"] == "invalid":
        assert reward <= 0.0 and info["error"]


@settings(FUZZ, max_examples=200)
@given(st.lists(st.text(), min_size=50, max_size=50))
def test_ten_thousand_random_texts(env, texts):
    env.reset(seed=0)
    for t in texts:
        _step_ok(env, t)


_PIECES = st.sampled_from(["<search>", "</search>", "<answer>", "</answer>", "<tool_call>", "</tool_call>",
                           "<think>", "</think>", "<information>", "{", "}", "[", "]", '"name"', '"search"',
                           '"answer"', '"arguments"', '"query"', '"query_list"', ":", ",", "q", " ", "\x00",
                           "\x1b", "\n", "é", "😀"])


@settings(FUZZ, max_examples=500)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_unbalanced_nested_and_empty_tags(env, text):
    _step_ok(env, text)


_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                        max_leaves=10)


@settings(FUZZ, max_examples=300)
@given(st.sampled_from(["search", "answer", "other", None, 3]),
       st.dictionaries(st.sampled_from(["query", "query_list", "answer", "x"]), _JSONISH, max_size=3),
       st.booleans())
def test_tool_call_json_with_wrong_types(env, name, args, as_string):
    call = {"name": name, "arguments": json.dumps(args) if as_string else args}
    _step_ok(env, f"<tool_call>{json.dumps(call)}</tool_call>")
    _step_ok(env, f"<tool_call>{json.dumps(call)[:-1]}</tool_call>")  # truncated JSON


@settings(FUZZ, max_examples=200)
@given(st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=100))
def test_nul_and_control_characters(env, junk):
    _step_ok(env, f"<search>{junk}capital{junk}</search>")
    _step_ok(env, junk)


def test_megabyte_actions(env):
    env.reset(seed=0)
    for action in ("<search>" + "a " * 500_000 + "</search>", "x" * (1 << 20), "<answer>" + "b" * (1 << 20) + "</answer>",
                   "<tool_call>" + "[" * 300_000 + "</tool_call>", "<search>" * 100_000):
        _step_ok(env, action)


@pytest.fixture(scope="module")
def small_world():
    w = World.generate_for_passages(50, seed=3)
    return w.passages, w.split("train") + w.split("dev")


def _check_id(env_id, checker, n_fuzz, **kwargs):
    env = gym.make(env_id, **kwargs)
    report = checker(env, n_fuzz=n_fuzz, seed=1, big_action=n_fuzz >= 100)
    assert report["check_env"] == "passed"
    fuzz = report["fuzz"]
    assert fuzz["steps"] == n_fuzz and fuzz["reset_needed"] == fuzz["episodes"] > 0
    assert fuzz["invalid"] > 0 and fuzz["search"] > 0
    env.close()


@pytest.mark.parametrize("env_id", searchgym.envs.ENV_IDS)
def test_check_search_env_on_every_registered_id(env_id, small_world, search_env_checker):
    if "Dense" in env_id or "Hybrid" in env_id:
        # The encoder costs ~20 ms a query on CPU: a tiny corpus and a short fuzz keep this fast;
        # the full-size check is the slow test below. One torch thread: single-query encodes do not
        # gain from two, and on a busy machine the second thread's synchronisation costs seconds.
        torch = pytest.importorskip("torch")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _check_id(env_id, search_env_checker, 40, corpus=small_world[0], dataset=small_world[1])
        finally:
            torch.set_num_threads(threads)
    else:
        _check_id(env_id, search_env_checker, 200)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", searchgym.envs.ENV_IDS[1:])
def test_check_search_env_dense_ids_on_the_default_world(env_id, search_env_checker):
    _check_id(env_id, search_env_checker, 200)


def test_check_search_env_on_variants():
    for kw in ({"reward": "f1 + 0.1*format", "prompt_template": "tool_call"}, {"observation_format": "chat"},
               {"split": "shift_family", "top_k": 1, "max_turns": 1}):
        check_search_env(gym.make("searchgym/SearchQA-v0", **kw), n_fuzz=60, big_action=False)


def test_check_search_env_catches_a_broken_env():
    class Leaky(SearchEnv):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            return obs, r, te, tr, info if info["kind"] != "invalid" else None

    with pytest.raises(AssertionError):
        check_search_env(Leaky(), n_fuzz=30, skip_check_env=True)
