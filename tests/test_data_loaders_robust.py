"""Malformed QA and corpus files: non-UTF-8 bytes, deep nesting, wrong shapes, broken gzip are typed errors
naming file and line (skipped and counted when lenient); the IRCoT HotpotQA layout loads."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.data.loaders import cli_message, detect_format, load_qa, pooled_corpus
from searchgym.errors import CorpusFormatError
from searchgym.retrieval.corpus import load_corpus

FIX = Path(__file__).parent / "fixtures" / "data"
IRCOT = FIX / "ircot_hotpotqa_dev.jsonl"
GOOD = json.dumps({"id": "q1", "question": "Who?", "golden_answers": ["A"]}).encode() + b"\n"
DEEP = b"[" * 100_000 + b"]" * 100_000 + b"\n"


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("bad,why", [(b'{"id": "q2", "question": "Wh\xff\xfeo?", "golden_answers": ["B"]}\n',
                                      "UTF-8"),
                                     (DEEP, "nested too deeply"),
                                     (b'{"id": "q2", "question": "x", "golden_answers": [' + DEEP[:-1] + b']}\n',
                                      "nested too deeply")])
def test_jsonl_bad_line_strict_names_line_lenient_skips(tmp_path, bad, why):
    p = _write(tmp_path / "qa.jsonl", GOOD + bad + GOOD.replace(b"q1", b"q3"))
    with pytest.raises(CorpusFormatError, match=why) as e:
        load_qa(p, format="flashrag")
    assert e.value.line == 2 and str(p) in str(e.value)
    qs = load_qa(p, format="flashrag", lenient=True)
    assert [q.id for q in qs] == ["q1", "q3"] and qs.report.skipped == 1


def test_non_utf8_first_line_still_detects_or_names_the_line(tmp_path):
    p = _write(tmp_path / "qa.jsonl", b'\xff\xfe{"x": 1}\n' + GOOD)
    with pytest.raises(CorpusFormatError):
        load_qa(p)
    assert [q.id for q in load_qa(p, format="flashrag", lenient=True)] == ["q1"]


def test_json_array_file_damage_names_the_line(tmp_path):
    rec = b'{"_id": "a", "question": "q", "answer": "x", "context": [["T", ["s"]]], "supporting_facts": []}'
    p = _write(tmp_path / "h.json", b"[\n" + rec + b",\n" + rec.replace(b'"q"', b'"\xc3\x28"') + b"\n]")
    with pytest.raises(CorpusFormatError, match="UTF-8") as e:
        load_qa(p)
    assert e.value.line == 3
    p = _write(tmp_path / "d.json", b"[\n" + rec + b",\n" + DEEP + b"]")
    with pytest.raises(CorpusFormatError, match="nested too deeply") as e:
        load_qa(p, format="hotpotqa")
    assert e.value.line == 3


def test_wrong_shapes_are_malformed_records_not_tracebacks(tmp_path):
    recs = [{"_id": "a", "question": "q", "answer": "x", "context": [["T", ["s"]]],
             "supporting_facts": [["T", "not-an-int"]]},
            {"_id": "b", "question": "q", "answer": "x", "context": [["T", ["s"]]], "supporting_facts": [["T", 0]]}]
    p = _write(tmp_path / "h.jsonl", "\n".join(json.dumps(r) for r in recs).encode())
    with pytest.raises(CorpusFormatError, match="line 1"):
        load_qa(p, format="hotpotqa")
    qs = load_qa(p, format="hotpotqa", lenient=True)
    assert [q.id for q in qs] == ["b"] and qs.report.skipped == 1


def test_broken_gzip_is_a_format_error(tmp_path):
    data = gzip.compress(GOOD * 50)
    p = _write(tmp_path / "qa.jsonl.gz", data[: len(data) // 2])
    with pytest.raises(CorpusFormatError, match="truncated"):
        load_qa(p, format="flashrag")


def test_load_corpus_deep_nesting_and_lenient(tmp_path):
    good = b'{"id": "1", "contents": "\\"T\\"\\ntext"}\n'
    p = _write(tmp_path / "c.jsonl", good + DEEP + b'{"id": "2", "contents": "\xff"}\n' + good.replace(b'"1"', b'"3"'))
    with pytest.raises(CorpusFormatError, match="nested too deeply") as e:
        load_corpus(p)
    assert e.value.line == 2
    ps = load_corpus(p, lenient=True)
    assert [x.id for x in ps] == ["1", "3"] and ps.skipped == 2 and "line 3" in ps.errors[1]


# -- IRCoT --------------------------------------------------------------------------------------------
def test_ircot_layout_is_detected_and_loaded():
    assert detect_format(IRCOT) == "ircot"
    qs = load_qa(IRCOT)
    assert qs.report.format == "ircot" and len(qs) == 4
    by = {q.id: q for q in qs}
    assert by["5a7a06935542990198eaf050"].answers == ["yes"]
    assert by["5a7a06935542990198eaf050"].metadata["supporting_titles"] == ["Ed Wood", "Scott Derrickson"]
    assert by["5a85ea095542994775f606a8"].answers == ["13"]            # answers_objects[].number
    assert by["5ab3b0bf5542992ade7c6e39"].answers == ["4 July 1998"]   # answers_objects[].date


def test_ircot_pooled_corpus_has_gold_ids():
    passages, questions = pooled_corpus(IRCOT, format="ircot")
    assert len(passages) == 7  # the repeated "Ed Wood" / "Launch Day" paragraphs are pooled once
    titles = {p.id: p.title for p in passages}
    q = next(q for q in questions if q.id == "5a879ab05542996e4f30887e")
    assert [titles[i] for i in q.supporting_ids] == ["Kiss and Tell (1945 film)", "Shirley Temple"]


def test_ircot_malformed_answers_objects(tmp_path):
    rec = json.loads(IRCOT.read_text().splitlines()[0])
    rec["answers_objects"] = [{"spans": [{"nested": 1}]}]
    p = _write(tmp_path / "i.jsonl", (json.dumps(rec) + "\n" + IRCOT.read_text()).encode())
    with pytest.raises(CorpusFormatError, match="line 1"):
        load_qa(p)
    assert load_qa(p, lenient=True).report.skipped == 1


# -- CLI ----------------------------------------------------------------------------------------------
def test_cli_message_names_flags():
    assert cli_message("fix it or load with lenient=True to skip") == "fix it or load with --lenient to skip"
    assert cli_message("pass format= one of a, b") == "pass --format one of a, b"


def test_data_info_bad_file_exit_2_names_cli_flags(tmp_path):
    p = _write(tmp_path / "qa.jsonl", GOOD + DEEP)
    r = CliRunner().invoke(app, ["data", "info", str(p)])
    assert r.exit_code == 2 and r.exc_info[0] is SystemExit
    assert "--lenient" in r.output and "lenient=True" not in r.output and "line 2" in r.output
    r = CliRunner().invoke(app, ["data", "info", str(p), "--lenient"])
    assert r.exit_code == 0 and "skipped 1" in r.output


def test_data_pool_and_rollout_take_format(tmp_path):
    r = CliRunner().invoke(app, ["data", "pool", str(IRCOT), "--out", str(tmp_path / "pool"), "--format", "ircot"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["data", "pool", str(IRCOT), "--out", str(tmp_path / "p2"), "--format", "musique"])
    assert r.exit_code == 2 and "line 1" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["rollout", "--agent", "question", "-n", "4", "--dataset", str(IRCOT),
                                 "--format", "ircot", "--corpus", str(tmp_path / "pool" / "corpus.jsonl"),
                                 "--no-progress", "--summary-json", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "s.json").read_text())["episodes"] == 4
    r = CliRunner().invoke(app, ["rollout", "--agent", "question", "-n", "2", "--dataset", str(IRCOT),
                                 "--format", "flashrag", "--corpus", str(tmp_path / "pool" / "corpus.jsonl"),
                                 "--no-progress"])
    assert r.exit_code == 2 and "--lenient" in r.output and "Traceback" not in r.output
