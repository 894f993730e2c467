"""Pronounceable, unique, tokeniser-friendly names for the procedural world.

Names are built from short consonant-vowel syllables (plain ASCII letters only), so a sub-word
tokeniser splits them into a few common pieces and BM25 sees them as single rare terms. Every
generator draws from an explicit ``random.Random`` and checks a shared ``used`` set, so the same
seed always yields the same names and no two entities share a name.
"""

from __future__ import annotations

import random

ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
          "br", "dr", "gr", "kr", "tr", "st", "th", "sh", "j", "w")
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ea")
CODAS = ("", "", "", "", "", "n", "r", "l", "s", "m", "nd")

GIVEN_ENDINGS = ("a", "o", "en", "is", "ia", "el", "an", "ine", "as", "e", "ik", "ora")
SURNAME_ENDINGS = ("ell", "ard", "ing", "ov", "sen", "ton", "ley", "mar", "ic", "ane", "ez", "wick",
                   "holt", "ier", "aro", "ski")
CITY_SUFFIXES = ("port", "holm", "ford", "burg", "ville", "stad", "mouth", "field", "grad", "haven",
                 "bury", "dale", "wick", "moor", "gate", "ton")
COUNTRY_SUFFIXES = ("ia", "land", "stan", "ora", "avia", "ania", "enia", "aria", "ova", "ea")
ORG_SUFFIXES = ("Group", "Holdings", "Company", "Corporation", "Works", "Partners", "Limited",
                "Trust", "Collective", "Consortium", "Alliance", "Enterprises", "Industries", "Systems")
TITLE_ADJECTIVES = ("Silent", "Crimson", "Hollow", "Distant", "Broken", "Golden", "Winter", "Last",
                    "Quiet", "Iron", "Northern", "Glass", "Burning", "Forgotten", "Endless", "Pale",
                    "Hidden", "Lonely", "Scarlet", "Secret", "Velvet", "Bitter", "Sunken", "Wild",
                    "Amber", "Salt", "Copper", "Midnight", "Restless", "Narrow")
TITLE_NOUNS = ("Harbour", "Orchard", "Lantern", "Meridian", "River", "Garden", "Tower", "Mirror",
               "Season", "Voyage", "Kingdom", "Archive", "Compass", "Letter", "Bridge", "Island",
               "Shore", "Crown", "Engine", "Forest", "Promise", "Winter", "Crossing", "Tide",
               "Cathedral", "Station", "Machine", "Country", "Summer", "Witness")
SEQUEL_FORMS = ("{t} II", "Return to {t}", "After {t}", "Beyond {t}", "{t} Revisited")


def syllable(rng: random.Random) -> str:
    return rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)


def stem(rng: random.Random, lo: int = 2, hi: int = 3) -> str:
    n = rng.randint(lo, hi)
    s = "".join(syllable(rng) for _ in range(n))
    return s[:1].upper() + s[1:]


class NameFactory:
    """Draws unique names of each kind; ``used`` is shared so names are unique across kinds."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()
        self.lowered: set[str] = set()
        self._given: list[str] = []
        self.surnames: set[str] = set()

    def _claim(self, name: str) -> bool:
        key = name.lower()
        if key in self.lowered:
            return False
        self.lowered.add(key)
        self.used.add(name)
        return True

    def _unique(self, make, tries: int = 10_000) -> str | None:
        for _ in range(tries):
            name = make()
            if self._claim(name):
                return name
        if tries < 10_000:
            return None  # a near-duplicate family that is full: the caller makes a fresh name
        raise RuntimeError("name space exhausted")  # pragma: no cover - astronomically unlikely

    # -- people --------------------------------------------------------------------------------
    def given(self) -> str:
        rng = self.rng
        if len(self._given) < 400 or rng.random() < 0.02:
            g = stem(rng, 1, 2) + rng.choice(GIVEN_ENDINGS)
            self._given.append(g)
            return g
        return rng.choice(self._given)

    def surname(self) -> str:
        rng = self.rng
        return stem(rng, 1, 2) + rng.choice(SURNAME_ENDINGS)

    def person(self, surname: str | None = None) -> tuple[str, str]:
        """A unique ``"Given Surname"``; pass ``surname`` to make a confusable namesake."""
        fixed = surname
        out: list[str] = []

        def make() -> str:
            sn = fixed
            while sn is None or (fixed is None and sn in self.surnames):
                sn = self.surname()  # a fresh surname is one nobody has yet
            out.append(sn)
            return f"{self.given()} {sn}"

        name = self._unique(make)
        assert name is not None
        self.surnames.add(out[-1])
        return name, out[-1]

    # -- places and organisations --------------------------------------------------------------
    def city(self, base: str) -> str | None:
        """``base`` + a city suffix; None when every suffix of ``base`` is taken."""
        rng = self.rng
        return self._unique(lambda: base + rng.choice(CITY_SUFFIXES), tries=40)

    def country(self) -> str:
        rng = self.rng
        return self._unique(lambda: stem(rng, 2, 2).rstrip("aeiou") + rng.choice(COUNTRY_SUFFIXES))

    def organisation(self, base: str) -> str | None:
        """``base`` + a company suffix; None when every suffix of ``base`` is taken."""
        rng = self.rng
        return self._unique(lambda: f"{base} {rng.choice(ORG_SUFFIXES)}", tries=40)

    def title(self, base: str | None = None) -> str | None:
        """A film or novel title; pass ``base`` for a confusable sequel-like title (None if all taken)."""
        rng = self.rng

        def make() -> str:
            if base is not None:
                form = rng.choice(SEQUEL_FORMS)
                t = base
                if not form.startswith("{t}") and t.startswith("The "):
                    t = "the " + t[4:]
                return form.format(t=t)
            a, n = rng.choice(TITLE_ADJECTIVES), rng.choice(TITLE_NOUNS)
            form = rng.randrange(6)
            if form == 0:
                return f"The {a} {n}"
            if form == 1:
                return f"{a} {n}"
            if form == 2:
                return f"The {n} of {stem(rng, 2, 3)}"
            if form == 3:
                return f"{stem(rng, 2, 2)}'s {n}"
            if form == 4:
                return f"The {a} {n} of {stem(rng, 2, 2)}"
            return f"{a} {n} at {stem(rng, 2, 2)}"

        return self._unique(make, tries=20 if base is not None else 10_000)
