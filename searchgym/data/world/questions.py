"""Questions over the world: five families, four phrasings, six splits.

Families: ``attribute`` (one hop), ``bridge`` (two hops through an entity named only in the
passages), ``three_hop``, ``yesno`` (verify one fact; half are false), ``intersection`` (the one
entity that satisfies two constraints), ``comparison`` (two entities, one numeric attribute). Phrasings ``s0``-``s3``: ``s0`` is the relation's natural question, the
others are generic frames; ``s3`` is held out of train/dev/test. Held out of train/dev/test as well:
the ``comparison`` family and every question that involves a ``novel``.
"""

from __future__ import annotations

import random

from ..qa import QAExample
from .generate import Built, Entity, value_text
from .schema import (
    ASK,
    CLAUSE,
    COMPARE,
    ENTITY_TYPES,
    HELD_OUT_FAMILY,
    HELD_OUT_STYLES,
    HELD_OUT_TYPE,
    HOPS,
    INTERSECT,
    INTERSECT_Q,
    REL,
    RELS_OF,
    SHIFT_STRATEGY,
    SPLITS,
    TRAIN_STYLES,
    TYPE_NOUN,
    YESNO,
    Plan,
    Relation,
    article,
)

ENTITY_RELS = {t: tuple(r for r in RELS_OF[t] if r.kind == "entity") for t in ENTITY_TYPES}
CMP_RELS = {t: tuple(r for r in RELS_OF[t] if r.cmp) for t in ENTITY_TYPES}
YN_RELS = {t: tuple(r for r in RELS_OF[t] if r.yn) for t in ENTITY_TYPES}


class Draft:
    """A question before it gets an id and a split."""

    __slots__ = ("answers", "meta", "question", "rows")

    def __init__(self, question: str, answers: list[str], rows: list[int], meta: dict):
        self.question, self.answers, self.rows, self.meta = question, answers, rows, meta


def _dedupe(xs: list[str]) -> list[str]:
    out: list[str] = []
    for x in xs:
        if x and x not in out:
            out.append(x)
    return out


def answers_for(ents: list[Entity], e: Entity, r: Relation) -> list[str]:
    """Gold answer first, then aliases (a person's surname, a number without separators or with unit)."""
    v = e.attrs[r.name]
    if r.kind == "entity":
        target = ents[int(v)]
        return _dedupe([target.name, target.short])
    if r.kind == "number":
        n = int(v)
        return _dedupe([f"{n:,}", str(n)] + ([f"{n:,} {r.unit}", f"{n} {r.unit}"] if r.unit else []))
    return [str(v)]


def _ask(r: Relation, subject: str, style: str) -> str:
    if style == "s0":
        return r.wh.format(S=subject)
    return ASK[style].format(noun=r.noun, S=subject)


