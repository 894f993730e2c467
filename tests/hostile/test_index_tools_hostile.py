"""Issue 33: hostile inputs to the index tools (``index split``, ``import-faiss``, a resumed sharded build), each
run through the real CLI in a subprocess with peak RSS measured from outside: a one-line typed error or a
correct answer, never a traceback, a file read from outside the index, or a silently wrong index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searchgym.retrieval import Passage, build_index, load_index
from tests.sweeps import first_fast

from .conftest import SEARCHGYM, no_traceback, run_measured

BUDGET_S = 120      # the wall-clock guard of one CLI run on a loaded 2-core machine (the bound is 10 s unloaded)
RSS_MB = 500        # peak RSS of the whole CLI process


def _passages(n: int = 60) -> list[Passage]:
    return [Passage(str(i), f"Title {i}", f"alpha beta gamma passage number {i} word{i % 7} w{i % 3}")
            for i in range(n)]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_index(_passages(), tmp_path_factory.mktemp("sharded") / "idx", shards=3, show_progress=False)


def _one_line_error(rc: int, err: str, peak: float, *words: str) -> str:
    assert rc != 0, err
    no_traceback(err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for w in words:
        assert w in err.replace("\n", " "), err
    assert peak < RSS_MB, peak
    return lines[0]


# --- index split ------------------------------------------------------------------------------------------
def _edit_sharded(m: dict, d: Path, attack: str) -> None:
    e = m["backends"]["bm25_sharded"]
    if attack == "n_1e9":
        e["shards"][0]["n"] = 10**9
    elif attack == "spec_string":
        e["shards"][0] = "shard-000"
    elif attack == "vocab_absolute":
        e["vocab_file"] = "/etc/passwd"
    elif attack == "vocab_parent":
        e["vocab_file"] = "../other/bm25_sharded/vocab.json"
    elif attack == "dir_parent":
        e["shards"][0]["dir"] = "../other/bm25_sharded/shards/000"
    elif attack == "checksum":  # scores x100 in one shard: the file no longer matches its checksum
        import numpy as np

        f = d / e["shards"][0]["dir"] / "data.npy"
        a = np.load(f)
        np.save(f, a * 100)
        m["files"][str(f.relative_to(d))] = f.stat().st_size  # a consistent size: only the checksum tells


@pytest.mark.parametrize("attack,words", first_fast([
    ("n_1e9", ["do not cover"]),
    ("spec_string", ["cannot be read", "rebuild"]),
    ("vocab_absolute", ["outside the index directory"]),
    ("vocab_parent", ["outside the index directory"]),
    ("dir_parent", ["outside the index directory"]),
    ("checksum", ["checksum"]),
]))
def test_index_split_refuses_a_hostile_source(tmp_path: Path, sharded: Path, attack: str, words: list[str]):
    shutil.copytree(sharded, tmp_path / "other")  # what the ../other paths name: a real, valid index
    src = tmp_path / "idx"
    shutil.copytree(sharded, src)
    m = json.loads((src / "manifest.json").read_text())
    _edit_sharded(m, src, attack)
    (src / "manifest.json").write_text(json.dumps(m))
    rc, _, err, peak, _ = run_measured([SEARCHGYM, "index", "split", str(src), "--out", str(tmp_path / "out")],
                                       timeout=BUDGET_S)
    _one_line_error(rc, err, peak, *words)
    assert not list((tmp_path / "out").glob("shard-*")) if (tmp_path / "out").exists() else True


def test_index_split_carries_the_sources_checksums(tmp_path: Path, sharded: Path):
    from searchgym.retrieval.split import split_sharded_index

    dirs = split_sharded_index(sharded, tmp_path / "out")
    src_ck = json.loads((sharded / "manifest.json").read_text())["checksums"]["files"]
    shard0 = json.loads((dirs[0] / "manifest.json").read_text())
    spec = json.loads((sharded / "manifest.json").read_text())["backends"]["bm25_sharded"]["shards"][0]
    assert shard0["checksums"]["files"]["bm25_sharded/shards/000/data.npy"] == src_ck[f"{spec['dir']}/data.npy"]
    assert shard0["checksums"]["files"]["bm25_sharded/vocab.json"] == src_ck["bm25_sharded/vocab.json"]
    whole = load_index(sharded)
    parts = [load_index(d) for d in dirs]  # verified: the carried checksums hold
    hits = sorted((h for p in parts for h in p.search("alpha word3", 5)), key=lambda h: (-h.score, int(h.id)))[:5]
    assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in whole.search("alpha word3", 5)]


# --- a resumed sharded build -----------------------------------------------------------------------------------
QUERIES = ["alpha word3", "passage number 17", "w2 gamma", "beta word6 w1"]


def _interrupted_build(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A corpus file and a sharded build of it stopped after its first shard: (corpus, out, work dir)."""
    from searchgym.retrieval.sharded import build_sharded_index

    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in _passages()))
    out = tmp_path / "ix"

    def stop(i: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_sharded_index(src, out, shards=3, show_progress=False, _after_shard=stop)
    return src, out, tmp_path / ".ix.building"


def _edit_state(work: Path, attack: str) -> None:
    p = work / "state.json"
    s = json.loads(p.read_text())
    if attack == "n_1e6":
        s["pass1"]["n"] = 10**6
    elif attack == "n_many":
        s["pass1"]["n"] = "many"
    elif attack == "avgdl_nan":
        s["pass1"]["avgdl"] = float("nan")
    elif attack == "avgdl_wrong":
        s["pass1"]["avgdl"] = s["pass1"]["avgdl"] * 3
    elif attack == "terms_cut":
        t = work / "tmp" / "terms.i32"
        t.write_bytes(t.read_bytes()[:-12])
    elif attack == "shard_dir_outside":
        s["shards"]["0"]["dir"] = "../../elsewhere"
    elif attack == "shards_list":
        s["shards"] = [1]
    elif attack == "deep":
        p.write_text("[" * 100_000 + "]" * 100_000)
        return
    p.write_text(json.dumps(s))


@pytest.mark.parametrize("attack", first_fast(["n_1e6", "n_many", "avgdl_nan", "avgdl_wrong", "terms_cut",
                                               "shard_dir_outside", "shards_list", "deep"]))
def test_a_resumed_build_with_a_hostile_state_starts_afresh(tmp_path: Path, attack: str):
    src, out, work = _interrupted_build(tmp_path)
    _edit_state(work, attack)
    rc, _, err, peak, _ = run_measured([SEARCHGYM, "index", "build", str(src), "--out", str(out), "--shards", "3"],
                                       timeout=BUDGET_S)
    assert rc == 0, err
    no_traceback(err)
    assert peak < RSS_MB, peak
    assert "starting afresh" in err or attack in ("deep", "shard_dir_outside")  # a bad shard record: that shard redone
    fresh = build_index(_passages(), tmp_path / "fresh", shards=3, show_progress=False)
    a, b = load_index(out), load_index(fresh)
    got, want = a.batch_search(QUERIES, 5), b.batch_search(QUERIES, 5)
    assert all(want) and [[(h.id, h.score) for h in r] for r in got] == [[(h.id, h.score) for h in r] for r in want]


# --- import-faiss ----------------------------------------------------------------------------------------------
N_VEC = 200


def _tree_rss_run(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    """Like conftest.run_measured, but the peak is of the process and its children together (import-faiss reads
    the file in a child process): (returncode, stderr, peak MB)."""
    import subprocess
    import time

    import psutil

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ps, peak, t0 = psutil.Process(proc.pid), 0, time.monotonic()
    import threading

    err: list[str] = []
    th = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    th.start()
    while proc.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [ps, *ps.children(recursive=True)]))
        except psutil.Error:
            pass
        if time.monotonic() - t0 > timeout:
            proc.kill()
            proc.wait(10)
            pytest.fail(f"{cmd[:3]} ran past its {timeout:g} s budget")
        time.sleep(0.02)
    th.join(10)
    return proc.returncode, "".join(err), peak / 2**20


