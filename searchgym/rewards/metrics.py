"""Answer metrics: exact match, substring exact match and token F1, each a max over the gold answers.

Definitions follow Search-R1's ``qa_em.py`` (EM, sub-EM) and FlashRAG's ``evaluator/metrics.py`` (F1 with
the yes/no/noanswer special case). A missing prediction (``None``) scores 0 on every metric.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from searchgym.rewards.normalize import normalize_answer

_SPECIAL = frozenset({"yes", "no", "noanswer"})


def _golds(answers: str | Iterable[str]) -> list[str]:
    if isinstance(answers, str):
        return [answers]
    return [a if isinstance(a, str) else str(a) for a in answers]


def em(prediction: str | None, answers: str | Iterable[str]) -> int:
    """1 if the normalised prediction equals any normalised gold answer, else 0."""
    if prediction is None:
        return 0
    p = normalize_answer(prediction)
    return int(any(p == normalize_answer(g) for g in _golds(answers)))


def sub_em(prediction: str | None, answers: str | Iterable[str]) -> int:
    """1 if any normalised gold answer is a substring of the normalised prediction, else 0."""
    if prediction is None:
        return 0
    p = normalize_answer(prediction)
    return int(any(normalize_answer(g) in p for g in _golds(answers)))


def f1_normalized(pred_norm: str, gold_norm: str) -> float:
    """Token F1 of two already-normalised strings (yes/no/noanswer must match exactly)."""
    if (pred_norm in _SPECIAL or gold_norm in _SPECIAL) and pred_norm != gold_norm:
        return 0.0
    p_toks, g_toks = pred_norm.split(), gold_norm.split()
    common = Counter(p_toks) & Counter(g_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(p_toks)
    recall = same / len(g_toks)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str | None, answers: str | Iterable[str]) -> float:
    """Token F1 between the normalised prediction and the best-matching gold answer."""
    if prediction is None:
        return 0.0
    p = normalize_answer(prediction)
    return max((f1_normalized(p, normalize_answer(g)) for g in _golds(answers)), default=0.0)


METRICS = {"em": em, "sub_em": sub_em, "f1": f1}


def compute_score(prediction: str | None, answers: str | Iterable[str], metric: str = "em") -> float:
    """Score one prediction against its gold answers with a named metric (``em``, ``sub_em``, ``f1``)."""
    try:
        fn = METRICS[metric]
    except KeyError:
        from searchgym.errors import ConfigError

        raise ConfigError(f"unknown metric {metric!r}; choose one of {sorted(METRICS)}") from None
    return float(fn(prediction, answers))
