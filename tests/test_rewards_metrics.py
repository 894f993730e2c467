"""Answer normalisation, EM / sub-EM / F1, and reward composition."""

from __future__ import annotations

import math

import pytest

from searchgym.errors import ConfigError
from searchgym.rewards import (
    RewardContext,
    compute_score,
    em,
    f1,
    make_reward,
    normalize_answer,
    register_reward,
    sub_em,
)


@pytest.mark.parametrize(("raw", "norm"), [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  An   apple,  a day ", "apple day"),
    ("U.S.A.", "usa"),
    ("Theatre of the Absurd", "theatre of absurd"),  # "the" only as a whole word
    ("", ""),
])
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_normalisation_removes_punctuation_before_articles():
    # lower -> punctuation -> articles -> whitespace: "a-b" becomes "ab" (no article left to remove);
    # removing articles first would give "b".
    assert normalize_answer("A-b") == "ab"
    assert normalize_answer("the.") == ""


def test_em_max_over_golds_and_none():
    assert em("paris", ["London", "Paris"]) == 1
    assert em("Paris, France", ["paris"]) == 0
    assert em(None, ["paris"]) == 0
    assert em("paris", "Paris") == 1


def test_sub_em_is_gold_in_prediction():
    assert sub_em("it is the city of Paris, France", ["paris"]) == 1
    assert sub_em("Par", ["paris"]) == 0
    assert sub_em(None, ["x"]) == 0


def test_f1_token_overlap_and_special_cases():
    assert f1("the cat sat", ["cat"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1("cat", ["dog", "cat"]) == 1.0
    assert f1("yes", ["no"]) == 0.0
    assert f1("no", ["no"]) == 1.0
    assert f1("noanswer", ["noanswer thing"]) == 0.0
    assert f1("", ["x"]) == 0.0
    assert f1(None, ["x"]) == 0.0


def test_compute_score_by_name():
    assert compute_score("The Beatles", ["beatles"]) == 1.0
    assert compute_score("the beatles band", ["beatles"], "sub_em") == 1.0
    assert 0 < compute_score("the beatles band", ["beatles"], "f1") < 1
    with pytest.raises(ConfigError):
        compute_score("x", ["x"], "bleu")


def _ctx(**kw):
    base = {"prediction": "Paris", "answers": ["paris"], "num_searches": 2, "num_invalid": 0, "answered": True,
                "supporting_ids": ["p1", "p2"], "retrieved_ids": {"p1", "z"}}
    base.update(kw)
    return RewardContext(**base)


def test_reward_expression_and_defaults():
    r = make_reward("em + 0.2*format - 0.05*search_cost")
    assert r(_ctx()) == pytest.approx(1 + 0.2 - 0.1)
    assert make_reward("em - search_cost")(_ctx()) == pytest.approx(1 - 0.1)
    assert make_reward("em + search_cost")(_ctx()) == pytest.approx(1 - 0.1)  # a cost stays a cost
    assert make_reward(None)(_ctx(prediction="x")) == 0.0
    assert make_reward("retrieval_hit")(_ctx()) == pytest.approx(0.2 * 0.5)
    assert make_reward({"f1": 0.5, "format": 1.0})(_ctx(num_invalid=1)) == pytest.approx(0.5 + 0.5)
    assert make_reward(["em", "format"])(_ctx(answered=False, prediction=None)) == 0.0
    assert make_reward("em").parts(_ctx()) == {"em": 1.0}


def test_reward_callables():
    two = make_reward(lambda prediction, answers: float(len(prediction or "")))
    assert two(_ctx(prediction="abc")) == 3.0
    one = make_reward(lambda ctx: -ctx.num_searches)
    assert one(_ctx()) == -2.0
    register_reward("always_half", lambda c: 0.5, weight=2.0)
    assert make_reward("em + always_half")(_ctx(prediction="no")) == 1.0


@pytest.mark.parametrize("bad", ["em +", "nonsense", "em * 2", 42, "em ++ f1"])
def test_bad_reward_specs(bad):
    with pytest.raises(ConfigError):
        make_reward(bad)


def test_rewards_are_finite():
    for spec in ("em", "f1", "sub_em", "format", "search_cost", "retrieval_hit"):
        assert math.isfinite(make_reward(spec)(_ctx(supporting_ids=[])))
