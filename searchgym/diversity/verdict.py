"""The verdict: did RL squeeze the agent's query strategies, over training steps or against another run?

Over steps (a run with >= 3 steps): the strategy shares per step, the strategy entropy per step at one
sample size (the smallest step's query count, at most ``N_CAP``) with a CI from a bootstrap over the step's
episodes, and the change between the first and the last window of steps (each a third of the steps, at
least one): the mean of those steps' own values (so the numbers add up with the per-step series), with a CI
from a bootstrap over each step's episodes. Entropies are never printed as ``-0.00``. The sentence says squeezed (the CI is
below 0), broadened (above 0) or no detectable change, by how much, and onto which strategy.

Between runs: strategy entropy and question-copy rate at equal n, on the shared questions only when the runs
share >= ``MIN_MATCHED`` of them (said as ``matched_questions``); each difference with a bootstrap CI over
episodes; the same-run noise level (split-half: the gap between two random halves of each run); and the
confounds the tool can see (different question sets, different call grammars, evidence of very different
length, different turn budgets). When the shared questions hold under half of either run's episodes, the
comparison on all questions at equal n is given beside the matched one (``beside``), and leads (its
question-set confound named) unless the matched CI's half-width is within the same-run noise of all the data.

Bootstrap replicates of a plug-in entropy that resample with replacement sit below the estimate (duplicates
lower it); the intervals here are re-centred on the estimate (the replicates' spread, not their bias).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from searchgym.diversity import metrics as M
from searchgym.diversity.templates import normalize

N_CAP = 2000
MIN_MATCHED = 20
WINDOW_SHARE = 1 / 3


def _entropy_codes(codes: np.ndarray, k: int) -> float:
    if len(codes) == 0:
        return float("nan")
    p = np.bincount(codes, minlength=k).astype(float)
    p = p[p > 0] / len(codes)
    return max(0.0, float(-(p * np.log(p)).sum()))  # one class: 0.0, not -0.0


def _at_n(codes: np.ndarray, n: int, k: int, rng: np.random.Generator, draws: int = 5) -> float:
    """Mean plug-in entropy of ``draws`` subsamples of ``n`` labels (without replacement)."""
    if len(codes) <= n:
        return _entropy_codes(codes, k)
    return float(np.mean([_entropy_codes(rng.choice(codes, n, replace=False), k) for _ in range(draws)]))


class _Eps:
    """The query labels of a set of episodes, as integer codes per episode."""

    def __init__(self, per_ep: list[np.ndarray], copies: list[np.ndarray]):
        self.per_ep = [e for e in per_ep]
        self.copies = copies

    def codes(self, idx: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        sel = self.per_ep if idx is None else [self.per_ep[i] for i in idx]
        return np.concatenate(sel) if sel else np.zeros(0, dtype=np.int64)

    def copy_rate(self, idx: Sequence[int] | np.ndarray | None = None) -> float:
        sel = self.copies if idx is None else [self.copies[i] for i in idx]
        c = np.concatenate(sel) if sel else np.zeros(0)
        return float(c.mean()) if len(c) else float("nan")

    def __len__(self) -> int:
        return len(self.per_ep)


def _episodes(lab: Any, ep_idx: Sequence[int], code_of: dict[str, int]) -> _Eps:
    q_by_ep: dict[int, list[int]] = {}
    for i, e in enumerate(lab.ep_of):
        q_by_ep.setdefault(e, []).append(i)
    per, cop = [], []
    for e in ep_idx:
        qs = q_by_ep.get(e, [])
        if qs:
            per.append(np.asarray([code_of.setdefault(lab.strategy[i], len(code_of)) for i in qs], dtype=np.int64))
            cop.append(np.asarray([float(lab.copies[i]) for i in qs]))
    return _Eps(per, cop)


def _boot_diff(a: _Eps, b: _Eps, n: int, k: int, *, n_boot: int, seed: int,
               metric: str = "entropy") -> tuple[float, list[float]]:
    """(b - a, re-centred 95% percentile CI) of the strategy entropy at ``n`` (or the copy rate),
    bootstrapping episodes within each side."""
    rng = np.random.default_rng(seed)

    def value(x: _Eps, idx: Sequence[int] | np.ndarray | None) -> float:
        if metric == "entropy":
            return _at_n(x.codes(idx), n, k, rng)
        return x.copy_rate(idx)

    d = value(b, None) - value(a, None)
    reps = []
    for _ in range(n_boot):
        ia = rng.integers(0, len(a), len(a))
        ib = rng.integers(0, len(b), len(b))
        reps.append(value(b, ib) - value(a, ia))
    r = np.asarray(reps)
    r = r[np.isfinite(r)]
    if len(r) < 10:
        return d, [float("nan"), float("nan")]
    r = r - r.mean() + d
    return d, [float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975))]


def _f(x: float, sign: str = "") -> str:
    """``x`` to 2 decimals, never ``-0.00`` (a value that rounds to zero prints as 0.00 / +0.00)."""
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{round(x, 2) + 0.0:{sign}.2f}"


def _window_change(eps: dict[int, _Eps], first: list[int], last: list[int], diff: float, n: int, k: int, *,
                   n_boot: int, seed: int) -> tuple[float, list[float]]:
    """The change between the mean per-step entropy of the ``last`` and the ``first`` steps (``diff``, the same
    numbers the per-step series shows) and its 95% CI: a bootstrap over each step's episodes, re-centred."""
    rng = np.random.default_rng(seed)

    def window_mean(steps: list[int]) -> float:
        vals = []
        for s in steps:
            idx = rng.integers(0, len(eps[s]), len(eps[s]))
            vals.append(_at_n(eps[s].codes(idx), n, k, rng, draws=1))
        return float(np.mean(vals))

    r = np.asarray([window_mean(last) - window_mean(first) for _ in range(n_boot)])
    r = r[np.isfinite(r)]
    if len(r) < 10:
        return diff, [float("nan"), float("nan")]
    r = r - r.mean() + diff
    return diff, [float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975))]


