"""Query strategy: where a query's words come from, and which of a small set of strategies it follows.

Read from the question and the text retrieved EARLIER in the episode (the evidence of earlier turns; parallel
queries of one turn do not see each other's results). No NER model: names are the question's entity spans
(quoted strings and capitalised runs, not its sentence-initial word), the titles retrieved earlier, and the
capitalised runs of earlier evidence text; they are matched on normalised tokens, so a lowercase query
still names them. Words are compared as stemmed content terms (function words dropped).

Per query (``QueryStrategy``):

* ``sources``: the share of its content terms found in the question, else in earlier evidence, else in
  neither;
* ``copies_question``: token overlap with the question >= 0.8 both ways (the query holds at least 80% of
  the question's content terms and at least 80% of its own content terms come from the question);
* ``strategy``: the first class that applies, in this order (the same classes on every corpus):

==================  ===================================================================================
``malformed``       empty, over 32 words, or markup/garbage (tags, JSON, few letters, one token repeated)
``copy-question``   copies the question (see above)
``off-task``        names nothing and uses no term from the question or from earlier evidence
``bridge``          names something first seen in retrieved text (not in the question): a next hop
``entity-lookup``   the query is one name of the question (nothing else but function words)
``question-fragment`` keywords: every content term is from the question, not a copy
``entity+relation`` a name of the question plus words that are not in it (a relation, an attribute)
``rephrase``        question or evidence terms mixed with new words, and no name
==================  ===================================================================================

``GROUNDED`` are the classes other than ``malformed`` and ``off-task``: the well-formed, grounded queries
every diversity figure is also reported over.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from searchgym.diversity.moves import stem
from searchgym.diversity.templates import _STOP, _cap_runs, _SpanIndex, normalize, question_spans

STRATEGIES = ("copy-question", "question-fragment", "entity-lookup", "entity+relation", "bridge", "rephrase",
              "off-task", "malformed")
GROUNDED = frozenset(STRATEGIES) - {"off-task", "malformed"}
MAX_QUERY_WORDS = 32
COPY_OVERLAP = 0.8

_MARKUP = re.compile(r"</?[A-Za-z_|][^<>]{0,40}>|\{\s*\"|\"\s*:\s*[\[{\"]|<\||\|>")


@dataclass(frozen=True)
class QueryStrategy:
    """What one query draws on (see module docstring)."""

    strategy: str
    copies_question: bool
    from_question: float      # share of its content terms in the question
    from_evidence: float      # ... else in earlier evidence
    from_neither: float       # ... else in neither
    n_terms: int

    @property
    def grounded(self) -> bool:
        return self.strategy in GROUNDED


@lru_cache(maxsize=1 << 17)
def _stems(normalized: str) -> tuple[str, ...]:
    """Stemmed content terms of a normalised text, in order (duplicates kept)."""
    return tuple(stem(t) for t in normalized.split() if t not in _STOP)


def _term_set(text: str) -> frozenset[str]:
    return frozenset(_stems(normalize(text)))


@lru_cache(maxsize=1 << 15)
def _question_context(question: str) -> tuple[frozenset[str], _SpanIndex]:
    idx = _SpanIndex()
    for span in question_spans(question):
        idx.add(span)
    return _term_set(question), idx


def is_malformed(query: str) -> bool:
    """Empty, over ``MAX_QUERY_WORDS`` words, markup (tags, JSON, special tokens) or garbage."""
    q = (query or "").strip()
    if not q:
        return True
    words = q.split()
    if len(words) > MAX_QUERY_WORDS:
        return True
    if ("<" in q or "{" in q or "|" in q or '"' in q) and _MARKUP.search(q):
        return True
    nonspace = sum(1 for ch in q if not ch.isspace())
    letters = sum(1 for ch in q if ch.isalpha())
    if nonspace and letters / nonspace < 0.5:
        return True
    toks = normalize(q).split()
    if not toks:
        return True
    if len(toks) >= 4:
        top = max(toks.count(t) for t in set(toks))
        if top / len(toks) > 0.5:
            return True
    return False


def _names(toks: Sequence[str], idx: _SpanIndex | None) -> list[tuple[int, int]]:
    """(start, end) token spans of the names of ``idx`` in ``toks`` (longest match, left to right)."""
    if idx is None or not idx.full:
        return []
    out = []
    i = 0
    while i < len(toks):
        if toks[i] in idx.starts:
            m = idx.match(toks, i)
            if m is not None:
                out.append((i, m[0]))
                i = m[0]
                continue
        i += 1
    return out


class EvidenceContext:
    """What an episode has retrieved so far: its term set and the names in it (titles, capitalised runs).

    ``add(texts, titles)`` after a turn's searches return; ``classify`` sees only what was added before.
    """

    __slots__ = ("names", "terms")

    def __init__(self) -> None:
        self.terms: set[str] = set()
        self.names = _SpanIndex()

    def add(self, texts: Iterable[str] = (), titles: Iterable[str] = ()) -> None:
        for t in titles:
            if t:
                self.names.add(str(t))
                self.terms |= _term_set(str(t))
        for text in texts:
            if not text:
                continue
            text = str(text)
            self.terms |= _term_set(text)
            for _, _, span in _cap_runs(text):
                if span and len(span) > 2:
                    self.names.add(span)


def classify(query: str, question: str | None, evidence: EvidenceContext | None = None) -> QueryStrategy:
    """The strategy of one query given its question and the evidence retrieved before it."""
    if is_malformed(query):
        return QueryStrategy("malformed", False, 0.0, 0.0, 0.0, 0)
    nq = normalize(query)
    toks = nq.split()
    stems = _stems(nq)
    q_terms, q_idx = _question_context(question) if question else (frozenset(), None)
    ev_terms = evidence.terms if evidence is not None else set()
    n = len(stems)
    in_q = sum(1 for s in stems if s in q_terms)
    in_e = sum(1 for s in stems if s not in q_terms and s in ev_terms)
    share_q = in_q / n if n else 0.0
    share_e = in_e / n if n else 0.0
    share_x = 1.0 - share_q - share_e if n else 0.0
    qset = frozenset(stems)
    copies = bool(q_terms) and bool(qset) and len(qset & q_terms) / len(q_terms) >= COPY_OVERLAP \
        and len(qset & q_terms) / len(qset) >= COPY_OVERLAP
    if copies:
        return QueryStrategy("copy-question", True, share_q, share_e, share_x, n)
    q_names = _names(toks, q_idx)
    e_names = [s for s in _names(toks, evidence.names if evidence is not None else None)
               if not q_terms or not set(_stems(" ".join(toks[s[0]:s[1]]))) <= q_terms]
    if not q_names and not e_names and in_q == 0 and in_e == 0:
        return QueryStrategy("off-task", False, share_q, share_e, share_x, n)
    if e_names:
        return QueryStrategy("bridge", False, share_q, share_e, share_x, n)
    if q_names:
        covered = {i for s, e in q_names for i in range(s, e)}
        rest = [t for i, t in enumerate(toks) if i not in covered and t not in _STOP]
        if len(q_names) == 1 and not rest:
            return QueryStrategy("entity-lookup", False, share_q, share_e, share_x, n)
        if all(stem(t) in q_terms for t in rest):
            return QueryStrategy("question-fragment", False, share_q, share_e, share_x, n)
        return QueryStrategy("entity+relation", False, share_q, share_e, share_x, n)
    if n and in_q == n:
        return QueryStrategy("question-fragment", False, share_q, share_e, share_x, n)
    return QueryStrategy("rephrase", False, share_q, share_e, share_x, n)


def episode_strategies(queries: Sequence[str], question: str | None, *,
                       evidence: Sequence[Sequence[str]] = (), titles: Sequence[Sequence[str]] = (),
                       turns: Sequence[int] = ()) -> list[QueryStrategy]:
    """Strategies of an episode's queries. ``evidence[i]`` / ``titles[i]``: what query i retrieved;
    ``turns[i]``: its turn (parallel queries share one; empty = one query per turn). Query i sees the
    evidence of queries of earlier turns only."""
    ctx = EvidenceContext()
    out: list[QueryStrategy] = []
    turn_of = list(turns) if len(turns) == len(queries) else list(range(len(queries)))
    pending: list[int] = []
    cur = None
    for i, q in enumerate(queries):
        if turn_of[i] != cur:
            for j in pending:  # the previous turn's results become visible
                ctx.add(evidence[j] if j < len(evidence) else (), titles[j] if j < len(titles) else ())
            pending = []
            cur = turn_of[i]
        out.append(classify(q, question, ctx))
        pending.append(i)
    return out


__all__ = ["GROUNDED", "STRATEGIES", "EvidenceContext", "QueryStrategy", "classify", "episode_strategies",
           "is_malformed"]
