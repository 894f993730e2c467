"""``searchgym analyze``: the read line and the table agree on "malformed" (one definition: ``n_malformed``,
unparseable search calls plus queries classed malformed), and ``--max-bytes`` bounds the input."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from searchgym.cli import app

LONG = " ".join(f"word{i}" for i in range(40))  # a query over 32 words is classed malformed


def _write(path) -> None:
    recs = [{"input": "Question: who founded Port Elsin?",
             "output": "<search></search><search>Port Elsin founder</search><information>Doc 1(Title: Port Elsin) "
                       "founded by Oren Vale</information>"
                       f"<search>{LONG}</search><information>nothing</information><answer>Oren Vale</answer>",
             "score": 1},
            {"input": "Question: who wrote Ravenhill?",
             "output": "<search>Ravenhill author</search><information>Doc 1(Title: Ravenhill) by Mara Quill"
                       "</information><answer>Mara Quill</answer>", "score": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_the_read_line_and_the_table_show_one_malformed_figure(tmp_path):
    src = tmp_path / "run.jsonl"
    _write(src)
    res = CliRunner().invoke(app, ["analyze", str(src), "--out", str(tmp_path / "a"), "--no-plots", "--n-boot", "5"])
    assert res.exit_code == 0, res.output
    block = json.loads((tmp_path / "a" / "summary.json").read_text())["runs"]["run"]
    assert block["n_malformed"] == 2  # one empty <search></search>, one 40-word query
    out = " ".join(res.output.split())
    assert "2 malformed (1 unparseable calls, 1 queries classed malformed)" in out
    row = next(ln for ln in res.output.splitlines() if ln.strip().startswith("│ run"))
    cells = [c.strip() for c in row.strip().strip("│").split("│")]
    assert cells[:4] == ["run", "2", "3", "2"], cells  # episodes, queries, malformed


def test_max_bytes_bounds_the_input(tmp_path):
    src = tmp_path / "run.jsonl"
    _write(src)
    res = CliRunner().invoke(app, ["analyze", str(src), "--out", str(tmp_path / "a"), "--no-plots",
                                   "--max-bytes", "100", "--strict"])
    assert res.exit_code == 2
    assert re.search(r"more than 100 bytes, the input budget; raise it with --max-bytes", " ".join(res.output.split()))
    res = CliRunner().invoke(app, ["analyze", str(src), "--out", str(tmp_path / "b"), "--no-plots", "--n-boot", "5",
                                   "--max-bytes", "1K"])
    assert res.exit_code == 0, res.output
