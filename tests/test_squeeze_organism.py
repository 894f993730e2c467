"""The organism on a mixed train split (issue 21 §2): a minority family that only a non-majority strategy solves,
the arms incl. rejection-sampling SFT, a positive control and Critique-GRPO, per-family figures with CIs."""

from __future__ import annotations

import numpy as np
import pytest

from searchgym.errors import ConfigError
from searchgym.experiments.squeeze.organism import (
    MINORITY,
    ContextualConfig,
    measure,
    mixed_outcomes,
    run_contextual,
)
from searchgym.experiments.squeeze.stats import wilson
from searchgym.experiments.squeeze.strategy_policy import StrategyConfig, outcomes_for

BASE = {"n_entities": 300, "world_seed": 3, "prompts_per_step": 8, "sft_steps": 100}


@pytest.fixture(scope="module")
def outcomes():
    return outcomes_for(StrategyConfig(splits=("train", "test", "shift_strategy"), **{
        k: v for k, v in BASE.items() if k in ("n_entities", "world_seed")}))


@pytest.fixture(scope="module")
def result(outcomes):
    cfg = ContextualConfig(seeds=3, steps=40, base=BASE,
                           arms=("sft", "rs_sft", "grpo", "grpo_ent", "grpo_critique", "grpo_majority"))
    return run_contextual(cfg, outcomes=outcomes)


def test_mixed_split_has_a_minority_only_another_strategy_solves(outcomes):
    mixed, info = mixed_outcomes(outcomes, 0.08)
    assert 0.05 <= info["minority_share"] <= 0.15
    fam = np.array(mixed.families["train"])
    em = mixed.em["train"]
    best_major = em[fam != MINORITY].mean(0).argmax()
    best_minor = em[fam == MINORITY].mean(0).argmax()
    assert best_major != best_minor  # the reward-optimal policy is a question-dependent mix
    assert em[fam == MINORITY].mean(0)[best_major] < 0.2
    # held-out nicknames are unseen in train (split by nickname), and the split is deterministic
    assert not set(mixed.questions["minority_heldout"]) & set(mixed.questions["train"])
    again, _ = mixed_outcomes(outcomes, 0.08)
    assert again.questions == mixed.questions
    with pytest.raises(ConfigError):
        mixed_outcomes(outcomes, 0.45)


def test_positive_control_fires_and_every_figure_has_a_ci(result):
    st, arms = result["start"], result["arms"]
    # the instrument fires: a reward that pays only the majority strategy collapses the policy
    assert result["findings"]["positive_control_fired"]
    assert arms["grpo_majority"]["softmax_entropy"]["ci"][1] < st["softmax_entropy"]["ci"][0]
    for b in [st, *arms.values()]:
        for key in ("softmax_entropy", "pooled_entropy", "mi_family_strategy", "minority_heldout_success",
                    "train_success"):
            lo, hi = b[key]["ci"]
            assert lo <= b[key]["mean"] <= hi, key
        assert set(b["per_family"]) >= {MINORITY}
        assert len(b["per_family"][MINORITY]["softmax_entropy"]["ci"]) == 2
        r = b["routing_share"]
        assert r["n"] == 3 and 0 <= r["ci"][0] <= r["mean"] <= r["ci"][1] <= 1
    for arm in arms.values():
        assert arm["kl_to_start"]["mean"] >= 0  # every control is reported with its KL to the start


def test_unknown_arm_is_a_config_error():
    from searchgym.experiments.squeeze.config import SqueezeConfig

    with pytest.raises(ConfigError):
        ContextualConfig(arms=("grpo", "nope")).check()
    with pytest.raises(ConfigError):
        SqueezeConfig(contextual_arms=("grpo", "nope")).validate()
    quick = SqueezeConfig.preset(True)  # make demo: a 5-arm mixed-split stage, positive control included
    assert "grpo_majority" in quick.contextual_arms and quick.contextual_seeds >= 10


def test_measure_mutual_information_is_exact():
    # two families, each routed to its own strategy with certainty: MI = H(family) = log 2
    p = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    m = measure(p, np.ones_like(p), ["a", "a", "b", "b"], pooled_n=64, seed=0)
    assert m["mi_family_strategy"] == pytest.approx(np.log(2))
    assert m["softmax_entropy"] == 0.0
    same = measure(np.full((4, 2), 0.5), np.ones((4, 2)), ["a", "a", "b", "b"], pooled_n=64, seed=0)
    assert same["mi_family_strategy"] == pytest.approx(0.0, abs=1e-12)


def test_wilson_interval():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert wilson(0, 20)[0] == 0.0 and wilson(20, 20)[1] == 1.0


@pytest.mark.slow
def test_two_worker_processes_give_the_one_process_result(outcomes):
    """As the strategy policy's (tests/test_strategy_policy.py, fast): the organism's seeds in 2 workers."""
    cfg = ContextualConfig(seeds=2, steps=3, base=BASE, arms=("rs_sft", "grpo_critique"))
    one, two = run_contextual(cfg, outcomes=outcomes), run_contextual(cfg, outcomes=outcomes, jobs=2)
    one.pop("seconds"), two.pop("seconds")
    assert one == two
