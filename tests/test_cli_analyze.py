"""``searchgym analyze`` on rollouts as they occur in the wild: labels, formats, --query-tags, --lenient, and
bad input as one line with exit code 2 (no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from searchgym.cli import app

W = Path(__file__).parent / "fixtures" / "diversity" / "wild"
LONG = "RL run (verl, Qwen tool calls) with a label longer than any column"


def _nq(run_summary: dict) -> int:
    return run_summary.get("n_queries", run_summary.get("queries"))


def _run(*args: str):
    return CliRunner().invoke(app, ["analyze", *args])


def test_analyze_wild_formats_with_labels(tmp_path):
    out = tmp_path / "out"
    res = _run(str(W / "verl_toolcall"), str(W / "react_log.txt"), str(W / "chat_messages.jsonl"),
               "--label", LONG, "--label", "react", "--label", "chat", "--out", str(out), "--n-boot", "10",
               "--no-plots")
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["runs"]) == [LONG, "react", "chat"]
    assert _nq(summary["runs"][LONG]) == 8 and _nq(summary["runs"]["react"]) == 4
    assert LONG in res.output  # shown whole, not cut
    assert f"read {LONG}: verl (jsonl, 2 files; calls: tool_call 7, search_tag 1)" in res.output
    assert "8 calls never executed" in res.output
    assert "read react: react-log (text" in res.output


def test_analyze_query_tags_format_and_label_errors(tmp_path):
    out = tmp_path / "o"
    res = _run(str(W / "custom_tags.jsonl"), "--out", str(out), "--no-plots")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "--query-tags" in res.output and "--format" in res.output
    res = _run(str(W / "custom_tags.jsonl"), "--query-tags", "<query>", "</query>", "--out", str(out), "--no-plots",
               "--n-boot", "10")
    assert res.exit_code == 0, res.output
    assert _nq(json.loads((out / "summary.json").read_text())["runs"]["custom_tags"]) == 2
    res = _run(str(W / "react_log.txt"), "--format", "react-log", "--out", str(out), "--no-plots", "--n-boot", "10")
    assert res.exit_code == 0, res.output
    res = _run(str(W / "react_log.txt"), str(W / "chat_messages.jsonl"), "--label", "only-one", "--out", str(out))
    assert res.exit_code == 2 and "one --label per run file" in res.output
    res = _run(str(W / "react_log.txt"), "--format", "xml", "--out", str(out))
    assert res.exit_code == 2 and "choose from" in res.output


def test_analyze_bad_lines_exit_2_or_are_skipped_with_lenient(tmp_path):
    good = {"input": "Question: q", "output": "<search>a</search><information>d</information>", "score": 1}
    p = tmp_path / "run.jsonl"
    p.write_bytes(json.dumps(good).encode() + b"\n" + b"[1, 2]\n" + b'{"input": "\xff"}\n'
                  + b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n" + json.dumps(good).encode() + b"\n")
    out = tmp_path / "o"
    res = _run(str(p), "--out", str(out), "--no-plots")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "run.jsonl, line 2" in " ".join(res.output.split())
    res = _run(str(p), "--lenient", "--out", str(out), "--no-plots", "--n-boot", "10")
    assert res.exit_code == 0, res.output
    assert "3 lines skipped" in res.output
    assert _nq(json.loads((out / "summary.json").read_text())["runs"]["run"]) == 2
    res = _run(str(tmp_path / "absent.jsonl"), "--out", str(out))
    assert res.exit_code == 2 and "does not exist" in res.output
