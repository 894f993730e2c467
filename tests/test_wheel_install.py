"""The built wheel works outside the checkout: ``python -m build``, then a fresh venv that has only the wheel.

Speed: the fresh venv is made ``--without-pip`` and the wheel goes in with ``--no-deps`` through this venv's pip
(``pip --python``); the dependencies (numpy, bm25s, gymnasium, ...) come from this venv's site-packages through
a ``.pth`` line. A path in a ``.pth`` file is added to ``sys.path`` but the ``.pth`` files inside it are not run,
so this venv's editable install of the checkout stays invisible: ``searchgym`` is imported from the wheel (the
test checks ``searchgym.__file__``). Everything runs with the working directory outside the checkout and no
PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

# building the wheel and sdist and a fresh venv is an end-to-end check (about a minute on 2 cores): `make test-slow`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "diversity" / "verl_rollouts"


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, check=False)
    assert r.returncode == 0, f"{' '.join(cmd)} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)], cwd=out, env=env,
         timeout=600)
    return out


@pytest.fixture(scope="module")
def fresh(dist, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    home = tmp_path_factory.mktemp("fresh")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_main_venv_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", MPLBACKEND="Agg", HF_HUB_OFFLINE="1",
               SEARCHGYM_CACHE=str(home / "cache"))
    wheel = next(dist.glob("searchgym-*.whl"))
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)],
         cwd=home, env=env)
    return home, env


def test_wheel_and_sdist_carry_license_changelog_and_py_typed(dist):
    import tarfile

    wheel = next(dist.glob("searchgym-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "searchgym/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "searchgym/integrations/configs/verl_search_tool.yaml" in names
    for f in ("start.json", "model.safetensors", "tokenizer.json", "config.json"):  # the demo's SFT start
        assert f"searchgym/experiments/squeeze/sft_start/{f}" in names
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    import searchgym

    assert f"Version: {searchgym.__version__}" in meta and "License-Expression: Apache-2.0" in meta
    sdist = next(dist.glob("searchgym-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "searchgym/py.typed", "pyproject.toml",
            "searchgym/experiments/squeeze/sft_start/model.safetensors"} <= members


def test_wheel_imports_from_its_own_install_and_makes_the_env(fresh):
    home, env = fresh
    code = ("import gymnasium as gym, searchgym, sys; "
            "assert searchgym.__file__.startswith(sys.prefix), searchgym.__file__; "
            "e = gym.make('searchgym/SearchQA-v0'); obs, info = e.reset(seed=0); "
            "obs, r, term, trunc, info = e.step('<answer> 172 </answer>'); "
            "print(searchgym.__version__, searchgym.__file__, r)")
    out = _run(["python", "-c", code], cwd=home, env=env)
    assert "site-packages/searchgym/__init__.py" in out and str(ROOT) not in out


def test_wheel_pytest_plugin_fixture(fresh):
    home, env = fresh
    (home / "test_plugin_use.py").write_text(
        "import gymnasium as gym\nimport searchgym\n\n\n"
        "def test_checker(search_env_checker):\n"
        "    report = search_env_checker(gym.make('searchgym/SearchQA-v0'), n_fuzz=10)\n"
        "    assert 'fuzz' in report\n")
    out = _run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plugin_use.py"], cwd=home, env=env)
    assert "1 passed" in out


def test_wheel_cli_help_and_analyze(fresh):
    home, env = fresh
    out = _run(["searchgym", "--help"], cwd=home, env=env)
    assert "analyze" in out and "<bool>" not in out
    _run(["searchgym", "analyze", str(FIXTURE), "--out", str(home / "report")], cwd=home, env=env)
    assert (home / "report" / "summary.json").exists() and (home / "report" / "report.html").exists()
