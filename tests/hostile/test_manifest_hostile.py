"""Issue 24, items 5 and 6: a manifest from someone else's index directory cannot make searchgym read files
outside that directory, nor run a tokenizer regex that backtracks catastrophically. Both are refused on load
with IndexCorruptError, whether checksums are verified or not, through the real loader and the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from searchgym.errors import IndexCorruptError
from searchgym.retrieval import Passage, build_index, load_index
from searchgym.retrieval.tokenize import SAFE_PATTERNS, Tokenizer

EVIL_PATTERN = r"(a+)+$"  # catastrophic backtracking on "aaaa…b"


@pytest.fixture
def ix(tmp_path: Path) -> Path:
    ps = [Passage(str(i), f"Title {i}", f"alpha beta gamma passage number {i} word{i % 5}") for i in range(30)]
    return build_index(ps, tmp_path / "idx", show_progress=False)


def _edit(ix: Path, fn) -> None:
    m = json.loads((ix / "manifest.json").read_text())
    fn(m)
    (ix / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("where", ["../outside.parquet", "/etc/passwd", "sub/../../outside.parquet"])
def test_passages_file_outside_the_directory_is_refused(ix: Path, verify: bool, where: str):
    outside = ix.parent / "outside.parquet"
    outside.write_bytes((ix / "passages.parquet").read_bytes())  # a valid file: only containment refuses it
    _edit(ix, lambda m: m.__setitem__("passages_file", where))
    with pytest.raises(IndexCorruptError, match="outside the index directory"):
        load_index(ix, verify=verify, backend="numpy")


@pytest.mark.parametrize("verify", [True, False])
def test_a_symlink_out_of_the_directory_is_refused(ix: Path, verify: bool):
    outside = ix.parent / "secret.parquet"
    outside.write_bytes((ix / "passages.parquet").read_bytes())
    (ix / "passages.parquet").unlink()
    (ix / "passages.parquet").symlink_to(outside)
    with pytest.raises(IndexCorruptError, match="outside the index directory"):
        load_index(ix, verify=verify, backend="numpy")


@pytest.mark.parametrize("verify", [True, False])
def test_a_listed_file_outside_the_directory_is_refused(ix: Path, verify: bool):
    def add(m):
        m["files"]["../../x"] = 1
        m["checksums"]["files"]["../../x"] = "0"
    _edit(ix, add)
    with pytest.raises(IndexCorruptError, match="outside the index directory"):
        load_index(ix, verify=verify, backend="numpy")


def test_passages_file_must_be_a_listed_file(ix: Path):
    (ix / "other.parquet").write_bytes((ix / "passages.parquet").read_bytes())
    _edit(ix, lambda m: m.__setitem__("passages_file", "other.parquet"))
    with pytest.raises(IndexCorruptError, match="not one of the index's listed files"):
        load_index(ix, verify=False, backend="numpy")


@pytest.mark.parametrize("verify", [True, False])
def test_a_hostile_tokenizer_pattern_is_refused_on_load(ix: Path, verify: bool):
    _edit(ix, lambda m: m["backends"]["bm25"]["tokenizer"].__setitem__("pattern", EVIL_PATTERN))
    t0 = time.monotonic()
    with pytest.raises(IndexCorruptError, match="known safe patterns"):
        load_index(ix, verify=verify, backend="numpy")
    assert time.monotonic() - t0 < 30  # refused up front, never run on a query


def test_every_safe_pattern_loads_and_searches_quickly(ix: Path):
    for pat in sorted(SAFE_PATTERNS):
        Tokenizer(pattern=pat).tokenize("a" * 5000 + "b")  # linear patterns: instant on the attack string


def test_the_cli_refuses_the_hostile_index_with_a_clear_error(ix: Path):
    _edit(ix, lambda m: m.__setitem__("passages_file", "../outside.parquet"))
    exe = str(Path(sys.executable).with_name("searchgym"))
    r = subprocess.run([exe, "search", str(ix), "alpha", "--no-verify"], check=False, capture_output=True,
                       text=True,
                       timeout=120)
    assert r.returncode == 1 and "outside the index directory" in r.stderr and "Traceback" not in r.stderr, r.stderr
