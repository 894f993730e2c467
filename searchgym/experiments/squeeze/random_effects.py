"""Worlds as random effects: the squeeze headline's intervals (issue 31 §5).

Each world has its own SFT start, so the worlds of a multi-world run are a sample of worlds (and starts), not the
whole population. Per endpoint, each world contributes one difference ``y_w = mean(arm) − mean(base)`` over its
seeds with the within-world variance ``v_w = s²_arm/n_arm + s²_base/n_base``; the worlds are pooled with

- **DerSimonian–Laird** (DL): fixed-effect weights ``w = 1/v``, Cochran's ``Q = Σ w (y − ȳ_FE)²``, the
  between-world variance ``τ² = max(0, (Q − (k−1)) / (Σw − Σw²/Σw))``, random-effects weights
  ``w* = 1/(v + τ²)``, the estimate ``μ = Σ w* y / Σ w*`` with ``SE = sqrt(1/Σ w*)`` and a **t interval on
  k − 1 degrees of freedom** (not the normal one: with three worlds the normal interval is far too narrow);
- **Hartung–Knapp–Sidik–Jonkman** (HKSJ): the same ``μ`` with ``SE² = Σ w* (y − μ)² / ((k−1) Σ w*)`` and a t
  interval on k − 1 df.

The fixed-effect pooled intervals of :mod:`~searchgym.experiments.squeeze.worlds` stay as a secondary view.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from searchgym.experiments.squeeze.worlds import _values, _world_seed  # the one reader of each

# Fixed before the run that fills the headline (docs/squeeze.md "Pre-registered endpoints").
PRIMARY_ENDPOINT = "strategy_entropy_rarefied"
PRIMARY_COST_ENDPOINT = "test_success"
# The endpoints the headline's random-effects block reports, with their labels (primary ones first).
ENDPOINTS = (
    (PRIMARY_ENDPOINT, "strategy entropy, rarefied to a common count (primary)"),
    (PRIMARY_COST_ENDPOINT, "test success (primary cost)"),
    ("strategy_entropy", "strategy entropy (plug-in)"),
    ("slot_entropy", "template entropy (slot)"),
    ("train_success", "train success"),
    ("shift:shift_homonym", "shift_homonym success"),
)


def dersimonian_laird(y: list[float], v: list[float], *, alpha: float = 0.05, df: int | None = None) -> dict[str, Any]:
    """Random-effects pooling of ``k`` per-world estimates ``y`` with within-world variances ``v``.

    Returns ``estimate``, ``se`` and ``ci`` (DL, t on ``df`` = k − 1 df unless given), ``p``, ``tau2``, ``Q``,
    ``I2``, ``k``, ``df`` and ``hksj`` (``se``, ``ci``, ``p``). Fewer than 2 worlds (or ``df`` < 1), or a zero
    within-world variance: the estimate alone (no interval). ``df`` below k − 1 is for units that are not
    independent (several SFT starts of one world: the interval's df count worlds)."""
    from scipy.stats import t

    ys, vs = np.asarray(y, dtype=np.float64), np.asarray(v, dtype=np.float64)
    k = len(ys)
    df = (k - 1 if k else None) if df is None else min(df, k - 1)
    out: dict[str, Any] = {"estimate": float(ys.mean()) if k else None, "se": None, "ci": None, "p": None,
                           "tau2": None, "Q": None, "I2": None, "k": k, "df": df, "hksj": None}
    if k < 2 or not df or df < 1 or np.any(vs <= 0):
        return out
    w = 1.0 / vs
    fe = float((w * ys).sum() / w.sum())
    q = float((w * (ys - fe) ** 2).sum())
    c = float(w.sum() - (w ** 2).sum() / w.sum())
    tau2 = max(0.0, (q - (k - 1)) / c)
    ws = 1.0 / (vs + tau2)
    mu = float((ws * ys).sum() / ws.sum())
    se = math.sqrt(1.0 / float(ws.sum()))
    tq = float(t.ppf(1 - alpha / 2, df))
    out.update(estimate=mu, se=se, ci=[mu - tq * se, mu + tq * se], p=float(2 * t.sf(abs(mu) / se, df)),
               tau2=tau2, Q=q, I2=max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0)
    se_h = math.sqrt(float((ws * (ys - mu) ** 2).sum()) / ((k - 1) * float(ws.sum())))
    out["hksj"] = {"se": se_h, "ci": [mu - tq * se_h, mu + tq * se_h],
                   "p": float(2 * t.sf(abs(mu) / se_h, df)) if se_h > 0 else (0.0 if mu else 1.0)}
    return out


def world_difference(a: list[float], b: list[float]) -> tuple[float, float] | None:
    """One world's ``(mean(a) − mean(b), s²_a/n_a + s²_b/n_b)`` from per-seed values; None with < 2 seeds a side."""
    a = [float(x) for x in a if x is not None]
    b = [float(x) for x in b if x is not None]
    if len(a) < 2 or len(b) < 2:
        return None
    return (float(np.mean(a)) - float(np.mean(b)),
            float(np.var(a, ddof=1)) / len(a) + float(np.var(b, ddof=1)) / len(b))


def random_effects_block(summaries: list[dict[str, Any]], arm: str = "grpo", base: str = "sft",
                         endpoints: tuple[tuple[str, str], ...] = ENDPOINTS) -> dict[str, Any]:
    """``arm − base`` per endpoint over the worlds of ``summaries`` (one ``summary.json`` dict per SFT start, each
    world with one or more) as random effects (:func:`dersimonian_laird`), with the worlds' seeds, the number of
    worlds ``k`` and of SFT starts per world, and the primary endpoints' names.

    Several starts of one world enter as separate units of one random-effects variance (τ² then spans worlds and
    starts; the two are not separated), and the t interval keeps k_worlds − 1 df, so a second start narrows the
    interval only through its data, not through more degrees of freedom. Two runs of one world with the same
    start (:func:`start_fingerprint`) are a :class:`ConfigError`: that would count one start twice."""
    worlds = [_world_seed(s) for s in summaries]
    _refuse_repeated_starts(summaries, worlds)
    starts: dict[str, int] = {}
    for w in worlds:
        starts[str(w)] = starts.get(str(w), 0) + 1  # one summary = one SFT start of that world
    several = len(starts) < len(worlds)  # some world has more than one start: df count worlds, not units
    per: dict[str, Any] = {}
    for key, label in endpoints:
        diffs = [(w, world_difference(_values(s["arms"].get(arm), key), _values(s["arms"].get(base), key)))
                 for w, s in zip(worlds, summaries) if arm in s.get("arms", {}) and base in s.get("arms", {})]
        ok = [(w, d) for w, d in diffs if d is not None]
        res = dersimonian_laird([d[0] for _, d in ok], [d[1] for _, d in ok],
                                df=len({w for w, _ in ok}) - 1 if several else None)
        res.update(label=label, worlds=[w for w, _ in ok], per_world=[d[0] for _, d in ok],
                   per_world_var=[d[1] for _, d in ok])
        per[key] = res
    method = "DerSimonian-Laird, t interval on k-1 df; HKSJ beside it" + (
        "; several SFT starts per world as units of one tau^2, df = worlds - 1" if several else "")
    return {"arm": arm, "base": base, "method": method,
            "primary_endpoint": PRIMARY_ENDPOINT, "primary_cost_endpoint": PRIMARY_COST_ENDPOINT,
            "k_worlds": len(set(worlds)), "starts_per_world": starts, "endpoints": per}


def start_fingerprint(summary: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a run's SFT start: its world and its competence-gate figures (the same start, evaluated
    on the same gate questions, gives the same figures)."""
    c = summary.get("competence") or {}
    return (_world_seed(summary), c.get("successes"), c.get("test_success"))


def _refuse_repeated_starts(summaries: list[dict[str, Any]], worlds: list[int]) -> None:
    from searchgym.errors import ConfigError

    seen: dict[tuple[Any, ...], int] = {}
    for i, s in enumerate(summaries):
        fp = start_fingerprint(s)
        if fp[1] is None and fp[2] is None:
            continue  # no gate figures to tell starts apart
        if fp in seen:
            raise ConfigError(f"two runs of world {worlds[i]} share one SFT start (same gate figures: "
                              f"{fp[1]} successes, test success {fp[2]}); give each start once")
        seen[fp] = i


def headline_random_effects(summaries: list[dict[str, Any]], arms: list[str], base: str = "sft") -> dict[str, Any]:
    """The multi-world block's ``random_effects`` (per pooled arm, :func:`random_effects_block`) and
    ``primary_endpoints`` (the names fixed in advance)."""
    return {"random_effects": {arm: random_effects_block([s for s in summaries if arm in s.get("arms", {})], arm,
                                                         base) for arm in arms},
            "primary_endpoints": {"primary": PRIMARY_ENDPOINT, "primary_cost": PRIMARY_COST_ENDPOINT}}


def random_effects_lines(block: dict[str, Any]) -> list[str]:
    """Markdown table rows of a :func:`random_effects_block` (estimate, DL interval, HKSJ interval, τ², k)."""
    head = (f"| {block['arm']} − {block['base']} (worlds as random effects) | estimate | 95% CI (DL, t on k−1 df) "
            "| 95% CI (HKSJ) | p (DL) | τ² | k worlds |")
    lines = [head, "|---|---|---|---|---|---|---|"]
    for e in block["endpoints"].values():
        if e["ci"] is None:
            lines.append(f"| {e['label']} | {_f(e['estimate'])} | – | – | – | – | {e['k']} |")
            continue
        h = e["hksj"]
        k = e["k"] if e["df"] == e["k"] - 1 else f"{e['df'] + 1} ({e['k']} starts)"
        lines.append(f"| {e['label']} | {_f(e['estimate'])} | [{_f(e['ci'][0])}, {_f(e['ci'][1])}] | "
                     f"[{_f(h['ci'][0])}, {_f(h['ci'][1])}] | {e['p']:.3f} | {e['tau2']:.4f} | {k} |")
    return lines


def _f(x: float | None) -> str:
    if x is None:
        return "–"
    s = f"{x:+.3f}"
    return "+0.000" if s == "-0.000" else s
