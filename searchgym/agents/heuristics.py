"""Heuristic search agents: one named query strategy each, and ``diverse``, a weighted mix of them.

Each strategy decides what to search (the first query, then follow-ups after reading the results);
the shared :class:`~searchgym.agents.reader.Reader` decides when the passages answer the question and
what the answer is. Strategies:

============  =================================================================================
question      the full question, verbatim
keywords      the question without stopwords and wh-words
entity        the named entity plus the relation words ("Narrow Compass director"); a nickname
              subject ("the Amber Heron") is looked up in the alias passage first, then queried by name
rephrase      a declarative rephrase ("The director of Narrow Compass was born in")
decompose     one hop at a time: query the first hop, read the bridge entity from the passages,
              query the next hop with it
prf           pseudo-relevance feedback: keywords, then expanded with terms of the retrieved text
random        a random subset of the question's words (re-drawn while the answer is missing)
hops          the full question first, then decompose's hop queries for whatever is still missing; it
              follows a rename the passages state: a subject that a retrieved passage gives as someone's
              former name ("N was formerly known as O") is read as N
diverse       samples one of the above per episode, with weights (seeded)
============  =================================================================================

They are the SFT demonstrators, so actions look like a model's: a short ``<think>`` and then
``<search> ... </search>`` or ``<answer> ... </answer>``.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from searchgym.agents.analysis import (
    STOPWORDS,
    WH_WORDS,
    QuestionSpec,
    entity_spans,
    keywords,
    parse_spec,
    relation_info,
    relation_noun,
    relation_terms,
    words,
)
from searchgym.agents.base import (
    answer_action,
    batch_indices,
    infos_or_empty,
    is_new_episode,
    parse_information,
    parse_question,
    search_action,
)
from searchgym.agents.reader import Memory, Reader, base_title, resolve
from searchgym.errors import ConfigError

CONFIDENT = 0.99  # the reader's confidence at which an agent answers instead of searching on


@dataclass
class EpisodeState:
    question: str
    spec: QuestionSpec | None
    strategy: Strategy
    mem: Memory = field(default_factory=Memory)
    queries: list[str] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    done: bool = False
    budget: int = 4  # searches allowed this episode (the agent's cap and the env's max_turns)
    renamed: str | None = None  # the subject as the question gave it, once a strategy re-read it (hops)

    @property
    def searches(self) -> int:
        return len(self.queries)


# --------------------------------------------------------------------------------------------------
# Strategies


class Strategy:
    """A query strategy: ``first(st)`` and ``follow_up(st)`` (``None`` = answer now)."""

    name = "base"
    max_searches = 1

    def first(self, st: EpisodeState) -> tuple[str, str]:
        raise NotImplementedError

    def follow_up(self, st: EpisodeState) -> tuple[str, str] | None:
        return None

    def observe(self, st: EpisodeState) -> None:
        """Called after each search's passages are added to ``st.mem``, before the reader is asked: a strategy
        may re-read the question (``st.spec``) from what it found. Default: nothing."""


def _content(question: str) -> list[str]:
    return keywords(question.rstrip("?.! "))


class QuestionStrategy(Strategy):
    name = "question"

    def first(self, st: EpisodeState) -> tuple[str, str]:
        return st.question, "I will search for the question as it is."


class KeywordsStrategy(Strategy):
    name = "keywords"

    def first(self, st: EpisodeState) -> tuple[str, str]:
        return " ".join(_content(st.question)) or st.question, "Let me search for the key terms."


def _chain_nouns(spec: QuestionSpec) -> list[str]:
    nouns: list[str] = []
    for keys in spec.chain:
        n = relation_noun(keys[0])
        if n not in nouns:
            nouns.append(n)
    return nouns


_ALIAS_RX: list[re.Pattern[str]] | None = None


def _alias_patterns() -> list[re.Pattern[str]]:
    """The world's alias sentences as regexes with groups ``a`` (nickname) and ``N`` (name)."""
    global _ALIAS_RX
    if _ALIAS_RX is None:
        try:
            from searchgym.data.world.schema import ALIAS_PATTERNS
        except ImportError:  # pragma: no cover
            ALIAS_PATTERNS = ()
        out = []
        for pat in ALIAS_PATTERNS:
            rx = ""
            for part in re.split(r"(\{\w\})", pat):
                if part in ("{A}", "{a}"):
                    rx += r"(?P<a>[Tt]he [A-Z][\w'\-]*(?: [A-Z][\w'\-]*)*)"
                elif part == "{N}":
                    rx += r"(?P<N>[A-Z].+?)"
                else:
                    rx += re.escape(part)
            out.append(re.compile("^" + rx + "$"))
        _ALIAS_RX = out
    return _ALIAS_RX


