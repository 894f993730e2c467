"""Answer extraction from retrieved passages: type-aware on the world, span scoring on other data.

On the procedural world the reader knows how passages state facts (the sentence patterns of
``searchgym.data.world.schema``), so it turns each retrieved passage into ``(entity, relation, value)``
facts and follows the question's relation chain through them (which is also how ``decompose`` reads
the bridge entity of a hop). Anything else, or a chain it cannot complete, falls back to span scoring:
candidate spans of the expected answer type (year, number, name, ...) taken from the passages, scored
by how many question keywords share their sentence and by the passage rank.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from searchgym.agents.analysis import (
    STOPWORDS,
    WH_WORDS,
    QuestionSpec,
    answer_type,
    entity_spans,
    keywords,
    relation_info,
)
from searchgym.agents.base import RetrievedDoc

_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_YEAR_RE = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUM_RE = re.compile(r"\b\d{1,3}(?:,\d{3})+\b|\b\d+(?:\.\d+)?\b")
_QUAL_RE = re.compile(r"\s+\([^()]*\)\s*$")

_VALUE_RX = {"year": r"(?P<v>\d{3,4})", "number": r"(?P<v>\d[\d,]*(?:\.\d+)?)",
             "text": r"(?P<v>[^.]+?)", "entity": r"(?P<v>[A-Z][^.]*?)"}


def base_title(title: str) -> str:
    """``"Lian Gandloston (career)"`` -> ``"Lian Gandloston"``."""
    return _QUAL_RE.sub("", title).strip()


def norm(text: str) -> str:
    t = text.lower().replace(",", "")
    t = re.sub(r"[^\w\s]", " ", t)
    t = re.sub(r"\b(a|an|the)\b", " ", t)
    return " ".join(t.split())


@dataclass(frozen=True)
class Fact:
    entity: str
    relation: str
    value: str


@functools.lru_cache(maxsize=1)
def _fact_patterns() -> list[tuple[str, str, re.Pattern[str]]]:
    """(literal prefilter, relation key, regex) for every sentence pattern of the world."""
    out: list[tuple[str, str, re.Pattern[str]]] = []
    for key, r in relation_info().items():
        for pat in r.patterns:
            rx, literals = "", []
            for part in re.split(r"(\{\w+\})", pat):
                if part in ("{S}", "{s}"):
                    rx += r"(?P<S>.+?)"
                elif part == "{v}":
                    rx += _VALUE_RX.get(r.kind, _VALUE_RX["text"])
                elif part == "{a_v}":
                    rx += r"an? " + _VALUE_RX["text"]
                else:
                    rx += re.escape(part)
                    literals.append(part)
            lit = max(literals, key=len).strip()
            out.append((lit, key, re.compile("^" + rx + "$")))
    return out


@functools.lru_cache(maxsize=200_000)
def extract_facts(title: str, text: str) -> tuple[Fact, ...]:
    """The world facts a passage states (empty for passages outside the world's patterns)."""
    pats = _fact_patterns()
    if not pats:
        return ()
    entity = base_title(title)
    facts: list[Fact] = []
    for sent in _SENT_RE.split(text.strip()):
        sent = sent.strip()
        for lit, key, rx in pats:
            if lit not in sent:
                continue
            m = rx.match(sent)
            if m:
                facts.append(Fact(entity, key, m.group("v").strip()))
    return tuple(facts)


@dataclass
class Memory:
    """What an episode has read so far: the passages (in retrieval order) and their facts."""

    docs: list[RetrievedDoc] = field(default_factory=list)
    facts: dict[tuple[str, str], str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # lower-cased entity -> entity as written
    seen: set[tuple[str, str]] = field(default_factory=set)

    def add(self, docs: Iterable[RetrievedDoc]) -> None:
        for d in docs:
            k = (d.title, d.text[:80])
            if k in self.seen:
                continue
            self.seen.add(k)
            self.docs.append(d)
            for f in extract_facts(d.title, d.text):
                self.facts.setdefault((f.entity.lower(), f.relation), f.value)
                self.names.setdefault(f.entity.lower(), f.entity)

    def lookup(self, entity: str, keys: Sequence[str]) -> str | None:
        e = entity.lower().strip()
        for k in keys:
            v = self.facts.get((e, k))
            if v is not None:
                return v
        return None


@dataclass
class Resolution:
    """How far a question's chain got: ``entity`` reached after ``hop`` hops, and the final value."""

    hop: int
    entity: str
    value: str | None = None
    values: tuple[str | None, str | None] = (None, None)  # comparison: (A's, B's)
    # intersection: entities that meet one constraint, with the index (0/1) of the constraint still unknown
    candidates: list[tuple[str, int]] = field(default_factory=list)


def _resolve_intersection(spec: QuestionSpec, mem: Memory) -> Resolution:
    (k1, k2), (v1, v2) = (spec.chain[0], spec.chain[1]), spec.values
    partial: list[tuple[str, int]] = []
    for low, name in mem.names.items():
        a, b = mem.lookup(low, k1), mem.lookup(low, k2)
        ok1 = a is not None and _same(a, v1)
        ok2 = b is not None and _same(b, v2)
        if ok1 and ok2:
            return Resolution(hop=2, entity=name, value=name)
        if ok1 and b is None:
            partial.append((name, 1))
        elif ok2 and a is None:
            partial.append((name, 0))
    partial.sort(key=lambda c: c[1], reverse=True)  # entities matching the first (more specific) constraint first
    return Resolution(hop=1 if partial else 0, entity=partial[0][0] if partial else "", candidates=partial)


def resolve(spec: QuestionSpec, mem: Memory) -> Resolution:
    if spec.kind == "intersect":
        return _resolve_intersection(spec, mem)
    if spec.kind == "compare":
        keys = spec.final
        va, vb = mem.lookup(spec.subject, keys), mem.lookup(spec.other or "", keys)
        return Resolution(hop=int(va is not None) + int(vb is not None), entity=spec.subject,
                          values=(va, vb))
    cur = spec.subject
    for i, keys in enumerate(spec.chain):
        v = mem.lookup(cur, keys)
        if v is None:
            return Resolution(hop=i, entity=cur)
        if i == len(spec.chain) - 1:
            return Resolution(hop=i + 1, entity=cur, value=v)
        cur = v
    return Resolution(hop=len(spec.chain), entity=cur)


def _num(v: str) -> float | None:
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


def _same(a: str, b: str) -> bool:
    na, nb = norm(a), norm(b)
    return na == nb or (bool(na) and bool(nb) and (na.endswith(" " + nb) or nb.endswith(" " + na)))


class Reader:
    """Extracts an answer from what an episode has read.

    ``world`` (optional, anything with ``entity_type_of(name)``) makes span scoring type-aware on
    entity names; without it, names are typed by shape only.
    """

    def __init__(self, world: object | None = None):
        self.world = world

    # -- world path ----------------------------------------------------------------------------------
    def answer_spec(self, spec: QuestionSpec, mem: Memory) -> tuple[str | None, float]:
        res = resolve(spec, mem)
        if spec.kind == "compare":
            va, vb = res.values
            na, nb = _num(va) if va else None, _num(vb) if vb else None
            if na is not None and nb is not None and na != nb:
                a_wins = (na < nb) == (spec.direction == "min")
                return (spec.subject if a_wins else spec.other), 1.0
            if na is not None or nb is not None:
                return spec.subject, 0.2  # half the facts: a guess
            return None, 0.0
        if spec.kind == "intersect":
            if res.value is not None:
                return res.value, 1.0
            return (res.candidates[0][0], 0.3) if res.candidates else (None, 0.0)
        if spec.kind == "yesno":
            if res.value is None:
                return None, 0.0
            return ("yes" if _same(res.value, spec.obj or "") else "no"), 1.0
        if res.value is not None:
            return res.value, 1.0
        return None, 0.0

    # -- generic path --------------------------------------------------------------------------------
    def _type_ok(self, cand: str, qtype: str) -> bool:
        if qtype == "year":
            return bool(_YEAR_RE.fullmatch(cand))
        if qtype == "number":
            return bool(_NUM_RE.fullmatch(cand))
        if qtype in ("person", "city", "country", "place"):
            if not cand[:1].isupper():
                return False
            if self.world is not None:
                t = self.world.entity_type_of(cand)  # type: ignore[attr-defined]
                if t is not None:
                    return t == qtype or (qtype == "place" and t in ("city", "country"))
            return True
        return True

    def span_answer(self, question: str, docs: Sequence[RetrievedDoc]) -> tuple[str | None, float]:
        """Best candidate span of the expected type, scored by keyword overlap of its sentence."""
        qtype = answer_type(question)
        if qtype == "yes_no":
            return self._yes_no(question, docs)
        kws = keywords(question)
        qwords = {w.lower() for w in kws}
        relwords = {w.lower() for w in kws if not w[:1].isupper()}  # "designed", "population": count double
        qlow = question.lower()
        scores: dict[str, float] = {}
        for rank, d in enumerate(docs):
            title_bonus = 1.0 if base_title(d.title).lower() in qlow else 0.0
            for sent in _SENT_RE.split(d.text):
                swords = {w.lower().strip(",.") for w in sent.split()}
                overlap = len(qwords & swords) + len(relwords & swords) + title_bonus
                if overlap <= 0:
                    continue
                if qtype == "year":
                    cands = _YEAR_RE.findall(sent)
                elif qtype == "number":
                    cands = [c for c in _NUM_RE.findall(sent) if not _YEAR_RE.fullmatch(c)] or \
                        _NUM_RE.findall(sent)
                elif qtype in ("person", "city", "country", "place"):
                    cands = entity_spans(sent)
                else:
                    cands = entity_spans(sent) + [w.strip(",.") for w in sent.split()
                                                  if w.strip(",.").isalpha() and w.lower() not in STOPWORDS
                                                  and w.lower() not in WH_WORDS]
                for c in cands:
                    if not c or c.lower() in qlow or not self._type_ok(c, qtype):
                        continue
                    s = overlap / (1.0 + 0.3 * rank)
                    scores[c] = scores.get(c, 0.0) + s
        if not scores:
            if docs:
                return base_title(docs[0].title), 0.05
            return None, 0.0
        best = max(scores, key=lambda c: scores[c])
        total = sum(scores.values())
        return best, 0.9 * scores[best] / total  # span scoring is never certain

    def _yes_no(self, question: str, docs: Sequence[RetrievedDoc]) -> tuple[str | None, float]:
        kws = [w.lower() for w in keywords(question)]
        if not kws or not docs:
            return None, 0.0
        best = 0.0
        for d in docs:
            text = (d.title + " " + d.text).lower()
            for sent in _SENT_RE.split(text):
                best = max(best, sum(1 for w in kws if w in sent) / len(kws))
        return ("yes" if best >= 0.8 else "no"), abs(best - 0.5) * 2

    # -- entry point ---------------------------------------------------------------------------------
    def answer(self, question: str, mem: Memory, spec: QuestionSpec | None = None) -> tuple[str, float]:
        """The answer and a confidence in [0, 1]; always returns some string (a guess at worst)."""
        if spec is not None:
            a, conf = self.answer_spec(spec, mem)
            if a is not None and conf >= 0.5:
                return a, conf
            if spec.kind == "yesno":
                return "no", 0.1
            if spec.kind == "compare":
                return a or spec.subject, 0.1
            if spec.kind == "intersect" and a is not None:
                return a, conf
        a, conf = self.span_answer(question, mem.docs)
        return (a or "unknown"), conf
