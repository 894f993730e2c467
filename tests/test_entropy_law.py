"""The entropy-law fit R = -a*exp(H) + b (literature.md §1.2): recovery on data drawn from the law, and the
ok=False contract on degenerate input (it never raises)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from searchgym.train.entropy_law import entropy_law, fit_entropy_law


def test_fit_recovers_a_and_b_from_noisy_law_data():
    rng = np.random.default_rng(0)
    a, b = 0.35, 1.2
    h = rng.uniform(0.2, 1.6, size=120)
    r = entropy_law(h, a, b) + rng.normal(0, 0.01, size=h.size)
    fit = fit_entropy_law(h.tolist(), r.tolist())
    assert fit["ok"] and fit["reason"] is None
    assert fit["a"] == pytest.approx(a, abs=0.02)
    assert fit["b"] == pytest.approx(b, abs=0.04)
    assert fit["ceiling"] == pytest.approx(fit["b"] - fit["a"])
    assert 0.005 < fit["rmse"] < 0.02  # the residual is the noise
    assert fit["n"] == 120 and fit["a_se"] > 0 and fit["b_se"] > 0
    assert fit["h_range"] == [pytest.approx(h.min()), pytest.approx(h.max())]


def test_fit_drops_non_finite_pairs_and_keeps_the_rest():
    h = [0.1, 0.5, None, 0.9, 1.3, float("nan"), 1.7]
    r = [entropy_law(x, 0.2, 1.0) if x is not None and not math.isnan(x) else 0.5 for x in h]
    r[5] = float("inf")
    fit = fit_entropy_law(h, r)
    assert fit["ok"] and fit["n"] == 5
    assert fit["a"] == pytest.approx(0.2, abs=1e-6) and fit["b"] == pytest.approx(1.0, abs=1e-6)
    assert fit["rmse"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("h, r, why", [
    ([], [], "fewer than 5"),
    ([0.1, 0.2, 0.3], [0.5, 0.6, 0.7], "fewer than 5"),
    ([0.5] * 10, list(np.linspace(0, 1, 10)), "constant"),
    ([float("nan")] * 6, [0.1] * 6, "fewer than 5"),
    ([0.1, 0.2, 0.3, 0.4], [0.5, 0.6], "differ in length"),
    ([1000.0, 1001.0, 1002.0, 1003.0, 1004.0], [0.1, 0.2, 0.3, 0.4, 0.5], "overflows"),
    (["x", "y", "z", "w", "v"], [0.1, 0.2, 0.3, 0.4, 0.5], "non-numeric"),
])
def test_degenerate_input_gives_ok_false_with_a_reason(h, r, why):
    fit = fit_entropy_law(h, r)
    assert fit["ok"] is False and why in fit["reason"]
    assert fit["a"] is None and fit["b"] is None and fit["ceiling"] is None and fit["rmse"] is None


def test_flat_reward_is_a_valid_fit_with_zero_slope():
    h = np.linspace(0.2, 1.5, 12)
    fit = fit_entropy_law(h, [0.4] * 12)
    assert fit["ok"]
    assert fit["a"] == pytest.approx(0.0, abs=1e-8) and fit["b"] == pytest.approx(0.4, abs=1e-8)
