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
        v = float(x)
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
    ok = [sq for sq, good in zip(seqs, succ) if good]
    bad = [sq for sq, good in zip(seqs, succ) if not good]
    out["sequences"] = {"level": lv, "distinct": len(set(seqs)), "entropy": M.entropy(seqs) if seqs else None,
                        "distinct_correct": len(set(ok)), "distinct_incorrect": len(set(bad)),
                        "episodes_correct": len(ok), "episodes_incorrect": len(bad)}
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
    summary["comparisons"] = _comparisons(runs, labs, levels, seed=seed)
    summary["meta"] = {"levels": levels, "n": n, "series_n": series_n, "success_threshold": success_threshold,
                       "n_boot": n_boot, "seed": seed, "ci_method": M.CI_METHOD, "mi_method": M.MI_METHOD,
                       "strategies": list(STRATEGIES), "definitions": DEFINITIONS}
    return _clean(summary)


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
    return out


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
                 plots: bool = True, **reader_kw: Any) -> dict[str, Any]:
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
    """Write the PNG plots; return {title: file name}."""
    import matplotlib

    matplotlib.use("Agg")
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

    with_law = {n: r for n, r in _trend_runs(runs).items() if r["policy"].get("entropy_law_points")}
    if with_law:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, r in with_law.items():
            pts = np.array(r["policy"]["entropy_law_points"], dtype=float)
            sc = ax.scatter(pts[:, 0], pts[:, 1], s=14, label=name)
            fit = r["policy"]["entropy_law"]
            if fit.get("a") is not None and fit.get("b") is not None:
                hs = np.linspace(0, max(pts[:, 0].max(), 1e-3) * 1.05, 100)
                ax.plot(hs, M.entropy_law(hs, fit["a"], fit["b"]), color=sc.get_facecolor()[0], lw=1,
                        label=f"{name}: R=-{fit['a']:.3g}exp(H)+{fit['b']:.3g}")
        kind = next(iter(with_law.values()))["policy"]["entropy_law"].get("entropy", "")
        ax.set_xlabel(f"entropy H ({kind})", fontsize=8)
        ax.set_ylabel("mean reward R", fontsize=8)
        ax.legend(fontsize=6)
        ax.set_title("Reward vs entropy with R = -a exp(H) + b", fontsize=9)
        save(fig, "reward_vs_entropy.png", "Reward vs entropy (fitted law)")

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


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1e4 else f"{v:.3g}"
    return str(v)


def _ci(c: Any) -> str:
    if not c or c[0] is None or c[1] is None:
        return "–"
    return f"[{_fmt(c[0])}, {_fmt(c[1])}]"


_LEVEL_COLS = ("n", "entropy", "entropy_ci", "hill 0", "hill 1", "hill 2", "mi_question", "within_question_entropy")


def _level_row(name: str, st: dict[str, Any] | None) -> list[str]:
    if not st:
        return [name, *(["–"] * len(_LEVEL_COLS))]
    h = st.get("hill") or {}
    groups = st.get("within_question_groups") or 0
    within = f"{_fmt(st.get('within_question_entropy'))} ({groups} q)" if groups else "– (no question has ≥ 2)"
    mi = st.get("mi_question")
    mi_s = f"{_fmt(mi)} (k={st.get('mi_k')}, {st.get('mi_questions')} q)" if mi is not None else "–"
    return [name, str(st.get("n")), _fmt(st.get("entropy")), _ci(st.get("entropy_ci")), _fmt(h.get("0")),
            _fmt(h.get("1")), _fmt(h.get("2")), mi_s, within]


Table = tuple[str, str, list[str], list[list[str]]]


