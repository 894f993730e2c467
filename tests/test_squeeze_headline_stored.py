"""The README's squeeze headline and docs/squeeze.md's results block are what the stored results give: the
command docs/squeeze.md ("Results") says wrote them, run on copies of the named runs' summaries under results/,
reproduces both blocks byte for byte."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.experiments.squeeze.commands import README_BEGIN, README_END, RESULTS_BEGIN, RESULTS_END

ROOT = Path(__file__).resolve().parents[1]


def _documented_command() -> list[str]:
    """The ``searchgym squeeze --headline ...`` command of docs/squeeze.md's "Results" section, as argv."""
    page = (ROOT / "docs" / "squeeze.md").read_text()
    m = re.search(r"```text\n(searchgym squeeze --headline --out results/.*?)\n```", page, re.DOTALL)
    assert m, "docs/squeeze.md no longer names the command that writes the results block"
    return shlex.split(m.group(1).replace("\\\n", " "))[1:]


def _between(text: str, begin: str, end: str) -> str:
    return text.split(begin)[1].split(end)[0]


def test_the_stored_results_regenerate_the_readme_headline_and_the_docs_results(tmp_path):
    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", site / "README.md")
    shutil.copy(ROOT / "docs" / "squeeze.md", site / "docs" / "squeeze.md")

    def local(arg: str) -> str:  # results/RUN -> a copy holding only its summary.json; README.md -> the copy
        if arg == "README.md":
            return str(site / "README.md")
        runs = []
        for run in arg.split(","):
            assert run.startswith("results/"), run
            (tmp_path / run).mkdir(parents=True)
            shutil.copy(ROOT / run / "summary.json", tmp_path / run / "summary.json")
            runs.append(str(tmp_path / run))
        return ",".join(runs)

    argv = _documented_command()
    args = [a if a.startswith("-") or i == 0 else local(a) for i, a in enumerate(argv)]
    assert args[:2] == ["squeeze", "--headline"] and "--controls" in args and "--readme" in args
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    for page, begin, end in (("README.md", README_BEGIN, README_END),
                             ("docs/squeeze.md", RESULTS_BEGIN, RESULTS_END)):
        made = _between((site / page).read_text(), begin, end)
        assert made == _between((ROOT / page).read_text(), begin, end), f"{page} is not what results/ gives"
