"""The README's install block works in a fresh venv outside the checkout, and `searchgym` is then on the PATH.

The block (the one tests/test_docs_examples.py skips: "installs into a fresh venv") runs as written, line by line in one bash, in a copy of the
checkout in a temporary directory, with no PYTHONPATH. Offline and fast: pip gets ``PIP_NO_INDEX=1`` and no build
isolation (pip's environment variables, the README's lines stay as they are), and right after the block makes its
venv, a ``.pth`` line points it at this venv's site-packages for the dependencies (torch, transformers, ...; the
venv's own bundled setuptools, older than torch wants, is removed so this venv's is found). A
path in a ``.pth`` file is added to ``sys.path`` but the ``.pth`` files inside it are not run, so this venv's
editable searchgym stays invisible: the test checks that ``searchgym`` is imported from the copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".venv*", ".git", "site", "runs", "dist", "build", "*.egg-info", "__pycache__",
                              ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules")


def install_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- docs-test: skip installs into a fresh venv[^\n]*-->\n```bash\n(.*?)\n```", text,
                  flags=re.DOTALL)
    assert m, "README.md has no install block (a bash block marked 'docs-test: skip installs into a fresh venv')"
    return m.group(1)


def test_the_install_block_is_what_a_reader_types():
    block = install_block()
    assert "python3 -m venv .venv" in block and "source .venv/bin/activate" in block
    assert 'pip install -e ".[all]"' in block and block.strip().endswith("searchgym --help")
    torch_line = next(ln for ln in block.splitlines() if "torch" in ln)
    assert "torch==2.13.0" in torch_line and block.index("torch==") < block.index("pip install -e")
    assert "pip install searchgym\n" not in (ROOT / "README.md").read_text()  # not on PyPI: never claim it


@pytest.mark.slow
def test_the_readme_install_commands_give_a_searchgym_command(tmp_path):
    clone = tmp_path / "searchgym"
    shutil.copytree(ROOT, clone, ignore=SKIP)
    deps = sysconfig.get_paths()["purelib"]
    lines = []
    for ln in install_block().splitlines():
        lines.append(ln)
        if "-m venv .venv" in ln:  # the fresh venv sees this venv's packages as its dependencies
            lines.append(f'echo {deps} > "$(python -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")'
                         '/_deps_for_test.pth"')
            lines.append("python -m pip uninstall -y -q setuptools")  # venv's old bundled one would shadow it
    lines.append('python -c "import searchgym, sys; print(\'FROM\', searchgym.__file__, sys.prefix)"')
    lines.append("command -v searchgym")
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    env.update(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1",
               PATH=f"{Path(shutil.which('python3') or '/usr/bin/python3').parent}{os.pathsep}/usr/bin:/bin")
    r = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=900,
                       stdin=subprocess.DEVNULL, check=False)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "Usage:" in out and "rollout" in out and "analyze" in out  # searchgym --help
    frm = re.search(r"FROM (\S+) (\S+)", out)
    assert frm and frm[1].startswith(str(clone)) and frm[2] == str(clone / ".venv"), out[-3000:]
    assert f"{clone}/.venv/bin/searchgym" in out
