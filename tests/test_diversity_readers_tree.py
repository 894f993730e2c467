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


def test_refusals_and_stated_rewards_are_read_from_the_start_or_the_end_only():
    from searchgym.diversity.readers.outcomes import em_success, is_refusal, reward_in_text

    for s in ("Invalid action!", "[Search] Invalid request format: bad", "Error: Tool web_fetch not found",
              "  'Unknown tool: browse'", "Tool `fetch` not found."):
        assert is_refusal(s), s
    for s in ("Doc 1 (Title: Error) An error: in 1901 the invalid action was undone.", "No results found for x",
              "The tool was found by Vale.", ""):
        assert not is_refusal(s), s
    assert reward_in_text("...\nObservation 3: Episode finished, reward = 1\n") == 1.0
    assert reward_in_text("Action: Finish[x]\n{'em': 0, 'reward': 0.5, 'f1': 0.7}\n") == 0.5
    assert reward_in_text("done\nYour score (min 0.0, max 1.0): 0.0") == 0.0
    assert reward_in_text("the reward = 1 was promised in the text") is None
    assert em_success(["Oren Vale"], "oren vale.") == 1.0 and em_success("Dunmore", "Elsin") == 0.0
    assert em_success(["x"], None) is None and em_success(None, "x") is None


def test_tool_items_in_a_csv_cell_and_a_chat_user_turn_question(tmp_path):
    import csv
    import json

    items = [{"type": "tool_call", "tool_name": "web_search", "arguments": json.dumps({"query": "Port Elsin"}),
              "output": "Port Elsin was founded by Oren Vale."}]
    chat = [{"role": "system", "content": "You search."}, {"role": "user", "content": "Who founded Port Elsin?"}]
    p = tmp_path / "dump.csv"
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["input", "items"])
        w.writerow([json.dumps(chat), json.dumps(items)])
    run = read_run(p)
    assert run.fmt == "tree" and run.read_stats.container == "csv"
    assert _rows(run) == [(["Port Elsin"], "Who founded Port Elsin?", None)]


def test_output_text_item_is_the_prediction_scored_against_gold_when_no_reward_is_stated(tmp_path):
    import json

    def rec(pred, gold):
        items = [{"type": "tool_call", "tool_name": "search", "arguments": json.dumps({"query": "Port Elsin"}),
                  "output": "Doc 1 (Title: Port Elsin) Port Elsin was founded by Oren Vale."},
                 {"type": "message", "content": [{"type": "output_text", "text": pred}]}]
        return {"question": "Who founded Port Elsin?", "golden_answers": gold, "output": items}

    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in (rec("Oren Vale", ["Oren Vale"]), rec("Dunmore", ["Oren Vale"]),
                                                   rec("Oren Vale", None))) + "\n")
    run = read_run(p)
    assert [(e.answer, e.success) for e in run.episodes] == [("Oren Vale", True), ("Dunmore", False),
                                                             ("Oren Vale", None)]  # no gold: unknown, never 0
    assert run.episodes[2].reward is None


def test_refused_calls_are_a_warning_of_the_analysis(tmp_path):
    from searchgym.diversity.core import analyze_episodes

    run = read_run(T / "tool_items.jsonl")
    st = analyze_episodes(run.episodes, n_boot=0, read_stats=run.read_stats)
    assert st.to_dict()["warning_counts"]["rejected_calls"] == 1


def test_one_reader_weighs_every_reading_of_each_record(tmp_path):
    import json

    items = [{"type": "tool_call", "tool_name": "search", "arguments": json.dumps({"query": "Mara Quill"}),
              "output": "Doc 1 (Title: Mara Quill) Born in Dunmore."}]
    rows = [
        # a prompt / response pair: read whole (format verl)
        {"input": "Question: Who founded Port Elsin?", "output": "<search>Port Elsin</search><information>Doc 1 "
         "(Title: Port Elsin) Founded by Oren Vale.</information><answer>Oren Vale</answer>", "score": 1},
        # a response without calls beside tool items that ran: the items are the better reading
        {"question": "Where was Mara Quill born?", "response": "Dunmore", "items": items, "reward": 1},
        # a ReAct field under a Claim: header (no Question: line): the claim is the question
        {"traj": "Claim: Ravenhill is a novel.\nThought 1: look.\nAction 1: Search[Ravenhill]\nObservation 1: "
         "Ravenhill is a novel by Mara Quill.\nAction 2: Finish[SUPPORTS]", "reward": 1},
    ]
    p = tmp_path / "mixed.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = read_run(p)
    assert run.fmt == "verl"  # the kind of reading that won the first record
    assert _rows(run) == [(["Port Elsin"], "Who founded Port Elsin?", True),
                          (["Mara Quill"], "Where was Mara Quill born?", True),
                          (["Ravenhill"], "Ravenhill is a novel.", True)]
    assert run.episodes[1].titles == [["Mara Quill"]] and run.episodes[2].answer == "SUPPORTS"
