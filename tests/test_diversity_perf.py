"""The analysis core's fast paths compute exactly what the direct computations do (same numbers, same seed)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from searchgym.diversity import metrics as M
from searchgym.diversity.core import _levels_block, label_episodes, run_stats
from searchgym.diversity.readers import Episode
from searchgym.diversity.strategy import EvidenceContext, classify
from searchgym.diversity.templates import _STOP, _cap_runs, normalize
from searchgym.diversity.tracker import DiversityTracker
from searchgym.errors import ConfigError
from searchgym.trajectory import Step, Trajectory


def _row_entropies_direct(mat: np.ndarray) -> np.ndarray:
    k = mat.shape[-1]
    same = (mat[..., :, None] == mat[..., None, :]).sum(axis=-1)
    h = -np.log(same / k).sum(axis=-1) / k
    h[h < 1e-12] = 0.0
    return h


def _mi_direct(groups, *, k_max=8, draws=5, shuffles=10, seed=0):
    """The shuffle-corrected MI drawn label by label: one rng.random + lexsort per draw, then
    ``rng.permuted`` of the labels themselves (the straightforward form of ``MI_METHOD``)."""
    use = [list(v) for v in groups.values() if len(v) >= 2]
    k = min(k_max, min(len(v) for v in use))
    use = [v for v in use if len(v) >= k]
    codes: dict = {}
    enc = [np.asarray([codes.setdefault(x, len(codes)) for x in v], dtype=np.int64) for v in use]
    rng = np.random.default_rng(seed)
    exact = all(len(v) == k for v in enc)
    lens = np.asarray([len(v) for v in enc])
    flat_all = np.concatenate(enc)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    gid = np.repeat(np.arange(len(enc)), lens)
    take = (starts[:, None] + np.arange(k)[None, :]).ravel()
    cube = np.stack([flat_all[take] if exact else flat_all[np.lexsort((rng.random(len(flat_all)), gid))][take]
                     for _ in range(1 if exact else draws)]).reshape(-1, len(enc), k)
    d, q = cube.shape[:2]
    shuffles = max(0, min(shuffles, max(2, 1_000_000 // max(1, d * q * k * k))))
    flat = cube.reshape(d, q * k)
    counts = np.bincount((flat + (np.arange(d) * len(codes))[:, None]).ravel(), minlength=d * len(codes))
    p = counts.reshape(d, len(codes)) / (q * k)
    with np.errstate(divide="ignore", invalid="ignore"):
        h_all = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=1)
    plug = (h_all - _row_entropies_direct(cube).mean(axis=1)).tolist()
    perms = rng.permuted(np.repeat(flat[:, None, :], shuffles, axis=1), axis=2).reshape(d, shuffles, q, k)
    shuf = (h_all[:, None] - _row_entropies_direct(perms).mean(axis=2)).ravel().tolist()
    return float(np.mean(plug)), float(np.mean(shuf))


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_row_entropies_equal_the_broadcast_comparison(k):
    mat = np.random.default_rng(k).integers(0, 4, size=(3, 7, 11, k))
    assert np.array_equal(M._row_entropies(mat), _row_entropies_direct(mat))


def test_mutual_information_draws_as_the_direct_computation_whatever_ran_before():
    rnd = random.Random(1)
    for trial in range(40):
        sizes = [rnd.choice([1, 2, 3, 4, 6, 9]) for _ in range(rnd.randint(2, 30))]
        if trial % 4 == 0:
            sizes = [3] * len(sizes)  # every question exactly k samples: one draw
        alphabet = "abcdefg"[:rnd.randint(1, 7)]
        a = {f"q{i}": [rnd.choice(alphabet) for _ in range(n)] for i, n in enumerate(sizes)}
        b = {g: [x.upper() + "!" for x in reversed(v)] for g, v in a.items()}  # same sizes, other labels
        if sum(1 for n in sizes if n >= 2) < 2:
            continue
        seed = trial % 3
        M._MI_PLANS.clear()
        first_a = M.mutual_information(a, seed=seed)
        after_a = M.mutual_information(b, seed=seed)  # reuses the cached plan of a's sizes
        M._MI_PLANS.clear()
        fresh_b = M.mutual_information(b, seed=seed)
        assert after_a == fresh_b
        for groups, got in ((a, first_a), (b, fresh_b)):
            plug, shuf = _mi_direct(groups, seed=seed)
            assert (got["mi_plugin"], got["mi_shuffle"], got["mi"]) == (plug, shuf, plug - shuf)


def test_rarefied_diversity_without_ci_has_the_estimates_of_the_run_with_ci():
    counts = {"a": 7, "b": 3, "c": 1, "d": 1}
    fast = M.rarefied_diversity(counts, None, n_boot=0)
    full = M.rarefied_diversity(counts, None, n_boot=50)
    assert (fast["n"], fast["entropy"], fast["hill"]) == (full["n"], full["entropy"], full["hill"])
    assert all(np.isnan(fast["entropy_ci"])) and not any(np.isnan(full["entropy_ci"]))
    sub = M.rarefied_diversity(counts, 6, n_boot=50, seed=3)  # the drawn path still draws
    assert sub["n"] == 6 and sub["entropy_ci"][0] <= sub["entropy"] <= sub["entropy_ci"][1]


def _names_direct(texts):
    """EvidenceContext's names as one capitalised run at a time (``_cap_runs``), each with the names inside
    it (``name_parts``: coordinated names, leading prefixes); acronyms count however short."""
    from searchgym.diversity.strategy import is_acronym, name_parts

    names = set()
    for text in texts:
        for _, _, span in _cap_runs(text):
            if span and (len(span) > 2 or is_acronym(span)):
                for part in name_parts(span):
                    key = normalize(part)
                    toks = key.split()
                    if toks and (not all(t in _STOP for t in toks) or is_acronym(part)):
                        names.add(key)
    return names


def test_evidence_names_are_those_of_each_capitalised_run():
    texts = ["Port Elsin was founded by Mount Quill in 1801. The Old Harrow (novel) is by Émile Zola.",
             "The Of The and The Of", "Île-de-France borders Saint Vale\x1cNorth Oakridge", "", "May 5 1990 in Rome",
             'He said "Lake Dunmore" twice: Lake Dunmore, LAKE DUNMORE.']
    ctx = EvidenceContext()
    ctx.add(texts, titles=["Ravenhill (novel)", "The", "Fort Kestrel"])
    expected = _names_direct(texts) | {"ravenhill", "fort kestrel"}
    assert ctx.names == expected
    assert ctx.starts == {n.split()[0] for n in expected}
    assert ctx.max_len == max(len(n.split()) for n in expected)


def test_classify_is_the_same_with_a_warm_cache_and_other_evidence():
    ctx = EvidenceContext()
    before = classify("Dunmore Ashford founder", "Who founded Port Elsin?", ctx)
    ctx.add(["Port Elsin was founded by Dunmore Ashford."])
    after = classify("Dunmore Ashford founder", "Who founded Port Elsin?", ctx)  # same query, evidence now names it
    assert before.strategy == "off-task" and after.strategy == "bridge"
    assert after.from_evidence > before.from_evidence == 0.0


def _episode(i: int, queries, step: int = 0) -> Episode:
    return Episode(queries=list(queries), step=step, question=f"Who founded place {i % 3}?",
                   question_id=f"q{i % 3}", reward=float(i % 2), success=None, evidence=[], titles=[],
                   doc_ids=[], token_entropy=None, turns=list(range(len(queries))), episode_id=str(i), answer=None)


def test_all_grounded_run_reuses_its_figures_for_the_well_formed_block():
    from searchgym.diversity.templates import Templater

    eps = [_episode(i, [f"place {i % 3} founder", f"founded place {i % 3} year {i % 4}"]) for i in range(12)]
    lab = label_episodes(eps, templater=Templater())
    assert all(s not in ("malformed", "off-task") for s in lab.strategy)
    st = run_stats(lab, n_boot=20, seed=1)
    strat, levels = _levels_block(lab, list(range(len(lab.texts))), list(range(len(eps))), n=None, n_boot=20,
                                  seed=1, prefix="well_formed/")
    assert repr(st.well_formed.strategy.to_dict()) == repr(strat.to_dict())  # (repr: NaN figures compare equal)
    assert repr({k: v.to_dict() for k, v in st.well_formed.levels.items()}) == repr(
        {k: v.to_dict() for k, v in levels.items()})
    st.well_formed.levels["slot"].top.clear()  # a copy, not the run's own figures
    assert st.levels["slot"].top


def _traj(i: int, step: int) -> Trajectory:
    qs = [f"place {i % 4} founder", f"who founded place {i % 4} in {1800 + i % 5}"]
    steps = [Step(action="", kind="search", query=q, queries=[q], titles=[f"Place {i % 4}"], doc_ids=[str(i)])
             for q in qs]
    return Trajectory(question=f"Who founded place {i % 4}?", question_id=f"q{i % 4}", answers=["x"], steps=steps,
                      policy_step=step, reward=float(i % 2), em=i % 2, prediction="x", episode_id=f"{step}-{i}")


def test_tracker_mi_every_computes_the_mi_on_every_nth_update_only():
    batches = [[_traj(i + 3 * s, s) for i in range(16)] for s in range(3)]
    every = DiversityTracker(levels=("slot",), tensorboard=False)
    second = DiversityTracker(levels=("slot",), tensorboard=False, mi_every=2)
    for s, b in enumerate(batches):
        m1, m2 = every.update(s, b), second.update(s, b)
        mi_keys = {k for k in m1 if k.endswith("/mi_question")}
        assert mi_keys
        if s % 2 == 0:
            assert repr(m1) == repr(m2)  # (repr: NaN figures compare equal)
        else:
            assert not mi_keys & set(m2)
            assert repr({k: v for k, v in m1.items() if k not in mi_keys}) == repr(m2)
    with pytest.raises(ConfigError):
        DiversityTracker(levels=("slot",), mi_every=0)
