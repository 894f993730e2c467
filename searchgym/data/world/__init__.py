"""The procedural knowledge world: the embedded default corpus and questions."""

from .schema import ENTITY_TYPES, FAMILIES, HELD_OUT_FAMILY, HELD_OUT_STYLES, HELD_OUT_TYPE, SPLITS
from .world import HELD_OUT, World, default_world

__all__ = [
           "ENTITY_TYPES",
           "FAMILIES",
           "HELD_OUT",
           "HELD_OUT_FAMILY",
           "HELD_OUT_STYLES",
           "HELD_OUT_TYPE",
           "SPLITS",
           "World",
           "default_world",
]
