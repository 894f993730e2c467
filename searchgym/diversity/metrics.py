"""Diversity and policy-side metrics, implemented from ``literature.md`` §1.2, §3, §4 and §6.

Template-distribution metrics take either a mapping ``{template: count}`` (a ``Counter``) or a sequence of
labels (one per query); a numpy array of numbers is read as counts. All entropies are in nats.

* ``entropy`` (plug-in) H = -Σ p log p; ``miller_madow_entropy`` H + (K-1)/(2N);
  ``effective_number`` exp(H) (Hill q=1); ``inverse_simpson`` 1/Σp² (Hill q=2);
  ``top_k_mass``; ``rank_frequency_beta`` (slope of log f(rank) = c - β·rank); ``js_divergence``.
* Text: ``distinct_n``, ``self_bleu`` (Texygen-style, lower = more diverse), ``compression_ratio``
  (size / gzip size of the joined texts; higher = more repetitive).
* Embeddings (rows are normalised here): ``mean_pairwise_distance`` (remote clique),
  ``chamfer_distance``, ``vendi_score`` (exp of the entropy of the eigenvalues of K/n).
* Search process: ``move_entropy``, ``duplicate_query_rate``, ``new_document_yield``.
* Sampling: ``rarefy`` (equal-size subsamples), ``rarefied`` (mean of a metric over subsamples),
  ``bootstrap_ci``, ``within_across`` (within-question vs across-question aggregation).
* Policy side: ``pass_at_k`` (unbiased, stable product form), ``pass_hat_k`` (pass^k),
  ``mean_pass_at_k``, ``cover_at``, ``token_entropy_summary``, ``fit_entropy_law`` (R = -a·exp(H) + b).
"""

from __future__ import annotations

import gzip
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from searchgym.diversity.templates import normalize as _normalize

