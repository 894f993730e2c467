"""The regularisers act on every sampled episode (issue 21 §6): only the policy-gradient term is filtered by the
zero-advantage filter, so an entropy bonus still acts when every group ties (a collapsed policy), and the entropy
arm on a bandit converges to the closed-form optimum of ``E[r] + beta * H``: ``softmax(r / beta)``."""

from __future__ import annotations

import numpy as np
import pytest

from searchgym.experiments.squeeze.strategy_policy import Outcomes, StrategyConfig, run_strategy_experiment

STRATS = ("a", "b", "c")


def _bandit(em_row, n_questions=1):
    em = np.tile(np.asarray(em_row, dtype=np.float64), (n_questions, 1))
    return Outcomes(STRATS, {"train": [f"question {i}" for i in range(n_questions)]}, {"train": em})


def _cfg(**kw) -> StrategyConfig:
    base = {"splits": ("train",), "seeds": 1, "arms": ("grpo", "grpo_ent"), "demo_weights": {"a": 0.8, "b": 0.1,
            "c": 0.1}, "sft_steps": 100, "prompts_per_step": 4, "group_size": 8, "num_minibatches": 4}
    base.update(kw)
    return StrategyConfig(**base)


@pytest.mark.parametrize("reward", [1.0, 0.0])
def test_entropy_bonus_acts_when_every_group_ties(reward):
    """Every strategy scores the same, so every group is all-correct (or all-wrong): GRPO has no gradient and
    leaves the policy as it was; one step of the entropy arm raises the strategy entropy."""
    res = run_strategy_experiment(_cfg(steps=1, arms=("grpo", "grpo_ent", "grpo_kl")),
                                  outcomes=_bandit([reward] * 3, 4))
    start = res["start"]["strategy_entropy"]["mean"]
    assert start < 0.95 * np.log(3)  # a peaked start (demonstrator 0.8 / 0.1 / 0.1)
    assert res["arms"]["grpo"]["strategy_entropy"]["mean"] == pytest.approx(start, abs=1e-6)
    assert res["arms"]["grpo_ent"]["strategy_entropy"]["mean"] > start + 1e-3
    # at the start the policy IS the reference: KL's gradient is zero there, and it must not move the policy away
    assert res["arms"]["grpo_kl"]["strategy_entropy"]["mean"] == pytest.approx(start, abs=1e-4)


def test_entropy_arm_on_a_bandit_reaches_softmax_of_reward_over_beta():
    """Maximiser of ``E_pi[r] + beta H(pi)`` is ``softmax(r / beta)``. The mean-centred group baseline (it includes
    the sample itself) scales the expected policy gradient by ``(G - 1) / G``, so the estimator's fixed point is
    ``softmax((G-1)/G * r / beta)``; with G = 64 that is within 0.01 of the closed form."""
    r = np.array([1.0, 0.5, 0.0])
    beta = 0.5
    G = 64
    cfg = _cfg(arms=("grpo_ent",), ent_coef=beta, norm_adv_by_std=False, group_size=G, prompts_per_step=1,
               steps=600, lr=0.02, eval_every=600)
    res = run_strategy_experiment(cfg, outcomes=_bandit(r))
    got = np.array([res["arms"]["grpo_ent"]["shares"][s] for s in STRATS])
    want = np.exp(r / beta) / np.exp(r / beta).sum()
    assert np.abs(got - want).max() < 0.04, (got, want)
    # and plain GRPO (no bonus) goes to the best arm instead: the test can tell the two apart
    res0 = run_strategy_experiment(_cfg(arms=("grpo",), norm_adv_by_std=False, group_size=G, prompts_per_step=1,
                                        steps=600, lr=0.02, eval_every=600), outcomes=_bandit(r))
    assert res0["arms"]["grpo"]["shares"]["a"] > want[0] + 0.1
