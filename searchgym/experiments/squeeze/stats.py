"""Statistics of the squeeze experiment's comparisons: differences of means over seeds with Welch intervals and
minimum detectable effects, every RL arm against continued SFT, and pass@k crossings."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# Equivalence margins: a claimed null ("no difference") must come with a CI inside +- this margin.
EQUIVALENCE_MARGINS = {"success": 0.05, "entropy": 0.10}


def margin_for(key: str) -> float:
    """The stated equivalence margin of a compared figure: success-like 0.05, entropy-like 0.10 nats."""
    return EQUIVALENCE_MARGINS["entropy" if "entropy" in key else "success"]


def diff_ci(a: list[float], b: list[float], *, power: float = 0.8, alpha: float = 0.05,
            margin: float | None = None) -> dict[str, Any]:
    """Difference of means ``mean(a) - mean(b)`` over seeds with a 95% Welch interval, its two-sided p-value,
    and the minimum detectable effect at ``power`` (two-sided ``alpha``); ``detectable`` is False when the
    interval covers 0. With ``margin``, ``equivalent`` is True when the interval lies inside ``[-margin,
    margin]`` (the equivalence test, TOST at the same level), and ``verdict`` is ``difference``,
    ``equivalent`` or ``inconclusive`` (covers 0 but not inside the margin). Fewer than 2 seeds on a side: no
    interval (None)."""
    a = [float(x) for x in a if x is not None]
    b = [float(x) for x in b if x is not None]
    out: dict[str, Any] = {"diff": (float(np.mean(a)) - float(np.mean(b))) if a and b else None,
                           "ci": None, "mde": None, "detectable": None, "p": None, "n": [len(a), len(b)]}
    if margin is not None:
        out.update(margin=margin, equivalent=None, verdict=None)
    if len(a) < 2 or len(b) < 2:
        return out
    from scipy.stats import t

    va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        out.update(ci=[out["diff"], out["diff"]], mde=0.0, detectable=out["diff"] != 0,
                   p=0.0 if out["diff"] != 0 else 1.0)
    else:
        df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
        h = float(t.ppf(1 - alpha / 2, df)) * se
        out["ci"] = [out["diff"] - h, out["diff"] + h]
        out["mde"] = (float(t.ppf(1 - alpha / 2, df)) + float(t.ppf(power, df))) * se
        out["detectable"] = excludes_zero(out["ci"])
        out["p"] = float(2 * t.sf(abs(out["diff"]) / se, df)) if math.isfinite(se) else None
    if margin is not None:
        out["equivalent"] = inside_margin(out["ci"], margin)
        out["verdict"] = "difference" if out["detectable"] else ("equivalent" if out["equivalent"] else
                                                                  "inconclusive")
    return out


def t_interval(values: list[float], level: float = 0.95) -> list[float] | None:
    """The t interval of the mean of ``values`` (None for fewer than two)."""
    if len(values) < 2:
        return None
    from scipy.stats import t

    m, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    h = float(t.ppf(0.5 + level / 2, len(values) - 1)) * sd / math.sqrt(len(values))
    return [m - h, m + h]


def excludes_zero(ci: list[float]) -> bool:
    """A finite interval that does not cover 0 (a non-finite one shows nothing: never "difference")."""
    return all(math.isfinite(x) for x in ci) and not (ci[0] <= 0 <= ci[1])


def inside_margin(ci: list[float], margin: float) -> bool:
    """A finite interval inside ``(-margin, margin)`` (the equivalence test)."""
    return all(math.isfinite(x) for x in ci) and bool(-margin < ci[0] and ci[1] < margin)


def holm(pvalues: list[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down; None stays None and does not count)."""
    idx = sorted((i for i, p in enumerate(pvalues) if p is not None), key=lambda i: pvalues[i])  # type: ignore
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    run = 0.0
    for rank, i in enumerate(idx):
        run = max(run, min(1.0, (m - rank) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = run
    return out


def holm_into(tests: list[dict[str, Any]]) -> None:
    """Add ``p_holm`` and ``detectable_holm`` to each comparison (a :func:`diff_ci` result), Holm-adjusted over
    the list (one family of tests, e.g. one arm's shift splits)."""
    for d, p in zip(tests, holm([d.get("p") for d in tests])):
        d["p_holm"] = p
        d["detectable_holm"] = None if p is None else bool(p < 0.05)


COMPARED = (("test_success", "test success"), ("strategy_entropy", "strategy entropy"),
            ("slot_entropy", "template entropy (slot)"),
            ("well_formed_slot_entropy", "template entropy, well-formed queries"))


def seed_values(block: dict[str, Any], key: str) -> list[float]:
    """An arm's per-seed values of ``key``; ``shift:SPLIT`` reads that shift split's success."""
    if key.startswith("shift:"):
        return list(((block.get("shift") or {}).get(key[6:]) or {}).get("values") or [])
    return list((block.get(key) or {}).get("values") or [])


def contrast(a: dict[str, Any], b: dict[str, Any], keys: tuple[str, ...] | list[str]) -> dict[str, dict[str, Any]]:
    """Arm ``a`` − arm ``b`` over seeds (:func:`diff_ci`, with the stated margin) on each of ``keys`` and on each of
    ``a``'s shift splits (``shift:SPLIT``)."""
    return {key: diff_ci(seed_values(a, key), seed_values(b, key), margin=margin_for(key))
            for key in (*keys, *(f"shift:{split}" for split in (a.get("shift") or {})))}


def comparisons(arms: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every RL arm against continued SFT on the compared figures and each shift split's success, from per-seed
    values; each with its equivalence verdict against the stated margin, the shift splits Holm-corrected."""
    if "sft" not in arms:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for arm, b in arms.items():
        if arm == "sft":
            continue
        row = contrast(b, arms["sft"], [key for key, _ in COMPARED])
        # Holm across this arm's per-split comparisons (several shift splits = several tests)
        holm_into([row[k] for k in row if k.startswith("shift:")])
        out[f"{arm}_vs_sft"] = row
    return out


def passk_crossing(start: dict[str, Any], arm: dict[str, Any]) -> dict[str, Any]:
    """The ks at which the SFT start's CI lies wholly above the arm's (``start_above``) and below it
    (``arm_above``); ``first_start_above``: the smallest such k (None: no detectable crossing)."""
    above, below = [], []
    for k in sorted((int(x) for x in start if x in arm), key=int):
        s, a = start[str(k)].get("ci"), arm[str(k)].get("ci")
        if not s or not a or None in s or None in a:
            continue
        if s[0] > a[1]:
            above.append(k)
        elif a[0] > s[1]:
            below.append(k)
    return {"start_above": above, "arm_above": below, "first_start_above": above[0] if above else None}



def wilson(k: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` (95% by default); ``(0, 1)`` for ``n = 0``."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo, hi = max(0.0, mid - half), min(1.0, mid + half)
    return (0.0 if k == 0 else lo), (1.0 if k == n else hi)  # exact ends where rounding would leave 1e-17
