"""The verdict, built by construction: runs whose answer is known before the analysis looks at them."""

from __future__ import annotations

import json
import random

from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.diversity.core import label_episodes
from searchgym.diversity.readers import Episode, Run
from searchgym.diversity.report import analyze
from searchgym.diversity.strategy import STRATEGIES
from searchgym.diversity.templates import Templater
from searchgym.diversity.verdict import compare, trend

NAMES = ["Port Elsin", "Mara Quill", "Oren Vale", "Dunmore", "Kell River", "Ira Lewis", "Ravenhill", "Tam Ossory"]


def _question(i: int) -> tuple[str, str]:
    a, b = NAMES[i % len(NAMES)], NAMES[(i * 3 + 1) % len(NAMES)]
    return f"Who founded the town where {a} met {b} in {1800 + i}?", a


def _query(kind: str, question: str, name: str, rnd: random.Random) -> str:
    """A query of a known strategy class for ``question``."""
    if kind == "copy":
        return question
    if kind == "fragment":
        return f"town {name} met"
    if kind == "lookup":
        return name
    if kind == "relation":
        return f"{name} {rnd.choice(['birthplace', 'spouse', 'employer', 'rival'])}"
    return rnd.choice(["weather today", "cheap flights", "best pizza recipe", "football scores"])


def _run(copy_share_by_step: dict[int, float], *, seed: int, eps_per_step: int = 40,
         n_questions: int = 40) -> list[Episode]:
    rnd = random.Random(seed)
    out = []
    for step, p in copy_share_by_step.items():
        for k in range(eps_per_step):
            q, name = _question(k % n_questions)
            queries = []
            for _ in range(3):
                kind = "copy" if rnd.random() < p else rnd.choice(["fragment", "lookup", "relation", "off"])
                queries.append(_query(kind, q, name, rnd))
            out.append(Episode(queries=queries, step=step, question=q, question_id=f"q{k % n_questions}",
                               reward=1.0))
    return out


def _lab(eps):
    return label_episodes(eps, templater=Templater())


def test_a_run_whose_copy_share_rises_is_squeezed():
    steps = {s: 0.1 + 0.7 * s / 7 for s in range(8)}
    tr = trend(_lab(_run(steps, seed=1)), n_boot=200, seed=0, classes=STRATEGIES)
    assert tr["verdict"] == "squeezed", tr["sentence"]
    lo, hi = tr["change"]["ci"]
    assert lo <= tr["change"]["diff"] <= hi < 0
    assert tr["change"]["onto"] == "copy-question"
    assert tr["shares"]["copy-question"][0] < 0.25 and tr["shares"]["copy-question"][-1] > 0.65
    assert tr["sentence"].startswith("squeezed: copy-question")
    assert len(tr["strategy_entropy"]) == 8 and all(len(p["ci"]) == 2 for p in tr["strategy_entropy"])


def test_a_run_without_change_is_no_detectable_change():
    tr = trend(_lab(_run({s: 0.3 for s in range(6)}, seed=2)), n_boot=200, seed=0, classes=STRATEGIES)
    assert tr["verdict"] == "no detectable change", tr["sentence"]
    lo, hi = tr["change"]["ci"]
    assert lo < 0 < hi


def test_two_runs_on_the_same_questions_with_equal_mixes_are_not_different():
    a, b = _run({0: 0.3}, seed=3), _run({0: 0.3}, seed=4)
    ra, rb = Run("A", "a", "x", a), Run("B", "b", "x", b)
    comps = compare("A", "B", ra, rb, _lab(a), _lab(b), classes=STRATEGIES, n_boot=200, seed=0)
    ent = next(c for c in comps if c["metric"] == "strategy_entropy")
    assert ent["verdict"] == "not different", ent["sentence"]
    assert ent["matched_questions"] == 40 and ent["confounds"] == []
    assert ent["noise"] > 0


def test_a_tiny_negative_difference_between_runs_prints_no_negative_zero():
    """Issue 35: no ``-0.00`` anywhere; between runs, a difference that rounds to zero prints as +0.00."""
    a = _run({0: 0.3}, seed=3, eps_per_step=200)
    b = [Episode(queries=list(e.queries), step=e.step, question=e.question, question_id=e.question_id,
                 reward=e.reward) for e in a]
    first_copy = next(e for e in b if e.question in e.queries)  # one copy-question query becomes a fragment:
    first_copy.queries[first_copy.queries.index(first_copy.question)] = "town Ada met"  # copy rate -1/600
    comps = compare("A", "B", Run("A", "a", "x", a), Run("B", "b", "x", b), _lab(a), _lab(b),
                    classes=STRATEGIES, n_boot=200, seed=0)
    copy = next(c for c in comps if c["metric"] == "copy_rate")
    assert -0.005 < copy["diff"] < 0, copy
    text = " ".join(c["sentence"] for c in comps)
    assert "difference +0.00" in text and "-0.00" not in text, text


