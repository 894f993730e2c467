"""``searchgym analyze`` on small hostile inputs (issue 33, round 4): each gets a one-line typed error or a
correct answer, in bounded time and memory, run as a user would (the real CLI in a subprocess, peak RSS
measured from outside by ``conftest.run_measured``).

The bounds stated in docs/reliability.md ("Round 4: analyze inputs") are 10 s and 500 MB for an input under
1 MB on an idle machine; this machine is shared (2 cores, load 5-15), so the wall-clock checks here are only
the kill budget, and memory is checked at the stated bound.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from tests.hostile.conftest import PYTHON, no_traceback, run_measured
from tests.sweeps import first_fast

CLI = [PYTHON, "-m", "searchgym.cli", "analyze"]
MB = 1 << 20
RSS_MB = 500
KILL_S = 120  # a hang is the failure; the figures in the docs are from quiet runs


def _analyze(src: Path | str, out: Path, *extra: str, env: dict[str, str] | None = None,
             timeout: float = KILL_S) -> tuple[int, str, str, float, float]:
    return run_measured(CLI + [str(src), "--out", str(out), "--no-plots", "--n-boot", "5", *extra],
                        timeout=timeout, env={"MPLBACKEND": "Agg", **(env or {})})


def _one_line_error(rc: int, err: str, *needles: str) -> None:
    no_traceback(err)
    assert rc == 2, err[-2000:]
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, err
    text = " ".join(err.split())
    for n in needles:
        assert n in text, err


# ---------------------------------------------------------------------------------------------------------
# the attacks (each under 1 MB on disk unless said otherwise)

def gzip_bomb(d: Path, n: int = 1_000_000_000) -> Path:
    """A gzip of ``n`` newlines (under 1 MB compressed), written without holding them."""
    p = d / "bomb.jsonl.gz"
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\n" * (16 * MB)
    with p.open("wb") as fh:
        left = n
        while left > 0:
            fh.write(co.compress(chunk[:min(left, len(chunk))]))
            left -= len(chunk)
        fh.write(co.flush())
    return p


def cut_gzip(d: Path) -> Path:
    """2,000 records gzipped, cut at a flush point after the first 1,000 (a dump still being written)."""
    p = d / "cut.jsonl.gz"
    co = zlib.compressobj(6, zlib.DEFLATED, 31)
    rec = [json.dumps({"input": f"Question: q{i}?", "output": f"<search>q{i}</search><information>d</information>",
                       "score": 1}) + "\n" for i in range(2000)]
    data = co.compress("".join(rec[:1000]).encode()) + co.flush(zlib.Z_SYNC_FLUSH)
    p.write_bytes(data)  # (the other 1,000 records and the end marker never arrive)
    return p


def parquet_dictionary_bomb(d: Path) -> Path:
    """100,000 rows that all hold one 4 MB string, dictionary-encoded: a tiny file, 400 GB once decoded."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    big = "<search>x</search>" + "y" * (4 * MB)
    n = 100_000
    idx = pa.array([0] * n, pa.int32())
    t = pa.table({"input": pa.DictionaryArray.from_arrays(idx, pa.array(["Question: q"])),
                  "output": pa.DictionaryArray.from_arrays(idx, pa.array([big]))})
    p = d / "bomb.parquet"
    pq.write_table(t, p, compression="zstd")
    return p


def parquet_bad_timezone(d: Path) -> Path:
    """A timestamp column in a time zone no database knows: Arrow raises when the rows are built."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pa.table({"input": ["Question: q"], "output": ["<search>a</search><information>d</information>"],
                  "at": pa.array([0], pa.timestamp("s", tz="Mars/Olympus"))})
    p = d / "tz.parquet"
    pq.write_table(t, p)
    return p


def parquet_bad_date(d: Path) -> Path:
    """A date32 out of Python's range (year 1e6)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pa.table({"input": ["Question: q"], "output": ["<search>a</search><information>d</information>"],
                  "day": pa.array([400_000_000], pa.date32())})
    p = d / "date.parquet"
    pq.write_table(t, p)
    return p


