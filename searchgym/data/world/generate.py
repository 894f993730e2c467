"""Entities and passages of the procedural world (no questions here: see ``questions.py``).

Everything is drawn from ``random.Random`` instances seeded with strings derived from the world
seed, and every collection is a list or an insertion-ordered dict, so the output depends on the
seed alone (never on ``hash()`` randomisation or set order).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .names import NameFactory, stem
from .schema import (
    CURRENCIES,
    ENTITY_TYPES,
    FILLER,
    FILLER_OTHER,
    FILM_GENRES,
    INDUSTRIES,
    LANGUAGE_ENDINGS,
    NOVEL_GENRES,
    OCCUPATIONS,
    QUALIFIERS,
    REL,
    RELS_OF,
    SHORT_REF,
    TYPE_SHARES,
    article,
)

PASSAGES_PER_ENTITY = 1.94  # average, used to size a world from a passage budget


class Entity:
    """One entity: its type, unique name, attribute values and the passage row stating each fact.

    ``attrs`` maps a relation name (``"born_in"``) to an int (year, number, or the index of another
    entity) or a str (occupation, genre, ...). ``rows`` maps the same names to passage rows.
    """

    __slots__ = ("attrs", "etype", "group", "idx", "name", "rows", "short")

    def __init__(self, idx: int, etype: str, name: str, group: str, short: str):
        self.idx, self.etype, self.name, self.group, self.short = idx, etype, name, group, short
        self.attrs: dict[str, int | str] = {}
        self.rows: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"Entity({self.etype}:{self.name!r})"


@dataclass
class Built:
    entities: list[Entity]
    by_type: dict[str, list[int]]
    groups: dict[str, list[int]]          # confusable groups: shared surname / stem / base title
    titles: list[str]                     # passage titles, row order
    texts: list[str]                      # passage texts, row order


def _log_int(rng: random.Random, lo: int, hi: int) -> int:
    """A roughly log-uniform integer in [lo, hi], in integer arithmetic only (no libm: identical everywhere)."""
    bounds = [lo]
    while bounds[-1] * 10 < hi:
        bounds.append(bounds[-1] * 10)
    bounds.append(hi)
    i = rng.randrange(len(bounds) - 1)
    return rng.randint(bounds[i], bounds[i + 1])


def type_counts(n_entities: int) -> dict[str, int]:
    n = max(int(n_entities), 30)
    counts = {t: max(4, round(n * TYPE_SHARES[t])) for t in ENTITY_TYPES}
    counts["city"] = max(counts["city"], counts["country"] * 2)
    return counts


def build_entities(seed: int, n_entities: int, confusable_share: float) -> tuple[list[Entity], dict, dict]:
    rng = random.Random(f"searchgym-world/{seed}/entities")
    names = NameFactory(random.Random(f"searchgym-world/{seed}/names"))
    counts = type_counts(n_entities)
    share = min(max(float(confusable_share), 0.0), 0.9)
    ents: list[Entity] = []
    by_type: dict[str, list[int]] = {t: [] for t in ENTITY_TYPES}
    groups: dict[str, list[int]] = {}

    def add(etype: str, name: str, group: str, short: str) -> Entity:
        e = Entity(len(ents), etype, name, group, short)
        ents.append(e)
        by_type[etype].append(e.idx)
        if group:
            groups.setdefault(group, []).append(e.idx)
        return e

    def reuse(etype: str) -> Entity | None:
        pool = by_type[etype]
        if pool and rng.random() < share:
            return ents[pool[rng.randrange(len(pool))]]
        return None

    # countries
    n_lang = max(3, counts["country"] // 2)
    languages: list[str] = []
    while len(languages) < n_lang:
        lang = stem(names.rng, 2, 2).rstrip("aeiou") + names.rng.choice(LANGUAGE_ENDINGS)
        if lang not in languages and names._claim(lang):
            languages.append(lang)
    for _ in range(counts["country"]):
        e = add("country", names.country(), "", "")
        e.attrs.update(population=_log_int(rng, 300_000, 150_000_000), currency=rng.choice(CURRENCIES),
                       language=rng.choice(languages), independence_year=rng.randint(1700, 1995))
    countries = by_type["country"]
    # cities (the first city of each country is its capital)
    for i in range(counts["city"]):
        near = reuse("city")
        base, name = "", None
        if near is not None:
            base = near.group.split(":", 1)[1]
            name = names.city(base)
        while name is None:
            base = stem(names.rng, 1, 2)
            if f"city:{base}" not in groups:  # a fresh stem, so no accidental near-duplicates
                name = names.city(base)
        e = add("city", name, f"city:{base}", "")
        country = countries[i] if i < len(countries) else countries[rng.randrange(len(countries))]
        e.attrs.update(country=country, population=_log_int(rng, 3_000, 5_000_000),
                       founded_year=rng.randint(800, 1900), elevation=rng.randint(2, 2400))
        if i < len(countries):
            ents[country].attrs["capital"] = e.idx
    cities = by_type["city"]
    # people (confusable: a shared surname)
    for _ in range(counts["person"]):
        near = reuse("person")
        name, surname = names.person(near.short if near is not None else None)
        e = add("person", name, f"surname:{surname}", surname)
        e.attrs.update(birth_year=rng.randint(1800, 1985), born_in=cities[rng.randrange(len(cities))],
                       occupation=rng.choice(OCCUPATIONS), height=rng.randint(150, 201))
    people = by_type["person"]

    def person_born_before(latest: int) -> Entity:
        for _ in range(50):
            p = ents[people[rng.randrange(len(people))]]
            if int(p.attrs["birth_year"]) <= latest:
                return p
        return ents[min(people, key=lambda i: int(ents[i].attrs["birth_year"]))]

    # organisations (confusable: a shared stem)
    for _ in range(counts["organisation"]):
        near = reuse("organisation")
        base, name = "", None
        if near is not None:
            base = near.group.split(":", 1)[1]
            name = names.organisation(base)
        while name is None:
            base = stem(names.rng, 2, 3)
            if f"org:{base}" not in groups:
                name = names.organisation(base)
        e = add("organisation", name, f"org:{base}", "")
        founder = person_born_before(1990)
        e.attrs.update(founder=founder.idx, headquarters=cities[rng.randrange(len(cities))],
                       founded_year=min(2020, int(founder.attrs["birth_year"]) + rng.randint(20, 55)),
                       industry=rng.choice(INDUSTRIES), employees=_log_int(rng, 20, 150_000))
    # films and novels (confusable: a sequel-like title)
    for etype, role, year, genres, lo, hi in (("film", "director", "release_year", FILM_GENRES, 72, 195),
                                              ("novel", "author", "publication_year", NOVEL_GENRES, 120, 980)):
        for _ in range(counts[etype]):
            near = reuse(etype)
            title = names.title(near.group.split(":", 1)[1]) if near is not None else None
            group = near.group if title is not None and near is not None else ""
            if title is None:
                title = names.title()
                assert title is not None
                group = f"{etype}:{title}"
            e = add(etype, title, group, "")
            maker = person_born_before(1995)
            e.attrs.update({role: maker.idx,
                            year: min(2024, int(maker.attrs["birth_year"]) + rng.randint(20, 60)),
                            "genre": rng.choice(genres), ("runtime" if etype == "film" else "pages"):
                            rng.randint(lo, hi)})
    # keep only real groups (two or more members)
    groups = {k: v for k, v in groups.items() if len(v) > 1}
    return ents, by_type, groups


def value_text(ents: list[Entity], e: Entity, rel: str) -> str:
    """How a fact's value is written in passages (and the first gold answer)."""
    r = REL[f"{e.etype}.{rel}"]
    v = e.attrs[rel]
    if r.kind == "entity":
        return ents[int(v)].name
    if r.kind == "number":
        return f"{int(v):,}"
    return str(v)


