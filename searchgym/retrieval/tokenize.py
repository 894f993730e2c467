"""BM25 tokenisation: lowercase, a word regex, stopwords and optional Snowball stemming (PyStemmer).

Corpus tokenisation reuses ``bm25s.tokenize`` (fast, builds the vocabulary in one pass). Query
tokenisation is our own hot path: a per-word cache maps each surface word straight to its vocabulary
id (or to "skip" for stopwords and unknown words), so a repeated word costs one dict lookup.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from searchgym.errors import ConfigError
from searchgym.retrieval._bm25s import ensure_bm25s

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
# The only word patterns an index may name. A pattern is run on every query, so one read from a manifest
# (someone else's index directory) must not be able to backtrack catastrophically: these are all linear.
SAFE_PATTERNS = frozenset({
    TOKEN_PATTERN,          # bm25s / scikit-learn default: words of 2+ word characters
    r"(?u)\b\w+\b",        # words of 1+ word characters
    r"\w+",
    r"\w\w+",
    r"\S+",                 # whitespace-separated
    r"[^\W_]+",             # letters and digits, no underscores
})


def check_pattern(pattern: object) -> None:
    """Refuse a word pattern that is not in :data:`SAFE_PATTERNS` (an arbitrary regex, e.g. one read from someone
    else's manifest, can backtrack for seconds on every query)."""
    if not isinstance(pattern, str) or pattern not in SAFE_PATTERNS:
        raise ConfigError(f"tokenizer pattern {pattern!r:.120} is not one of searchgym's known safe patterns "
                          f"{sorted(SAFE_PATTERNS)}; refusing it (a hostile regex can hold every search)")


# A query with more distinct terms than this is cut (after de-duplication): it bounds the work of a
# pathological (e.g. 100 kB) query by the index size instead of by the query length.
MAX_QUERY_TERMS = 1024
_WORD_CACHE_LIMIT = 500_000


def stopword_list(stopwords: str | Sequence[str] | None) -> tuple[str, ...]:
    """Resolve a stopword setting: a language code known to bm25s ("en", "en_plus", "de", ...),
    an explicit list, or ``None`` to keep every word."""
    if stopwords is None or stopwords is False:
        return ()
    ensure_bm25s()
    from bm25s.tokenization import _infer_stopwords

    try:
        return tuple(_infer_stopwords(stopwords if isinstance(stopwords, str) else list(stopwords)))
    except ValueError as exc:
        raise ConfigError(f"unknown stopword list {stopwords!r}: {exc}") from None


@dataclass(frozen=True)
class TokenizerConfig:
    """Everything that decides how text becomes BM25 terms; stored in the index manifest."""

    lowercase: bool = True
    stopwords: str | tuple[str, ...] | None = "en"
    stemmer: str | None = None  # a PyStemmer algorithm name, e.g. "english"
    pattern: str = TOKEN_PATTERN
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if isinstance(self.stopwords, tuple):
            d["stopwords"] = list(self.stopwords)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TokenizerConfig:
        sw = d.get("stopwords", "en")
        pattern = d.get("pattern", TOKEN_PATTERN)
        check_pattern(pattern)
        return cls(
            lowercase=bool(d.get("lowercase", True)),
            stopwords=tuple(sw) if isinstance(sw, list) else sw,
            stemmer=d.get("stemmer"),
            pattern=pattern,
            extra=dict(d.get("extra", {})),
        )


def _make_stemmer(name: str | None):
    if name is None:
        return None
    try:
        import Stemmer
    except ImportError as exc:  # pragma: no cover - PyStemmer is a core dependency
        raise ConfigError("stemming needs PyStemmer: pip install PyStemmer") from exc
    try:
        return Stemmer.Stemmer(name)
    except KeyError:
        raise ConfigError(
            f"unknown stemmer {name!r}; choose one of {', '.join(Stemmer.algorithms())}"
        ) from None


class Tokenizer:
    """Turns text into BM25 terms.

    >>> Tokenizer(stopwords="en").tokenize("The Capital of France")
    ['capital', 'france']
    """

    def __init__(
        self,
        *,
        lowercase: bool = True,
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = None,
        pattern: str = TOKEN_PATTERN,
    ):
        sw: str | tuple[str, ...] | None = stopwords if isinstance(stopwords, str) or stopwords is None \
            else tuple(stopwords)
        check_pattern(pattern)
        self.config = TokenizerConfig(lowercase=lowercase, stopwords=sw, stemmer=stemmer, pattern=pattern)
        self.stopwords = frozenset(stopword_list(sw))
        self._stemmer = _make_stemmer(stemmer)
        self._split = re.compile(pattern).findall

    @classmethod
    def from_config(cls, config: TokenizerConfig | dict[str, Any]) -> Tokenizer:
        if isinstance(config, dict):
            config = TokenizerConfig.from_dict(config)
        return cls(lowercase=config.lowercase, stopwords=config.stopwords, stemmer=config.stemmer,
                   pattern=config.pattern)

    def words(self, text: str) -> list[str]:
        """Split (and lowercase) without removing stopwords or stemming."""
        return self._split(text.lower() if self.config.lowercase else text)

    def tokenize(self, text: str) -> list[str]:
        """The terms of one text, in order, repeats kept."""
        sw = self.stopwords
        words = [w for w in self.words(text) if w not in sw]
        if self._stemmer is not None:
            words = self._stemmer.stemWords(words)
        return words

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        return [self.tokenize(t) for t in texts]

    def corpus_ids(self, texts: Iterable[str], *, show_progress: bool = False) -> tuple[list[list[int]], dict[str, int]]:
        """Tokenise a corpus into term ids plus the vocabulary (term -> id), via ``bm25s.tokenize``."""
        ensure_bm25s()
        import bm25s

        tok = bm25s.tokenize(
            texts,  # any iterable: bm25s streams it
            lower=self.config.lowercase,
            token_pattern=self.config.pattern,
            stopwords=list(self.stopwords),
            stemmer=self._stemmer,
            return_ids=True,
            show_progress=show_progress,
        )
        return tok.ids, tok.vocab

    def query_encoder(self, vocab: dict[str, int]) -> QueryEncoder:
        return QueryEncoder(self, vocab)

    def has_terms(self, text: str) -> bool:
        """Whether ``text`` holds at least one non-stopword word (used for the empty-query rule)."""
        sw = self.stopwords
        return any(w not in sw for w in self.words(text))


class QueryEncoder:
    """Maps a query straight to the vocabulary ids of its known terms (the search hot path)."""

    __slots__ = ("_cache", "_tok", "_vocab", "max_terms")

    def __init__(self, tokenizer: Tokenizer, vocab: dict[str, int], *, max_terms: int = MAX_QUERY_TERMS):
        self._tok = tokenizer
        self._vocab = vocab
        self._cache: dict[str, int] = {}
        self.max_terms = max_terms

    def _lookup(self, word: str) -> int:
        tok = self._tok
        if word in tok.stopwords:
            tid = -1
        else:
            term = tok._stemmer.stemWord(word) if tok._stemmer is not None else word
            tid = self._vocab.get(term, -1) if term else -1  # bm25s' "" entry has no row of its own
        if len(self._cache) >= _WORD_CACHE_LIMIT:
            self._cache.clear()
        self._cache[word] = tid
        return tid

    def ids(self, query: str) -> list[int]:
        """Term ids of the query's known terms; repeats kept (BM25 counts them) unless the query is
        longer than ``max_terms``, in which case it is de-duplicated and cut."""
        cache = self._cache
        lookup = self._lookup
        out = []
        for w in self._tok.words(query):
            tid = cache.get(w)
            if tid is None:
                tid = lookup(w)
            if tid >= 0:
                out.append(tid)
        if len(out) > self.max_terms:
            out = list(dict.fromkeys(out))[: self.max_terms]
        return out
