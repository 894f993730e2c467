"""Writing index directories: --overwrite only replaces an index, stale temp dirs of killed builds are removed,
the final name is never empty during a swap, and directories respect the umask (not 0700)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym import dirswap
from searchgym.errors import ConfigError
from searchgym.retrieval import build_index, load_index

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval" / "corpus.jsonl"


def _build(out: Path, **kw) -> Path:
    return build_index(FIXTURE, out, show_progress=False, **kw)


def test_overwrite_refuses_a_directory_that_is_not_an_index(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(ConfigError, match="not a searchgym index"):
        _build(out, overwrite=True)
    assert (out / "thesis.tex").read_text() == "years of work"
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ConfigError, match="a file"):
        _build(f, overwrite=True)
    assert f.read_text() == "x"


def test_overwrite_replaces_an_index_and_an_empty_dir_is_fine(tmp_path):
    out = tmp_path / "idx"
    out.mkdir()
    _build(out)  # empty directory: no --overwrite needed
    with pytest.raises(ConfigError, match="already exists"):
        _build(out)
    _build(out, overwrite=True, k1=1.2)
    assert load_index(out, backend="numpy").k1 == 1.2
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no temp or old copies left behind


def test_index_directories_respect_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        out = _build(tmp_path / "idx")
    finally:
        os.umask(old)
    for d in (out, out / "bm25"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o755, oct(d.stat().st_mode)


def test_stale_temp_dirs_of_killed_builds_are_removed(tmp_path):
    out = tmp_path / "idx"
    # A build killed with -9: its temp dir names a pid that no longer exists.
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    dead_pid = int(child.stdout)
    stale = Path(str(dirswap.tmp_name(out)).replace(f"-{os.getpid()}-", f"-{dead_pid}-"))
    stale.mkdir()
    (stale / "passages.parquet").write_bytes(b"half")
    # A build still running (this process's parent, alive): must be left alone.
    live = Path(str(dirswap.tmp_name(out)).replace(f"-{os.getpid()}-", f"-{os.getppid()}-"))
    live.mkdir()
    unrelated = tmp_path / ".other.tmp-x"
    unrelated.mkdir()
    _build(out)
    assert not stale.exists()
    assert live.exists() and unrelated.exists()


def test_swap_without_exchange_restores_the_old_copy_after_a_crash(tmp_path):
    """The two-rename fallback: a writer killed between the renames leaves only ``.old-``; readers find it and
    the next cleanup puts it back instead of deleting the only complete copy."""
    out = _build(tmp_path / "idx")
    parked = dirswap.old_name(out)
    parked = parked.with_name(parked.name.replace(f"-{os.getpid()}-", "-999999999-"))  # a dead writer
    os.replace(out, parked)  # what the fallback's first rename does before the kill
    assert load_index(out, backend="numpy").search("volcano", 1)  # readers fall back to the parked copy
    dirswap.cleanup_siblings(out, is_complete=lambda p: (p / "manifest.json").is_file())
    assert (out / "manifest.json").is_file() and not parked.exists()


def test_swap_never_leaves_the_final_name_empty(tmp_path):
    final, tmp = tmp_path / "d", tmp_path / "d.tmp"
    final.mkdir()
    (final / "v").write_text("1")
    tmp.mkdir()
    (tmp / "v").write_text("2")
    exchanged = dirswap.exchange(tmp, final)
    if not exchanged and not sys.platform.startswith("linux"):
        pytest.skip("renameat2(RENAME_EXCHANGE) is Linux-only; the two-rename fallback is tested below")
    assert exchanged, "renameat2(RENAME_EXCHANGE) failed on Linux: swaps would fall back to two renames"
    assert (final / "v").read_text() == "2" and (tmp / "v").read_text() == "1"
    dirswap.swap_into_place(tmp, final)  # swap back through the public helper
    assert (final / "v").read_text() == "1" and not tmp.exists()


def test_two_rename_fallback_replaces_and_cleans_up(tmp_path):
    final, tmp = tmp_path / "d", tmp_path / "d.tmp"
    for d, v in ((final, "1"), (tmp, "2")):
        d.mkdir()
        (d / "v").write_text(v)
    dirswap.swap_into_place(tmp, final, _exchange=False)
    assert (final / "v").read_text() == "2" and [p.name for p in tmp_path.iterdir()] == ["d"]