def read_aliases(docs) -> dict[str, str]:
    """``nickname (lower-case, no leading 'the') -> name`` from the alias sentences of retrieved passages."""
    found: dict[str, str] = {}
    for d in docs:
        for rx in _alias_patterns():
            m = rx.match(d.text.strip())
            if m:
                found.setdefault(_alias_key(m.group("a")), m.group("N").strip())
                break
    return found


_RENAME_RX: list[re.Pattern[str]] | None = None


def read_renames(docs) -> dict[str, str]:
    """``former name (lower-case) -> name now`` from the former-name sentences of retrieved passages (world
    version 3: "N was formerly known as O.")."""
    global _RENAME_RX
    if _RENAME_RX is None:
        try:
            from searchgym.data.world.schema import RENAME_PATTERNS
        except ImportError:  # pragma: no cover
            RENAME_PATTERNS = ()
        _RENAME_RX = [re.compile("^" + "".join(
            {"{N}": r"(?P<N>[A-Z].*?)", "{O}": r"(?P<O>[A-Z].*?)"}.get(part, re.escape(part))
            for part in re.split(r"(\{\w\})", pat)) + "$") for pat in RENAME_PATTERNS]
    found: dict[str, str] = {}
    for d in docs:
        for rx in _RENAME_RX:
            m = rx.match(d.text.strip())
            if m:
                found.setdefault(" ".join(m.group("O").lower().split()), m.group("N").strip())
                break
    return found


def _alias_key(text: str) -> str:
    t = " ".join(text.lower().split())
    return t.removeprefix("the ")


class EntityStrategy(Strategy):
    """The named entity plus the relation words; a subject that is a nickname is looked up first.

    When the subject is not a name but a nickname that a retrieved alias passage resolves ("the Amber
    Heron is the nickname of X"), the episode's question is re-read with X as the subject and X is
    queried with the relation (one extra search). On questions that name their subject it is one search.
    """

    name = "entity"
    max_searches = 2

    def follow_up(self, st: EpisodeState) -> tuple[str, str] | None:
        spec = st.spec
        if spec is None or spec.kind not in ("ask", "yesno") or not spec.subject:
            return None
        if st.mem.lookup(spec.subject, spec.chain[0]) is not None:
            return None
        name = read_aliases(st.mem.docs).get(_alias_key(spec.subject))
        if name is None or name.lower() == spec.subject.lower():
            return None
        st.spec = replace(spec, subject=name)
        q = " ".join([name, *_chain_nouns(st.spec)])
        if q in st.queries:
            return None
        return q, f"{spec.subject} is what people call {name}; I search for {name}."

    def first(self, st: EpisodeState) -> tuple[str, str]:
        spec = st.spec
        if spec is not None and spec.kind == "intersect":
            return " ".join([*spec.values, *_chain_nouns(spec)]), "I will search for the two facts it must have."
        if spec is not None:
            ents = [spec.subject] + ([spec.other] if spec.other else []) + ([spec.obj] if spec.obj else [])
            q = " ".join(ents[:2] + _chain_nouns(spec))
            return q, f"The question is about {spec.subject}; I will search for it with the relation."
        ents = entity_spans(st.question)
        ent_words = {w.lower() for e in ents for w in e.split()}
        rel = [w for w in _content(st.question) if w.lower() not in ent_words]
        q = " ".join(ents + rel) or st.question
        return q, (f"The question is about {ents[0]}." if ents else "I will search for the main terms.")


def _desc_phrase(spec: QuestionSpec) -> str:
    """The question's subject phrase, rebuilt: ``the city where the director of X was born``."""
    rels = relation_info()
    phrase = spec.subject
    for keys in spec.chain[:-1]:
        r = rels.get(keys[0])
        if r is None or not r.desc:
            break
        phrase = r.desc.format(S=phrase)
    return phrase


