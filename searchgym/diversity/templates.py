"""Query -> template at several levels of abstraction (literature §6.1). Deterministic, pure Python.

Levels (each coarser than the one before, except ``semantic`` which is orthogonal):

``string``  the normalised query: NFKC, lowercase, apostrophes dropped, other punctuation -> space,
            whitespace collapsed.
``slot``    entity spans masked into typed slots. Spans come from (longest match first) the known titles
            (corpus titles given to ``Templater``), the retrieved titles of the episode, and spans of the
            question (capitalised runs and quoted strings of the question). Typed slots <PER>/<ORG>/<LOC>/
            <WORK> when ``entity_types`` names the title's type, else <E>. Quoted strings -> <Q>,
            dates (month names, ISO dates, years 1000-2099) -> <DATE>, other numbers -> <NUM>.
            Capitalised runs inside the query itself (not at its start) also count as entities.
``content`` the slot template with every remaining content word (NOUN, PROPN, ADJ, VERB, ADV, NUM)
            replaced by its part-of-speech tag; function words, wh-words, operators and slots stay.
``pos``     the part-of-speech shape: one universal tag per token of the slot template (slots read as
            PROPN, <NUM>/<DATE> as NUM).
``semantic`` a cluster id ``C<i>`` from sentence embeddings (threshold clustering), see ``SemanticClusterer``.

Examples (``Templater(titles=["Barack Obama", "Hawaii"], entity_types={"Barack Obama": "PER"})``)::

    "When was Barack Obama born?"        string  -> "when was barack obama born"
                                         slot    -> "when was <PER> born"
                                         content -> "when was <PER> VERB"
                                         pos     -> "ADV AUX PROPN VERB"
    "barack obama birth place 1961"      slot    -> "<PER> birth place <DATE>"
                                         content -> "<PER> NOUN NOUN <DATE>"
    "population of Hawaii in 2010"       slot    -> "population of <E> in <DATE>"
                                         pos     -> "NOUN ADP PROPN ADP NUM"

The part-of-speech tagger is a small deterministic one (closed-class word lists, a few hundred common
verbs, suffix rules, capitalisation and the title index). It is not a statistical tagger; it only needs
to be consistent, so that two queries of one form get one shape.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from searchgym.errors import ConfigError

LEVELS = ("string", "slot", "content", "pos", "semantic")
TEXT_LEVELS = ("string", "slot", "content", "pos")
SLOT_TYPES = ("PER", "ORG", "LOC", "WORK", "E", "NUM", "DATE", "Q")

_APOS = re.compile(r"['\u2019\u2018`]")
_PUNCT = re.compile(r"[^\w\s<>]|_")
_PUNCT_STRICT = re.compile(r"[^\w\s]|_")
_WS = re.compile(r"\s+")
_QUOTED = re.compile(r"\"([^\"]{1,200})\"|\u201c([^\u201d]{1,200})\u201d")
_ISO_DATE = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*(?:st|nd|rd|th|s)?$")
_YEAR = re.compile(r"^(1\d{3}|20\d{2})s?$")
_CAPRUN_SRC = r"\b([A-Z][\w\-]*(?:\s+(?:(?:of|the|de|la|von|van|and|&)\s+)?(?:[A-Z][\w\-]*|\d+\b))*)"
# Every uppercase letter, not only A-Z: "Émile Zola" and "Île-de-France" are one name each.
_UPPER = "".join(re.escape(chr(c)) for c in range(0x10000) if chr(c).isupper() and not chr(c).isascii())
_CAPRUN = re.compile(_CAPRUN_SRC.replace("[A-Z]", f"[A-Z{_UPPER}]"))
# The ASCII pattern: identical matches on printable ASCII text (where Unicode \w, \s, \d and \b reduce
# to their ASCII sets), and cheaper.
_CAPRUN_ASCII = re.compile(_CAPRUN_SRC, re.ASCII)
_SEPARATORS = re.compile(r"[\x1c-\x1f\x85]")
# Chinese, Japanese and Korean text is cut into characters (character unigrams) rather than by a segmenter:
# deterministic, no model or dictionary, the same on every machine, and enough for what the analysis asks
# of a token (is it in the question, in the evidence, in another query). A query made of fragments of its
# question ("环磷酰胺 不良反应" for "环磷酰胺的主要不良反应是") then has every token in the question.
CJK_TOKENS = "character unigrams (Han, kana, Hangul)"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u31f0-\u31ff]")



def _words(s: str) -> list[str]:
    return s.split()


MONTHS = frozenset(_words("january february march april may june july august september october november december "
                   "jan feb mar apr jun jul aug sep sept oct nov dec"))

# -- closed-class lexicon (universal POS) -----------------------------------------------------
_LEX: dict[str, str] = {}
for _tag, _wlist in {
    "DET": "a an the this that these those each every some any no all both either neither another such",
    "PRON": "i me my mine we us our ours you your yours he him his she her hers it its they them their theirs "
            "who whom whose what which whoever whatever whichever myself yourself himself herself itself "
            "ourselves themselves one something anything nothing someone anyone everyone",
    "ADV": "when where why how whence whither wherever whenever however not never also very too so just "
           "only still even ever already yet again often always sometimes usually then there here now "
           "first last most more less least much else",
    "AUX": "is are was were be been being am do does did done has have had having will would shall should "
           "can could may might must",
    "ADP": "of in on at by for with about against between into through during before after above below to "
           "from up down out off over under within without along across behind beyond near since until "
           "upon via per than like among amongst around toward towards onto despite inside outside",
    "CCONJ": "and or but nor plus",
    "SCONJ": "if because although though while whether unless that as",
    "PART": "s n't",
    "NUM": "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
           "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
           "hundred thousand million billion first second third fourth fifth",
}.items():
    for _w in _wlist.split():
        _LEX.setdefault(_w, _tag)
_LEX["that"] = "DET"
_LEX["one"] = "NUM"
_LEX["first"] = "ADJ"
_LEX["last"] = "ADJ"

_VERBS = frozenset(_words("""
born died die dies wrote write writes written directed direct directs founded found founds located locate
married marry marries won win wins lost lose loses played play plays sang sing sings starred star stars
produced produce produces released release releases invented invent invents discovered discover discovers
built build builds created create creates made make makes held hold holds led lead leads ruled rule rules
owned own owns signed sign signs joined join joins left leave leaves came come comes became become becomes
went go goes got get gets gave give gives took take takes said say says named name named called call calls
known know knows based base bases began begin begins started start starts ended end ends published publish
publishes composed compose composes painted paint paints designed design designs developed develop develops
elected elect serve served serves worked work works lived live lives studied study studies taught teach
teaches attended attend attends graduated graduate graduates located situated headquartered acquired acquire
acquires merged merge merges hosted host hosts used use uses flows flow flowed borders border bordered
contains contain contained includes include included features feature featured performed perform performs
recorded record records appeared appear appears portrayed portray portrays voiced voice voices coached coach
coaches managed manage manages tell find search look list show compare
"""))

_STOP = frozenset(w for w, t in _LEX.items() if t in {"DET", "PRON", "ADV", "AUX", "ADP", "CCONJ", "SCONJ", "PART"}
                  or w in {"one"}) - {"first", "last", "most", "more", "less", "least", "much"}
# Words that stay verbatim at the content level: function words, wh-words and search operators.
_KEEP = _STOP | frozenset({"site", "intitle", "inurl", "filetype", "or", "and", "not", "vs", "versus"})

_SUFFIX_RULES: tuple[tuple[str, str], ...] = (
    ("ly", "ADV"), ("ing", "VERB"), ("ed", "VERB"), ("ize", "VERB"), ("ise", "VERB"), ("ify", "VERB"),
    ("tion", "NOUN"), ("sion", "NOUN"), ("ment", "NOUN"), ("ness", "NOUN"), ("ity", "NOUN"), ("ism", "NOUN"),
    ("ist", "NOUN"), ("ship", "NOUN"), ("ance", "NOUN"), ("ence", "NOUN"), ("hood", "NOUN"), ("age", "NOUN"),
    ("ous", "ADJ"), ("ful", "ADJ"), ("ive", "ADJ"), ("able", "ADJ"), ("ible", "ADJ"), ("ical", "ADJ"),
    ("ic", "ADJ"), ("less", "ADJ"), ("ish", "ADJ"), ("ian", "ADJ"), ("ese", "ADJ"), ("est", "ADJ"),
    ("al", "ADJ"),
)
_SUFFIX_BY_LEN: tuple[tuple[int, dict[str, int]], ...] = tuple(
    (k, {suf: i for i, (suf, _) in enumerate(_SUFFIX_RULES) if len(suf) == k})
    for k in sorted({len(suf) for suf, _ in _SUFFIX_RULES}))
_SLOT_POS = {"NUM": "NUM", "DATE": "NUM"}
_MARK = "xslotx"
_DISAMBIG = re.compile(r"\s*\([^)]*\)\s*$")


def _ascii_table(punct: re.Pattern) -> tuple[bytes, bytes]:
    """bytes.translate (table, deletions) doing ``_APOS.sub('')`` then ``punct.sub(' ')`` on ASCII text
    in one C pass. Built by asking the regexes themselves about each ASCII character, so the two paths
    agree exactly."""
    table, delete = bytearray(range(256)), bytearray()
    for i in range(128):
        ch = chr(i)
        if _APOS.fullmatch(ch):
            delete.append(i)
        elif punct.fullmatch(ch):
            table[i] = ord(" ")
    return bytes(table), bytes(delete)


_NORM_TABLE = _ascii_table(_PUNCT_STRICT)
_SLOT_TABLE = _ascii_table(_PUNCT)


def _translate_ascii(text: str, table: tuple[bytes, bytes]) -> str:
    return text.encode("ascii").translate(*table).decode("ascii")


@lru_cache(maxsize=1 << 17)
def normalize(text: str) -> str:
    """Lowercase, drop apostrophes, punctuation -> space, collapse whitespace (the ``string`` level)."""
    if not text:
        return ""
    if text.isascii():  # NFKC is the identity on ASCII; \s+ collapse + strip == split/join
        return " ".join(_translate_ascii(text.lower(), _NORM_TABLE).split())
    text = unicodedata.normalize("NFKC", text).lower()
    text = _APOS.sub("", text)
    text = _PUNCT_STRICT.sub(" ", text)
    if _CJK.search(text):  # scripts without spaces between words: one token per character (see CJK_TOKENS)
        text = _CJK.sub(r" \g<0> ", text)
    return _WS.sub(" ", text).strip()


def tokens(text: str) -> list[str]:
    """Normalised whitespace tokens."""
    return normalize(text).split()


def content_terms(text: str) -> list[str]:
    """Normalised tokens minus stop/function words (falls back to all tokens if none are left)."""
    return list(_content_terms(text))


@lru_cache(maxsize=1 << 17)
def _content_terms(text: str) -> tuple[str, ...]:
    toks = tokens(text)
    kept = [t for t in toks if t not in _STOP]
    return tuple(kept or toks)


@lru_cache(maxsize=65536)
def word_pos(word: str, capitalised: bool = False) -> str:
    """Universal POS tag of one normalised word (deterministic rules; see module docstring)."""
    tag = _LEX.get(word)
    if tag is not None:
        return tag
    if _is_number(word) or word in MONTHS:
        return "NUM"
    if word in _VERBS:
        return "VERB"
    if capitalised:
        return "PROPN"
    if len(word) > 4 or word.endswith("ly"):
        # = the first rule of _SUFFIX_RULES whose suffix ends the word with >2 characters before it,
        # found with one dict lookup per suffix length instead of a scan of every rule
        best = None
        n = len(word)
        for k, table in _SUFFIX_BY_LEN:
            if n > k + 2:
                hit = table.get(word[-k:])
                if hit is not None and (best is None or hit < best):
                    best = hit
        if best is not None:
            return _SUFFIX_RULES[best][1]
    return "NOUN"


def _is_number(t: str) -> bool:
    """``_NUMBER.match(t)``, skipping the regex when t cannot start with a digit (\\d = category Nd)."""
    return t[:1].isdecimal() and _NUMBER.match(t) is not None


def _mark(text: str, spans: list[tuple[int, int, str]]) -> str:
    """Replace char spans of ``text`` by word-character markers ``xslotx<slot>`` (overlaps are dropped)."""
    out, last = [], 0
    for s, e, slot in sorted(spans):
        if s < last:
            continue
        out.append(text[last:s])
        out.append(f" {_MARK}{slot.lower()} ")
        last = e
    out.append(text[last:])
    return "".join(out)


class _SpanIndex:
    """Longest-match lookup of known multi-word names over normalised token sequences.

    ``starts`` holds the first token of every name: a token not in it starts no name (one set lookup,
    the common case, instead of probing ``full`` and ``prefixes``).
    """

    __slots__ = ("by_start", "full", "prefixes", "starts")

    def __init__(self) -> None:
        self.full: dict[str, str] = {}
        self.prefixes: set[str] = set()
        self.starts: set[str] = set()
        self.by_start: dict[str, list[str]] = {}  # first token -> names (keys of ``full``) it starts

    def _add_key(self, key: str, first: str, slot: str) -> None:
        if key not in self.full:
            self.full[key] = slot
            self.by_start.setdefault(first, []).append(key)
        self.starts.add(first)

    def add(self, name: str, slot: str = "E") -> None:
        for key, prefixes in _name_entries(name):
            if prefixes:
                self.prefixes.update(prefixes)
                self._add_key(key, prefixes[0], slot)
            else:
                self._add_key(key, key, slot)

    def signature(self, toks: Sequence[str], limit: int = 64) -> tuple[tuple[str, str], ...] | None:
        """The names of this index that a slot pass over ``toks`` can match, with their slots: two indexes
        with one signature give ``toks`` one slot template. None when more than ``limit`` names apply (the
        caller then does not memoise: a key never grows with the index)."""
        out: list[tuple[str, str]] = []
        by_start, full = self.by_start, self.full
        for t in dict.fromkeys(toks):
            names = by_start.get(t)
            if names:
                if len(out) + len(names) > limit:
                    return None
                out.extend((k, full[k]) for k in names)
        return tuple(out)

    def add_normalized(self, key: str, slot: str = "E") -> None:
        """``add`` for a name that is an ASCII output of ``normalize``: such a name is its own normal form
        and has no '(disambiguation)', so its one entry is (key, its proper prefixes), unless it is made
        only of function words (then nothing, as in ``_name_entries``)."""
        ws = key.split()
        if not ws or _LEX_WORDS.issuperset(ws):
            return
        self._add_key(key, ws[0], slot)
        if len(ws) > 1:
            prefixes = self.prefixes
            k = ws[0]
            prefixes.add(k)
            for w in ws[1:-1]:
                k = k + " " + w
                prefixes.add(k)

    def copy(self) -> _SpanIndex:
        new = _SpanIndex()
        new.full = self.full.copy()
        new.prefixes = self.prefixes.copy()
        new.starts = self.starts.copy()
        new.by_start = {k: list(v) for k, v in self.by_start.items()}
        return new

    def __len__(self) -> int:
        return len(self.full)

    def match(self, toks: Sequence[str], i: int) -> tuple[int, str] | None:
        """Longest name starting at token i: (end index, slot) or None."""
        best = None
        key = ""
        full, prefixes = self.full, self.prefixes
        for j in range(i, len(toks)):
            key = toks[j] if j == i else key + " " + toks[j]
            slot = full.get(key)
            if slot is not None:
                best = (j + 1, slot)
            if key not in prefixes:
                break
        return best


@lru_cache(maxsize=1 << 17)
def _name_entries(name: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(normalised key, its proper prefixes) for a name and its form without a '(disambiguation)'."""
    out = []
    base = _DISAMBIG.sub("", name) if "(" in name else name  # the pattern needs a "("
    forms = [name, base] if base != name and base.strip() else [name]  # "Ravenhill (novel)" -> "Ravenhill"
    for form in forms:
        toks = normalize(form).split()
        if not toks or all(t in _STOP or t in _LEX for t in toks):
            continue  # a name made only of function words would mask ordinary text
        out.append((" ".join(toks), tuple(" ".join(toks[:i]) for i in range(1, len(toks)))))
    return tuple(out)


