"""The one analysis core, built by construction: question copying, question-template mutual information,
CIs that contain their estimates (property tests), warnings on crafted inputs, the well-formed block, and
the offline report reading the core's names."""

from __future__ import annotations

import json
import math
import random
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.diversity import metrics as M
from searchgym.diversity.core import analyze_episodes
from searchgym.diversity.readers import Episode, Run
from searchgym.diversity.report import analyze_runs

NAMES = ["Ravenhill", "Castamere", "Greywater", "Sablecrest", "Dunmore", "Oren Vale", "Port Elsin", "Hollow Pines",
         "Mara Quill", "Tessaly", "Brightwater", "Kubearwick", "Muzland", "Vegate", "Jawaim", "Trammisard",
         "Pemstanov", "Winddreme", "Brendjost", "Krofeand", "Ulmarra", "Zeverin", "Quorra", "Ostwind"]
RELATIONS = ["author", "director", "birthplace", "founder", "population", "capital", "spouse", "publisher",
             "release date", "headquarters", "language", "currency", "river", "mayor", "genre", "composer",
             "architect", "owner", "sequel", "coach"]


def _episodes(make_query, *, k: int = 4, n_questions: int = 24, seed: int = 0) -> list[Episode]:
    rng = random.Random(seed)
    eps = []
    for qi in range(n_questions):
        question = f"What is the {RELATIONS[qi % 20]} of {NAMES[qi]}?"
        for j in range(k):
            eps.append(Episode(queries=[make_query(qi, j, question, rng)], question=question,
                               question_id=f"q{qi}", reward=1.0, step=None))
    return eps


def test_a_run_that_copies_the_question_has_copy_rate_one():
    st_ = analyze_episodes(_episodes(lambda qi, j, q, rng: q if j % 2 else q.lower().rstrip("?")), n_boot=0)
    assert st_.question_copy_rate == pytest.approx(1.0)
    assert st_.strategy.distribution["copy-question"] == pytest.approx(1.0)
    assert any(w.code == "queries_equal_question" and w.count == 96 for w in st_.warnings)
    other = analyze_episodes(_episodes(lambda qi, j, q, rng: f"{NAMES[qi]} {RELATIONS[(qi + 3) % 20]}"), n_boot=0)
    assert other.question_copy_rate == 0.0


def test_input_agnostic_templates_have_far_lower_mutual_information_than_question_fixed_ones():
    generic = [f"{r} list wiki" for r in RELATIONS]  # 20 phrasings, drawn whatever the question is
    agnostic = analyze_episodes(_episodes(lambda qi, j, q, rng: rng.choice(generic)), n_boot=0)
    fixed = analyze_episodes(_episodes(lambda qi, j, q, rng: generic[qi % 20]), n_boot=0)
    a, f = agnostic.levels["string"], fixed.levels["string"]
    assert a.mi_k == f.mi_k == 4 and a.mi_questions == f.mi_questions == 24
    # both look varied (>= 15 effective templates pooled over all queries) ...
    assert math.exp(a.entropy_all) > 15 and math.exp(f.entropy_all) > 15
    # ... but only one depends on the question
    assert abs(a.mi_question) < 0.15
    assert f.mi_question > 1.0 and f.mi_question > 8 * max(a.mi_question, 0.05)
    # the plug-in value alone is biased up for the agnostic run: the shuffle baseline removes it
    assert a.mi_question_plugin > 1.0
    # within-question entropy tells the same story from the other side
    assert f.within_question_entropy == 0.0 and a.within_question_entropy > 1.0


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30),
       frac=st.floats(min_value=0.05, max_value=1.0), seed=st.integers(0, 10_000))
def test_rarefied_cis_contain_their_estimates(counts, frac, seed):
    total = sum(counts)
    n = max(1, round(frac * total))
    r = M.rarefied_diversity({i: c for i, c in enumerate(counts)}, n, n_boot=40, draws=10, seed=seed)
    lo, hi = r["entropy_ci"]
    assert 0.0 <= lo <= r["entropy"] <= hi <= math.log(n) + 1e-12
    for q in ("0", "1", "2"):
        lo, hi = r["hill_ci"][q]
        assert 1.0 - 1e-9 <= lo <= r["hill"][q] <= hi <= n + 1e-9, (q, lo, r["hill"][q], hi)


