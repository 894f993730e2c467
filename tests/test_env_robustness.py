"""Hostile action objects never escape step(); recorded actions and the finished-trajectory buffer are bounded."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from searchgym.envs import SearchEnv
from searchgym.envs.env import MAX_RECORDED_ACTION_CHARS
from searchgym.envs.vector import SearchVectorEnv, trajectory_nbytes

FUZZ = settings(deadline=None, database=None, phases=[Phase.explicit, Phase.generate], derandomize=True,
                suppress_health_check=list(HealthCheck))


class BadRepr:
    def __repr__(self):
        raise RuntimeError("repr exploded")

    __str__ = __repr__


class BadEq:
    def __eq__(self, other):
        raise RuntimeError("eq exploded")

    __hash__ = object.__hash__

    def __repr__(self):
        raise ValueError("no")


class BadIter(list):
    def __iter__(self):
        raise RuntimeError("iter exploded")

    def __len__(self):
        raise RuntimeError("len exploded")


class BadMapping(Mapping):
    def __getitem__(self, k):
        raise RuntimeError("getitem exploded")

    def __iter__(self):
        raise RuntimeError("iter exploded")

    def __len__(self):
        return 1


class BadStr(str):
    def strip(self, *a):
        raise RuntimeError("strip exploded")


@pytest.fixture(scope="module")
def env():
    return SearchEnv(max_turns=2)


def _step(env, action):
    if env.unwrapped.done:
        env.reset()
    info = env.step(action)[-1]
    assert info["kind"] in ("search", "answer", "invalid")
    assert isinstance(env.unwrapped.trajectory().steps[-1].action, str)
    return info


@pytest.mark.parametrize("action", [
    {"name": "search", "arguments": {"query": BadRepr()}},
    {"name": BadRepr(), "arguments": {}},
    {"name": "answer", "arguments": {"answer": BadRepr()}},
    {BadRepr(): 1},
    {"name": "search", "arguments": {"query_list": BadIter(["a"])}},
    {"name": BadEq(), "arguments": {}},
    BadMapping(),
    {"name": "search", "arguments": BadMapping()},
    BadRepr(), BadEq(), BadIter(),
    {"name": "search", "arguments": {"query": BadStr("capital")}},
])
def test_hostile_action_objects_are_invalid_not_exceptions(env, action):
    env.reset(seed=0)
    info = _step(env, action)
    assert info["kind"] in ("invalid", "search")
    if info["kind"] == "invalid":
        assert info["error"]


_MAKERS = (BadRepr, BadEq, BadIter, BadMapping, lambda: BadStr("q"), lambda: float("nan"), lambda: b"\xff",
           object, lambda: None, lambda: 1 << 200, lambda: "x")
# built inside the test (hypothesis prints sampled values, and these objects cannot be printed)
_HOSTILE = st.integers(0, len(_MAKERS) - 1).map(lambda i: _MAKERS[i]())
_TREE = st.recursive(_HOSTILE | st.text(max_size=5),
                     lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.sampled_from(["name", "arguments", "query", "query_list", "answer"]),
                                       kids, max_size=3), max_leaves=8)


@settings(FUZZ, max_examples=300)
@given(st.builds(lambda name, args: {"name": name, "arguments": args},
                 st.sampled_from(["search", "answer"]) | _HOSTILE, _TREE) | _TREE)
def test_fuzz_any_action_object_never_escapes_step(env, action):
    _step(env, action)


def test_recorded_action_is_truncated_but_still_parsed():
    env = SearchEnv(max_turns=2)
    env.reset(seed=0)
    big = "x" * (2 << 20) + "<answer> a </answer>"
    _, _, term, _, info = env.step(big)
    assert term and info["kind"] == "answer"  # the whole action was parsed
    rec = env.trajectory().steps[-1].action
    assert len(rec) < MAX_RECORDED_ACTION_CHARS + 100 and "truncated" in rec
    small = SearchEnv(max_turns=2, record_action_chars=10)
    small.reset(seed=0)
    small.step("<search> capital city </search>")
    assert small.trajectory().steps[0].action.startswith("<search> c") and "truncated" in \
        small.trajectory().steps[0].action


def test_finished_buffer_is_capped_in_bytes():
    cap = 400_000
    vec = SearchVectorEnv(4, max_finished_bytes=cap, max_turns=1)
    vec.reset(seed=0)
    action = "t" * 30_000 + "<answer> a </answer>"
    for _ in range(20):
        vec.step([action] * 4)  # every other step ends 4 episodes
    assert vec.finished_bytes <= cap and vec.dropped_trajectories > 0
    trajs = vec.pop_finished_trajectories()
    assert trajs and sum(trajectory_nbytes(t) for t in trajs) <= cap
    assert len(trajs) + vec.dropped_trajectories == 40
    assert vec.finished_bytes == 0