def _declarative(pattern: str, subject: str, value: str = "") -> str:
    s = pattern.replace("{a_v}", "{v}").format(S=subject, s=subject, v=value, O=value, a_O=value)
    s = re.sub(r"\s+", " ", s).strip().rstrip(".").strip()
    return s[:1].upper() + s[1:]


_REPHRASE_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?:in )?(?:what|which) year (?:was|were|did) (.+?) (\w+)$", re.IGNORECASE), r"\1 \2 in the year"),
    (re.compile(r"^when (?:was|were|did) (.+?) (\w+)$", re.IGNORECASE), r"\1 \2 on the date"),
    (re.compile(r"^who (\w+) (.+)$", re.IGNORECASE), r"\2 was \1 by"),
    (re.compile(r"^where (?:was|were|is|are|did) (.+?) (\w+)$", re.IGNORECASE), r"\1 \2 in the place"),
    (re.compile(r"^how many (.+?) (?:does|do|did) (.+?) have$", re.IGNORECASE), r"\2 has a number of \1"),
    (re.compile(r"^(?:what|which) (?:is|was|are|were) the (.+?) of (.+)$", re.IGNORECASE), r"the \1 of \2 is"),
    (re.compile(r"^(?:is|was|are|were) (.+)$", re.IGNORECASE), r"\1"),
)


def rephrase_generic(question: str) -> str:
    q = question.strip().rstrip("?.! ")
    for rx, rep in _REPHRASE_RULES:
        if rx.match(q):
            out = rx.sub(rep, q)
            return out[:1].upper() + out[1:]
    return q


def _intersect_declarative(spec: QuestionSpec) -> str:
    try:
        from searchgym.data.world.schema import CLAUSE, TYPE_NOUN
    except ImportError:  # pragma: no cover
        return " ".join(spec.values)
    parts = []
    for keys, v in zip(spec.chain, spec.values):
        c = CLAUSE.get(keys[0], "{v}")
        parts.append(c.format(v=v, a_v=("an " if v[:1].lower() in "aeiou" else "a ") + v))
    noun = TYPE_NOUN.get(spec.etype or "", spec.etype or "one")
    return f"The {noun} {' and '.join(parts)}"


class RephraseStrategy(Strategy):
    name = "rephrase"

    def first(self, st: EpisodeState) -> tuple[str, str]:
        spec, rels = st.spec, relation_info()
        think = "I will search for a statement that would contain the answer."
        if spec is None:
            return rephrase_generic(st.question), think
        r = rels.get(spec.final[0])
        if r is None:
            return rephrase_generic(st.question), think
        if spec.kind == "yesno" and r.yn:
            return _declarative(r.yn[1], _desc_phrase(spec), spec.obj or ""), think
        if spec.kind == "intersect":
            return _intersect_declarative(spec), think
        if spec.kind == "compare" and r.cmp:
            return f"{spec.subject} {r.cmp[0]} than {spec.other}", think
        return _declarative(r.patterns[0], _desc_phrase(spec)), think