def empty_objects_gz(d: Path, n: int = 31_000_000) -> Path:
    """One JSONL record holding ``n`` empty objects (93 MB), gzipped (about 90 KB)."""
    p = d / "objs.jsonl.gz"
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    with p.open("wb") as fh:
        fh.write(co.compress(b'{"input": "Question: q", "output": "<search>a</search>", "junk": ['))
        piece = b"{}," * (1 << 20)
        left = n
        while left > 0:
            k = min(left, 1 << 20)
            fh.write(co.compress(piece[:3 * k]))
            left -= k
        fh.write(co.compress(b"{}]}\n"))
        fh.write(co.flush())
    return p


def empty_objects_raw(d: Path, n: int = 3_000_000) -> Path:
    """The same record uncompressed, with 3M objects (6 MB): the cap on containers per record refuses it."""
    p = d / "objs.jsonl"
    p.write_bytes(b'{"input": "Question: q", "output": "<search>a</search>", "junk": [' + b"{}," * n + b"{}]}\n")
    return p


def wide_csv(d: Path, cols: int = 200_000, rows: int = 1_000) -> Path:
    p = d / "wide.csv"
    header = ",".join(f"c{i}" for i in range(cols))
    p.write_text(header + "\n" + "".join("a,b\n" for _ in range(rows)))
    return p


def blank_run(d: Path) -> Path:
    p = d / "blank.txt"
    p.write_text("x" + " " * MB + "\n" + " " * MB)
    return p