def test_two_runs_that_differ_are_told_apart_with_the_right_sign():
    a, b = _run({0: 0.1}, seed=5), _run({0: 0.9}, seed=6)
    comps = compare("SFT", "RL", Run("SFT", "a", "x", a), Run("RL", "b", "x", b), _lab(a), _lab(b),
                    classes=STRATEGIES, n_boot=200, seed=0)
    ent = next(c for c in comps if c["metric"] == "strategy_entropy")
    assert ent["verdict"] == "RL narrower than SFT" and ent["ci"][1] < 0


def test_mi_with_one_episode_per_question_is_not_available():
    eps = _run({0: 0.3}, seed=7, eps_per_step=40, n_questions=40)  # one episode per question
    summary = analyze([Run("one", "one", "x", eps)], n_boot=20)
    block = summary["runs"]["one"]
    assert block["strategy"]["mi_question"] is None
    assert block["warning_counts"]["mi_unavailable"] == 40


def test_summary_keys_and_report_lead_with_the_verdict(tmp_path):
    eps = _run({s: 0.1 + 0.7 * s / 5 for s in range(6)}, seed=8)
    src = tmp_path / "rl.jsonl"
    with src.open("w") as fh:
        for e in eps:
            fh.write(json.dumps({"question": e.question, "step": e.step, "reward": 1.0, "queries": e.queries}) + "\n")
    res = CliRunner().invoke(app, ["analyze", str(src), str(src), "--label", "RL", "--label", "RL-again",
                                   "--text-field", "queries", "--out", str(tmp_path / "a"), "--no-plots",
                                   "--n-boot", "50"])
    assert res.exit_code == 0, res.output
    assert "verdict: RL: squeezed" in res.output
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    tr = s["runs"]["RL"]["trend"]
    assert {"steps", "strategy_entropy", "shares", "change", "verdict"} <= set(tr)
    assert {"first", "last", "diff", "ci"} <= set(tr["change"])
    assert {"step", "value", "ci"} <= set(tr["strategy_entropy"][0])
    c = s["comparisons"][0]
    assert {"a", "b", "matched_questions", "metric", "diff", "ci", "verdict", "confounds"} <= set(c)
    assert c["verdict"] == "not different"
    md = (tmp_path / "a" / "report.md").read_text().splitlines()
    assert md[2] == "## Verdict" and md[4].startswith("- RL: squeezed")


