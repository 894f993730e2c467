"""SkyRL and GEM: their own ``make`` builds the env, which steps as ``SearchEnv`` does."""

from __future__ import annotations

import pytest

from searchgym.envs import SearchEnv


@pytest.fixture(scope="module")
def ref():
    env = SearchEnv(dataset="dev")
    env.reset(options={"index": 4})
    return env.example


def test_skyrl_make_init_step_and_diversity_metrics(ref):
    skyrl_gym = pytest.importorskip("skyrl_gym")
    from searchgym.integrations.skyrl import ENV_ID, SearchgymTextEnv, register

    assert register() == ENV_ID and register() == ENV_ID  # idempotent
    metrics = []
    for queries, answer in ((["capital city", "river"], ref.answers[0]), (["capital city"], "wrong answer")):
        env = skyrl_gym.make(ENV_ID, env_config={"split": "dev", "max_turns": 3},
                             extras={"id": ref.id, "extra_info": {"index": 4}})
        assert isinstance(env, SearchgymTextEnv)
        prompt, meta = env.init([{"role": "user", "content": "row prompt"}])
        assert prompt == [{"role": "user", "content": "row prompt"}] and meta["question_id"] == ref.id
        for q in queries:
            out = env.step(f"<think>hm</think><search> {q} </search>")
            assert out["done"] is False and out["reward"] == 0.0
            assert out["observations"][0]["role"] == "user" and "<information>Doc 1(Title:" in \
                out["observations"][0]["content"]
        bad = env.step("no tags at all")
        assert bad["metadata"]["kind"] == "invalid" and "My previous action is invalid" in \
            bad["observations"][0]["content"]
        out = env.step(f"<answer> {answer} </answer>")
        assert out["done"] is True and out["observations"] == []
        metrics.append(env.get_metrics())
    assert metrics[0]["em"] == 1.0 and metrics[1]["em"] == 0.0
    agg = SearchgymTextEnv.aggregate_metrics(metrics)
    assert agg["em"] == 0.5 and agg["num_searches"] == 1.5
    div = {k: v for k, v in agg.items() if k.startswith("diversity/")}
    assert div and all(isinstance(v, float) for v in div.values())
    assert agg["diversity/string/n_templates"] == 2.0  # "capital city" twice, "river" once


def test_skyrl_row_without_a_known_id_uses_its_question_and_ground_truth():
    skyrl_gym = pytest.importorskip("skyrl_gym")
    from searchgym.integrations.skyrl import ENV_ID

    env = skyrl_gym.make(ENV_ID, env_config={"split": "dev"},
                         extras={"question": "Who made it?", "reward_spec": {"ground_truth": {"target": ["Ada"]}}})
    env.init([])
    assert env.env.example.question == "Who made it?"
    assert env.step("<answer> ada </answer>")["reward"] == 1.0
    from searchgym.errors import ConfigError

    anon = skyrl_gym.make(ENV_ID, env_config={"split": "dev"}, extras={})
    with pytest.raises(ConfigError, match="name no question"):
        anon.init([{"role": "user", "content": "What is 2+2?"}])
    assert anon.init([])[0][0]["content"]  # no prompt: the env poses its next question itself


def test_gem_make_reset_step(ref):
    gem = pytest.importorskip("gem")
    from gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper

    from searchgym.integrations.gem import ENV_ID, register

    assert register() == ENV_ID and register() == ENV_ID
    env = EpisodeTrackingWrapper(gem.make(ENV_ID, split="dev"))
    obs, info = env.reset(seed=0)
    assert info["question"] in obs
    obs, reward, terminated, truncated, info = env.step("<search> capital </search>")
    assert obs.lstrip().startswith("<information>") and reward == 0.0 and not terminated and not truncated
    raw = env.unwrapped
    raw.reset(index=4)
    assert raw.env.example.id == ref.id
    _, reward, terminated, _, info = raw.step(f"<answer> {ref.answers[0]} </answer>")
    assert terminated and reward == 1.0 and info["em"] == 1
    assert raw.spawn().env.retriever is raw.env.retriever  # a spawned env shares the index


def test_importing_an_adapter_under_an_unsupported_version_names_the_supported_ones(monkeypatch):
    pytest.importorskip("gem")
    import importlib
    import importlib.metadata as md
    import sys

    from searchgym.errors import FrameworkVersionError
    from searchgym.integrations import _common

    real = md.version
    monkeypatch.setattr(md, "version", lambda d: "0.0.4" if d == "gem-llm" else real(d))
    monkeypatch.delenv(_common.SKIP_VERSION_CHECK_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "searchgym.integrations.gem", raising=False)
    with pytest.raises(FrameworkVersionError, match=r"gem-llm 0\.0\.4 is not supported.*gem-llm>=0\.1,<0\.2"):
        importlib.import_module("searchgym.integrations.gem")
