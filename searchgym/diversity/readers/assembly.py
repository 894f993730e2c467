"""Assembly: calls and observations -> episodes. Turn by turn, a call counts once, when an observation answers
it (re-emitted history is dropped); evidence from the observations or from a sidecar field beside the transcript.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from searchgym.diversity.readers.outcomes import is_refusal
from searchgym.diversity.readers.records import (
    _DOC_TITLE,
    _JSON_TITLE,
    DEFAULT_SEARCH_TOOLS,
    MAX_TITLE,
    OBS_TAGS,
    Episode,
    ReadStats,
    _lookup,
)


@dataclass
class _Call:
    grammar: str
    queries: list[str] | None      # None: malformed
    call_id: str | None = None
    other: bool = False            # a non-search tool/action
    issued: bool = False           # known to be issued without an observation (a user-named query field)
    after_answer: bool = False     # issued after the final answer


@dataclass
class _Turn:
    calls: list[_Call] = field(default_factory=list)
    obs: list[tuple[str, str | None]] = field(default_factory=list)


class _Assembler:
    """Collects calls, observations and the answer of one episode, turn by turn."""

    def __init__(self, search_tools: frozenset[str] = DEFAULT_SEARCH_TOOLS) -> None:
        self.turns: list[_Turn] = [_Turn()]
        self.answer: str | None = None
        self.done = False
        self.answered = False  # an answer was given: later calls count only if an observation answers them
        self.n_obs = 0
        self.search_tools = search_tools

    def call(self, c: _Call) -> None:
        if self.done:
            return
        if self.turns[-1].obs:
            self.turns.append(_Turn())
        if self.answered:
            c.after_answer = True
        self.turns[-1].calls.append(c)

    def obs(self, text: str, call_id: str | None = None) -> None:
        if self.done:
            return
        self.n_obs += 1
        self.turns[-1].obs.append((_obs_text(text), call_id))

    def finish(self, answer: str | None) -> None:
        """The final answer. Scanning goes on: a call after it that an observation answers was executed
        (and counted by the run's own tool metrics); one that none answers is dropped."""
        if not self.done and not self.answered:
            self.answer = answer
            self.answered = True

    def build(self, stats: ReadStats, **kw: Any) -> tuple[Episode, list[tuple[str, int, str]]]:
        """The episode, and the calls never executed as (query, turn, grammar) for the no-observation case."""
        ep = Episode(queries=[], answer=self.answer, **kw)
        pending: list[tuple[str, int, str]] = []
        turns = _without_reemitted(self.turns)
        stats.reemitted += len(self.turns) - len(turns)
        for ti, turn in enumerate(turns):
            good = []
            for c in turn.calls:
                if c.other:
                    stats.other_calls += 1
                elif c.queries is None:
                    ep.malformed += 1
                else:
                    good.append(c)
            if not good:
                continue
            if not turn.obs:
                for c in good:
                    if c.after_answer:
                        continue  # never executed, and past the answer: not even a pending call
                    if c.issued:
                        for q in c.queries:
                            ep.queries.append(q)
                            ep.turns.append(ti)
                            ep.evidence.append([])
                            ep.titles.append([])
                            stats.grammars[c.grammar] += 1
                    else:
                        pending.extend((q, ti, c.grammar) for q in c.queries)
                continue
            run, blocks = _match(turn, good)
            ran = {id(c) for c in run}
            stats.unexecuted += sum(len(c.queries) for c in good if id(c) not in ran)
            _emit(ep, stats, ti, run, blocks)
        return ep, pending


def _match(turn: _Turn, good: list[_Call]) -> tuple[list[_Call], list[list[str]]]:
    """The calls of a turn that ran, and the observation texts of each: by call id (OpenAI
    ``tool_call_id``), else in order (verl runs only the first ``max_parallel_calls``)."""
    ids = {i for _, i in turn.obs if i is not None}
    run = [c for c in good if c.call_id in ids] if ids else []
    if run:
        by_id = {i: t for t, i in turn.obs if i is not None}
        return run, [[by_id[c.call_id]] for c in run]
    if all(c.grammar == "tool_call" for c in good) and len(turn.obs) < len(good):
        run = good[:len(turn.obs)]
    else:
        run = good
    texts = [t for t, _ in turn.obs]
    if len(texts) >= len(run):
        blocks = [[t] for t in texts[:len(run)]]
        blocks[-1].extend(texts[len(run):])
    elif len(texts) == 1:
        parts = _split_block(texts[0], len(run))
        blocks = [[p] for p in parts] if parts else [texts] * len(run)  # (one list, shared)
    else:
        blocks = [[t] for t in texts] + [[] for _ in range(len(run) - len(texts))]
    return run, blocks


def _emit(ep: Episode, stats: ReadStats, ti: int, run: list[_Call], blocks: list[list[str]]) -> None:
    """The queries of turn ``ti``'s executed calls with their evidence blocks. A call the tool refused is not a
    search that ran (counted in ``stats.rejected``). A block that answers several queries is one list, shared by
    them, and its titles are parsed once (6,000 calls answered by one observation of 6,000 titles used to copy and
    parse it 6,000 times: 1.5 GB)."""
    shared: tuple[Any, list[str]] = (None, [])
    for c, blk in zip(run, blocks):
        assert c.queries is not None
        if blk and is_refusal(blk[0]):
            stats.rejected += len(c.queries)
            continue
        per_q: list[list[str]]
        if len(c.queries) > 1 and len(blk) == 1 and (parts := _split_block(blk[0], len(c.queries))):
            per_q = [[p] for p in parts]
        else:
            per_q = [blk] * len(c.queries)
        for q, ev in zip(c.queries, per_q):
            if shared[0] is not ev:
                shared = (ev, [t for b in ev for t in doc_titles(b)])
            ep.queries.append(q)
            ep.turns.append(ti)
            ep.evidence.append(ev)
            ep.titles.append(shared[1])
            stats.grammars[c.grammar] += 1


def _turn_key(t: _Turn) -> tuple:
    return (tuple((c.grammar, tuple(c.queries) if c.queries is not None else None, c.other) for c in t.calls),
            tuple(o for o, _ in t.obs))


_MOD = (1 << 61) - 1  # a Mersenne prime: polynomial hashes of turn-id sequences


def _without_reemitted(turns: list[_Turn]) -> list[_Turn]:
    """The turns less those a response re-emits: a run of turns that repeats the episode's whole history so
    far (at least two different turns), calls and observations alike: one executed call then appears twice
    in the text and counts once. A search repeated on its own (a looping agent, ``A A A`` or an ``A`` again
    after ``B``) is kept: that is the agent searching again, a figure the analysis must see.

    Linear: each turn's key is hashed once into an id; whether the turns at ``i`` repeat the kept history is
    one comparison of polynomial hashes (of the ids that follow ``i`` and of the history), checked id by id
    only when the hashes agree, which is then a match whose turns are skipped (an element-wise test at every
    turn took 72 s on a 20,000-turn loop ``A…A B A…A``)."""
    if len(turns) < 4:  # a re-emission needs two different turns and their repeat
        return turns
    ids: dict[tuple, int] = {}
    keys = [ids.setdefault(_turn_key(t), len(ids)) + 1 for t in turns]
    n = len(keys)
    base = random.Random(n).randrange(1 << 32, _MOD - 1)  # (any base: a hash match is verified)
    pre, pw = [0] * (n + 1), [1] * (n + 1)
    for i, k in enumerate(keys):
        pre[i + 1] = (pre[i] * base + k) % _MOD
        pw[i + 1] = pw[i] * base % _MOD
    kept: list[int] = []
    hist = [0]  # prefix hashes of the kept turns' ids
    i = 0
    seen: set[int] = set()
    while i < n:
        m = len(kept)
        if m >= 2 and len(seen) >= 2 and i + m <= n and (pre[i + m] - pre[i] * pw[m]) % _MOD == hist[m] and \
                all(keys[i + j] == keys[kept[j]] for j in range(m)):
            i += m  # the whole history again: skip it
            continue
        kept.append(i)
        hist.append((hist[-1] * base + keys[i]) % _MOD)
        seen.add(keys[i])
        i += 1
    return [turns[i] for i in kept]


def _split_block(text: str, n: int) -> list[str] | None:
    """verl's search tool joins the results of a query list with ``\\n---\\n``."""
    parts = text.split("\n---\n")
    return parts if len(parts) == n and n > 1 else None


def _obs_text(block: str) -> str:
    """The text of an observation: a JSON ``{"result": …}`` tool response is unwrapped."""
    s = block.strip()
    for o, c in OBS_TAGS:
        if s.startswith(o):
            s = s[len(o):]
            s = (s.removesuffix(c)).strip()
            break
    if s[:1] == "{" and '"result"' in s[:20]:
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):
            return s
        if isinstance(obj, dict) and isinstance(obj.get("result"), str):
            return obj["result"].strip()
    return s


