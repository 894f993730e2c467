"""The one analysis core: episodes -> typed statistics.

The online ``DiversityTracker``, the offline ``searchgym analyze`` report and the squeeze evaluation all call
``analyze_episodes`` (or its two halves, ``label_episodes`` and ``run_stats``) and read the field names of
the dataclasses below directly: the tracker flattens them into ``diversity/<block>/<field>`` scalars
(``flat_metrics``), the report writes them into ``summary.json`` (``RunStats.to_dict``).

Definitions (each figure of the report carries its one-line form, ``DEFINITIONS``):

* Template levels (``templates.py``) and strategy classes (``strategy.py``) label every query.
* ``LevelStats.entropy`` / ``hill`` are taken at a sample size ``n`` (rarefaction: the mean over draws of n
  queries without replacement; at n = all queries the plug-in value), so that runs and steps compared at
  one n are comparable; ``entropy_ci`` and ``hill_ci`` follow ``metrics.CI_METHOD`` and contain their
  estimate by construction. Figures named ``*_all`` and the rank/mass figures are over all queries.
* Within-question figures use the groups of one question (at one step, offline) with at least 2 samples;
  ``within_question_groups`` says how many; with none they are None.
* ``mi_question``: ``metrics.MI_METHOD``.
* ``well_formed``: the same figures over well-formed, grounded queries only (strategy not ``malformed`` or
  ``off-task``), next to the shares of malformed and off-task queries.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import numpy as np

from searchgym.diversity import metrics as M
from searchgym.diversity.gcpause import with_gc_paused
from searchgym.diversity.moves import MOVES, _moves, ctar, episode_moves, moves_and_ctar, transition_matrix
from searchgym.diversity.strategy import GROUNDED, MAX_QUERY_WORDS, STRATEGIES, EvidenceContext, classify
from searchgym.diversity.templates import _LEVEL_SLOT, TEXT_LEVELS, Templater, normalize

DOMINANT_EPISODE_SHARE = 0.2
DOMINANT_MIN_EPISODES = 6  # with 5 or fewer episodes every episode holds >= 20% of the queries

DEFINITIONS: dict[str, str] = {
    "n_queries": "queries read (malformed calls are not queries)",
    "n_malformed": "malformed search calls the reader could not parse plus queries classed malformed",
    "question_copy_rate": "share of queries whose normalised tokens overlap the question's by >= 0.8 both ways",
    "malformed_share": "share of queries classed malformed (empty, over 32 words, markup or garbage)",
    "off_task_share": "share of queries that name nothing and use no word from the question or earlier evidence",
    "grounded_share": "share of queries that are well-formed and grounded (neither malformed nor off-task)",
    "sources": "mean share of a query's content words found in the question / else earlier evidence / neither",
    "strategy": "distribution of strategy classes (copy-question, question-fragment, entity-lookup, "
                "entity+relation, bridge, rephrase, off-task, malformed)",
    "n": "sample size the entropy and Hill numbers are taken at (equal for every compared run)",
    "entropy": "Shannon entropy (nats) of the template distribution at sample size n (rarefied mean)",
    "entropy_ci": "95% CI of that entropy (see CI method)",
    "hill": "Hill numbers at n: 0 = distinct templates, 1 = exp(entropy), 2 = inverse Simpson 1/sum p^2",
    "effective_number": "exp(entropy): the number of equally likely templates with the same entropy",
    "n_templates": "distinct templates among all queries (grows with sample size: compare hill 0 instead)",
    "entropy_all": "plug-in entropy over all queries (not comparable between runs of unequal size)",
    "top1_mass": "share of all queries in the most frequent template",
    "within_question_entropy": "mean entropy of the templates of one question's samples (questions with >= 2)",
    "first_query_within_entropy": "the same over the first query of each episode of a question",
    "first_query_across_entropy": "entropy of the first query's template over all episodes",
    "mi_question": "mutual information (nats) between question and template, shuffle-corrected; about 0 when "
                   "the template does not depend on the question however varied it is",
    "duplicate_query_rate": "share of queries that repeat an earlier query of their episode (normalised text)",
    "queries_per_episode": "queries per episode",
    "new_document_yield": "mean share of a search's retrieved documents not retrieved earlier in its episode",
    "ctar": "share of a query's new terms that appeared in evidence retrieved earlier (Ning et al. 2026)",
    "distinct_1": "unique words / all words over the queries",
    "distinct_2": "unique word bigrams / all bigrams over the queries",
    "move_entropy": "entropy (nats) of the reformulation moves between consecutive queries",
}


# ------------------------------------------------------------------------------------------------ records
@dataclass
class Warning_:
    """A sign of a wrong reading or of figures that rest on too little: a code, a count, a sentence."""

    code: str
    count: int
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class LevelStats:
    """Template (or strategy) statistics of one label level over one set of queries."""

    n_queries: int
    n: int
    n_templates: int
    entropy: float
    entropy_ci: list[float]
    effective_number: float
    hill: dict[str, float]
    hill_ci: dict[str, list[float]]
    inverse_simpson: float
    entropy_all: float
    miller_madow_entropy: float
    normalized_entropy: float
    top1_mass: float
    top5_mass: float
    rank_beta: float
    within_question_entropy: float | None
    within_question_groups: int
    first_query_within_entropy: float | None
    first_query_across_entropy: float
    mi_question: float | None
    mi_question_plugin: float | None
    mi_question_shuffle: float | None
    mi_k: int
    mi_questions: int
    distribution: dict[str, float] | None = None
    top: list[list[Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)


@dataclass
class MoveStats:
    counts: dict[str, int]
    shares: dict[str, float]
    entropy: float
    transitions: dict[str, dict[str, int]]


@dataclass
class ProcessStats:
    queries_per_episode: float
    duplicate_query_rate: float
    new_document_yield: float
    ctar: float


@dataclass
class SubsetStats:
    """The diversity figures over one subset of a run's queries (the ``well_formed`` block)."""

    n_queries: int
    share: float
    strategy: LevelStats | None
    levels: dict[str, LevelStats]


