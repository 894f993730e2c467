"""Registers searchgym's environments with Gymnasium (called by ``import searchgym``)."""

from __future__ import annotations

ENV_IDS = ("searchgym/SearchQA-v0", "searchgym/SearchQA-Dense-v0", "searchgym/SearchQA-Hybrid-v0")

_SPECS = {
    "searchgym/SearchQA-v0": {"retriever": "bm25"},
    "searchgym/SearchQA-Dense-v0": {"retriever": "dense"},
    "searchgym/SearchQA-Hybrid-v0": {"retriever": "hybrid"},
}


def register_envs() -> None:
    """Register every searchgym env id (idempotent). Imports only gymnasium's registry."""
    from gymnasium.envs.registration import register, registry

    for env_id, kwargs in _SPECS.items():
        if env_id in registry:
            continue
        register(
            id=env_id,
            entry_point="searchgym.envs.env:SearchEnv",
            vector_entry_point="searchgym.envs.vector:SearchVectorEnv",
            kwargs=dict(kwargs, top_k=3, max_turns=4),
            nondeterministic=False,
        )
