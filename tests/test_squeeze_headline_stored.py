"""The README's squeeze headline and docs/squeeze.md's results block are what the stored results give: the
command that wrote them (docs/squeeze.md, "Where the headline comes from"), run on copies of the runs' summaries
under results/, reproduces both blocks byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.experiments.squeeze.commands import README_BEGIN, README_END, RESULTS_BEGIN, RESULTS_END

ROOT = Path(__file__).resolve().parents[1]
# The headline's runs: world 0 (OUT), the other gated worlds, and the controls runs.
HEADLINE_OUT = "squeeze-default-v3"
HEADLINE_WORLDS = ("squeeze-world1-v3", "squeeze-world5-v3")
HEADLINE_CONTROLS = ("squeeze-controls-w0-v3",)


def _between(text: str, begin: str, end: str) -> str:
    return text.split(begin)[1].split(end)[0]


def test_the_stored_results_regenerate_the_readme_headline_and_the_docs_results(tmp_path):
    for run in (HEADLINE_OUT, *HEADLINE_WORLDS, *HEADLINE_CONTROLS):
        (tmp_path / run).mkdir()
        shutil.copy(ROOT / "results" / run / "summary.json", tmp_path / run / "summary.json")
    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", site / "README.md")
    shutil.copy(ROOT / "docs" / "squeeze.md", site / "docs" / "squeeze.md")
    args = ["squeeze", "--headline", "--out", str(tmp_path / HEADLINE_OUT),
            "--worlds", ",".join(str(tmp_path / w) for w in HEADLINE_WORLDS),
            "--controls", ",".join(str(tmp_path / c) for c in HEADLINE_CONTROLS), "--readme", str(site / "README.md")]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    for page, begin, end in (("README.md", README_BEGIN, README_END),
                             ("docs/squeeze.md", RESULTS_BEGIN, RESULTS_END)):
        made = _between((site / page).read_text(), begin, end)
        assert made == _between((ROOT / page).read_text(), begin, end), f"{page} is not what results/ gives"
