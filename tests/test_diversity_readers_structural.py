"""Readers that find the transcript by its structure (issue 20 §1), on fixtures written for each variant."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.diversity.core import label_episodes
from searchgym.diversity.readers import read_run
from searchgym.diversity.templates import Templater

S = Path(__file__).parent / "fixtures" / "diversity" / "structural"


@pytest.mark.parametrize("name, fmt, episodes, queries", [
    ("chat_traj_key.jsonl", "chat", 2, 3),          # a chat list under "traj"
    ("sharegpt_turns.jsonl", "chat", 2, 3),         # ShareGPT from/value turns under "dialogue"
    ("react_tools.jsonl", "react", 2, 4),           # BingSearch / Retrieve / search_engine / WebSearch
    ("transcripts.csv", "search-r1", 3, 4),         # a CSV whose column holds the transcript
    ("reemitted.jsonl", "verl", 1, 3),              # earlier turns re-emitted: each call once
    ("sidecar.jsonl", "search-r1", 1, 2),           # evidence beside the text
    ("train_stdout.log", "train-log", 4, 5),        # ANSI, pid / rank prefixes, step lines, markers
    ("verl_stdout.log", "train-log", 3, 4),         # verl's [prompt] / [response] / [score] printout
    ("chinese.jsonl", "search-r1", 3, 5),
    ("instruction_no_reward.jsonl", "search-r1", 2, 2),
])
def test_each_variant_is_read_without_flags(name, fmt, episodes, queries):
    run = read_run(S / name)
    assert (run.fmt, run.read_stats.episodes, run.read_stats.queries) == (fmt, episodes, queries)


def test_react_tools_other_than_search_are_counted_apart():
    run = read_run(S / "react_tools.jsonl")
    assert [e.queries for e in run.episodes] == [["Port Elsin founder", "Oren Vale"],
                                                 ["Kell river", "Kell river source"]]
    assert run.read_stats.other_calls == 2  # Lookup and Calculator


def test_search_tools_option_adds_a_tool(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"question": "q", "traj": "Question: q\nAction 1: FindDocs[alpha]\nObservation 1: a\n"
                                                      "Action 2: Finish[x]"}) + "\n")
    assert read_run(p, "react").read_stats.queries == 0
    assert read_run(p, "react", search_tools=["find_docs"]).episodes[0].queries == ["alpha"]


def test_reemitted_turns_count_once_and_are_reported():
    run = read_run(S / "reemitted.jsonl")
    assert run.episodes[0].queries == ["Port Elsin founder", "Oren Vale", "Kell river"]
    assert run.read_stats.reemitted == 2


def test_a_looping_agent_is_not_taken_for_a_reemission(tmp_path):
    t = "<search>a</search><information>same</information>"
    p = tmp_path / "loop.jsonl"
    p.write_text(json.dumps({"input": "Question: q", "output": t * 4}) + "\n")
    assert read_run(p).episodes[0].queries == ["a"] * 4


def test_sidecar_evidence_is_attached_by_query():
    (ep,) = read_run(S / "sidecar.jsonl").episodes
    assert ep.titles == [["Port Elsin"], ["Oren Vale"]]
    assert "founded by Oren Vale" in ep.evidence[0][0]


def test_training_log_steps_questions_and_exact_match():
    run = read_run(S / "train_stdout.log")
    assert [e.step for e in run.episodes] == [1, 1, 2, 3]
    assert run.episodes[0].question == "Who founded Port Elsin?"
    assert [e.success for e in run.episodes] == [True, False, True, True]
    assert run.episodes[3].queries == ["Where was Mara Quill born?", "Mara Quill Elsin"]


def test_verl_stdout_prompt_response_score_and_steps():
    run = read_run(S / "verl_stdout.log")
    assert [(e.step, e.reward) for e in run.episodes] == [(1, 1.0), (2, 0.0), (3, 1.0)]
    assert run.episodes[0].queries == ["Port Elsin founder"]  # not the system prompt's "<search> query </search>"
    assert run.episodes[2].question == "Who founded Port Elsin?"


def test_parquet_and_gzip_containers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with (S / "transcripts.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    run = read_run(tmp_path / "t.parquet")
    assert (run.read_stats.container, run.read_stats.queries) == ("parquet", 4)
    gz = tmp_path / "chat.jsonl.gz"
    gz.write_bytes(gzip.compress((S / "chat_traj_key.jsonl").read_bytes()))
    run = read_run(gz)
    assert (run.fmt, run.read_stats.container, run.read_stats.queries) == ("chat", "jsonl (gzip)", 3)
    csvgz = tmp_path / "t.csv.gz"
    csvgz.write_bytes(gzip.compress((S / "transcripts.csv").read_bytes()))
    assert read_run(csvgz).read_stats.queries == 4


def test_question_after_instruction_and_unknown_success(tmp_path):
    run = read_run(S / "instruction_no_reward.jsonl")
    assert [e.question for e in run.episodes] == ["Who founded Port Elsin?", "Where was Mara Quill born?"]
    assert all(e.success is None for e in run.episodes)
    res = CliRunner().invoke(app, ["analyze", str(S / "instruction_no_reward.jsonl"), "--out", str(tmp_path / "a"),
                                   "--no-plots", "--n-boot", "5"])
    assert res.exit_code == 0, res.output
    block = json.loads((tmp_path / "a" / "summary.json").read_text())["runs"]["instruction_no_reward"]
    assert block["policy"]["success_rate"] is None  # unknown, never 0
    assert block["sequences"]["episodes_incorrect"] == 0
    assert block["warning_counts"]["episodes_without_reward"] == 2
    assert "episodes_without_question" not in block["warning_counts"]


def test_five_trial_retry_log_is_not_fitted_as_steps(tmp_path):
    blocks = []
    for t in range(5):
        blocks.append(f"Trial {t}:")
        for q in ("Who founded Port Elsin?", "Where was Mara Quill born?"):
            blocks += [f"Question: {q}", f"Action 1: Search[{q.split()[-1].rstrip('?')}]", "Observation 1: x",
                       "Action 2: Finish[y]"]
    p = tmp_path / "trials.log"
    p.write_text("\n".join(blocks) + "\n")
    run = read_run(p)
    assert all(e.step is None for e in run.episodes) and len({e.series for e in run.episodes}) == 5
    res = CliRunner().invoke(app, ["analyze", str(p), "--out", str(tmp_path / "a"), "--no-plots", "--n-boot", "5"])
    assert res.exit_code == 0, res.output
    block = json.loads((tmp_path / "a" / "summary.json").read_text())["runs"]["trials"]
    assert "entropy_law" not in block["policy"] and not block.get("series") and "trend" not in block
    assert "pass_at_k" not in block["policy"]
    assert block["warning_counts"]["trials_not_steps"] == 5
    assert block["warning_counts"]["duplicate_episodes"] == 8  # temperature-0 retries


def test_one_bad_file_does_not_sink_the_others(tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"input": "Question: q", "output": "<search>a</search>"\n')
    args = ["analyze", str(S / "chat_traj_key.jsonl"), str(bad), "--out", str(tmp_path / "a"), "--no-plots",
            "--n-boot", "5"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1
    assert "broken.jsonl" in res.output and "line 1" in res.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert list(summary["runs"]) == ["chat_traj_key"]
    assert summary["unreadable"][0]["path"].endswith("broken.jsonl")
    assert "broken.jsonl" in (tmp_path / "a" / "report.md").read_text()
    res = CliRunner().invoke(app, [*args[:-4], "--out", str(tmp_path / "b"), "--strict", "--no-plots"])
    assert res.exit_code == 2 and not (tmp_path / "b" / "summary.json").exists()


def test_chinese_fragments_of_the_question_are_fragments_not_off_task():
    lab = label_episodes(read_run(S / "chinese.jsonl").episodes, templater=Templater())
    assert "off-task" not in lab.strategy
    assert lab.strategy.count("question-fragment") >= 3
    assert all(src[0] > 0.5 for src in lab.sources)


def test_japanese_and_korean_fragments_are_grounded():
    from searchgym.diversity.strategy import classify

    assert classify("東京タワー 高さ", "東京タワーの高さは何メートルですか？").strategy == "question-fragment"
    assert classify("세종대왕 업적", "세종대왕의 주요 업적은 무엇인가?").strategy == "question-fragment"
    assert classify("mixed 東京タワー height", "How tall is 東京タワー?").strategy != "off-task"


def test_react_trace_in_a_prompt_field_after_few_shot_examples(tmp_path):
    trace = ("Solve the task. Example:\nQuestion: Who wrote X?\nAction 1: Search[X author]\nObservation 1: Y.\n"
             "Action 2: Finish[Y]\n\nQuestion: Where is the Kell?\nThought 1: search\n"
             "action 1: WikiSearch[Kell river]\nobservation 1: The Kell flows through Dunmore.\n"
             "Action 2: Finish[Dunmore]")
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"prompt": trace, "score": 1}) + "\n")
    run = read_run(p)
    assert run.fmt == "react" and run.episodes[0].queries == ["Kell river"]
    assert run.episodes[0].question == "Where is the Kell?"


def test_container_edge_cases(tmp_path):
    from searchgym.diversity.readers import budget
    from searchgym.errors import TrajectoryFormatError

    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n" * 5_000_000))
    with budget.limit(1_000_000), pytest.raises(TrajectoryFormatError, match="decompresses to more than"):
        read_run(bomb)
    bad = tmp_path / "bad.json"
    bad.write_text('[{"question": "q", "queries": ["a"]}, {"question": }]')
    with pytest.raises(TrajectoryFormatError, match="record 1"):
        read_run(bad, text_field="queries")
    chat_csv = tmp_path / "chat.csv"
    turns = [{"role": "user", "content": "Who founded Port Elsin?"},
             {"role": "assistant", "content": "<search>Port Elsin</search>"},
             {"role": "tool", "content": "<information>founded by Oren Vale</information>"}]
    with chat_csv.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "history"])
        w.writerow(["1", json.dumps(turns)])  # a cell holding a JSON transcript
    run = read_run(chat_csv)
    assert run.fmt == "chat" and run.episodes[0].queries == ["Port Elsin"]
