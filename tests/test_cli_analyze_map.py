"""``searchgym analyze --map / --map-file / --explain``: a JMESPath field map reads any JSON dump; --explain
names where each field was found and, for a file nothing is found in, its keys and a --map that works."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.diversity.readers import read_run

T = Path(__file__).parent / "fixtures" / "diversity" / "tree"
W = Path(__file__).parent / "fixtures" / "diversity" / "wild"


def _run(*args: str):
    return CliRunner().invoke(app, ["analyze", *args])


def _nq(s: dict) -> int:
    return s.get("n_queries", s.get("queries"))


def test_map_the_issue_example_on_steps_one_level_down(tmp_path):
    out = tmp_path / "o"
    res = _run(str(T / "steps_down.json"), "--map", "queries=trajectory.steps[?action==`search`].query",
               "--map", "evidence=trajectory.steps[?action==`search`].retrieved_documents", "--out", str(out),
               "--no-plots", "--n-boot", "10")
    assert res.exit_code == 0, res.output
    assert _nq(json.loads((out / "summary.json").read_text())["runs"]["steps_down"]) == 3
    assert "read steps_down: map (json-array; calls: map 3)" in res.output


def test_map_file_json_and_yaml_and_episode_expression(tmp_path):
    nested = tmp_path / "batch.json"  # one record holding many episodes under "data"
    nested.write_text(json.dumps({"data": [
        {"q": "Who founded Port Elsin?", "hops": [{"kw": "Port Elsin"}, {"kw": "Oren Vale"}], "ok": True},
        {"q": "Where was Mara Quill born?", "hops": [{"kw": "Mara Quill"}], "ok": False}]}))
    fm = {"episode": "data", "queries": "hops[*].kw", "question": "q", "success": "ok"}
    (tmp_path / "m.json").write_text(json.dumps(fm))
    (tmp_path / "m.yaml").write_text("".join(f"{k}: '{v}'\n" for k, v in fm.items()))
    for f in ("m.json", "m.yaml"):
        run = read_run(nested, field_map=json.loads((tmp_path / "m.json").read_text()))
        assert [(e.queries, e.question, e.success) for e in run.episodes] == [
            (["Port Elsin", "Oren Vale"], "Who founded Port Elsin?", True),
            (["Mara Quill"], "Where was Mara Quill born?", False)]
        res = _run(str(nested), "--map-file", str(tmp_path / f), "--out", str(tmp_path / f"o{f}"), "--no-plots",
                   "--n-boot", "10")
        assert res.exit_code == 0, res.output
        assert "2 episodes, 3 queries" in res.output


def test_map_errors_are_one_line(tmp_path):
    for bad in ("queries", "nope=a.b", "queries=a[?"):
        res = _run(str(T / "steps_down.json"), "--map", bad, "--out", str(tmp_path / "o"))
        assert res.exit_code == 2 and "Traceback" not in res.output and "--map" in res.output, res.output
    (tmp_path / "m.json").write_text("[1]")
    res = _run(str(T / "steps_down.json"), "--map-file", str(tmp_path / "m.json"), "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "must hold an object" in res.output


def test_explain_names_fields_readings_and_the_map_that_reproduces_them():
    res = _run(str(T / "tool_items.jsonl"), "--explain")
    assert res.exit_code == 0, res.output
    assert "format tree" in res.output
    assert "queries    <- result[?tool_name==`\"search\"`].arguments" in res.output
    assert "question   <- question" in res.output and "1 refused by the tool" in res.output
    m = re.search(r"map that reproduces this reading: (.*)", res.output)
    args = shlex.split(m.group(1))
    fm = dict(a.split("=", 1) for a in args[1::2])
    run = read_run(T / "tool_items.jsonl", field_map=fm)
    assert run.episodes[0].queries == ["Port Elsin founder", "Oren Vale"]
    res = _run(str(W / "react_traj.jsonl"), "--explain")  # a named format: the competing readings are shown
    assert res.exit_code == 0 and "format react" in res.output and "reading text at" in res.output


def test_explain_on_an_unreadable_file_suggests_a_map_that_reads_it(tmp_path):
    f = T / "unnamed_hops.jsonl"
    res = _run(str(f), "--out", str(tmp_path / "o"), "--no-plots")
    assert res.exit_code == 2 and "--explain" in res.output  # the format error points to --explain
    res = _run(str(f), "--explain")
    assert res.exit_code == 0, res.output
    assert "agent.hops[0].kw: 'Port Elsin founder'" in res.output  # the key tree with candidate strings
    m = re.search(r"suggested: (.*)", res.output)
    args = shlex.split(m.group(1))
    assert args[1] == "queries=agent.hops[*].kw"
    res = _run(str(f), *args, "--out", str(tmp_path / "o2"), "--no-plots", "--n-boot", "10")
    assert res.exit_code == 0, res.output
    run = read_run(f, field_map=dict(a.split("=", 1) for a in args[1::2]))
    assert [(e.queries, e.question, e.success) for e in run.episodes] == [
        (["Port Elsin founder", "Oren Vale"], "Who founded Port Elsin?", True),
        (["Mara Quill birthplace"], "Where was Mara Quill born?", False)]
