"""The ``shift_strategy`` split: attribute questions whose subject is named by a nickname only.

Some entities get a nickname ("the Amber Heron"), stated in one alias passage each, appended after every
other passage. A ``shift_strategy`` question asks one of the entity's attributes in a train phrasing
(``In what year was the Amber Heron born?``), so its answer format is one of the train families', but its
subject is not a name the corpus states facts about: querying the question (or the subject with the
relation) finds the alias passage and not the fact. The entity has to be looked up by its nickname first.

Everything here draws from its own random streams (``.../aliases`` and ``.../shift_strategy``) and runs
after the rest of the world is built, so the other passages and splits are byte-identical to a world
without this split.
"""

from __future__ import annotations

import random

from ..qa import QAExample
from .generate import Built
from .schema import (
    ALIAS_ADJECTIVES,
    ALIAS_NOUNS,
    ALIAS_PATTERNS,
    ALIAS_TYPES,
    HOPS,
    RELS_OF,
    SHIFT_STRATEGY,
    SHIFT_STRATEGY_SHARE,
    TRAIN_STYLES,
)


def n_shift_strategy(n_questions: int) -> int:
    return max(1, round(n_questions * SHIFT_STRATEGY_SHARE))


def make_aliases(seed: int, built: Built, n_aliases: int) -> list[tuple[int, str]]:
    """``(entity index, "the Adjective Noun")`` for up to ``n_aliases`` distinct entities."""
    rng = random.Random(f"searchgym-world/{seed}/aliases")
    pool = [i for t in ALIAS_TYPES for i in built.by_type[t]]
    combos = [f"the {a} {n}" for a in ALIAS_ADJECTIVES for n in ALIAS_NOUNS]
    k = min(n_aliases, len(pool), len(combos))
    ents = rng.sample(pool, k)
    names = rng.sample(combos, k)
    return list(zip(ents, names))


def alias_passages(seed: int, built: Built, aliases: list[tuple[int, str]]) -> tuple[list[str], list[str]]:
    """One passage per alias: title ``The Amber Heron``, text stating whose nickname it is."""
    rng = random.Random(f"searchgym-world/{seed}/alias-passages")
    titles, texts = [], []
    for idx, alias in aliases:
        cap = alias[:1].upper() + alias[1:]
        pat = ALIAS_PATTERNS[rng.randrange(len(ALIAS_PATTERNS))]
        text = pat.format(A=cap, a=alias, N=built.entities[idx].name)
        titles.append(cap)
        texts.append(text[:1].upper() + text[1:])
    return titles, texts


def make_alias_questions(seed: int, built: Built, aliases: list[tuple[int, str]], alias_rows: list[int],
                         n_questions: int, id_of_row, first_index: int, seen: set[str]) -> list[QAExample]:
    """``n_questions`` attribute questions about aliased entities, ids from ``first_index`` on."""
    from .questions import _ask, answers_for

    rng = random.Random(f"searchgym-world/{seed}/{SHIFT_STRATEGY}")
    ents = built.entities
    out: list[QAExample] = []
    tries = 0
    while aliases and len(out) < n_questions and tries < n_questions * 60:
        tries += 1
        j = rng.randrange(len(aliases))
        idx, alias = aliases[j]
        e = ents[idx]
        r = rng.choice(RELS_OF[e.etype])
        style = TRAIN_STYLES[rng.randrange(len(TRAIN_STYLES))]
        q = _ask(r, alias, style)
        if q in seen:
            continue
        seen.add(q)
        types = sorted({e.etype} | ({r.target} if r.kind == "entity" and r.target else set()))
        meta = {"relations": [r.key], "subject": [e.name], "bridge": [], "entity_types": types,
                "answer_type": r.answer_type, "alias": alias, "family": "attribute",
                "hops": HOPS["attribute"], "phrasing": f"attribute.{style}", "style": style,
                "split": SHIFT_STRATEGY}
        sup = [id_of_row(alias_rows[j]), id_of_row(e.rows[r.name])]
        out.append(QAExample(id=f"w{seed}-q{first_index + len(out):06d}", question=q,
                             answers=answers_for(ents, e, r), supporting_ids=sup, metadata=meta))
    return out
