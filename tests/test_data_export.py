"""Export a world in Search-R1 / verl / FlashRAG shapes and load every file back."""

from __future__ import annotations

import json

import pytest

from searchgym.data import SPLITS, World, export_world, load_qa
from searchgym.data.export import SEARCH_R1_PROMPT, search_r1_prompt


@pytest.fixture(scope="module")
def small_world() -> World:
    return World.generate(seed=5, n_entities=250, n_questions=300)


def _core(q):
    m = q.metadata
    return (q.id, q.question, q.answers, q.supporting_ids, m["family"], m["hops"], m["split"], m["phrasing"],
            m["bridge"], m["entity_types"], m["answer_type"])


def test_export_round_trip(tmp_path, small_world):
    import pyarrow.parquet as pq

    from searchgym.retrieval import load_corpus

    files = export_world(small_world, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["corpus.jsonl", "world.json"] + [f"{s}.parquet" for s in SPLITS]
                           + [f"{s}.jsonl" for s in SPLITS])  # no temp files left behind
    assert set(files) >= {"corpus", "world.json"}
    corpus = load_corpus(tmp_path / "corpus.jsonl")
    assert [(p.id, p.title, p.text) for p in corpus] == [(p.id, p.title, p.text) for p in small_world.passages]
    first = json.loads((tmp_path / "corpus.jsonl").read_text().splitlines()[0])
    assert set(first) == {"id", "contents"} and first["contents"].startswith('"')
    for split in SPLITS:
        want = [_core(q) for q in small_world.split(split)]
        assert want
        assert [_core(q) for q in load_qa(tmp_path / f"{split}.parquet")] == want
        assert [_core(q) for q in load_qa(tmp_path / f"{split}.jsonl")] == want
    table = pq.read_table(tmp_path / "train.parquet")
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info", "id", "question",
            "golden_answers"} <= set(table.column_names)
    row = table.slice(0, 1).to_pylist()[0]
    q0 = small_world.split("train")[0]
    assert row["prompt"][0]["role"] == "user"
    assert row["prompt"][0]["content"] == search_r1_prompt(q0.question)
    q = q0.question if q0.question.endswith("?") else q0.question + "?"
    assert row["prompt"][0]["content"].endswith("Question: " + q + "\n")
    assert row["reward_model"] == {"style": "rule", "ground_truth": {"target": q0.answers}}
    assert row["extra_info"]["split"] == "train" and row["extra_info"]["index"] == 0
    assert row["extra_info"]["supporting_ids"] == q0.supporting_ids
    manifest = json.loads((tmp_path / "world.json").read_text())
    assert manifest["fingerprint"] == small_world.fingerprint() and manifest["seed"] == 5
    # a whole export directory loads by split too
    assert [q.id for q in load_qa(tmp_path, split="dev")] == [q.id for q in small_world.split("dev")]


def test_prompt_is_search_r1s_template():
    assert search_r1_prompt("who wrote hamlet") == SEARCH_R1_PROMPT.format(question="who wrote hamlet?")
    # Search-R1's rule exactly (append "?"), the same text the environment renders.
    assert search_r1_prompt("Name the founder of X.").endswith("Question: Name the founder of X.?\n")
    assert SEARCH_R1_PROMPT.startswith("Answer the given question. You must conduct reasoning inside <think>")


def test_cli_export_world(tmp_path):
    from typer.testing import CliRunner

    from searchgym.cli import app

    res = CliRunner().invoke(app, ["data", "export-world", "--out", str(tmp_path / "w"), "--seed", "2",
                                   "--size", "600"])
    assert res.exit_code == 0, res.output
    corpus_lines = (tmp_path / "w" / "corpus.jsonl").read_text().splitlines()
    assert 500 <= len(corpus_lines) <= 700
    assert json.loads((tmp_path / "w" / "world.json").read_text())["seed"] == 2
    res = CliRunner().invoke(app, ["data", "info", str(tmp_path / "w" / "shift_family.parquet")])
    assert res.exit_code == 0 and "comparison" in res.output
    res = CliRunner().invoke(app, ["data", "info", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 2 and "no such QA file" in " ".join(res.output.split())


def test_cli_pool(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from searchgym.cli import app
    from searchgym.retrieval import load_corpus

    fix = Path(__file__).parent / "fixtures" / "data"
    res = CliRunner().invoke(app, ["data", "pool", str(fix / "hotpotqa_dev_distractor.json"),
                                   str(fix / "musique_ans_dev.jsonl"), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    corpus = load_corpus(tmp_path / "corpus.jsonl")
    qs = load_qa(tmp_path / "questions.jsonl")
    assert len(qs) == 4 and len(corpus) == 3 + 3 + 3 + 3 - 2  # "Ed Wood" three times, kept once
    ids = {p.id for p in corpus}
    assert all(q.supporting_ids and set(q.supporting_ids) <= ids for q in qs)
