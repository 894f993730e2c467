"""Rewards: SQuAD-style normalisation, EM / sub-EM / F1, shaping terms, and their composition.

>>> from searchgym.rewards import compute_score, make_reward, RewardContext
>>> compute_score("The Eiffel Tower!", ["eiffel tower"])
1.0
>>> r = make_reward("em - 0.1*search_cost")
>>> r(RewardContext(prediction="Paris", answers=["paris"], num_searches=2, answered=True))
0.8
"""

from searchgym.rewards.compose import REWARD_TERMS, Reward, make_reward, register_reward
from searchgym.rewards.metrics import METRICS, compute_score, em, f1, sub_em
from searchgym.rewards.normalize import normalize_answer
from searchgym.rewards.shaping import RewardContext, format_term, retrieval_hit_term, search_count_term

__all__ = [
    "METRICS", "REWARD_TERMS", "Reward", "RewardContext", "compute_score", "em", "f1", "format_term",
    "make_reward", "normalize_answer", "register_reward", "retrieval_hit_term", "search_count_term", "sub_em",
]