_TYPE_ALIASES = {
    "PER": "PER", "PERSON": "PER", "PEOPLE": "PER", "HUMAN": "PER",
    "ORG": "ORG", "ORGANIZATION": "ORG", "ORGANISATION": "ORG", "COMPANY": "ORG", "BAND": "ORG", "TEAM": "ORG",
    "LOC": "LOC", "LOCATION": "LOC", "PLACE": "LOC", "GPE": "LOC", "CITY": "LOC", "COUNTRY": "LOC",
    "WORK": "WORK", "WORK_OF_ART": "WORK", "FILM": "WORK", "BOOK": "WORK", "ALBUM": "WORK", "SONG": "WORK",
}


def slot_type(kind: str | None) -> str:
    """Map a free-form entity type ('person', 'city', 'film', ...) to a slot name (default E)."""
    if not kind:
        return "E"
    return _TYPE_ALIASES.get(str(kind).upper(), "E")


class Templater:
    """Maps queries to templates; precompiles the title index once (use one per run / tracker).

    ``titles``: known entity names (corpus titles). ``entity_types``: optional ``{title: type}`` used for
    typed slots (types like PER/person/city/film are mapped to PER/ORG/LOC/WORK, else E).
    """

    def __init__(self, titles: Iterable[str] = (), *, entity_types: Mapping[str, str] | None = None,
                 cache_size: int = 4096):
        self.entity_types = dict(entity_types or {})
        self._index = _SpanIndex()
        self._cache_size = cache_size
        for name, kind in self.entity_types.items():
            self._index.add(name, slot_type(kind))
        for t in titles:
            self._index.add(t, slot_type(self.entity_types.get(t)))
        self._q_cache: dict[str, _SpanIndex] = {}
        self._t_cache: dict[tuple[str, ...], _SpanIndex] = {}
        # Memo of slot passes, keyed by (query, question, the names of the retrieved-titles index that the
        # query can match): never by the titles themselves, whose list grows with an episode (a key that
        # grows with the episode made memory quadratic in episode length).
        self._memo: dict[tuple[str, str | None, tuple[tuple[str, str], ...]], list] = {}

    # -- context (question spans + retrieved titles), cached ---------------------------------------
    def _question_index(self, question: str | None) -> _SpanIndex | None:
        if not question:
            return None
        idx = self._q_cache.get(question)
        if idx is None:
            idx = _SpanIndex()
            types = self.entity_types
            for span in question_spans(question):
                slot = slot_type(types.get(span)) if types else "E"
                if span.isascii() and "(" not in span:
                    idx.add_normalized(normalize(span), slot)  # = idx.add(span, slot) for such a span
                else:
                    idx.add(span, slot)
            if len(self._q_cache) >= self._cache_size:
                self._q_cache.clear()
            self._q_cache[question] = idx
        return idx

    def _titles_index(self, titles: tuple[str, ...]) -> _SpanIndex | None:
        """An index of ``titles`` for callers that pass them whole (bounded cache of a few recent lists).
        ``label_episodes`` instead grows one ``titles_context()`` per episode in place."""
        if not titles:
            return None
        idx = self._t_cache.get(titles)
        if idx is None:
            idx = self.titles_context()
            for t in titles:
                self.add_title(idx, t)
            if len(self._t_cache) >= 16:
                self._t_cache.clear()
            self._t_cache[titles] = idx
        return idx

    @staticmethod
    def titles_context() -> _SpanIndex:
        """An empty, growable index of an episode's retrieved titles (``add_title``, ``entry_in``)."""
        return _SpanIndex()

    def add_title(self, ctx: _SpanIndex, title: str) -> None:
        """Add one retrieved title to an episode's titles context, in place."""
        ctx.add(title, slot_type(self.entity_types.get(title)))

    # -- levels -----------------------------------------------------------------------------------
    def slot_tokens(self, query: str, *, question: str | None = None,
                    retrieved_titles: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(token, pos) pairs of the slot template; slot tokens are '<TYPE>' with pos PROPN/NUM."""
        return self._entry(query, question, retrieved_titles)[0]

    def _entry(self, query: str, question: str | None, retrieved_titles: Iterable[str]) -> list[Any]:
        """Memo entry ``[slot pairs, slot string, content string, pos string]`` (strings filled lazily)."""
        rt = retrieved_titles if type(retrieved_titles) is tuple else tuple(retrieved_titles or ())
        return self.entry_in(query, question, self._titles_index(rt))

    def entry_in(self, query: str, question: str | None, titles_ctx: _SpanIndex | None) -> list[Any]:
        """``_entry`` with the retrieved titles given as a titles context (see ``titles_context``)."""
        sig: tuple[tuple[str, str], ...] | None = ()
        if titles_ctx is not None and titles_ctx.full:
            sig = titles_ctx.signature(_prepare(query)[0])
        else:
            titles_ctx = None
        if sig is None:  # too many names apply to memoise on them: compute (rare, bounded work)
            return [self._slot_tokens(query, (self._index, self._question_index(question), titles_ctx)),
                    None, None, None]
        key = (query, question, sig)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        pairs = self._slot_tokens(query, (self._index, self._question_index(question), titles_ctx))
        if len(self._memo) >= 16 * self._cache_size:
            self._memo.clear()
        entry = self._memo[key] = [pairs, None, None, None]
        return entry

    def _slot_tokens(self, query: str, indices: tuple[_SpanIndex | None, ...]) -> list[tuple[str, str]]:
        toks, infos, marked, cap_idx = _prepare(query)
        active = [idx for idx in indices if idx is not None and idx.full]
        if cap_idx is not None:
            active.append(cap_idx)
        out: list[tuple[str, str]] = []
        i, n = 0, len(toks)
        while i < n:
            t = toks[i]
            if marked and t.startswith(_MARK):
                slot = t[len(_MARK):].upper()
                out.append((f"<{slot}>", _SLOT_POS.get(slot, "PROPN")))
                i += 1
                continue
            is_num, is_month, is_year, pos = infos[i]
            best = _longest_name(active, toks, i) if active else None
            # a lone month/year/number name is a date/number, not a title
            if best is not None and not (best[0] == i + 1 and (is_num or is_month)):
                out.append((_SLOT_TOKEN.get(best[1]) or f"<{best[1]}>", "PROPN"))
                i = best[0]
                continue
            j = _date_end(toks, infos, i)
            if j is not None:
                out.append(("<DATE>", "NUM"))
                i = j
                continue
            out.append((("<DATE>" if is_year else "<NUM>"), "NUM") if is_num else (t, pos))
            i += 1
        return _merge_adjacent_slots(out)

    def template(self, query: str, level: str = "slot", *, question: str | None = None,
                 retrieved_titles: Iterable[str] = ()) -> str:
        """The template of ``query`` at ``level`` (one of string, slot, content, pos)."""
        if level == "string":
            return normalize(query)
        if level not in TEXT_LEVELS:
            if level == "semantic":
                raise ConfigError("the 'semantic' level needs embeddings: use SemanticClusterer (or "
                                  "DiversityTracker(levels=(..., 'semantic'))) rather than Templater.template")
            raise ConfigError(f"unknown template level {level!r}; choose from {', '.join(LEVELS)}")
        return self._level(self._entry(query, question, retrieved_titles), _LEVEL_SLOT[level])

    @staticmethod
    def _level(entry: list, i: int) -> str:
        s = entry[i]
        if s is None:
            st = entry[0]
            if i == 1:
                s = " ".join([t for t, _ in st])
            elif i == 2:
                s = " ".join([t if (t[:1] == "<" or t in _KEEP) else p for t, p in st])
            else:
                s = " ".join([p for _, p in st])
            entry[i] = s
        return s

    def templates(self, query: str, levels: Iterable[str] = TEXT_LEVELS, *, question: str | None = None,
                  retrieved_titles: Iterable[str] = ()) -> dict[str, str]:
        """Templates of one query at several text levels, sharing the slot pass."""
        out: dict[str, str] = {}
        entry = None
        for level in levels:
            if level == "string":
                out[level] = normalize(query)
                continue
            i = _LEVEL_SLOT.get(level)
            if i is None:
                raise ConfigError(f"Templater.templates handles {TEXT_LEVELS}, not {level!r}")
            if entry is None:
                entry = self._entry(query, question, retrieved_titles)
            out[level] = self._level(entry, i)
        return out


_LEVEL_SLOT = {"slot": 1, "content": 2, "pos": 3}


def question_spans(question: str) -> list[str]:
    """Entity-like spans of a question: quoted strings and capitalised runs, minus a sentence-initial
    function word ('Who', 'The'). The question's first word is capitalised because it starts the sentence:
    alone it is no name ('Tell me ...', 'Ravenhill was ...' lose it), and a common word ('Name', 'List')
    is dropped from the front of a longer run."""
    spans: list[str] = []
    if '"' in question or "\u201c" in question:  # (_QUOTED needs one of them)
        for m in _QUOTED.finditer(question):
            spans.append(m.group(1) or m.group(2))
    lead = len(question) - len(question.lstrip())
    for start, run, span in _cap_runs(question):
        if not span:
            continue
        if start == lead and span == run.strip():  # the run opens the question with a capital
            words = span.split()
            if len(words) == 1:
                continue
            if words[0].lower() in _VERBS or words[0].lower() in _LEX:
                span = " ".join(words[1:])
        spans.append(span)
    return spans


def _caprun_pattern(text: str) -> re.Pattern:
    """The capitalised-run pattern for ``text``: ASCII text without the separators \\x1c-\\x1f (Unicode
    \\s, not ASCII \\s) matches the same either way, and the ASCII pattern is cheaper."""
    return _CAPRUN_ASCII if text.isascii() and (text.isprintable() or not _SEPARATORS.search(text)) else _CAPRUN


@lru_cache(maxsize=1 << 16)
def _cap_runs(text: str) -> tuple[tuple[int, str, str | None], ...]:
    """(start, run, ``_entity_run(run)``) of each capitalised run of a text; shared by the question
    spans and the query's own capitalised runs (an agent's first query often is the question)."""
    pat = _caprun_pattern(text)
    return tuple((m.start(), r, _entity_run(r)) for m in pat.finditer(text) for r in (m.group(1),))


@lru_cache(maxsize=1 << 16)
def _cap_spans(raw: str) -> tuple[str, ...]:
    """Normalised capitalised runs of a query, except a lone capitalised first word."""
    caps: list[str] = []
    for start, run, span in _cap_runs(raw):
        if start == 0 and " " not in run.strip():
            continue  # a capitalised first word is usually just the start of a sentence
        if span:
            caps.append(normalize(span))
    return tuple(dict.fromkeys(caps))


def _entity_run(run: str) -> str | None:
    """A capitalised run minus leading function words; None for dates ('May 5 1990') and empty runs."""
    words = run.split()
    while words and words[0].lower() in _LEX:
        words = words[1:]
    if not words or words[0].lower() in MONTHS or words[0].isdigit():
        return None
    return " ".join(words)


_SLOT_TOKEN = {t: f"<{t}>" for t in SLOT_TYPES}
_LEX_WORDS = frozenset(_LEX)
_TOK_INFO: dict[str, tuple[bool, bool, bool, str]] = {}
_TOK_INFO_GET = _TOK_INFO.get


def _tok_info(t: str) -> tuple[bool, bool, bool, str]:
    """(is a number, is a month name, is a year, POS) of one slot-pass token, cached."""
    info = _TOK_INFO.get(t)
    if info is None:
        info = (_is_number(t), t in MONTHS, t[:1] in ("1", "2") and _YEAR.match(t) is not None, word_pos(t))
        if len(_TOK_INFO) >= 1 << 17:
            _TOK_INFO.clear()
        _TOK_INFO[t] = info
    return info


@lru_cache(maxsize=1 << 14)  # entries hold a small index each; queries rarely recur beyond a step
def _prepare(query: str) -> tuple[tuple[str, ...], tuple[tuple[bool, bool, bool, str], ...], bool,
                                  _SpanIndex | None]:
    """The context-free part of the slot pass, cached per raw query: its tokens (quoted strings and
    ISO dates already replaced by markers), their token info, whether markers are present, and the
    index of the query's own capitalised runs (None when it has none)."""
    raw = query or ""
    if not raw.isascii():
        raw = unicodedata.normalize("NFKC", raw)
    spans: list[tuple[int, int, str]] = []
    if '"' in raw or "\u201c" in raw:
        for m in _QUOTED.finditer(raw):
            spans.append((m.start(), m.end(), "Q"))
    if "-" in raw or "/" in raw:
        for m in _ISO_DATE.finditer(raw):
            spans.append((m.start(), m.end(), "DATE"))
    # capitalised runs inside the query (not the first word) are entities too
    caps = _cap_spans(raw) if not raw.islower() else ()
    text = (_mark(raw, spans) if spans else raw).lower()
    if text.isascii():
        text = _translate_ascii(text, _SLOT_TABLE)
    else:
        text = _PUNCT.sub(" ", _APOS.sub("", text))
    toks = tuple(text.split())
    infos = tuple(map(_TOK_INFO_GET, toks))
    if None in infos:
        infos = tuple(_tok_info(t) for t in toks)
    cap_idx = None
    if caps:
        cap_idx = _SpanIndex()
        for c in caps:
            if c.isascii():
                cap_idx.add_normalized(c, "E")
            else:
                cap_idx.add(c, "E")
    return toks, infos, bool(spans), cap_idx