class DecomposeStrategy(Strategy):
    """One hop at a time; the bridge entity of each hop is read from the passages."""

    name = "decompose"
    max_searches = 4

    def _hop_query(self, entity: str, keys: tuple[str, ...]) -> str:
        return f"{entity} {relation_noun(keys[0])}"

    def first(self, st: EpisodeState) -> tuple[str, str]:
        spec = st.spec
        if spec is None:
            return " ".join(_content(st.question)) or st.question, "First I find the entity the question hinges on."
        if spec.kind == "intersect":
            return " ".join(spec.values), f"I need the one that matches both {spec.values[0]} and {spec.values[1]}."
        if spec.kind == "compare":
            return self._hop_query(spec.subject, spec.final), \
                f"I need the {relation_noun(spec.final[0])} of {spec.subject} and of {spec.other}."
        if len(spec.chain) > 1:
            return self._hop_query(spec.subject, spec.chain[0]), \
                f"First I need the {relation_noun(spec.chain[0][0])} of {spec.subject}."
        return self._hop_query(spec.subject, spec.chain[0]), \
            f"I need the {relation_noun(spec.chain[0][0])} of {spec.subject}."

    def follow_up(self, st: EpisodeState) -> tuple[str, str] | None:
        spec = st.spec
        if spec is None:
            return self._generic_follow_up(st)
        res = resolve(spec, st.mem)
        if spec.kind == "intersect":
            if res.value is not None:
                return None
            for name, missing in res.candidates:
                q = self._hop_query(name, spec.chain[missing])
                if q not in st.queries:
                    return q, f"{name} fits one condition; I check the other."
            (k1, k2), (v1, v2) = spec.chain, spec.values
            variants = [f"{v1} {' '.join(relation_terms(k1[0], 2))} {v2} {' '.join(relation_terms(k2[0], 2))}",
                        *(f"{v} {' '.join(relation_terms(k[0]))}" for k, v in zip(spec.chain, spec.values))]
            for q in variants:
                if q not in st.queries:
                    return q, "I search for both conditions with the words passages use."
            return None
        if spec.kind == "compare":
            a_known = st.mem.lookup(spec.subject, spec.final) is not None
            who = (spec.other if a_known else spec.subject) or ""
            for q in (self._hop_query(who, spec.final), f"{who} {' '.join(relation_terms(spec.final[0]))}", who):
                if q not in st.queries:
                    return q, f"Now the {relation_noun(spec.final[0])} of {who}."
            return None
        if res.value is not None or res.hop >= len(spec.chain):
            return None
        keys = spec.chain[res.hop]
        q = self._hop_query(res.entity, keys)
        if q in st.queries:  # the same hop again: use the words the corpus states this relation with
            q = f"{res.entity} {' '.join(relation_terms(keys[0]))}"
            if q in st.queries:
                q = res.entity
                if q in st.queries:
                    return None
        think = (f"The passages say it is {res.entity}. Next: the {relation_noun(spec.chain[res.hop][0])} "
                 f"of {res.entity}." if res.hop > 0 else
                 f"I still need the {relation_noun(spec.chain[res.hop][0])} of {res.entity}.")
        return q, think

    def _generic_follow_up(self, st: EpisodeState) -> tuple[str, str] | None:
        if st.searches >= 2:
            return None
        qlow = st.question.lower()
        cands: Counter[str] = Counter()
        for rank, d in enumerate(st.mem.docs[:5]):
            for span in entity_spans(d.text):
                if span.lower() not in qlow and span.lower() != base_title(d.title).lower():
                    cands[span] += 1.0 / (1 + rank)
        if not cands:
            return None
        bridge = cands.most_common(1)[0][0]
        rest = [w for w in _content(st.question) if w.lower() not in {x.lower() for e in
                                                                        entity_spans(st.question)
                                                                        for x in e.split()}]
        return f"{bridge} {' '.join(rest)}".strip(), f"The passages point to {bridge}; I search for it next."


class HopsStrategy(DecomposeStrategy):
    """The full question first, then one hop at a time (decompose's follow-ups) for what is missing.

    It follows a rename the passages state: when a retrieved passage says the question's subject is a former
    name of N ("N was formerly known as O", world version 3), the question is re-read about N (once), even
    if the subject's name has facts of its own. That solves questions asked by a retired name
    (``shift_renamed``), which ``decompose`` never resolves, and misleads on a name that another entity once
    bore (``shift_homonym``), which ``decompose`` answers in one hop. Nicknames are not renames: hops does not
    resolve them (``entity`` does). On a world without former names it acts as before.
    """

    name = "hops"

    def first(self, st: EpisodeState) -> tuple[str, str]:
        return st.question, "I will search for the question first, then follow the hops it needs."

    def follow_up(self, st: EpisodeState) -> tuple[str, str] | None:
        spec = st.spec
        if spec is not None and spec.kind == "intersect" and resolve(spec, st.mem).value is None:
            q, think = DecomposeStrategy.first(self, st)  # decompose's plan from its start: the two values
            if q not in st.queries:
                return q, think
        return super().follow_up(st)

    def observe(self, st: EpisodeState) -> None:
        spec = st.spec
        if st.renamed is not None or spec is None or spec.kind not in ("ask", "yesno") or not spec.subject:
            return
        name = read_renames(st.mem.docs).get(" ".join(spec.subject.lower().split()))
        if name is None or name.lower() == spec.subject.lower():
            return
        st.renamed = spec.subject
        st.spec = replace(spec, subject=name)