@pytest.fixture(scope="module")
def faiss_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus of N_VEC passages and FAISS files over N_VEC vectors: intact ones and hostile ones."""
    pytest.importorskip("faiss")
    return make_faiss_files(tmp_path_factory.mktemp("faiss"))


def make_faiss_files(d: Path) -> Path:
    import struct

    import faiss
    import numpy as np

    (d / "c.jsonl").write_text("".join(json.dumps({"id": str(i), "title": f"T{i}", "text": f"passage {i}"}) + "\n"
                                      for i in range(N_VEC)))
    x = np.random.default_rng(0).standard_normal((N_VEC, 16)).astype("float32")
    flat = faiss.IndexFlatIP(16)
    flat.add(x)
    faiss.write_index(flat, str(d / "flat.index"))
    b = (d / "flat.index").read_bytes()
    (d / "truncated_header.index").write_bytes(b[:30])  # FAISS itself dies on this one (SIGSEGV)
    (d / "truncated.index").write_bytes(b[: len(b) // 2])
    (d / "lying_ntotal.index").write_bytes(b[:8] + struct.pack("<q", 10**6) + b[16:])
    for i, name in ((0, "flipped_fourcc"), (4, "flipped_dim")):
        bb = bytearray(b)
        bb[i] ^= 0x7F
        (d / f"{name}.index").write_bytes(bytes(bb))
    h = faiss.IndexHNSWFlat(16, 8)
    h.add(x)
    faiss.write_index(h, str(d / "hnsw.index"))
    faiss.rev_swig_ptr(h.hnsw.neighbors.data(), h.hnsw.neighbors.size())[3] = 10**6
    faiss.write_index(h, str(d / "hnsw_neighbours.index"))
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(16), 16, 4, faiss.METRIC_INNER_PRODUCT)
    ivf.train(x)
    ivf.add(x)
    faiss.write_index(ivf, str(d / "ivf.index"))
    inv = ivf.invlists
    lst = next(i for i in range(4) if inv.list_size(i))
    faiss.rev_swig_ptr(inv.get_ids(lst), inv.list_size(lst))[0] = N_VEC + 5  # a row past the corpus
    faiss.write_index(ivf, str(d / "ivf_ids.index"))
    return d


def _import(d: Path, name: str, out: Path) -> tuple[int, str, float]:
    return _tree_rss_run([SEARCHGYM, "index", "import-faiss", str(d / f"{name}.index"), "--corpus",
                          str(d / "c.jsonl"), "--model", "all-MiniLM-L6-v2", "--out", str(out)], timeout=BUDGET_S)


@pytest.mark.parametrize("name,words", first_fast([
    ("truncated_header", "FAISS died reading it"), ("truncated", "FAISS cannot read it"),
    ("lying_ntotal", "FAISS cannot read it"), ("flipped_fourcc", "not recognized"),
    ("flipped_dim", "FAISS cannot read it"), ("hnsw_neighbours", "out of range"),
    ("ivf_ids", "ids outside rows"),
]))
def test_import_faiss_refuses_a_hostile_file(tmp_path: Path, faiss_files: Path, name: str, words: str):
    rc, err, peak = _import(faiss_files, name, tmp_path / "out")
    line = _one_line_error(rc, err, peak, words)
    assert "is not a" in line and str(faiss_files / name) in line  # names the file given, not a temporary copy
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.tmp-*"))


@pytest.mark.parametrize("name", ["flat", "hnsw", "ivf"])
def test_import_faiss_takes_an_intact_file(tmp_path: Path, faiss_files: Path, name: str):
    rc, err, peak = _import(faiss_files, name, tmp_path / "out")
    assert rc == 0, err
    assert peak < RSS_MB, peak
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["backends"]["dense_faiss"]["ntotal"] == N_VEC and m["n_passages"] == N_VEC
