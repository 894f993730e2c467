"""Offline readers of run formats (fixtures in tests/fixtures/diversity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchgym.diversity.readers import detect_format, doc_titles, parse_question, read_run, search_spans
from searchgym.errors import ConfigError, TrajectoryFormatError
from searchgym.trajectory import Step, Trajectory, write_trajectories

FIX = Path(__file__).parent / "fixtures" / "diversity"
Q1 = "Who wrote the novel Ravenhill?"
Q2 = "Who founded Port Elsin?"
EXPECTED = {  # step -> queries of each rollout, in file order
    0: [["Ravenhill novel author"], ["who wrote Ravenhill", "Mara Quill biography"], ["Port Elsin founder"],
        ["history of Port Elsin harbour", "Oren Vale explorer"]],
    1: [["Ravenhill novel author"], ["Ravenhill author"], ["Port Elsin founder"], ["Port Elsin founded by"]],
    2: [["Ravenhill author"], ["Ravenhill author"], ["Port Elsin author"], ["Port Elsin author"]],
}


def test_verl_rollout_dir_parses_into_the_right_queries_per_step():
    run = read_run(FIX / "verl_rollouts")
    assert run.fmt == "verl" and run.name == "verl_rollouts" and run.has_steps
    by_step: dict[int, list[list[str]]] = {}
    for ep in run.episodes:
        by_step.setdefault(ep.step, []).append(ep.queries)
    assert by_step == EXPECTED
    # the instruction's own "<search> query </search>" example (in `input`) is not a query
    assert all("query" not in q for ep in run.episodes for q in ep.queries)
    assert [ep.question for ep in run.episodes[:4]] == [Q1, Q1, Q2, Q2]
    assert [ep.reward for ep in run.episodes[:4]] == [1.0, 1.0, 1.0, 0.0]
    ep = run.episodes[1]
    assert ep.titles == [["Ravenhill (novel)"], ["Mara Quill"]]
    assert "Mara Quill" in ep.evidence[0][0]


def test_search_r1_dump_skips_the_prompt_and_reads_steps():
    run = read_run(FIX / "search_r1_dump.jsonl")
    assert run.fmt == "search-r1" and run.name == "search_r1_dump"
    assert [(e.step, e.queries) for e in run.episodes] == [
        (0, EXPECTED[0][0]), (0, EXPECTED[0][1]), (10, EXPECTED[1][0]), (10, EXPECTED[1][1]),
        (20, EXPECTED[2][0]), (20, EXPECTED[2][1])]
    assert {e.question for e in run.episodes} == {Q1}


def test_generic_jsonl_with_user_named_fields():
    run = read_run(FIX / "generic_queries.jsonl", text_field="gen.queries", step_field="iter",
                   question_field="meta.question")
    assert run.fmt == "jsonl"
    assert [e.queries for e in run.episodes if e.step == 2] == EXPECTED[2]
    assert run.episodes[0].question == Q1 and run.episodes[3].reward == 0.0
    with pytest.raises(ConfigError):
        read_run(FIX / "generic_queries.jsonl", fmt="jsonl")
    with pytest.raises(TrajectoryFormatError, match="gen.missing"):
        read_run(FIX / "generic_queries.jsonl", text_field="gen.missing")


def test_searchgym_trajectories(tmp_path):
    trajs = [Trajectory(episode_id=str(i), question_id="q1", question=Q1, answers=["Mara Quill"], policy_step=i // 2,
                        steps=[Step(action="", kind="search", query=f"ravenhill author {i}", doc_ids=["1", "2"],
                                    extra={"titles": ["Ravenhill (novel)"]}),
                               Step(action="", kind="answer")], em=i % 2, reward=float(i % 2))
             for i in range(4)]
    path = tmp_path / "sg_run.jsonl"
    write_trajectories(path, trajs)
    assert detect_format(path) == "searchgym"
    run = read_run(path)
    assert run.name == "sg_run"
    assert [(e.step, e.queries, e.success) for e in run.episodes] == [
        (0, ["ravenhill author 0"], False), (0, ["ravenhill author 1"], True),
        (1, ["ravenhill author 2"], False), (1, ["ravenhill author 3"], True)]
    assert run.episodes[0].titles == [["Ravenhill (novel)"]] and run.episodes[0].doc_ids == [["1", "2"]]


def test_helpers():
    assert search_spans("<search> a </search> x <search></search><search>b\n c</search>") == ["a", "b\n c"]
    assert doc_titles('Doc 1(Title: "A (b)") text\nDoc 2(Title: C) more') == ["A (b)", "C"]
    assert parse_question("...For example, <answer> Beijing </answer>. Question: who is X?\n<|im_end|>") == \
        "who is X?"
    assert parse_question("<|im_start|>user\nWhat is Y?<|im_end|>") == "What is Y?"
    assert parse_question("no question here") is None


def test_bad_runs_give_typed_errors(tmp_path):
    with pytest.raises(ConfigError):
        read_run(tmp_path / "absent.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "Question: q", "output": "<search>a</search>"}\nnot json\n')
    with pytest.raises(TrajectoryFormatError, match="line 2"):
        read_run(bad)
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"foo": 1}) + "\n")
    with pytest.raises(TrajectoryFormatError, match="--text-field"):
        read_run(odd)
    with pytest.raises(ConfigError):
        read_run(odd, fmt="xml")
