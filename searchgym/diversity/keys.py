"""Which of the tracker's ``diversity/*`` figures a trainer logs: a default dozen, or all of them.

The tracker computes about 110 figures per batch (``docs/metrics.md`` explains every one). A trainer's log
shows :data:`DEFAULT_KEYS` unless it is asked for ``"all"`` (or an explicit list of keys and prefixes), so a
TRL or SkyRL dashboard leads with the figures worth watching.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from searchgym.errors import ConfigError

# the figures to watch (docs/metrics.md, "The few to watch"), in the order a dashboard shows them
DEFAULT_KEYS = (
    "diversity/slot/entropy",                   # query-template entropy: falls when RL squeezes
    "diversity/slot/effective_number",          # exp(entropy): "how many templates, equally used"
    "diversity/slot/top1_mass",                 # share of the most used template
    "diversity/slot/mi_question",               # does the template depend on the question?
    "diversity/string/entropy",                 # entropy of the literal query strings
    "diversity/string/n_templates",             # distinct query strings in the batch
    "diversity/strategy/entropy",               # entropy over the 8 strategy classes
    "diversity/strategy/top1_mass",             # share of the most used strategy
    "diversity/question_copy_rate",             # queries that copy the question
    "diversity/process/queries_per_episode",    # searches per episode
    "diversity/process/duplicate_query_rate",   # queries that repeat an earlier one of their episode
    "diversity/process/new_document_yield",     # share of retrieved documents not seen earlier
    "diversity/moves/entropy",                  # entropy of the reformulation moves
    "diversity/n_queries",                      # the batch's size, to read every figure above
)


def select(metrics: Mapping[str, float], which: str | Sequence[str] = "default") -> dict[str, float]:
    """The figures of ``metrics`` a trainer logs: ``"default"`` (:data:`DEFAULT_KEYS`), ``"all"``, or a list
    of keys and prefixes (``["diversity/slot/", "diversity/moves/entropy"]``)."""
    if which == "all":
        return dict(metrics)
    if which == "default":
        return {k: metrics[k] for k in DEFAULT_KEYS if k in metrics}
    if isinstance(which, str) or not isinstance(which, Sequence) or not all(isinstance(w, str) for w in which):
        raise ConfigError(f"diversity_metrics must be 'default', 'all' or a list of keys / prefixes, got {which!r}")
    return {k: v for k, v in metrics.items() if any(k == w or (w.endswith("/") and k.startswith(w)) for w in which)}


__all__ = ["DEFAULT_KEYS", "select"]