def _tables(summary: dict[str, Any]) -> list[Table]:
    """(title, note, header, rows) of every table in the report."""
    runs = summary["runs"]
    names = list(runs)
    meta = summary.get("meta", {})
    levels = meta.get("levels") or list(TEXT_LEVELS)
    sizes = meta.get("n") or {}
    tables: list[Table] = []
    rows = [[n, str(r["format"]), str(r["n_episodes"]), str(r["n_queries"]), str(r["n_malformed"]),
             _fmt(r["process"]["queries_per_episode"]), _fmt(r["question_copy_rate"]), _fmt(r["grounded_share"]),
             _fmt(r["malformed_share"]), _fmt(r["off_task_share"]), _fmt(r["policy"].get("reward_mean"))]
            for n, r in runs.items()]
    tables.append(("Runs", ("copy rate = share of queries that copy the question (token overlap ≥ 0.8 both "
                   "ways); grounded = share neither malformed nor off-task; malformed = empty, over 32 words, "
                   "markup or garbage (plus calls the reader could not parse, in the malformed column); "
                   "off-task = names nothing and uses no word from the question or earlier evidence."),
                   ["run", "format", "episodes", "queries", "malformed", "queries/episode", "copy rate",
                    "grounded", "malformed share", "off-task share", "mean reward"], rows))
    rows = [[n, str(c), w] for n in names
            for w, c in zip(runs[n].get("warnings") or [], (runs[n].get("warning_counts") or {}).values())]
    tables.append(("Warnings", "Signs of a wrong reading, or of figures that rest on too little (none = empty).",
                   ["run", "count", "warning"], rows or [["–", "0", "no warnings"]]))
    rows = [[n, *[_fmt((runs[n].get("strategy") or {}).get("distribution", {}).get(c)) for c in STRATEGIES],
             _fmt(runs[n]["sources"].get("question")), _fmt(runs[n]["sources"].get("evidence")),
             _fmt(runs[n]["sources"].get("neither"))] for n in names]
    tables.append(("Query strategy classes (share of queries)",
                   ("Strategy of each query from the question and the text retrieved earlier in its episode; "
                   "words from: mean share of a query's content words found in the question / else in earlier "
                   "evidence / in neither."),
                   ["run", *STRATEGIES, "words from question", "from evidence", "from neither"], rows))
    note_eq = ("At equal sample size n for every run (rarefied mean over draws of n queries); CI method below. "
               "hill 0 = distinct labels, 1 = exp(entropy), 2 = inverse Simpson; mi_question = shuffle-corrected "
               "mutual information between question and label with k samples per question; within-question "
               "entropy = mean entropy over questions with ≥ 2 samples (count in brackets).")
    for block, title in (("strategy", "Strategy classes"), *((lv, f"Template level `{lv}`") for lv in levels)):
        rows = [_level_row(n, runs[n].get("strategy") if block == "strategy" else runs[n]["levels"].get(block))
                for n in names]
        tables.append((f"{title}: all queries, n = {sizes.get(block, '–')}", note_eq, ["run", *_LEVEL_COLS], rows))
        rows = [_level_row(n, (runs[n]["well_formed"].get("strategy") if block == "strategy"
                               else runs[n]["well_formed"]["levels"].get(block))) for n in names]
        tables.append((f"{title}: well-formed, grounded queries only, n = {sizes.get('well_formed/' + block, '–')}",
                       ("The same figures without malformed and off-task queries, so noise cannot read as "
                       "diversity."), ["run", *_LEVEL_COLS], rows))
    keys = ("n_queries", "n_templates", "entropy_all", "top1_mass", "top5_mass", "rank_beta",
            "first_query_across_entropy", "first_query_within_entropy")
    for lv in levels:
        rows = [[n, *[_fmt(runs[n]["levels"].get(lv, {}).get(k)) for k in keys]] for n in names]
        tables.append((f"Template level `{lv}`: plug-in over all queries",
                       ("Not comparable between runs of unequal size (n_templates and entropy_all grow with it); "
                       "top1/top5 mass = share of queries in the 1/5 most frequent templates; rank_beta = decay "
                       "of log frequency with rank over the top 10."), ["run", *keys], rows))
    js = summary.get("comparisons", {}).get("js_divergence", {})
    rows = [[lv, pair, _fmt(v)] for lv in [*levels, "strategy"] for pair, v in (js.get(lv) or {}).items()]
    if rows:
        tables.append(("Jensen-Shannon divergence between runs",
                       ("JS divergence (nats, max ln 2 = 0.693) between the label distributions of two runs, at "
                        "equal sample size (draws of the smaller run's count from each)."),
                       ["level", "runs", "JS"], rows))
    akeys = ("n", "distinct_1", "distinct_2", "self_bleu", "compression_ratio")
    tables.append(("Text diversity at equal sample size", ("distinct-n = unique n-grams / all n-grams; self-BLEU "
                   "= mean BLEU of each query against the others (lower = more diverse); compression ratio = size "
                   "/ gzip size (higher = more repetitive); all at n queries (mean over draws), the same n for "
                   "every run."), ["run", *akeys],
                   [[n, *[_fmt(runs[n].get("text_at_n", {}).get(k)) for k in akeys]] for n in names]))
    tkeys = ("compression_ratio_pos", "distinct_1_within", "distinct_2_within", "self_bleu_within")
    tables.append(("Text diversity within questions", ("compression_ratio_pos = compression ratio of the "
                   "part-of-speech shapes (all queries); _within = mean over questions with ≥ 2 samples."),
                   ["run", *tkeys], [[n, *[_fmt(runs[n]["text"].get(k)) for k in tkeys]] for n in names]))
    if any("embedding" in r for r in runs.values()):
        ekeys = ("mean_pairwise_distance", "chamfer_distance", "vendi_score", "vendi_score_within")
        tables.append(("Embedding diversity", ("mean pairwise cosine distance; chamfer = mean distance to the "
                       "nearest other query; Vendi = exp entropy of the similarity kernel's eigenvalues."),
                       ["run", *ekeys], [[n, *[_fmt(runs[n].get("embedding", {}).get(k)) for k in ekeys]]
                                         for n in names]))
    pkeys = ("duplicate_query_rate", "new_document_yield", "ctar")
    tables.append(("Search process", "; ".join(f"{k} = {DEFINITIONS[k]}" for k in ("move_entropy", *pkeys)),
                   ["run", "move entropy", *pkeys],
                   [[n, _fmt(runs[n]["moves"]["entropy"]), *[_fmt(runs[n]["process"].get(k)) for k in pkeys]]
                    for n in names]))
    skeys = ("level", "distinct", "entropy", "distinct_correct", "episodes_correct", "distinct_incorrect",
             "episodes_incorrect")
    tables.append(("Distinct query sequences per episode (trajectory level)",
                   "An episode's sequence of templates; distinct sequences among correct and incorrect episodes.",
                   ["run", *skeys], [[n, *[_fmt(runs[n]["sequences"].get(k)) for k in skeys]] for n in names]))
    tables.append(("Reformulation moves (counts)", "Moves between consecutive queries of an episode (moves.py).",
                   ["run", *MOVES], [[n, *[str(runs[n]["moves"]["counts"][m]) for m in MOVES]] for n in names]))
    rows = []
    for n in names:
        law = runs[n]["policy"].get("entropy_law")
        if law:
            rows.append([n, str(law.get("entropy")), _fmt(law.get("a")), _fmt(law.get("b")),
                         _fmt(law.get("ceiling")), _fmt(law.get("rmse")), _fmt(law.get("n"))])
    if rows:
        tables.append(("Entropy law R = -a exp(H) + b", "Fitted over the steps (Cui et al. 2025); needs ≥ 3 steps.",
                       ["run", "H", "a", "b", "ceiling (H=0)", "RMSE", "points"], rows))
    rows = []
    for n in names:
        c = runs[n]["policy"].get("pass_at_k")
        if c:
            for k, p, ph in zip(c["k"], c["pass_at_k"], c["pass_hat_k"]):
                rows.append([n, str(c["step"]), str(c["n_questions"]), str(k), _fmt(p), _fmt(ph)])
    if rows:
        tables.append(("pass@k and pass^k", ("Unbiased pass@k = 1 - C(n-c,k)/C(n,k) over questions sampled ≥ 2 "
                       "times; pass^k = all k succeed."), ["run", "step", "questions", "k", "pass@k", "pass^k"], rows))
    lv = _primary(summary)
    for n in names:
        top = runs[n].get("top_templates", {}).get(lv) or []
        if top:
            tables.append((f"Top `{lv}` templates: {n}", "", ["template", "count"], [[t, str(c)] for t, c in top]))
    return tables


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _intro(summary: dict[str, Any]) -> list[str]:
    meta = summary.get("meta", {})
    return [(f"Runs: {', '.join(summary['runs'])}. Levels: {', '.join(meta.get('levels', []))}. "
            "Entropies in nats."),
            f"CI method: {meta.get('ci_method', M.CI_METHOD)}",
            f"Mutual information: {meta.get('mi_method', M.MI_METHOD)}"]