class QuestionMaker:
    def __init__(self, seed: int, built: Built):
        self.rng = random.Random(f"searchgym-world/{seed}/questions")
        self.b = built
        self.ents = built.entities
        self.seen: set[str] = set()
        # entity lists per type, restricted to those with at least one relation of each kind
        self._combo_cache: dict[tuple[str, str, str], dict] = {}

    def pick(self, etype: str) -> Entity:
        pool = self.b.by_type[etype]
        return self.ents[pool[self.rng.randrange(len(pool))]]

    def _types(self, allowed: tuple[str, ...], need: dict[str, tuple]) -> list[str]:
        return [t for t in allowed if need[t]]

    # -- families ----------------------------------------------------------------------------
    def attribute(self, style: str, allowed: tuple[str, ...]) -> Draft | None:
        rng = self.rng
        e = self.pick(rng.choice(allowed))
        r = rng.choice(RELS_OF[e.etype])
        types = [e.etype] + ([r.target] if r.kind == "entity" else [])
        return Draft(_ask(r, e.name, style), answers_for(self.ents, e, r), [e.rows[r.name]],
                     {"relations": [r.key], "subject": [e.name], "bridge": [], "entity_types": types,
                      "answer_type": r.answer_type})

    def _chain(self, hops: int, allowed: tuple[str, ...]) -> tuple[list[Entity], list[Relation]] | None:
        rng = self.rng
        starts = self._types(allowed, ENTITY_RELS)
        if not starts:
            return None
        e = self.pick(rng.choice(starts))
        chain, rels = [e], []
        for _ in range(hops - 1):
            cur = chain[-1]
            opts = [r for r in ENTITY_RELS[cur.etype] if int(cur.attrs[r.name]) not in {c.idx for c in chain}]
            if not opts:
                return None
            r = rng.choice(opts)
            rels.append(r)
            chain.append(self.ents[int(cur.attrs[r.name])])
        last = chain[-1]
        visited = {c.idx for c in chain}
        finals = [r for r in RELS_OF[last.etype]
                  if not (r.kind == "entity" and int(last.attrs[r.name]) in visited)]
        if not finals:
            return None
        rels.append(rng.choice(finals))
        return chain, rels

    def multi_hop(self, hops: int, style: str, allowed: tuple[str, ...]) -> Draft | None:
        got = self._chain(hops, allowed)
        if got is None:
            return None
        chain, rels = got
        subject = chain[0].name
        for r in rels[:-1]:
            assert r.desc is not None
            subject = r.desc.format(S=subject)
        final = rels[-1]
        q = _ask(final, subject, style)
        bridges = chain[1:]
        low = q.lower()
        if any(bn.name.lower() in low or (bn.short and bn.short.lower() in low) for bn in bridges):
            return None
        types = [c.etype for c in chain] + ([final.target] if final.kind == "entity" else [])
        rows = [c.rows[r.name] for c, r in zip(chain, rels)]
        return Draft(q, answers_for(self.ents, chain[-1], final), rows,
                     {"relations": [r.key for r in rels], "subject": [chain[0].name],
                      "bridge": [c.name for c in bridges], "entity_types": types,
                      "answer_type": final.answer_type})

    def comparison(self, style: str, allowed: tuple[str, ...]) -> Draft | None:
        rng = self.rng
        types = self._types(allowed, CMP_RELS)
        a = self.pick(rng.choice(types))
        r = rng.choice(CMP_RELS[a.etype])
        assert r.cmp is not None
        b = None
        members = self.b.groups.get(a.group) if a.group else None
        if members and rng.random() < 0.5:
            b = self.ents[rng.choice(members)]
        if b is None or b.idx == a.idx:
            b = self.pick(a.etype)
        va, vb = int(a.attrs[r.name]), int(b.attrs[r.name])
        if b.idx == a.idx or va == vb:
            return None
        if rng.random() < 0.5:
            a, b, va, vb = b, a, vb, va
        phrase, direction, natural = r.cmp
        win = a if (va < vb) == (direction == "min") else b
        if style == "s0":
            q = natural.format(A=a.name, B=b.name)
        else:
            q = COMPARE[style].format(A=a.name, B=b.name, P=phrase)
        answers = [win.name]
        if win.short and win.short != (a if win is b else b).short:
            answers.append(win.short)
        return Draft(q, answers, [a.rows[r.name], b.rows[r.name]],
                     {"relations": [r.key, r.key], "subject": [a.name, b.name], "bridge": [],
                      "entity_types": [a.etype], "answer_type": a.etype})

    def yesno(self, style: str, allowed: tuple[str, ...]) -> Draft | None:
        rng = self.rng
        types = self._types(allowed, YN_RELS)
        e = self.pick(rng.choice(types))
        r = rng.choice(YN_RELS[e.etype])
        assert r.yn is not None
        truth = rng.random() < 0.5
        true_v = e.attrs[r.name]
        if r.kind == "entity":
            if truth:
                obj = self.ents[int(true_v)]
            else:
                tgt = self.ents[int(true_v)]
                members = self.b.groups.get(tgt.group) if tgt.group else None
                cand = self.ents[rng.choice(members)] if members and rng.random() < 0.6 else None
                if cand is None or cand.idx == tgt.idx:
                    cand = self.pick(tgt.etype)
                if cand.idx == tgt.idx:
                    return None
                obj = cand
            o_text, o_type = obj.name, obj.etype
        else:
            if truth:
                o_text = str(true_v)
            else:
                pool = sorted({str(x.attrs[r.name]) for x in (self.pick(e.etype) for _ in range(8))}
                              - {str(true_v)})
                if not pool:
                    return None
                o_text = rng.choice(pool)
            o_type = ""
        yq, clause = r.yn
        fmt = {"S": e.name, "O": o_text, "a_O": article(o_text)}
        q = yq.format(**fmt) if style == "s0" else YESNO[style].format(C=clause.format(**fmt))
        types = [e.etype] + ([o_type] if o_type else [])
        return Draft(q, ["yes" if truth else "no"], [e.rows[r.name]],
                     {"relations": [r.key], "subject": [e.name], "bridge": [], "entity_types": types,
                      "answer_type": "yes_no", "claim": o_text,
                      "true_value": value_text(self.ents, e, r.name)})

    def _combos(self, etype: str, r1: str, r2: str) -> dict:
        key = (etype, r1, r2)
        got = self._combo_cache.get(key)
        if got is None:
            got = {}
            for i in self.b.by_type[etype]:
                a = self.ents[i].attrs
                k = (a[r1], a[r2])
                got[k] = got.get(k, 0) + 1
            self._combo_cache[key] = got
        return got

    def intersection(self, style: str, allowed: tuple[str, ...]) -> Draft | None:
        """Which <type> satisfies two constraints? No entity to decompose on: the answer is found by
        searching with the constraint values (the full question works; "<entity> <relation>" does not)."""
        rng = self.rng
        types = [t for t in allowed if t in INTERSECT]
        if not types:
            return None
        etype = rng.choice(types)
        r1, r2, natural = rng.choice(INTERSECT[etype])
        e = self.pick(etype)
        if self._combos(etype, r1, r2)[(e.attrs[r1], e.attrs[r2])] != 1:
            return None  # the answer must be unique
        v1, v2 = value_text(self.ents, e, r1), value_text(self.ents, e, r2)
        k1, k2 = f"{etype}.{r1}", f"{etype}.{r2}"
        if style == "s0":
            q = natural.format(v1=v1, v2=v2)
        else:
            c1 = CLAUSE[k1].format(v=v1, a_v=article(v1))
            c2 = CLAUSE[k2].format(v=v2, a_v=article(v2))
            q = INTERSECT_Q[style].format(T=TYPE_NOUN[etype], C1=c1, C2=c2)
        named = [self.ents[int(e.attrs[r])] for r in (r1, r2) if REL[f"{etype}.{r}"].kind == "entity"]
        types_ = [etype] + [x.etype for x in named]
        return Draft(q, _dedupe([e.name, e.short]), [e.rows[r1], e.rows[r2]],
                     {"relations": [k1, k2], "subject": [x.name for x in named], "bridge": [],
                      "entity_types": types_, "answer_type": etype, "constraints": [v1, v2]})

    def make(self, family: str, style: str, allowed: tuple[str, ...]) -> Draft | None:
        if family == "attribute":
            d = self.attribute(style, allowed)
        elif family == "bridge":
            d = self.multi_hop(2, style, allowed)
        elif family == "three_hop":
            d = self.multi_hop(3, style, allowed)
        elif family == "comparison":
            d = self.comparison(style, allowed)
        elif family == "yesno":
            d = self.yesno(style, allowed)
        elif family == "intersection":
            d = self.intersection(style, allowed)
        else:  # pragma: no cover - guarded by FAMILIES
            raise ValueError(family)
        if d is None or d.question in self.seen:
            return None
        d.meta["entity_types"] = sorted(set(d.meta["entity_types"]))
        d.meta.update(family=family, hops=HOPS[family], phrasing=f"{family}.{style}", style=style)
        return d