class PRFStrategy(Strategy):
    """Pseudo-relevance feedback: expand the keywords with frequent terms of the retrieved passages."""

    name = "prf"
    max_searches = 3
    expand = 4

    def first(self, st: EpisodeState) -> tuple[str, str]:
        return " ".join(_content(st.question)) or st.question, "Let me search for the key terms first."

    def follow_up(self, st: EpisodeState) -> tuple[str, str] | None:
        if st.searches >= self.max_searches:
            return None
        have = {w.lower() for q in st.queries for w in q.split()} | {w.lower() for w in words(st.question)}
        counts: Counter[str] = Counter()
        recent = st.mem.docs[-3 * 2:]
        for rank, d in enumerate(reversed(recent)):
            for w in words(base_title(d.title) + " " + d.text):
                lw = w.lower()
                if lw in have or lw in STOPWORDS or lw in WH_WORDS or len(lw) < 3 or lw.isdigit():
                    continue
                counts[w] += (2.0 if w[:1].isupper() else 1.0) / (1 + 0.5 * rank)
        terms = [w for w, _ in counts.most_common(self.expand)]
        if not terms:
            return None
        q = " ".join(_content(st.question) + terms)
        return q, f"The results mention {', '.join(terms[:2])}; I add them to the query."


class RandomStrategy(Strategy):
    """A random subset of the question's words, re-drawn while the answer is still missing."""

    name = "random"
    max_searches = 2

    def _draw(self, st: EpisodeState) -> str:
        ws = words(st.question.rstrip("?.! "))
        if len(ws) <= 2:
            return " ".join(ws) or st.question
        k = st.rng.randint(max(2, len(ws) // 3), len(ws))
        keep = sorted(st.rng.sample(range(len(ws)), k))
        return " ".join(ws[i] for i in keep)

    def first(self, st: EpisodeState) -> tuple[str, str]:
        return self._draw(st), "I will try some words of the question."

    def follow_up(self, st: EpisodeState) -> tuple[str, str] | None:
        if st.searches >= self.max_searches:
            return None
        return self._draw(st), "That did not answer it; I try other words."


STRATEGIES: dict[str, type[Strategy]] = {s.name: s for s in (
    QuestionStrategy, KeywordsStrategy, EntityStrategy, RephraseStrategy, DecomposeStrategy, PRFStrategy,
    RandomStrategy, HopsStrategy)}

# The `diverse` demonstrator's weights (the SFT data of the squeeze experiment), every strategy named. The two
# strategies that do multi-hop questions, decompose and hops, get the same weight, on purpose: they are the two
# best on the squeeze world's train split (within 0.03 EM, preset squeeze2) and each fails a shift split the
# other solves, so the SFT start must hold both (each >= 15% of the kept demonstrations) and neither is
# favoured before RL. The single-search strategies get 1 (they solve the one-hop families), random 0.5.
# Weights are exact ratios: there is no tie to break, the per-episode draw is the only randomness.
DEFAULT_WEIGHTS: dict[str, float] = {"question": 1.0, "keywords": 1.0, "entity": 1.0, "rephrase": 1.0,
                                     "decompose": 2.0, "hops": 2.0, "prf": 1.0, "random": 0.5}


# --------------------------------------------------------------------------------------------------
# Agents


class HeuristicAgent:
    """A batched, per-slot stateful agent driven by one query strategy (or a weighted mix: ``diverse``).

    Args:
        strategy: a name in :data:`STRATEGIES`.
        seed: seeds the random strategies (per slot and episode, so results do not depend on batching).
        max_searches: never search more than this in one episode (the env's budget, default 4).
        think: prefix actions with a short ``<think>``.
        reader: a :class:`Reader` (e.g. ``Reader(world)`` for type checks on entity names).
    """

    def __init__(self, strategy: str = "question", *, seed: int = 0, max_searches: int = 4, think: bool = True,
                 reader: Reader | None = None, name: str | None = None):
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {strategy!r}; available: {', '.join(STRATEGIES)}")
        self.strategy_name = strategy
        self.name = name or strategy
        self.seed = seed
        self.max_searches = max_searches
        self.think = think
        self.reader = reader or Reader()
        self._slots: dict[int, EpisodeState] = {}
        self._episodes: Counter[int] = Counter()
        self._strategies = {k: v() for k, v in STRATEGIES.items()}

    # -- per-episode choices -------------------------------------------------------------------------
    def _episode_rng(self, slot: int, question: str) -> random.Random:
        self._episodes[slot] += 1
        return random.Random(f"{self.seed}/{slot}/{self._episodes[slot]}/{question}")

    def choose_strategy(self, rng: random.Random) -> Strategy:
        return self._strategies[self.strategy_name]

    def reset(self, indices: Sequence[int] | None = None) -> None:
        if indices is None:
            self._slots.clear()
        else:
            for i in indices:
                self._slots.pop(int(i), None)

    def state(self, index: int) -> EpisodeState | None:
        return self._slots.get(index)

    # -- acting --------------------------------------------------------------------------------------
    def _start(self, slot: int, obs: str, info: Mapping) -> EpisodeState:
        question = parse_question(obs, dict(info))
        rng = self._episode_rng(slot, question)
        budget = self.max_searches
        turns = info.get("max_turns")
        if isinstance(turns, (int, float)) and not isinstance(turns, bool):
            budget = min(budget, int(turns))
        st = EpisodeState(question=question, spec=parse_spec(question), strategy=self.choose_strategy(rng),
                          rng=rng, budget=budget)
        self._slots[slot] = st
        return st

    def _search(self, st: EpisodeState, q: str, think: str) -> str:
        st.queries.append(q)
        return search_action(q, think if self.think else None)

    def _answer(self, st: EpisodeState) -> str:
        ans, conf = self.reader.answer(st.question, st.mem, st.spec)
        st.done = True
        think = None
        if self.think:
            think = "The passages answer it." if conf >= CONFIDENT else "I am not sure; my best guess."
        return answer_action(ans, think)

    def act_one(self, slot: int, obs: str, info: Mapping) -> str:
        st = self._slots.get(slot)
        if st is None or st.done or is_new_episode(obs, dict(info)):
            st = self._start(slot, obs, info)
            if st.budget <= 0:  # no searches allowed: answer from nothing
                return self._answer(st)
            q, think = st.strategy.first(st)
            return self._search(st, q, think)
        docs = parse_information(obs)
        if not docs and "<information>" not in obs:
            # corrective feedback (invalid action, budget message): answer with what we have
            return self._answer(st)
        st.mem.add(docs)
        st.strategy.observe(st)
        _, conf = self.reader.answer(st.question, st.mem, st.spec)
        if conf >= CONFIDENT or st.searches >= st.budget:
            return self._answer(st)
        nxt = st.strategy.follow_up(st)
        if nxt is None:
            return self._answer(st)
        return self._search(st, *nxt)

    def act(self, observations: Sequence[str], infos: Sequence[dict] | None = None, *,
            indices: Sequence[int] | None = None) -> list[str]:
        idx = batch_indices(len(observations), indices)
        infs = infos_or_empty(infos, len(observations))
        return [self.act_one(i, o, inf) for i, o, inf in zip(idx, observations, infs)]


class DiverseAgent(HeuristicAgent):
    """Samples one strategy per episode with the given weights (seeded): the SFT demonstrator mix."""

    def __init__(self, weights: Mapping[str, float] | None = None, *, seed: int = 0, max_searches: int = 4,
                 think: bool = True, reader: Reader | None = None, name: str = "diverse"):
        super().__init__("question", seed=seed, max_searches=max_searches, think=think, reader=reader,
                         name=name)
        w = dict(DEFAULT_WEIGHTS if weights is None else weights)
        unknown = sorted(set(w) - set(STRATEGIES))
        if unknown:
            raise ConfigError(f"unknown strategies in weights: {unknown}; available: {', '.join(STRATEGIES)}")
        if not w or any(v < 0 for v in w.values()) or sum(w.values()) <= 0:
            raise ConfigError(f"weights must be >= 0 with a positive sum, got {w}")
        self.weights = w
        self._names = [k for k, v in w.items() if v > 0]
        self._w = [w[k] for k in self._names]
        self.chosen: Counter[str] = Counter()

    def choose_strategy(self, rng: random.Random) -> Strategy:
        name = rng.choices(self._names, weights=self._w, k=1)[0]
        self.chosen[name] += 1
        return self._strategies[name]
