"""One lookup of a record's question, reward / success, step, episode id, question id and answers
(``readers.fields.record_fields``): whichever reading of a record wins (a text transcript, a chat turn list, calls
found by structure, a forced ``--format``), the same fields come out of the same record."""

from __future__ import annotations

import json

import pytest

from searchgym.diversity.readers import read_run
from searchgym.diversity.readers.fields import record_fields
from searchgym.errors import TrajectoryFormatError

# the same episode's fields, nested and named as published dumps do: a one-element list question one level
# down, the step as text, the reward under a metrics object, a prediction beside gold answers
FIELDS = {"meta": {"question": ["Who founded Port Elsin?"], "step": "3", "uid": "e1", "qid": "q7"},
          "Metrics": {"em": 1}, "pred_answer": "Oren Vale", "golden_answers": ["Oren Vale"]}
TEXT = {"output": "<search>Port Elsin founder</search><information>Doc 1(Title: Port Elsin) founded by Oren "
                  "Vale</information><answer>Oren Vale</answer>"}
CHAT = {"messages": [{"role": "user", "content": "Find it."},
                     {"role": "assistant", "content": "<search>Port Elsin founder</search>"},
                     {"role": "tool", "content": "Doc 1(Title: Port Elsin) founded by Oren Vale"},
                     {"role": "assistant", "content": "<answer>Oren Vale</answer>"}]}
CALLS = {"history": [{"tool": "search", "input": {"query": "Port Elsin founder"},
                      "observation": [{"title": "Port Elsin", "content": "founded by Oren Vale"}]}]}


def _write(tmp_path, name, rec):
    p = tmp_path / f"{name}.jsonl"
    p.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    return p


def _fields(ep):
    return (ep.queries, ep.question, ep.question_id, ep.episode_id, ep.step, ep.reward, ep.success, ep.answer)


WANT = (["Port Elsin founder"], "Who founded Port Elsin?", "q7", "e1", 3, 1.0, True, "Oren Vale")


@pytest.mark.parametrize(("name", "calls", "fmt", "reading"), [
    ("text", TEXT, "auto", "search-r1"), ("text", TEXT, "search-r1", "search-r1"),
    ("chat", CHAT, "auto", "chat"), ("chat", CHAT, "chat", "chat"),
    ("calls", CALLS, "auto", "tree"), ("calls", CALLS, "tree", "tree")])
def test_every_reading_finds_the_same_fields(tmp_path, name, calls, fmt, reading):
    run = read_run(_write(tmp_path, name, {**FIELDS, **calls}), fmt)
    assert run.fmt == reading
    assert _fields(run.episodes[0]) == WANT


def test_a_question_field_anywhere_beats_a_prompt_and_a_prompt_gives_its_question_line(tmp_path):
    out = TEXT["output"]
    rec = {"input": "Answer briefly.\nQuestion: who founded it?", "output": out,
           "extra_info": {"question": "Who founded Port Elsin?", "index": 12}}
    ep = read_run(_write(tmp_path, "nested", rec)).episodes[0]
    assert (ep.question, ep.question_id) == ("Who founded Port Elsin?", "12")
    ep = read_run(_write(tmp_path, "prompt", {"input": rec["input"], "output": out})).episodes[0]
    assert ep.question == "who founded it?"
    ep = read_run(_write(tmp_path, "template", {"prompt": "Answer.\nUse the tool.", "output": out})).episodes[0]
    assert ep.question is None  # a prompt of several lines without a question line is no question


def test_a_success_field_is_read_by_a_transcript_as_by_the_tree(tmp_path):
    for calls in (TEXT, CALLS):
        ep = read_run(_write(tmp_path, "s", {"question": "q?", "success": False, **calls})).episodes[0]
        assert (ep.reward, ep.success) == (0.0, False)


def test_a_named_format_refuses_a_top_level_reward_of_the_wrong_type(tmp_path):
    rec = {"question": "q?", "score": "high", **TEXT}
    with pytest.raises(TrajectoryFormatError, match="'score' must be a number"):
        read_run(_write(tmp_path, "bad", rec))
    with pytest.raises(TrajectoryFormatError, match="'score' must be a number"):
        record_fields(rec, strict=True)
    assert "reward" not in record_fields(rec)  # the generic lookup skips it (a tree-read record is not refused)
    p = tmp_path / "two.jsonl"
    p.write_text(json.dumps({**rec, "score": 1}) + "\n" + json.dumps(rec) + "\n", encoding="utf-8")
    run = read_run(p, lenient=True)
    assert len(run.episodes) == 1 and run.read_stats.skipped_lines == 1


def test_user_named_fields_replace_the_lookup_in_every_reading(tmp_path):
    for name, calls in (("text", TEXT), ("calls", CALLS)):
        rec = {**FIELDS, "run": {"q": "Named question?", "it": 9, "r": 0.25}, **calls}
        ep = read_run(_write(tmp_path, name, rec), question_field="run.q", step_field="run.it",
                      reward_field="run.r").episodes[0]
        assert (ep.question, ep.step, ep.reward, ep.success) == ("Named question?", 9, 0.25, False), name


def test_a_chat_whose_question_is_in_the_system_turn_does_not_take_an_observation_for_it(tmp_path):
    # tool results come back as user turns: the first user turn after the assistant's is an observation
    msgs = [{"role": "system", "content": "Answer with the search tool.\nQuestion: Who founded Port Elsin?"},
            {"role": "assistant", "content": "<search>Port Elsin founder</search>"},
            {"role": "user", "content": "<information>Doc 1(Title: Port Elsin) founded by Oren Vale</information>"},
            {"role": "assistant", "content": "<answer>Oren Vale</answer>"}]
    for fmt in ("auto", "chat"):
        ep = read_run(_write(tmp_path, "sys", {"messages": msgs}), fmt).episodes[0]
        assert (ep.queries, ep.question) == (["Port Elsin founder"], "Who founded Port Elsin?"), fmt