def _word(lo: float, hi: float, *, down: str, up: str, none: str) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return none
    if hi < 0:
        return down
    if lo > 0:
        return up
    return none


def trend(lab: Any, *, n_boot: int = 200, seed: int = 0, classes: Sequence[str] = ()) -> dict[str, Any] | None:
    """The over-steps verdict of one labelled run, or None when it has fewer than 3 steps."""
    steps = sorted({s for s in lab.step_of_ep if s is not None})
    if len(steps) < 3:
        return None
    code_of: dict[str, int] = {c: i for i, c in enumerate(classes)}
    by_step = {s: [e for e, st in enumerate(lab.step_of_ep) if st == s] for s in steps}
    eps = {s: _episodes(lab, by_step[s], code_of) for s in steps}
    steps = [s for s in steps if len(eps[s])]
    if len(steps) < 3:
        return None
    k = max(len(code_of), 1)
    n = min(min(len(eps[s].codes()) for s in steps), N_CAP)
    rng = np.random.default_rng(seed)
    names = sorted(code_of, key=code_of.__getitem__)
    shares: dict[str, list[float]] = {c: [] for c in names}
    per_step = []
    for s in steps:
        codes = eps[s].codes()
        cnt = np.bincount(codes, minlength=len(names))
        for c, i in code_of.items():
            shares[c].append(float(cnt[i] / len(codes)))
        h = _at_n(codes, n, k, rng)
        reps = []
        for _ in range(max(0, min(n_boot, 100))):
            idx = rng.integers(0, len(eps[s]), len(eps[s]))
            reps.append(_at_n(eps[s].codes(idx), n, k, rng, draws=1))
        r = np.asarray(reps)
        ci = [float("nan"), float("nan")]
        if len(r) >= 10:
            r = r - r.mean() + h
            ci = [float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975))]
        per_step.append({"step": int(s), "value": h, "ci": ci, "n": int(min(n, len(codes)))})
    w = max(1, round(len(steps) * WINDOW_SHARE))
    first_steps, last_steps = steps[:w], steps[-w:]

    def window(ss: list[int]) -> _Eps:
        return _Eps([x for s in ss for x in eps[s].per_ep], [x for s in ss for x in eps[s].copies])

    fa, la = window(first_steps), window(last_steps)
    value = {p["step"]: p["value"] for p in per_step}
    h_first = float(np.mean([value[s] for s in first_steps]))
    h_last = float(np.mean([value[s] for s in last_steps]))
    diff, ci = _window_change(eps, first_steps, last_steps, h_last - h_first, n, k, n_boot=n_boot, seed=seed)
    verdict = _word(ci[0], ci[1], down="squeezed", up="broadened", none="no detectable change")
    # onto what: the class whose share grew most between the windows
    fc, lc = Counter(fa.codes().tolist()), Counter(la.codes().tolist())
    nf, nl = max(1, len(fa.codes())), max(1, len(la.codes()))
    grow = sorted(names, key=lambda c: (lc.get(code_of[c], 0) / nl - fc.get(code_of[c], 0) / nf), reverse=True)
    top = grow[0] if grow else None
    what = ""
    if top is not None:
        what = (f"{top} {fc.get(code_of[top], 0) / nf:.2f} → {lc.get(code_of[top], 0) / nl:.2f} of queries; ")
    span = (f"mean of steps {first_steps[0]}–{first_steps[-1]} vs {last_steps[0]}–{last_steps[-1]}"
            if w > 1 else f"step {first_steps[0]} vs {last_steps[0]}")
    sentence = (f"{verdict}: {what}strategy entropy {_f(h_first)} → {_f(h_last)} nats, change {_f(diff, '+')} "
                f"[{_f(ci[0], '+')}, {_f(ci[1], '+')}] ({span}, n = {n} queries per step, 95% bootstrap over "
                "episodes)")
    mi = _mi_per_step(lab, steps, by_step, n_boot=n_boot, seed=seed)
    return {"steps": [int(s) for s in steps], "n": int(n), "strategy_entropy": per_step, "shares": shares,
            "mi_question": mi,
            "change": {"first": h_first, "last": h_last, "diff": diff, "ci": ci, "first_steps": first_steps,
                       "last_steps": last_steps, "n": int(n), "onto": top},
            "verdict": verdict, "sentence": sentence}


