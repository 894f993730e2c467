"""Registers searchgym's environments with Gymnasium (called by ``import searchgym``).

The registered entry points are the small factories below rather than the classes themselves, so that
``gym.make`` can refuse one easy mistake before anything is built: a corpus of your own (``corpus=``, or
a server or Retriever object as ``retriever=``) with no ``dataset=``. Without the check, the env would
pose the embedded world's questions against your passages: episodes that look fine and mean nothing.
Asking the world's questions on purpose stays possible: name a world split, ``dataset="train"`` or
``split="dev"`` (e.g. a retrieval server that serves the world's index).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from searchgym.envs.sources import check_dataset_given

if TYPE_CHECKING:
    from searchgym.envs.env import SearchEnv
    from searchgym.envs.vector import SearchVectorEnv

ENV_IDS = ("searchgym/SearchQA-v0", "searchgym/SearchQA-Dense-v0", "searchgym/SearchQA-Hybrid-v0")

_SPECS = {
    "searchgym/SearchQA-v0": {"retriever": "bm25"},
    "searchgym/SearchQA-Dense-v0": {"retriever": "dense"},
    "searchgym/SearchQA-Hybrid-v0": {"retriever": "hybrid"},
}
DEFAULT_TOP_K = 3       # passages per search of every registered id
DEFAULT_MAX_TURNS = 4   # searches per episode of every registered id


def make_search_env(**kwargs: Any) -> SearchEnv:
    """``gym.make``'s entry point: :class:`~searchgym.envs.SearchEnv` after :func:`check_dataset_given`."""
    check_dataset_given(kwargs)
    from searchgym.envs.env import SearchEnv

    return SearchEnv(**kwargs)


def make_search_vector_env(num_envs: int = 1, **kwargs: Any) -> SearchVectorEnv:
    """``gym.make_vec``'s entry point: :class:`~searchgym.envs.SearchVectorEnv` after the same check."""
    check_dataset_given(kwargs)
    from searchgym.envs.vector import SearchVectorEnv

    return SearchVectorEnv(num_envs, **kwargs)


def register_envs() -> None:
    """Register every searchgym env id (idempotent). Imports only gymnasium's registry."""
    from gymnasium.envs.registration import register, registry

    for env_id, kwargs in _SPECS.items():
        if env_id in registry:
            continue
        register(
            id=env_id,
            entry_point="searchgym.envs.registration:make_search_env",
            vector_entry_point="searchgym.envs.registration:make_search_vector_env",
            kwargs=dict(kwargs, top_k=DEFAULT_TOP_K, max_turns=DEFAULT_MAX_TURNS),
            nondeterministic=False,
        )
