"""The online ``DiversityTracker``: fed the trajectories of each policy step, logs diversity metrics.

Example::

    tracker = DiversityTracker(log_dir="runs/rl", titles=corpus_titles, alarm_fraction=0.5)
    for step in range(num_steps):
        trajs = collect_rollouts(...)                 # list[searchgym.Trajectory] (or their dicts)
        metrics = tracker.update(step, trajs, token_entropies=ent)   # flat dict of floats
        if metrics["alarm/collapse"]:
            ...                                       # template entropy fell below 50% of its start

Metric names (one JSONL line per update in ``log_dir/diversity.jsonl``, and TensorBoard scalars when
``torch.utils.tensorboard`` or ``tensorboardX`` is importable):

* ``diversity/<level>/{entropy, miller_madow_entropy, normalized_entropy, effective_number,
  inverse_simpson, top1_mass, top5_mass, n_templates, rank_beta, within_question_entropy,
  first_query_within_entropy}`` for each template level;
* ``diversity/text/{distinct_1, distinct_2}``, ``diversity/queries/{n, per_episode,
  duplicate_rate}``, ``diversity/moves/entropy``, ``diversity/moves/<move>`` (shares),
  ``diversity/process/{new_document_yield, ctar}``;
* ``policy/token_entropy_{mean, p80, frac_above_p80, frac_below_0.01}``, ``policy/reward_mean``;
* ``alarm/collapse`` (0/1) and ``alarm/entropy_ratio`` (current / baseline at ``alarm_level``).

Retrieved titles for slot masking are read from a step's ``extra`` keys ``titles`` /
``retrieved_titles`` / ``doc_titles``; evidence text for ``new_hop`` and CTAR from ``titles`` plus
``observation`` / ``information`` / ``evidence`` when present.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.diversity import metrics as M
from searchgym.diversity.moves import MOVES, _moves, moves_and_ctar
from searchgym.diversity.templates import LEVELS, TEXT_LEVELS, Templater, normalize
from searchgym.errors import ConfigError
from searchgym.trajectory import Trajectory

log = logging.getLogger(__name__)

_TITLE_KEYS = ("titles", "retrieved_titles", "doc_titles")
_EVIDENCE_KEYS = ("observation", "information", "evidence")


def step_titles(step: Any) -> list[str]:
    titles = getattr(step, "titles", None)
    if titles:
        return [str(x) for x in titles]
    extra = getattr(step, "extra", None) or {}
    for k in _TITLE_KEYS:
        v = extra.get(k)
        if v:
            return [str(x) for x in v]
    return []


def step_evidence(step: Any) -> list[str]:
    return _step_evidence(step, step_titles(step))


def _step_evidence(step: Any, titles: list[str]) -> list[str]:
    """``step_evidence`` given the step's already-read ``step_titles``."""
    extra = getattr(step, "extra", None) or {}
    out = list(titles)
    for k in _EVIDENCE_KEYS:
        v = extra.get(k)
        if isinstance(v, str) and v:
            out.append(v)
        elif isinstance(v, list):
            out.extend(str(x) for x in v)
    return out


def _step_queries(step: Any) -> list[str]:
    """The queries of one search step (several for a parallel search), as ``Trajectory.queries``."""
    return list(step.queries)


def _as_traj(t: Any) -> Trajectory:
    if isinstance(t, Trajectory):
        return t
    if isinstance(t, Mapping):
        return Trajectory.from_dict(dict(t))
    raise ConfigError(f"DiversityTracker.update takes Trajectory objects or their dicts, got {type(t).__name__}")


