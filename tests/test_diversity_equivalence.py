"""The optimised diversity code gives exactly the outputs of the implementation it replaced.

``fixtures/diversity/golden_outputs.json`` holds inputs (queries with their question and retrieved titles,
move pairs, episodes, tracker batches taken from heuristic-agent rollouts on the embedded world, plus
hand-written edge cases: Unicode, quotes, dates, numbers, punctuation, disambiguated titles) and the
outputs that the code before the performance work (commit f276811) produced for them. Every template, move,
CTAR value and tracker metric must match exactly (floats included).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from searchgym.diversity import DiversityTracker, Templater, classify_move, ctar, episode_moves
from searchgym.diversity.moves import moves_and_ctar
from searchgym.diversity.templates import normalize

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "diversity" / "golden_outputs.json").read_text("utf-8"))
LEVELS = ("string", "slot", "content", "pos")


def _nan_to_none(x):
    return None if isinstance(x, float) and math.isnan(x) else x


def test_templates_match_the_previous_implementation():
    typed = Templater(GOLDEN["corpus_titles"], entity_types=GOLDEN["entity_types"])
    plain = Templater()
    assert len(GOLDEN["cases"]) > 100
    for case in GOLDEN["cases"]:
        kw = {"question": case["question"], "retrieved_titles": tuple(case["retrieved_titles"])}
        assert typed.templates(case["query"], LEVELS, **kw) == case["typed"], case["query"]
        assert plain.templates(case["query"], LEVELS, **kw) == case["plain"], case["query"]
        # single-level calls (and a list of titles rather than a tuple) agree with the batched call
        for lv in LEVELS:
            assert typed.template(case["query"], lv, question=case["question"],
                                  retrieved_titles=list(case["retrieved_titles"])) == case["typed"][lv]
        assert [t for t, _ in typed.slot_tokens(case["query"], **kw)] == case["typed"]["slot"].split()


def test_memoised_templates_are_stable_on_repeat():
    tp = Templater(GOLDEN["corpus_titles"], entity_types=GOLDEN["entity_types"])
    for _ in range(2):  # the second pass is served from the memo and the per-query caches
        for case in GOLDEN["cases"][:40]:
            got = tp.templates(case["query"], LEVELS, question=case["question"],
                               retrieved_titles=tuple(case["retrieved_titles"]))
            assert got == case["typed"]


def test_moves_and_ctar_match_the_previous_implementation():
    for mv in GOLDEN["moves"]:
        assert classify_move(mv["prev"], mv["query"], evidence_terms=set(mv["evidence_terms"]),
                             question=mv["question"]) == mv["move"]
        assert classify_move(mv["prev"], mv["query"]) == mv["move_plain"]
    for ep in GOLDEN["episodes"]:
        assert episode_moves(ep["queries"], ep["evidence"], question=ep["question"]) == ep["moves"]
        assert [_nan_to_none(x) for x in ctar(ep["queries"], ep["evidence"])] == ep["ctar"]
        moves, ct = moves_and_ctar(ep["queries"], ep["evidence"], question=ep["question"])
        assert moves == ep["moves"] and [_nan_to_none(x) for x in ct] == ep["ctar"]


# The tracker's names became the analysis core's field names (issue 12 §5): these three moved.
RENAMED = {"diversity/queries/n": "diversity/n_queries",
           "diversity/queries/per_episode": "diversity/process/queries_per_episode",
           "diversity/queries/duplicate_rate": "diversity/process/duplicate_query_rate"}


def test_tracker_metrics_match_the_previous_implementation():
    """The tracker now runs the one analysis core; every figure the old tracker logged keeps its value
    exactly (the core adds more figures beside them)."""
    tr = DiversityTracker(levels=LEVELS, titles=GOLDEN["corpus_titles"], entity_types=GOLDEN["entity_types"],
                          tensorboard=False)
    for i, (batch, want) in enumerate(zip(GOLDEN["batches"], GOLDEN["tracker"], strict=True)):
        got = {k: _nan_to_none(v) for k, v in tr.update(i, batch).items()}
        for k, v in want.items():
            k2 = RENAMED.get(k, k)
            assert k2 in got, (i, k2)
            assert got[k2] == v, (i, k, got[k2], v)  # exact, not approx


def test_tracker_and_offline_core_agree_on_the_same_episodes():
    """One core: the tracker's figures are the offline statistics of the same episodes, by construction."""
    from searchgym.diversity.core import analyze_episodes, episode_from_trajectory, flat_metrics
    from searchgym.trajectory import Trajectory

    tr = DiversityTracker(levels=LEVELS, titles=GOLDEN["corpus_titles"], entity_types=GOLDEN["entity_types"],
                          tensorboard=False)
    batch = GOLDEN["batches"][0]
    online = tr.update(0, batch)
    eps = [episode_from_trajectory(Trajectory.from_dict(d)) for d in batch]
    offline = flat_metrics(analyze_episodes(eps, templater=Templater(GOLDEN["corpus_titles"],
                                                                     entity_types=GOLDEN["entity_types"]),
                                            levels=LEVELS, group_by_step=False, n_boot=0, with_series=False,
                                            rewards=[d["reward"] for d in batch]))
    assert {k: _nan_to_none(v) for k, v in offline.items()} == \
        {k: _nan_to_none(v) for k, v in online.items() if k not in ("step", "alarm/collapse")}