def _mi_per_step(lab: Any, steps: list[int], by_step: dict[int, list[int]], *, n_boot: int,
                 seed: int) -> list[dict[str, Any]]:
    """MI(question; strategy) per step at one k (samples per question, the smallest group of any step, 2-8),
    over the questions a step samples in >= 2 episodes, with a CI from a bootstrap over those questions.
    None (with the reason) for a step without two such questions."""
    q_by_ep: dict[int, list[int]] = {}
    for i, e in enumerate(lab.ep_of):
        q_by_ep.setdefault(e, []).append(i)
    groups_of: dict[int, dict[Any, list[str]]] = {}
    for s in steps:
        g: dict[Any, list[str]] = {}
        n_eps: Counter[Any] = Counter()
        for e in by_step[s]:
            key, qs = lab.group_of_ep[e], q_by_ep.get(e, [])
            if key is not None and qs:
                n_eps[key] += 1
                g.setdefault(key, []).extend(lab.strategy[i] for i in qs)
        groups_of[s] = {key: v for key, v in g.items() if n_eps[key] >= 2}
    sizes = [len(v) for g in groups_of.values() for v in g.values()]
    k = max(2, min(8, min(sizes))) if sizes else 0
    rng = np.random.default_rng(seed + 3)
    out: list[dict[str, Any]] = []
    for s in steps:
        groups = groups_of[s]
        if len(groups) < 2 or not k:
            out.append({"step": int(s), "value": None, "ci": None,
                        "why": "fewer than 2 questions with >= 2 episodes at this step"})
            continue
        v = M.mutual_information(groups, k=k, seed=seed)["mi"]
        keys = list(groups)
        reps = []
        for _ in range(min(n_boot, 30)):
            idx = rng.integers(0, len(keys), len(keys))
            reps.append(M.mutual_information({j: groups[keys[i]] for j, i in enumerate(idx)}, k=k, seed=seed)["mi"])
        r = np.asarray([x for x in reps if np.isfinite(x)])
        ci = None
        if len(r) >= 10 and np.isfinite(v):
            r = r - r.mean() + v
            ci = [float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975))]
        out.append({"step": int(s), "value": float(v) if np.isfinite(v) else None, "ci": ci, "k": k,
                    "n_questions": len(groups)})
    return out


def _qkey(q: Any) -> str | None:
    return normalize(q) if isinstance(q, str) and q.strip() else None


def _split_half(x: _Eps, n: int, k: int, *, seed: int, reps: int = 20) -> float:
    """Same-run noise of the strategy entropy: mean |H(half 1) - H(half 2)| at ``n`` over random halves."""
    if len(x) < 4:
        return float("nan")
    rng = np.random.default_rng(seed + 7)
    gaps = []
    for _ in range(reps):
        perm = rng.permutation(len(x))
        h = len(x) // 2
        a, b = x.codes(perm[:h]), x.codes(perm[h:2 * h])
        m = min(len(a), len(b), n)
        if m:
            gaps.append(abs(_at_n(a, m, k, rng, 1) - _at_n(b, m, k, rng, 1)))
    return float(np.mean(gaps)) if gaps else float("nan")