class _TBWriter:
    """TensorBoard scalars when a SummaryWriter is importable; otherwise nothing."""

    def __init__(self, log_dir: Path):
        self.writer = None
        try:
            from torch.utils.tensorboard import SummaryWriter  # type: ignore
        except ImportError:
            try:
                from tensorboardX import SummaryWriter  # type: ignore
            except ImportError:
                log.debug("no TensorBoard writer installed; logging JSONL only")
                return
        self.writer = SummaryWriter(str(log_dir))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        if self.writer is None:
            return
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class DiversityTracker:
    """Online query-diversity tracker (see module docstring for the metric names).

    Args:
        levels: template levels to track (``string``, ``slot``, ``content``, ``pos``, ``semantic``).
        log_dir: where ``diversity.jsonl`` (and TensorBoard events) go; None keeps everything in memory.
        titles: known entity names (corpus titles) for the slot level; ``entity_types`` types them.
        alarm_fraction: the collapse alarm fires when the entropy at ``alarm_level`` falls below this
            fraction of its baseline (the mean of the first ``baseline_updates`` updates with queries).
        embedder: ``list[str] -> array`` for the semantic level (default all-MiniLM-L6-v2, offline).
        tensorboard: also write TensorBoard scalars when a writer is installed.
    """

    def __init__(self, levels: Sequence[str] = ("string", "slot", "content", "pos"), *,
                 log_dir: str | os.PathLike | None = None, titles: Iterable[str] = (),
                 entity_types: Mapping[str, str] | None = None, alarm_fraction: float = 0.5,
                 alarm_level: str | None = None, baseline_updates: int = 1, embedder: Any = None,
                 semantic_threshold: float = 0.25, tensorboard: bool = True):
        levels = tuple(levels)
        bad = [lv for lv in levels if lv not in LEVELS]
        if bad or not levels:
            raise ConfigError(f"unknown template level(s) {bad or levels}; choose from {', '.join(LEVELS)}")
        if not 0.0 < alarm_fraction < 1.0:
            raise ConfigError(f"alarm_fraction must be in (0, 1), got {alarm_fraction}")
        self.levels = levels
        self._text_levels = tuple(lv for lv in levels if lv in TEXT_LEVELS)
        self.templater = Templater(titles, entity_types=entity_types)
        self.alarm_fraction = float(alarm_fraction)
        if alarm_level is None:
            alarm_level = "slot" if "slot" in levels else levels[0]
        if alarm_level not in levels:
            raise ConfigError(f"alarm_level {alarm_level!r} is not one of the tracked levels {levels}")
        self.alarm_level = alarm_level
        self.baseline_updates = max(1, int(baseline_updates))
        self._baseline_vals: list[float] = []
        self.baseline: float | None = None
        self.clusterer = None
        if "semantic" in levels:
            from searchgym.diversity.semantic import SemanticClusterer

            self.clusterer = SemanticClusterer(embedder, threshold=semantic_threshold)
        self.history: list[dict[str, float]] = []
        self.alarms: list[dict[str, Any]] = []
        self.cumulative: dict[str, Counter] = {lv: Counter() for lv in levels}
        self.cumulative_moves: Counter = Counter()
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self._fh = None
        self._tb = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._fh = (self.log_dir / "diversity.jsonl").open("a", encoding="utf-8")
            if tensorboard:
                self._tb = _TBWriter(self.log_dir)

    # ------------------------------------------------------------------------------------------
    def template_episode(self, traj: Trajectory) -> dict[str, list[str]]:
        """Templates of the queries of one episode at each text level (titles seen so far in it count)."""
        searches = [s for s in traj.steps if s.kind == "search"]
        per_step = [_step_queries(s) for s in searches]
        return self._template_steps(traj.question, per_step, [step_titles(s) for s in searches])

    def _template_steps(self, question: str | None, per_step: list[list[str]],
                        titles: list[list[str]]) -> dict[str, list[str]]:
        """``template_episode`` from an episode's per-search-step queries and retrieved titles."""
        levels = self._text_levels
        out: dict[str, list[str]] = {lv: [] for lv in levels}
        if not levels:
            return out
        templates = self.templater.templates
        seen: tuple[str, ...] = ()
        for qs, ts in zip(per_step, titles):
            for q in qs:
                for lv, t in templates(q, levels, question=question, retrieved_titles=seen).items():
                    out[lv].append(t)
            if ts:
                seen = seen + tuple(ts)
        return out

    def update(self, step: int, trajectories: Sequence[Any], token_entropies: Any = None,
               rewards: Sequence[float] | None = None) -> dict[str, float]:
        """Take one policy step's trajectories; return (and log) the flat metric dict."""
        # The update allocates many small short-lived objects; in a trainer with a large heap they would
        # trigger full cyclic-GC passes. Reference counting frees them anyway, so pause the collector.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            m = self._update(step, trajectories, token_entropies, rewards)
        finally:
            if was_enabled:
                gc.enable()
        self._log(step, m)
        return m

    def _update(self, step: int, trajectories: Sequence[Any], token_entropies: Any,
                rewards: Sequence[float] | None) -> dict[str, float]:
        trajs = [_as_traj(t) for t in trajectories]
        m: dict[str, float] = {"step": float(step)}
        per_level: dict[str, list[str]] = {lv: [] for lv in self.levels}
        # per level: question -> templates of all its queries / of the first query of each episode
        all_by_q: dict[str, dict[str, list[str]]] = {lv: {} for lv in self.levels}
        first_by_q: dict[str, dict[str, list[str]]] = {lv: {} for lv in self.levels}
        all_queries: list[str] = []
        episode_queries: list[tuple[str, list[str]]] = []
        moves: list[str] = []
        dup_rates: list[float] = []
        yields: list[float] = []
        ctars: list[float] = []
        text_levels = self._text_levels
        templates = self.templater.templates
        for tr in trajs:
            searches = [s for s in tr.steps if s.kind == "search"]
            per_step = [_step_queries(s) for s in searches]
            qid = tr.question_id or tr.question
            if len(per_step) == 1 and len(per_step[0]) == 1:
                # The common episode: one search, one query. Same values as the general path below:
                # no titles seen before it, duplicate rate 0, new-document yield 1 when it has docs.
                qs = per_step[0]
                all_queries.append(qs[0])
                episode_queries.append((qid, qs))
                if text_levels:
                    for lv, t in templates(qs[0], text_levels, question=tr.question).items():
                        per_level[lv].append(t)
                        group = all_by_q[lv].get(qid)
                        if group is None:
                            all_by_q[lv][qid] = [t]
                        else:
                            group.append(t)
                        first = first_by_q[lv].get(qid)
                        if first is None:
                            first_by_q[lv][qid] = [t]
                        else:
                            first.append(t)
                dup_rates.append(0.0)
                if searches[0].doc_ids:
                    yields.append(1.0)
                continue
            qs = [q for x in per_step for q in x]  # == tr.queries
            all_queries.extend(qs)
            episode_queries.append((qid, qs))
            titles = [step_titles(s) for s in searches]
            if text_levels:
                tpl = self._template_steps(tr.question, per_step, titles)
                for lv, ts in tpl.items():
                    per_level[lv].extend(ts)
                    group = all_by_q[lv].get(qid)
                    if group is None:
                        group = all_by_q[lv][qid] = []
                    group.extend(ts)
                    if ts:  # (a question's first-query group starts at its first episode with a query)
                        first_by_q[lv].setdefault(qid, []).append(ts[0])
            if qs:
                dup_rates.append(M.duplicate_query_rate(qs))
            if len(qs) >= 2:  # one query: no move, and its CTAR is undefined (NaN, dropped)
                if len(qs) == len(searches):
                    evidence = [_step_evidence(s, t) for s, t in zip(searches, titles)]
                    has_ev = any(evidence)
                    mv, ct = moves_and_ctar(qs, evidence if has_ev else None, question=tr.question)
                    moves.extend(mv)
                    ctars.extend(x for x in ct if not math.isnan(x))
                else:  # parallel queries in one step: no per-query evidence alignment
                    moves.extend(_moves(qs, None, tr.question))
            docs = [s.doc_ids for s in searches if s.doc_ids]
            if docs:
                y = M.new_document_yield(docs)
                if not math.isnan(y):
                    yields.append(y)
        if self.clusterer is not None and all_queries:
            labels = self.clusterer.assign([normalize(q) for q in all_queries])
            per_level["semantic"] = labels
            i = 0
            for qid, qs in episode_queries:
                lab = labels[i:i + len(qs)]
                i += len(qs)
                all_by_q["semantic"].setdefault(qid, []).extend(lab)
                if lab:
                    first_by_q["semantic"].setdefault(qid, []).append(lab[0])

        for lv in self.levels:
            ts = per_level.get(lv, [])
            if not ts:
                continue
            counts = Counter(ts)  # counted once: the cumulative counts and every statistic reuse it
            self.cumulative[lv].update(counts)
            st = M.template_stats(counts)
            for key in ("entropy", "miller_madow_entropy", "normalized_entropy", "effective_number",
                        "inverse_simpson", "top1_mass", "top5_mass", "n_templates", "rank_beta"):
                m[f"diversity/{lv}/{key}"] = float(st[key])
            m[f"diversity/{lv}/within_question_entropy"] = M.within_entropy(all_by_q[lv])
            m[f"diversity/{lv}/first_query_within_entropy"] = M.within_entropy(first_by_q[lv])

        n_q = len(all_queries)
        m["diversity/queries/n"] = float(n_q)
        m["diversity/queries/per_episode"] = n_q / len(trajs) if trajs else float("nan")
        m["diversity/queries/duplicate_rate"] = float(np.mean(dup_rates)) if dup_rates else float("nan")
        if all_queries:
            dn = M.distinct_ns(all_queries, (1, 2))
            m["diversity/text/distinct_1"], m["diversity/text/distinct_2"] = dn[1], dn[2]
        self.cumulative_moves.update(moves)
        if moves:
            m["diversity/moves/entropy"] = M.move_entropy(moves)
            mc = Counter(moves)
            for mv in MOVES:
                m[f"diversity/moves/{mv}"] = mc.get(mv, 0) / len(moves)
        if yields:
            m["diversity/process/new_document_yield"] = float(np.mean(yields))
        if ctars:
            m["diversity/process/ctar"] = float(np.mean(ctars))

        for k, v in M.token_entropy_summary(token_entropies).items():
            m[f"policy/{k}"] = v
        rw = list(rewards) if rewards is not None else [t.reward for t in trajs]
        if rw:
            m["policy/reward_mean"] = float(np.mean(rw))

        self._check_alarm(step, m)
        self.history.append(m)
        return m

    # ------------------------------------------------------------------------------------------
    def _check_alarm(self, step: int, m: dict[str, float]) -> None:
        key = f"diversity/{self.alarm_level}/entropy"
        h = m.get(key)
        m["alarm/collapse"] = 0.0
        if h is None or math.isnan(h):
            return
        if self.baseline is None:
            self._baseline_vals.append(h)
            if len(self._baseline_vals) >= self.baseline_updates:
                self.baseline = float(np.mean(self._baseline_vals))
            return
        ratio = h / self.baseline if self.baseline > 0 else float("nan")
        m["alarm/entropy_ratio"] = ratio
        if self.baseline > 0 and h < self.alarm_fraction * self.baseline:
            m["alarm/collapse"] = 1.0
            alarm = {"step": int(step), "level": self.alarm_level, "entropy": float(h),
                     "baseline": float(self.baseline), "fraction": self.alarm_fraction}
            self.alarms.append(alarm)
            log.warning("query-template collapse at step %s: %s entropy %.3f < %.2f x baseline %.3f",
                        step, self.alarm_level, h, self.alarm_fraction, self.baseline)

    def _log(self, step: int, m: dict[str, float]) -> None:
        if self._fh is not None:
            rec = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in m.items()}
            rec["step"] = int(step)
            self._fh.write(json.dumps(rec) + "\n")
            self._fh.flush()
        if self._tb is not None:
            self._tb.log(int(step), {k: v for k, v in m.items() if k != "step"})

    def summary(self, top: int = 10) -> dict[str, Any]:
        """Cumulative template statistics over every update, the top templates, moves and alarms."""
        levels = {}
        for lv, c in self.cumulative.items():
            if not c:
                continue
            st = M.template_stats(c)
            st["top_templates"] = [[t, int(n)] for t, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
            levels[lv] = st
        return {
            "updates": len(self.history),
            "levels": levels,
            "moves": dict(self.cumulative_moves),
            "move_entropy": M.entropy(self.cumulative_moves) if self.cumulative_moves else None,
            "baseline": self.baseline,
            "alarms": list(self.alarms),
            "first": self.history[0] if self.history else None,
            "last": self.history[-1] if self.history else None,
        }

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            self._fh.close()
        if self._tb is not None:
            self._tb.close()

    def __enter__(self) -> DiversityTracker:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
