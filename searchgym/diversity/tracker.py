"""The online ``DiversityTracker``: fed the trajectories of each policy step, logs diversity metrics.

Example::

    tracker = DiversityTracker(log_dir="runs/rl", titles=corpus_titles, alarm_fraction=0.5)
    for step in range(num_steps):
        trajs = collect_rollouts(...)                 # list[searchgym.Trajectory] (or their dicts)
        metrics = tracker.update(step, trajs, token_entropies=ent)   # flat dict of floats
        if metrics["alarm/collapse"]:
            ...                                       # template entropy fell below 50% of its start

Every figure comes from the one analysis core (``searchgym.diversity.core``): ``update`` runs
``label_episodes`` + ``run_stats`` on the batch and logs ``core.flat_metrics`` of the result, so the names
are the core's field names (one JSONL line per update in ``log_dir/diversity.jsonl``, and TensorBoard
scalars when ``torch.utils.tensorboard`` or ``tensorboardX`` is importable):

* ``diversity/<level>/{entropy, effective_number, inverse_simpson, hill_0, hill_2, n, miller_madow_entropy,
  normalized_entropy, top1_mass, top5_mass, n_templates, rank_beta, within_question_entropy,
  first_query_within_entropy, mi_question}`` for each template level, the same under
  ``diversity/strategy/`` (plus ``share/<class>``) and ``diversity/well_formed/<level>/``;
* ``diversity/{n_episodes, n_queries, question_copy_rate, malformed_share, off_task_share, grounded_share}``;
* ``diversity/process/{queries_per_episode, duplicate_query_rate, new_document_yield, ctar}``,
  ``diversity/text/{distinct_1, distinct_2}``, ``diversity/moves/entropy``, ``diversity/moves/<move>``
  (shares);
* ``policy/token_entropy_{mean, p80, frac_above_p80, frac_below_0.01}``, ``policy/reward_mean``;
* ``alarm/collapse`` (0/1) and ``alarm/entropy_ratio`` (current / baseline at ``alarm_level``).

Entropies are plug-in over the batch unless ``rarefy_n`` fixes a sample size (then every step is taken at
that size, and batches of unequal size compare fairly). Retrieved titles for slot masking are a step's
``titles`` (schema 2; older extras ``retrieved_titles`` / ``doc_titles`` too); evidence text for
``new_hop``, CTAR and the strategy classes is the titles plus ``observation`` / ``information`` /
``evidence`` extras when present.
"""

from __future__ import annotations

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
from searchgym.diversity.core import (
    Labels,
    RunStats,
    episode_from_trajectory,
    flat_metrics,
    label_episodes,
    run_stats,
    step_evidence,
    step_titles,
)
from searchgym.diversity.gcpause import gc_paused
from searchgym.diversity.templates import LEVELS, TEXT_LEVELS, Templater
from searchgym.errors import ConfigError
from searchgym.trajectory import Trajectory

log = logging.getLogger(__name__)

__all__ = ["DiversityTracker", "step_evidence", "step_titles"]


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
        rarefy_n: take entropies and Hill numbers at this many queries per update (rarefied; an update
            with fewer queries uses all of them and logs its ``n``). None: all queries of the update.
        n_boot: bootstrap replicates for ``entropy_ci_low/high`` (0: none; they cost time every update).
        mi_every: compute the question MI (``.../mi_question``) on every ``mi_every``-th update only (the
            1st, the (1 + mi_every)-th, ...); the others log no ``mi_question``. It is the costliest figure
            of a small batch (about a third of the update at 64 episodes); 1 (default): every update.
    """

    def __init__(self, levels: Sequence[str] = ("string", "slot", "content", "pos"), *,
                 log_dir: str | os.PathLike[str] | None = None, titles: Iterable[str] = (),
                 entity_types: Mapping[str, str] | None = None, alarm_fraction: float = 0.5,
                 alarm_level: str | None = None, baseline_updates: int = 1, embedder: Any = None,
                 semantic_threshold: float = 0.25, tensorboard: bool = True, rarefy_n: int | None = None,
                 n_boot: int = 0, mi_every: int = 1):
        levels = tuple(levels)
        bad = [lv for lv in levels if lv not in LEVELS]
        if bad or not levels:
            raise ConfigError(f"unknown template level(s) {bad or levels}; choose from {', '.join(LEVELS)}")
        if not 0.0 < alarm_fraction < 1.0:
            raise ConfigError(f"alarm_fraction must be in (0, 1), got {alarm_fraction}")
        if rarefy_n is not None and int(rarefy_n) < 1:
            raise ConfigError(f"rarefy_n must be a positive number of queries, got {rarefy_n}")
        self.rarefy_n = None if rarefy_n is None else int(rarefy_n)
        self.n_boot = max(0, int(n_boot))
        if int(mi_every) < 1:
            raise ConfigError(f"mi_every must be a positive number of updates, got {mi_every}")
        self.mi_every = int(mi_every)
        self._updates = 0
        self.last_stats: RunStats | None = None
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
        self.cumulative: dict[str, Counter[str]] = {lv: Counter() for lv in levels}
        self.cumulative_moves: Counter[str] = Counter()
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
        lab = label_episodes([episode_from_trajectory(_as_traj(traj))], templater=self.templater,
                             levels=self._text_levels, group_by_step=False)
        return {lv: lab.levels[lv] for lv in self._text_levels}

    def update(self, step: int, trajectories: Sequence[Any], token_entropies: Any = None,
               rewards: Sequence[float] | None = None) -> dict[str, float]:
        """Take one policy step's trajectories; return (and log) the flat metric dict."""
        # The update allocates many small short-lived objects; in a trainer with a large heap they would
        # trigger full cyclic-GC passes. Reference counting frees them anyway, so pause the collector.
        with gc_paused():
            m = self._update(step, trajectories, token_entropies, rewards)
        self._log(step, m)
        return m

    def stats(self, trajectories: Sequence[Any], token_entropies: Any = None,
              rewards: Sequence[float] | None = None) -> RunStats:
        """The core's typed statistics of one batch (no logging, no alarm, no cumulative counts)."""
        return self._stats([_as_traj(t) for t in trajectories], token_entropies, rewards)[0]

    def _stats(self, trajs: list[Trajectory], token_entropies: Any,
               rewards: Sequence[float] | None, with_mi: bool = True) -> tuple[RunStats, Labels]:
        episodes = [episode_from_trajectory(t) for t in trajs]
        semantic = (lambda texts: self.clusterer.assign(texts)) if self.clusterer is not None else None
        lab = label_episodes(episodes, templater=self.templater, levels=self.levels, semantic=semantic,
                             group_by_step=False)
        st = run_stats(lab, n=self.rarefy_n, n_boot=self.n_boot, seed=0, token_entropies=token_entropies,
                       rewards=rewards if rewards is not None else [t.reward for t in trajs], with_series=False,
                       with_mi=with_mi)
        return st, lab

    def _update(self, step: int, trajectories: Sequence[Any], token_entropies: Any,
                rewards: Sequence[float] | None) -> dict[str, float]:
        trajs = [_as_traj(t) for t in trajectories]
        st, lab = self._stats(trajs, token_entropies, rewards, with_mi=self._updates % self.mi_every == 0)
        self._updates += 1
        self.last_stats = st
        m: dict[str, float] = {"step": float(step)}
        m.update(flat_metrics(st))
        for lv, labels in lab.levels.items():
            if len(labels) == len(lab.texts):
                self.cumulative[lv].update(labels)
        self.cumulative_moves.update(mv for seq in lab.moves for mv in seq)
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