# ----------------------------------------------------------------------------------------------
# pass@k family (literature §4)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k) for one problem (Chen et al. 2021).

    Stable product form: 1 - Π_{i=n-c+1}^{n} (1 - k/i); exactly 1.0 when n - c < k.
    """
    n, c, k = int(n), int(c), int(k)
    if n < 0 or c < 0 or k < 1 or c > n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass_at_k needs k <= n (n={n} samples, k={k})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k = C(c, k)/C(n, k): the chance that k samples drawn without replacement all succeed."""
    n, c, k = int(n), int(c), int(k)
    if n < 0 or c < 0 or k < 1 or c > n or k > n:
        raise ValueError(f"pass_hat_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if c < k:
        return 0.0
    prod = 1.0
    for i in range(k):
        prod *= (c - i) / (n - i)
    return prod


def mean_pass_at_k(results: Sequence[tuple[int, int]], k: int) -> float:
    """Dataset pass@k: the mean over problems of ``pass_at_k(n, c, k)``; ``results`` holds (n, c) pairs."""
    if not results:
        return float("nan")
    return float(np.mean([pass_at_k(n, c, k) for n, c in results]))


def mean_pass_hat_k(results: Sequence[tuple[int, int]], k: int) -> float:
    if not results:
        return float("nan")
    return float(np.mean([pass_hat_k(n, c, k) for n, c in results]))


def cover_at(results: Sequence[tuple[int, int]], tau: float) -> float:
    """Cover@τ: the share of problems whose success rate c/n is at least τ."""
    if not results:
        return float("nan")
    return float(np.mean([(c / n if n else 0.0) >= tau for n, c in results]))


# ----------------------------------------------------------------------------------------------
# template distributions (literature §6, §6.1)


def _counts(x: Any) -> list[float]:
    """Positive counts, most frequent first (pure Python: these sets are small and numpy's per-call
    overhead would dominate the tracker's update)."""
    if isinstance(x, Mapping):
        vals = x.values()
    elif isinstance(x, np.ndarray) and x.dtype.kind in "iuf":
        vals = x.ravel().tolist()
    else:
        vals = Counter(x).values()
    return sorted((float(v) for v in vals if v > 0), reverse=True)


def counts_of(items: Iterable[Hashable]) -> Counter[Hashable]:
    return Counter(items)


def _entropy_of(c: list[float]) -> float:
    n = sum(c)
    if n <= 0:
        return float("nan")
    log_n = math.log(n)
    h = log_n - sum(v * math.log(v) for v in c) / n  # = -Σ (v/n) log(v/n)
    return h if h > 1e-12 else 0.0


def entropy(x: Any) -> float:
    """Plug-in Shannon entropy in nats of a count mapping or a label sequence (0 for one template)."""
    return _entropy_of(_counts(x))


def miller_madow_entropy(x: Any) -> float:
    """Miller–Madow bias-corrected entropy H + (K - 1)/(2N), K = observed templates, N = samples."""
    c = _counts(x)
    n = sum(c)
    if n <= 0:
        return float("nan")
    return _entropy_of(c) + (len(c) - 1) / (2.0 * n)


def effective_number(x: Any) -> float:
    """exp(H): the Hill number of order 1 (1 for a single template, M for M equiprobable ones)."""
    h = entropy(x)
    return math.exp(h) if not math.isnan(h) else float("nan")


def inverse_simpson(x: Any) -> float:
    """1/Σp²: the Hill number of order 2."""
    c = _counts(x)
    n = sum(c)
    if n <= 0:
        return float("nan")
    return n * n / sum(v * v for v in c)


def top_k_mass(x: Any, k: int = 1) -> float:
    """Share of the samples that fall in the k most frequent templates."""
    c = _counts(x)
    n = sum(c)
    if n <= 0:
        return float("nan")
    return sum(c[:k]) / n


def mass_coverage(x: Any, mass: float = 0.5) -> int:
    """Number of (most frequent) templates needed to cover ``mass`` of the samples."""
    return _mass_coverage_sorted(_counts(x), mass)


def _mass_coverage_sorted(c: list[float], mass: float) -> int:
    n = sum(c)
    acc = 0.0
    for i, v in enumerate(c, 1):
        acc += v
        if acc >= mass * n - 1e-9:
            return i
    return len(c)


def rank_frequency_beta(x: Any, top_r: int = 10) -> float:
    """Decay β of the least-squares fit log f(rank) = c - β·rank over the top-R ranks (f = relative freq).

    Larger β = mass concentrated on the first templates. NaN with fewer than two templates.
    """
    return _rank_beta_sorted(_counts(x), top_r)


def _rank_beta_sorted(c: list[float], top_r: int) -> float:
    c = c[:top_r]
    m = len(c)
    if m < 2:
        return float("nan")
    total = sum(c)
    ys = [math.log(v / total) for v in c]
    xbar = (m + 1) / 2.0
    ybar = sum(ys) / m
    sxy = sum((r - xbar) * (y - ybar) for r, y in enumerate(ys, 1))
    sxx = sum((r - xbar) ** 2 for r in range(1, m + 1))
    return -sxy / sxx


def js_divergence(p_counts: Any, q_counts: Any) -> float:
    """Jensen–Shannon divergence (nats, in [0, log 2]) between two template distributions.

    Both arguments are count mappings or label sequences; templates are matched by key.
    """
    p = p_counts if isinstance(p_counts, Mapping) else Counter(p_counts)
    q = q_counts if isinstance(q_counts, Mapping) else Counter(q_counts)
    keys = sorted(set(p) | set(q), key=str)
    pv = np.array([float(p.get(k, 0)) for k in keys])
    qv = np.array([float(q.get(k, 0)) for k in keys])
    if pv.sum() <= 0 or qv.sum() <= 0:
        return float("nan")
    pv, qv = pv / pv.sum(), qv / qv.sum()
    m = 0.5 * (pv + qv)

    def kl(a: np.ndarray, b: np.ndarray) -> float:
        mask = a > 0
        return float((a[mask] * np.log(a[mask] / b[mask])).sum())

    js = 0.5 * kl(pv, m) + 0.5 * kl(qv, m)
    return js if js > 0 else 0.0


def novelty(p_counts: Any, q_counts: Any) -> float:
    """Share of the samples of ``p`` whose template never occurs in ``q`` (template novelty)."""
    p = p_counts if isinstance(p_counts, Mapping) else Counter(p_counts)
    q = q_counts if isinstance(q_counts, Mapping) else Counter(q_counts)
    total = sum(p.values())
    if total <= 0:
        return float("nan")
    return sum(v for k, v in p.items() if k not in q) / total


def template_stats(x: Any, *, top_r: int = 10) -> dict[str, float]:
    """All template-distribution metrics of one set of templates, as a flat dict."""
    c = _counts(x)
    n = float(sum(c))
    k = len(c)
    nan = float("nan")
    if not n:
        return {"n": 0.0, "n_templates": 0, "entropy": nan, "miller_madow_entropy": nan,
                "normalized_entropy": nan, "effective_number": nan, "inverse_simpson": nan, "top1_mass": nan,
                "top5_mass": nan, "templates_50pct": 0, "templates_80pct": 0, "rank_beta": nan}
    h = _entropy_of(c)
    return {
        "n": n,
        "n_templates": k,
        "entropy": h,
        "miller_madow_entropy": h + (k - 1) / (2.0 * n),
        "normalized_entropy": (h / math.log(k)) if k > 1 else 0.0,
        "effective_number": math.exp(h),
        "inverse_simpson": n * n / sum(v * v for v in c),
        "top1_mass": c[0] / n,
        "top5_mass": sum(c[:5]) / n,
        "templates_50pct": _mass_coverage_sorted(c, 0.5),
        "templates_80pct": _mass_coverage_sorted(c, 0.8),
        "rank_beta": _rank_beta_sorted(c, top_r),
    }


# ----------------------------------------------------------------------------------------------
# text metrics (literature §6 items 1, 4, 5)


def _tok(text: str) -> list[str]:
    return _normalize(text).split()


def _ngrams(toks: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """|unique n-grams| / |n-grams| over all texts (Li et al. 2016); NaN when there are no n-grams."""
    return distinct_ns(texts, (n,))[n]


def distinct_ns(texts: Sequence[str], ns: Sequence[int] = (1, 2)) -> dict[int, float]:
    """``distinct_n`` for several n with one tokenisation pass."""
    toks = [_tok(t) for t in texts]
    out: dict[int, float] = {}
    for n in ns:
        total = 0
        uniq: set = set()
        if n == 1:  # unique tokens == unique 1-grams; no tuples needed
            for tk in toks:
                total += len(tk)
                uniq.update(tk)
            out[n] = len(uniq) / total if total else float("nan")
            continue
        if n == 2:
            for tk in toks:
                if len(tk) >= 2:
                    total += len(tk) - 1
                    uniq.update(itertools.pairwise(tk))
            out[n] = len(uniq) / total if total else float("nan")
            continue
        for tk in toks:
            if len(tk) < n:
                continue
            total += len(tk) - n + 1
            uniq.update(tuple(tk[i:i + n]) for i in range(len(tk) - n + 1))
        out[n] = len(uniq) / total if total else float("nan")
    return out


def self_bleu(texts: Sequence[str], max_n: int = 4, *, max_items: int = 1000, seed: int = 0) -> float:
    """Self-BLEU (Zhu et al. 2018): mean over i of BLEU(text_i; references = all other texts).

    Uniform weights over 1..max_n, clipped counts against the per-n-gram maximum over the other texts,
    brevity penalty against the closest other length, and add-one smoothing for n > 1 (Lin & Och 2004,
    NLTK ``method2``) so that short queries do not all score 0. Lower = more diverse. More than
    ``max_items`` texts are subsampled (seeded).
    """
    texts = list(texts)
    if len(texts) > max_items:
        texts = random.Random(seed).sample(texts, max_items)
    toks = [_tok(t) for t in texts]
    m = len(toks)
    if m < 2:
        return float("nan")
    # For each n-gram, the two largest per-text counts and which text has the largest.
    best: list[dict[tuple[str, ...], tuple[int, int, int]]] = []
    per_text: list[list[Counter]] = []
    for n in range(1, max_n + 1):
        table: dict[tuple[str, ...], tuple[int, int, int]] = {}
        cs = []
        for i, t in enumerate(toks):
            cnt = Counter(_ngrams(t, n))
            cs.append(cnt)
            for g, v in cnt.items():
                top1, who, top2 = table.get(g, (0, -1, 0))
                if v > top1:
                    table[g] = (v, i, top1)
                elif v > top2:
                    table[g] = (top1, who, v)
        best.append(table)
        per_text.append(cs)
    lengths = np.array([len(t) for t in toks])
    scores = []
    for i, t in enumerate(toks):
        if not t:
            continue
        logp = 0.0
        for n in range(1, max_n + 1):
            cnt = per_text[n - 1][i]
            total = sum(cnt.values())
            match = 0
            for g, v in cnt.items():
                top1, who, top2 = best[n - 1][g]
                match += min(v, top2 if who == i else top1)
            if n == 1:
                if match == 0:
                    logp = -math.inf
                    break
                logp += math.log(match / total)
            else:
                logp += math.log((match + 1) / (total + 1))
        if logp == -math.inf:
            scores.append(0.0)
            continue
        others = np.delete(lengths, i)
        diffs = np.abs(others - len(t))
        ref_len = int(others[np.lexsort((others, diffs))[0]])
        bp = 1.0 if len(t) > ref_len else math.exp(1 - ref_len / len(t))
        scores.append(bp * math.exp(logp / max_n))
    return float(np.mean(scores)) if scores else float("nan")


def compression_ratio(texts: Sequence[str]) -> float:
    """size(joined text) / size(gzip(joined text)) (Shaib et al. 2024); higher = more repetitive."""
    data = "\n".join(texts).encode("utf-8")
    if not data:
        return float("nan")
    return len(data) / len(gzip.compress(data, compresslevel=9, mtime=0))


# ----------------------------------------------------------------------------------------------
# embedding metrics (literature §6 items 6, 7)


def _unit(emb: Any) -> np.ndarray:
    e = np.asarray(emb, dtype=np.float64)
    if e.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array (n, dim), got shape {e.shape}")
    norms = np.linalg.norm(e, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return e / norms


def mean_pairwise_distance(emb: Any) -> float:
    """Mean cosine distance over all pairs i<j (the 'remote clique' score)."""
    e = _unit(emb)
    n = e.shape[0]
    if n < 2:
        return float("nan")
    s = e.sum(axis=0)
    # Σ_{i<j} cos = (|Σe|² - n) / 2
    sum_cos = (float(s @ s) - n) / 2.0
    return float(1.0 - sum_cos / (n * (n - 1) / 2.0))


def chamfer_distance(emb: Any) -> float:
    """Mean over i of the cosine distance to the nearest other item (sensitive to near-duplicates)."""
    e = _unit(emb)
    n = e.shape[0]
    if n < 2:
        return float("nan")
    sims = e @ e.T
    np.fill_diagonal(sims, -np.inf)
    return float(np.mean(1.0 - sims.max(axis=1)))


def vendi_score(emb: Any = None, *, kernel: Any = None) -> float:
    """Vendi score exp(-Σ λ log λ), λ = eigenvalues of K/n (Friedman & Dieng 2022).

    With embeddings, K is the cosine kernel (computed through the d×d Gram matrix when n > d). A
    precomputed PSD kernel with unit diagonal may be passed instead. Identical items give 1.
    """
    if kernel is not None:
        k = np.asarray(kernel, dtype=np.float64)
        n = k.shape[0]
        lam = np.linalg.eigvalsh(k / n)
    else:
        e = _unit(emb)
        n, d = e.shape
        if n == 0:
            return float("nan")
        mat = (e.T @ e) / n if n > d else (e @ e.T) / n
        lam = np.linalg.eigvalsh(mat)
    lam = lam[lam > 1e-12]
    return float(math.exp(-(lam * np.log(lam)).sum()))


# ----------------------------------------------------------------------------------------------
# search-process metrics (literature §6.2, §6.3)


def move_entropy(moves: Iterable[str]) -> float:
    """Entropy (nats) of the reformulation-move distribution."""
    return entropy(list(moves))


def duplicate_query_rate(queries: Sequence[str]) -> float:
    """Share of the queries of one episode that repeat an earlier query of it (after normalisation)."""
    if not queries:
        return float("nan")
    seen: set[str] = set()
    dup = 0
    for q in queries:
        nq = _normalize(q)
        if nq in seen:
            dup += 1
        seen.add(nq)
    return dup / len(queries)


def new_document_yield(doc_ids_per_step: Sequence[Sequence[str]]) -> float:
    """Mean over search steps of |docs_t minus docs_<t| / |docs_t| (StepSearch-style information gain)."""
    seen: set[str] = set()
    ys = []
    for docs in doc_ids_per_step:
        uniq = set(docs)
        if not uniq:
            continue
        ys.append(len(uniq - seen) / len(uniq))
        seen |= uniq
    return sum(ys) / len(ys) if ys else float("nan")


# ----------------------------------------------------------------------------------------------
# sampling: rarefaction, bootstrap, within vs across question


def rarefy(items: Sequence[Any], n: int, rng: random.Random | np.random.Generator | int | None = None) -> list[Any]:
    """A subsample of exactly ``n`` items drawn without replacement (rarefaction to equal sample size)."""
    items = list(items)
    if n > len(items):
        raise ValueError(f"cannot rarefy {len(items)} items to {n}")
    if isinstance(rng, np.random.Generator):
        idx = rng.choice(len(items), size=n, replace=False)
        return [items[i] for i in sorted(idx)]
    r = rng if isinstance(rng, random.Random) else random.Random(rng)
    return r.sample(items, n)


def rarefied(fn: Callable[[list[Any]], float], items: Sequence[Any], n: int, *, draws: int = 20,
             seed: int = 0) -> float:
    """Mean of ``fn`` over ``draws`` rarefied subsamples of size ``n`` (exact when len(items) == n)."""
    items = list(items)
    if len(items) == n:
        return float(fn(items))
    rng = random.Random(seed)
    vals = [fn(rarefy(items, n, rng)) for _ in range(draws)]
    return float(np.nanmean(vals))


class CI(NamedTuple):
    estimate: float
    low: float
    high: float


def bootstrap_ci(fn: Callable[[list[Any]], float], items: Sequence[Any], n_boot: int = 1000, alpha: float = 0.05,
                 seed: int = 0, method: str = "percentile") -> CI:
    """Bootstrap CI of ``fn(items)``: resample items with replacement ``n_boot`` times.

    ``method="percentile"`` gives the (alpha/2, 1-alpha/2) quantiles of the replicates; ``"basic"`` the
    reverse-percentile interval 2·est − q, which corrects a statistic biased under resampling (plug-in
    entropy and template counts shrink when duplicates are drawn) so the interval surrounds the estimate.
    """
    if method not in ("percentile", "basic"):
        raise ValueError(f"bootstrap method must be 'percentile' or 'basic', got {method!r}")
    items = list(items)
    if not items:
        return CI(float("nan"), float("nan"), float("nan"))
    est = float(fn(items))
    rng = np.random.default_rng(seed)
    n = len(items)
    vals = np.array([fn([items[i] for i in rng.integers(0, n, n)]) for _ in range(n_boot)], dtype=float)
    vals = vals[~np.isnan(vals)]
    if vals.size == 0:
        return CI(est, float("nan"), float("nan"))
    lo, hi = np.quantile(vals, [alpha / 2, 1 - alpha / 2])
    if method == "basic":
        lo, hi = 2 * est - hi, 2 * est - lo
    return CI(est, float(lo), float(hi))


_SMALL_ENTROPY: dict[tuple[int, ...], float] = {}


def _label_entropy(v: Sequence[Hashable]) -> float:
    """``entropy(list(v))`` for a non-empty label sequence, memoised on its sorted count profile (the
    value depends on nothing else, and the many small per-question groups share few profiles)."""
    n = len(v)
    k = len(set(v))
    if k == n:
        sig: tuple[int, ...] = (1,) * n
    elif k == 1:
        sig = (n,)
    else:
        sig = tuple(sorted(Counter(v).values(), reverse=True))
    h = _SMALL_ENTROPY.get(sig)
    if h is None:
        h = _entropy_of([float(x) for x in sig])
        if len(_SMALL_ENTROPY) < 4096:
            _SMALL_ENTROPY[sig] = h
    return h


def within_entropy(groups: Mapping[Hashable, Sequence[Hashable]], *, min_group: int = 2) -> float:
    """``within_across(groups, entropy, min_group=min_group)["within"]`` without the pooled (across)
    pass: the mean plug-in entropy over groups of at least ``min_group`` labels (NaN if none)."""
    floor = max(min_group, 1)  # an empty group has no entropy (within_across drops its NaN)
    per = [_label_entropy(v) for v in groups.values() if len(v) >= floor]
    return float(np.mean(per)) if per else float("nan")


def within_across(groups: Mapping[Hashable, Sequence[Any]], fn: Callable[[list[Any]], float], *,
                  min_group: int = 2) -> dict[str, float]:
    """Within-question vs across-question values of a set metric ``fn``.

    ``groups`` maps a question to its items (e.g. the templates of its K rollouts). ``within`` is the mean
    of ``fn`` over questions with at least ``min_group`` items; ``across`` is ``fn`` over all items pooled.
    """
    per = [fn(list(v)) for v in groups.values() if len(v) >= min_group]
    per = [x for x in per if not math.isnan(x)]
    pooled = [x for v in groups.values() for x in v]
    return {
        "within": float(np.mean(per)) if per else float("nan"),
        "across": float(fn(pooled)) if pooled else float("nan"),
        "n_groups": float(len(per)),
    }


# ----------------------------------------------------------------------------------------------
# policy side (literature §1.2, §3)


def flatten_floats(values: Any) -> np.ndarray:
    """Flatten a flat or nested (per-trajectory) sequence of token entropies into a float array."""
    if values is None:
        return np.zeros(0)
    if isinstance(values, np.ndarray):
        return values.astype(float).ravel()
    out: list[float] = []
    for v in values:
        if isinstance(v, (list, tuple, np.ndarray)):
            out.extend(float(x) for x in np.asarray(v, dtype=float).ravel())
        else:
            out.append(float(v))
    return np.asarray(out, dtype=float)


def token_entropy_summary(values: Any, *, fork_threshold: float | None = None) -> dict[str, float]:
    """Mean, 80th percentile, share of tokens above the batch 80th percentile (the 'forking' share of
    Wang et al.), share below 1e-2, and (optionally) share above a fixed threshold such as 0.672."""
    h = flatten_floats(values)
    h = h[~np.isnan(h)]
    if h.size == 0:
        return {}
    p80 = float(np.quantile(h, 0.8))
    out = {
        "token_entropy_mean": float(h.mean()),
        "token_entropy_p80": p80,
        "token_entropy_frac_above_p80": float((h > p80).mean()),
        "token_entropy_frac_below_0.01": float((h < 1e-2).mean()),
        "token_entropy_n": float(h.size),
    }
    if fork_threshold is not None:
        out["token_entropy_frac_above_threshold"] = float((h > fork_threshold).mean())
    return out


LAW_MIN_POINTS = 5  # steps needed before the entropy law is fitted (and drawn)


def entropy_law(h: Any, a: float, b: float) -> Any:
    """R = -a·exp(H) + b (Cui et al. 2025)."""
    return -a * np.exp(h) + b


def fit_entropy_law(H: Sequence[float], R: Sequence[float]) -> dict[str, float]:
    """Fit R = -a·exp(H) + b by least squares.

    The model is linear in (a, b) given exp(H), so the linear least-squares solution (``np.linalg.lstsq``)
    is the exact optimum; it used to be refined by scipy's ``curve_fit``, which only moved it by ~1e-10
    and cost a 0.4 s scipy import per process. Returns a, b, the predicted ceiling at H = 0 (b - a), the
    residual RMSE and the number of points. Needs at least ``LAW_MIN_POINTS`` (5) points with distinct H (a
    two-parameter curve through 3 or 4 steps says nothing); otherwise the values are NaN.
    """
    h = np.asarray(H, dtype=float)
    r = np.asarray(R, dtype=float)
    ok = ~(np.isnan(h) | np.isnan(r))
    h, r = h[ok], r[ok]
    nan = {"a": float("nan"), "b": float("nan"), "ceiling": float("nan"), "rmse": float("nan"),
           "n": float(h.size)}
    if h.size < LAW_MIN_POINTS or np.ptp(h) == 0:
        return nan
    design = np.stack([-np.exp(h), np.ones_like(h)], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, r, rcond=None)
    resid = r - entropy_law(h, a, b)
    return {"a": float(a), "b": float(b), "ceiling": float(b - a),
            "rmse": float(np.sqrt(np.mean(resid ** 2))), "n": float(h.size)}


# ----------------------------------------------------------------------------------------------
# Hill numbers at equal sample size, honest CIs, mutual information (literature §5, §6.1)

CI_METHOD = (
    "95% percentile bootstrap at the rarefied size n: each replicate draws n of the run's queries with "
    "replacement and computes the statistic; the replicates are shifted by (estimate - their mean), which "
    "removes the downward bias that drawing duplicates gives plug-in entropy and richness; the interval is "
    "widened to include the estimate if skew would leave it outside, and clipped to the statistic's range "
    "(entropy in [0, ln n], Hill numbers in [1, n]). The estimate is the mean over draws of n queries "
    "without replacement (rarefaction); at n = all queries it is the plug-in value.")

MI_METHOD = (
    "I(Q;T) = H(T) - H(T|Q), plug-in, on k samples per question (k equal for every question: questions with "
    "fewer are dropped, those with more contribute k drawn without replacement, averaged over draws). "
    "H(T|Q) is the mean over questions of the entropy of their k labels. The plug-in value is biased "
    "upwards (k samples under-estimate H(T|Q)); the bias is removed by subtracting the same estimator "
    "after shuffling the labels across questions (mean over shuffles), so an input-agnostic template "
    "choice scores about 0 (it can be slightly negative) however varied the templates are.")


def hill_numbers(x: Any) -> dict[str, float]:
    """Plug-in Hill numbers of order 0, 1, 2 (richness, exp H, inverse Simpson) of counts or labels."""
    c = _counts(x)
    n = sum(c)
    if n <= 0:
        return {"0": float("nan"), "1": float("nan"), "2": float("nan")}
    return {"0": float(len(c)), "1": math.exp(_entropy_of(c)), "2": n * n / sum(v * v for v in c)}


def _count_list(x: Any) -> list[int]:
    if isinstance(x, Mapping):
        vals = list(x.values())
    elif isinstance(x, np.ndarray) and x.dtype.kind in "iu":
        vals = x.ravel().tolist()
    else:
        vals = list(Counter(x).values())
    return [int(v) for v in vals if v > 0]


def _count_vector(x: Any) -> np.ndarray:
    return np.asarray(_count_list(x), dtype=np.int64)


def _draw_stats(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(entropy, richness, inverse Simpson) of each row of a (draws, K) count matrix."""
    n = draws.sum(axis=1, keepdims=True).astype(float)
    p = draws / np.where(n > 0, n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)
    h = -(p * logp).sum(axis=1)
    h[h < 1e-12] = 0.0
    rich = (draws > 0).sum(axis=1).astype(float)
    inv = 1.0 / np.maximum((p * p).sum(axis=1), 1e-300)
    return h, rich, inv


def _chunked(sample: Callable[[int], np.ndarray], total: int, k: int) -> tuple[np.ndarray, ...]:
    """``_draw_stats`` over ``total`` rows drawn by ``sample(rows)``, in chunks of at most ~2M cells."""
    rows = max(1, min(total, 2_000_000 // max(k, 1)))
    parts = []
    done = 0
    while done < total:
        m = min(rows, total - done)
        parts.append(_draw_stats(sample(m)))
        done += m
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def contained_ci(replicates: Sequence[float] | np.ndarray, estimate: float, *, alpha: float = 0.05,
                 low: float = -math.inf, high: float = math.inf, recentre: bool = True) -> tuple[float, float]:
    """Percentile interval of bootstrap ``replicates`` that contains ``estimate`` by construction.

    With ``recentre`` the replicates are first shifted so that their mean is ``estimate``. The interval
    is widened to include the estimate if needed, then clipped to [low, high] (the estimate must lie in
    that range); so ``low <= lo <= estimate <= hi <= high`` always holds.
    """
    est = float(estimate)
    v = np.asarray(replicates, dtype=float)
    v = v[np.isfinite(v)]
    if not math.isfinite(est):
        return float("nan"), float("nan")
    if v.size == 0:
        return est, est
    if recentre:
        v = v + (est - float(v.mean()))
    q_lo, q_hi = np.quantile(v, [alpha / 2, 1 - alpha / 2])
    lo, hi = min(float(q_lo), est), max(float(q_hi), est)
    est_c = min(max(est, low), high)
    return min(max(lo, low), est_c), max(min(hi, high), est_c)


def rarefied_diversity(x: Any, n: int | None = None, *, draws: int = 50, n_boot: int = 200,
                       alpha: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """Entropy and Hill numbers of order 0, 1, 2 at the rarefied sample size ``n``, with CIs.

    ``x``: counts (mapping) or labels. ``n`` defaults to all samples. Estimates are the mean over ``draws``
    subsamples of n without replacement (exact plug-in when n is all samples); CIs follow ``CI_METHOD``
    (``n_boot=0``: no CIs). ``hill["1"]`` is exp(entropy) and its CI exp(entropy CI).
    """
    vals = _count_list(x)  # (numpy arrays and the generator only where draws are made: per-call overhead)
    total = sum(vals)
    nan = float("nan")
    if total <= 0:
        return {"n": 0, "entropy": nan, "entropy_ci": [nan, nan], "hill": {"0": nan, "1": nan, "2": nan},
                "hill_ci": {"0": [nan, nan], "1": [nan, nan], "2": [nan, nan]}}
    n = total if n is None else int(n)
    if not 1 <= n <= total:
        raise ValueError(f"cannot rarefy {total} samples to {n}")
    k = len(vals)
    if n == total:
        cf = sorted(map(float, vals), reverse=True)
        h, rich, inv = _entropy_of(cf), float(k), total * total / sum(v * v for v in cf)
        if n_boot <= 0:
            return {"n": n, "entropy": h, "hill": {"0": rich, "1": math.exp(h), "2": inv},
                    "entropy_ci": [nan, nan], "hill_ci": {"0": [nan, nan], "1": [nan, nan], "2": [nan, nan]}}
    c = np.asarray(vals, dtype=np.int64)
    rng = np.random.default_rng(seed)
    if n != total:
        hs, rs, ivs = _chunked(lambda m: rng.multivariate_hypergeometric(c, n, size=m), draws, k)
        h, rich, inv = float(hs.mean()), float(rs.mean()), float(ivs.mean())
    out: dict[str, Any] = {"n": n, "entropy": h, "hill": {"0": rich, "1": math.exp(h), "2": inv}}
    if n_boot > 0:
        p = c / total
        bh, br, bi = _chunked(lambda m: rng.multinomial(n, p, size=m), n_boot, k)
        e_ci = contained_ci(bh, h, alpha=alpha, low=0.0, high=math.log(n))
        out["entropy_ci"] = list(e_ci)
        out["hill_ci"] = {"0": list(contained_ci(br, rich, alpha=alpha, low=1.0, high=float(n))),
                          "1": [math.exp(e_ci[0]), math.exp(e_ci[1])],
                          "2": list(contained_ci(bi, inv, alpha=alpha, low=1.0, high=float(n)))}
    else:
        out["entropy_ci"] = [nan, nan]
        out["hill_ci"] = {"0": [nan, nan], "1": [nan, nan], "2": [nan, nan]}
    return out


def _row_entropies(mat: np.ndarray) -> np.ndarray:
    """Plug-in entropy of each row (last axis) of a small (..., k) label array: H = -(1/k) Σ_j log(c_j / k),
    c_j the count of row element j's label in its row."""
    k = mat.shape[-1]
    # same[..., i] = how many elements of the row equal element i: k vectorised comparisons (integer
    # counts, so exactly the broadcast (…, k, k) comparison summed, at a third of its cost)
    same = (mat == mat[..., :1]).astype(np.int64)
    for j in range(1, k):
        same += mat == mat[..., j:j + 1]
    h = -np.log(same / k).sum(axis=-1) / k
    h[h < 1e-12] = 0.0
    return h


_MI_PLANS: dict[tuple, tuple[np.ndarray, np.ndarray | None, int, int]] = {}


def _mi_plan(lens_t: tuple[int, ...], k: int, draws: int, shuffles: int,
             seed: int) -> tuple[np.ndarray, np.ndarray | None, int, int]:
    """The random part of ``mutual_information``, which depends only on the group sizes (not on the labels):
    the positions of the k samples each draw takes from each question (``sel``, (draws, Q*k) indices into
    the questions' concatenated labels) and each shuffle's permutation of a draw (``perm``, (draws,
    shuffles, Q*k)). Cached, so the label levels of one block (same questions, same sizes) draw once;
    the generator is used exactly as when it shuffled the labels themselves (``permuted`` moves elements
    without looking at them), so every figure is as before."""
    key = (lens_t, k, draws, shuffles, seed)
    hit = _MI_PLANS.get(key)
    if hit is not None:
        return hit
    rng = np.random.default_rng(seed)
    lens = np.asarray(lens_t, dtype=np.int64)
    q = len(lens_t)
    exact = bool((lens == k).all())
    n_draws = 1 if exact else draws
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    take = (starts[:, None] + np.arange(k)[None, :]).ravel()  # the first k places of each question
    if exact:
        sel = take[None, :]
    else:  # each draw: k of each question's samples without replacement (random order within each question)
        gid = np.repeat(np.arange(q), lens)
        r = rng.random((n_draws, int(lens.sum())))  # (the same stream as one rng.random(N) per draw)
        sel = np.lexsort((r, np.broadcast_to(gid, r.shape)))[:, take]
    d = n_draws
    shuffles = max(0, min(shuffles, max(2, 1_000_000 // max(1, d * q * k * k))))  # bound the shuffle tensor
    perm = None
    if shuffles > 0:
        perm = rng.permuted(np.broadcast_to(np.arange(q * k), (d, shuffles, q * k)), axis=2)
    if len(_MI_PLANS) >= 2:  # (a block's levels run one after another; plans of 100k queries are MBs)
        _MI_PLANS.clear()
    for a in (sel, perm):
        if a is not None:
            a.flags.writeable = False  # (shared between calls)
    _MI_PLANS[key] = (sel, perm, d, shuffles)
    return sel, perm, d, shuffles


def mutual_information(groups: Mapping[Hashable, Sequence[Hashable]], *, k: int | None = None,
                       k_max: int = 8, draws: int = 5, shuffles: int = 10, seed: int = 0) -> dict[str, float]:
    """Shuffle-corrected plug-in mutual information between the question (group key) and a label.

    See ``MI_METHOD``. ``k`` defaults to the smallest group size among groups of at least 2, capped at
    ``k_max``. Returns ``mi`` (corrected), ``mi_plugin``, ``mi_shuffle`` (the bias estimate), ``k`` and
    ``n_questions``; all NaN when fewer than two questions have ``k >= 2`` samples.
    """
    eligible = [v for v in groups.values() if len(v) >= 2]
    nan = float("nan")
    if k is None and eligible:
        k = min(k_max, min(len(v) for v in eligible))
    use = [v for v in eligible if k is not None and len(v) >= k]
    if k is None or k < 2 or len(use) < 2:
        return {"mi": nan, "mi_plugin": nan, "mi_shuffle": nan, "k": float(k or 0), "n_questions": float(len(use))}
    # labels -> integer codes in order of first occurrence (over the questions in order)
    flat_labels = list(itertools.chain.from_iterable(use))
    codes = {x: i for i, x in enumerate(dict.fromkeys(flat_labels))}
    flat_all = np.fromiter(map(codes.__getitem__, flat_labels), dtype=np.int64, count=len(flat_labels))
    sel, perm, d, shuffles = _mi_plan(tuple(map(len, use)), k, draws, shuffles, seed)
    q = len(use)
    # (C order: fancy indexing may return another memory layout, and numpy's reductions sum in memory
    # order, so the last digits would differ)
    cube = np.ascontiguousarray(flat_all[sel]).reshape(d, q, k)  # (draws, Q, k)
    n_codes = len(codes)
    flat = cube.reshape(d, q * k)
    counts = np.bincount((flat + (np.arange(d) * n_codes)[:, None]).ravel(), minlength=d * n_codes)
    p = counts.reshape(d, n_codes) / (q * k)
    with np.errstate(divide="ignore", invalid="ignore"):
        h_all = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=1)  # (draws,)
    plug = (h_all - _row_entropies(cube).mean(axis=1)).tolist()
    shuf: list[float] = []
    if shuffles > 0:
        perms = np.ascontiguousarray(flat[np.arange(d)[:, None, None], perm]).reshape(d, shuffles, q, k)
        shuf = (h_all[:, None] - _row_entropies(perms).mean(axis=2)).ravel().tolist()
    mi_plugin = float(np.mean(plug))
    mi_shuffle = float(np.mean(shuf)) if shuf else 0.0
    return {"mi": mi_plugin - mi_shuffle, "mi_plugin": mi_plugin, "mi_shuffle": mi_shuffle, "k": float(k),
            "n_questions": float(len(use))}
