"""Question analysis for the heuristic agents: words, entities, answer type, and the world's grammar.

Two levels:

- generic (any data): tokens, keywords (stopwords and wh-words removed), capitalised entity spans,
  the expected answer type from the wh-word (year, number, person, place, yes/no, ...);
- the procedural world's question grammar (``searchgym.data.world.schema``): a question parses into a
  :class:`QuestionSpec`, i.e. a chain of relations from a named subject (``the city where the director
  of X was born`` -> ``film.director``, ``person.born_in``, then the asked relation), a yes/no claim, or
  a comparison of two entities. Questions outside the grammar give ``None`` and the agents fall back
  to the generic level.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

STOPWORDS = frozenset(["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about", "as", "into", "like", "through", "after", "over", "between", "out", "against", "during", "without", "before", "under", "around", "among", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "done", "have", "has", "had", "having", "and", "or", "but", "if", "then", "else", "than", "so", "that", "this", "these", "those", "it", "its", "it's", "itself", "they", "them", "their", "there", "here", "i", "me", "my", "we", "our", "you", "your", "he", "him", "his", "she", "her", "hers", "can", "could", "should", "would", "will", "shall", "may", "might", "must", "not", "no", "nor", "only", "own", "same", "too", "very", "just", "also", "any", "each", "few", "more", "most", "other", "some", "such", "both", "all", "yes", "true", "whether", "answer", "know", "would", "like", "name", "tell", "please", "give", "find"])
WH_WORDS = frozenset(["what", "which", "who", "whom", "whose", "when", "where", "why", "how"])
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-,]*[A-Za-z0-9]|[A-Za-z0-9]")
_CAP_SPAN_RE = re.compile(
    r"(?:[A-Z][\w'\-]*|\d+)(?:\s+(?:(?:of|the|de|at|to|and|von|van|la|le|du|II|III)\s+)*(?:[A-Z][\w'\-]*|II|III))*")


def words(text: str) -> list[str]:
    return [w.strip(",") for w in _WORD_RE.findall(text)]


def keywords(question: str) -> list[str]:
    """The question's words without stopwords and wh-words, in order, deduplicated."""
    out: list[str] = []
    seen: set[str] = set()
    for w in words(question):
        lw = w.lower()
        if lw in STOPWORDS or lw in WH_WORDS or lw in seen:
            continue
        seen.add(lw)
        out.append(w)
    return out


def entity_spans(question: str) -> list[str]:
    """Capitalised spans (likely names), ignoring the capitalised first word when it is a function word."""
    spans: list[str] = []
    for m in _CAP_SPAN_RE.finditer(question):
        s = m.group(0).strip()
        toks = s.split()
        while toks and (toks[0].lower() in STOPWORDS or toks[0].lower() in WH_WORDS):
            toks = toks[1:]
        while toks and toks[-1].lower() in STOPWORDS:
            toks = toks[:-1]
        if toks:
            spans.append(" ".join(toks))
    return spans


def answer_type(question: str) -> str:
    """Expected answer type from the wh-phrase: year, number, person, city, country, place, yes_no, text."""
    q = question.strip().lower()
    if re.match(r"^(is|are|was|were|did|does|do|has|have|had|can|could|will|would)\b", q) or \
            q.startswith(("answer yes or no", "is it true")) or "whether" in q:
        return "yes_no"
    if re.search(r"\b(what|which) year\b|\bwhen\b|\byear of\b|\byear\b", q):
        return "year"
    if re.search(r"\bhow (many|much|tall|long|old|high|far|big)\b|\b(population|number|height|elevation|"
                 r"pages|page count|running time|employees|inhabitants)\b", q):
        return "number"
    if re.search(r"\bwho\b|\bwhom\b|\b(founder|director|author|writer|inventor|president)\b", q):
        return "person"
    if re.search(r"\b(which|what) city\b|\bcapital\b|\bheadquarter", q):
        return "city"
    if re.search(r"\b(which|what) country\b", q):
        return "country"
    if re.search(r"\bwhere\b", q):
        return "place"
    return "text"


# --------------------------------------------------------------------------------------------------
# The world's grammar


