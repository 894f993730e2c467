"""Offline analysis of runs: ``analyze_runs(paths, out_dir)`` -> summary dict + report files.

Writes into ``out_dir``:

* ``summary.json`` - ``{"runs": {RUN: {"levels": {LEVEL: {"entropy", "effective_number", "top1_mass", …}},
  "series": [{"step", "levels": {LEVEL: {…}}, …}], "text", "moves", "process", "policy",
  "top_templates"}}, "comparisons": {…}, "meta": {…}}``. ``series`` is there when the run has steps.
  NaN values are written as ``null``.
* ``report.md`` (PNG files next to it) and ``report.html`` (self-contained, PNGs embedded in base64).
* PNG plots: ``entropy_vs_step.png``, ``top_templates_<run>.png``, ``moves.png``,
  ``reward_vs_entropy.png``, ``pass_at_k.png`` (each only when the runs have the data for it).

Within-question values use the K rollouts of one question (at one step); across-question values pool
all queries. Runs are compared at equal sample size (rarefied entropy) with bootstrap CIs, and by the
Jensen-Shannon divergence of their template distributions. Success for pass@k is ``em`` for searchgym
trajectories and ``reward >= success_threshold`` (default 1.0) for other formats.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.diversity import metrics as M
from searchgym.diversity.moves import MOVES, ctar, episode_moves, transition_matrix
from searchgym.diversity.readers import Episode, Run, read_run
from searchgym.diversity.templates import LEVELS, TEXT_LEVELS, Templater, normalize
from searchgym.errors import ConfigError

LEVEL_KEYS = ("entropy", "miller_madow_entropy", "normalized_entropy", "effective_number", "inverse_simpson",
              "top1_mass", "top5_mass", "n_templates", "rank_beta", "n")


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
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class _RunAnalysis:
    """Templates, moves and per-group indices of one run."""

    def __init__(self, run: Run, templater: Templater, levels: Sequence[str], clusterer: Any = None,
                 success_threshold: float = 1.0):
        self.run = run
        self.levels = list(levels)
        text_levels = [lv for lv in levels if lv in TEXT_LEVELS]
        self.templates: dict[str, list[list[str]]] = {lv: [] for lv in levels}  # per episode
        self.moves: list[list[str]] = []
        self.ctars: list[float] = []
        self.yields: list[float] = []
        self.dups: list[float] = []
        for ep in run.episodes:
            seen: list[str] = []
            per: dict[str, list[str]] = {lv: [] for lv in text_levels}
            for i, q in enumerate(ep.queries):
                tpl = templater.templates(q, text_levels, question=ep.question, retrieved_titles=tuple(seen))
                for lv, t in tpl.items():
                    per[lv].append(t)
                if i < len(ep.titles):
                    seen.extend(ep.titles[i])
            for lv in text_levels:
                self.templates[lv].append(per[lv])
            ev = ep.evidence if ep.evidence and len(ep.evidence) == len(ep.queries) else None
            has_ev = ev is not None and any(ev)
            self.moves.append(episode_moves(ep.queries, ev if has_ev else None, question=ep.question))
            if has_ev:
                self.ctars.extend(x for x in ctar(ep.queries, ev) if not math.isnan(x))
            if ep.doc_ids and any(ep.doc_ids):
                y = M.new_document_yield(ep.doc_ids)
                if not math.isnan(y):
                    self.yields.append(y)
            if ep.queries:
                self.dups.append(M.duplicate_query_rate(ep.queries))
        if "semantic" in levels:
            flat = [normalize(q) for ep in run.episodes for q in ep.queries]
            labels = clusterer.cluster(flat) if flat else []
            i = 0
            for ep in run.episodes:
                self.templates["semantic"].append(labels[i:i + len(ep.queries)])
                i += len(ep.queries)
        self.success = [
            (ep.success if ep.success is not None else
             (ep.reward is not None and ep.reward >= success_threshold - 1e-9)) for ep in run.episodes]

    def flat(self, level: str, idx: Iterable[int] | None = None) -> list[str]:
        eps = self.templates[level]
        rng = range(len(eps)) if idx is None else idx
        return [t for i in rng for t in eps[i]]

    def steps(self) -> list[int]:
        return sorted({e.step for e in self.run.episodes if e.step is not None})

    def by_step(self) -> dict[int, list[int]]:
        d: dict[int, list[int]] = defaultdict(list)
        for i, e in enumerate(self.run.episodes):
            if e.step is not None:
                d[e.step].append(i)
        return dict(d)

    def groups(self, idx: Iterable[int]) -> dict[Any, list[int]]:
        """Episodes grouped by (step, question)."""
        d: dict[Any, list[int]] = defaultdict(list)
        for i in idx:
            e = self.run.episodes[i]
            d[(e.step, e.question_id or e.question)].append(i)
        return dict(d)


def _level_stats(ra: _RunAnalysis, level: str, idx: list[int] | None = None) -> dict[str, float]:
    items = ra.flat(level, idx)
    if not items:
        return {}
    st = M.template_stats(items)
    out = {k: float(st[k]) for k in LEVEL_KEYS}
    idx_all = list(range(len(ra.run.episodes))) if idx is None else idx
    groups = ra.groups(idx_all)
    if any(k[1] is not None for k in groups):
        all_by_q = {g: [t for i in ii for t in ra.templates[level][i]] for g, ii in groups.items()}
        first_by_q = {g: [ra.templates[level][i][0] for i in ii if ra.templates[level][i]]
                      for g, ii in groups.items()}
        wa = M.within_across(all_by_q, M.entropy)
        out["within_question_entropy"] = wa["within"]
        out["first_query_within_entropy"] = M.within_across(first_by_q, M.entropy)["within"]
        firsts = [v[0] for v in first_by_q.values() if v]
        out["first_query_across_entropy"] = M.entropy(firsts) if firsts else float("nan")
    return out


def _pass_curves(ra: _RunAnalysis) -> dict[str, Any] | None:
    idx = list(range(len(ra.run.episodes)))
    steps = ra.steps()
    chosen_step = None
    if steps:
        by = ra.by_step()
        for s in reversed(steps):  # the last step with repeated questions
            g = ra.groups(by[s])
            if any(len(v) >= 2 for k, v in g.items() if k[1] is not None):
                idx, chosen_step = by[s], s
                break
    groups = {k: v for k, v in ra.groups(idx).items() if k[1] is not None and len(v) >= 2}
    if not groups:
        return None
    nmin = min(len(v) for v in groups.values())
    results = [(len(v), sum(1 for i in v if ra.success[i])) for v in groups.values()]
    ks = sorted({k for k in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] if k <= nmin} | {nmin})
    return {"step": chosen_step, "n_questions": len(results), "samples_min": nmin, "k": ks,
            "pass_at_k": [M.mean_pass_at_k(results, k) for k in ks],
            "pass_hat_k": [M.mean_pass_hat_k(results, k) for k in ks],
            "cover_at_0.5": M.cover_at(results, 0.5)}


def _run_summary(ra: _RunAnalysis, *, clusterer: Any, seed: int) -> dict[str, Any]:
    run = ra.run
    queries = [q for e in run.episodes for q in e.queries]
    out: dict[str, Any] = {"path": run.path, "format": run.fmt, "episodes": len(run.episodes),
                           "queries": len(queries)}
    out["levels"] = {lv: _level_stats(ra, lv) for lv in ra.levels}
    out["top_templates"] = {
        lv: [[t, int(n)] for t, n in sorted(Counter(ra.flat(lv)).items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
        for lv in ra.levels}
    pos_text = [" ".join(ra.templates["pos"][i]) for i in range(len(run.episodes))] if "pos" in ra.levels else []
    out["text"] = {
        "distinct_1": M.distinct_n(queries, 1) if queries else float("nan"),
        "distinct_2": M.distinct_n(queries, 2) if queries else float("nan"),
        "self_bleu": M.self_bleu(queries, seed=seed) if len(queries) >= 2 else float("nan"),
        "compression_ratio": M.compression_ratio(queries) if queries else float("nan"),
        "compression_ratio_pos": M.compression_ratio(pos_text) if any(pos_text) else float("nan"),
    }
    # within-question versions: over the K rollouts of each (step, question)
    qgroups = {g: [q for i in ii for q in run.episodes[i].queries]
               for g, ii in ra.groups(range(len(run.episodes))).items() if g[1] is not None}
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
    lv = "slot" if "slot" in ra.levels else ra.levels[0]
    seqs = [tuple(t) for t in ra.templates[lv]]
    ok = [sq for sq, good in zip(seqs, ra.success) if good]
    bad = [sq for sq, good in zip(seqs, ra.success) if not good]
    out["sequences"] = {"level": lv, "distinct": len(set(seqs)), "entropy": M.entropy(seqs) if seqs else None,
                        "distinct_correct": len(set(ok)), "distinct_incorrect": len(set(bad)),
                        "episodes_correct": len(ok), "episodes_incorrect": len(bad)}
    flat_moves = [m for seq in ra.moves for m in seq]
    mc = Counter(flat_moves)
    out["moves"] = {"counts": {m: int(mc.get(m, 0)) for m in MOVES},
                    "entropy": M.entropy(mc) if mc else float("nan"),
                    "transitions": transition_matrix(ra.moves)}
    out["process"] = {
        "queries_per_episode": len(queries) / len(run.episodes) if run.episodes else float("nan"),
        "duplicate_query_rate": float(np.mean(ra.dups)) if ra.dups else float("nan"),
        "new_document_yield": float(np.mean(ra.yields)) if ra.yields else float("nan"),
        "ctar": float(np.mean(ra.ctars)) if ra.ctars else float("nan"),
    }
    rewards = [e.reward for e in run.episodes if e.reward is not None]
    policy: dict[str, Any] = {"reward_mean": float(np.mean(rewards)) if rewards else float("nan"),
                              "success_rate": float(np.mean(ra.success)) if ra.success else float("nan")}
    te = [e.token_entropy for e in run.episodes if e.token_entropy is not None]
    if te:
        policy.update(M.token_entropy_summary(te))
    curves = _pass_curves(ra)
    if curves:
        policy["pass_at_k"] = curves
    out["policy"] = policy

    if run.has_steps:
        series = []
        law_h, law_r = [], []
        law_level = "slot" if "slot" in ra.levels else ra.levels[0]
        for s, idx in sorted(ra.by_step().items()):
            item: dict[str, Any] = {"step": int(s), "episodes": len(idx),
                                    "levels": {lv: _level_stats(ra, lv, idx) for lv in ra.levels}}
            rw = [run.episodes[i].reward for i in idx if run.episodes[i].reward is not None]
            if rw:
                item["reward_mean"] = float(np.mean(rw))
            ent = [run.episodes[i].token_entropy for i in idx if run.episodes[i].token_entropy is not None]
            if ent:
                item["token_entropy_mean"] = float(np.mean(ent))
            h = item.get("token_entropy_mean", item["levels"][law_level].get("entropy"))
            if rw and h is not None:
                law_h.append(h)
                law_r.append(item["reward_mean"])
            series.append(item)
        out["series"] = series
        fit = M.fit_entropy_law(law_h, law_r)
        fit["entropy"] = "token" if te else f"template:{law_level}"
        out["policy"]["entropy_law"] = fit
        out["policy"]["entropy_law_points"] = [[h, r] for h, r in zip(law_h, law_r)]
    return out


def _rarefied_ci(items: list[str], n: int, est: float, *, n_boot: int, seed: int,
                 alpha: float = 0.05) -> tuple[float, float]:
    """Basic-bootstrap CI of the rarefied entropy: each replicate resamples the run with replacement and
    keeps n of the draws; the interval is reflected around ``est`` (see ``metrics.bootstrap_ci``)."""
    rng = np.random.default_rng(seed)
    arr = np.asarray(items, dtype=object)
    vals = [M.entropy(arr[rng.integers(0, len(arr), n)].tolist()) for _ in range(n_boot)]
    if not vals:
        return float("nan"), float("nan")
    q_lo, q_hi = np.quantile(vals, [alpha / 2, 1 - alpha / 2])
    return max(0.0, 2 * est - q_hi), min(math.log(n), 2 * est - q_lo)  # entropy of n items <= log n


def _comparisons(analyses: list[_RunAnalysis], levels: Sequence[str], *, n_boot: int, seed: int) -> dict:
    names = [a.run.name for a in analyses]
    out: dict[str, Any] = {"js_divergence": {}, "novelty": {}, "rarefied": {}}
    for lv in levels:
        flats = {a.run.name: a.flat(lv) for a in analyses}
        js = {}
        nov = {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                js[f"{a} vs {b}"] = M.js_divergence(Counter(flats[a]), Counter(flats[b]))
            for b in names:
                if a != b:
                    nov[f"{a} vs {b}"] = M.novelty(Counter(flats[a]), Counter(flats[b]))
        out["js_divergence"][lv] = js
        out["novelty"][lv] = nov
        sizes = [len(v) for v in flats.values() if v]
        if not sizes:
            continue
        n = min(sizes)
        rar = {"n": n}
        for name, items in flats.items():
            if len(items) < n or n < 2:
                continue
            est = M.rarefied(M.entropy, items, n, seed=seed)
            lo, hi = _rarefied_ci(items, n, est, n_boot=n_boot, seed=seed)
            rar[name] = {"entropy": est,
                         "effective_number": M.rarefied(M.effective_number, items, n, seed=seed),
                         "entropy_ci": [lo, hi]}
        out["rarefied"][lv] = rar
    return out


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
    analyses = [_RunAnalysis(r, templater, levels, clusterer, success_threshold) for r in runs]
    summary: dict[str, Any] = {"runs": {}}
    for a in analyses:
        summary["runs"][a.run.name] = _run_summary(a, clusterer=clusterer, seed=seed)
    summary["comparisons"] = _comparisons(analyses, levels, n_boot=n_boot, seed=seed)
    summary["meta"] = {"levels": levels, "success_threshold": success_threshold, "n_boot": n_boot, "seed": seed}
    return _clean(summary)


def _unique_names(runs: list[Run]) -> None:
    seen: Counter = Counter()
    for r in runs:
        seen[r.name] += 1
        if seen[r.name] > 1:
            r.name = f"{r.name}-{seen[r.name]}"


def analyze_runs(paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *, fmt: str = "auto",
                 text_field: str | None = None, step_field: str | None = None,
                 question_field: str | None = None, reward_field: str | None = None,
                 levels: Sequence[str] = TEXT_LEVELS, titles: Iterable[str] = (), embedder: Any = None,
                 success_threshold: float = 1.0, n_boot: int = 200, seed: int = 0,
                 plots: bool = True) -> dict[str, Any]:
    """Read the runs, analyse them, write ``summary.json``, ``report.md``, ``report.html`` and the PNGs
    into ``out_dir``; return the summary dict."""
    if not paths:
        raise ConfigError("analyze needs at least one run path")
    runs = [read_run(p, fmt, text_field=text_field, step_field=step_field, question_field=question_field,
                     reward_field=reward_field) for p in paths]
    _unique_names(runs)
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
        os.replace(tmp, path)
        images[title] = fname

    stepped = {n: r for n, r in runs.items() if r.get("series")}
    if stepped:
        fig, axes = plt.subplots(len(levels), 2, figsize=(10, 2.6 * len(levels)), squeeze=False)
        for row, lv in enumerate(levels):
            for col, key in enumerate(("entropy", "effective_number")):
                ax = axes[row][col]
                for name, r in stepped.items():
                    xs = [s["step"] for s in r["series"] if s["levels"].get(lv, {}).get(key) is not None]
                    ys = [s["levels"][lv][key] for s in r["series"] if s["levels"].get(lv, {}).get(key) is not None]
                    ax.plot(xs, ys, marker="o", ms=3, label=name)
                ax.set_title(f"{lv}: {key.replace('_', ' ')}", fontsize=9)
                ax.set_xlabel("step", fontsize=8)
                ax.tick_params(labelsize=7)
        axes[0][0].legend(fontsize=7)
        fig.subplots_adjust(left=0.07, right=0.98, top=0.96, bottom=0.06, hspace=0.55, wspace=0.18)
        save(fig, "entropy_vs_step.png", "Template entropy and effective number vs step")

    lv = _primary(summary)
    for name, r in runs.items():
        top = r.get("top_templates", {}).get(lv) or []
        if not top:
            continue
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(top) + 1))
        labels = [t if len(t) <= 60 else t[:57] + "..." for t, _ in top][::-1]
        total = max(r["queries"], 1)
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

    with_law = {n: r for n, r in runs.items() if r["policy"].get("entropy_law_points")}
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


def _tables(summary: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table in the report."""
    runs = summary["runs"]
    names = list(runs)
    levels = summary.get("meta", {}).get("levels") or list(TEXT_LEVELS)
    tables = []
    rows = [[n, str(r["format"]), str(r["episodes"]), str(r["queries"]),
             _fmt(r["process"]["queries_per_episode"]), _fmt(r["policy"].get("reward_mean"))]
            for n, r in runs.items()]
    tables.append(("Runs", ["run", "format", "episodes", "queries", "queries/episode", "mean reward"], rows))
    keys = ("entropy", "miller_madow_entropy", "effective_number", "inverse_simpson", "top1_mass", "top5_mass",
            "n_templates", "rank_beta", "within_question_entropy", "first_query_within_entropy")
    for lv in levels:
        rows = [[n, *[_fmt(runs[n]["levels"].get(lv, {}).get(k)) for k in keys]] for n in names]
        tables.append((f"Template level `{lv}` (all queries pooled; entropy in nats)", ["run", *keys], rows))
    rar = summary.get("comparisons", {}).get("rarefied", {})
    rows = []
    for lv in levels:
        r = rar.get(lv) or {}
        for n in names:
            if n in r:
                ci = r[n]["entropy_ci"]
                rows.append([lv, n, str(r["n"]), _fmt(r[n]["entropy"]), f"[{_fmt(ci[0])}, {_fmt(ci[1])}]",
                             _fmt(r[n]["effective_number"])])
    if rows:
        tables.append(("At equal sample size (rarefied; 95% bootstrap CI)",
                       ["level", "run", "n queries", "entropy", "CI", "effective number"], rows))
    js = summary.get("comparisons", {}).get("js_divergence", {})
    rows = [[lv, pair, _fmt(v)] for lv in levels for pair, v in (js.get(lv) or {}).items()]
    if rows:
        tables.append(("Jensen-Shannon divergence between runs (nats, max ln 2 = 0.693)",
                       ["level", "runs", "JS"], rows))
    tkeys = ("distinct_1", "distinct_2", "self_bleu", "compression_ratio", "compression_ratio_pos",
             "distinct_2_within", "self_bleu_within")
    tables.append(("Text diversity", ["run", *tkeys], [[n, *[_fmt(runs[n]["text"].get(k)) for k in tkeys]]
                                                       for n in names]))
    if any("embedding" in r for r in runs.values()):
        ekeys = ("mean_pairwise_distance", "chamfer_distance", "vendi_score", "vendi_score_within")
        tables.append(("Embedding diversity", ["run", *ekeys],
                       [[n, *[_fmt(runs[n].get("embedding", {}).get(k)) for k in ekeys]] for n in names]))
    pkeys = ("duplicate_query_rate", "new_document_yield", "ctar")
    tables.append(("Search process", ["run", "move entropy", *pkeys],
                   [[n, _fmt(runs[n]["moves"]["entropy"]), *[_fmt(runs[n]["process"].get(k)) for k in pkeys]]
                    for n in names]))
    skeys = ("level", "distinct", "entropy", "distinct_correct", "episodes_correct", "distinct_incorrect",
             "episodes_incorrect")
    tables.append(("Distinct query sequences per episode (trajectory level)", ["run", *skeys],
                   [[n, *[_fmt(runs[n]["sequences"].get(k)) for k in skeys]] for n in names]))
    tables.append(("Reformulation moves (counts)", ["run", *MOVES],
                   [[n, *[str(runs[n]["moves"]["counts"][m]) for m in MOVES]] for n in names]))
    rows = []
    for n in names:
        law = runs[n]["policy"].get("entropy_law")
        if law:
            rows.append([n, str(law.get("entropy")), _fmt(law.get("a")), _fmt(law.get("b")),
                         _fmt(law.get("ceiling")), _fmt(law.get("rmse")), _fmt(law.get("n"))])
    if rows:
        tables.append(("Entropy law R = -a exp(H) + b", ["run", "H", "a", "b", "ceiling (H=0)", "RMSE", "points"],
                       rows))
    rows = []
    for n in names:
        c = runs[n]["policy"].get("pass_at_k")
        if c:
            for k, p, ph in zip(c["k"], c["pass_at_k"], c["pass_hat_k"]):
                rows.append([n, str(c["step"]), str(c["n_questions"]), str(k), _fmt(p), _fmt(ph)])
    if rows:
        tables.append(("pass@k and pass^k", ["run", "step", "questions", "k", "pass@k", "pass^k"], rows))
    lv = _primary(summary)
    for n in names:
        top = runs[n].get("top_templates", {}).get(lv) or []
        if top:
            tables.append((f"Top `{lv}` templates: {n}", ["template", "count"], [[t, str(c)] for t, c in top]))
    return tables


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(summary: dict[str, Any], images: dict[str, str]) -> str:
    lines = ["# Query-diversity report", "",
             (f"Runs: {', '.join(summary['runs'])}. Levels: {', '.join(summary['meta']['levels'])}. "
             "Entropies in nats; effective number = exp(H)."), ""]
    for title, header, rows in _tables(summary):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
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
             "font-size:12px}th{background:#eee}img{max-width:100%}</style></head><body>"),
             "<h1>Query-diversity report</h1>",
             (f"<p>Runs: {html.escape(', '.join(summary['runs']))}. Entropies in nats; effective number = "
             "exp(H).</p>")]
    for title, header, rows in _tables(summary):
        parts.append(f"<h2>{html.escape(title.replace('`', ''))}</h2><table><tr>"
                     + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
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
