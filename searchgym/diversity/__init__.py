"""Query-strategy diversity: templates, reformulation moves, metrics, the online tracker, offline analysis.

Public API::

    from searchgym.diversity import (DiversityTracker, Templater, query_template, classify_move, ctar,
                                     classify_strategy, analyze_episodes, analyze_runs, hill_numbers,
                                     rarefied_diversity, mutual_information, pass_at_k, fit_entropy_law)

Definitions follow ``literature.md`` §1.2, §3, §4, §5, §6; the modules document each one:
``templates`` (query -> template levels), ``strategy`` (query -> strategy class, word sources),
``moves`` (reformulation moves, CTAR), ``metrics``, ``semantic`` (embedding clusters), ``core`` (the one
analysis: episodes -> typed statistics, used by the tracker, the report and the squeeze evaluation),
``tracker`` (online), ``readers`` (run formats), ``report`` (offline).
"""

from __future__ import annotations

import importlib
from typing import Any

from searchgym.diversity.metrics import (
    CI,
    bootstrap_ci,
    chamfer_distance,
    compression_ratio,
    contained_ci,
    cover_at,
    distinct_n,
    duplicate_query_rate,
    effective_number,
    entropy,
    fit_entropy_law,
    hill_numbers,
    inverse_simpson,
    js_divergence,
    mean_pairwise_distance,
    mean_pass_at_k,
    mean_pass_hat_k,
    miller_madow_entropy,
    move_entropy,
    mutual_information,
    new_document_yield,
    novelty,
    pass_at_k,
    pass_hat_k,
    rank_frequency_beta,
    rarefied,
    rarefied_diversity,
    rarefy,
    self_bleu,
    template_stats,
    token_entropy_summary,
    top_k_mass,
    vendi_score,
    within_across,
)
from searchgym.diversity.moves import MOVES, classify_move, ctar, episode_moves
from searchgym.diversity.strategy import GROUNDED, STRATEGIES
from searchgym.diversity.strategy import classify as classify_strategy
from searchgym.diversity.templates import LEVELS, TEXT_LEVELS, Templater, normalize, query_template
from searchgym.diversity.tracker import DiversityTracker

_LAZY = {
    "analyze_episodes": "searchgym.diversity.core",
    "RunStats": "searchgym.diversity.core",
    "LevelStats": "searchgym.diversity.core",
    "SemanticClusterer": "searchgym.diversity.semantic",
    "default_embedder": "searchgym.diversity.semantic",
    "analyze_runs": "searchgym.diversity.report",
    "read_run": "searchgym.diversity.readers",
    "Episode": "searchgym.diversity.readers",
}

__all__ = [
    "CI",
    "GROUNDED",
    "LEVELS",
    "MOVES",
    "STRATEGIES",
    "TEXT_LEVELS",
    "DiversityTracker",
    "Episode",
    "LevelStats",
    "RunStats",
    "SemanticClusterer",
    "Templater",
    "analyze_episodes",
    "analyze_runs",
    "bootstrap_ci",
    "chamfer_distance",
    "classify_move",
    "classify_strategy",
    "compression_ratio",
    "contained_ci",
    "cover_at",
    "ctar",
    "default_embedder",
    "distinct_n",
    "duplicate_query_rate",
    "effective_number",
    "entropy",
    "episode_moves",
    "fit_entropy_law",
    "hill_numbers",
    "inverse_simpson",
    "js_divergence",
    "mean_pairwise_distance",
    "mean_pass_at_k",
    "mean_pass_hat_k",
    "miller_madow_entropy",
    "move_entropy",
    "mutual_information",
    "new_document_yield",
    "normalize",
    "novelty",
    "pass_at_k",
    "pass_hat_k",
    "query_template",
    "rank_frequency_beta",
    "rarefied",
    "rarefied_diversity",
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