@dataclass
class StepStats:
    step: int
    n_episodes: int
    n_queries: int
    levels: dict[str, LevelStats]
    strategy: LevelStats | None
    question_copy_rate: float
    grounded_share: float
    reward_mean: float | None
    token_entropy_mean: float | None


@dataclass
class RunStats:
    """Everything the core says about one run (a list of episodes)."""

    n_episodes: int
    n_queries: int
    n_malformed: int
    question_copy_rate: float
    malformed_share: float
    off_task_share: float
    grounded_share: float
    sources: dict[str, float]
    strategy: LevelStats | None
    levels: dict[str, LevelStats]
    well_formed: SubsetStats
    process: ProcessStats
    text: dict[str, float]
    moves: MoveStats
    policy: dict[str, Any]
    warnings: list[Warning_]
    series: list[StepStats]

    def to_dict(self) -> dict[str, Any]:
        d = _to_dict(self)
        d["warning_counts"] = {w.code: w.count for w in self.warnings}
        d["warnings"] = [w.message for w in self.warnings]
        return d

    def compact(self) -> dict[str, Any]:
        """The headline figures under the same names as ``to_dict`` (for experiment summaries): run
        shares, and per level / strategy / well-formed level the entropy, Hill numbers and MI."""
        keep = ("n", "n_queries", "entropy", "effective_number", "hill", "mi_question", "within_question_entropy",
                "top1_mass", "distribution")

        def lv(st: LevelStats | None) -> dict[str, Any] | None:
            return None if st is None else {k: _to_dict(getattr(st, k)) for k in keep if getattr(st, k) is not None}

        return {"n_episodes": self.n_episodes, "n_queries": self.n_queries, "n_malformed": self.n_malformed,
                "question_copy_rate": self.question_copy_rate, "malformed_share": self.malformed_share,
                "off_task_share": self.off_task_share, "grounded_share": self.grounded_share,
                "strategy": lv(self.strategy), "levels": {k: lv(v) for k, v in self.levels.items()},
                "well_formed": {"n_queries": self.well_formed.n_queries, "strategy": lv(self.well_formed.strategy),
                                "levels": {k: lv(v) for k, v in self.well_formed.levels.items()}},
                "process": _to_dict(self.process), "warnings": [w.message for w in self.warnings]}


