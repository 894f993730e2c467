"""Corpus reading: formats, streaming, and the typed errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.errors import CorpusFormatError, DuplicateIdError
from searchgym.retrieval import (
    Passage,
    corpus_fingerprint,
    iter_corpus,
    load_corpus,
    parse_contents,
    write_jsonl,
)
from searchgym.retrieval.corpus import CorpusNotFoundError

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval" / "corpus.jsonl"


def test_search_r1_jsonl_splits_title_and_text():
    ps = load_corpus(FIXTURE)
    assert len(ps) == 24
    assert ps[0] == Passage("d0", "Evan Morris", ps[0].text)
    assert ps[0].text.startswith("Evan Morris was a lobbyist")
    assert [p.id for p in ps] == [f"d{i}" for i in range(24)]  # row order is index order
    # round trip through the Search-R1 form
    assert ps[3].contents == json.loads(FIXTURE.read_text().splitlines()[3])["contents"]


def test_parse_contents_edge_cases():
    assert parse_contents('"A \\"b\\""\ntext\nmore') == ('A \\"b\\"', "text\nmore")
    assert parse_contents("no title line") == ("", "no title line")
    assert parse_contents("Unquoted\nbody") == ("Unquoted", "body")


def test_title_text_jsonl_parquet_and_streaming(tmp_path):
    rows = [{"id": 1, "title": "T1", "text": "alpha"}, {"id": "2", "text": "beta"}]
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")  # blank line is skipped
    assert load_corpus(f) == [Passage("1", "T1", "alpha"), Passage("2", "", "beta")]
    it = iter_corpus(f)
    assert next(it) == Passage("1", "T1", "alpha")  # a generator: streams

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", "b"], "contents": ['"X"\nxx', '"Y"\nyy']}), tmp_path / "c.parquet")
    assert load_corpus(tmp_path / "c.parquet") == [Passage("a", "X", "xx"), Passage("b", "Y", "yy")]


def test_hf_dataset_from_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"id": ["0", "1"], "contents": ['"A"\naaa', '"B"\nbbb']})
    ds.save_to_disk(str(tmp_path / "hf"))
    assert load_corpus(tmp_path / "hf") == [Passage("0", "A", "aaa"), Passage("1", "B", "bbb")]


def test_malformed_line_names_file_and_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"id": "0", "contents": "\\"T\\"\\nx"}\n{"id": "1", "contents": \n')
    with pytest.raises(CorpusFormatError) as ei:
        load_corpus(f)
    assert ei.value.line == 2 and str(f) in str(ei.value) and "line 2" in str(ei.value)

    f.write_text('{"id": "0", "body": "x"}\n')
    with pytest.raises(CorpusFormatError, match="no 'contents' or 'text'"):
        load_corpus(f)
    f.write_text('["not", "an", "object"]\n')
    with pytest.raises(CorpusFormatError, match="line 1"):
        load_corpus(f)


def test_duplicate_ids_rejected(tmp_path):
    f = tmp_path / "dup.jsonl"
    f.write_text("".join(json.dumps({"id": i, "text": "x"}) + "\n" for i in ["a", "b", "a"]))
    with pytest.raises(DuplicateIdError, match="'a'") as ei:
        load_corpus(f)
    assert ei.value.line == 3


def test_non_utf8_names_byte_offset(tmp_path):
    f = tmp_path / "latin1.jsonl"
    good = b'{"id": "0", "text": "ok"}\n'
    bad = '{"id": "1", "text": "caf\u00e9"}\n'.encode("latin-1")
    f.write_bytes(good + bad)
    with pytest.raises(CorpusFormatError) as ei:
        load_corpus(f)
    assert ei.value.offset == len(good) + bad.index(b"\xe9")
    assert "byte offset" in str(ei.value) and str(f) in str(ei.value)


def test_missing_corpus_and_offline_hub_name(tmp_path):
    with pytest.raises(CorpusNotFoundError):
        load_corpus(tmp_path / "nope.jsonl")
    with pytest.raises(CorpusFormatError):
        load_corpus(tmp_path / "corpus.txt", format="csv")
    pytest.importorskip("datasets")
    # A hub name while offline: a typed error, not a hang or a traceback from deep inside `datasets`.
    code = ("from searchgym.retrieval import load_corpus\n"
            "from searchgym.retrieval.corpus import CorpusNotFoundError\n"
            "try:\n    load_corpus('no-such-owner/no-such-corpus')\n"
            "except CorpusNotFoundError as e:\n    print('TYPED', e)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120)
    assert "TYPED" in out.stdout and "no-such-owner/no-such-corpus" in out.stdout, out.stderr[-2000:]


def test_fingerprint_and_write_jsonl(tmp_path):
    ps = load_corpus(FIXTURE)
    assert corpus_fingerprint(ps) == corpus_fingerprint(load_corpus(FIXTURE))
    changed = [*ps[:-1], Passage(ps[-1].id, ps[-1].title, ps[-1].text + "!")]
    assert corpus_fingerprint(changed) != corpus_fingerprint(ps)
    out = write_jsonl(ps, tmp_path / "out.jsonl")
    assert load_corpus(out) == ps
