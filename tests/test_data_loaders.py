"""QA loaders on fixtures in each format, malformed records (strict and lenient), pooled corpora."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.data import (
    detect_format,
    load_2wiki,
    load_flashrag_jsonl,
    load_hotpotqa,
    load_musique,
    load_qa,
    load_search_r1_parquet,
    pooled_corpus,
)
from searchgym.data.export import SEARCH_R1_PROMPT
from searchgym.data.loaders import QAFileNotFoundError
from searchgym.errors import ConfigError, CorpusFormatError, DatasetUnavailableError

FIX = Path(__file__).parent / "fixtures" / "data"


def _with_bad_line(src: Path, dst: Path, bad: str, at: int) -> Path:
    """Copy a jsonl fixture, inserting ``bad`` so that it becomes line ``at`` (1-based)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    lines.insert(at - 1, bad)
    dst.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dst


# -- FlashRAG -------------------------------------------------------------------------------------
def test_flashrag_jsonl():
    qs = load_flashrag_jsonl(FIX / "flashrag_nq_test.jsonl")
    assert [q.id for q in qs] == ["test_0", "test_1", "test_2", "test_3"]
    assert qs[2].answers == ["Olivia", "MFSK"]
    assert qs[0].answers == ["Wilhelm Conrad R\u00f6ntgen"]
    assert qs.report.loaded == 4 and qs.report.skipped == 0
    assert detect_format(FIX / "flashrag_nq_test.jsonl") == "flashrag"
    assert [q.id for q in load_qa(FIX / "flashrag_nq_test.jsonl")] == [q.id for q in qs]


@pytest.mark.parametrize("bad", ['{"id": "x", "question": "no answers here"}', '{"id": "y", "question": ',
                                 '["not", "an", "object"]'])
def test_flashrag_malformed_line_strict_and_lenient(tmp_path, bad):
    path = _with_bad_line(FIX / "flashrag_nq_test.jsonl", tmp_path / "nq.jsonl", bad, at=3)
    with pytest.raises(CorpusFormatError) as err:
        load_flashrag_jsonl(path)
    assert err.value.line == 3 and err.value.path == str(path)
    assert "line 3" in str(err.value) and "nq.jsonl" in str(err.value)
    qs = load_qa(path, lenient=True)
    assert len(qs) == 4 and qs.report.skipped == 1
    assert "line 3" in qs.report.errors[0]


# -- Search-R1 / verl parquet ---------------------------------------------------------------------
def _write_search_r1_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _sr1_row(i: int, question: str, target, *, with_original: bool, split: str = "test") -> dict:
    row = {
        "data_source": "nq",
        "prompt": [{"role": "user", "content": SEARCH_R1_PROMPT.format(question=question)}],
        "ability": "fact-reasoning",
        "reward_model": {"style": "rule", "ground_truth": {"target": target}},
        "extra_info": {"split": split, "index": i},
    }
    if with_original:
        row.update(id=f"{split}_{i}", question=question.rstrip("?"), golden_answers=target)
    return row


def test_search_r1_parquet_with_original_columns(tmp_path):
    rows = [_sr1_row(0, "who wrote hamlet?", ["William Shakespeare", "Shakespeare"], with_original=True),
            _sr1_row(1, "capital of france?", ["Paris"], with_original=True, split="train")]
    path = _write_search_r1_parquet(tmp_path / "nq.parquet", rows)
    qs = load_search_r1_parquet(path)
    assert [q.id for q in qs] == ["test_0", "train_1"]
    assert qs[0].question == "who wrote hamlet"  # the original column wins over the prompt
    assert qs[0].answers == ["William Shakespeare", "Shakespeare"]
    assert qs[0].metadata["data_source"] == "nq" and qs[0].metadata["split"] == "test"
    assert [q.id for q in load_qa(path, split="train")] == ["train_1"]
    assert detect_format(path) == "search_r1"


def test_search_r1_parquet_prompt_only_and_answer_split(tmp_path):
    # DeepResearcher-style: ground_truth.target is one string joined with <|answer_split|>
    rows = [_sr1_row(0, "who wrote hamlet?", "William Shakespeare<|answer_split|>Shakespeare", with_original=False),
            _sr1_row(1, "when did ww2 end?", "1945", with_original=False)]
    path = _write_search_r1_parquet(tmp_path / "dr.parquet", rows)
    qs = load_qa(path)
    assert qs[0].question == "who wrote hamlet?"  # extracted from the prompt after "Question:"
    assert qs[0].answers == ["William Shakespeare", "Shakespeare"]
    assert qs[1].answers == ["1945"]
    assert qs[0].id == "nq-test-0"


def test_search_r1_parquet_list_target_with_answer_split_items(tmp_path):
    rows = [_sr1_row(0, "q one?", ["a<|answer_split|>b", "c"], with_original=False)]
    qs = load_qa(_write_search_r1_parquet(tmp_path / "x.parquet", rows))
    assert qs[0].answers == ["a", "b", "c"]


