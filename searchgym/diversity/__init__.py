"""Query-strategy diversity: templates, reformulation moves, metrics, the online tracker, offline analysis.

Public API::

    from searchgym.diversity import (DiversityTracker, Templater, query_template, classify_move, ctar,
                                     pass_at_k, pass_hat_k, mean_pass_at_k, fit_entropy_law, analyze_runs)

Definitions follow ``literature.md`` §1.2, §3, §4, §6; the modules document each one:
``templates`` (query -> template levels), ``moves`` (reformulation moves, CTAR), ``metrics``,
``semantic`` (embedding clusters), ``tracker`` (online), ``readers`` (run formats), ``report``.
"""

from __future__ import annotations

import importlib
from typing import Any

from searchgym.diversity.metrics import (
    CI,
    bootstrap_ci,
    chamfer_distance,
    compression_ratio,
    cover_at,
    distinct_n,
    duplicate_query_rate,
    effective_number,
    entropy,
    fit_entropy_law,
    inverse_simpson,
    js_divergence,
    mean_pairwise_distance,
    mean_pass_at_k,
    mean_pass_hat_k,
    miller_madow_entropy,
    move_entropy,
    new_document_yield,
    novelty,
    pass_at_k,
    pass_hat_k,
    rank_frequency_beta,
    rarefied,
    rarefy,
    self_bleu,
    template_stats,
    token_entropy_summary,
    top_k_mass,
    vendi_score,
    within_across,
)
from searchgym.diversity.moves import MOVES, classify_move, ctar, episode_moves
from searchgym.diversity.templates import LEVELS, TEXT_LEVELS, Templater, normalize, query_template
from searchgym.diversity.tracker import DiversityTracker

_LAZY = {
    "SemanticClusterer": "searchgym.diversity.semantic",
    "default_embedder": "searchgym.diversity.semantic",
    "analyze_runs": "searchgym.diversity.report",
    "read_run": "searchgym.diversity.readers",
    "Episode": "searchgym.diversity.readers",
}

__all__ = [
    "CI",
    "LEVELS",
    "MOVES",
    "TEXT_LEVELS",
    "DiversityTracker",
    "Episode",
    "SemanticClusterer",
    "Templater",
    "analyze_runs",
    "bootstrap_ci",
    "chamfer_distance",
    "classify_move",
    "compression_ratio",
    "cover_at",
    "ctar",
    "default_embedder",
    "distinct_n",
    "duplicate_query_rate",
    "effective_number",
    "entropy",
    "episode_moves",
    "fit_entropy_law",
    "inverse_simpson",
    "js_divergence",
    "mean_pairwise_distance",
    "mean_pass_at_k",
    "mean_pass_hat_k",
    "miller_madow_entropy",
    "move_entropy",
    "new_document_yield",
    "normalize",
    "novelty",
    "pass_at_k",
    "pass_hat_k",
    "query_template",
    "rank_frequency_beta",
    "rarefied",
    "rarefy",
    "read_run",
    "self_bleu",
    "template_stats",
    "token_entropy_summary",
    "top_k_mass",
    "vendi_score",
    "within_across",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'searchgym.diversity' has no attribute {name!r}")
