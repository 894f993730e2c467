"""Reformulation moves between consecutive queries of an episode, and CTAR (literature §6.2, §6.3).

Rules, applied in order to ``q1 -> q2`` (W = stemmed content terms, ed = character edit distance):

=================  ==========================================================================
``repeat``         normalised strings equal
``reorder``        same tokens in another order
``spelling_fix``   error correction: equal once spaces/punctuation are removed (whitespace_punct),
                   equal stem sets (stemming), or one word swapped for a word at edit distance
                   <= 2 (and <= 34% of its length).
                   Huang & Efthimiadis's whitespace/punctuation and stemming classes are folded in
                   here: all three are surface corrections that keep the information need.
``new_hop``        q2 adds a term absent from q1 (and from the question, when given) that appeared in
                   the evidence retrieved before q2: the agent follows a bridge entity.
``add_words``      W1 strictly inside W2 (specialisation)
``remove_words``   W2 strictly inside W1 (generalisation)
``substitution``   one term swapped for another, the rest shared
``parallel_move``  a shared core with changed facets (several terms changed)
``new_topic``      no term shared
=================  ==========================================================================

Examples::

    classify_move("obama birth", "obama birth")                 -> "repeat"
    classify_move("obama birth date", "birth date obama")       -> "reorder"
    classify_move("barak obama born", "barack obama born")      -> "spelling_fix"
    classify_move("obama", "obama birth date")                  -> "add_words"
    classify_move("obama birth date", "obama")                  -> "remove_words"
    classify_move("obama birth date", "obama death date")       -> "substitution"
    classify_move("obama birth", "obama wife", evidence_terms={"michelle"}) -> "substitution"
    classify_move("obama wife", "michelle obama born", evidence_terms={"michelle"}) -> "new_hop"
    classify_move("obama birth", "capital of france")           -> "new_topic"
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

from searchgym.diversity.templates import _STOP, normalize, tokens

MOVES = ("repeat", "reorder", "spelling_fix", "new_hop", "add_words", "remove_words", "substitution",
         "parallel_move", "new_topic")

try:  # PyStemmer is a core dependency (bm25s uses it); fall back to a crude suffix stripper.
    import Stemmer as _pystemmer

    _STEMMER = _pystemmer.Stemmer("english")

    @lru_cache(maxsize=131072)
    def stem(word: str) -> str:
        return _STEMMER.stemWord(word)
except ImportError:  # pragma: no cover - PyStemmer is installed with searchgym
    @lru_cache(maxsize=131072)
    def stem(word: str) -> str:
        for suf in ("ing", "ed", "es", "s"):
            if word.endswith(suf) and len(word) > len(suf) + 2:
                return word[: -len(suf)]
        return word


def terms(text: str) -> set[str]:
    """Stemmed content terms of a text (the W of the rules)."""
    return set(_terms(text))


@lru_cache(maxsize=1 << 17)
def _terms(text: str) -> frozenset[str]:
    return _nterms(normalize(text))


@lru_cache(maxsize=1 << 17)
def _nterms(normalized: str) -> frozenset[str]:
    """``_terms`` of a text given its ``normalize`` d form (content_terms = its tokens minus stop words,
    or all of them when none is left)."""
    toks = normalized.split()
    kept = [t for t in toks if t not in _STOP]
    return frozenset(map(stem, kept or toks))


def _norm_terms(n: str) -> frozenset[str]:
    """``_terms(n)`` for an ``n`` that ``normalize`` returned: ASCII output of ``normalize`` is a fixed point
    of it (lowercase, no punctuation or apostrophes, single spaces), so its terms are ``_nterms(n)``."""
    return _nterms(n) if n.isascii() else _terms(n)


def evidence_term_set(evidence: str | Iterable[str]) -> set[str]:
    """Stemmed content terms of retrieved evidence (a text or several texts/titles)."""
    if isinstance(evidence, str):
        return set(_terms(evidence))
    out: set[str] = set()
    for e in evidence:
        out |= _terms(e)
    return out


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """Levenshtein distance (two-row DP); stops early once every cell exceeds ``limit``."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    if limit is not None and len(a) - len(b) > limit:
        return limit + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if limit is not None and min(cur) > limit:
            return limit + 1
        prev = cur
    return prev[-1]


def classify_move(prev_query: str, query: str, *, evidence_terms: Iterable[str] = (),
                  question: str | None = None) -> str:
    """The reformulation move from ``prev_query`` to ``query`` (one of ``MOVES``).

    ``evidence_terms``: terms of the evidence retrieved before ``query`` (raw or stemmed words; they are
    stemmed here). ``question``: its terms do not count as adopted from evidence.
    """
    return _classify(prev_query, query, evidence_terms, None, question)


@lru_cache(maxsize=1 << 17)
def _evidence_key(e: str) -> str:
    """How an evidence term is compared with query terms (single words are normalised and stemmed)."""
    return stem(normalize(e)) if " " not in e else e