@settings(max_examples=100, deadline=None)
@given(reps=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=50), est=st.floats(-1e3, 1e3),
       recentre=st.booleans())
def test_contained_ci_has_low_le_estimate_le_high(reps, est, recentre):
    lo, hi = M.contained_ci(reps, est, recentre=recentre, low=-2e3, high=2e3)
    assert lo <= est <= hi


def test_the_old_rarefied_ci_failure_mode_is_gone():
    """The previous report drew bootstrap replicates with replacement around a without-replacement estimate
    and clipped only the top: on near-uniform data its CI excluded the estimate (low > high)."""
    labels = [f"t{i}" for i in range(300)] + [f"t{i}" for i in range(40)]
    r = M.rarefied_diversity(labels, 260, n_boot=200, seed=0)
    lo, hi = r["entropy_ci"]
    assert lo <= r["entropy"] <= hi <= math.log(260)


def _ep(queries, question="Who wrote the novel Ravenhill?", turns=(), step=None, qid="q", **kw):
    return Episode(queries=list(queries), question=question, question_id=qid, turns=list(turns), step=step,
                   reward=0.0, **kw)


def test_warnings_fire_on_crafted_inputs():
    long_q = " ".join(["word"] * 40)
    eps = [_ep([]), _ep([]),
           _ep(["Ravenhill author", "Ravenhill author"], turns=[0, 0]),          # repeated in one turn
           _ep(["Who wrote the novel Ravenhill?"]),                              # equals the question
           _ep([long_q]),
           _ep([f"Ravenhill loop {i}" for i in range(30)], malformed=3),        # one episode, most queries
           _ep(["novel Ravenhill"]), _ep(["Ravenhill"])]
    st_ = analyze_episodes(eps, n_boot=0, read_stats=SimpleNamespace(malformed=5, skipped_lines=2, unexecuted=7))
    codes = {w.code: w.count for w in st_.warnings}
    assert codes["episodes_without_query"] == 2
    assert codes["long_queries"] == 1
    assert codes["dominant_episodes"] == 1
    assert codes["repeated_calls_in_turn"] == 1
    assert codes["queries_equal_question"] == 1
    assert codes["malformed_calls"] == 5 and codes["skipped_lines"] == 2 and codes["unexecuted_calls"] == 7
    assert "single_point_steps" not in codes
    one_step = analyze_episodes([_ep(["Ravenhill author"], step=3), _ep(["Ravenhill"], step=3)], n_boot=0)
    assert {w.code for w in one_step.warnings} == {"single_point_steps"}
    assert "entropy_law" not in one_step.policy
    clean = analyze_episodes([_ep(["Ravenhill author"]), _ep(["novel Ravenhill"])], n_boot=0)
    assert clean.warnings == []
    # identical calls in different turns are a repeat, not a repeated call within one turn
    again = analyze_episodes([_ep(["Ravenhill author", "Ravenhill author"], turns=[0, 1])], n_boot=0)
    assert "repeated_calls_in_turn" not in {w.code for w in again.warnings}


def test_well_formed_block_excludes_malformed_and_off_task_queries():
    eps = [_ep(["Ravenhill author", "", "capital of France", "<search>x</search>", "novel Ravenhill"], qid=f"q{i}")
           for i in range(3)]
    st_ = analyze_episodes(eps, n_boot=0)
    assert st_.n_queries == 15
    assert st_.malformed_share == pytest.approx(2 / 5) and st_.off_task_share == pytest.approx(1 / 5)
    assert st_.well_formed.n_queries == 6 and st_.well_formed.share == pytest.approx(2 / 5)
    assert st_.well_formed.levels["slot"].n_templates == 2 < st_.levels["slot"].n_templates
    assert set(st_.well_formed.strategy.distribution) == set(st_.strategy.distribution)
    assert st_.well_formed.strategy.distribution["malformed"] == 0.0


