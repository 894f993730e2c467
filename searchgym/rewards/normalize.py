"""SQuAD-style answer normalisation, exactly as Search-R1 / veRL / FlashRAG apply it.

Order: lower-case -> remove punctuation (``string.punctuation``) -> remove the articles a/an/the ->
collapse whitespace. Every anchor system uses this order, so EM numbers stay comparable.
"""

from __future__ import annotations

import re
import string

_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Normalise an answer string for EM / F1 comparison."""
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    text = s.lower()
    text = text.translate(_PUNCT_TABLE)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())