def _weighted(rng: random.Random, mix: dict[str, float]) -> str:
    u, acc = rng.random() * sum(mix.values()), 0.0
    for k, w in mix.items():
        acc += w
        if u < acc:
            return k
    return next(reversed(mix))


def make_questions(seed: int, built: Built, n_questions: int, id_of_row, plan: Plan | None = None
                   ) -> list[QAExample]:
    """``n_questions`` questions over the splits of ``plan`` (ids ``w{seed}-q000000`` in split order)."""
    plan = plan or Plan()
    qm = QuestionMaker(seed, built)
    rng = qm.rng
    in_types = tuple(t for t in ENTITY_TYPES if t != HELD_OUT_TYPE)
    # For shift_type the question must start from a held-out-type entity.
    only_held = (HELD_OUT_TYPE,)
    total = sum(plan.split_shares.values())
    base_splits = [s for s in SPLITS if s != SHIFT_STRATEGY]  # shift_strategy: make_alias_questions
    share = {s: plan.split_shares[s] / total for s in base_splits}
    in_dist = ("train", "dev", "test")
    # One in-distribution pool, cut into train/dev/test afterwards (so a small world that runs out of
    # distinct questions shrinks every split in proportion instead of starving dev and test).
    buckets = [("main", in_dist)] + [(s, (s,)) for s in base_splits if s not in in_dist]
    out: list[QAExample] = []
    for bucket, members in buckets:
        want = max(len(members), round(n_questions * sum(share[m] for m in members)))
        mix = dict(plan.family_mix)
        styles: tuple[str, ...] = TRAIN_STYLES
        allowed = in_types
        if bucket == "shift_phrasing":
            styles = HELD_OUT_STYLES
        elif bucket == "shift_family":
            mix = {HELD_OUT_FAMILY: 1.0}
        elif bucket == "shift_type":
            allowed = only_held
        drafts: list[Draft] = []
        tries = 0
        while len(drafts) < want and tries < want * 60:
            tries += 1
            fam = _weighted(rng, mix)
            style = styles[rng.randrange(len(styles))]
            d = qm.make(fam, style, allowed)
            if d is None:
                continue
            qm.seen.add(d.question)
            drafts.append(d)
        if bucket == "main":
            n = len(drafts)
            n_dev = round(n * share["dev"] / sum(share[m] for m in in_dist))
            n_test = round(n * share["test"] / sum(share[m] for m in in_dist))
            labels = ["train"] * (n - n_dev - n_test) + ["dev"] * n_dev + ["test"] * n_test
        else:
            labels = [bucket] * len(drafts)
        for d, split in zip(drafts, labels):
            d.meta["split"] = split
            qid = f"w{seed}-q{len(out):06d}"
            out.append(QAExample(id=qid, question=d.question, answers=d.answers,
                                 supporting_ids=_dedupe([id_of_row(r) for r in d.rows]), metadata=d.meta))
    return out


__all__ = ["REL", "answers_for", "make_questions"]