def _classify(prev_query: str, query: str, evidence_terms: Iterable[str], evidence_keys: set[str] | None,
              question: str | None) -> str:
    """``classify_move``; ``evidence_keys`` (``_evidence_key`` of each evidence term) may be given
    precomputed, as ``episode_moves`` does while its evidence set grows."""
    n1, n2 = normalize(prev_query), normalize(query)
    if n1 == n2:
        return "repeat"
    t1, t2 = n1.split(), n2.split()
    if len(t1) == len(t2) and sorted(t1) == sorted(t2):
        return "reorder"
    if n1.replace(" ", "") == n2.replace(" ", ""):
        return "spelling_fix"
    w1, w2 = _norm_terms(n1), _norm_terms(n2)
    if w1 == w2:
        return "spelling_fix"  # stemming / function-word change only
    s1, s2 = set(t1), set(t2)
    d1, d2 = s1 - s2, s2 - s1
    if len(d1) == 1 and len(d2) == 1:
        a, b = next(iter(d1)), next(iter(d2))
        ed = edit_distance(a, b, limit=3)
        if ed <= 2 and ed / max(len(a), len(b)) <= 0.34:
            return "spelling_fix"  # one misspelt word corrected
    added = w2 - w1
    if added and (evidence_keys if evidence_keys is not None else evidence_terms):
        fresh = added - _terms(question) if question else added
        if fresh:  # else nothing new can come from the evidence: skip mapping it
            if evidence_keys is None:
                evidence_keys = {_evidence_key(e) for e in evidence_terms}
            if any(k and k in evidence_keys for k in fresh):
                return "new_hop"
    if w1 < w2:
        return "add_words"
    if w2 < w1:
        return "remove_words"
    shared = w1 & w2
    if shared and len(w1 - w2) == 1 and len(w2 - w1) == 1:
        return "substitution"
    if shared:
        return "parallel_move"
    return "new_topic"


def episode_moves(queries: Sequence[str], evidence_per_step: Sequence[str | Iterable[str]] | None = None, *,
                  question: str | None = None) -> list[str]:
    """Moves between consecutive queries; evidence of steps < t feeds ``new_hop`` for the t-th query."""
    ev_sets = None
    if evidence_per_step is not None:
        ev_sets = [_evidence_terms(e) for e in evidence_per_step[:max(0, len(queries) - 1)]]
    return _moves(queries, ev_sets, question)


def _evidence_terms(evidence: str | Iterable[str]) -> frozenset[str]:
    if isinstance(evidence, str):
        return _terms(evidence)
    out: set[str] = set()
    for e in evidence:
        out |= _terms(e)
    return frozenset(out)


def _moves(queries: Sequence[str], ev_sets: Sequence[frozenset[str]] | None, question: str | None) -> list[str]:
    moves: list[str] = []
    seen_ev: set[str] = set()
    keys: set[str] = set()
    for t in range(1, len(queries)):
        if ev_sets is not None and t - 1 < len(ev_sets):
            new = ev_sets[t - 1] - seen_ev
            if new:
                seen_ev |= new
                keys.update(map(_evidence_key, new))
        moves.append(_classify(queries[t - 1], queries[t], seen_ev, keys if seen_ev else None, question))
    return moves


def ctar(queries: Sequence[str], evidence_per_step: Sequence[str | Iterable[str]]) -> list[float]:
    """Context-driven Term Adoption Rate per step (Ning et al. 2026).

    N_t = terms(q_t) minus the terms of earlier queries; CTAR_t = |N_t ∩ terms(evidence of steps < t)| /
    |N_t|. ``evidence_per_step[s]`` is the text (or texts) retrieved by query s. The value is NaN where it
    is undefined: at t = 0 (no evidence yet) and when q_t introduces no new term.
    """
    return _ctar(queries, [_evidence_terms(e) for e in evidence_per_step[:max(0, len(queries) - 1)]])


def _ctar(queries: Sequence[str], ev_sets: Sequence[frozenset[str]]) -> list[float]:
    out: list[float] = []
    prior_q: set[str] = set()
    prior_ev: set[str] = set()
    for t, q in enumerate(queries):
        w = _terms(q)
        new = w - prior_q
        if t == 0 or not new:
            out.append(math.nan)
        else:
            out.append(len(new & prior_ev) / len(new))
        prior_q |= w
        if t < len(ev_sets):
            prior_ev |= ev_sets[t]
    return out


def moves_and_ctar(queries: Sequence[str], evidence_per_step: Sequence[str | Iterable[str]] | None, *,
                   question: str | None = None) -> tuple[list[str], list[float]]:
    """``(episode_moves(queries, evidence_per_step, question=question), ctar(queries, evidence_per_step))``
    with the evidence terms computed once (the CTAR list is empty when there is no evidence)."""
    if evidence_per_step is None:
        return _moves(queries, None, question), []
    ev_sets = [_evidence_terms(e) for e in evidence_per_step[:max(0, len(queries) - 1)]]
    return _moves(queries, ev_sets, question), _ctar(queries, ev_sets)


def transition_matrix(move_sequences: Iterable[Sequence[str]]) -> dict[str, dict[str, int]]:
    """First-order Markov counts between consecutive moves of each episode."""
    m: dict[str, dict[str, int]] = {}
    for seq in move_sequences:
        for a, b in itertools.pairwise(seq):
            row = m.setdefault(a, {})
            row[b] = row.get(b, 0) + 1
    return m


__all__ = ["MOVES", "classify_move", "ctar", "edit_distance", "episode_moves", "evidence_term_set",
           "moves_and_ctar", "stem", "terms", "tokens", "transition_matrix"]