def _confounds(ra: Any, rb: Any, lab_a: Any, lab_b: Any, shared: int, qa: set[str], qb: set[str]) -> list[str]:
    out = []
    small = min(len(qa), len(qb))
    if small and shared < 0.5 * small:
        out.append(f"different question sets ({shared} shared of {len(qa)} and {len(qb)})")
    ga = set(getattr(getattr(ra, "read_stats", None), "grammars", {}) or {})
    gb = set(getattr(getattr(rb, "read_stats", None), "grammars", {}) or {})
    if ga and gb and ga != gb:
        out.append(f"different call grammars ({', '.join(sorted(ga))} vs {', '.join(sorted(gb))})")

    def ev_len(lab: Any) -> float:
        lens = [sum(len(t) for t in ev) for e in lab.episodes for ev in (e.evidence or [])]
        return float(np.mean(lens)) if lens else float("nan")

    la, lb = ev_len(lab_a), ev_len(lab_b)
    if la > 0 and lb > 0 and max(la, lb) / min(la, lb) > 2:
        out.append(f"evidence of very different length ({la:.0f} vs {lb:.0f} characters per search)")

    def budget(lab: Any) -> int:
        return max((len(e.queries) for e in lab.episodes), default=0)

    ba, bb = budget(lab_a), budget(lab_b)
    if ba and bb and max(ba, bb) > 2 * min(ba, bb):
        out.append(f"different turn budgets (at most {ba} vs {bb} searches per episode)")
    return out


def _top(x: _Eps, code_of: dict[str, int]) -> str:
    """The most frequent strategy of a set of episodes and its share ("copy-question 0.81")."""
    c = Counter(x.codes().tolist())
    if not c:
        return "–"
    code, k = c.most_common(1)[0]
    name = next((n for n, i in code_of.items() if i == code), "?")
    return f"{name} {k / sum(c.values()):.2f}"


def _sides(lab_a: Any, lab_b: Any, shared: set[str] | None, code_of: dict[str, int]) -> tuple[_Eps, _Eps]:
    """The episodes of each run: on the ``shared`` questions only, or all of them (``shared`` None)."""
    def sel(lab: Any) -> list[int]:
        return [i for i, e in enumerate(lab.episodes) if shared is None or _qkey(e.question) in shared]

    return _episodes(lab_a, sel(lab_a), code_of), _episodes(lab_b, sel(lab_b), code_of)


def _measure(ea: _Eps, eb: _Eps, k: int, *, n_boot: int, seed: int) -> dict[str, Any]:
    """Both metrics' difference and CI at equal n, and the same-run noise, of one selection of episodes."""
    n = min(len(ea.codes()), len(eb.codes()), N_CAP)
    out: dict[str, Any] = {"n": int(n), "noise": max(_split_half(ea, n, k, seed=seed),
                                                     _split_half(eb, n, k, seed=seed + 1)), "ea": ea, "eb": eb}
    for metric in ("strategy_entropy", "copy_rate"):
        out[metric] = _boot_diff(ea, eb, n, k, n_boot=n_boot, seed=seed,
                                 metric="entropy" if metric == "strategy_entropy" else "copy")
    return out


def _resolves_noise(m: dict[str, Any], noise: float) -> bool:
    """A comparison keeps enough data when its CI half-width is at most the same-run noise of all the data
    (a subset's own split-half noise grows as it shrinks, so it is no yardstick for itself)."""
    lo, hi = m["strategy_entropy"][1]
    return not (math.isnan(lo) or math.isnan(hi) or math.isnan(noise)) and (hi - lo) / 2 <= noise


def _verdict_word(metric: str, ci: list[float], name_a: str, name_b: str) -> str:
    if metric == "strategy_entropy":
        return _word(ci[0], ci[1], down=f"{name_b} narrower than {name_a}", up=f"{name_b} broader than {name_a}",
                     none="not different")
    return _word(ci[0], ci[1], down=f"{name_b} copies the question less than {name_a}",
                 up=f"{name_b} copies the question more than {name_a}", none="not different")


def _beside(metric: str, m: dict[str, Any], where: str, name_a: str, name_b: str) -> dict[str, Any]:
    d, ci = m[metric]
    word = _verdict_word(metric, ci, name_a, name_b)
    return {"where": where, "diff": d, "ci": ci, "verdict": word, "n": m["n"], "noise": m["noise"],
            "text": f"{where}: {word}, {_f(d, '+')} [{_f(ci[0], '+')}, {_f(ci[1], '+')}], n = {m['n']}"}


