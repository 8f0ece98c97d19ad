"""The offline world of SearchQA: a seeded synthetic knowledge base with one- and two-hop questions.

Entities are people, cities, countries, companies and rivers with invented place names (so a
language model cannot answer from memory). Each entity gets one passage stating its facts; extra
distractor passages mention the same names without the asked facts. Every question records its
hop chain: for each hop the passage that states the fact, a query that finds it, and the fact.

The words entities are made of, the relations a hop can state and the questions asked of each kind
of entity are data (``data/searchqa_world.yaml``); this module draws the entities and their facts
from a seed and writes the passages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

#: Bump when passages or questions change (part of the retrieval cache key and the env version).
OFFLINE_WORLD_VERSION = 1
OFFLINE_WORLD_SEED = 20260407
DATA = Path(__file__).parent / "data" / "searchqa_world.yaml"
_SPEC: dict[str, Any] = yaml.safe_load(DATA.read_text(encoding="utf-8"))
_WORDS: dict[str, tuple[str, ...]] = {key: tuple(words) for key, words in _SPEC["vocabulary"].items()}


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
            _WORDS["name_onsets"][int(rng.integers(len(_WORDS["name_onsets"])))] + _WORDS["name_vowels"][int(rng.integers(len(_WORDS["name_vowels"])))]
            for _ in range(syllables)
        ]
        name = ("".join(parts) + _WORDS["name_codas"][int(rng.integers(len(_WORDS["name_codas"])))]).capitalize()
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

    full_names = [f"{first} {last}" for first in _WORDS["first_names"] for last in _WORDS["last_names"]]
    people = [full_names[int(i)] for i in rng.permutation(len(full_names))[:150]]
    born_in = {p: _pick(rng, cities) for p in people}
    profession = {p: _pick(rng, _WORDS["professions"]) for p in people}
    birth_year = {p: int(rng.integers(1930, 1995)) for p in people}

    company_roots = _invent_names(rng, 50, taken)
    companies = [f"{root} {_pick(rng, _WORDS['company_suffixes'])}" for root in company_roots]
    founders = [people[int(i)] for i in rng.permutation(len(people))[: len(companies)]]
    founder_of = dict(zip(companies, founders))
    hq_of = {c: _pick(rng, cities) for c in companies}
    industry = {c: _pick(rng, _WORDS["industries"]) for c in companies}
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
            f"{_pick(rng, _WORDS['city_features'])}."
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
            f"{_pick(rng, _WORDS['lecture_topics'])}."
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

    # -- hops and questions (data/searchqa_world.yaml) ------------------------------------------
    related = {"born": born_in, "country": country_of, "capital": capital_of, "founder": founder_of, "hq": hq_of,
               "river": river_of}
    entities = {"person": people, "city": cities, "country": countries, "company": companies}
    candidates = [q for kind, asked in _SPEC["questions"].items() for x in entities[kind] for spec in asked
                  if (q := _question(spec, x, related, doc_id)) is not None]
    questions = tuple(candidates[int(i)] for i in rng.permutation(len(candidates)))
    return World(passages=passages, questions=questions)


def _hop(relation: str, x: str, y: str, doc_id: dict[str, str]) -> Hop:
    """The hop that looks up ``relation`` of ``x`` (whose value is ``y``), from its template in the data file."""
    spec = _SPEC["relations"][relation]
    text = {field: spec[field].format(x=x, y=y) for field in ("query", "alt_query", "need", "fact")}
    return Hop(doc_id[f"{spec['passage']}:{x}"], text["query"], text["alt_query"], text["need"], text["fact"], y)


def _question(spec: dict[str, Any], x: str, related: dict[str, dict[str, str]],
              doc_id: dict[str, str]) -> KnowledgeQuestion | None:
    """The question ``spec`` asks of ``x``: its hops chained from ``x``; ``None`` where a hop is undefined (a city
    without a river) or the answer is ``x`` itself."""
    hops, subject = [], x
    for relation in spec["hops"]:
        if subject not in related[relation]:
            return None
        hops.append(_hop(relation, subject, related[relation][subject], doc_id))
        subject = hops[-1].answer
    if subject == x:
        return None
    return KnowledgeQuestion(spec["question"].format(x=x), subject, tuple(hops), spec["kind"])


_CACHE: dict[int, World] = {}


def offline_world() -> World:
    """The offline world (identical in every process), built once per process."""
    if OFFLINE_WORLD_VERSION not in _CACHE:
        _CACHE[OFFLINE_WORLD_VERSION] = build_world()
    return _CACHE[OFFLINE_WORLD_VERSION]
