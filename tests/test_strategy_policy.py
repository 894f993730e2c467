"""The strategy policy on a small generated world: SFT fits the demonstrator, GRPO narrows, seeds reproduce."""

from __future__ import annotations

import numpy as np
import pytest

from searchgym.errors import ConfigError
from searchgym.experiments.squeeze.strategy_policy import (
    ARMS,
    StrategyConfig,
    compute_outcomes,
    mean_ci,
    outcomes_for,
    run_strategy_experiment,
)

SPLITS = ("train", "test", "shift_strategy")


def small(**kw) -> StrategyConfig:
    base = {"n_entities": 150, "world_seed": 3, "splits": SPLITS, "seeds": 2, "steps": 30, "prompts_per_step": 8,
            "sft_steps": 150, "eval_every": 10}
    base.update(kw)
    return StrategyConfig(**base)


@pytest.fixture(scope="module")
def outcomes():
    return outcomes_for(small())


def test_outcomes_come_from_the_env_and_one_strategy_dominates_train(outcomes):
    em = outcomes.em["train"]
    assert em.shape == (len(outcomes.questions["train"]), len(outcomes.strategies))
    assert set(np.unique(em)) <= {0.0, 1.0}
    means = dict(zip(outcomes.strategies, em.mean(0)))
    best = max(means, key=means.__getitem__)
    assert best in ("decompose", "hops") and means[best] > means["question"] + 0.3, means
    shift = dict(zip(outcomes.strategies, outcomes.em["shift_strategy"].mean(0)))
    assert shift["entity"] > shift[best] + 0.3, shift


def test_sft_start_matches_the_demonstrator_distribution(outcomes):
    res = run_strategy_experiment(small(arms=("sft",)), outcomes=outcomes)
    demo, got = res["demo_distribution"], res["start"]["shares"]
    tv = 0.5 * sum(abs(demo[s] - got[s]) for s in demo)
    assert tv < 0.05, (demo, got)
    # and its entropy is close to the demonstrator's (a question-independent mix)
    p = np.array([v for v in demo.values() if v > 0])
    assert res["start"]["marginal_entropy"]["mean"] == pytest.approx(float(-(p * np.log(p)).sum()), abs=0.1)


def test_grpo_narrows_the_strategy_mix_below_the_sft_start(outcomes):
    res = run_strategy_experiment(small(arms=("grpo", "sft")), outcomes=outcomes)
    start, grpo = res["start"], res["arms"]["grpo"]
    assert grpo["strategy_entropy"]["mean"] < start["strategy_entropy"]["mean"] - 0.5
    assert grpo["train_success"]["mean"] > start["train_success"]["mean"] + 0.1
    assert grpo["controls"]["mean_abs_log_ratio"] > 1e-3  # several minibatch updates: the ratio moves
    hist = grpo["history"][0]
    assert hist[0]["step"] == 0 and hist[-1]["step"] == 30


def test_results_are_deterministic_per_seed(outcomes):
    cfg = small(arms=("grpo_clipcov", "grpo_count"), seeds=1, steps=10)
    a = run_strategy_experiment(cfg, outcomes=outcomes)
    b = run_strategy_experiment(cfg, outcomes=outcomes)
    c = run_strategy_experiment(small(arms=("grpo_clipcov", "grpo_count"), seeds=1, steps=10, first_seed=1),
                                outcomes=outcomes)
    for k in ("seconds", "outcome_seconds"):
        a.pop(k), b.pop(k), c.pop(k)
    assert a == b
    assert a["arms"]["grpo_count"]["history"] != c["arms"]["grpo_count"]["history"]


def test_every_arm_runs_and_reports_ci(outcomes):
    res = run_strategy_experiment(small(seeds=2, steps=4, eval_every=2), outcomes=outcomes)
    assert set(res["arms"]) == set(ARMS)
    for a in res["arms"].values():
        assert a["seeds"] == 2 and set(a["shift_success"]) == {"shift_strategy"}
        assert 0.0 <= a["train_success"]["mean"] <= 1.0 and a["strategy_entropy"]["ci"][0] <= a["strategy_entropy"]["mean"] <= a["strategy_entropy"]["ci"][1]
    assert "acted" in res["arms"]["grpo_klcov"]["controls"]
    steps = res["arms"]["grpo_klcov"]["control_steps"][0]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert any(s["selected_share"] > 0 for s in steps) == res["arms"]["grpo_klcov"]["controls"]["acted"]


def test_mean_ci():
    assert mean_ci([1.0]) == {"mean": 1.0, "ci": [1.0, 1.0], "half": 0.0}
    m = mean_ci([0.0, 1.0, 2.0])
    h = 4.303 * 1.0 / 3 ** 0.5
    assert m["mean"] == 1.0 and m["half"] == pytest.approx(h, rel=1e-3)
    assert m["ci"] == pytest.approx([1.0 - h, 1.0 + h], rel=1e-3)


@pytest.mark.parametrize("kw", [{"arms": ("nope",)}, {"group_size": 1}, {"splits": ("test",)}, {"seeds": 0},
                                {"num_minibatches": 3}, {"demo_weights": {"bogus": 1.0}}])
def test_bad_config_is_a_config_error(kw, outcomes):
    with pytest.raises(ConfigError):
        run_strategy_experiment(small(**kw), outcomes=outcomes)


def test_empty_split_is_a_config_error():
    with pytest.raises(ConfigError):
        compute_outcomes(small(splits=("train", "nope")))


@pytest.mark.slow
def test_two_worker_processes_give_the_one_process_result(outcomes):
    """The seeds (and the outcome table's splits) run in worker processes with the same figures, bit for bit."""
    from searchgym.experiments.squeeze.parallel import worker_pool

    cfg = small(arms=("grpo", "sft"), seeds=2, steps=4, eval_every=2, sft_steps=20)
    one = run_strategy_experiment(cfg, outcomes=outcomes)
    with worker_pool(2, 2) as pool:  # one pool for both, as the squeeze run shares it between its stages
        two = run_strategy_experiment(cfg, outcomes=outcomes, jobs=pool)
        split = compute_outcomes(small(), jobs=pool)
    for r in (one, two):
        r.pop("seconds"), r.pop("outcome_seconds")
    assert one == two
    assert split.questions == outcomes.questions and split.families == outcomes.families
    assert all(np.array_equal(split.em[s], outcomes.em[s]) for s in SPLITS)