def test_search_r1_parquet_malformed_row(tmp_path):
    good = _sr1_row(0, "who wrote hamlet?", ["Shakespeare"], with_original=False)
    bad = dict(_sr1_row(1, "no answer?", ["x"], with_original=False), reward_model=None)
    path = _write_search_r1_parquet(tmp_path / "bad.parquet", [good, bad, good])
    with pytest.raises(CorpusFormatError) as err:
        load_qa(path)
    assert err.value.line == 2 and "bad.parquet" in str(err.value) and "row 2" in str(err.value)
    qs = load_qa(path, lenient=True)
    assert len(qs) == 2 and qs.report.skipped == 1


def test_not_a_parquet_file(tmp_path):
    p = tmp_path / "broken.parquet"
    p.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(CorpusFormatError, match="broken.parquet"):
        load_qa(p)


# -- HotpotQA ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hotpotqa_dev_distractor.json", "hotpotqa_train.jsonl"])
def test_hotpotqa_json_and_jsonl(name):
    qs = load_hotpotqa(FIX / name)
    assert detect_format(FIX / name) == "hotpotqa"
    assert len(qs) == 2
    q = qs[0]
    assert q.id == "5a8b57f25542995d1e6f1371" and q.answers == ["yes"]
    assert q.metadata["family"] == "comparison" and q.metadata["hops"] == 2
    assert q.metadata["supporting_titles"] == ["Scott Derrickson", "Ed Wood"]
    assert q.metadata["level"] == "hard" and q.metadata["source"] == "hotpotqa"
    assert qs[1].metadata["supporting_facts"] == [["Kiss and Tell (1945 film)", 0], ["Shirley Temple", 0],
                                                  ["Shirley Temple", 1]]


def test_hotpotqa_json_array_malformed_record_names_its_line(tmp_path):
    recs = json.loads((FIX / "hotpotqa_dev_distractor.json").read_text())
    del recs[1]["context"]
    path = tmp_path / "hp.json"
    path.write_text(json.dumps(recs, indent=1))
    starts = [i + 1 for i, line in enumerate(path.read_text().splitlines()) if line == " {"]
    start = starts[1]  # the line where record 2 starts
    with pytest.raises(CorpusFormatError) as err:
        load_hotpotqa(path)
    assert err.value.line == start and "context" in str(err.value)
    qs = load_hotpotqa(path, lenient=True)
    assert len(qs) == 1 and qs.report.skipped == 1


def test_hotpotqa_json_syntax_error_names_its_line(tmp_path):
    path = tmp_path / "hp.json"
    text = json.dumps(json.loads((FIX / "hotpotqa_dev_distractor.json").read_text()), indent=1)
    lines = text.splitlines()
    lines[5] = lines[5] + " ]]"  # break the JSON on line 6
    path.write_text("\n".join(lines))
    with pytest.raises(CorpusFormatError) as err:
        load_qa(path)
    assert err.value.line == 6


def test_hotpotqa_jsonl_malformed_line(tmp_path):
    path = _with_bad_line(FIX / "hotpotqa_train.jsonl", tmp_path / "hp.jsonl",
                          '{"_id": "z", "question": "q?", "answer": "a", "context": [], "supporting_facts": []}',
                          at=2)
    with pytest.raises(CorpusFormatError, match="line 2"):
        load_qa(path)
    assert load_qa(path, lenient=True).report.skipped == 1


# -- MuSiQue -------------------------------------------------------------------------------------
def test_musique():
    qs = load_musique(FIX / "musique_ans_dev.jsonl")
    assert detect_format(FIX / "musique_ans_dev.jsonl") == "musique"
    q, q3 = qs
    assert q.answers == ["Miquette Giraudy", "Miquette", "M. Giraudy"]
    assert q.metadata["hops"] == 2 and q.metadata["family"] == "2hop"
    assert q.metadata["supporting_titles"] == ["Green", "Ed Wood"]
    assert q3.metadata["hops"] == 3 and q3.metadata["family"] == "3hop1"


def test_musique_malformed_line(tmp_path):
    path = _with_bad_line(FIX / "musique_ans_dev.jsonl", tmp_path / "mq.jsonl",
                          '{"id": "2hop__1_2", "question": "q?", "answer": "a", "paragraphs": [{"title": "t"}]}', at=1)
    with pytest.raises(CorpusFormatError) as err:
        load_qa(path)
    assert err.value.line == 1
    qs = load_qa(path, lenient=True)
    assert len(qs) == 2 and qs.report.skipped == 1


# -- 2WikiMultihopQA -----------------------------------------------------------------------------
def test_2wiki():
    qs = load_2wiki(FIX / "2wiki_dev.json")
    assert detect_format(FIX / "2wiki_dev.json") == "2wiki"
    assert [q.metadata["family"] for q in qs] == ["compositional", "comparison"]
    assert qs[0].answers == ["Ma\u0142gorzata Braunek"]
    assert qs[0].metadata["hops"] == 3 and qs[0].metadata["source"] == "2wiki"
    assert qs[0].metadata["evidences"][0] == ["Polish-Russian War", "director", "Xawery \u017bu\u0142awski"]


