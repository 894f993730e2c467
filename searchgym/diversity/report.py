"""Offline analysis of runs: ``analyze_runs(runs_or_paths, out_dir)`` -> summary dict + report files.

Every figure comes from the one analysis core (``searchgym.diversity.core``), under the core's field names.
Writes into ``out_dir``:

* ``summary.json`` - ``{"runs": {RUN: {"label", "format", "n_episodes", "n_queries", "n_malformed",
  "warnings": [str], "warning_counts", "question_copy_rate", "malformed_share", "off_task_share",
  "grounded_share", "sources", "strategy": {"distribution", "entropy", "entropy_ci", "hill", "mi_question",
  …}, "levels": {LEVEL: {"n", "entropy", "entropy_ci", "hill": {"0", "1", "2"}, "hill_ci",
  "mi_question", "within_question_entropy", …}}, "well_formed": {"n_queries", "share", "strategy",
  "levels"}, "series": [...], "process", "text", "moves", "policy", "sequences"}}, "comparisons",
  "meta": {"n": {BLOCK: size}, "ci_method", "mi_method", "definitions", …}}``. NaN is written as ``null``.
* ``report.md`` (PNG files next to it) and ``report.html`` (self-contained, PNGs embedded in base64).
* PNG plots: ``entropy_vs_step.png``, ``strategy.png``, ``top_templates_<run>.png``, ``moves.png``,
  ``reward_vs_entropy.png``, ``pass_at_k.png`` (each only when the runs have the data for it; no trend plot
  and no law fit for a run whose steps hold a single point).

Runs are compared at equal sample size: the entropy and Hill numbers of a block (a template level, the
strategy classes, and each over well-formed queries) are taken at the smallest query count any run has
there (``meta.n``), the step series at the smallest per-step count. Plug-in figures over all queries are
kept apart and marked as such.

Why the CIs of the implementation before this one excluded their estimates: its estimate was the mean of
subsamples drawn without replacement, its bootstrap replicates drew with replacement (duplicates lower a
plug-in entropy, so the replicates sat below the estimate), the basic-bootstrap reflection then moved the
interval above the estimate, and only its upper end was clipped to ln n, so low > high happened. Now the
replicates are re-centred on the estimate and the interval is built to contain it (``metrics.CI_METHOD``).
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.diversity import metrics as M
from searchgym.diversity import plotting as P
from searchgym.diversity import verdict as V
from searchgym.diversity.core import (
    DEFINITIONS,
    Labels,
    RunStats,
    _success,
    label_episodes,
    run_stats,
    subset_sizes,
)
from searchgym.diversity.moves import MOVES
from searchgym.diversity.readers import Episode, Run, read_run
from searchgym.diversity.strategy import GROUNDED, STRATEGIES
from searchgym.diversity.tables import _tables
from searchgym.diversity.templates import LEVELS, TEXT_LEVELS, Templater, normalize
from searchgym.errors import ConfigError
from searchgym.fsmode import file_mode

# ---------------------------------------------------------------------------------------------------
# analysis


def _clean(x: Any) -> Any:
    """JSON-safe copy: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.floating, float)):
        v = float(x) + 0.0  # -0.0 -> 0.0
        return v if math.isfinite(v) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _atomic_write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, file_mode())  # mkstemp makes 0600; give the umask's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _label(run: Run) -> str:
    return getattr(run, "label", None) or run.name


def _step_sizes(lab: Labels) -> dict[str, int]:
    """The smallest per-step query count of each block of a run (only steps with queries)."""
    per: dict[Any, list[int]] = {}
    for i, e in enumerate(lab.ep_of):
        s = lab.step_of_ep[e]
        if s is not None:
            per.setdefault(s, []).append(i)
    out: dict[str, int] = {}
    for idx in per.values():
        g = sum(1 for i in idx if lab.strategy[i] in GROUNDED)
        for key, size in (("strategy", len(idx)), ("well_formed/strategy", g),
                          *((lv, len(idx)) for lv in lab.levels), *(("well_formed/" + lv, g) for lv in lab.levels)):
            if size > 0:
                out[key] = min(out.get(key, size), size)
    return out