def test_plots_include_the_verdict_and_render_cjk_labels(tmp_path):
    import warnings

    from helpers import require

    from searchgym.diversity.plotting import cjk_font
    from searchgym.diversity.report import make_plots

    require(cjk_font() is not None,
            "no font with CJK glyphs: pip install 'searchgym[cjk]' (mplfonts: Noto Sans CJK SC) or a system CJK font")
    eps = _run({s: 0.1 + 0.7 * s / 4 for s in range(5)}, seed=9)
    for e in eps[:20]:
        e.queries = ["环磷酰胺 不良反应", "长江 流经 省份"]
    summary = analyze([Run("中文运行", "x", "x", eps)], n_boot=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        images = make_plots(summary, tmp_path)
    assert any(f.startswith("verdict_") for f in images.values())
    assert any(f.startswith("top_templates_") for f in images.values())


def test_question_mi_per_step_needs_two_episodes_per_question_and_has_a_ci():
    one = trend(_lab(_run({s: 0.3 for s in range(3)}, seed=10)), n_boot=50, seed=0, classes=STRATEGIES)
    assert all(p["value"] is None and "2 episodes" in p["why"] for p in one["mi_question"])
    # 4 episodes per question per step: the strategy depends on the question (copy for even questions)
    eps = []
    rnd = random.Random(11)
    for step in range(3):
        for k in range(40):
            q, name = _question(k % 10)
            kind = "copy" if (k % 10) % 2 == 0 else rnd.choice(["fragment", "lookup"])
            eps.append(Episode(queries=[_query(kind, q, name, rnd)], step=step, question=q,
                               question_id=f"q{k % 10}", reward=1.0))
    tr = trend(_lab(eps), n_boot=50, seed=0, classes=STRATEGIES)
    for p in tr["mi_question"]:
        assert p["value"] > 0.2 and p["ci"][0] <= p["value"] <= p["ci"][1] and p["k"] == 4


def _offset_run(first_q: int, n_q: int, copy_share: float, seed: int) -> list[Episode]:
    rnd = random.Random(seed)
    out = []
    for i in range(first_q, first_q + n_q):
        q, name = _question(i)
        kinds = ["copy" if rnd.random() < copy_share else rnd.choice(["fragment", "lookup", "relation", "off"])
                 for _ in range(3)]
        out.append(Episode(queries=[_query(kd, q, name, rnd) for kd in kinds], step=0, question=q,
                           question_id=f"q{i}", reward=1.0))
    return out


def test_runs_sharing_few_questions_lead_with_the_full_comparison_at_equal_n():
    # 200 questions each, 24 shared: the matched comparison keeps 12% of the data; it is given beside the
    # full one, which leads (its CI is too wide to detect the same-run noise) and names its confound
    a, b = _offset_run(0, 200, 0.1, seed=11), _offset_run(176, 200, 0.9, seed=12)
    comps = compare("SFT", "RL", Run("SFT", "a", "x", a), Run("RL", "b", "x", b), _lab(a), _lab(b),
                    classes=STRATEGIES, n_boot=100, seed=0)
    ent = next(c for c in comps if c["metric"] == "strategy_entropy")
    assert ent["matched_questions"] == 0 and ent["n"] == 600
    assert "on all questions at equal n (different question sets: 24 shared)" in ent["sentence"]
    assert any(c.startswith("different question sets") for c in ent["confounds"])
    assert ent["verdict"] == "RL narrower than SFT"
    side = ent["beside"]
    assert side["n"] == 72 and side["where"].startswith("on 24 shared questions")
    assert "beside it, on 24 shared questions" in ent["sentence"]
    lo, hi = side["ci"]
    assert (hi - lo) / 2 > ent["noise"] and "too few to detect the same-run noise" in side["where"]


def test_runs_sharing_most_questions_keep_the_matched_comparison_alone():
    a, b = _offset_run(0, 40, 0.3, seed=13), _offset_run(5, 40, 0.3, seed=14)  # 35 of 40 shared
    comps = compare("A", "B", Run("A", "a", "x", a), Run("B", "b", "x", b), _lab(a), _lab(b),
                    classes=STRATEGIES, n_boot=50, seed=0)
    ent = next(c for c in comps if c["metric"] == "strategy_entropy")
    assert ent["matched_questions"] == 35 and "beside" not in ent


def test_verdict_arithmetic_on_three_steps_whose_last_copies_every_question(tmp_path):
    """Issue 35: "1.48 → -0.00 nats, change -1.53" while step 0 showed 1.533. The first and last values are the
    per-step series' own numbers, the change is their difference, and no negative zero is printed or stored."""
    import math
    import re

    eps = _run({0: 0.0, 1: 0.3, 2: 1.0}, seed=11, eps_per_step=30)
    for e in eps:
        e.reward = 1.0 if e.step < 2 else 0.5
    src = tmp_path / "rl.jsonl"
    with src.open("w") as fh:
        for e in eps:
            fh.write(json.dumps({"question": e.question, "step": e.step, "reward": e.reward,
                                 "queries": e.queries}) + "\n")
    res = CliRunner().invoke(app, ["analyze", str(src), "--text-field", "queries", "--out", str(tmp_path / "a"),
                                   "--n-boot", "50"])
    assert res.exit_code == 0, res.output
    raw = (tmp_path / "a" / "summary.json").read_text()
    tr = json.loads(raw)["runs"][next(iter(json.loads(raw)["runs"]))]["trend"]
    series = [p["value"] for p in tr["strategy_entropy"]]
    ch = tr["change"]
    assert tr["steps"] == [0, 1, 2] and ch["first_steps"] == [0] and ch["last_steps"] == [2]
    assert ch["first"] == series[0] and ch["last"] == series[-1]
    assert ch["last"] == 0.0 and math.copysign(1.0, ch["last"]) == 1.0  # one class: 0, not -0
    assert series[0] > 1.0 and ch["diff"] == ch["last"] - ch["first"]
    assert f"{series[0]:.2f} → 0.00 nats, change {ch['diff']:+.2f}" in tr["sentence"], tr["sentence"]
    assert tr["verdict"] == "squeezed" and ch["ci"][1] < 0
    assert "-0.0," not in raw and "-0.0]" not in raw and not re.search(r"-0\.0+\b(?!\d)", raw)
    for name in ("report.md", "report.html"):
        text = (tmp_path / "a" / name).read_text()
        assert not re.search(r"(?<![\d.])-0\.0+(?![\d])", text), name
    # three steps: no entropy law fitted (it needs 5) and none drawn
    law = json.loads(raw)["runs"][next(iter(json.loads(raw)["runs"]))]["policy"]["entropy_law"]
    assert law["a"] is None and law["n"] == 3
    assert not (tmp_path / "a" / "reward_vs_entropy.png").exists()
    html = (tmp_path / "a" / "report.html").read_text()
    assert "<details id='appendix'>" in html and "<details id='appendix' open" not in html


def test_law_label_and_integer_step_ticks():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from searchgym.diversity.plotting import integer_ticks
    from searchgym.diversity.report import law_label

    assert law_label(-0.0293, 0.207) == "R=0.0293exp(H)+0.207"
    assert law_label(0.5, -0.25) == "R=-0.5exp(H)-0.25"
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1.0, 0.5, 0.0])
    integer_ticks(ax)
    fig.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_xticks())
    plt.close(fig)
