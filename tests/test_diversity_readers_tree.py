"""The generic tree reader on the shapes no named format describes (fixtures in fixtures/diversity/tree, written
from the shapes of published dumps): tool-call item lists with JSON-encoded arguments and refused calls, steps
one level down, ReAct under Claim / Instruction / Task headers with rejected actions and rewards in the text, a
question held as a one-element list with expected / predicted answers (CJK)."""

from __future__ import annotations

from pathlib import Path

from searchgym.diversity.readers import read_run

T = Path(__file__).parent / "fixtures" / "diversity" / "tree"


def _rows(run):
    return [(e.queries, e.question, e.success) for e in run.episodes]


def test_tool_call_items_under_any_key_count_only_calls_that_ran():
    run = read_run(T / "tool_items.jsonl")
    assert run.fmt == "tree"
    assert _rows(run) == [
        (["Port Elsin founder", "Oren Vale"], "Who founded Port Elsin?", True),  # a one-element list query
        (["Mara Quill birthplace"], "Where was Mara Quill born?", False),  # the refused call is not a query
        (["Ravenhill novel author"], "Who wrote the novel Ravenhill?", True),
    ]
    a = run.episodes[0]
    assert a.titles == [["Port Elsin"], ["Oren Vale"]] and "founded by Oren Vale" in a.evidence[0][0]
    assert a.malformed == 1  # {"q": 7}: a call whose query is no string
    st = run.read_stats
    assert (st.episodes, st.queries, st.rejected, st.other_calls) == (3, 4, 1, 1)  # web_fetch is no search
    assert any("refused by the tool" in n for n in st.notes)


def test_structured_steps_one_level_down():
    run = read_run(T / "steps_down.json")
    assert run.fmt == "tree" and run.read_stats.container == "json-array"
    assert _rows(run) == [(["Port Elsin founder", "Oren Vale explorer"], "Who founded Port Elsin?", True),
                          (["Mara Quill"], "Where was Mara Quill born?", False)]
    assert run.episodes[0].titles == [["Port Elsin"], ["Oren Vale"]]  # retrieved_documents are the evidence
    assert run.read_stats.other_calls == 3  # browse, answer, answer


def test_cjk_question_as_a_one_element_list_and_success_by_exact_match():
    run = read_run(T / "cjk_list_question.jsonl")
    assert run.fmt == "tree"
    assert _rows(run) == [(["埃尔辛港 建立者"], "埃尔辛港是谁建立的？", True),
                          (["玛拉·奎尔 出生地", "玛拉·奎尔 邓莫尔"], "玛拉·奎尔出生在哪里？", False),
                          (["乌鸦山 小说 作者"], "《乌鸦山》的作者是谁？", None)]  # no prediction: unknown, never 0
    assert run.episodes[2].reward is None


def test_react_log_with_claim_headers_rejected_actions_and_rewards_in_text():
    run = read_run(T / "react_claims.txt")
    assert run.fmt == "react-log"
    assert _rows(run) == [(["Port Elsin"], "Port Elsin was founded by Oren Vale.", True),
                          (["Mara Quill"], "Mara Quill was born in Elsin.", False),
                          (["Ravenhill"], "Ravenhill is a novel by Mara Quill.", True)]  # a trailing {'reward': 1}
    ep = run.episodes[1]
    assert ep.malformed == 1 and ep.reward == 0.0  # "Bingsearch[…" unclosed; "Episode finished, reward = 0"
    assert run.read_stats.rejected == 1  # "Search[Mara Quill birthplace]" -> "Invalid action!"


def test_react_log_with_task_headers_and_score_lines():
    run = read_run(T / "react_tasks.log")
    assert _rows(run) == [(["Mara Quill"], "Find where Mara Quill was born.", True),
                          (["Port Elsin founder", "Oren Vale"], "Find who founded Port Elsin.", True)]
    assert [e.answer for e in run.episodes] == ["Dunmore", "Oren Vale"]


def test_react_text_nested_under_an_unknown_key_with_instruction_headers():
    run = read_run(T / "react_nested.jsonl")
    assert run.fmt == "tree"
    assert _rows(run) == [(["Port Elsin"], "Who founded Port Elsin?", True),
                          (["Mara Quill"], "Where was Mara Quill born?", True)]
    assert run.read_stats.rejected == 1 and [e.reward for e in run.episodes] == [1.0, 1.0]