def compare(name_a: str, name_b: str, run_a: Any, run_b: Any, lab_a: Any, lab_b: Any, *,
            classes: Sequence[str], n_boot: int = 200, seed: int = 0,
            mi: tuple[Any, Any] = (None, None)) -> list[dict[str, Any]]:
    """The between-runs comparisons of ``b`` against ``a`` (one dict per metric).

    On the shared questions when the runs share >= ``MIN_MATCHED``. When that keeps under half of either
    run's episodes, the comparison on all questions at equal n (its question-set confound named) is given
    beside it, and leads unless the matched one's CI is narrow enough to detect the same-run noise."""
    qa = {k for k in (_qkey(e.question) for e in lab_a.episodes) if k is not None}
    qb = {k for k in (_qkey(e.question) for e in lab_b.episodes) if k is not None}
    shared = qa & qb
    matched = len(shared) >= MIN_MATCHED
    code_of: dict[str, int] = {c: i for i, c in enumerate(classes)}
    k = max(len(code_of), 1)
    ea, eb = _sides(lab_a, lab_b, shared if matched else None, code_of)
    out: list[dict[str, Any]] = []
    if not len(ea) or not len(eb):
        return out
    m = _measure(ea, eb, k, n_boot=n_boot, seed=seed)
    where = f"on {len(shared)} shared questions" if matched else "on all questions (fewer than " \
        f"{MIN_MATCHED} shared)"
    lead, other = m, None
    if matched and (2 * len(ea) < len(lab_a.episodes) or 2 * len(eb) < len(lab_b.episodes)):
        full = _measure(*_sides(lab_a, lab_b, None, code_of), k, n_boot=n_boot, seed=seed)
        all_where = f"on all questions at equal n (different question sets: {len(shared)} shared)"
        if _resolves_noise(m, full["noise"]):
            other = (full, all_where)
        else:
            lead, other, where = full, (m, where + " (too few to detect the same-run noise)"), all_where
    confounds = _confounds(run_a, run_b, lab_a, lab_b, len(shared), qa, qb)
    n, noise = lead["n"], lead["noise"]
    n_matched = len(shared) if matched and lead is m else 0
    for metric in ("strategy_entropy", "copy_rate"):
        d, ci = lead[metric]
        word = _verdict_word(metric, ci, name_a, name_b)
        sentence = (f"{metric.replace('_', ' ')} {name_b} vs {name_a}: {word}, difference {_f(d, '+')} "
                    f"[{_f(ci[0], '+')}, {_f(ci[1], '+')}] {where}, n = {n}")
        if metric == "strategy_entropy":
            sentence += f"; same-run noise (split-half) {_f(noise)}; mix: {name_a} {_top(lead['ea'], code_of)}, " \
                        f"{name_b} {_top(lead['eb'], code_of)}"
        row = {"a": name_a, "b": name_b, "matched_questions": n_matched, "metric": metric, "diff": d, "ci": ci,
               "verdict": word, "confounds": confounds, "noise": noise if metric == "strategy_entropy" else None,
               "n": int(n)}
        if other is not None:
            row["beside"] = _beside(metric, other[0], other[1], name_a, name_b)
            sentence += f"; beside it, {row['beside']['text']}"
        if confounds:
            sentence += "; confounds: " + "; ".join(confounds)
        row["sentence"] = sentence
        out.append(row)
    out.append(_mi_row(name_a, name_b, n_matched, confounds, mi))
    return out


def _mi_row(name_a: str, name_b: str, n_matched: int, confounds: list[str], mi: tuple[Any, Any]) -> dict[str, Any]:
    ma, mb = mi
    if ma is None or mb is None:
        why = "MI(question; strategy) needs >= 2 episodes per question in both runs"
        return {"a": name_a, "b": name_b, "matched_questions": n_matched, "metric": "mi_question", "diff": None,
                "ci": None, "verdict": "not available", "confounds": confounds,
                "sentence": f"question MI {name_b} vs {name_a}: not available ({why})"}
    return {"a": name_a, "b": name_b, "matched_questions": n_matched, "metric": "mi_question", "diff": mb - ma,
            "ci": None, "verdict": "no CI (point estimates)", "confounds": confounds,
            "sentence": f"question MI {name_b} vs {name_a}: {_f(ma)} → {_f(mb)} nats (no CI)"}


__all__ = ["MIN_MATCHED", "N_CAP", "compare", "trend"]