def _to_dict(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: _to_dict(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, dict):
        return {str(k): _to_dict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_to_dict(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


# ------------------------------------------------------------------------------------------------ labelling
@dataclass
class Labels:
    """Per-query labels of a run (flat over its queries, in episode order) and per-episode facts."""

    episodes: list[Any]
    ep_of: list[int]                 # episode index of each query
    turn_of: list[int]
    texts: list[str]
    levels: dict[str, list[str]]
    strategy: list[str]
    copies: list[bool]
    sources: list[tuple[float, float, float]]
    group_of_ep: list[Any]           # within-question group key of each episode (None: no question)
    step_of_ep: list[int | None]
    moves: list[list[str]]           # per episode
    ctars: list[float]
    yields: list[float]
    dups: list[float]
    repeated_in_turn: int = 0
    question_equal: int = 0


def episode_from_trajectory(traj: Any) -> Any:
    """A ``readers.Episode`` from a searchgym ``Trajectory`` (the conversion the tracker and readers share).

    Query i of search step t gets turn t; a step's evidence (titles plus observation text), titles and
    retrieved ids go to the first query of the step, so per-step figures stay per step.
    """
    from searchgym.diversity.readers import Episode

    queries: list[str] = []
    turns: list[int] = []
    evidence: list[list[str]] = []
    titles: list[list[str]] = []
    doc_ids: list[list[str]] = []
    searches = [s for s in traj.steps if s.kind == "search"]
    for t, s in enumerate(searches):
        qs = list(s.queries)
        ti = step_titles(s)
        ev = _step_evidence(s, ti)
        for j, q in enumerate(qs):
            queries.append(q)
            turns.append(t)
            evidence.append(ev if j == 0 else [])
            titles.append(ti if j == 0 else [])
            doc_ids.append(list(s.doc_ids) if j == 0 else [])
    te = traj.extra.get("token_entropy") if isinstance(traj.extra, dict) else None
    try:
        te = float(te) if te is not None else None
    except (TypeError, ValueError):
        te = None
    return Episode(queries=queries, step=traj.policy_step, question=traj.question,
                   question_id=traj.question_id or traj.question, reward=float(traj.reward),
                   success=bool(traj.em), evidence=evidence, titles=titles, doc_ids=doc_ids, token_entropy=te,
                   turns=turns, episode_id=traj.episode_id, answer=traj.prediction)


_TITLE_KEYS = ("retrieved_titles", "doc_titles")
_EVIDENCE_KEYS = ("observation", "information", "evidence")


def step_titles(step: Any) -> list[str]:
    """The titles a search step retrieved (``Step.titles``; schema-1 extras too)."""
    titles = getattr(step, "titles", None)
    if titles:
        return [str(x) for x in titles]
    extra = getattr(step, "extra", None) or {}
    for k in ("titles", *_TITLE_KEYS):
        v = extra.get(k)
        if v:
            return [str(x) for x in v]
    return []


def step_evidence(step: Any) -> list[str]:
    """The text a search step retrieved: its titles plus observation text kept in its extras."""
    return _step_evidence(step, step_titles(step))


def _step_evidence(step: Any, titles: list[str]) -> list[str]:
    extra = getattr(step, "extra", None) or {}
    out = list(titles)
    for k in _EVIDENCE_KEYS:
        v = extra.get(k)
        if isinstance(v, str) and v:
            out.append(v)
        elif isinstance(v, list):
            out.extend(str(x) for x in v)
    return out


def _turns(ep: Any) -> list[int]:
    t = list(getattr(ep, "turns", None) or [])
    return t if len(t) == len(ep.queries) else list(range(len(ep.queries)))


@with_gc_paused
def label_episodes(episodes: Sequence[Any], *, templater: Templater, levels: Sequence[str] = TEXT_LEVELS,
                   semantic: Callable[[list[str]], Sequence[Any]] | None = None,
                   group_by_step: bool = True) -> Labels:
    """Templates at each level, strategy class, copy flag and word sources of every query; moves, CTAR,
    new-document yield and duplicate rate of every episode.

    A query sees the titles (for slot masking) and evidence (for strategy, moves, CTAR) retrieved by the
    queries of earlier turns of its episode. ``semantic``: ``list[str] -> labels`` for the semantic level.
    ``group_by_step``: within-question groups are (step, question) (offline) or the question alone (one
    tracker update is one step).
    """
    text_levels = [lv for lv in levels if lv in TEXT_LEVELS]
    lab = Labels(episodes=list(episodes), ep_of=[], turn_of=[], texts=[], levels={lv: [] for lv in levels},
                 strategy=[], copies=[], sources=[], group_of_ep=[], step_of_ep=[], moves=[], ctars=[],
                 yields=[], dups=[])
    template_entry, level_string = templater.entry_in, templater._level
    # (bound methods: the loop below runs once per query)
    level_plan = [(None if lv == "string" else _LEVEL_SLOT[lv], lab.levels[lv].append) for lv in text_levels]
    add_strategy, add_copy, add_sources = lab.strategy.append, lab.copies.append, lab.sources.append
    add_ep, add_turn, add_text = lab.ep_of.append, lab.turn_of.append, lab.texts.append
    for ei, ep in enumerate(lab.episodes):
        question = ep.question
        queries = list(ep.queries)
        qkey = ep.question_id or ep.question
        lab.group_of_ep.append(None if qkey is None else ((ep.step, qkey) if group_by_step else qkey))
        lab.step_of_ep.append(ep.step)
        turns = _turns(ep)
        ev_list = list(ep.evidence or [])
        ti_list = list(ep.titles or [])
        ctx = EvidenceContext()
        seen = templater.titles_context()  # grows in place: memory linear in the episode's titles
        pending: list[int] = []
        cur = None
        nquestion = normalize(ep.question) if ep.question else None
        turn_seen: set[tuple[int, str]] = set()
        for i, q in enumerate(queries):
            if turns[i] != cur:
                _turn_evidence(pending, ev_list, ti_list, ctx, templater, seen)
                pending = []
                cur = turns[i]
            if text_levels:  # (= templater.templates(q, text_levels, ...), without building its dict)
                entry = None
                for slot_i, out in level_plan:
                    if slot_i is None:
                        out(normalize(q))
                        continue
                    if entry is None:
                        entry = template_entry(q, question, seen)
                    out(level_string(entry, slot_i))
            s = classify(q, question, ctx)
            add_strategy(s.strategy)
            add_copy(s.copies_question)
            add_sources((s.from_question, s.from_evidence, s.from_neither))
            add_ep(ei)
            add_turn(turns[i])
            add_text(q)
            nq = normalize(q)
            key = (turns[i], nq)
            if key in turn_seen:
                lab.repeated_in_turn += 1
            turn_seen.add(key)
            if nquestion is not None and nq == nquestion:
                lab.question_equal += 1
            pending.append(i)
        _episode_process(lab, ep, queries, turns, ev_list)
    if semantic is not None and "semantic" in lab.levels:
        lab.levels["semantic"] = [str(x) for x in semantic([normalize(q) for q in lab.texts])] if lab.texts else []
    return lab


def _episode_process(lab: Labels, ep: Any, queries: list[str], turns: list[int], ev_list: list[Any]) -> None:
    """An episode's process figures into ``lab``: duplicate rate, moves, CTAR and new-document yield (parallel
    turns have no per-query evidence)."""
    if queries:
        lab.dups.append(M.duplicate_query_rate(queries))
    parallel = len(set(turns)) < len(turns)
    ev = ev_list if len(ev_list) == len(queries) and not parallel else None
    if len(queries) < 2:
        lab.moves.append([])
    elif ev is not None and any(ev):
        mv, ct = moves_and_ctar(queries, ev, question=ep.question)
        lab.ctars.extend(x for x in ct if not math.isnan(x))
        lab.moves.append(mv)
    else:
        lab.moves.append(_moves(queries, None, ep.question))
    docs = _turn_documents(ep.doc_ids or [], turns)
    if docs:
        y = M.new_document_yield(docs)
        if not math.isnan(y):
            lab.yields.append(y)


def _turn_documents(doc_ids: list[Any], turns: list[int]) -> list[list[str]]:
    """Per turn, the union of its queries' documents in order (readers may repeat a parallel step's ids per
    query; one list shared by a turn's queries is taken once)."""
    by_turn: dict[int, list[str]] = {}
    taken: set[tuple[int, int]] = set()
    for i, d in enumerate(doc_ids):
        t = turns[i] if i < len(turns) else i
        if d and (t, id(d)) not in taken:
            taken.add((t, id(d)))
            by_turn.setdefault(t, []).extend(d)
    return [list(dict.fromkeys(v)) for v in by_turn.values()]


def _turn_evidence(pending: list[int], ev_list: list, ti_list: list, ctx: EvidenceContext, templater: Templater,
                   seen: Any) -> None:
    """Make the evidence and titles of one turn's queries (``pending``) visible to the queries after it. A
    list that several queries share (one observation answering a turn's calls) is added once: adding it
    again changes nothing, and 6,000 queries sharing 6,000 titles would add 36 million."""
    done_ev: set[int] = set()
    done_ti: set[int] = set()
    for j in pending:
        ev = ev_list[j] if j < len(ev_list) else ()
        ti = ti_list[j] if j < len(ti_list) else []
        if id(ev) in done_ev:
            ev = ()
        else:
            done_ev.add(id(ev))
        if id(ti) in done_ti:
            ti = []
        else:
            done_ti.add(id(ti))
        if ev or ti:
            ctx.add(ev, ti)
        for t in ti:
            templater.add_title(seen, t)


# ------------------------------------------------------------------------------------------------ statistics
@dataclass
class _Groups:
    """Query indices of one block (``idx``, in order) arranged by within-question group, shared by every
    label level of the block: each group's queries in episode order, each group's first queries, and the
    first query of each episode."""

    idx: Sequence[int]
    all_by_q: dict[Any, list[int]]
    first_by_q: dict[Any, list[int]]
    firsts: list[int]
    multi: frozenset[Any] = frozenset()  # groups with queries from >= 2 episodes (the only ones MI may use)


_NO_MI = {"mi": float("nan"), "mi_plugin": float("nan"), "mi_shuffle": float("nan"), "k": 0.0,
          "n_questions": 0.0}


def _groups(lab: Labels, idx: Sequence[int], ep_idx: Sequence[int]) -> _Groups:
    # within-question groups, in episode order (a group starts at its question's first episode)
    by_ep: dict[int, list[int]] = {}
    for e, run in itertools.groupby(idx, key=lab.ep_of.__getitem__):  # (an episode's queries are adjacent)
        have = by_ep.get(e)
        if have is None:
            by_ep[e] = list(run)
        else:
            have.extend(run)
    all_by_q: dict[Any, list[int]] = {}
    first_by_q: dict[Any, list[int]] = {}
    firsts: list[int] = []
    eps_of: Counter = Counter()
    group_of_ep = lab.group_of_ep
    for e in ep_idx:
        g = group_of_ep[e]
        ts = by_ep.get(e, [])
        if ts:
            firsts.append(ts[0])
        if g is None:
            continue
        all_by_q.setdefault(g, []).extend(ts)
        if ts:
            first_by_q.setdefault(g, []).append(ts[0])
            eps_of[g] += 1
    return _Groups(idx, all_by_q, first_by_q, firsts, frozenset(g for g, c in eps_of.items() if c >= 2))


def _level_stats(labels: Sequence[str], idx: Sequence[int], lab: Labels, ep_idx: Sequence[int], *,
                 n: int | None, n_boot: int, seed: int, distribution: Sequence[str] | None = None,
                 top: int = 10, groups_: _Groups | None = None, with_mi: bool = True) -> LevelStats | None:
    """Statistics of ``labels[i] for i in idx`` (query indices, in order), within the episodes ``ep_idx``.
    ``with_mi=False`` skips the question MI (its fields are then None, ``mi_k`` and ``mi_questions`` 0)."""
    gr = groups_ if groups_ is not None else _groups(lab, idx, ep_idx)
    items = labels if len(idx) == len(labels) else [labels[i] for i in idx]  # (idx is then all queries)
    if not items:
        return None
    counts = Counter(items)
    st = M.template_stats(counts)
    total = len(items)
    size = total if n is None else min(int(n), total)
    rd = M.rarefied_diversity(counts, size, n_boot=n_boot, seed=seed)
    all_by_q = {g: [labels[i] for i in v] for g, v in gr.all_by_q.items()}
    first_by_q = {g: [labels[i] for i in v] for g, v in gr.first_by_q.items()}
    firsts = [labels[i] for i in gr.firsts]
    groups = sum(1 for v in all_by_q.values() if len(v) >= 2)
    within = M.within_entropy(all_by_q) if groups else None
    fq_within = M.within_entropy(first_by_q) if any(len(v) >= 2 for v in first_by_q.values()) else None
    # MI(question; label) only over questions sampled in >= 2 episodes: with one episode per question the
    # "within-question" labels are the queries of one episode, and MI would measure the episode.
    mi_groups = {g: v for g, v in all_by_q.items() if g in gr.multi}
    mi = M.mutual_information(mi_groups, seed=seed) if with_mi and len(mi_groups) >= 2 else _NO_MI
    ok = not math.isnan(mi["mi"])
    dist = None
    if distribution is not None:
        dist = {c: counts.get(c, 0) / total for c in distribution}
    h = rd["entropy"]
    return LevelStats(
        n_queries=total, n=size, n_templates=int(st["n_templates"]), entropy=h, entropy_ci=rd["entropy_ci"],
        effective_number=math.exp(h), hill=rd["hill"], hill_ci=rd["hill_ci"], inverse_simpson=rd["hill"]["2"],
        entropy_all=st["entropy"], miller_madow_entropy=st["miller_madow_entropy"],
        normalized_entropy=st["normalized_entropy"], top1_mass=st["top1_mass"], top5_mass=st["top5_mass"],
        rank_beta=st["rank_beta"], within_question_entropy=within, within_question_groups=groups,
        first_query_within_entropy=fq_within,
        first_query_across_entropy=M.entropy(firsts) if firsts else float("nan"),
        mi_question=mi["mi"] if ok else None, mi_question_plugin=mi["mi_plugin"] if ok else None,
        mi_question_shuffle=mi["mi_shuffle"] if ok else None, mi_k=int(mi["k"]), mi_questions=int(mi["n_questions"]),
        distribution=dist,
        # (labels are distinct, so the key has no ties: the same list as a full sort's first ``top``)
        top=[[t, int(c)] for t, c in heapq.nsmallest(top, counts.items(), key=lambda kv: (-kv[1], kv[0]))])


def _sizes(n: int | Mapping[str, int] | None, key: str) -> int | None:
    if isinstance(n, Mapping):
        return n.get(key)
    return n


def _levels_block(lab: Labels, idx: list[int], ep_idx: list[int], *, n: Any, n_boot: int, seed: int,
                  prefix: str = "", with_mi: bool = True) -> tuple[LevelStats | None, dict[str, LevelStats]]:
    gr = _groups(lab, idx, ep_idx)
    strat = _level_stats(lab.strategy, idx, lab, ep_idx, n=_sizes(n, prefix + "strategy"), n_boot=n_boot,
                         seed=seed, distribution=STRATEGIES, groups_=gr, with_mi=with_mi)
    levels = {}
    for lv, labels in lab.levels.items():
        if len(labels) != len(lab.texts):
            continue
        st = _level_stats(labels, idx, lab, ep_idx, n=_sizes(n, prefix + lv), n_boot=n_boot, seed=seed,
                          groups_=gr, with_mi=with_mi)
        if st is not None:
            levels[lv] = st
    return strat, levels


def _mean(xs: Iterable[float]) -> float:
    v = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return float(np.mean(v)) if v else float("nan")


def _mean_at(values: np.ndarray, idx: Sequence[int]) -> float:
    """``_mean(values[i] for i in idx)`` for a float array without NaN (the same sum: numpy's mean of the
    same values in the same order)."""
    return float(values[np.asarray(idx, dtype=np.int64)].mean()) if len(idx) else float("nan")


def subset_sizes(lab: Labels) -> dict[str, int]:
    """Query counts per label block (``strategy``, each level, and ``well_formed/...``): the sizes a
    comparison of several runs takes the minimum of."""
    n = len(lab.texts)
    g = sum(1 for s in lab.strategy if s in GROUNDED)
    out = {"strategy": n, "well_formed/strategy": g}
    for lv in lab.levels:
        out[lv] = n
        out["well_formed/" + lv] = g
    return out


def _read_count(read_stats: Any, name: str) -> int:
    """A counter of the reader's ``ReadStats`` (0 when there are none, as for episodes built in Python)."""
    return int(getattr(read_stats, name, 0) or 0)


def warnings_of(lab: Labels, read_stats: Any = None, *, has_single_step: bool = False) -> list[Warning_]:
    """The warnings that catch a wrong reading (each with a count; only those that fire)."""
    eps = lab.episodes
    out: list[Warning_] = []
    no_q = sum(1 for e in eps if not e.queries)
    if no_q:
        out.append(Warning_("episodes_without_query", no_q, f"{no_q} of {len(eps)} episodes have no query"))
    long_q = sum(1 for q in lab.texts if len(q.split()) > MAX_QUERY_WORDS)
    if long_q:
        out.append(Warning_("long_queries", long_q, f"{long_q} queries are over {MAX_QUERY_WORDS} words (most "
                            "likely a reading error: reasoning text taken for a query)"))
    n = len(lab.texts)
    if n and len(eps) >= DOMINANT_MIN_EPISODES:
        big = [(i, len(e.queries)) for i, e in enumerate(eps) if len(e.queries) > DOMINANT_EPISODE_SHARE * n]
        if big:
            top = max(c for _, c in big)
            out.append(Warning_("dominant_episodes", len(big),
                                f"{len(big)} episode(s) each supply more than {DOMINANT_EPISODE_SHARE:.0%} of all "
                                f"queries (the largest {top} of {n}): a looping episode can fake a collapse"))
    if lab.repeated_in_turn:
        out.append(Warning_("repeated_calls_in_turn", lab.repeated_in_turn,
                            f"{lab.repeated_in_turn} search calls repeat an identical call of the same turn"))
    if lab.question_equal:
        out.append(Warning_("queries_equal_question", lab.question_equal,
                            f"{lab.question_equal} queries equal their question"))
    if has_single_step:
        out.append(Warning_("single_point_steps", 1, "the run's steps hold a single point: no trend plot and "
                            "no entropy-law fit"))
    mal_calls = sum(int(getattr(e, "malformed", 0) or 0) for e in eps)
    rs_mal = _read_count(read_stats, "malformed")
    mal = max(mal_calls, rs_mal)
    if mal:
        out.append(Warning_("malformed_calls", mal, f"{mal} search calls could not be parsed (not counted as "
                            "queries)"))
    unexec = _read_count(read_stats, "unexecuted")
    if unexec:
        out.append(Warning_("unexecuted_calls", unexec, f"{unexec} well-formed search calls were never answered "
                            "by an observation (not counted as queries)"))
    rejected = _read_count(read_stats, "rejected")
    if rejected:
        out.append(Warning_("rejected_calls", rejected, f"{rejected} search calls were refused by the tool ('Invalid "
                            "action!', 'Invalid request format', 'Error: Tool … not found'): they did not run and "
                            "are not counted as queries"))
    skipped = _read_count(read_stats, "skipped_lines")
    if skipped:
        out.append(Warning_("skipped_lines", skipped, f"{skipped} malformed lines were skipped (--lenient)"))
    cut = list(getattr(read_stats, "cut_lines", None) or [])
    if cut:
        out.append(Warning_("cut_last_line", len(cut), f"skipped a last line cut mid-record (a file still being "
                            f"written?): {'; '.join(cut[:3])}{' …' if len(cut) > 3 else ''}; the rest was "
                            "analysed"))
    out.extend(_reading_gaps(eps))
    return out


def _reading_gaps(eps: Sequence[Any]) -> list[Warning_]:
    """What the reader could not find: questions, rewards; and episodes repeated verbatim."""
    out: list[Warning_] = []
    n = len(eps)
    no_question = sum(1 for e in eps if not (e.question or "").strip())
    if no_question:
        out.append(Warning_("episodes_without_question", no_question, f"{no_question} of {n} episodes have no "
                            "question (looked in question/query/problem/input fields, the first user turn, "
                            "'Question:' and '### Instruction:' lines): their queries cannot be compared with "
                            "it, so copy rate and strategy classes are biased towards off-task; pass "
                            "--question-field"))
    no_reward = sum(1 for e in eps if e.reward is None and getattr(e, "success", None) is None)
    if no_reward:
        out.append(Warning_("episodes_without_reward", no_reward, f"{no_reward} of {n} episodes have no reward "
                            "or success field: their success is unknown (not counted as failures); pass "
                            "--reward-field"))
    seen: dict[Any, int] = {}
    dup = 0
    for e in eps:
        key = (e.question, tuple(e.queries), getattr(e, "answer", None), getattr(e, "step", None))
        if e.queries and key in seen:
            dup += 1
        seen.setdefault(key, 1)
    if dup:
        out.append(Warning_("duplicate_episodes", dup, f"{dup} episodes repeat an earlier episode of the same "
                            "step exactly (question, queries, answer): temperature-0 retries, concatenated "
                            "files, or a policy that no longer varies; each copy weighs in every figure"))
    trials = {getattr(e, "series", None) for e in eps if getattr(e, "series", None) and e.step is None}
    if len(trials) >= 2:
        out.append(Warning_("trials_not_steps", len(trials), f"{len(trials)} trials / attempts found: read as a "
                            "series of retries, not training steps (no trend, law fit or pass@k over them)"))
    multi = Counter(e.question_id or e.question for e in eps if (e.question_id or e.question))
    if multi and max(multi.values()) < 2:
        out.append(Warning_("mi_unavailable", len(multi), "every question has a single episode: MI(question; "
                            "strategy) needs >= 2 episodes per question and is reported as not available"))
    return out


@with_gc_paused
def run_stats(lab: Labels, *, n: int | Mapping[str, int] | None = None, series_n: Mapping[str, int] | None = None,
              n_boot: int = 200, seed: int = 0, token_entropies: Any = None,
              rewards: Sequence[float] | None = None, read_stats: Any = None, with_series: bool = True,
              success_threshold: float = 1.0,
              with_mi: bool = True) -> RunStats:
    """The typed statistics of a labelled run. ``n``: the sample size for entropy and Hill numbers (an int,
    or a mapping from ``subset_sizes`` keys; None = all queries). ``series_n`` the same per step.
    ``with_mi=False`` skips the question MI, the costliest figure of a small batch (the tracker's
    ``mi_every``). Each group of figures has its own function below."""
    eps = lab.episodes
    nq = len(lab.texts)
    all_idx = list(range(nq))
    all_eps = list(range(len(eps)))
    strat, levels = _levels_block(lab, all_idx, all_eps, n=n, n_boot=n_boot, seed=seed, with_mi=with_mi)
    g_idx = [i for i in all_idx if lab.strategy[i] in GROUNDED]
    if len(g_idx) == nq and all(_sizes(n, k) == _sizes(n, "well_formed/" + k) for k in ("strategy", *lab.levels)):
        # every query is well-formed and grounded: the same queries at the same sizes, the same figures
        g_strat, g_levels = copy.deepcopy((strat, levels))
    else:
        g_strat, g_levels = _levels_block(lab, g_idx, all_eps, n=n, n_boot=n_boot, seed=seed,
                                          prefix="well_formed/", with_mi=with_mi)
    sc = Counter(lab.strategy)
    share = (lambda c: c / nq) if nq else (lambda c: float("nan"))
    steps = sorted({s for s in lab.step_of_ep if s is not None})
    series = _series_stats(lab, steps, series_n=series_n, seed=seed, with_mi=with_mi) if with_series else []
    policy = _policy_stats(lab, rewards=rewards, token_entropies=token_entropies,
                           success_threshold=success_threshold)
    if len(series) >= 2:
        policy.update(_entropy_law(series, levels))
    src = np.asarray(lab.sources, dtype=float) if lab.sources else np.zeros((0, 3))
    n_mal_q = sc.get("malformed", 0)
    n_mal_calls = max(sum(int(getattr(e, "malformed", 0) or 0) for e in eps),
                      _read_count(read_stats, "malformed"))
    return RunStats(
        n_episodes=len(eps), n_queries=nq, n_malformed=int(n_mal_calls + n_mal_q),
        question_copy_rate=_mean(float(c) for c in lab.copies), malformed_share=share(n_mal_q),
        off_task_share=share(sc.get("off-task", 0)), grounded_share=share(len(g_idx)),
        sources={k: float(src[:, j].mean()) if len(src) else float("nan")
                 for j, k in enumerate(("question", "evidence", "neither"))},
        strategy=strat, levels=levels,
        well_formed=SubsetStats(n_queries=len(g_idx), share=share(len(g_idx)), strategy=g_strat, levels=g_levels),
        process=_process_stats(lab), text=_text_stats(lab), moves=_move_stats(lab), policy=policy,
        warnings=warnings_of(lab, read_stats, has_single_step=len(steps) == 1),
        series=series)


def _move_stats(lab: Labels) -> MoveStats:
    """Reformulation moves between consecutive queries: counts, shares, entropy, transitions."""
    mc = Counter(m for seq in lab.moves for m in seq)
    n_moves = sum(mc.values())
    return MoveStats(counts={m: int(mc.get(m, 0)) for m in MOVES},
                     shares={m: (mc.get(m, 0) / n_moves) if n_moves else float("nan") for m in MOVES},
                     entropy=M.move_entropy(list(mc.elements())) if n_moves else float("nan"),
                     transitions=transition_matrix(lab.moves))


def _process_stats(lab: Labels) -> ProcessStats:
    """The search process: queries per episode, duplicate rate, new-document yield, CTAR."""
    eps = lab.episodes
    return ProcessStats(queries_per_episode=len(lab.texts) / len(eps) if eps else float("nan"),
                        duplicate_query_rate=_mean(lab.dups), new_document_yield=_mean(lab.yields),
                        ctar=_mean(lab.ctars))


def _text_stats(lab: Labels) -> dict[str, float]:
    """distinct-1/2 over all queries."""
    if not lab.texts:
        return {"distinct_1": float("nan"), "distinct_2": float("nan")}
    dn = M.distinct_ns(lab.texts, (1, 2))
    return {"distinct_1": dn[1], "distinct_2": dn[2]}


def _policy_stats(lab: Labels, *, rewards: Sequence[float] | None, token_entropies: Any,
                  success_threshold: float) -> dict[str, Any]:
    """The policy side: mean reward, success rate over the episodes whose success is known, token entropy,
    pass@k."""
    eps = lab.episodes
    policy: dict[str, Any] = {}
    rw = list(rewards) if rewards is not None else [e.reward for e in eps if e.reward is not None]
    policy["reward_mean"] = float(np.mean(rw)) if rw else float("nan")
    succ = [_success(e, success_threshold) for e in eps]
    known = [x for x in succ if x is not None]
    policy["success_rate"] = float(np.mean(known)) if known else float("nan")  # unknown is never 0
    policy["success_known"] = len(known)
    te = token_entropies if token_entropies is not None else \
        [e.token_entropy for e in eps if getattr(e, "token_entropy", None) is not None]
    policy.update(M.token_entropy_summary(te) if te is not None and len(te) else {})
    trials = {e.series for e in eps if getattr(e, "series", None) and e.step is None}
    curves = pass_curves(eps, succ, lab.group_of_ep) if len(trials) < 2 else None  # retries are not samples
    if curves:
        policy["pass_at_k"] = curves
    return policy


def _series_stats(lab: Labels, steps: list[int], *, series_n: Mapping[str, int] | None, seed: int,
                  with_mi: bool) -> list[StepStats]:
    """Per training step: the strategy and level blocks at ``series_n``, copy rate, grounded share, reward."""
    if not steps:
        return []
    eps = lab.episodes
    by_step: dict[int, list[int]] = {}
    for i, s in enumerate(lab.step_of_ep):
        if s is not None:
            by_step.setdefault(s, []).append(i)
    copies = np.asarray(lab.copies, dtype=float)
    grounded = np.fromiter((x in GROUNDED for x in lab.strategy), dtype=float, count=len(lab.strategy))
    q_by_ep: dict[int, list[int]] = {}
    for i, e in enumerate(lab.ep_of):
        q_by_ep.setdefault(e, []).append(i)
    series = []
    for s in steps:
        e_idx = by_step[s]
        q_idx = [i for e in e_idx for i in q_by_ep.get(e, [])]
        st_strat, st_levels = _levels_block(lab, q_idx, e_idx, n=series_n, n_boot=0, seed=seed, with_mi=with_mi)
        srw = [eps[e].reward for e in e_idx if eps[e].reward is not None]
        ste = [eps[e].token_entropy for e in e_idx if getattr(eps[e], "token_entropy", None) is not None]
        series.append(StepStats(
            step=int(s), n_episodes=len(e_idx), n_queries=len(q_idx), levels=st_levels, strategy=st_strat,
            question_copy_rate=_mean_at(copies, q_idx), grounded_share=_mean_at(grounded, q_idx),
            reward_mean=float(np.mean(srw)) if srw else None,
            token_entropy_mean=float(np.mean(ste)) if ste else None))
    return series


def _entropy_law(series: list[StepStats], levels: Mapping[str, LevelStats]) -> dict[str, Any]:
    """The entropy law R = -a exp(H) + b fitted over the steps (token entropy where known, else the
    primary template level's)."""
    law_h, law_r = [], []
    lv = "slot" if "slot" in levels else next(iter(levels), None)
    kind = "token" if any(s.token_entropy_mean is not None for s in series) else f"template:{lv}"
    for s in series:
        h = s.token_entropy_mean if kind == "token" else (s.levels[lv].entropy if lv in s.levels else None)
        if h is not None and s.reward_mean is not None:
            law_h.append(h)
            law_r.append(s.reward_mean)
    fit = M.fit_entropy_law(law_h, law_r)
    fit["entropy"] = kind
    return {"entropy_law": fit, "entropy_law_points": [[h, r] for h, r in zip(law_h, law_r)]}


def _success(ep: Any, threshold: float) -> bool | None:
    """Whether an episode succeeded: its success flag, else its reward against ``threshold``; None (unknown,
    never False) when the record has neither."""
    if ep.success is not None:
        return bool(ep.success)
    if ep.reward is None:
        return None
    return bool(ep.reward >= threshold - 1e-9)


def pass_curves(episodes: Sequence[Any], success: Sequence[bool | None],
                groups: Sequence[Any]) -> dict[str, Any] | None:
    """Unbiased pass@k and pass^k over the questions sampled >= 2 times, at the last step that has them
    (episodes of unknown success left out)."""
    by_step: dict[Any, list[int]] = {}
    for i, e in enumerate(episodes):
        by_step.setdefault(e.step, []).append(i)
    chosen = None
    idx: list[int] = list(range(len(episodes)))
    stepped = sorted(s for s in by_step if s is not None)
    for s in reversed(stepped):
        g: dict[Any, int] = Counter(groups[i] for i in by_step[s] if groups[i] is not None)
        if any(v >= 2 for v in g.values()):
            idx, chosen = by_step[s], s
            break
    per: dict[Any, list[int]] = {}
    for i in idx:
        if groups[i] is not None and success[i] is not None:
            per.setdefault(groups[i], []).append(i)
    per = {k: v for k, v in per.items() if len(v) >= 2}
    if not per:
        return None
    nmin = min(len(v) for v in per.values())
    results = [(len(v), sum(1 for i in v if success[i])) for v in per.values()]
    ks = sorted({k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if k <= nmin} | {nmin})
    return {"step": chosen, "n_questions": len(results), "samples_min": nmin, "k": ks,
            "pass_at_k": [M.mean_pass_at_k(results, k) for k in ks],
            "pass_hat_k": [M.mean_pass_hat_k(results, k) for k in ks],
            "cover_at_0.5": M.cover_at(results, 0.5)}


def analyze_episodes(episodes: Sequence[Any], *, templater: Templater | None = None,
                     levels: Sequence[str] = TEXT_LEVELS, semantic: Callable[[list[str]], Sequence[Any]] | None = None,
                     group_by_step: bool = True, n: int | Mapping[str, int] | None = None, n_boot: int = 200,
                     seed: int = 0, **kw: Any) -> RunStats:
    """``run_stats(label_episodes(...))`` in one call."""
    lab = label_episodes(episodes, templater=templater or Templater(), levels=levels, semantic=semantic,
                         group_by_step=group_by_step)
    return run_stats(lab, n=n, n_boot=n_boot, seed=seed, **kw)


def flat_metrics(stats: RunStats, *, prefix: str = "diversity") -> dict[str, float]:
    """The tracker's flat scalars, named by the core's fields: ``diversity/<level>/<field>``,
    ``diversity/strategy/<field>`` (and ``.../share/<class>``), ``diversity/well_formed/...``,
    ``diversity/process/<field>``, ``diversity/text/<field>``, ``diversity/moves/<move>`` (shares),
    ``diversity/<run field>`` and ``policy/<field>``."""
    m: dict[str, float] = {}
    for lv, st in stats.levels.items():
        _level_metrics(m, f"{prefix}/{lv}", st)
    _level_metrics(m, f"{prefix}/strategy", stats.strategy)
    for lv, st in stats.well_formed.levels.items():
        _level_metrics(m, f"{prefix}/well_formed/{lv}", st)
    _run_metrics(m, prefix, stats)
    for k, v in stats.policy.items():
        if k in ("success_rate", "pass_at_k", "entropy_law", "entropy_law_points"):
            continue
        if isinstance(v, (int, float)) and not (k == "reward_mean" and math.isnan(v)):
            m[f"policy/{k}"] = float(v)
    return m


def _level_metrics(m: dict[str, float], p: str, st: LevelStats | None) -> None:
    """One level's (or the strategy classes') scalars under ``p``."""
    if st is None:
        return
    for f in ("entropy", "miller_madow_entropy", "normalized_entropy", "effective_number", "inverse_simpson",
              "top1_mass", "top5_mass", "n_templates", "rank_beta"):
        m[f"{p}/{f}"] = float(getattr(st, f))
    for f in ("within_question_entropy", "first_query_within_entropy"):
        v = getattr(st, f)
        m[f"{p}/{f}"] = float("nan") if v is None else float(v)
    m[f"{p}/n"] = float(st.n)
    for q in ("0", "2"):
        m[f"{p}/hill_{q}"] = float(st.hill[q])
    if st.mi_question is not None:
        m[f"{p}/mi_question"] = float(st.mi_question)
    lo, hi = st.entropy_ci
    if lo is not None and not math.isnan(lo):
        m[f"{p}/entropy_ci_low"], m[f"{p}/entropy_ci_high"] = float(lo), float(hi)
    for c, v in (st.distribution or {}).items():
        m[f"{p}/share/{c}"] = float(v)


def _run_metrics(m: dict[str, float], prefix: str, stats: RunStats) -> None:
    """The run's counts and shares, process figures, text statistics and move shares."""
    m[f"{prefix}/n_episodes"] = float(stats.n_episodes)
    m[f"{prefix}/n_queries"] = float(stats.n_queries)
    for f in ("question_copy_rate", "malformed_share", "off_task_share", "grounded_share"):
        m[f"{prefix}/{f}"] = float(getattr(stats, f))
    for fld in fields(ProcessStats):
        v = getattr(stats.process, fld.name)
        if not (fld.name in ("new_document_yield", "ctar") and math.isnan(v)):
            m[f"{prefix}/process/{fld.name}"] = float(v)
    if stats.n_queries:
        for k, v in stats.text.items():
            m[f"{prefix}/text/{k}"] = float(v)
    if sum(stats.moves.counts.values()):
        m[f"{prefix}/moves/entropy"] = float(stats.moves.entropy)
        for mv, v in stats.moves.shares.items():
            m[f"{prefix}/moves/{mv}"] = float(v)


__all__ = ["DEFINITIONS", "Labels", "LevelStats", "MoveStats", "ProcessStats", "RunStats", "StepStats",
           "SubsetStats", "Warning_", "analyze_episodes", "ctar", "episode_from_trajectory", "episode_moves",
           "flat_metrics", "label_episodes", "pass_curves", "run_stats", "step_evidence", "step_titles",
           "subset_sizes", "warnings_of"]