def build_passages(seed: int, ents: list[Entity], by_type: dict[str, list[int]],
                   groups: dict[str, list[int]]) -> tuple[list[str], list[str]]:
    """Spread each entity's facts over 1-3 passages; add disambiguation pages for confusable groups."""
    rng = random.Random(f"searchgym-world/{seed}/passages")
    titles: list[str] = []
    texts: list[str] = []
    rand = rng.random
    randrange = rng.randrange
    for e in ents:
        et = e.etype
        rels = [r.name for r in RELS_OF[et]]
        rng.shuffle(rels)
        u = rand()
        k = 1 if u < 0.4 else (2 if u < 0.8 else 3)
        k = min(k, len(rels))
        cuts = sorted(rng.sample(range(1, len(rels)), k - 1)) if k > 1 else []
        chunks = [rels[a:b] for a, b in zip([0, *cuts], [*cuts, len(rels)])]
        short = e.short or SHORT_REF[et]
        short_cap = short[:1].upper() + short[1:]
        fill_pool = FILLER[et]
        others = by_type[FILLER_OTHER[et]]
        for j, chunk in enumerate(chunks):
            row = len(titles)
            titles.append(e.name if j == 0 else f"{e.name} ({QUALIFIERS[et][j - 1]})")
            sents = []
            for i, rel in enumerate(chunk):
                r = REL[f"{et}.{rel}"]
                v = value_text(ents, e, rel)
                pat = r.patterns[randrange(len(r.patterns))]
                if i == 0:
                    s_, S_ = e.name, e.name
                else:
                    s_, S_ = short, short_cap
                sent = pat.format(S=S_, s=s_, v=v, a_v=article(v) if r.kind == "text" else v)
                sents.append(sent[:1].upper() + sent[1:])
                e.rows[rel] = row
            if rand() < 0.6:
                f = fill_pool[randrange(len(fill_pool))]
                other = ents[others[randrange(len(others))]].name
                sents.insert(1 + randrange(len(sents)), f.format(S=short_cap, s=short, other=other))
            texts.append(" ".join(sents))
    # disambiguation pages: many keyword matches, no facts
    for key, members in groups.items():
        kind, base = key.split(":", 1)
        names = [ents[i].name for i in members[:10]]
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        if kind == "surname":
            titles.append(f"{base} (surname)")
            texts.append(f"{base} is a surname. People with the surname {base} include {listed}.")
        else:
            titles.append(f"{base} (disambiguation)")
            texts.append(f"{base} may refer to several {ents[members[0]].etype} entries: {listed}.")
    return titles, texts


def build(seed: int, n_entities: int, confusable_share: float) -> Built:
    ents, by_type, groups = build_entities(seed, n_entities, confusable_share)
    titles, texts = build_passages(seed, ents, by_type, groups)
    return Built(ents, by_type, groups, titles, texts)
