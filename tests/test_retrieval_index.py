"""Index directories: manifest, atomic writes, and a typed error for every way a directory can be wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchgym.errors import (
    ConfigError,
    IndexCorruptError,
    IndexMismatchError,
    IndexNotFoundError,
    IndexVersionError,
)
from searchgym.retrieval import (
    BM25Retriever,
    Passage,
    build_index,
    corpus_fingerprint,
    index_info,
    load_corpus,
    load_index,
)
from searchgym.retrieval.index import FORMAT_VERSION

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval" / "corpus.jsonl"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    return build_index(FIXTURE, tmp_path_factory.mktemp("ix") / "idx", show_progress=False, stemmer="english")


@pytest.fixture
def copy(index_dir, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(index_dir, tmp_path / "copy"))


def test_manifest_and_self_contained_directory(index_dir):
    info = index_info(index_dir)
    assert info["format_version"] == FORMAT_VERSION
    assert info["n_passages"] == 24
    assert set(info["backends"]) == {"bm25"}
    assert info["backends"]["bm25"]["tokenizer"]["stemmer"] == "english"
    assert info["corpus_fingerprint"] == corpus_fingerprint(load_corpus(FIXTURE))
    assert info["build_seconds"] >= 0 and info["created"]
    assert (index_dir / "passages.parquet").exists()
    r = load_index(index_dir, backend="numpy")
    assert isinstance(r, BM25Retriever)
    assert r.search("erupting volcanoes", 1)[0].id == "d9"  # stemming came back from the manifest
    assert not list(index_dir.rglob("*.pkl")) and not list(index_dir.rglob("*.pickle"))


def test_missing_directory_and_manifest(tmp_path, copy):
    with pytest.raises(IndexNotFoundError, match="index build"):
        load_index(tmp_path / "nowhere")
    (copy / "manifest.json").unlink()
    with pytest.raises(IndexNotFoundError, match="manifest.json"):
        load_index(copy)


def test_corrupt_manifest(copy):
    m = copy / "manifest.json"
    m.write_text(m.read_text()[:40])
    with pytest.raises(IndexCorruptError, match="manifest.json") as ei:
        load_index(copy)
    assert "searchgym index build" in str(ei.value)
    m.write_text(json.dumps({"hello": 1}))
    with pytest.raises(IndexCorruptError):
        load_index(copy)


def test_manifest_without_backends(copy):
    m = copy / "manifest.json"
    d = json.loads(m.read_text())
    d["backends"] = {}
    m.write_text(json.dumps(d))
    with pytest.raises(IndexCorruptError, match="backends"):
        load_index(copy)


def test_other_format_version(copy):
    m = copy / "manifest.json"
    d = json.loads(m.read_text())
    d["format_version"] = FORMAT_VERSION + 1
    m.write_text(json.dumps(d))
    with pytest.raises(IndexVersionError, match="format_version"):
        load_index(copy)
    with pytest.raises(IndexVersionError):
        index_info(copy)


def test_truncated_and_missing_files(copy):
    data = copy / "bm25" / "data.csc.index.npy"
    data.write_bytes(data.read_bytes()[:-16])
    with pytest.raises(IndexCorruptError, match="data.csc.index.npy"):
        load_index(copy)
    data.unlink()
    with pytest.raises(IndexNotFoundError, match="data.csc.index.npy"):
        load_index(copy)


def test_corrupt_passages_file_same_size(copy):
    p = copy / "passages.parquet"
    p.write_bytes(b"\0" * p.stat().st_size)  # same size, garbage content
    with pytest.raises(IndexCorruptError, match="passages.parquet"):
        load_index(copy)


def test_fingerprint_mismatch(index_dir):
    other = corpus_fingerprint([Passage("x", "", "another corpus")])
    with pytest.raises(IndexMismatchError, match="index build"):
        load_index(index_dir, expected_fingerprint=other)
    ok = load_index(index_dir, expected_fingerprint=index_info(index_dir)["corpus_fingerprint"], backend="numpy")
    assert len(ok.passages) == 24


def test_missing_backend_part(index_dir):
    with pytest.raises(IndexNotFoundError, match="--dense"):
        load_index(index_dir, kind="dense")
    with pytest.raises(ConfigError):
        load_index(index_dir, kind="tfidf")


def test_interrupted_build_leaves_nothing(tmp_path, monkeypatch):
    import searchgym.retrieval.bm25 as bm25mod

    def boom(self, d):
        (d / "partial.npy").parent.mkdir(parents=True, exist_ok=True)
        (d / "partial.npy").write_bytes(b"half")
        raise KeyboardInterrupt  # like Ctrl-C in the middle of writing

    monkeypatch.setattr(bm25mod.BM25Retriever, "_save_files", boom)
    with pytest.raises(KeyboardInterrupt):
        build_index(FIXTURE, tmp_path / "idx", show_progress=False)
    assert list(tmp_path.iterdir()) == []  # neither the index nor its temporary sibling


def test_existing_directory_needs_overwrite(tmp_path):
    out = build_index(FIXTURE, tmp_path / "idx", show_progress=False)
    with pytest.raises(ConfigError, match="overwrite"):
        build_index(FIXTURE, out, show_progress=False)
    build_index(load_corpus(FIXTURE)[:5], out, overwrite=True, show_progress=False)
    assert index_info(out)["n_passages"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # the old copy is gone
    with pytest.raises(ConfigError):
        build_index(FIXTURE, tmp_path / "x", bm25=False)
    with pytest.raises(ConfigError, match="unknown index parameters"):
        build_index(FIXTURE, tmp_path / "x", k3=1)