def information_blocks(text: str) -> list[str]:
    out = []
    pos = 0
    text = text or ""
    while True:
        a = text.find("<information>", pos)
        if a < 0:
            return out
        b = text.find("</information>", a)
        out.append(text[a + 13:b if b >= 0 else len(text)].strip())
        if b < 0:
            return out
        pos = b + 14


def doc_titles(block: str) -> list[str]:
    """Titles of an observation: Search-R1 ``Doc 1(Title: "X") text``, verl ``Doc 1 (Title: X)\\ntext``,
    and JSON ``"title": "X"`` fields."""
    out: list[str] = []
    if not block:
        return out
    if "Title:" in block:
        starts = [m.end() for m in _DOC_TITLE.finditer(block)]
        size = len(block)
        for idx, s in enumerate(starts):
            # a title ends at ")" + white space, within its line, at most MAX_TITLE characters long
            limit = min(size, s + MAX_TITLE, starts[idx + 1] if idx + 1 < len(starts) else size)
            nl = block.find("\n", s, limit)
            if nl >= 0:
                limit = nl
            end = limit
            k = block.find(")", s, limit)
            while k >= 0:
                if k + 1 >= limit or block[k + 1] in " \t\r\n":
                    end = k
                    break
                k = block.find(")", k + 1, limit)
            t = block[s:end].strip().strip('"').strip()
            if t:
                out.append(t)
    if not out and '"title"' in block:
        for m in _JSON_TITLE.finditer(block):
            k = block.find('"', m.end())
            if k > m.end():
                out.append(block[m.end():k])
    return out


