"""Readers for rollouts as they occur in the wild (fixtures in tests/fixtures/diversity/wild, written from the
formats' descriptions): verl tool-call dumps, special-token grammars, ReAct (JSON and plain-text logs), chat
transcripts, JSON containers; bad input; linear time on adversarial lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchgym.diversity.readers import (
    Run,
    detect_format,
    doc_titles,
    episode_from_response,
    read_chat,
    read_react,
    read_react_log,
    read_run,
    read_verl,
)
from searchgym.errors import ConfigError, TrajectoryFormatError
from searchgym.trajectory import Step, Trajectory, write_trajectories

W = Path(__file__).parent / "fixtures" / "diversity" / "wild"
Q1, Q2, Q3 = "Who founded Port Elsin?", "Who wrote the novel Ravenhill?", "Where was Mara Quill born?"


def test_verl_tool_call_dump_counts_only_executed_calls():
    run = read_run(W / "verl_toolcall")
    assert isinstance(run, Run) and run.fmt == "verl" and run.label == "verl_toolcall"
    a, b, c, d, e = run.episodes
    # two calls in one turn (the second has an extra "}"), then a query_list call with trailing text
    assert a.queries == ["Port Elsin founder", "Port Elsin history", "Oren Vale birthplace", "Oren Vale explorer"]
    assert a.turns == [0, 0, 1, 1] and a.malformed == 0
    assert a.titles == [["Port Elsin"], ["Oren Vale"], ["Oren Vale"], ["Explorers of Elsin"]]
    assert "founded by Oren Vale" in a.evidence[0][0] and "born in Dunmore" in a.evidence[2][0]
    assert "Explorers" not in a.evidence[2][0]  # the query list's results are split at "---"
    assert (a.question, a.answer, a.reward, a.success, a.step) == (Q1, "Oren Vale", 1.0, True, 3)
    # an unparseable call is malformed, never a query; the instruction's <search>/<tool_call> examples are ignored
    assert b.queries == ["Ravenhill novel"] and b.malformed == 1 and b.titles == [["Ravenhill (novel)"]]
    # the looping last turn was never executed
    assert c.queries == ["Mara Quill birthplace"] and c.answer is None and c.success is False
    # one response for three calls (max_parallel_calls=1): only the first ran; calls after the answer are ignored
    assert d.queries == ["Elsin port"]
    assert e.queries == ["Ravenhill writer"] and e.step == 4 and e.question == Q2
    st = run.read_stats
    assert (st.format, st.episodes, st.queries, st.malformed, st.unexecuted) == ("verl", 5, 8, 1, 8)
    assert st.grammars == {"tool_call": 7, "search_tag": 1} and st.files == 2 and st.skipped_lines == 0
    assert [ep.queries for ep in read_verl(W / "verl_toolcall")] == [ep.queries for ep in run.episodes]


def test_special_token_grammars_r1_searcher_and_search_o1():
    r1 = read_run(W / "r1_searcher.jsonl")
    assert r1.fmt == "search-r1" and r1.read_stats.container == "jsonl"
    assert [e.queries for e in r1.episodes] == [["Port Elsin founder", "Oren Vale"], ["Mara Quill born"]]
    assert [e.malformed for e in r1.episodes] == [0, 1]  # an empty query
    assert r1.episodes[0].turns == [0, 1] and r1.episodes[0].evidence[1] == ["(1)Oren Vale was an explorer."]
    assert [e.question for e in r1.episodes] == [Q1, Q3] and r1.episodes[1].answer == "Dunmore"
    o1 = read_run(W / "search_o1.json")  # one JSON array, capitalised keys
    assert o1.read_stats.container == "json-array" and o1.read_stats.grammars == {"search_o1": 2}
    (ep,) = o1.episodes
    assert ep.queries == ["Ravenhill novel author", "Mara Quill"] and ep.question == Q2
    assert ep.titles == [["Ravenhill (novel)"], ["Mara Quill"]] and ep.answer == "Mara Quill"
    assert ep.episode_id == "7"


def test_custom_query_tags_and_a_run_without_observations():
    with pytest.raises(TrajectoryFormatError, match="--query-tags") as exc:
        read_run(W / "custom_tags.jsonl")
    assert "--format" in str(exc.value) and "verl" in str(exc.value)
    run = read_run(W / "custom_tags.jsonl", query_tags=("<query>", "</query>"))
    (ep,) = run.episodes
    assert ep.queries == ["Port Elsin", "Oren Vale"] and ep.turns == [0, 0] and ep.question == Q1
    assert ep.reward == 0.5 and run.read_stats.grammars == {"tags <query>": 2}
    assert any("no observation" in n for n in run.read_stats.notes)


def test_react_json_traj_skips_few_shot_examples():
    run = read_run(W / "react_traj.jsonl")
    assert run.fmt == "react"
    a, b = run.episodes
    assert a.queries == ["Port Elsin", "Oren Vale (explorer)"]  # Lookup[...] is not a search
    assert a.turns == [0, 2] and a.malformed == 0 and a.answer == "Oren Vale" and a.question == Q1
    assert a.evidence[0] == ["Port Elsin is a harbour town founded by Oren Vale."]
    assert a.reward == 1.0 and a.success is True and a.question_id == "11"
    # "Action 1: search Mara Quill" (no brackets) is malformed; "Invalid action: …" in an observation is not
    assert b.queries == ["Mara Quill"] and b.malformed == 1
    assert run.read_stats.other_calls == 1
    assert [e.queries for e in read_react(W / "react_traj.jsonl")] == [a.queries, b.queries]


def test_react_plain_text_log_with_two_trials():
    run = read_run(W / "react_log.txt")
    assert run.fmt == "react-log" and run.read_stats.container == "text"
    got = [(e.step, e.series, e.question, e.queries, e.answer, e.success) for e in run.episodes]
    assert got == [
        (None, "trial 1", Q1, ["Port Elsin"], "Oren Vale", True),
        (None, "trial 1", Q3, ["Mara Quill", "Mara Quill birthplace"], "Elsin", False),
        (None, "trial 2", Q3, ["Mara Quill"], "Dunmore", True),
    ]  # trials are a series of their own, never training steps  # the few-shot example between "Here are some examples" and "(END OF EXAMPLES)" is no episode
    assert run.episodes[1].turns == [0, 1] and run.episodes[1].evidence[0] == ["Mara Quill is a writer."]
    assert [e.source_line for e in run.episodes] == [11, 21, 34]
    assert [e.queries for e in read_react_log(W / "react_log.txt")] == [e.queries for e in run.episodes]


def test_react_log_trial_markers_of_other_shapes(tmp_path):
    log = ("BEGIN TRIAL 0\nQuestion: q one\nAction 1: Search[alpha]\nObservation 1: a\n"
           "----- attempt 2 -----\nQuestion: q one\nAction: Search[beta]\nObservation: b\nAction: Finish[x]\n")
    p = tmp_path / "run.log"
    p.write_text(log)
    run = read_run(p)
    assert [(e.step, e.series, e.queries) for e in run.episodes] == [(None, "trial 0", ["alpha"]),
                                                                     (None, "attempt 2", ["beta"])]


def test_chat_transcripts_openai_tool_calls_and_tags():
    run = read_run(W / "chat_messages.jsonl")
    assert run.fmt == "chat"
    a, b = run.episodes
    # tool results are matched to calls by tool_call_id; arguments are a JSON string
    assert a.queries == ["Port Elsin founder", "Port Elsin"] and a.turns == [0, 0]
    assert a.titles == [["Oren Vale"], ["Port Elsin"]]
    assert a.malformed == 1 and a.question == Q1 and a.answer == "Oren Vale"
    assert b.queries == ["Ravenhill author"] and b.question == Q2 and b.answer == "Mara Quill"
    assert b.evidence == [['Doc 1(Title: "Ravenhill (novel)") by Mara Quill.']]
    assert run.read_stats.grammars == {"openai_tools": 2, "search_tag": 1}
    assert [e.queries for e in read_chat(W / "chat_messages.jsonl")] == [a.queries, b.queries]


def test_one_json_object_holding_the_episodes():
    run = read_run(W / "one_object.json")
    assert run.fmt == "verl" and run.read_stats.container == "json-object"
    assert [(e.queries, e.question, e.reward) for e in run.episodes] == [
        (["Ravenhill"], Q2, 1.0), (["Elsin"], Q1, 0.0)]


def test_searchgym_trajectories_with_parallel_queries(tmp_path):
    steps = [Step(action="", kind="search", query="a", extra={"queries": ["a", "b"], "titles": ["T1", "T2"]},
                  doc_ids=["1", "2"]),
             Step(action="", kind="invalid"),
             Step(action="", kind="search", query="c", doc_ids=["3"]),
             Step(action="", kind="answer")]
    tr = Trajectory(episode_id="e1", question_id="q1", question=Q1, answers=["Oren Vale"], policy_step=5,
                    steps=steps, prediction="Oren Vale", em=1, reward=1.0)
    p = tmp_path / "own.jsonl"
    write_trajectories(p, [tr])
    assert detect_format(p) == "searchgym"
    (ep,) = read_run(p).episodes
    assert ep.queries == ["a", "b", "c"] and ep.turns == [0, 0, 1] and ep.malformed == 1
    assert ep.titles[0] == ["T1", "T2"] and ep.doc_ids[2] == ["3"]
    assert (ep.episode_id, ep.answer, ep.step, ep.success) == ("e1", "Oren Vale", 5, True)


def test_generic_text_field_does_not_take_a_reasoning_text_as_one_query(tmp_path):
    p = tmp_path / "gen.jsonl"
    rows = [{"t": "I think we should look at\nthe history first.\nThen answer."},
            {"t": "single query line"},
            {"t": "<search>x</search><information>d</information>"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = read_run(p, text_field="t")
    assert [e.queries for e in run.episodes] == [[], ["single query line"], ["x"]]
    assert run.read_stats.skipped_reasons["text field without any search call"] == 1


def test_calls_after_the_end_of_the_response_are_not_queries():
    ep = episode_from_response("<search>a</search><information>x</information><|im_end|><search>b</search>"
                               "<information>y</information>")
    assert ep.queries == ["a"]
    ep = episode_from_response("<search>a</search><information>x</information><|im_end|>\n<|im_start|>user\n"
                               "<search>b</search><information>y</information>")
    assert ep.queries == ["a", "b"]  # a new turn follows the end token


def test_doc_titles_forms():
    assert doc_titles('Doc 1(Title: "A (b)") text\nDoc 2(Title: C) more') == ["A (b)", "C"]
    assert doc_titles("Doc 1 (Title: X (y))\ntext\n\nDoc 2 (Title: Z)\nmore") == ["X (y)", "Z"]
    assert doc_titles('{"title": "T", "snippet": "s"}') == ["T"]


# ---------------------------------------------------------------------------------------------------
# bad input

BAD_LINES = {
    "a list": (b'[1, 2]', "not a JSON object"),
    "non-UTF-8": (b'{"input": "Question: q", "output": "\xff\xfe"}', "not UTF-8"),
    "deep nesting": (b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b', "output": ""}', "nested too deeply"),
    "broken JSON": (b'{"input": "Question: q", "output": ', "not valid JSON"),
    "string reward": (b'{"input": "Question: q", "output": "", "score": "high"}', "wrong field type"),
    "non-integer step": (b'{"input": "Question: q", "output": "", "step": 2.5}', "wrong field type"),
    "output not a string": (b'{"input": "Question: q", "output": 7}', "wrong field type"),
}
GOOD = b'{"input": "Question: q", "output": "<search>a</search><information>d</information>", "score": 1}'


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_malformed_verl_line_names_file_and_line_or_is_skipped(tmp_path, case):
    bad, reason = BAD_LINES[case]
    p = tmp_path / "run.jsonl"
    p.write_bytes(GOOD + b"\n" + bad + b"\n" + GOOD + b"\n")
    with pytest.raises(TrajectoryFormatError, match=r"run\.jsonl, line 2"):
        read_run(p)
    run = read_run(p, lenient=True)
    assert [e.queries for e in run.episodes] == [["a"], ["a"]]
    assert run.read_stats.skipped_lines == 1
    assert any(reason in r for r in run.read_stats.skipped_reasons), run.read_stats.skipped_reasons


SG_BAD = {
    "string reward": {"reward": "high"},
    "non-integer step": {"policy_step": "three"},
    "fractional step": {"policy_step": 2.5},
    "integer query": {"steps": [{"action": "", "kind": "search", "query": 42}]},
    "steps not a list": {"steps": "abc"},
}


@pytest.mark.parametrize("case", sorted(SG_BAD))
def test_a_malformed_searchgym_line_is_a_typed_error(tmp_path, case):
    good = {"schema": 1, "episode_id": "e", "question": "q", "answers": [], "policy_step": 0,
            "steps": [{"action": "", "kind": "search", "query": "x"}], "reward": 1.0, "em": 1}
    bad = {**good, **SG_BAD[case]}
    p = tmp_path / "sg.jsonl"
    p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(TrajectoryFormatError, match=r"sg\.jsonl, line 2"):
        read_run(p, "searchgym")
    run = read_run(p, "searchgym", lenient=True)
    assert [e.queries for e in run.episodes] == [["x"]] and run.read_stats.skipped_lines == 1


def test_bad_json_file_containers(tmp_path):
    p = tmp_path / "arr.json"
    p.write_text('[{"input": "Question: q", "output": "<search>a</search>"}, 5]')
    with pytest.raises(TrajectoryFormatError, match=r"arr\.json, record 1"):
        read_run(p, "verl")
    assert read_run(p, "verl", lenient=True).read_stats.skipped_lines == 1
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TrajectoryFormatError, match="nested too deeply"):
        read_run(deep)
    scalar = tmp_path / "scalar.json"
    scalar.write_text('{"a": 1,\n "b": 2}')
    with pytest.raises(TrajectoryFormatError, match="holds no list of episode"):
        read_run(scalar)
    txt = tmp_path / "notes.txt"
    txt.write_text("just some notes\nnothing here\n")
    with pytest.raises(TrajectoryFormatError, match="tried searchgym"):
        read_run(txt)
    with pytest.raises(ConfigError, match="choose from"):
        read_run(txt, fmt="xml")
    with pytest.raises(ConfigError, match="query tags"):
        read_run(W / "custom_tags.jsonl", query_tags=("<q>", "<q>"))
    with pytest.raises(TrajectoryFormatError, match="react-log"):
        read_run(txt, fmt="verl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for fmt in ("auto", "verl"):
        with pytest.raises(TrajectoryFormatError, match="no episode"):
            read_run(empty, fmt)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + GOOD + b"\n" + GOOD + b"\n")
    run = read_run(bom)
    assert run.read_stats.container == "jsonl" and [e.queries for e in run.episodes] == [["a"], ["a"]]


# ---------------------------------------------------------------------------------------------------
# linear time: 1 MB adversarial lines finish (within pytest-timeout) with the right counts

ADVERSARIAL = {
    "unclosed <search>": ("<search>" * 125_000, 0, 125_000),
    "unclosed <tool_call>": ("<tool_call>" * 90_000, 0, 90_000),
    "unclosed <information>": ("<search>a</search><information>" * 30_000, 30_000, 0),
    "unclosed Action brackets": ("\nAction: Search[" * 60_000, 0, 60_000),
    "one-line ReAct": ("Action: Search[ " * 60_000 + "]", 1, 0),
    "unclosed titles": ("<search>a</search><information>" + "Doc 1(Title: " * 80_000, 1, 0),
    "nested opens": ("<search><search>" * 50_000 + "</search>", 0, 100_000),
    "unclosed special tokens": ("<|begin_of_query|>" * 50_000, 0, 50_000),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
def test_adversarial_megabyte_lines_are_read_in_linear_time(tmp_path, case):
    text, n_queries, n_malformed = ADVERSARIAL[case]
    p = tmp_path / "adv.jsonl"
    p.write_text(json.dumps({"input": "Question: q", "output": text}) + "\n")
    (ep,) = read_run(p).episodes
    assert (len(ep.queries), ep.malformed) == (n_queries, n_malformed)


def test_verl_output_with_special_tokens_kept(tmp_path):
    out = ('<tool_call>\n{"name": "search", "arguments": {"query": "a"}}\n</tool_call><|im_end|>\n<|im_start|>user\n'
           '<tool_response>\n{"result": "Doc 1 (Title: A)\\ntext"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
           '<tool_call>\n{"name": "search", "arguments": {"query": "b"}}\n</tool_call><|im_end|>\n<|im_start|>user\n'
           '<tool_response>\n{"result": "Doc 1 (Title: B)\\ntext"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
           '<answer>x</answer><|im_end|><|endoftext|><|endoftext|>')
    p = tmp_path / "0.jsonl"
    p.write_text(json.dumps({"input": "Question: q?", "output": out, "score": 1, "step": 0}) + "\n")
    (ep,) = read_run(p).episodes
    assert ep.queries == ["a", "b"] and ep.turns == [0, 1] and ep.titles == [["A"], ["B"]] and ep.answer == "x"


def test_a_prompt_field_with_a_search_example_is_not_the_text_field(tmp_path):
    prompt = "Search with <search> query </search>, results come in <information> and </information>."
    rows = [{"prompt": prompt + " Question: q1?", "response": "<answer>x</answer>", "reward": 0},
            {"prompt": prompt + " Question: q2?", "response": "<search>real</search><information>d</information>"
                                                             "<answer>y</answer>", "reward": 1}]
    p = tmp_path / "pr.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = read_run(p)
    assert run.fmt == "search-r1"
    assert [e.queries for e in run.episodes] == [[], ["real"]]
    assert [e.question for e in run.episodes] == ["q1?", "q2?"]


def test_chat_tool_results_without_matching_ids_follow_call_order(tmp_path):
    def call(i, q):
        return {"id": f"call_{i}", "type": "function",
                "function": {"name": "web_search", "arguments": json.dumps({"query": q})}}
    rec = {"messages": [{"role": "user", "content": "Who?"},
                        {"role": "assistant", "content": "", "tool_calls": [call(1, "a"), call(2, "b")]},
                        {"role": "tool", "tool_call_id": "other-1", "content": "Doc 1(Title: A) x"},
                        {"role": "tool", "content": "Doc 1(Title: B) y"},
                        {"role": "assistant", "content": "", "tool_calls": [call(3, "never run")]}]}
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    run = read_run(p)
    (ep,) = run.episodes
    assert ep.queries == ["a", "b"] and ep.titles == [["A"], ["B"]] and ep.question == "Who?"
    assert run.read_stats.unexecuted == 1


def test_a_folder_of_json_files_ignores_notes_beside_them(tmp_path):
    d = tmp_path / "evals"
    d.mkdir()
    (d / "a.jsonl").write_bytes(GOOD + b"\n")
    (d / "b.json").write_text(json.dumps([json.loads(GOOD)]))
    (d / "README.txt").write_text("how these were made\n")
    run = read_run(d)
    assert [e.queries for e in run.episodes] == [["a"], ["a"]] and run.read_stats.files == 2
    assert run.read_stats.container == "mixed" and run.label == "evals"
