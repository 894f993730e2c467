"""Diversity metrics on sets whose answer is known by construction."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from searchgym.diversity import (
    bootstrap_ci,
    effective_number,
    entropy,
    fit_entropy_law,
    js_divergence,
    mean_pass_at_k,
    pass_at_k,
    pass_hat_k,
    vendi_score,
)
from searchgym.diversity import metrics as M


def test_identical_queries_have_zero_entropy_and_one_effective_template():
    items = ["who directed <E>"] * 50
    assert entropy(items) == 0.0
    assert effective_number(items) == 1.0
    assert M.inverse_simpson(items) == 1.0
    assert M.top_k_mass(items, 1) == 1.0
    assert M.miller_madow_entropy(items) == 0.0
    st = M.template_stats(items)
    assert st["n_templates"] == 1 and st["entropy"] == 0.0 and math.isnan(st["rank_beta"])


@pytest.mark.parametrize("m", [2, 3, 7, 16])
def test_m_equiprobable_templates_give_log_m(m):
    items = [f"template {i % m}" for i in range(m * 13)]
    random.Random(0).shuffle(items)
    assert entropy(items) == pytest.approx(math.log(m))
    assert effective_number(items) == pytest.approx(m)
    assert M.inverse_simpson(items) == pytest.approx(m)
    assert M.top_k_mass(items, 1) == pytest.approx(1 / m)
    assert M.top_k_mass(items, 5) == pytest.approx(min(5, m) / m)
    # Miller-Madow adds (K-1)/(2N)
    assert M.miller_madow_entropy(items) == pytest.approx(math.log(m) + (m - 1) / (2 * m * 13))
    # equal frequencies: no rank-frequency decay
    assert M.rank_frequency_beta(items) == pytest.approx(0.0, abs=1e-9)


def test_counts_mapping_and_label_sequence_agree():
    c = Counter({"a": 5, "b": 3, "c": 2})
    labels = ["a"] * 5 + ["b"] * 3 + ["c"] * 2
    assert entropy(c) == pytest.approx(entropy(labels))
    p = np.array([0.5, 0.3, 0.2])
    assert entropy(c) == pytest.approx(-(p * np.log(p)).sum())
    assert M.mass_coverage(c, 0.5) == 1 and M.mass_coverage(c, 0.8) == 2


def test_rank_frequency_beta_recovers_geometric_decay():
    beta = 0.7
    counts = {f"t{r}": 1e6 * math.exp(-beta * r) for r in range(1, 9)}
    assert M.rank_frequency_beta(counts) == pytest.approx(beta, rel=1e-6)


def test_js_divergence_bounds():
    a = Counter({"x": 3, "y": 1})
    assert js_divergence(a, a) == 0.0
    assert js_divergence(Counter({"x": 1}), Counter({"y": 4})) == pytest.approx(math.log(2))
    mid = js_divergence(Counter({"x": 1, "y": 1}), Counter({"x": 1}))
    assert 0 < mid < math.log(2)
    assert js_divergence(a, Counter({"x": 1})) == pytest.approx(js_divergence(Counter({"x": 1}), a))
    assert M.novelty(Counter({"x": 1, "z": 3}), a) == pytest.approx(0.75)


def test_text_metrics():
    same = ["who directed the film"] * 10
    varied = ["who directed the film", "capital of peru", "oren vale birthplace", "harbour towns list"]
    assert M.distinct_n(same, 1) == pytest.approx(4 / 40)
    assert M.distinct_n(varied, 1) == 1.0
    assert M.distinct_n(["a"], 2) != M.distinct_n(["a"], 2)  # NaN: no bigrams
    assert M.self_bleu(same) == pytest.approx(1.0)
    assert M.self_bleu(varied) < 0.2
    assert M.compression_ratio(same) > M.compression_ratio(varied)


def test_self_bleu_leaves_the_hypothesis_out():
    # two distinct texts: each is scored only against the other one, never against itself
    assert M.self_bleu(["alpha beta gamma delta", "epsilon zeta eta theta"]) == 0.0


def test_embedding_metrics():
    ident = np.tile([[0.6, 0.8, 0.0]], (5, 1))
    assert vendi_score(ident) == pytest.approx(1.0)
    assert M.mean_pairwise_distance(ident) == pytest.approx(0.0, abs=1e-12)
    assert M.chamfer_distance(ident) == pytest.approx(0.0, abs=1e-12)
    ortho = np.eye(4)
    assert vendi_score(ortho) == pytest.approx(4.0)
    assert M.mean_pairwise_distance(ortho) == pytest.approx(1.0)
    assert M.chamfer_distance(ortho) == pytest.approx(1.0)
    # two clusters of identical items -> Vendi 2; kernel form agrees with embedding form
    two = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float)
    assert vendi_score(two) == pytest.approx(2.0)
    assert vendi_score(kernel=two @ two.T) == pytest.approx(2.0)
    # n > dim path (Gram matrix) equals the n x n path
    rng = np.random.default_rng(0)
    e = rng.normal(size=(40, 3))
    en = e / np.linalg.norm(e, axis=1, keepdims=True)
    assert vendi_score(e) == pytest.approx(vendi_score(kernel=en @ en.T))


def test_pass_at_k_matches_closed_form_on_small_cases():
    for n in range(1, 11):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)
                assert pass_hat_k(n, c, k) == pytest.approx(math.comb(c, k) / math.comb(n, k), abs=1e-12)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    # the biased 1-(1-c/n)^k differs from the unbiased estimator
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5) != 1 - (1 - 1 / 4) ** 2
    assert mean_pass_at_k([(4, 1), (4, 4)], 2) == pytest.approx(0.75)
    assert M.cover_at([(4, 1), (4, 4), (4, 2)], 0.5) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_pass_at_k_is_stable_for_large_n():
    v = pass_at_k(1000, 3, 100)
    assert 0 < v < 1
    assert v == pytest.approx(1 - math.comb(997, 100) / math.comb(1000, 100), rel=1e-9)


def test_entropy_law_fit_recovers_known_coefficients():
    a, b = 0.35, 0.92
    rng = np.random.default_rng(1)
    h = np.linspace(0.05, 1.5, 40)
    r = -a * np.exp(h) + b + rng.normal(scale=0.002, size=h.size)
    fit = fit_entropy_law(h, r)
    assert fit["a"] == pytest.approx(a, abs=0.01)
    assert fit["b"] == pytest.approx(b, abs=0.01)
    assert fit["ceiling"] == pytest.approx(b - a, abs=0.015)
    assert fit["rmse"] < 0.005
    assert math.isnan(fit_entropy_law([1.0, 1.0], [0.1, 0.2])["a"])


def test_token_entropy_summary():
    vals = [[0.0] * 8 + [1.0, 2.0]]  # nested per-trajectory input
    s = M.token_entropy_summary(vals)
    assert s["token_entropy_mean"] == pytest.approx(0.3)
    assert s["token_entropy_frac_below_0.01"] == pytest.approx(0.8)
    assert s["token_entropy_frac_above_p80"] == pytest.approx(0.2)
    assert M.token_entropy_summary(None) == {}


def test_rarefy_bootstrap_and_within_across():
    items = list(range(100))
    sub = M.rarefy(items, 10, 0)
    assert len(sub) == 10 and len(set(sub)) == 10
    assert M.rarefy(items, 10, 0) == sub  # seeded
    with pytest.raises(ValueError):
        M.rarefy(items, 101)
    # rarefied entropy of 100 distinct items at n=10 is log 10
    assert M.rarefied(entropy, items, 10) == pytest.approx(math.log(10))
    ci = bootstrap_ci(lambda xs: float(np.mean(xs)), items, n_boot=300, seed=0)
    assert ci.low < 49.5 < ci.high and ci.estimate == pytest.approx(49.5)
    skewed = ["a"] * 10 + ["b"] * 5 + ["c", "d"]
    pct = bootstrap_ci(entropy, skewed, n_boot=200, seed=3)
    basic = bootstrap_ci(entropy, skewed, n_boot=200, seed=3, method="basic")
    assert basic.low == pytest.approx(2 * pct.estimate - pct.high)
    assert basic.high == pytest.approx(2 * pct.estimate - pct.low)
    with pytest.raises(ValueError):
        bootstrap_ci(entropy, skewed, method="bca")
    groups = {"q1": ["t1", "t1", "t1"], "q2": ["t2", "t3"]}
    wa = M.within_across(groups, entropy)
    assert wa["within"] == pytest.approx(math.log(2) / 2)
    assert wa["across"] == pytest.approx(entropy(["t1"] * 3 + ["t2", "t3"]))


def test_process_metrics():
    assert M.duplicate_query_rate(["Obama born", "obama born!", "michelle obama"]) == pytest.approx(1 / 3)
    assert M.new_document_yield([["a", "b"], ["b", "c"], ["a", "b"]]) == pytest.approx((1 + 0.5 + 0) / 3)
    assert M.move_entropy(["add_words", "new_hop"]) == pytest.approx(math.log(2))