def test_within_question_is_none_without_repeated_questions():
    st_ = analyze_episodes([_ep(["Ravenhill author"], qid="a"), _ep(["novel Ravenhill"], qid="b")], n_boot=0)
    lv = st_.levels["slot"]
    assert lv.within_question_entropy is None and lv.within_question_groups == 0 and lv.mi_question is None


def test_analyze_runs_takes_run_objects_with_labels_and_writes_the_contract(tmp_path):
    a = Run(name="a", path="mem:a", fmt="searchgym",
            episodes=_episodes(lambda qi, j, q, rng: f"{NAMES[qi]} {RELATIONS[(qi + j + 7) % 20]}", k=2,
                                  n_questions=10))
    b = Run(name="b", path="mem:b", fmt="verl",
            episodes=_episodes(lambda qi, j, q, rng: q, k=3, n_questions=12))
    a.label = "RL step 300 (GRPO, Qwen2.5-3B, seed 1)"
    b.read_stats = SimpleNamespace(format="verl", episodes=36, queries=36, malformed=4, skipped_lines=1)
    summary = analyze_runs([a, b], tmp_path / "rep", n_boot=30, plots=True)
    assert set(summary["runs"]) == {"RL step 300 (GRPO, Qwen2.5-3B, seed 1)", "b"}
    ra, rb = summary["runs"]["RL step 300 (GRPO, Qwen2.5-3B, seed 1)"], summary["runs"]["b"]
    for r in (ra, rb):
        for key in ("label", "format", "n_episodes", "n_queries", "n_malformed", "warnings", "question_copy_rate",
                    "strategy", "levels", "well_formed"):
            assert key in r, key
        for key in ("distribution", "entropy", "entropy_ci", "mi_question"):
            assert key in r["strategy"], key
        for lv in ("string", "slot", "content", "pos"):
            block = r["levels"][lv]
            assert set(block["hill"]) == {"0", "1", "2"}
            lo, hi = block["entropy_ci"]
            assert lo <= block["entropy"] <= hi
            assert block["n"] == 20  # the smaller run's 20 queries: compared at equal size
        assert "levels" in r["well_formed"] and "strategy" in r["well_formed"]
    assert ra["text_at_n"]["n"] == rb["text_at_n"]["n"] == 20  # distinct-n etc. at one size too
    assert rb["question_copy_rate"] == 1.0 and ra["question_copy_rate"] == 0.0
    assert rb["format"] == "verl" and rb["n_malformed"] >= 4
    assert any("could not be parsed" in w for w in rb["warnings"])
    assert any("skipped" in w for w in rb["warnings"])
    on_disk = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert on_disk == summary
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "RL step 300 (GRPO, Qwen2.5-3B, seed 1)" in md      # labels shown whole
    assert "CI method:" in md and "duplicate_query_rate" in md and "## Definitions" in md
    assert "## Warnings" in md and (tmp_path / "rep" / "strategy.png").exists()
    assert not (tmp_path / "rep" / "entropy_vs_step.png").exists()  # no steps: no trend plot


def _walk(x, path=""):
    if isinstance(x, dict):
        if "entropy_ci" in x and x.get("entropy") is not None and x["entropy_ci"][0] is not None:
            yield path, x["entropy"], x["entropy_ci"]
        for k, v in x.get("hill_ci", {}).items() if isinstance(x.get("hill_ci"), dict) else ():
            if v[0] is not None and x["hill"][k] is not None:
                yield f"{path}/hill{k}", x["hill"][k], v
        for k, v in x.items():
            yield from _walk(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _walk(v, f"{path}/{i}")


def test_every_ci_in_a_real_summary_contains_its_estimate(tmp_path):
    from pathlib import Path

    fix = Path(__file__).parent / "fixtures" / "diversity"
    summary = analyze_runs([fix / "verl_rollouts", fix / "search_r1_dump.jsonl"], tmp_path / "r", n_boot=50,
                           plots=False)
    found = list(_walk(summary["runs"]))
    assert len(found) >= 20
    for path, est, (lo, hi) in found:
        assert lo <= est <= hi, (path, lo, est, hi)