@pytest.mark.parametrize("text", ["Hello,  World!", "it's a_b `x`", "tab\tsep\x1cfs", "ÀB ﬁ İx", "", "a--b  "])
def test_normalize_ascii_fast_path_is_a_fixed_point(text):
    n = normalize(text)
    assert normalize(n) == n or not n.isascii()
    assert n == " ".join(n.split())


def test_tracker_and_searchgym_analyze_agree_on_one_file(tmp_path):
    """The same trajectories through the online tracker and through `searchgym analyze` (reader + report)
    give the same figures: one core, one set of names."""
    from searchgym.diversity import analyze_runs
    from searchgym.trajectory import Step, Trajectory, write_trajectories

    trajs = [Trajectory.from_dict(d) for d in GOLDEN["batches"][1]]
    for t in trajs:
        t.policy_step = None
    # a parallel search step (two queries in one turn) beside the golden episodes
    trajs.append(Trajectory(episode_id="par", question_id="qp", question="Who directed Ravenhill?", answers=["x"],
                            steps=[Step(action="a", kind="search", queries=["Ravenhill director", "Ravenhill film"],
                                        titles=["Ravenhill (film)"], doc_ids=["d1", "d2"]),
                                   Step(action="b", kind="search", query="Mara Quill", titles=["Mara Quill"],
                                        doc_ids=["d2", "d3"])]))
    path = tmp_path / "run.jsonl"
    write_trajectories(path, trajs)
    tr = DiversityTracker(levels=LEVELS, titles=GOLDEN["corpus_titles"], tensorboard=False)
    online = tr.update(0, trajs)
    summary = analyze_runs([path], tmp_path / "rep", levels=LEVELS, titles=GOLDEN["corpus_titles"], n_boot=0,
                           plots=False)
    run = next(iter(summary["runs"].values()))
    assert run["n_queries"] == online["diversity/n_queries"]
    for lv in LEVELS:
        for key in ("entropy", "effective_number", "inverse_simpson", "n_templates", "top1_mass",
                    "within_question_entropy", "first_query_within_entropy", "mi_question"):
            want = _nan_to_none(online.get(f"diversity/{lv}/{key}"))
            assert run["levels"][lv][key] == pytest.approx(want, abs=0, rel=1e-12) if want is not None \
                else run["levels"][lv][key] is None, (lv, key)
    for key in ("question_copy_rate", "grounded_share", "off_task_share"):
        assert run[key] == pytest.approx(online[f"diversity/{key}"], rel=1e-12)
    for key in ("queries_per_episode", "duplicate_query_rate", "new_document_yield", "ctar"):
        assert run["process"][key] == pytest.approx(online[f"diversity/process/{key}"], rel=1e-12), key
    assert run["strategy"]["distribution"] == pytest.approx(
        {c: online[f"diversity/strategy/share/{c}"] for c in run["strategy"]["distribution"]})