def _min_sizes(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            if v > 0:
                out[k] = min(out.get(k, v), v)
    return out


def _text_at(queries: list[str], n: int | None, *, seed: int, draws: int = 5) -> dict[str, Any]:
    """distinct-1/2, self-BLEU and compression ratio at ``n`` queries (mean over draws without replacement):
    all of them move with sample size, so runs are compared at one n."""
    nan = float("nan")
    if not queries or not n:
        return {"n": 0, "distinct_1": nan, "distinct_2": nan, "self_bleu": nan, "compression_ratio": nan}
    n = min(n, len(queries))
    rng = np.random.default_rng(seed)
    samples = [queries] if n == len(queries) else \
        [[queries[i] for i in rng.choice(len(queries), n, replace=False)] for _ in range(draws)]
    d = [M.distinct_ns(s, (1, 2)) for s in samples]
    return {"n": n, "distinct_1": float(np.mean([x[1] for x in d])), "distinct_2": float(np.mean([x[2] for x in d])),
            "self_bleu": M.self_bleu(samples[0], seed=seed) if n >= 2 else nan,
            "compression_ratio": float(np.mean([M.compression_ratio(s) for s in samples]))}


def _extras(run: Run, lab: Labels, *, clusterer: Any, seed: int, success_threshold: float,
            text_n: int | None = None) -> dict[str, Any]:
    """The report-only figures the tracker does not log: self-BLEU, compression, embeddings, sequences."""
    queries = lab.texts
    out: dict[str, Any] = {"text_at_n": _text_at(queries, text_n, seed=seed)}
    pos = lab.levels.get("pos")
    pos_text: list[str] = []
    if pos is not None and len(pos) == len(queries):
        by_ep: dict[int, list[str]] = {}
        for i, e in enumerate(lab.ep_of):
            by_ep.setdefault(e, []).append(pos[i])
        pos_text = [" ".join(v) for v in by_ep.values()]
    out["text"] = {
        "self_bleu": M.self_bleu(queries, seed=seed) if len(queries) >= 2 else float("nan"),
        "compression_ratio": M.compression_ratio(queries) if queries else float("nan"),
        "compression_ratio_pos": M.compression_ratio(pos_text) if any(pos_text) else float("nan"),
    }
    qgroups: dict[Any, list[str]] = {}
    for i, e in enumerate(lab.ep_of):
        g = lab.group_of_ep[e]
        if g is not None:
            qgroups.setdefault(g, []).append(queries[i])
    if any(len(v) >= 2 for v in qgroups.values()):
        out["text"]["distinct_1_within"] = M.within_across(qgroups, lambda v: M.distinct_n(v, 1))["within"]
        out["text"]["distinct_2_within"] = M.within_across(qgroups, lambda v: M.distinct_n(v, 2))["within"]
        small = dict(list(qgroups.items())[:500])  # self-BLEU is quadratic per group: cap the groups
        out["text"]["self_bleu_within"] = M.within_across(small, lambda v: M.self_bleu(v, seed=seed))["within"]
    if clusterer is not None and len(queries) >= 2:
        sample = queries if len(queries) <= 2000 else M.rarefy(queries, 2000, seed)
        emb = clusterer.embed([normalize(q) for q in sample])
        out["embedding"] = {"mean_pairwise_distance": M.mean_pairwise_distance(emb),
                            "chamfer_distance": M.chamfer_distance(emb), "vendi_score": M.vendi_score(emb)}
        if any(len(v) >= 2 for v in qgroups.values()):
            def vendi(v: list[str]) -> float:
                return M.vendi_score(clusterer.embed([normalize(q) for q in v]))

            out["embedding"]["vendi_score_within"] = M.within_across(qgroups, vendi)["within"]
    # trajectory level: distinct query sequences (at the primary template level), correct vs incorrect
    lv = "slot" if "slot" in lab.levels else next(iter(lab.levels))
    labels = lab.levels[lv] if len(lab.levels[lv]) == len(queries) else queries
    seq_of: list[list[str]] = [[] for _ in lab.episodes]
    for i, e in enumerate(lab.ep_of):
        seq_of[e].append(labels[i])
    seqs = [tuple(t) for t in seq_of]
    succ = [_success(e, success_threshold) for e in lab.episodes]
    ok = [sq for sq, good in zip(seqs, succ) if good is True]
    bad = [sq for sq, good in zip(seqs, succ) if good is False]
    out["sequences"] = {"level": lv, "distinct": len(set(seqs)), "entropy": M.entropy(seqs) if seqs else None,
                        "distinct_correct": len(set(ok)), "distinct_incorrect": len(set(bad)),
                        "episodes_correct": len(ok), "episodes_incorrect": len(bad),
                        "episodes_success_unknown": len(seqs) - len(ok) - len(bad)}
    return out


def _run_block(run: Run, lab: Labels, st: RunStats, extras: dict[str, Any]) -> dict[str, Any]:
    d = st.to_dict()
    rs = getattr(run, "read_stats", None)
    block: dict[str, Any] = {
        "label": _label(run), "path": run.path, "format": getattr(rs, "format", None) or run.fmt,
        "n_episodes": st.n_episodes, "n_queries": st.n_queries, "n_malformed": st.n_malformed,
        "warnings": d["warnings"], "warning_counts": d["warning_counts"],
        "question_copy_rate": st.question_copy_rate, "malformed_share": st.malformed_share,
        "off_task_share": st.off_task_share, "grounded_share": st.grounded_share, "sources": d["sources"],
        "strategy": d["strategy"], "levels": d["levels"],
        "well_formed": {**d["well_formed"], "malformed_share": st.malformed_share,
                        "off_task_share": st.off_task_share},
        "process": d["process"], "moves": d["moves"], "policy": d["policy"],
        "episodes": st.n_episodes, "queries": st.n_queries,  # (names of the previous summary)
    }
    block["text"] = {**d["text"], **extras.get("text", {})}
    block["text_at_n"] = extras["text_at_n"]
    if "embedding" in extras:
        block["embedding"] = extras["embedding"]
    block["sequences"] = extras["sequences"]
    block["top_templates"] = {lv: v["top"] for lv, v in d["levels"].items()}
    if rs is not None:
        block["read_stats"] = {k: getattr(rs, k) for k in ("format", "episodes", "queries", "malformed",
                                                          "skipped_lines") if hasattr(rs, k)}
    if d["series"]:
        block["series"] = d["series"]
    return block


def analyze(runs: Sequence[Run], *, levels: Sequence[str] = TEXT_LEVELS, titles: Iterable[str] = (),
            entity_types: dict[str, str] | None = None, embedder: Any = None, semantic_threshold: float = 0.25,
            success_threshold: float = 1.0, n_boot: int = 200, seed: int = 0) -> dict[str, Any]:
    """The summary dict of already-read runs (no files written)."""
    levels = list(levels)
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad or not levels:
        raise ConfigError(f"unknown template level(s) {bad or levels}; choose from {', '.join(LEVELS)}")
    clusterer = None
    if "semantic" in levels:
        from searchgym.diversity.semantic import SemanticClusterer

        clusterer = SemanticClusterer(embedder, threshold=semantic_threshold)
    templater = Templater(titles, entity_types=entity_types)
    semantic = clusterer.cluster if clusterer is not None else None
    labs = [label_episodes(r.episodes, templater=templater, levels=levels, semantic=semantic) for r in runs]
    n = _min_sizes(subset_sizes(lab) for lab in labs)
    series_n = _min_sizes(_step_sizes(lab) for lab in labs)
    summary: dict[str, Any] = {"runs": {}}
    for run, lab in zip(runs, labs):
        st = run_stats(lab, n=n, series_n=series_n, n_boot=n_boot, seed=seed,
                       read_stats=getattr(run, "read_stats", None), success_threshold=success_threshold)
        summary["runs"][_label(run)] = _run_block(run, lab, st, _extras(run, lab, clusterer=clusterer, seed=seed,
                                                                        success_threshold=success_threshold,
                                                                        text_n=n.get("strategy")))
    names = [_label(r) for r in runs]
    for run, lab in zip(runs, labs):
        tr = V.trend(lab, n_boot=n_boot, seed=seed, classes=STRATEGIES)
        if tr is not None:
            summary["runs"][_label(run)]["trend"] = tr
    # the verdict between runs (a list, one dict per pair and metric); the divergences move to "divergence"
    summary["divergence"] = _comparisons(runs, labs, levels, seed=seed)
    comps: list[dict[str, Any]] = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            mia = (summary["runs"][names[i]].get("strategy") or {}).get("mi_question")
            mib = (summary["runs"][names[j]].get("strategy") or {}).get("mi_question")
            comps.extend(V.compare(names[i], names[j], runs[i], runs[j], labs[i], labs[j], classes=STRATEGIES,
                                   n_boot=n_boot, seed=seed, mi=(mia, mib)))
    summary["comparisons"] = comps
    summary["verdict"] = _verdict_lines(summary)
    summary["meta"] = {"levels": levels, "n": n, "series_n": series_n, "success_threshold": success_threshold,
                       "n_boot": n_boot, "seed": seed, "ci_method": M.CI_METHOD, "mi_method": M.MI_METHOD,
                       "strategies": list(STRATEGIES), "definitions": DEFINITIONS}
    return _clean(summary)


def _verdict_lines(summary: dict[str, Any]) -> list[str]:
    """The verdict sentences: each run's trend over steps, then each comparison between runs."""
    out = [f"{name}: {r['trend']['sentence']}" for name, r in summary["runs"].items() if r.get("trend")]
    out += [c["sentence"] for c in summary.get("comparisons") or [] if c.get("metric") != "copy_rate"]
    if not out:
        out.append("no verdict: a single run without >= 3 training steps (give a run with steps, or two runs "
                   "to compare)")
    return out


def _js_at(a: list[str], b: list[str], n: int, *, draws: int, seed: int) -> float:
    """Mean Jensen-Shannon divergence between draws of ``n`` labels of each run (without replacement):
    plug-in JS grows as samples shrink, so runs are compared at one size."""
    if not a or not b or n < 1:
        return float("nan")
    if len(a) == n and len(b) == n:
        return M.js_divergence(Counter(a), Counter(b))
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(draws):
        sa = a if len(a) == n else [a[i] for i in rng.choice(len(a), n, replace=False)]
        sb = b if len(b) == n else [b[i] for i in rng.choice(len(b), n, replace=False)]
        vals.append(M.js_divergence(Counter(sa), Counter(sb)))
    return float(np.mean(vals))


def _comparisons(runs: Sequence[Run], labs: Sequence[Labels], levels: Sequence[str], *,
                 seed: int = 0) -> dict[str, Any]:
    """Jensen-Shannon divergence between runs at equal sample size (the smaller run's count, mean over
    draws) and template novelty (share of a run's queries whose template the other run never uses)."""
    names = [_label(r) for r in runs]
    out: dict[str, Any] = {"js_divergence": {}, "novelty": {}}
    for lv in [*levels, "strategy"]:
        flats = {nm: (lab.strategy if lv == "strategy" else lab.levels.get(lv, [])) for nm, lab in zip(names, labs)}
        js, nov = {}, {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                n = min(len(flats[a]), len(flats[b]))
                js[f"{a} vs {b}"] = _js_at(flats[a], flats[b], n, draws=10, seed=seed)
            for b in names:
                if a != b:
                    nov[f"{a} vs {b}"] = M.novelty(Counter(flats[a]), Counter(flats[b]))
        out["js_divergence"][lv] = js
        out["novelty"][lv] = nov
        if len(names) >= 2:  # (only a comparison has a divergence to judge)
            out.setdefault("js_noise", {})[lv] = {nm: _split_half_js(flats[nm], labs[i], seed=seed)
                                                  for i, nm in enumerate(names)}
    return out


def _split_half_js(labels: list[str], lab: Labels, *, seed: int, reps: int = 3) -> float | None:
    """Same-run noise of JS: the mean JS divergence between two random halves of a run's episodes (each half
    drawn down to the smaller half's count). A divergence between runs at or below it is not evidence of a
    difference."""
    n_eps = len(lab.episodes)
    if n_eps < 4 or not labels or len(labels) != len(lab.ep_of):
        return None
    rng = np.random.default_rng(seed + 11)
    codes = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)[1].ravel()
    k = int(codes.max()) + 1
    ep = np.asarray(lab.ep_of, dtype=np.int64)
    vals = []
    for _ in range(reps):
        in_a = np.zeros(n_eps, dtype=bool)
        in_a[rng.permutation(n_eps)[:n_eps // 2]] = True
        mask = in_a[ep]
        a, b = codes[mask], codes[~mask]
        m = min(len(a), len(b))
        if not m:
            continue
        a = a if len(a) == m else rng.choice(a, m, replace=False)
        b = b if len(b) == m else rng.choice(b, m, replace=False)
        p, q = np.bincount(a, minlength=k) / m, np.bincount(b, minlength=k) / m
        mix = (p + q) / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            js = 0.5 * np.where(p > 0, p * np.log(p / mix), 0.0).sum() + \
                0.5 * np.where(q > 0, q * np.log(q / mix), 0.0).sum()
        vals.append(float(js))
    return float(np.mean(vals)) if vals else None


def _unique_labels(runs: list[Run]) -> None:
    seen: Counter = Counter()
    for r in runs:
        lab = _label(r)
        seen[lab] += 1
        if seen[lab] > 1:
            new = f"{lab}-{seen[lab]}"
            if getattr(r, "label", None):
                r.label = new  # type: ignore[attr-defined]
            r.name = new


def analyze_runs(runs_or_paths: Sequence[Run | str | os.PathLike[str]], out_dir: str | os.PathLike[str], *,
                 fmt: str = "auto", labels: Sequence[str | None] | None = None, text_field: str | None = None,
                 step_field: str | None = None, question_field: str | None = None,
                 reward_field: str | None = None, levels: Sequence[str] = TEXT_LEVELS, titles: Iterable[str] = (),
                 embedder: Any = None, success_threshold: float = 1.0, n_boot: int = 200, seed: int = 0,
                 plots: bool = True, unreadable: Sequence[dict[str, str]] = (),
                 **reader_kw: Any) -> dict[str, Any]:
    """Analyse runs and write ``summary.json``, ``report.md``, ``report.html`` and the PNGs into ``out_dir``;
    return the summary dict.

    ``runs_or_paths``: ``Run`` objects already read (their ``label`` and ``read_stats`` are used when they
    have them) or run paths, read with ``read_run(path, fmt, ...)``; ``labels`` names them (default: the file
    name), shown whole in every table.
    """
    if not runs_or_paths:
        raise ConfigError("analyze needs at least one run path")
    runs: list[Run] = []
    for i, item in enumerate(runs_or_paths):
        if isinstance(item, Run) or hasattr(item, "episodes"):
            run = item  # type: ignore[assignment]
        else:
            kw = {k: v for k, v in (("text_field", text_field), ("step_field", step_field),
                                    ("question_field", question_field), ("reward_field", reward_field))
                  if v is not None}
            run = read_run(item, fmt, **kw, **reader_kw)
        if labels is not None and i < len(labels) and labels[i]:
            run.name = str(labels[i])
            if hasattr(run, "label"):
                run.label = str(labels[i])  # type: ignore[attr-defined]
        runs.append(run)  # type: ignore[arg-type]
    _unique_labels(runs)
    summary = analyze(runs, levels=levels, titles=titles, embedder=embedder,
                      success_threshold=success_threshold, n_boot=n_boot, seed=seed)
    if unreadable:
        summary["unreadable"] = [dict(u) for u in unreadable]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images = make_plots(summary, out) if plots else {}
    _atomic_write(out / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False))
    _atomic_write(out / "report.md", render_markdown(summary, images))
    _atomic_write(out / "report.html", render_html(summary, images, out))
    return summary


# ---------------------------------------------------------------------------------------------------
# plots


def _primary(summary: dict[str, Any]) -> str:
    levels = summary.get("meta", {}).get("levels") or list(TEXT_LEVELS)
    return "slot" if "slot" in levels else levels[0]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80]


def _trend_runs(runs: dict[str, Any]) -> dict[str, Any]:
    """Runs whose series has at least two points with queries (a single point draws no trend)."""
    return {n: r for n, r in runs.items() if sum(1 for s in r.get("series") or [] if s.get("n_queries")) >= 2}


def make_plots(summary: dict[str, Any], out: Path) -> dict[str, str]:
    """Write the PNG plots; return {title: file name}. Matplotlib's settings (a CJK fallback font) are
    restored afterwards."""
    import matplotlib

    matplotlib.use("Agg")
    with matplotlib.rc_context():
        return _make_plots(summary, out)


def law_label(a: float, b: float) -> str:
    """``R = -a exp(H) + b`` with the signs folded in: a = -0.0293, b = 0.207 gives ``R=0.0293exp(H)+0.207``."""
    def num(x: float) -> str:
        return f"{float(x) + 0.0:.3g}"

    coef = -float(a)
    head = f"R={num(coef)}exp(H)"
    return head + (f"-{num(-b)}" if b < 0 else f"+{num(b)}")


def _law_plot(runs: dict[str, Any], plt: Any, save: Any) -> None:
    """Reward vs entropy with the fitted law, for runs with at least ``LAW_MIN_POINTS`` steps."""
    with_law = {n: r for n, r in _trend_runs(runs).items()
                if len(r["policy"].get("entropy_law_points") or []) >= M.LAW_MIN_POINTS}
    if not with_law:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, r in with_law.items():
        pts = np.array(r["policy"]["entropy_law_points"], dtype=float)
        sc = ax.scatter(pts[:, 0], pts[:, 1], s=14, label=name)
        fit = r["policy"]["entropy_law"]
        if fit.get("a") is not None and fit.get("b") is not None:
            hs = np.linspace(0, max(pts[:, 0].max(), 1e-3) * 1.05, 100)
            ax.plot(hs, M.entropy_law(hs, fit["a"], fit["b"]), color=sc.get_facecolor()[0], lw=1,
                    label=f"{name}: {law_label(fit['a'], fit['b'])}")
    kind = next(iter(with_law.values()))["policy"]["entropy_law"].get("entropy", "")
    ax.set_xlabel(f"entropy H ({kind})", fontsize=8)
    ax.set_ylabel("mean reward R", fontsize=8)
    ax.legend(fontsize=6)
    ax.set_title("Reward vs entropy with R = -a exp(H) + b", fontsize=9)
    save(fig, "reward_vs_entropy.png", "Reward vs entropy (fitted law)")


def _make_plots(summary: dict[str, Any], out: Path) -> dict[str, str]:
    import matplotlib.pyplot as plt

    runs = summary["runs"]
    levels = summary.get("meta", {}).get("levels") or list(TEXT_LEVELS)
    images: dict[str, str] = {}

    def save(fig: Any, fname: str, title: str) -> None:
        path = out / fname
        tmp = out / f".{fname}.tmp.png"
        fig.savefig(tmp, dpi=80, format="png")  # fixed layouts: "tight" boxes cost a redraw
        plt.close(fig)
        os.chmod(tmp, file_mode())  # the umask's mode, like every other output
        os.replace(tmp, path)
        images[title] = fname

    labels_shown = [*runs] + [t for r in runs.values() for t, _ in (r.get("top_templates", {}).get(
        _primary(summary)) or [])]
    P.use_cjk_if_needed(labels_shown)
    P.verdict_plots(runs, plt, save)
    stepped = _trend_runs(runs)
    if stepped:
        rows = [*levels, "strategy"]
        fig, axes = plt.subplots(len(rows), 2, figsize=(10, 2.6 * len(rows)), squeeze=False)
        sn = summary.get("meta", {}).get("series_n", {})
        for row, lv in enumerate(rows):
            for col, key in enumerate(("entropy", "mi_question")):
                ax = axes[row][col]
                for name, r in stepped.items():
                    pts = [(s["step"], (s["strategy"] if lv == "strategy" else s["levels"].get(lv)) or {})
                           for s in r["series"]]
                    pts = [(x, st.get(key)) for x, st in pts if st.get(key) is not None]
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
                what = "entropy (nats)" if key == "entropy" else "MI(question; label), nats"
                ax.set_title(f"{lv}: {what} at n={sn.get(lv, '?')} queries per step", fontsize=9)
                ax.set_xlabel("step", fontsize=8)
                P.integer_ticks(ax)
                ax.tick_params(labelsize=7)
        axes[0][0].legend(fontsize=7)
        fig.subplots_adjust(left=0.07, right=0.98, top=0.96, bottom=0.06, hspace=0.6, wspace=0.18)
        save(fig, "entropy_vs_step.png", "Entropy and question dependence vs step (equal n per step)")

    with_strat = {n: r for n, r in runs.items() if (r.get("strategy") or {}).get("distribution")}
    if with_strat:
        fig, ax = plt.subplots(figsize=(9, 0.5 * len(with_strat) + 1.6))
        names = list(with_strat)
        left = np.zeros(len(names))
        cmap = plt.get_cmap("tab10")
        for j, c in enumerate(STRATEGIES):
            vals = np.array([with_strat[n]["strategy"]["distribution"].get(c) or 0.0 for n in names])
            ax.barh(range(len(names)), vals, left=left, color=cmap(j), label=c)
            left += vals
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        ax.set_xlabel("share of queries", fontsize=8)
        ax.set_xlim(0, 1)
        ax.legend(fontsize=6.5, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.35))
        ax.set_title("Query strategy classes", fontsize=9)
        fig.subplots_adjust(left=0.3, right=0.98, top=0.85, bottom=0.45)
        save(fig, "strategy.png", "Query strategy classes")

    lv = _primary(summary)
    for name, r in runs.items():
        top = r.get("top_templates", {}).get(lv) or []
        if not top:
            continue
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(top) + 1))
        labels = [t if len(t) <= 60 else t[:57] + "..." for t, _ in top][::-1]
        total = max(r["n_queries"], 1)
        ax.barh(range(len(top)), [n / total for _, n in top][::-1], color="#4477aa")
        ax.set_yticks(range(len(top)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xlabel(f"share of queries ({lv} level)", fontsize=8)
        ax.set_title(f"Top templates: {name}", fontsize=9)
        fig.subplots_adjust(left=0.45, right=0.97, top=0.9, bottom=0.12)
        save(fig, f"top_templates_{_safe(name)}.png", f"Top templates: {name}")

    with_moves = {n: r for n, r in runs.items() if sum(r["moves"]["counts"].values()) > 0}
    if with_moves:
        fig, ax = plt.subplots(figsize=(10, 3.5))
        width = 0.8 / len(with_moves)
        x = np.arange(len(MOVES))
        for j, (name, r) in enumerate(with_moves.items()):
            c = r["moves"]["counts"]
            tot = sum(c.values())
            ax.bar(x + j * width, [c[m] / tot for m in MOVES], width, label=name)
        ax.set_xticks(x + 0.4 - width / 2)
        ax.set_xticklabels(MOVES, rotation=30, fontsize=7, ha="right")
        ax.set_ylabel("share of moves", fontsize=8)
        ax.legend(fontsize=7)
        ax.set_title("Reformulation moves", fontsize=9)
        fig.subplots_adjust(bottom=0.25, left=0.08, right=0.98)
        save(fig, "moves.png", "Reformulation-move distribution")

    _law_plot(runs, plt, save)

    with_pass = {n: r for n, r in runs.items() if r["policy"].get("pass_at_k")}
    if with_pass:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, r in with_pass.items():
            c = r["policy"]["pass_at_k"]
            ax.plot(c["k"], c["pass_at_k"], marker="o", ms=3, label=f"{name} pass@k")
            ax.plot(c["k"], c["pass_hat_k"], ls="--", lw=1, label=f"{name} pass^k")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k", fontsize=8)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
        ax.set_title("pass@k (unbiased) and pass^k", fontsize=9)
        save(fig, "pass_at_k.png", "pass@k curves")
    return images


# ---------------------------------------------------------------------------------------------------
# rendering


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _intro(summary: dict[str, Any]) -> list[str]:
    meta = summary.get("meta", {})
    return [(f"Runs: {', '.join(summary['runs'])}. Levels: {', '.join(meta.get('levels', []))}. "
            "Entropies in nats."),
            f"CI method: {meta.get('ci_method', M.CI_METHOD)}",
            f"Mutual information: {meta.get('mi_method', M.MI_METHOD)}"]


def _verdict_help() -> str:
    return ("How to read it: 'squeezed' means the strategy entropy of the last third of the steps is lower than "
            "that of the first third with a 95% bootstrap CI (over episodes) below 0, at one sample size; between "
            "runs a difference counts only when its CI excludes 0, and the split-half noise says how far two "
            "halves of one run already differ. Confounds named in a sentence can explain a difference without "
            "any squeeze.")


def _definitions(summary: dict[str, Any]) -> list[tuple[str, str]]:
    return list((summary.get("meta", {}).get("definitions") or DEFINITIONS).items())


def _plots_md(images: dict[str, str]) -> list[str]:
    lines = ["## Plots", ""] if images else []
    for title, fname in images.items():
        lines += [f"### {title}", "", f"![{title}]({fname})", ""]
    return lines


def render_markdown(summary: dict[str, Any], images: dict[str, str]) -> str:
    """The report as Markdown: the verdict first, then the plots, then every table in an appendix."""
    lines = ["# Query-diversity report", "", "## Verdict", ""]
    lines += [f"- {v}" for v in summary.get("verdict") or []]
    lines.append("")
    for u in summary.get("unreadable") or []:
        lines.append(f"- **unreadable**: `{u['path']}`: {u['reason']}")
    if summary.get("unreadable"):
        lines.append("")
    lines += [_verdict_help(), ""]
    lines += _plots_md(images)
    lines += ["## Appendix: all figures", ""]
    for para in _intro(summary):
        lines += [para, ""]
    lines += ["## Definitions", ""]
    lines += [f"- **{k}**: {v}" for k, v in _definitions(summary)]
    lines.append("")
    for title, note, header, rows in _tables(summary):
        lines += [f"## {title}", ""]
        if note:
            lines += [note, ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def _h2(title: str, anchor: str, toc: list[tuple[str, str]]) -> str:
    toc.append((anchor, title))
    return f"<h2 id='{anchor}'>{html.escape(title)}</h2>"


def render_html(summary: dict[str, Any], images: dict[str, str], out: Path) -> str:
    """The report as one self-contained HTML page (images inlined): a table of contents, the verdict, the plots,
    then every table in an appendix, collapsed (``<details>``) until opened."""
    toc: list[tuple[str, str]] = []
    body = [_h2("Verdict", "verdict", toc), "<ul>"]
    body += [f"<li>{html.escape(v)}</li>" for v in summary.get("verdict") or []]
    body += [f"<li><b>unreadable</b>: {html.escape(u['path'])}: {html.escape(u['reason'])}</li>"
             for u in summary.get("unreadable") or []]
    body += ["</ul>", f"<p class='note'>{html.escape(_verdict_help())}</p>"]
    for i, (title, fname) in enumerate(images.items()):
        data = base64.b64encode((out / fname).read_bytes()).decode("ascii")
        body.append(_h2(title, f"plot-{i}", toc) + f"<img alt='{html.escape(title)}' "
                    f"src='data:image/png;base64,{data}'>")
    tables = _tables(summary)
    toc.append(("appendix", "Appendix: all figures"))
    # collapsed: the verdict and the plots are the report; the appendix's tables open on a click
    body.append(f"<details id='appendix'><summary><h2>Appendix: all figures</h2> (definitions and "
                f"{len(tables)} tables; click to open)</summary>")
    body += [f"<p>{html.escape(p)}</p>" for p in _intro(summary)]
    body.append("<h2 id='definitions'>Definitions</h2><ul>" + "".join(
        f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in _definitions(summary)) + "</ul>")
    for i, (title, note, header, rows) in enumerate(tables):
        body.append(f"<h2 id='table-{i}'>{html.escape(title.replace('`', ''))}</h2>")
        if note:
            body.append(f"<p class='note'>{html.escape(note)}</p>")
        body.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
        for row in rows:
            body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        body.append("</table>")
    body.append("</details>")
    nav = ("<nav id='toc'><b>Contents</b><ol>" + "".join(
        f"<li><a href='#{a}'>{html.escape(t)}</a></li>" for a, t in toc) + "</ol></nav>")
    head = ["<!doctype html><html><head><meta charset='utf-8'><title>Query-diversity report</title>",
            ("<style>body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
             "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px;"
             "font-size:12px}th{background:#eee}img{max-width:100%}.note{font-size:12px;color:#444}"
             "nav{font-size:13px;columns:2}summary h2{display:inline}summary{cursor:pointer}</style></head><body>"),
            "<h1>Query-diversity report</h1>", nav]
    return "\n".join([*head, *body, "</body></html>"])


__all__ = ["Episode", "analyze", "analyze_runs", "make_plots", "render_html", "render_markdown"]
