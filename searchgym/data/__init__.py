"""QA data: the procedural knowledge world (the embedded default) and loaders for real QA files.

    from searchgym.data import default_world, World, load_qa
    world = default_world()                 # ~2.9k passages, 3k questions, memoised
    world.passages, world.split("train"), world.split("shift_family")
    load_qa("nq_search/test.parquet")       # Search-R1 / verl parquet, FlashRAG jsonl, HotpotQA, ...

Loaders and the exporter load on first use (they import pyarrow), so ``import searchgym.data`` is light.
"""

from __future__ import annotations

import importlib
from typing import Any

from searchgym.data.qa import QAExample
from searchgym.data.world import (
    ENTITY_TYPES,
    FAMILIES,
    HELD_OUT,
    HELD_OUT_FAMILY,
    HELD_OUT_STYLES,
    HELD_OUT_TYPE,
    SPLITS,
    World,
    default_world,
)

_LAZY = {
    "load_qa": "loaders",
    "load_search_r1_parquet": "loaders",
    "load_flashrag_jsonl": "loaders",
    "load_hotpotqa": "loaders",
    "load_musique": "loaders",
    "load_2wiki": "loaders",
    "load_hf_dataset": "loaders",
    "pooled_corpus": "loaders",
    "detect_format": "loaders",
    "LoadReport": "loaders",
    "QAList": "loaders",
    "export_world": "export",
    "SEARCH_R1_PROMPT": "export",
    "search_r1_prompt": "export",
}

__all__ = [
    "ENTITY_TYPES", "FAMILIES", "HELD_OUT", "HELD_OUT_FAMILY", "HELD_OUT_STYLES", "HELD_OUT_TYPE",
    "SEARCH_R1_PROMPT", "SPLITS", "LoadReport", "QAExample", "QAList", "World", "default_world",
    "detect_format", "export_world", "load_2wiki", "load_flashrag_jsonl", "load_hf_dataset", "load_hotpotqa",
    "load_musique", "load_qa", "load_search_r1_parquet", "pooled_corpus", "search_r1_prompt",
]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'searchgym.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"searchgym.data.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
