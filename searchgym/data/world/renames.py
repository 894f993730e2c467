"""Generator version 3: former names, and the ``shift_renamed`` and ``shift_homonym`` splits.

A former-name passage (title ``O (former name)``, text ``N was formerly known as O.``) says that the entity
now called N once bore the name O. Two kinds, one question split each (attribute questions by the name O,
one relation, a train phrasing):

- renamed: O is a fresh name nobody bears now (no passage states facts under it). ``shift_renamed`` asks
  about O and means N: the rename has to be followed (search O, read N, search N with the relation).
- homonym: O is the name of another entity X of N's type, whose facts are stated under O. ``shift_homonym``
  asks about X by its name O and means X: following the rename to N answers N's value, which is wrong; the
  question is answered by querying O with the relation, in one hop.

The entity named O (homonym) is never the subject of a question of the other splits (in all but a world of a
few dozen entities) and no entity used has a nickname, so every question of versions 1-2 reads as before. All of
it draws from its own random streams and is appended after the rest (the version-2 passages and splits are a
byte-identical prefix of a version-3 world).
"""

from __future__ import annotations

import random

from ..qa import QAExample
from .generate import Built
from .names import NameFactory, stem
from .schema import HOPS, RELS_OF, RENAME_PATTERNS, RENAME_TYPES, SHIFT_HOMONYM, SHIFT_RENAMED, TRAIN_STYLES

RENAMED, HOMONYM = "renamed", "homonym"


def _fresh_name(nf: NameFactory, etype: str) -> str:
    rng = nf.rng
    while True:
        if etype == "person":
            return nf.person()[0]
        name = {"city": nf.city, "organisation": nf.organisation}.get(etype, nf.title)(stem(rng))
        if name is not None:
            return name


def make_renames(seed: int, built: Built, n_each: int, subjects: set[str], bridges: set[str], aliased: set[str]
                 ) -> list[tuple[str, int, int | None, str]]:
    """``(kind, n, x, former_name)`` for up to ``n_each`` renamed and ``n_each`` homonym entries: entity ``n``
    was formerly called ``former_name``; for a homonym that is the name of entity ``x`` (None for renamed).

    No entity is used twice, none with a nickname (``aliased``). Preferred are entities no question names
    (neither in ``subjects`` nor in ``bridges``), then bridges. A homonym's ``x`` is never a question's
    subject (a strategy that follows renames would read that question differently), except in a world so small
    that every entity is one (then the split would be empty)."""
    rng = random.Random(f"searchgym-world/{seed}/renames")
    nf = NameFactory(random.Random(f"searchgym-world/{seed}/former-names"))
    for e in built.entities:
        nf.lowered.add(e.name.lower())
    nf.lowered |= {t.lower() for t in subjects | bridges | aliased}
    ents = built.entities

    def tier(i: int) -> int:
        name = ents[i].name
        return 3 if name in aliased else 2 if name in subjects else 1 if name in bridges else 0

    pools = {t: [[i for i in built.by_type[t] if tier(i) == k] for k in range(3)] for t in RENAME_TYPES}
    tiny = not any(pools[t][0] or pools[t][1] for t in RENAME_TYPES)

    def draw(etype: str, tiers: int) -> int | None:
        for pool in pools[etype][:tiers]:
            if pool:
                return pool.pop(rng.randrange(len(pool)))
        return None

    out: list[tuple[str, int, int | None, str]] = []
    for kind in (RENAMED, HOMONYM):
        types = list(RENAME_TYPES)
        made = 0
        while types and made < n_each:
            etype = rng.choice(types)
            x = draw(etype, 3 if tiny else 2) if kind == HOMONYM else None
            n = draw(etype, 3) if kind == RENAMED or x is not None else None
            if n is None:
                types.remove(etype)
                continue
            out.append((kind, n, x, ents[x].name if x is not None else _fresh_name(nf, ents[n].etype)))
            made += 1
    return out


def rename_passages(seed: int, built: Built, renames: list[tuple[str, int, int | None, str]]
                    ) -> tuple[list[str], list[str]]:
    """One passage per rename: title ``O (former name)``, text ``N was formerly known as O.`` (or another
    pattern)."""
    rng = random.Random(f"searchgym-world/{seed}/rename-passages")
    titles, texts = [], []
    for _, n, _, former in renames:
        pat = RENAME_PATTERNS[rng.randrange(len(RENAME_PATTERNS))]
        titles.append(f"{former} (former name)")
        texts.append(pat.format(N=built.entities[n].name, O=former))
    return titles, texts


def make_rename_questions(seed: int, built: Built, renames: list[tuple[str, int, int | None, str]],
                          rows: list[int], n_questions: int, id_of_row, first_index: int,
                          seen: set[str]) -> list[QAExample]:
    """``n_questions`` attribute questions by the former name for each of ``shift_renamed`` and
    ``shift_homonym`` (renamed first), ids from ``first_index`` on. ``rows``: each rename's passage row."""
    from .questions import _ask, answers_for

    ents = built.entities
    out: list[QAExample] = []
    for kind, split in ((RENAMED, SHIFT_RENAMED), (HOMONYM, SHIFT_HOMONYM)):
        rng = random.Random(f"searchgym-world/{seed}/{split}")
        idx = [j for j, r in enumerate(renames) if r[0] == kind]
        made, tries = 0, 0
        while idx and made < n_questions and tries < n_questions * 60:
            tries += 1
            j = idx[rng.randrange(len(idx))]
            _, n, x, former = renames[j]
            now = ents[n]
            meant = now if x is None else ents[x]  # the entity the question is about
            r = rng.choice(RELS_OF[now.etype])
            style = TRAIN_STYLES[rng.randrange(len(TRAIN_STYLES))]
            q = _ask(r, former, style)
            if q in seen:
                continue
            answers = answers_for(ents, meant, r)
            if x is not None and set(answers) & set(answers_for(ents, now, r)):
                continue  # following the rename would be right too
            seen.add(q)
            types = sorted({meant.etype} | ({r.target} if r.kind == "entity" and r.target else set()))
            meta = {"relations": [r.key], "subject": [meant.name], "bridge": [], "entity_types": types,
                    "answer_type": r.answer_type, "former_name": former, "renamed_to": now.name,
                    "family": "attribute", "hops": HOPS["attribute"], "phrasing": f"attribute.{style}",
                    "style": style, "split": split}
            sup = ([id_of_row(rows[j])] if x is None else []) + [id_of_row(meant.rows[r.name])]
            out.append(QAExample(id=f"w{seed}-q{first_index + len(out):06d}", question=q, answers=answers,
                                 supporting_ids=sup, metadata=meta))
            made += 1
    return out
