"""What the world is made of: entity types, their relations, and every sentence pattern.

Each relation (``"<type>.<name>"``) says what kind of value it holds (a year, a number, a word, or
another entity), how passages state it (>= 3 sentence patterns each), and how questions ask for it
(a natural wh-question, a noun phrase for the generic phrasings, a description used when the value
is a bridge entity, a comparison phrase, a yes/no clause).
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENTITY_TYPES = ("country", "city", "person", "organisation", "film", "novel")

# Shares of the entity budget per type (sum to 1).
TYPE_SHARES = {"country": 0.02, "city": 0.18, "person": 0.40, "organisation": 0.14, "film": 0.13,
               "novel": 0.13}

# How later sentences of a passage refer to the subject (people use their surname).
SHORT_REF = {"country": "the country", "city": "the city", "organisation": "the company",
             "film": "the film", "novel": "the novel"}

# Titles of an entity's second and third passage: "Name (career)".
QUALIFIERS = {"country": ("history", "economy"), "city": ("history", "geography"),
              "person": ("early life", "career"), "organisation": ("history", "operations"),
              "film": ("production", "reception"), "novel": ("publication", "reception")}

OCCUPATIONS = ("painter", "engineer", "architect", "physician", "composer", "sculptor", "chemist",
               "lawyer", "poet", "historian", "astronomer", "economist", "banker", "diplomat",
               "photographer", "mathematician", "journalist", "botanist", "surgeon", "inventor",
               "cartographer", "violinist", "geologist", "actor")
INDUSTRIES = ("shipping", "banking", "mining", "textiles", "publishing", "aviation", "brewing",
              "software", "railways", "insurance", "pharmaceuticals", "telecommunications",
              "steelmaking", "agriculture", "glassmaking", "clockmaking")
CURRENCIES = ("florin", "thaler", "ducat", "crown", "mark", "dinar", "real", "lira", "shilling",
              "guilder", "krona", "escudo", "sol", "rand", "peso", "lev")
LANGUAGE_ENDINGS = ("ish", "ic", "ese", "i", "an", "ian")
FILM_GENRES = ("drama", "comedy", "thriller", "western", "musical", "documentary", "horror",
               "romance", "war", "mystery", "science fiction", "animated")
NOVEL_GENRES = ("mystery", "fantasy", "historical", "satirical", "adventure", "gothic", "romance",
                "crime", "epistolary", "picaresque", "dystopian", "coming-of-age")

# Sentences with no facts in them (some name an unrelated entity: keyword-overlap distractors).
FILLER = {
    "country": ("{S} is known for its mountain railways.", "Tourism in {s} grew after the war.",
                "The flag of {s} shows three horizontal bands.",
                "{S} signed a trade agreement with {other} in the same decade."),
    "city": ("{S} is known for its covered markets.", "A tram line crosses {s} from east to west.",
             "The old quarter of {s} has narrow cobbled streets.",
             "{S} is twinned with {other}.", "Ferries connect {s} with {other}."),
    "person": ("{S} was admired by contemporaries for a quiet manner.",
               "{S} kept detailed diaries throughout life.",
               "{S} often spent summers in {other}.", "{S} corresponded for years with {other}."),
    "organisation": ("{S} later opened an office in {other}.", "{S} was listed on the exchange decades later.",
                     "{S} sponsored a regional football club.", "{S} once considered a merger with {other}."),
    "film": ("{S} was shot partly on location in {other}.", "{S} received mixed reviews at first.",
             "The score of {s} was later released as an album.", "{S} was restored for a festival screening."),
    "novel": ("{S} was translated into several languages.", "{S} was serialised in a magazine before release.",
              "Part of {s} is set in {other}.", "{S} was adapted for the stage."),
}
# What kind of entity "{other}" names in each type's filler sentences.
FILLER_OTHER = {"country": "country", "city": "city", "person": "city", "organisation": "city",
                "film": "city", "novel": "city"}


@dataclass(frozen=True)
class Relation:
    key: str                       # "person.birth_year"
    kind: str                      # "year" | "number" | "text" | "entity"
    patterns: tuple[str, ...]      # sentence patterns: {S}/{s} subject, {v} value, {a_v} "a/an value"
    noun: str                      # "year of birth" (generic phrasings)
    wh: str                        # natural question with {S}
    target: str | None = None      # entity type of the value, for kind == "entity"
    desc: str | None = None        # "the founder of {S}" (entity relations, as a bridge)
    cmp: tuple[str, str, str] | None = None   # (phrase, "min"|"max", natural comparison question)
    yn: tuple[str, str] | None = None          # (yes/no question, declarative clause) with {S} {O}/{a_O}
    unit: str = ""
    answer_type: str = ""

    @property
    def etype(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(".", 1)[1]


def _r(key: str, kind: str, patterns: tuple[str, ...], noun: str, wh: str, **kw) -> Relation:
    if kind == "entity":
        kw.setdefault("answer_type", kw["target"])
    else:
        kw.setdefault("answer_type", kind if kind in ("year", "number") else key.split(".")[1])
    return Relation(key, kind, patterns, noun, wh, **kw)


RELATIONS: tuple[Relation, ...] = (
    # -- person ------------------------------------------------------------------------------
    _r("person.birth_year", "year",
       ("{S} was born in {v}.", "Born in {v}, {s} grew up in modest circumstances.",
        "{S}'s year of birth is recorded as {v}.", "Records give {v} as the year of {s}'s birth."),
       "year of birth", "In what year was {S} born?",
       cmp=("was born earlier", "min", "Who was born first, {A} or {B}?")),
    _r("person.born_in", "entity",
       ("{S} was born in the city of {v}.", "{S} is a native of {v}.", "{S}'s birthplace was {v}.",
        "{S} came into the world in {v}."),
       "place of birth", "In which city was {S} born?", target="city",
       desc="the city where {S} was born",
       yn=("Was {S} born in {O}?", "{S} was born in {O}")),
    _r("person.occupation", "text",
       ("{S} worked as {a_v}.", "By profession, {s} was {a_v}.", "{S} earned a living as {a_v}."),
       "occupation", "What did {S} work as?",
       yn=("Did {S} work as {a_O}?", "{S} worked as {a_O}")),
    _r("person.height", "number",
       ("{S} stood {v} cm tall.", "{S} was {v} centimetres tall.",
        "Contemporaries noted that {s} had a height of {v} cm."),
       "height in centimetres", "How tall was {S} in centimetres?", unit="cm",
       cmp=("was taller", "max", "Who was taller, {A} or {B}?")),
    # -- city --------------------------------------------------------------------------------
    _r("city.country", "entity",
       ("{S} belongs to {v}.", "{S} lies within the borders of {v}.", "{S} is located in {v}."),
       "country", "In which country is {S} located?", target="country",
       desc="the country where {S} is located",
       yn=("Is {S} located in {O}?", "{S} is located in {O}")),
    _r("city.population", "number",
       ("{S} has a population of {v}.", "About {v} people live in {s}.",
        "The population of {s} was counted at {v}."),
       "population", "How many people live in {S}?",
       cmp=("has the larger population", "max", "Which city has more inhabitants, {A} or {B}?")),
    _r("city.founded_year", "year",
       ("{S} was founded in {v}.", "The settlement of {s} dates from {v}.",
        "{S} received its charter in {v}."),
       "founding year", "In what year was {S} founded?",
       cmp=("was founded earlier", "min", "Which city is older, {A} or {B}?")),
    _r("city.elevation", "number",
       ("{S} lies at an elevation of {v} metres.", "{S} sits {v} metres above sea level.",
        "The elevation of {s} is {v} m."),
       "elevation in metres", "At what elevation in metres does {S} lie?", unit="m",
       cmp=("lies higher", "max", "Which city lies at a higher elevation, {A} or {B}?")),
    # -- country -----------------------------------------------------------------------------
    _r("country.capital", "entity",
       ("The capital of {s} is {v}.", "{S} is governed from its capital, {v}.",
        "{v} serves as the capital of {s}."),
       "capital", "What city is the capital of {S}?", target="city", desc="the capital of {S}",
       yn=("Is {O} the capital of {S}?", "{O} is the capital of {S}")),
    _r("country.population", "number",
       ("{S} has a population of {v}.", "Roughly {v} people live in {s}.",
        "The census of {s} counted {v} inhabitants."),
       "population", "How many inhabitants does {S} have?",
       cmp=("has the larger population", "max", "Which country has more inhabitants, {A} or {B}?")),
    _r("country.currency", "text",
       ("The currency of {s} is the {v}.", "{S} uses the {v} as its currency.",
        "Prices in {s} are given in the {v}."),
       "currency", "Which currency is used in {S}?"),
    _r("country.language", "text",
       ("The official language of {s} is {v}.", "{S} recognises {v} as its official language.",
        "Most people in {s} speak {v}, the official language."),
       "official language", "What language is officially spoken in {S}?"),
    _r("country.independence_year", "year",
       ("{S} became independent in {v}.", "{S} gained its independence in {v}.",
        "Independence came to {s} in {v}."),
       "year of independence", "In what year did {S} become independent?",
       cmp=("became independent earlier", "min", "Which country became independent first, {A} or {B}?")),
    # -- organisation ------------------------------------------------------------------------
    _r("organisation.founder", "entity",
       ("{S} was founded by {v}.", "{v} established {s}.", "{S} traces its origins to its founder, {v}."),
       "founder", "Who founded {S}?", target="person", desc="the founder of {S}",
       yn=("Was {S} founded by {O}?", "{S} was founded by {O}")),
    _r("organisation.headquarters", "entity",
       ("{S} is headquartered in {v}.", "The head office of {s} is in {v}.",
        "{S} runs its business from headquarters in {v}."),
       "headquarters city", "In which city is {S} headquartered?", target="city",
       desc="the city where {S} is headquartered",
       yn=("Is {S} headquartered in {O}?", "{S} is headquartered in {O}")),
    _r("organisation.founded_year", "year",
       ("{S} was established in {v}.", "{S} opened its doors in {v}.", "The history of {s} begins in {v}."),
       "founding year", "When was {S} established?",
       cmp=("was founded earlier", "min", "Which company was founded first, {A} or {B}?")),
    _r("organisation.industry", "text",
       ("{S} operates in the {v} industry.", "{S} is known for its work in {v}.",
        "The main business of {s} is {v}."),
       "industry", "In which industry does {S} operate?"),
    _r("organisation.employees", "number",
       ("{S} employs {v} people.", "{S} has a workforce of {v}.", "The staff of {s} numbers {v}."),
       "number of employees", "How many employees does {S} have?",
       cmp=("has more employees", "max", "Which company has more employees, {A} or {B}?")),
    # -- film --------------------------------------------------------------------------------
    _r("film.director", "entity",
       ("{S} was directed by {v}.", "{v} directed {s}.", "{S} is a film by director {v}."),
       "director", "Who directed {S}?", target="person", desc="the director of {S}",
       yn=("Was {S} directed by {O}?", "{S} was directed by {O}")),
    _r("film.release_year", "year",
       ("{S} was released in {v}.", "{S} premiered in {v}.", "{S} first reached cinemas in {v}."),
       "release year", "In what year was {S} released?",
       cmp=("was released earlier", "min", "Which film came out first, {A} or {B}?")),
    _r("film.genre", "text",
       ("{S} is {a_v} film.", "Critics describe {s} as {a_v} picture.", "{S} belongs to the {v} genre."),
       "genre", "What genre of film is {S}?"),
    _r("film.runtime", "number",
       ("{S} runs for {v} minutes.", "{S} has a running time of {v} minutes.",
        "The final cut of {s} lasts {v} minutes."),
       "running time in minutes", "How long is {S} in minutes?", unit="minutes",
       cmp=("is longer", "max", "Which film is longer, {A} or {B}?")),
    # -- novel -------------------------------------------------------------------------------
    _r("novel.author", "entity",
       ("{S} was written by {v}.", "{v} wrote {s}.", "{S} is a novel by {v}."),
       "author", "Who wrote {S}?", target="person", desc="the author of {S}",
       yn=("Was {S} written by {O}?", "{S} was written by {O}")),
    _r("novel.publication_year", "year",
       ("{S} was published in {v}.", "{S} first appeared in print in {v}.",
        "The first edition of {s} came out in {v}."),
       "publication year", "When was {S} first published?",
       cmp=("was published earlier", "min", "Which novel was published first, {A} or {B}?")),
    _r("novel.genre", "text",
       ("{S} is {a_v} novel.", "Reviewers call {s} {a_v} story.", "{S} belongs to the {v} genre."),
       "genre", "What genre of novel is {S}?"),
    _r("novel.pages", "number",
       ("{S} has {v} pages.", "{S} runs to {v} pages.", "The first edition of {s} is {v} pages long."),
       "page count", "How many pages does {S} have?", unit="pages",
       cmp=("is longer", "max", "Which novel is longer, {A} or {B}?")),
)
REL = {r.key: r for r in RELATIONS}
RELS_OF: dict[str, tuple[Relation, ...]] = {
    t: tuple(r for r in RELATIONS if r.etype == t) for t in ENTITY_TYPES}

# -- question families and phrasings --------------------------------------------------------
FAMILIES = ("attribute", "bridge", "yesno", "intersection", "three_hop", "comparison")
HOPS = {"attribute": 1, "yesno": 1, "intersection": 1, "bridge": 2, "comparison": 2, "three_hop": 3}
TRAIN_FAMILIES = ("attribute", "bridge", "yesno", "intersection", "three_hop")
HELD_OUT_FAMILY = "comparison"
STYLES = ("s0", "s1", "s2", "s3")
TRAIN_STYLES = ("s0", "s1", "s2")
HELD_OUT_STYLES = ("s3",)
HELD_OUT_TYPE = "novel"
SPLITS = ("train", "dev", "test", "shift_phrasing", "shift_family", "shift_type", "shift_strategy")

# s0 is the relation's natural question; s1-s3 are generic frames around the noun phrase.
ASK = {"s1": "What is the {noun} of {S}?", "s2": "Name the {noun} of {S}.",
       "s3": "I would like to know the {noun} of {S}."}
YESNO = {"s1": "Is it true that {C}?", "s2": "Answer yes or no: {C}.", "s3": "I would like to know whether {C}."}
# Intersection: which <type> satisfies two constraints? (relation, clause) pairs and a natural question.
TYPE_NOUN = {"person": "person", "city": "city", "country": "country", "organisation": "company",
             "film": "film", "novel": "novel"}
CLAUSE = {"person.born_in": "was born in {v}", "person.occupation": "worked as {a_v}",
          "organisation.headquarters": "is headquartered in {v}",
          "organisation.industry": "operates in the {v} industry", "film.director": "was directed by {v}",
          "film.genre": "is {a_v} film", "novel.author": "was written by {v}", "novel.genre": "is {a_v} novel",
          "city.country": "is located in {v}", "city.founded_year": "was founded in {v}"}
INTERSECT = {
    "person": (("born_in", "occupation", "Which {v2} was born in {v1}?"),),
    "organisation": (("headquarters", "industry", "Which {v2} company is headquartered in {v1}?"),),
    "film": (("director", "genre", "Which {v2} film did {v1} direct?"),),
    "novel": (("author", "genre", "Which {v2} novel did {v1} write?"),),
    "city": (("country", "founded_year", "Which city in {v1} was founded in {v2}?"),),
}
INTERSECT_Q = {"s1": "Which {T} {C1} and {C2}?", "s2": "Name the {T} that {C1} and {C2}.",
               "s3": "I would like to know which {T} {C1} and {C2}."}
COMPARE = {"s1": "Of {A} and {B}, which {P}?", "s2": "Name the one that {P}: {A} or {B}.",
           "s3": "Between {A} and {B}, I would like to know which {P}."}


@dataclass
class Plan:
    """Shares of question families in the in-distribution splits."""

    family_mix: dict[str, float] = field(default_factory=lambda: {
        "attribute": 0.25, "bridge": 0.25, "yesno": 0.12, "intersection": 0.13, "three_hop": 0.25})
    split_shares: dict[str, float] = field(default_factory=lambda: {
        "train": 0.6, "dev": 0.1, "test": 0.1, "shift_phrasing": 0.2 / 3, "shift_family": 0.2 / 3,
        "shift_type": 0.2 / 3})


def article(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


# -- shift_strategy: questions whose subject is given by an alias -----------------------------
# Some entities get a nickname ("the Amber Heron"), stated in one extra passage appended after the
# corpus. A ``shift_strategy`` question asks an attribute of the entity by its nickname only, so
# copying the question (or querying it with the relation) finds the alias passage but not the fact: the
# name has to be looked up first. Appended after every other split, from its own random stream.
SHIFT_STRATEGY = "shift_strategy"
SHIFT_STRATEGY_SHARE = 0.08  # of n_questions, on top of the other splits
ALIAS_TYPES = ("person", "organisation", "city", "film")  # not the held-out type, not the few countries
ALIAS_ADJECTIVES = ("Amber", "Silent", "Iron", "Crimson", "Hollow", "Gilded", "Pale", "Restless", "Northern",
                    "Velvet", "Broken", "Quiet", "Scarlet", "Lonely", "Silver", "Wandering", "Bitter", "Golden",
                    "Hidden", "Ashen", "Frozen", "Distant", "Copper", "Laughing", "Sleeping", "Burning",
                    "Patient", "Crooked", "Stubborn", "Gentle", "Midnight", "Weary", "Ivory", "Rusty",
                    "Faithful", "Salt", "Cobalt", "Thorny", "Tireless", "Humble")
ALIAS_NOUNS = ("Heron", "Lantern", "Fox", "Anvil", "Compass", "Raven", "Orchard", "Harbour", "Weaver",
               "Falcon", "Bell", "Lighthouse", "Badger", "Quill", "Kettle", "Tower", "Sparrow", "Mill",
               "Beacon", "Otter", "Chisel", "Wolf", "Magpie", "Loom", "Stag", "Furnace", "Gate", "Heath",
               "Pilgrim", "Shepherd", "Tinker", "Ferryman", "Crane", "Thistle", "Hammer", "Moth", "Willow",
               "Barge", "Owl", "Juniper")
# How alias passages state a nickname ({A}: "The Amber Heron", {a}: "the Amber Heron", {N}: the name).
ALIAS_PATTERNS = ("{A} is the nickname of {N}.", "{N} is widely known as {a}.",
                  "Many people know {N} only as {a}.")



# -- generator version 3: former names ---------------------------------------------------------------
# One appended passage per former name says that an entity "was formerly known as" another name. Two splits
# ask about a name that such a passage calls a former name, with one hop, in a train phrasing, and differ only
# in whether the name still belongs to someone:
# - ``shift_renamed``: the name is retired (no facts are stated under it); the question means the entity that
#   now bears another name, so the rename must be followed (a two-step lookup, like ``shift_strategy``).
# - ``shift_homonym``: the name is a current entity's own name (its facts are stated under it) that another
#   entity once bore; the question means the current bearer, so the rename must NOT be followed (one hop, as
#   simple as a train ``attribute`` question).
# The same surface cue, opposite right actions: a strategy that always follows a former-name statement
# (``hops``) and one that never does (``decompose``) each fail one of them.
SHIFT_RENAMED = "shift_renamed"
SHIFT_HOMONYM = "shift_homonym"
SPLITS_V3 = (*SPLITS, SHIFT_RENAMED, SHIFT_HOMONYM)
RENAME_TYPES = ("person", "organisation", "city", "film")
# How a former-name passage states it ({N}: the entity's name now, {O}: the former name).
RENAME_PATTERNS = ("{N} was formerly known as {O}.", "{O} was renamed {N} years ago.",
                   "Until it was renamed, {N} was called {O}.")
