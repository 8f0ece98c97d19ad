"""The offline world of SearchQA: a seeded synthetic knowledge base with one- and two-hop questions.

Entities are people, cities, countries, companies and rivers with invented place names (so a
language model cannot answer from memory). Each entity gets one passage stating its facts; extra
distractor passages mention the same names without the asked facts. Every question records its
hop chain: for each hop the passage that states the fact, a query that finds it, and the fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Bump when passages or questions change (part of the retrieval cache key and the env version).
OFFLINE_WORLD_VERSION = 1
OFFLINE_WORLD_SEED = 20260407

_FIRST = (
    "Ana",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jamal",
    "Keiko",
    "Lars",
    "Marta",
    "Nikos",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Stefan",
    "Tala",
    "Umar",
    "Vera",
    "Wendell",
    "Ximena",
    "Yusuf",
    "Zofia",
    "Amara",
    "Boris",
    "Celine",
    "Dario",
)
_LAST = (
    "Ruiz",
    "Novak",
    "Okafor",
    "Lindqvist",
    "Haddad",
    "Moreau",
    "Tanaka",
    "Kowalski",
    "Ferreira",
    "Ivanova",
    "Brennan",
    "Castillo",
    "Dubois",
    "Eriksen",
    "Fontaine",
    "Galli",
    "Horvat",
    "Iyer",
    "Jansen",
    "Kaur",
    "Larsen",
    "Mendes",
    "Nakamura",
    "Ortega",
    "Petrov",
    "Quiroga",
    "Rossi",
    "Sato",
    "Varga",
    "Weber",
)
_PROFESSIONS = (
    "chemist",
    "painter",
    "engineer",
    "novelist",
    "architect",
    "physician",
    "composer",
    "economist",
    "botanist",
    "journalist",
    "mathematician",
    "sculptor",
)
_INDUSTRIES = (
    "software",
    "shipping",
    "textile",
    "pharmaceutical",
    "energy",
    "publishing",
    "robotics",
    "food",
    "aerospace",
    "insurance",
)
_COMPANY_SUFFIXES = ("Labs", "Industries", "Group", "Works", "Systems", "Holdings")
_FEATURES = (
    "old harbour",
    "glass markets",
    "stone bridges",
    "spring festival",
    "botanical garden",
    "clock tower",
    "university",
    "textile mills",
    "hillside vineyards",
    "jazz clubs",
)
_TOPICS = (
    "urban water supply",
    "modern printmaking",
    "soil chemistry",
    "railway history",
    "folk music",
    "coastal erosion",
    "public health",
    "bridge design",
)
_ONSETS = ("b", "d", "k", "l", "m", "n", "r", "s", "t", "v", "z", "br", "dr", "gr", "kr", "st", "tr", "th")
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ia", "ou")
_CODAS = ("", "", "n", "r", "l", "s", "nd", "rt", "sk")


@dataclass(frozen=True)
class Passage:
    doc_id: str
    text: str


@dataclass(frozen=True)
class Hop:
    """One fact a question needs: where it is stated, how to look it up, and what it says."""

    doc_id: str  # the passage that states the fact
    query: str  # a search query that should retrieve that passage
    alt_query: str  # a reworded query for a retry
    need: str  # "the birthplace of Ana Ruiz"
    fact: str  # "Ana Ruiz was born in Veltrana."
    answer: str  # the entity this hop yields


@dataclass(frozen=True)
class KnowledgeQuestion:
    question: str
    answer: str
    hops: tuple[Hop, ...]
    kind: str


@dataclass(frozen=True)
class World:
    passages: tuple[Passage, ...]
    questions: tuple[KnowledgeQuestion, ...]


def _invent_names(rng: np.random.Generator, count: int, taken: set[str]) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        syllables = int(rng.integers(2, 4))
        parts = [
            _ONSETS[int(rng.integers(len(_ONSETS)))] + _VOWELS[int(rng.integers(len(_VOWELS)))]
            for _ in range(syllables)
        ]
        name = ("".join(parts) + _CODAS[int(rng.integers(len(_CODAS)))]).capitalize()
        if name.lower() not in taken and len(name) >= 4:
            taken.add(name.lower())
            names.append(name)
    return names


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _pick(rng: np.random.Generator, options) -> str:
    return options[int(rng.integers(len(options)))]


def build_world(seed: int = OFFLINE_WORLD_SEED) -> World:
    """Generate the knowledge base and its questions from ``seed`` (pure: same seed, same world)."""
    rng = np.random.default_rng(seed)
    taken: set[str] = set()
    countries = _invent_names(rng, 12, taken)
    cities = _invent_names(rng, 60, taken)
    rivers = _invent_names(rng, 20, taken)
    country_of = {city: countries[i % len(countries)] for i, city in enumerate(cities)}
    capital_of = {country: next(c for c in cities if country_of[c] == country) for country in countries}
    # Each river flows through 2-3 cities; a city has at most one river.
    river_cities: dict[str, list[str]] = {}
    free = [cities[int(i)] for i in rng.permutation(len(cities))]
    for river in rivers:
        river_cities[river] = [free.pop() for _ in range(int(rng.integers(2, 4)))]
    river_of = {city: river for river, cs in river_cities.items() for city in cs}

    full_names = [f"{first} {last}" for first in _FIRST for last in _LAST]
    people = [full_names[int(i)] for i in rng.permutation(len(full_names))[:150]]
    born_in = {p: _pick(rng, cities) for p in people}
    profession = {p: _pick(rng, _PROFESSIONS) for p in people}
    birth_year = {p: int(rng.integers(1930, 1995)) for p in people}

    company_roots = _invent_names(rng, 50, taken)
    companies = [f"{root} {_pick(rng, _COMPANY_SUFFIXES)}" for root in company_roots]
    founders = [people[int(i)] for i in rng.permutation(len(people))[: len(companies)]]
    founder_of = dict(zip(companies, founders))
    hq_of = {c: _pick(rng, cities) for c in companies}
    industry = {c: _pick(rng, _INDUSTRIES) for c in companies}
    founded_year = {c: int(rng.integers(1960, 2015)) for c in companies}

    # -- passages: one per entity, then distractors ---------------------------------------------
    texts: dict[str, str] = {}
    for country in countries:
        texts[f"country:{country}"] = (
            f"{country} is a country whose capital is {capital_of[country]}. It has about "
            f"{int(rng.integers(2, 60))} million inhabitants."
        )
    for city in cities:
        capital = f" and the capital of {country_of[city]}" if capital_of[country_of[city]] == city else ""
        river = f" The {river_of[city]} river flows through {city}." if city in river_of else ""
        texts[f"city:{city}"] = (
            f"{city} is a city in {country_of[city]}{capital}.{river} {city} is known for its "
            f"{_pick(rng, _FEATURES)}."
        )
    for river, through in river_cities.items():
        texts[f"river:{river}"] = (
            f"The {river} is a river about {int(rng.integers(80, 900))} km long. It flows through "
            f"{', '.join(through[:-1])} and {through[-1]}."
        )
    for person in people:
        texts[f"person:{person}"] = (
            f"{person} (born {birth_year[person]}) is {_article(profession[person])} {profession[person]}. "
            f"{person} was born in "
            f"{born_in[person]}."
        )
    for company in companies:
        texts[f"company:{company}"] = (
            f"{company} is {_article(industry[company])} {industry[company]} company founded in "
            f"{founded_year[company]} by "
            f"{founder_of[company]}. Its headquarters are in {hq_of[company]}."
        )
    distractors: list[str] = []
    for person in people[::2]:
        elsewhere = _pick(rng, [c for c in cities if c != born_in[person]])
        distractors.append(
            f"In {int(rng.integers(1970, 2020))}, {person} gave a lecture in {elsewhere} on "
            f"{_pick(rng, _TOPICS)}."
        )
    for company in companies[::2]:
        elsewhere = _pick(rng, [c for c in cities if c != hq_of[company]])
        distractors.append(
            f"{company} opened a branch office in {elsewhere} in {int(rng.integers(1990, 2024))}."
        )
    for city in cities[::2]:
        other = _pick(rng, [c for c in cities if country_of[c] != country_of[city]])
        distractors.append(f"Trains run daily from {city} to {other} in {country_of[other]}.")
    for i, text in enumerate(distractors):
        texts[f"distractor:{i}"] = text

    keys = list(texts)
    order = rng.permutation(len(keys))
    doc_id = {keys[int(j)]: f"kb-{rank:04d}" for rank, j in enumerate(order)}
    passages = tuple(Passage(doc_id[keys[int(j)]], texts[keys[int(j)]]) for j in order)

    # -- hops and questions ----------------------------------------------------------------------
    def born(p: str) -> Hop:
        return Hop(
            doc_id[f"person:{p}"],
            f"{p} born",
            f"{p} birthplace",
            f"the birthplace of {p}",
            f"{p} was born in {born_in[p]}.",
            born_in[p],
        )

    def country(c: str) -> Hop:
        return Hop(
            doc_id[f"city:{c}"],
            f"{c} city country",
            f"{c}",
            f"the country of {c}",
            f"{c} is in {country_of[c]}.",
            country_of[c],
        )

    def capital(k: str) -> Hop:
        return Hop(
            doc_id[f"country:{k}"],
            f"capital of {k}",
            f"{k} country capital",
            f"the capital of {k}",
            f"The capital of {k} is {capital_of[k]}.",
            capital_of[k],
        )

    def founder(c: str) -> Hop:
        return Hop(
            doc_id[f"company:{c}"],
            f"{c} founded by",
            f"{c} company",
            f"the founder of {c}",
            f"{c} was founded by {founder_of[c]}.",
            founder_of[c],
        )

    def hq(c: str) -> Hop:
        return Hop(
            doc_id[f"company:{c}"],
            f"{c} headquarters",
            f"{c} company",
            f"where {c} is headquartered",
            f"{c} is headquartered in {hq_of[c]}.",
            hq_of[c],
        )

    def river(c: str) -> Hop:
        return Hop(
            doc_id[f"city:{c}"],
            f"river flows through {c}",
            f"{c} city",
            f"the river of {c}",
            f"The {river_of[c]} flows through {c}.",
            river_of[c],
        )

    candidates: list[KnowledgeQuestion] = []

    def add(kind: str, question: str, *hops: Hop) -> None:
        candidates.append(KnowledgeQuestion(question, hops[-1].answer, hops, kind))

    for p in people:
        add("born", f"Where was {p} born?", born(p))
        add("born_country", f"In which country was {p} born?", born(p), country(born_in[p]))
        if born_in[p] in river_of:
            add(
                "born_river",
                f"Which river flows through the city where {p} was born?",
                born(p),
                river(born_in[p]),
            )
    for c in cities:
        add("city_country", f"In which country is the city of {c}?", country(c))
        if c in river_of:
            add("city_river", f"Which river flows through {c}?", river(c))
        if capital_of[country_of[c]] != c:
            add(
                "city_capital",
                f"What is the capital of the country where {c} is located?",
                country(c),
                capital(country_of[c]),
            )
    for k in countries:
        add("capital", f"What is the capital of {k}?", capital(k))
    for c in companies:
        add("founder", f"Who founded {c}?", founder(c))
        add("hq", f"In which city is {c} headquartered?", hq(c))
        add("founder_born", f"Where was the founder of {c} born?", founder(c), born(founder_of[c]))
        add("hq_country", f"In which country is {c} headquartered?", hq(c), country(hq_of[c]))

    questions = tuple(candidates[int(i)] for i in rng.permutation(len(candidates)))
    return World(passages=passages, questions=questions)


_CACHE: dict[int, World] = {}


def offline_world() -> World:
    """The offline world (identical in every process), built once per process."""
    if OFFLINE_WORLD_VERSION not in _CACHE:
        _CACHE[OFFLINE_WORLD_VERSION] = build_world()
    return _CACHE[OFFLINE_WORLD_VERSION]
