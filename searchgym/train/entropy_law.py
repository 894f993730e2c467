"""The entropy law of Cui et al. (2025), ``R = -a * exp(H) + b`` (``literature.md`` §1.2), fitted to a run's
(token entropy, reward) points by nonlinear least squares (``scipy.optimize.curve_fit``).

The law is stated for runs *without* an entropy intervention (no KL, no entropy bonus); ``b - a`` is the
predicted reward once entropy is exhausted (H = 0). :func:`fit_entropy_law` never raises: degenerate input
(fewer than 5 usable points, constant H, non-finite values, a fit that does not converge) gives
``ok=False`` with the reason, and the fitted numbers are None.

(:func:`searchgym.diversity.metrics.fit_entropy_law` solves the same model by linear least squares for the
tracker; the two agree, since the model is linear in (a, b). This one is the report's: it adds the
standard errors, the ok/reason contract and the literature's fitting method.)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_POINTS = 5  # a two-parameter curve through 3 or 4 steps says nothing (issue 35)


def entropy_law(h: Any, a: float, b: float) -> Any:
    """R = -a * exp(H) + b."""
    return -a * np.exp(h) + b


def _fail(reason: str, n: int, h: np.ndarray | None = None) -> dict[str, Any]:
    rng = [float(h.min()), float(h.max())] if h is not None and h.size else None
    return {"a": None, "b": None, "ceiling": None, "rmse": None, "a_se": None, "b_se": None, "n": int(n),
            "h_range": rng, "ok": False, "reason": reason}


def fit_entropy_law(H: Sequence[float], R: Sequence[float]) -> dict[str, Any]:
    """Fit ``R = -a*exp(H) + b`` to paired points; returns ``{a, b, ceiling (= b - a), rmse, a_se, b_se, n,
    h_range, ok, reason}``. Pairs with a non-finite H or R (or None) are dropped first; ``n`` counts the
    pairs used. Never raises."""
    try:
        h = np.asarray([math.nan if x is None else x for x in H], dtype=float).ravel()
        r = np.asarray([math.nan if x is None else x for x in R], dtype=float).ravel()
    except (TypeError, ValueError) as e:
        return _fail(f"non-numeric input ({e})", 0)
    if h.size != r.size:
        return _fail(f"H and R differ in length ({h.size} vs {r.size})", 0)
    keep = np.isfinite(h) & np.isfinite(r)
    h, r = h[keep], r[keep]
    n = int(h.size)
    if n < MIN_POINTS:
        return _fail(f"fewer than {MIN_POINTS} finite (H, R) points ({n})", n, h)
    if float(np.ptp(h)) <= 1e-12 * max(1.0, float(np.abs(h).max())):
        return _fail("token entropy is constant: a and b are not identifiable", n, h)
    with np.errstate(over="ignore", invalid="ignore"):
        eh = np.exp(h)
    if not np.all(np.isfinite(eh)):
        return _fail("exp(H) overflows (H is not an entropy in nats?)", n, h)
    # the model is linear in (a, b): the linear least-squares solution is the starting point
    design = np.stack([-eh, np.ones_like(eh)], axis=1)
    try:
        p0, *_ = np.linalg.lstsq(design, r, rcond=None)
    except np.linalg.LinAlgError as e:
        return _fail(f"least squares failed ({e})", n, h)
    from scipy.optimize import OptimizeWarning, curve_fit

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", OptimizeWarning)
            popt, pcov = curve_fit(entropy_law, h, r, p0=[float(p0[0]), float(p0[1])], maxfev=5000)
    except (RuntimeError, ValueError, TypeError, np.linalg.LinAlgError) as e:  # RuntimeError: no convergence
        return _fail(f"curve_fit did not converge ({type(e).__name__}: {e})", n, h)
    # an OptimizeWarning means only that the covariance could not be estimated (e.g. an exact fit): keep the
    # coefficients (H is not constant, so they are identifiable), without standard errors
    no_cov = any(issubclass(w.category, OptimizeWarning) for w in caught)
    a, b = float(popt[0]), float(popt[1])
    if not (math.isfinite(a) and math.isfinite(b)):
        return _fail("the fit gave non-finite coefficients", n, h)
    resid = r - entropy_law(h, a, b)
    se = np.sqrt(np.diag(pcov)) if not no_cov and pcov is not None and np.all(np.isfinite(pcov)) \
        else [None, None]
    return {"a": a, "b": b, "ceiling": b - a, "rmse": float(np.sqrt(np.mean(resid ** 2))),
            "a_se": None if se[0] is None else float(se[0]), "b_se": None if se[1] is None else float(se[1]),
            "n": n, "h_range": [float(h.min()), float(h.max())], "ok": True, "reason": None}
