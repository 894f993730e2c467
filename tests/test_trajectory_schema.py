"""Trajectory schema 2 (Step.queries / Step.titles as fields), schema-1 loading, and malformed lines:
every bad line is a TrajectoryFormatError naming file and line, and ``lenient=True`` skips it."""

from __future__ import annotations

import json

import pytest

from searchgym.errors import TrajectoryFormatError
from searchgym.trajectory import SCHEMA_VERSION, Step, Trajectory, load_trajectories, write_trajectories


def _good(i: int = 0) -> dict:
    return {"episode_id": f"e{i}", "question_id": "q", "question": "Who wrote Ravenhill?", "answers": ["x"],
            "policy_step": 3, "steps": [{"action": "<search>a</search>", "kind": "search", "query": "a"}],
            "reward": 1.0, "em": 1}


def test_schema2_round_trip_keeps_parallel_queries_and_titles(tmp_path):
    st = Step(action="x", kind="search", queries=["a", "b"], titles=["T1", "T2"], doc_ids=["1", "2"])
    assert st.query == "a"
    tr = Trajectory(episode_id="1", question_id="q", question="Q?", answers=[], steps=[st])
    p = tmp_path / "t.jsonl"
    write_trajectories(p, [tr])
    line = json.loads(p.read_text())
    assert line["schema"] == SCHEMA_VERSION == 2
    assert line["steps"][0]["queries"] == ["a", "b"] and line["steps"][0]["titles"] == ["T1", "T2"]
    back = load_trajectories(p)[0]
    assert back.steps[0].queries == ["a", "b"] and back.steps[0].titles == ["T1", "T2"]
    assert back.queries == ["a", "b"] and back.steps[0].extra == {}


def test_schema1_lines_with_queries_and_titles_in_extra_keep_loading(tmp_path):
    d = _good()
    d["schema"] = 1
    d["steps"] = [{"action": "x", "kind": "search", "query": "a", "queries": ["a", "b"], "titles": ["T"],
                   "doc_ids": [1, 2], "observation": "text"},
                  {"action": "y", "kind": "search", "query": "c"}]
    p = tmp_path / "old.jsonl"
    p.write_text(json.dumps(d) + "\n")
    tr = load_trajectories(p)[0]
    assert tr.queries == ["a", "b", "c"]
    assert tr.steps[0].titles == ["T"] and tr.steps[0].doc_ids == ["1", "2"]
    assert tr.steps[0].extra == {"observation": "text"}
    assert tr.steps[1].queries == ["c"]
    # older code that put them into extra after construction-time still round-trips through from_dict
    legacy = Step(action="x", kind="search", query="a", extra={"queries": ["a", "z"], "titles": ["T"]})
    assert legacy.queries == ["a", "z"] and legacy.titles == ["T"] and legacy.extra == {}


BAD_LINES = {
    "list": b'[1, 2, 3]',
    "string reward": json.dumps({**_good(), "reward": "high"}).encode(),
    "non-integer policy_step": json.dumps({**_good(), "policy_step": 1.5}).encode(),
    "string policy_step": json.dumps({**_good(), "policy_step": "three"}).encode(),
    "integer query": json.dumps({**_good(), "steps": [{"action": "a", "kind": "search", "query": 7}]}).encode(),
    "step not an object": json.dumps({**_good(), "steps": ["search"]}).encode(),
    "steps not a list": json.dumps({**_good(), "steps": {"a": 1}}).encode(),
    "question not a string": json.dumps({**_good(), "question": ["a"]}).encode(),
    "non-utf8": b'{"episode_id": "e", "question": "caf\xe9"}',
    "deep nesting": b'{"episode_id": "e", "question": "q", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "deep nesting unclosed": b"[" * 100_000,
    "not json": b"{oops",
    "schema string": json.dumps({**_good(), "schema": "2"}).encode(),
    "nan reward": b'{"episode_id": "e", "question": "q", "reward": NaN}',
}


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_malformed_line_is_a_typed_error_or_skipped_when_lenient(tmp_path, name):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(json.dumps(_good(0)).encode() + b"\n" + BAD_LINES[name] + b"\n" + json.dumps(_good(2)).encode()
                  + b"\n")
    with pytest.raises(TrajectoryFormatError) as exc:
        load_trajectories(p)
    assert str(p) in str(exc.value) and "line 2" in str(exc.value)
    skipped: list = []
    got = load_trajectories(p, lenient=True, skipped=skipped)
    assert [t.episode_id for t in got] == ["e0", "e2"]
    assert len(skipped) == 1 and skipped[0][0] == 2


def test_integral_float_policy_step_and_numeric_ids_are_accepted(tmp_path):
    p = tmp_path / "ok.jsonl"
    p.write_text(json.dumps({**_good(), "policy_step": 4.0, "episode_id": 17, "answers": [1990]}) + "\n")
    tr = load_trajectories(p)[0]
    assert tr.policy_step == 4 and tr.episode_id == "17" and tr.answers == ["1990"]
