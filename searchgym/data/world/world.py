"""The ``World`` object: passages, questions and splits of one seeded procedural world."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from ...errors import ConfigError
from ...retrieval.base import Passage
from ..qa import QAExample
from .aliases import alias_passages, make_alias_questions, make_aliases, n_shift_strategy
from .generate import PASSAGES_PER_ENTITY, Built, Entity, build
from .questions import make_questions
from .renames import make_rename_questions, make_renames, rename_passages
from .schema import (
    ENTITY_TYPES,
    FAMILIES,
    HELD_OUT_FAMILY,
    HELD_OUT_STYLES,
    HELD_OUT_TYPE,
    SPLITS,
    SPLITS_V3,
    TRAIN_FAMILIES,
    TRAIN_STYLES,
    Plan,
)

# Bumped whenever the generator's output changes for the same arguments (the pinned fingerprint test
# in tests/test_data_world.py changes with it).
GENERATOR_VERSION = 2  # 2: the shift_strategy split (alias passages appended after the rest)
# The versions World.generate(version=...) makes. A newer version only appends passages and splits (each from
# its own random streams), so an older version's passages and splits are a byte-identical prefix of it.
# GENERATOR_VERSION stays what World.generate makes by default, so every default world keeps its bytes.
#   3: former-name passages appended after the alias passages, and the shift_renamed and shift_homonym
#      splits (renames.py)
VERSIONS = (2, 3)
LATEST_VERSION = 3
DEFAULT_N_ENTITIES = 1500  # ~2.9k passages, ~3k questions: the embedded default


def _default_questions(n_entities: int) -> int:
    return int(min(20_000, max(300, 2 * n_entities)))


@dataclass
class World:
    """A fictional world of entities, passages that state their facts, and questions about them.

    Make one with :meth:`World.generate` (or :func:`default_world`). The same arguments give a
    byte-identical corpus and question set on any machine.

    Attributes:
        passages: the corpus in index order; ids ``w{seed}-{row:06d}``.
        questions: every question; ``splits`` / ``split(name)`` group them by split.
        titles: entity names (the passage titles without qualifiers), in generation order.
        aliases: nickname -> entity name; one alias passage each, after all other passages (the
            ``shift_strategy`` split asks about entities by these nicknames).
    """

    seed: int
    n_entities: int
    confusable_share: float
    passages: list[Passage]
    questions: list[QAExample]
    entities: list[Entity] = field(repr=False)
    groups: dict[str, list[int]] = field(repr=False)
    _type_of: dict[str, str] = field(repr=False, default_factory=dict)
    aliases: dict[str, str] = field(repr=False, default_factory=dict)  # "the Amber Heron" -> entity name
    _splits: dict[str, list[QAExample]] = field(repr=False, default_factory=dict)
    version: int = GENERATOR_VERSION  # generator version (VERSIONS)

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def generate(cls, seed: int = 0, n_entities: int = 1000, *, confusable_share: float = 0.2,
                 n_questions: int | None = None, n_passages: int | None = None,
                 version: int = GENERATOR_VERSION) -> World:
        """Generate a world.

        Args:
            seed: the world seed; same seed, same world.
            n_entities: entity budget (about 1.85 passages per entity). Ignored if ``n_passages``.
            confusable_share: share of people / cities / companies / works made as near-duplicates of
                an earlier one (shared surname, shared stem, sequel-like title). 0 to 0.9.
            n_questions: total questions over all splits (default ``2 * n_entities``, at most 20,000).
            n_passages: approximate corpus size; overrides ``n_entities``.
            version: generator version (:data:`VERSIONS`); 3 adds former names and the ``shift_renamed``
                and ``shift_homonym`` splits.
        """
        if version not in VERSIONS:
            raise ConfigError(f"world version {version!r} is not one of {list(VERSIONS)}")
        if n_passages is not None:
            if n_passages < 50:
                raise ConfigError(f"n_passages={n_passages} is too small; use at least 50")
            n_entities = max(30, round(n_passages / PASSAGES_PER_ENTITY))
        if n_entities < 30:
            raise ConfigError(f"n_entities={n_entities} is too small; use at least 30")
        if not 0.0 <= confusable_share <= 0.9:
            raise ConfigError(f"confusable_share={confusable_share} must be between 0 and 0.9")
        built: Built = build(seed, n_entities, confusable_share)
        width = max(6, len(str(len(built.titles) - 1)))
        prefix = f"w{seed}-"
        ids = [f"{prefix}{i:0{width}d}" for i in range(len(built.titles))]
        nq = _default_questions(n_entities) if n_questions is None else int(n_questions)
        questions = make_questions(seed, built, nq, ids.__getitem__, Plan())
        # shift_strategy (generator version 2): alias passages and questions, appended after the rest
        n_alias_q = n_shift_strategy(nq)
        aliases = make_aliases(seed, built, (n_alias_q + 1) // 2)
        a_titles, a_texts = alias_passages(seed, built, aliases)
        first_row = len(built.titles)
        ids += [f"{prefix}{i:0{width}d}" for i in range(first_row, first_row + len(a_titles))]
        built.titles.extend(a_titles)
        built.texts.extend(a_texts)
        seen = {q.question for q in questions}
        questions += make_alias_questions(seed, built, aliases, list(range(first_row, len(built.titles))),
                                          n_alias_q, ids.__getitem__, len(questions), seen)
        if version >= 3:  # former names: shift_renamed and shift_homonym, appended after the rest (renames.py)
            subjects = {n for q in questions for n in q.metadata["subject"]}
            bridges = {n for q in questions for n in q.metadata["bridge"]}
            aliased = {built.entities[i].name for i, _ in aliases}
            renames = make_renames(seed, built, (n_alias_q + 3) // 4, subjects, bridges, aliased)  # ~4 q per name
            r_titles, r_texts = rename_passages(seed, built, renames)
            first_row = len(built.titles)
            ids += [f"{prefix}{i:0{width}d}" for i in range(first_row, first_row + len(r_titles))]
            built.titles.extend(r_titles)
            built.texts.extend(r_texts)
            questions += make_rename_questions(seed, built, renames, list(range(first_row, len(built.titles))),
                                               n_alias_q, ids.__getitem__, len(questions), seen)
        passages = [Passage(i, t, x) for i, t, x in zip(ids, built.titles, built.texts)]
        world = cls(seed=seed, n_entities=n_entities, confusable_share=confusable_share,
                    passages=passages, questions=questions, entities=built.entities, groups=built.groups,
                    version=version)
        world._type_of = {e.name: e.etype for e in built.entities}
        world.aliases = {a: built.entities[i].name for i, a in aliases}
        world._splits = {s: [] for s in (SPLITS_V3 if version >= 3 else SPLITS)}
        for q in questions:
            world._splits[q.metadata["split"]].append(q)
        return world

    @classmethod
    def generate_for_passages(cls, n_passages: int, seed: int = 0, **kw) -> World:
        """A world of about ``n_passages`` passages (within a few percent)."""
        return cls.generate(seed=seed, n_passages=n_passages, **kw)

    # -- questions ---------------------------------------------------------------------------
    @property
    def splits(self) -> dict[str, list[QAExample]]:
        return self._splits

    def split(self, name: str) -> list[QAExample]:
        if name not in self._splits:
            hint = (" (it exists in worlds of generator version 3: world_version=3)" if name in SPLITS_V3 else "")
            raise ConfigError(f"unknown split {name!r}; the world (version {self.version}) has "
                              f"{', '.join(self._splits)}{hint}")
        return self._splits[name]

    @property
    def families(self) -> list[str]:
        return list(FAMILIES)

    # -- entities ----------------------------------------------------------------------------
    @property
    def titles(self) -> list[str]:
        return [e.name for e in self.entities]

    def entity_type_of(self, name: str) -> str | None:
        """The type of the entity called ``name`` (a qualifier like ``" (career)"`` is ignored)."""
        t = self._type_of.get(name)
        if t is None and name.endswith(")") and " (" in name:
            t = self._type_of.get(name.rsplit(" (", 1)[0])
        return t

    @functools.cached_property
    def _by_name(self) -> dict[str, Entity]:
        return {e.name: e for e in self.entities}

    def entity(self, name: str) -> Entity:
        """The entity called ``name`` (KeyError if none)."""
        return self._by_name[name]

    @functools.cached_property
    def passage_by_id(self) -> dict[str, Passage]:
        return {p.id: p for p in self.passages}

    def passage(self, pid: str) -> Passage:
        return self.passage_by_id[pid]

    def __iter__(self) -> Iterator[Passage]:
        return iter(self.passages)

    def __len__(self) -> int:
        return len(self.passages)

    def fingerprint(self) -> str:
        """sha256 over the corpus and the questions (what the determinism tests compare)."""
        h = hashlib.sha256()
        for p in self.passages:
            h.update(f"{p.id}\t{p.title}\t{p.text}\n".encode())
        for q in self.questions:
            h.update(f"{q.id}\t{q.question}\t{q.answers}\t{q.supporting_ids}\t{sorted(q.metadata.items())}\n"
                     .encode())
        return h.hexdigest()

    def describe(self) -> dict:
        """Counts: passages, entities per type, questions per split and family."""
        per_type = {t: 0 for t in ENTITY_TYPES}
        for e in self.entities:
            per_type[e.etype] += 1
        fam = {s: {f: 0 for f in FAMILIES} for s in self._splits}
        for q in self.questions:
            fam[q.metadata["split"]][q.metadata["family"]] += 1
        return {"seed": self.seed, "version": self.version, "passages": len(self.passages), "entities": per_type,
                "questions": len(self.questions), "per_split_family": fam}


# Held-out design, exported for tests and docs.
HELD_OUT = {"family": HELD_OUT_FAMILY, "styles": HELD_OUT_STYLES, "type": HELD_OUT_TYPE,
            "train_families": TRAIN_FAMILIES, "train_styles": TRAIN_STYLES}


@functools.lru_cache(maxsize=8)
def default_world(seed: int = 0) -> World:
    """The embedded default world (about 2.9k passages, 3k questions), memoised per seed."""
    return World.generate(seed=seed, n_entities=DEFAULT_N_ENTITIES)