@dataclass
class QuestionSpec:
    """A world question, parsed. ``chain`` holds candidate relation keys per hop (inner hop first)."""

    kind: str  # "ask" | "yesno" | "compare" | "intersect"
    subject: str  # the named entity the chain starts from (A for comparisons)
    chain: list[tuple[str, ...]] = field(default_factory=list)
    obj: str | None = None  # yes/no: the claimed value
    other: str | None = None  # comparison: B
    direction: str | None = None  # comparison: "min" | "max"
    values: tuple[str, ...] = ()  # intersection: the constraint values, one per chain entry
    etype: str | None = None  # intersection: the type of the entity asked for

    @property
    def hops(self) -> int:
        return len(self.chain) + (1 if self.kind == "compare" else 0)

    @property
    def final(self) -> tuple[str, ...]:
        return self.chain[-1]


def _rx(template: str, **groups: str) -> re.Pattern[str]:
    """A template like ``"In what year was {S} born?"`` as an anchored, case-insensitive regex."""
    out = ""
    for part in re.split(r"(\{\w+\})", template):
        if part.startswith("{") and part.endswith("}"):
            out += groups.get(part[1:-1], rf"(?P<{part[1:-1]}>.+?)")
        else:
            out += re.escape(part)
    out = re.sub(r"(?:\\[.?])+$", "", out) + r"\s*[.?!]*"
    return re.compile(r"^\s*" + out + r"\s*$", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _grammar() -> dict[str, list] | None:
    try:
        from searchgym.data.world.schema import ASK, COMPARE, RELATIONS, YESNO
    except ImportError:  # pragma: no cover - the world is part of the package
        return None
    asks: list[tuple[re.Pattern[str], str]] = []
    descs: list[tuple[re.Pattern[str], str]] = []
    yesnos: list[tuple[re.Pattern[str], str]] = []
    compares: list[tuple[re.Pattern[str], str, str]] = []
    for r in RELATIONS:
        asks.append((_rx(r.wh), r.key))
        for tpl in ASK.values():
            asks.append((_rx(tpl.replace("{noun}", r.noun)), r.key))
        if r.desc:
            descs.append((_rx(r.desc), r.key))
        if r.yn:
            yq, clause = r.yn
            o = r"(?:an? )?(?P<O>.+?)" if "{a_O}" in yq else r"(?P<O>.+?)"
            yesnos.append((_rx(yq.replace("{a_O}", "{O}"), O=o), r.key))
            for tpl in YESNO.values():
                yesnos.append((_rx(tpl.replace("{C}", clause.replace("{a_O}", "{O}")), O=o), r.key))
        if r.cmp:
            phrase, direction, natural = r.cmp
            compares.append((_rx(natural), r.key, direction))
            for tpl in COMPARE.values():
                compares.append((_rx(tpl.replace("{P}", phrase)), r.key, direction))
    return {"ask": asks, "desc": descs, "yesno": yesnos, "compare": compares, "intersect": _intersect_grammar()}


def _intersect_grammar() -> list[tuple[re.Pattern[str], str, str, str]]:
    """(regex with groups v1/v2, relation key 1, relation key 2, entity type) for intersection questions."""
    try:
        from searchgym.data.world import schema
    except ImportError:  # pragma: no cover
        return []
    inter = getattr(schema, "INTERSECT", None)
    clause = getattr(schema, "CLAUSE", {})
    frames = getattr(schema, "INTERSECT_Q", {})
    nouns = getattr(schema, "TYPE_NOUN", {})
    if not inter:
        return []
    out = []
    for etype, combos in inter.items():
        for r1, r2, natural in combos:
            k1, k2 = f"{etype}.{r1}", f"{etype}.{r2}"
            out.append((_rx(natural), k1, k2, etype))
            if k1 in clause and k2 in clause:
                c1 = clause[k1].replace("{a_v}", "{a_v1}").replace("{v}", "{v1}")
                c2 = clause[k2].replace("{a_v}", "{a_v2}").replace("{v}", "{v2}")
                for tpl in frames.values():
                    t = tpl.replace("{T}", nouns.get(etype, etype)).replace("{C1}", c1).replace("{C2}", c2)
                    out.append((_rx(t, a_v1=r"an? (?P<v1>.+?)", a_v2=r"an? (?P<v2>.+?)"), k1, k2, etype))
    return out


def _unwind(subject: str, depth: int = 0) -> tuple[str, list[tuple[str, ...]]]:
    """``"the director of X"`` -> (``"X"``, [(``film.director``,)]); a plain name -> (name, [])."""
    g = _grammar()
    s = subject.strip()
    if g is None or depth > 4 or not s.lower().startswith("the "):
        return s, []
    by_inner: dict[str, list[str]] = {}
    for rx, key in g["desc"]:
        m = rx.match(s)
        if m:
            by_inner.setdefault(m.group("S").strip(), []).append(key)
    if not by_inner:
        return s, []
    inner = min(by_inner, key=len)
    base, chain = _unwind(inner, depth + 1)
    return base, [*chain, tuple(by_inner[inner])]


def _ask_keys(keys: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(keys))


@functools.lru_cache(maxsize=65536)
def parse_spec(question: str) -> QuestionSpec | None:
    """Parse a question of the world's grammar (``None`` for anything else)."""
    g = _grammar()
    if g is None:
        return None
    q = " ".join(question.split())
    cmp_keys: list[str] = []
    cmp_m: re.Match[str] | None = None
    cmp_dir = ""
    for rx, key, direction in g["compare"]:
        m = rx.match(q)
        if m and (cmp_m is None or m.group("A") == cmp_m.group("A")):
            cmp_m, cmp_dir = m, direction
            cmp_keys.append(key)
    if cmp_m is not None:
        return QuestionSpec("compare", cmp_m.group("A").strip(), [_ask_keys(cmp_keys)],
                            other=cmp_m.group("B").strip(), direction=cmp_dir)
    inter = [(m, k1, k2, etype) for rx, k1, k2, etype in g["intersect"] if (m := rx.match(q))]
    if inter:  # the reading with the shortest values ("Which person was born in X and ..." is not v2=person)
        m, k1, k2, etype = min(inter, key=lambda x: len(x[0].group("v1")) + len(x[0].group("v2")))
        return QuestionSpec("intersect", "", [(k1,), (k2,)], values=(m.group("v1").strip(), m.group("v2").strip()),
                            etype=etype)
    yn: dict[tuple[str, str], list[str]] = {}
    for rx, key in g["yesno"]:
        m = rx.match(q)
        if m:
            yn.setdefault((m.group("S").strip(), m.group("O").strip()), []).append(key)
    if yn:
        (s, o), keys = min(yn.items(), key=lambda kv: len(kv[0][0]))
        base, chain = _unwind(s)
        return QuestionSpec("yesno", base, [*chain, _ask_keys(keys)], obj=o)
    asked: dict[str, list[str]] = {}
    for rx, key in g["ask"]:
        m = rx.match(q)
        if m:
            asked.setdefault(m.group("S").strip(), []).append(key)
    if not asked:
        return None
    subject = min(asked, key=len)
    base, chain = _unwind(subject)
    return QuestionSpec("ask", base, [*chain, _ask_keys(asked[subject])])


@functools.lru_cache(maxsize=1)
def relation_info() -> dict:
    """``key -> Relation`` of the world schema (empty when unavailable)."""
    try:
        from searchgym.data.world.schema import REL
    except ImportError:  # pragma: no cover
        return {}
    return dict(REL)


def relation_noun(key: str) -> str:
    r = relation_info().get(key)
    return r.noun if r is not None else key.split(".")[-1].replace("_", " ")


@functools.lru_cache(maxsize=256)
def relation_terms(key: str, limit: int = 4) -> tuple[str, ...]:
    """Words the corpus uses to state a relation (from its sentence patterns), most frequent first."""
    r = relation_info().get(key)
    if r is None:
        return tuple(relation_noun(key).split())
    counts: dict[str, int] = {}
    for pat in r.patterns:
        for w in words(re.sub(r"\{\w+\}", " ", pat)):
            lw = w.lower()
            if lw in STOPWORDS or lw in WH_WORDS or len(lw) < 3:
                continue
            counts[lw] = counts.get(lw, 0) + 1
    return tuple(sorted(counts, key=lambda w: -counts[w])[:limit])