def loop_episode(d: Path, n: int = 80_000, distinct: bool = False) -> Path:
    """One verl record of ``n`` search turns: the same search n/4 times, one other, then the first again (an
    agent stuck in a loop; the element-wise re-emission check was quadratic on it), or ``n`` different ones."""
    parts = []
    for i in range(n):
        q = f"query number {i}" if distinct else ("the other query" if i == n // 4 else "the same query")
        parts.append(f"<search>{q}</search><information>Doc 1(Title: X) y</information>")
    p = d / ("distinct.jsonl" if distinct else "loop.jsonl")
    p.write_text(json.dumps({"input": "Question: who?", "output": "".join(parts) + "<answer>x</answer>",
                             "score": 1}) + "\n")
    return p


def one_observation_many_calls(d: Path, n: int = 6_000) -> Path:
    """``n`` <search> calls answered by one observation of ``n`` titles, then one more search."""
    calls = "".join(f"<search>place {i} founder</search>" for i in range(n))
    docs = "\n".join(f"Doc {i + 1}(Title: Place {i}) founded by F{i}." for i in range(n))
    out = calls + f"<information>{docs}</information><search>last</search><information>Doc 1(Title: L) z" \
                  "</information><answer>x</answer>"
    p = d / "fanout.jsonl"
    p.write_text(json.dumps({"input": "Question: who founded them?", "output": out, "score": 1}) + "\n")
    return p


def parallel_searchgym_step(d: Path, n: int = 6_000) -> Path:
    """One searchgym step of ``n`` parallel queries with ``n`` titles and doc ids, then one more step."""
    step = {"action": "", "kind": "search", "query": "q0", "queries": [f"q{i}" for i in range(n)],
            "titles": [f"T{i}" for i in range(n)], "doc_ids": [str(i) for i in range(n)]}
    last = {"action": "", "kind": "search", "query": "last", "queries": ["last"], "titles": ["L"], "doc_ids": ["x"]}
    traj = {"schema": 2, "episode_id": "e0", "question_id": "q", "question": "Which?", "answers": ["x"],
            "policy_step": 0, "steps": [step, last], "prediction": "x", "reward": 1.0, "em": 1}
    p = d / "parallel.jsonl"
    p.write_text(json.dumps(traj) + "\n")
    return p


def shared_sidecar(d: Path, n: int = 8_000) -> Path:
    """``n`` calls of one query, their results kept beside the text in one sidecar entry of ``n`` documents."""
    out = "<search>port elsin founder</search>" * n + "<answer>x</answer>"
    docs = [{"title": f"D{i}", "text": f"t{i}"} for i in range(n)]
    rec = {"input": "Question: who founded Port Elsin?", "output": out, "score": 1,
           "search_results": [{"query": "port elsin founder", "docs": docs}]}
    p = d / "sidecar.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    return p


# ---------------------------------------------------------------------------------------------------------
# the cases

@pytest.mark.slow  # a soak (about 8 s); .ci/run runs it
def test_a_gzip_bomb_is_refused_before_it_is_held(tmp_path):
    src = gzip_bomb(tmp_path)
    assert src.stat().st_size < MB
    rc, _out, err, rss, _ = _analyze(src, tmp_path / "a")
    _one_line_error(rc, err, "compression bomb")
    assert rss < RSS_MB, f"peak RSS {rss:.0f} MB"


def test_a_gzip_cut_at_a_flush_point_is_a_truncated_file(tmp_path):
    src = cut_gzip(tmp_path)
    for extra in ((), ("--strict",)):
        rc, _out, err, _, _ = _analyze(src, tmp_path / "a", *extra)
        assert rc == 2, err
        assert "ends before its end marker" in err and "cut" in err, err
        no_traceback(err)
    with gzip.open(src, "rb") as fh, pytest.raises(EOFError):  # (gzip itself: 1,000 records, then an error)
        fh.read()


def test_a_parquet_dictionary_bomb_is_refused(tmp_path):
    src = parquet_dictionary_bomb(tmp_path)
    assert src.stat().st_size < MB
    rc, _out, err, rss, _ = _analyze(src, tmp_path / "a")
    _one_line_error(rc, err, "bomb.parquet")
    assert rss < RSS_MB, f"peak RSS {rss:.0f} MB"


@pytest.mark.parametrize("make", [parquet_bad_timezone, parquet_bad_date], ids=["time zone", "date32"])
def test_arrow_errors_are_one_line(tmp_path, make):
    rc, _out, err, _, _ = _analyze(make(tmp_path), tmp_path / "a", "--strict")
    _one_line_error(rc, err, "not a readable Parquet file")


def test_31m_empty_objects_gzipped_are_refused(tmp_path):
    src = empty_objects_gz(tmp_path)
    assert src.stat().st_size < MB
    rc, _out, err, rss, _ = _analyze(src, tmp_path / "a")
    _one_line_error(rc, err, "objs.jsonl.gz")
    assert rss < RSS_MB, f"peak RSS {rss:.0f} MB"


def test_a_record_of_millions_of_empty_objects_is_refused(tmp_path):
    rc, _out, err, rss, _ = _analyze(empty_objects_raw(tmp_path), tmp_path / "a", "--strict")
    _one_line_error(rc, err, "line 1", "JSON objects and arrays")
    assert rss < RSS_MB, f"peak RSS {rss:.0f} MB"


def test_dev_zero_is_refused(tmp_path):
    rc, _out, err, rss, _secs = _analyze("/dev/zero", tmp_path / "a", "--strict", timeout=60)
    _one_line_error(rc, err, "is a device")
    assert rss < RSS_MB


def test_an_endless_pipe_stops_at_the_budget(tmp_path):
    """``yes | searchgym analyze /dev/stdin``: read until the budget, then one line."""
    import subprocess

    yes = subprocess.Popen(["yes", '{"input": "Question: q", "output": "x"}'], stdout=subprocess.PIPE)
    try:
        fd = yes.stdout.fileno()
        proc = subprocess.run(CLI + [f"/dev/fd/{fd}", "--out", str(tmp_path / "a"), "--no-plots", "--max-bytes",
                                     "20M", "--strict"], pass_fds=(fd,), capture_output=True, text=True,
                              timeout=KILL_S, check=False)
    finally:
        yes.kill()
        yes.wait()
    _one_line_error(proc.returncode, proc.stderr, "input budget", "--max-bytes")


@pytest.mark.parametrize("value", first_fast(["abc", "-5", "0"]))
def test_a_bad_budget_is_one_config_line(tmp_path, value):
    src = parallel_searchgym_step(tmp_path, 3)
    rc, _out, err, _, _ = _analyze(src, tmp_path / "a", env={"SEARCHGYM_ANALYZE_MAX_BYTES": value})
    _one_line_error(rc, err, "SEARCHGYM_ANALYZE_MAX_BYTES")
    rc, _out, err, _, _ = _analyze(src, tmp_path / "b", "--max-bytes", value)
    _one_line_error(rc, err, "--max-bytes")


def test_a_small_budget_refuses_a_larger_file(tmp_path):
    src = parallel_searchgym_step(tmp_path, 3000)
    rc, _out, err, _, _ = _analyze(src, tmp_path / "a", "--max-bytes", "10K")
    _one_line_error(rc, err, "input budget")
    rc, _out, err, _, _ = _analyze(src, tmp_path / "b", "--max-bytes", "1M")
    assert rc == 0, err


def test_a_csv_of_200000_columns_is_refused(tmp_path):
    rc, _out, err, rss, _ = _analyze(wide_csv(tmp_path), tmp_path / "a")
    _one_line_error(rc, err, "200,000 columns")
    assert rss < RSS_MB


def test_a_csv_row_holds_its_non_empty_cells(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text('question,output,score,extra\nwho?,"<search>a</search><information>d</information>",,\n'
                 'who?,"<search>b</search><information>d</information>",1,\n')
    rc, _out, err, _, _ = _analyze(p, tmp_path / "a")
    assert rc == 0, err  # an empty score is no score (it was float("") before: a wrong-field-type error)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert next(iter(summary["runs"].values()))["n_queries"] == 2


def test_blank_runs_do_not_slow_detection(tmp_path):
    rc, _out, err, rss, _ = _analyze(blank_run(tmp_path), tmp_path / "a", "--strict", timeout=60)
    _one_line_error(rc, err, "cannot tell the format")
    assert rss < RSS_MB


@pytest.mark.slow
def test_an_80000_turn_loop_reads_like_80000_distinct_searches(tmp_path):
    """Linear: the looping episode costs about what as many distinct searches cost (it was 4x, 75 s)."""
    times = {}
    for distinct in (False, True):
        src = loop_episode(tmp_path, distinct=distinct)
        rc, _out, err, _rss, secs = _analyze(src, tmp_path / f"a{distinct}", timeout=300)
        assert rc == 0, err[-2000:]
        summary = json.loads((tmp_path / f"a{distinct}" / "summary.json").read_text())
        assert next(iter(summary["runs"].values()))["n_queries"] == 80_000
        times[distinct] = secs
    print(f"80,000 turns: loop {times[False]:.1f} s, distinct {times[True]:.1f} s")


def test_a_20000_turn_loop_is_read_with_every_search(tmp_path):
    from searchgym.diversity.readers import read_run

    run = read_run(loop_episode(tmp_path, 20_000))
    (ep,) = run.episodes
    assert len(ep.queries) == 20_000 and run.read_stats.reemitted == 0
    assert ep.queries[5_000] == "the other query" and set(ep.queries[:5_000]) == {"the same query"}


@pytest.mark.parametrize("make,n", first_fast([(one_observation_many_calls, 6_001),
                                               (parallel_searchgym_step, 6_001), (shared_sidecar, 8_000)],
                                              ids=["one observation", "searchgym step", "sidecar"]))
def test_evidence_shared_by_many_queries_is_held_once(tmp_path, make, n):
    src = make(tmp_path)
    assert src.stat().st_size < MB
    rc, _out, err, rss, _ = _analyze(src, tmp_path / "a")
    assert rc == 0, err[-2000:]
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert next(iter(summary["runs"].values()))["n_queries"] == n
    assert rss < RSS_MB, f"peak RSS {rss:.0f} MB"


def test_shared_evidence_reaches_every_query(tmp_path):
    from searchgym.diversity.readers import read_run

    (ep,) = read_run(one_observation_many_calls(tmp_path, 50)).episodes
    assert len(ep.queries) == 51 and ep.titles[0][:2] == ["Place 0", "Place 1"] and len(ep.titles[49]) == 50
    assert ep.evidence[0] is ep.evidence[49] and ep.titles[0] is ep.titles[49]
    (ep,) = read_run(shared_sidecar(tmp_path, 40)).episodes
    assert len(ep.queries) == 40 and ep.titles[39] == [f"D{i}" for i in range(40)]
    assert ep.evidence[0] is ep.evidence[39]


def test_a_cut_last_line_is_skipped_with_a_warning(tmp_path):
    good = [json.dumps({"input": f"Question: q{i}?", "output": f"<search>s{i}</search><information>d"
                        "</information>", "score": 1}) for i in range(30)]
    src = tmp_path / "live.jsonl"
    src.write_text("\n".join(good) + "\n" + good[0][:40])  # still being written: line 31 is cut
    rc, out, err, _, _ = _analyze(src, tmp_path / "a")
    assert rc == 0, err
    assert "30 queries" in out
    assert "live.jsonl, line 31" in " ".join(out.split())
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert next(iter(summary["runs"].values()))["warning_counts"]["cut_last_line"] == 1
    src.write_text("\n".join(good) + "\n" + good[0][:40] + "\n")  # a complete bad line is still an error
    rc, out, err, _, _ = _analyze(src, tmp_path / "b", "--strict")
    _one_line_error(rc, err, "line 31")