def _definitions(summary: dict[str, Any]) -> list[tuple[str, str]]:
    return list((summary.get("meta", {}).get("definitions") or DEFINITIONS).items())


def render_markdown(summary: dict[str, Any], images: dict[str, str]) -> str:
    lines = ["# Query-diversity report", ""]
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
    if images:
        lines += ["## Plots", ""]
        for title, fname in images.items():
            lines += [f"### {title}", "", f"![{title}]({fname})", ""]
    return "\n".join(lines)


def render_html(summary: dict[str, Any], images: dict[str, str], out: Path) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>Query-diversity report</title>",
             ("<style>body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
             "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px;"
             "font-size:12px}th{background:#eee}img{max-width:100%}.note{font-size:12px;color:#444}</style>"
              "</head><body>"),
             "<h1>Query-diversity report</h1>"]
    parts += [f"<p>{html.escape(p)}</p>" for p in _intro(summary)]
    parts.append("<h2>Definitions</h2><ul>" + "".join(
        f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in _definitions(summary)) + "</ul>")
    for title, note, header, rows in _tables(summary):
        parts.append(f"<h2>{html.escape(title.replace('`', ''))}</h2>")
        if note:
            parts.append(f"<p class='note'>{html.escape(note)}</p>")
        parts.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        parts.append("</table>")
    for title, fname in images.items():
        data = base64.b64encode((out / fname).read_bytes()).decode("ascii")
        parts.append(f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' "
                     f"src='data:image/png;base64,{data}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


__all__ = ["Episode", "analyze", "analyze_runs", "make_plots", "render_html", "render_markdown"]