_DEFAULT = Templater()


def query_template(query: str, level: str = "slot", *, question: str | None = None, titles: Iterable[str] = (),
                   retrieved_titles: Iterable[str] = ()) -> str:
    """Template of one query. For many queries build one ``Templater(titles=...)`` and reuse it."""
    titles = tuple(titles)
    tp = Templater(titles) if titles else _DEFAULT
    return tp.template(query, level, question=question, retrieved_titles=retrieved_titles)


def _longest_name(active: list[_SpanIndex], toks: Sequence[str], i: int) -> tuple[int, str] | None:
    """(end, slot) of the longest name in any of the ``active`` indexes that starts at token ``i``."""
    best = None
    for idx in active:
        if toks[i] not in idx.starts:
            continue  # no name starts with this token (the common case)
        m = idx.match(toks, i)
        if m is not None and (best is None or m[0] > best[0]):
            best = m
    return best


def _date_end(toks: Sequence[str], infos: Sequence[Any], i: int) -> int | None:
    """Where a date that starts at token ``i`` ends (month [day] [year] | day month [year]); None: no date
    starts there (a lone number or year is left to the caller)."""
    n = len(toks)
    t = toks[i]
    is_num, is_month = infos[i][0], infos[i][1]
    if is_month and t != "may" or (t == "may" and i + 1 < n and infos[i + 1][0]):
        j = i + 1
        while j < n and j <= i + 2 and infos[j][0]:
            j += 1
        return j
    if is_num and i + 1 < n and infos[i + 1][1] and toks[i + 1] != "may":
        j = i + 2
        if j < n and infos[j][2]:
            j += 1
        return j
    return None


def _merge_adjacent_slots(out: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Collapse consecutive identical slots ("<E> <E>" from adjacent names -> one slot)."""
    merged: list[tuple[str, str]] = []
    for tok, pos in out:
        if merged and tok.startswith("<") and merged[-1][0] == tok:
            continue
        merged.append((tok, pos))
    return merged