def test_2wiki_malformed_record(tmp_path):
    recs = json.loads((FIX / "2wiki_dev.json").read_text())
    recs[0]["supporting_facts"] = [["only a title"]]
    path = tmp_path / "2w.json"
    path.write_text(json.dumps(recs))
    with pytest.raises(CorpusFormatError, match="supporting fact"):
        load_2wiki(path)
    assert load_2wiki(path, lenient=True).report.skipped == 1


# -- detection, names, errors --------------------------------------------------------------------
def test_detection_errors(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "0", "contents": "\\"T\\"\\ntext"}\n')
    with pytest.raises(CorpusFormatError, match="corpus file"):
        load_qa(corpus)
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"foo": 1}\n')
    with pytest.raises(CorpusFormatError, match="format"):
        load_qa(odd)
    with pytest.raises(QAFileNotFoundError):
        load_qa(tmp_path / "missing.parquet")
    with pytest.raises(ConfigError):
        load_qa(FIX / "flashrag_nq_test.jsonl", format="nope")
    with pytest.raises(ConfigError, match="split"):
        load_qa(FIX / "hotpotqa_train.jsonl", split="train")


def test_directory_of_split_files(tmp_path):
    shutil.copy(FIX / "flashrag_nq_test.jsonl", tmp_path / "test.jsonl")
    shutil.copy(FIX / "flashrag_nq_test.jsonl", tmp_path / "dev.jsonl")
    assert len(load_qa(tmp_path)) == 8
    assert len(load_qa(tmp_path, split="dev")) == 4


def test_world_by_name():
    from searchgym.data import default_world

    assert load_qa("world", split="test") == default_world().split("test")
    assert len(load_qa("world:0")) == len(default_world().questions)


def test_hf_dataset_offline_is_a_clear_error():
    """Runs in a subprocess so the offline switches are read when ``datasets`` is imported."""
    pytest.importorskip("datasets")
    code = ("from searchgym.data import load_hf_dataset\n"
            "from searchgym.errors import DatasetUnavailableError\n"
            "try:\n"
            "    load_hf_dataset('searchgym-no-such-org/no-such-dataset', 'train')\n"
            "except DatasetUnavailableError as e:\n"
            "    print('TYPED:', e)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    assert "TYPED:" in out.stdout, out.stderr[-2000:]
    assert "no-such-dataset" in out.stdout and "offline" in out.stdout
    assert issubclass(DatasetUnavailableError, ConnectionError)


# -- pooled corpus -------------------------------------------------------------------------------
def test_pooled_corpus_dedups_and_maps_supporting_facts():
    files = [FIX / "hotpotqa_dev_distractor.json", FIX / "musique_ans_dev.jsonl", FIX / "2wiki_dev.json"]
    passages, questions = pooled_corpus(files)
    keys = [(p.title, p.text) for p in passages]
    assert len(keys) == len(set(keys))
    assert [p.id for p in passages] == [str(i) for i in range(len(passages))]
    # "Ed Wood" appears in both HotpotQA records and (whitespace-different) in MuSiQue: one passage
    assert sum(p.title == "Ed Wood" for p in passages) == 1
    raw = 3 + 3 + 3 + 3 + 3 + 2
    assert len(passages) == raw - 2
    by_id = {p.id: p for p in passages}
    qmap = {q.id: q for q in questions}
    assert len(questions) == 6
    hp = qmap["5a8b57f25542995d1e6f1371"]
    assert [by_id[i].title for i in hp.supporting_ids] == ["Scott Derrickson", "Ed Wood"]
    mq = qmap["2hop__13548_13529"]
    assert [by_id[i].title for i in mq.supporting_ids] == ["Green", "Ed Wood"]
    ed = next(p for p in passages if p.title == "Ed Wood")
    assert ed.id in hp.supporting_ids and ed.id in mq.supporting_ids
    tw = qmap["8813f87c0bdd11eba7f7acde48001122"]
    assert len(tw.supporting_ids) == 3
    assert "Polish film directed by" in by_id[tw.supporting_ids[0]].text


def test_pooled_corpus_rejects_files_without_paragraphs_and_duplicate_ids():
    with pytest.raises(ConfigError, match="paragraphs"):
        pooled_corpus([FIX / "flashrag_nq_test.jsonl"])
    with pytest.raises(CorpusFormatError, match="twice"):
        pooled_corpus([FIX / "hotpotqa_dev_distractor.json", FIX / "hotpotqa_train.jsonl"])
    _, questions = pooled_corpus([FIX / "hotpotqa_dev_distractor.json", FIX / "hotpotqa_train.jsonl"],
                                 lenient=True)
    assert len(questions) == 2