def _adopt_pending(ep: Episode, pending: list[tuple[str, int, str]]) -> None:
    for q, t, _ in pending:
        ep.queries.append(q)
        ep.turns.append(t)
        ep.evidence.append([])
        ep.titles.append([])


_SIDECAR_KEYS = ("search_information", "retrieved_docs", "retrieved_documents", "search_results", "retrieval",
                 "retrievals", "retrieved", "contexts", "retrieved_passages", "docs", "documents", "evidence")


_SIDE_QUERY = ("query", "q", "search_query", "question")


_SIDE_RESULTS = ("results", "docs", "documents", "retrieved", "passages", "contexts", "hits", "result")


def _doc_text(d: Any) -> tuple[str, str | None]:
    """(text, title) of one retrieved document of a sidecar field."""
    if isinstance(d, str):
        return d, None
    if isinstance(d, dict):
        title = d.get("title") if isinstance(d.get("title"), str) else None
        body = next((d[k] for k in ("contents", "content", "text", "snippet", "passage", "document")
                     if isinstance(d.get(k), str)), "")
        if title is None and isinstance(d.get("document"), dict):
            return _doc_text(d["document"])
        return (f"{title}\n{body}" if title and body else (body or title or "")), title
    return "", None


def _sidecar(obj: dict) -> list[tuple[str | None, list[str], list[str]]] | None:
    """Evidence kept beside the transcript: per search, (query or None, texts, titles)."""
    _, v = _lookup(obj, _SIDECAR_KEYS)
    if not isinstance(v, list) or not v:
        return None
    out: list[tuple[str | None, list[str], list[str]]] = []
    for item in v:
        q: str | None = None
        docs: Any = item
        if isinstance(item, dict):
            qk = next((k for k in _SIDE_QUERY if isinstance(item.get(k), str)), None)
            rk = next((k for k in _SIDE_RESULTS if k in item), None)
            if qk is None and rk is None:
                docs = [item]  # a document itself
            else:
                q = item[qk].strip() if qk else None
                docs = item.get(rk) if rk else []
        if isinstance(docs, (str, dict)):
            docs = [docs]
        if not isinstance(docs, list):
            continue
        pairs = [_doc_text(d) for d in docs]
        out.append((q, [t for t, _ in pairs if t], [ti for _, ti in pairs if ti]))
    return out or None


def _attach_sidecar(ep: Episode, side: list[tuple[str | None, list[str], list[str]]]) -> None:
    """Give each query without evidence the sidecar's results: matched by query text, else by position."""
    by_q: dict[str, tuple[list[str], list[str]]] = {}
    for q, texts, titles in side:
        if q:
            by_q.setdefault(" ".join(q.lower().split()), (texts, titles))
    while len(ep.evidence) < len(ep.queries):
        ep.evidence.append([])
    while len(ep.titles) < len(ep.queries):
        ep.titles.append([])
    titles_of: dict[int, list[str]] = {}  # one entry's titles, shared by every query it answers
    for i, q in enumerate(ep.queries):
        if ep.evidence[i]:
            continue
        hit = by_q.get(" ".join(q.lower().split()))
        if hit is None and i < len(side) and side[i][0] is None:
            hit = (side[i][1], side[i][2])
        if hit is not None:
            ep.evidence[i] = hit[0]
            got = titles_of.get(id(hit[0]))
            if got is None:
                got = titles_of[id(hit[0])] = hit[1] or [t for b in hit[0] for t in doc_titles(b)]
            ep.titles[i] = got
