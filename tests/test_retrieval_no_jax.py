"""bm25s probes JAX when it is imported, which on a GPU machine lets JAX take most of the GPU's memory (seen on an
H200). searchgym imports bm25s with JAX hidden, unless the process imported JAX itself. A stand-in `jax` package
on the path records whether anything imported it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import sys
    {pre}
    from searchgym.retrieval import Passage, build_retriever
    r = build_retriever([Passage("0", "", "rivers of the north"), Passage("1", "", "lakes of the south")])
    assert [h.id for h in r.search("rivers", k=1)] == ["0"]
    import bm25s.selection
    print("jax-available-to-bm25s", bm25s.selection.JAX_IS_AVAILABLE)
""")


def _fake_jax(root: Path) -> Path:
    pkg = root / "jax"
    pkg.mkdir()
    marker = root / "jax-imported"
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    (pkg / "lax.py").write_text("def top_k(x, k):\n    return x[:k]\n")
    return marker


def _run(tmp_path: Path, pre: str) -> str:
    env = {"PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parents[1]}", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(pre=pre)], capture_output=True, text=True, env=env,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_building_and_searching_bm25_never_imports_jax(tmp_path):
    marker = _fake_jax(tmp_path)
    out = _run(tmp_path, "")
    assert not marker.exists(), "bm25s's import woke JAX"
    assert "jax-available-to-bm25s False" in out


def test_a_process_that_imported_jax_keeps_it(tmp_path):
    marker = _fake_jax(tmp_path)
    out = _run(tmp_path, "import jax")
    assert marker.exists() and "jax-available-to-bm25s True" in out
