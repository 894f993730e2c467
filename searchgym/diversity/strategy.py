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
  the question's normalised tokens and at least 80% of its own tokens are the question's; function words
  count, so a keyword query that drops them is a fragment, not a copy);
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
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from searchgym.diversity.moves import _terms, stem
from searchgym.diversity.templates import (
    _DISAMBIG,
    _STOP,
    _caprun_pattern,
    _entity_run,
    _SpanIndex,
    normalize,
    question_spans,
)

STRATEGIES = ("copy-question", "question-fragment", "entity-lookup", "entity+relation", "bridge", "rephrase",
              "off-task", "malformed")
GROUNDED = frozenset(STRATEGIES) - {"off-task", "malformed"}
MAX_QUERY_WORDS = 32
COPY_OVERLAP = 0.8

_NON_LETTER = re.compile(r"[\W\d_]+")
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


_COORD = re.compile(r"\s+(?:and|&)\s+|\s*,\s+")


def is_acronym(span: str) -> bool:
    """A short name that counts although it is 2 characters or a function word in lower case: "US", "X2"."""
    return 2 <= len(span) <= 5 and " " not in span and (span.isupper() or any(c.isdigit() for c in span)) \
        and any(c.isalpha() for c in span)


@lru_cache(maxsize=1 << 16)
def name_parts(span: str) -> tuple[str, ...]:
    """A name and the names inside it: a coordinated run split into its names ("Jerome Bernard and Ira Lewis",
    "Marrow & Finch" stays whole too, as does "X of Y & Z" -> "X of Y", "Z"), and for a name of 3+ words its
    leading 2+ word prefixes that do not end in a function word ("Isabella Lucy Bishop FRGS" ->
    "Isabella Lucy Bishop"), so that evidence and question names match on token overlap, not exact strings."""
    out = [span]
    parts = [p.strip() for p in _COORD.split(span) if p.strip()]
    if len(parts) > 1:
        out.extend(p for p in parts if p[:1].isupper() or is_acronym(p))
    for p in list(out):
        words = p.split()
        for k in range(len(words) - 1, 1, -1):
            if words[k - 1].lower() not in _STOP:
                out.append(" ".join(words[:k]))
    return tuple(dict.fromkeys(out))


def _add_name(idx: _SpanIndex, span: str) -> None:
    for part in name_parts(span):
        if is_acronym(part):
            key = normalize(part)
            idx._add_key(key, key, "E")  # (a lower-case acronym may be a function word: "US" -> "us")
        else:
            idx.add(part)


@lru_cache(maxsize=1 << 15)
def _question_context(question: str) -> tuple[frozenset[str], _SpanIndex]:
    idx = _SpanIndex()
    for span in question_spans(question):
        _add_name(idx, span)
    return _term_set(question), idx


@lru_cache(maxsize=1 << 15)
def _question_tokens(question: str) -> frozenset[str]:
    return frozenset(normalize(question).split())


def _copies(toks: Sequence[str], question: str) -> bool:
    """Token overlap with the question >= ``COPY_OVERLAP`` both ways (normalised tokens, function words
    included: a keyword query that drops them is a fragment, not a copy)."""
    qt = _question_tokens(question)
    mine = set(toks)
    if not qt or not mine:
        return False
    shared = len(mine & qt)
    return shared / len(qt) >= COPY_OVERLAP and shared / len(mine) >= COPY_OVERLAP


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
    nonspace = sum(map(len, words))
    letters = len(_NON_LETTER.sub("", q))
    if nonspace and letters / nonspace < 0.5:
        return True
    toks = normalize(q).split()
    if not toks:
        return True
    if len(toks) >= 4 and len(set(toks)) * 2 < len(toks) + 1:  # (cheap pre-check: many repeats)
        top = Counter(toks).most_common(1)[0][1]
        if top / len(toks) > 0.5:
            return True
    return False


_malformed = lru_cache(maxsize=1 << 16)(is_malformed)  # (per query: queries recur under other questions)


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


@lru_cache(maxsize=1 << 17)
def _name_info(name: str) -> tuple[str, str, int] | None:
    """(normalised key, first token, token count) of a name, or None when it is only function words (an
    acronym such as "US" counts although "us" is one)."""
    key = normalize(name)
    toks = key.split()
    if not toks or (all(t in _STOP for t in toks) and not is_acronym(name)):
        return None
    return key, toks[0], len(toks)


def _infos(span: str) -> tuple[tuple[str, str, int], ...]:
    """The names a span contributes: itself and the names inside it (``name_parts``)."""
    out = [_name_info(p) for p in name_parts(span)]
    return tuple(i for i in out if i is not None)


@lru_cache(maxsize=1 << 16)
def _title_info(title: str) -> tuple[tuple[str, str, int], ...]:
    return _infos(_DISAMBIG.sub("", title) if "(" in title else title)


@lru_cache(maxsize=1 << 17)
def _run_info(run: str) -> tuple[tuple[str, str, int], ...]:
    """The names a capitalised run of evidence text contributes (``_entity_run`` over 2 characters, or an
    acronym)."""
    span = _entity_run(run)
    return _infos(span) if span and (len(span) > 2 or is_acronym(span)) else ()


@lru_cache(maxsize=1 << 16)
def _text_names(text: str) -> tuple[tuple[str, str, int], ...]:
    """The distinct names of the capitalised runs of an evidence text (``_run_info``), cached per text
    (retrieved titles and passages recur across episodes)."""
    infos: set[tuple[str, str, int]] = set()
    for run in set(_caprun_pattern(text).findall(text)):
        infos.update(_run_info(run))
    return tuple(infos)


@lru_cache(maxsize=1 << 16)
def _text_facts(text: str) -> tuple[frozenset[str], tuple[tuple[str, str, int], ...]]:
    """What an evidence text adds to an episode's context: its stemmed content terms (those CTAR and the
    moves use, cached there too) and its names."""
    return _terms(text), _text_names(text)


@lru_cache(maxsize=1 << 16)
def _title_facts(title: str) -> tuple[frozenset[str], tuple[tuple[str, str, int], ...]]:
    """What a retrieved title adds: its terms and itself as a name (without a '(disambiguation)')."""
    return _terms(title), _title_info(title)


class EvidenceContext:
    """What an episode has retrieved so far: its term set and the names in it (titles, capitalised runs).

    ``add(texts, titles)`` after a turn's searches return; ``classify`` sees only what was added before.
    Names are kept as normalised strings (with their first tokens), so adding one is a set insertion.
    """

    __slots__ = ("max_len", "names", "starts", "terms")

    def __init__(self) -> None:
        self.terms: set[str] = set()
        self.names: set[str] = set()
        self.starts: set[str] = set()
        self.max_len = 0

    def add(self, texts: Iterable[str] = (), titles: Iterable[str] = ()) -> None:
        parts: list[frozenset[str]] = []  # term sets, joined in one update
        infos: list[tuple[str, str, int]] = []
        for t in titles:
            if t:
                terms, info = _title_facts(str(t))
                parts.append(terms)
                infos.extend(info)
        for text in texts:
            if text:
                terms, names = _text_facts(str(text))
                parts.append(terms)
                infos.extend(names)
        if parts:
            self.terms.update(*parts)
        if infos:  # the set of names does not depend on the order they are added in
            names_ = self.names
            new = [i for i in infos if i[0] not in names_]
            if new:
                names_.update(i[0] for i in new)
                self.starts.update(i[1] for i in new)
                self.max_len = max(self.max_len, max(i[2] for i in new))

    def find(self, toks: Sequence[str]) -> list[tuple[int, int]]:
        """(start, end) token spans of known names in ``toks`` (longest match, left to right)."""
        out = []
        if not self.names:
            return out
        i, n = 0, len(toks)
        while i < n:
            best = None
            if toks[i] in self.starts:
                for j in range(min(n, i + self.max_len), i, -1):
                    if " ".join(toks[i:j]) in self.names:
                        best = j
                        break
            if best is not None:
                out.append((i, best))
                i = best
            else:
                i += 1
        return out


@lru_cache(maxsize=1 << 16)
def _query_facts(query: str, question: str | None) -> tuple:
    """The part of ``classify`` that does not depend on the evidence, cached per (query, question):
    (malformed, tokens, n terms, terms in the question, the other terms, question set, copies, has a
    question name, the class when no evidence name is found and the query is not off-task)."""
    if _malformed(query):
        return (True,)
    nq = normalize(query)
    toks = tuple(nq.split())
    stems = _stems(nq)
    q_terms, q_idx = _question_context(question) if question else (frozenset(), None)
    n = len(stems)
    in_q = sum(1 for s in stems if s in q_terms)
    other = tuple(s for s in stems if s not in q_terms)
    copies = _copies(toks, question) if question else False
    q_names = _names(toks, q_idx)
    if q_names:
        covered = {i for s, e in q_names for i in range(s, e)}
        rest = [t for i, t in enumerate(toks) if i not in covered and t not in _STOP]
        if len(q_names) == 1 and not rest:
            cls = "entity-lookup"
        elif all(stem(t) in q_terms for t in rest):
            cls = "question-fragment"
        else:
            cls = "entity+relation"
    elif n and in_q == n:
        cls = "question-fragment"
    else:
        cls = "rephrase"
    return False, toks, n, in_q, other, q_terms, copies, bool(q_names), cls


_MALFORMED = QueryStrategy("malformed", False, 0.0, 0.0, 0.0, 0)


def classify(query: str, question: str | None, evidence: EvidenceContext | None = None) -> QueryStrategy:
    """The strategy of one query given its question and the evidence retrieved before it."""
    facts = _query_facts(query, question)
    if facts[0]:
        return _MALFORMED
    _, toks, n, in_q, other, q_terms, copies, has_q_names, cls = facts
    ev_terms = evidence.terms if evidence is not None else ()
    in_e = sum(1 for s in other if s in ev_terms) if ev_terms else 0
    share_q = in_q / n if n else 0.0
    share_e = in_e / n if n else 0.0
    share_x = 1.0 - share_q - share_e if n else 0.0
    if copies:
        return QueryStrategy("copy-question", True, share_q, share_e, share_x, n)
    e_names = False
    if evidence is not None and evidence.names:
        q_starts = _q_name_starts(toks, question) if has_q_names else frozenset()
        for a, b in evidence.find(toks):
            if q_terms and set(_stems(" ".join(toks[a:b]))) <= q_terms:
                continue  # only the question's words
            if a in q_starts:  # a longer form of a question name ("Isabella Lucy Bishop FRGS"): token overlap
                if a == 0 and b == len(toks):
                    cls = "entity-lookup"
                continue
            e_names = True
            break
    if not has_q_names and not e_names and in_q == 0 and in_e == 0:
        return QueryStrategy("off-task", False, share_q, share_e, share_x, n)
    if e_names:
        return QueryStrategy("bridge", False, share_q, share_e, share_x, n)
    return QueryStrategy(cls, False, share_q, share_e, share_x, n)


def _q_name_starts(toks: Sequence[str], question: str | None) -> frozenset[int]:
    if not question:
        return frozenset()
    return frozenset(a for a, _ in _names(toks, _question_context(question)[1]))


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
