"""MetaMathQA: answer a math word problem, with a halving reward for each retry (docs/method.md §1.4).

The offline world is a seeded generator of integer-answer arithmetic word problems of three
difficulty levels; the real world is MetaMathQA (``meta-math/MetaMathQA``) read from a local file.

## Description

Each episode is one problem. The offline world (default) draws from a fixed, seeded set of
3,000 generated integer-answer word problems (1,000 per difficulty: 1 = one operation, 2 = two
steps, 3 = three steps with percentages or fractions) from 15 templates (shopping, travel,
ages, sharing, giving, baking, fruit picking, library loans, savings). With ``data_path`` the
problems come from a local MetaMathQA file (``query``/``response``; the gold answer is the text after the last
``The answer is:`` in ``response``). The problem index is drawn from the reset seed.

## Actions

Any string; it is the final answer. It is correct when it equals the gold answer after
lower-casing and removing all whitespace (so ``"$21"`` does not match ``"21"``). An empty or
whitespace-only action is invalid: nothing changes and no attempt is used. So is an action with a
control character other than whitespace (e.g. NUL): that is malformed text, not an answer (the
reference would count it as a wrong answer).

## Observation

The problem text at reset; ``"Correct!"`` after a correct answer; ``"Incorrect. Please think
again."`` after a wrong one; ``"Incorrect. No attempts left."`` after the last allowed wrong one.

## Rewards

``1 / 2**k`` for a correct answer on attempt ``k`` (0-based), 0 otherwise. ``success`` is true
on the correct step. The reference's agent budget (one action per trajectory) means its retries
never happen; here they do (``max_attempts``, default 5), following the paper's halving schedule,
and ``agent_defaults`` allows 5 actions per trajectory (the reference: 1) so that a policy can use
them.

## Episode end

Terminated after a correct answer; truncated after ``max_attempts`` wrong answers.

## Arguments

- ``difficulty`` (``1``, ``2``, ``3`` or ``"mixed"``, default ``"mixed"``): offline difficulty level.
  Only ``"mixed"`` is allowed with ``data_path``.
- ``max_attempts`` (int >= 1, default 5): answers allowed per episode.
- ``data_path`` (path or None): a MetaMathQA ``.json``/``.jsonl``/``.parquet`` file; None uses the
  offline world.
- ``render_mode`` (None or ``"ansi"``).
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv
from ragen2.envs.datafiles import load_table
from ragen2.fileio import atomic_path

CORRECT_OBS = "Correct!"
INCORRECT_OBS = "Incorrect. Please think again."
OUT_OF_ATTEMPTS_OBS = "Incorrect. No attempts left."
ANSWER_MARKER = "The answer is:"

#: Problems generated per difficulty level for the offline world, and the seed that generates them.
OFFLINE_PROBLEMS_PER_LEVEL = 1000
OFFLINE_GENERATOR_SEED = 20260406
DIFFICULTIES = (1, 2, 3)


def is_answer_text(text: str) -> bool:
    """True when ``text`` can be an answer: something besides whitespace, and no control characters."""
    return bool(text.strip()) and not any(
        unicodedata.category(ch) == "Cc" and not ch.isspace() for ch in text
    )


def normalize_math_answer(text: str) -> str:
    """The reference's comparison key: lower-cased, with every whitespace character removed."""
    return "".join(text.lower().split())


# -- the offline world: templated word problems ----------------------------------------------------


@dataclass(frozen=True)
class MathProblem:
    """One word problem: its text, integer answer, and the computation that solves it."""

    question: str
    answer: int
    steps: tuple[str, ...]  # e.g. ("12 apples - 5 eaten = 7", "7 * 3 = 21")
    topic: str
    difficulty: int


_NAMES = (
    ("Maya", "she"),
    ("Leo", "he"),
    ("Aisha", "she"),
    ("Tomas", "he"),
    ("Priya", "she"),
    ("Kenji", "he"),
    ("Sofia", "she"),
    ("Omar", "he"),
    ("Lena", "she"),
    ("Diego", "he"),
    ("Hana", "she"),
    ("Felix", "he"),
    ("Zara", "she"),
    ("Ivan", "he"),
    ("Nora", "she"),
    ("Samuel", "he"),
    ("Mei", "she"),
    ("Jonas", "he"),
)
_ITEMS = ("notebooks", "pens", "mugs", "scarves", "puzzles", "candles", "plants", "comic books")
_THINGS = ("marbles", "stickers", "cards", "shells", "stamps", "beads", "coins", "apples")
_VEHICLES = (("train", "miles"), ("bus", "kilometers"), ("cyclist", "kilometers"), ("ferry", "miles"))
_RELATIVES = ("aunt", "uncle", "cousin", "older sister", "grandmother")
_PERCENTS = (10, 20, 25, 50)


def _pick(rng: np.random.Generator, options: tuple) -> Any:
    return options[int(rng.integers(len(options)))]


def _num(rng: np.random.Generator, low: int, high: int) -> int:
    """An integer in ``[low, high]``."""
    return int(rng.integers(low, high + 1))


def _shopping_1(rng):
    (name, pron), item = _pick(rng, _NAMES), _pick(rng, _ITEMS)
    n, p = _num(rng, 2, 12), _num(rng, 2, 15)
    q = f"{name} buys {n} {item} that cost ${p} each. How many dollars does {pron} spend?"
    return q, n * p, (f"{n} {item} * ${p} = ${n * p}",)


def _travel_1(rng):
    vehicle, unit = _pick(rng, _VEHICLES)
    v, h = _num(rng, 3, 12) * 5, _num(rng, 2, 8)
    q = f"A {vehicle} travels at {v} {unit} per hour. How many {unit} does the {vehicle} cover in {h} hours?"
    return q, v * h, (f"{v} {unit}/hour * {h} hours = {v * h}",)


def _ages_1(rng):
    (name, _), rel = _pick(rng, _NAMES), _pick(rng, _RELATIVES)
    a, d = _num(rng, 4, 30), _num(rng, 3, 40)
    q = f"{name} is {a} years old. {name}'s {rel} is {d} years older. How old is {name}'s {rel}?"
    return q, a + d, (f"{a} + {d} years = {a + d}",)


def _sharing_1(rng):
    (name, _), thing = _pick(rng, _NAMES), _pick(rng, _THINGS)
    k, each = _num(rng, 2, 9), _num(rng, 2, 15)
    total = k * each
    q = f"{name} shares {total} {thing} equally among {k} friends. How many {thing} does each friend get?"
    return q, each, (f"{total} {thing} / {k} friends = {each}",)


def _giving_1(rng):
    (name, pron), (other, _), thing = _pick(rng, _NAMES), _pick(rng, _NAMES), _pick(rng, _THINGS)
    a = _num(rng, 15, 90)
    b = _num(rng, 1, a - 1)
    q = f"{name} has {a} {thing} and gives {b} of them to {other}. How many {thing} does {pron} have left?"
    return q, a - b, (f"{a} {thing} - {b} given = {a - b}",)


def _shopping_2(rng):
    (name, pron), item = _pick(rng, _NAMES), _pick(rng, _ITEMS)
    n, p = _num(rng, 2, 9), _num(rng, 2, 9)
    cost = n * p
    bill = 100 if cost >= 50 else _pick(rng, (50, 100))
    q = (
        f"{name} buys {n} {item} at ${p} each and pays with a ${bill} bill. "
        f"How many dollars of change does {pron} get back?"
    )
    return q, bill - cost, (f"{n} * ${p} = ${cost}", f"${bill} - ${cost} = ${bill - cost}")


def _travel_2(rng):
    vehicle, unit = _pick(rng, _VEHICLES)
    v1, h1, v2, h2 = _num(rng, 4, 12) * 5, _num(rng, 1, 5), _num(rng, 4, 12) * 5, _num(rng, 1, 5)
    q = (
        f"A {vehicle} travels at {v1} {unit} per hour for {h1} hours, then at {v2} {unit} per hour "
        f"for {h2} hours. How many {unit} does it travel in total?"
    )
    d1, d2 = v1 * h1, v2 * h2
    return q, d1 + d2, (f"{v1} * {h1} = {d1}", f"{v2} * {h2} = {d2}", f"{d1} + {d2} = {d1 + d2}")


def _ages_2(rng):
    (name, _), rel = _pick(rng, _NAMES), _pick(rng, ("mother", "father", "grandfather", "aunt"))
    a, m, y = _num(rng, 3, 12), _num(rng, 2, 5), _num(rng, 2, 15)
    q = (
        f"{name} is {a} years old. {name}'s {rel} is {m} times as old as {name}. "
        f"How old will the {rel} be in {y} years?"
    )
    return q, a * m + y, (f"{a} * {m} = {a * m} years now", f"{a * m} + {y} = {a * m + y}")


def _bakery_2(rng):
    batches, per, sold_frac = _num(rng, 3, 9), _pick(rng, (12, 18, 24, 30)), _num(rng, 1, 9)
    made = batches * per
    sold = max(1, made * sold_frac // 10)
    q = (
        f"A bakery bakes {batches} batches of {per} cookies each. It sells {sold} cookies. "
        f"How many cookies are left?"
    )
    return q, made - sold, (f"{batches} * {per} = {made} cookies", f"{made} - {sold} sold = {made - sold}")


def _apples_2(rng):
    (name, pron) = _pick(rng, _NAMES)
    a = _num(rng, 8, 30)
    b, m = _num(rng, 1, a - 2), _num(rng, 2, 4)
    left = a - b
    q = (
        f"{name} picks {a} apples and eats {b} of them. Then {pron} buys {m} times as many apples as "
        f"{pron} has left and puts them all in one basket with the others. How many apples are in the basket?"
    )
    bought = left * m
    return (
        q,
        left + bought,
        (
            f"{a} apples - {b} eaten = {left}",
            f"{left} * {m} = {bought} bought",
            f"{left} + {bought} = {left + bought}",
        ),
    )


def _discount_3(rng):
    (name, pron), item = _pick(rng, _NAMES), _pick(rng, ("jacket", "lamp", "backpack", "pair of boots"))
    price, off, n = _num(rng, 2, 10) * 20, _pick(rng, _PERCENTS), _num(rng, 2, 4)
    sale = price * (100 - off) // 100
    total = sale * n
    coupon = _num(rng, 1, max(1, total // 10))
    q = (
        f"A {item} costs ${price}. This week it is {off}% off. {name} buys {n} of them and uses a "
        f"${coupon} coupon on the total. How many dollars does {pron} pay?"
    )
    return (
        q,
        total - coupon,
        (
            f"{off}% off ${price} = ${sale}",
            f"{n} * ${sale} = ${total}",
            f"${total} - ${coupon} = ${total - coupon}",
        ),
    )


def _library_3(rng):
    a, b = _num(rng, 2, 5), _num(rng, 2, 4)
    books = a * b * _num(rng, 2, 12)  # both fractions come out exact
    monday = books // a
    rest = books - monday
    tuesday = rest // b
    returned = _num(rng, 3, 25)
    final = rest - tuesday + returned
    q = (
        f"A library has {books} books. On Monday it lends out 1/{a} of them, and on Tuesday it lends "
        f"out 1/{b} of the books still on the shelves. On Wednesday {returned} books are returned. "
        f"How many books are on the shelves now?"
    )
    return (
        q,
        final,
        (
            f"{books} / {a} = {monday} lent Monday, {books} - {monday} = {rest}",
            f"{rest} / {b} = {tuesday} lent Tuesday, {rest} - {tuesday} = {rest - tuesday}",
            f"{rest - tuesday} + {returned} returned = {final}",
        ),
    )


def _roadtrip_3(rng):
    pct = _pick(rng, (20, 25, 40, 50))
    dist = _num(rng, 4, 20) * 20
    first = dist * pct // 100
    second = _num(rng, 1, max(1, (dist - first) // 2))
    left = dist - first - second
    q = (
        f"A family plans a {dist} km road trip. On the first day they drive {pct}% of the distance, and on "
        f"the second day they drive {second} km. How many km do they still have to drive?"
    )
    return (
        q,
        left,
        (
            f"{pct}% of {dist} = {first} km",
            f"{first} + {second} = {first + second} km driven",
            f"{dist} - {first + second} = {left}",
        ),
    )


def _ages_3(rng):
    (name, _) = _pick(rng, _NAMES)
    a, m, g, y = _num(rng, 4, 12), _num(rng, 2, 4), _num(rng, 20, 35), _num(rng, 2, 10)
    mother = a * m
    q = (
        f"{name} is {a} years old. {name}'s mother is {m} times as old as {name}, and {name}'s grandfather "
        f"is {g} years older than the mother. How old will the grandfather be in {y} years?"
    )
    return (
        q,
        mother + g + y,
        (
            f"{a} * {m} = {mother} (mother)",
            f"{mother} + {g} = {mother + g} (grandfather)",
            f"{mother + g} + {y} = {mother + g + y}",
        ),
    )


def _savings_3(rng):
    (name, pron), item = _pick(rng, _NAMES), _pick(rng, ("bike", "guitar", "tablet", "tent"))
    wage, pct, weeks = _num(rng, 4, 20) * 20, _pick(rng, _PERCENTS), _num(rng, 3, 10)
    weekly = wage * pct // 100
    saved = weekly * weeks
    spent = _num(rng, 1, saved - 1)
    q = (
        f"{name} earns ${wage} a week and saves {pct}% of it. After {weeks} weeks {pron} spends "
        f"${spent} on a {item}. How many dollars of savings does {pron} have left?"
    )
    return (
        q,
        saved - spent,
        (
            f"{pct}% of ${wage} = ${weekly} a week",
            f"{weeks} * ${weekly} = ${saved}",
            f"${saved} - ${spent} = ${saved - spent}",
        ),
    )


_Template = Callable[[np.random.Generator], tuple[str, int, tuple[str, ...]]]
TEMPLATES: dict[int, tuple[tuple[str, _Template], ...]] = {
    1: (
        ("shopping", _shopping_1),
        ("travel", _travel_1),
        ("ages", _ages_1),
        ("sharing", _sharing_1),
        ("giving", _giving_1),
    ),
    2: (
        ("shopping", _shopping_2),
        ("travel", _travel_2),
        ("ages", _ages_2),
        ("bakery", _bakery_2),
        ("apples", _apples_2),
    ),
    3: (
        ("shopping", _discount_3),
        ("library", _library_3),
        ("travel", _roadtrip_3),
        ("ages", _ages_3),
        ("savings", _savings_3),
    ),
}


def generate_problem(rng: np.random.Generator, difficulty: int) -> MathProblem:
    """Draw one word problem of ``difficulty`` (1: one operation, 2: two steps, 3: three steps)."""
    if difficulty not in TEMPLATES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
    topic, template = _pick(rng, TEMPLATES[difficulty])
    question, answer, steps = template(rng)
    if answer < 0:  # a template bug, not a data condition
        raise AssertionError(f"template {topic}/{difficulty} produced a negative answer for {question!r}")
    return MathProblem(question, int(answer), tuple(steps), topic, difficulty)


_OFFLINE_CACHE: dict[str, tuple[MathProblem, ...]] = {}


def offline_problems() -> tuple[MathProblem, ...]:
    """The offline problem set (same in every process), generated once per process."""
    if "all" not in _OFFLINE_CACHE:
        rng = np.random.default_rng(OFFLINE_GENERATOR_SEED)
        _OFFLINE_CACHE["all"] = tuple(
            generate_problem(rng, level) for level in DIFFICULTIES for _ in range(OFFLINE_PROBLEMS_PER_LEVEL)
        )
    return _OFFLINE_CACHE["all"]


def problem_to_record(problem: MathProblem) -> dict[str, str]:
    """The problem as a MetaMathQA row (``query``, ``response``, ``type``, ``original_question``)."""
    response = " ".join(f"{step}." for step in problem.steps) + f"\n{ANSWER_MARKER} {problem.answer}"
    return {
        "query": problem.question,
        "response": response,
        "type": f"synthetic_{problem.topic}_d{problem.difficulty}",
        "original_question": problem.question,
    }


def write_offline_data(root: Path) -> list[Path]:
    """Write the offline problem set to ``root/metamathqa/train.jsonl`` (real schema), atomically."""
    path = Path(root) / "metamathqa" / "train.jsonl"
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for problem in offline_problems():
            handle.write(json.dumps(problem_to_record(problem), ensure_ascii=False) + "\n")
    return [path]


# -- the real world: MetaMathQA from a local file ---------------------------------------------------

def extract_gold_answer(response: str) -> str | None:
    """Text after the last ``The answer is:`` in a MetaMathQA response, or ``None`` if absent."""
    head, marker, tail = response.rpartition(ANSWER_MARKER)
    return tail.strip() if marker else None


def load_metamathqa(path: str | os.PathLike) -> Any:
    """Load a MetaMathQA file (``.json``/``.jsonl``/``.parquet``) with ``datasets``, cached per process.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file lacks the ``query`` or ``response`` column, or has no rows.
    """
    return load_table(path, {"query", "response"}, "MetaMathQA")


# -- the environment ------------------------------------------------------------------------------


class MetaMathQAEnv(TextEnv):
    """Answer a math word problem; a correct answer on attempt ``k`` (0-based) earns ``1/2**k``.

    The module docstring is the full specification (Description, Actions, ..., Arguments).
    """

    name = "metamathqa"
    instruction = (
        "You are solving math word problems. Work the problem out step by step in your thoughts, then give "
        "only the final answer (for example 42) as your answer, with no units or extra words. If you are "
        "told the answer is incorrect, you may try again, but each retry halves the reward."
    )
    # The reference budget is one action per trajectory (no retries); we allow the paper's retries.
    agent_defaults = AgentDefaults(
        max_turns=5, max_actions_per_turn=1, max_actions_per_traj=5, max_tokens_hint=100
    )

    def __init__(
        self,
        *,
        difficulty: int | str = "mixed",
        max_attempts: int = 5,
        data_path: str | os.PathLike | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if isinstance(difficulty, bool) or difficulty not in (*DIFFICULTIES, "mixed"):
            raise ValueError(f"difficulty must be one of {DIFFICULTIES} or 'mixed', got {difficulty!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        if data_path is not None and not isinstance(data_path, (str, os.PathLike)):
            raise ValueError(f"data_path must be a path or None, got {data_path!r}")
        if data_path is not None and difficulty != "mixed":
            raise ValueError(f"difficulty={difficulty!r} only applies to the offline world (data_path=None)")
        self.difficulty = difficulty
        self.max_attempts = max_attempts
        self.data_path = None if data_path is None else Path(data_path)
        if self.data_path is not None:
            load_metamathqa(self.data_path)  # fail fast on a bad file
        self._question = ""
        self._gold = ""
        self._steps: tuple[str, ...] = ()
        self._attempts = 0

    # -- data ------------------------------------------------------------------------------------
    def _offline_indices(self) -> range | list[int]:
        problems = offline_problems()
        if self.difficulty == "mixed":
            return range(len(problems))
        start = (int(self.difficulty) - 1) * OFFLINE_PROBLEMS_PER_LEVEL
        return range(start, start + OFFLINE_PROBLEMS_PER_LEVEL)

    def num_problems(self) -> int:
        """How many problems the current world draws from."""
        if self.data_path is None:
            return len(self._offline_indices())
        return len(load_metamathqa(self.data_path))

    def _load_problem(self, index: int) -> None:
        if self.data_path is None:
            problem = offline_problems()[self._offline_indices()[index]]
            self._question, self._gold, self._steps = problem.question, str(problem.answer), problem.steps
            return
        row = load_metamathqa(self.data_path)[index]
        gold = extract_gold_answer(str(row["response"]))
        if gold is None:
            raise ValueError(
                f"row {index} of {str(self.data_path)!r} has no {ANSWER_MARKER!r} in its response"
            )
        body = str(row["response"]).rpartition(ANSWER_MARKER)[0].strip()
        last_line = body.splitlines()[-1].strip() if body else ""
        self._question, self._gold = str(row["query"]), gold
        self._steps = (last_line[:200],) if last_line else ()

    # -- the Gymnasium API -------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        size = self.num_problems()
        index = options.get("index")
        if index is None:
            index = int(self.np_random.integers(size))
        elif isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < size:
            raise ValueError(f"options['index'] must be an int in [0, {size}), got {index!r}")
        self._load_problem(int(index))
        self._attempts = 0
        return self._question, {"index": int(index)}

    def _step(self, action: str) -> StepResult:
        guess = normalize_math_answer(action)
        if not guess or not is_answer_text(action):
            return StepResult(
                obs=self._obs or "",
                action_is_valid=False,
                action_is_effective=False,
                info={"attempts_used": self._attempts},
            )
        attempt = self._attempts
        self._attempts += 1
        info = {"attempts_used": self._attempts}
        if guess == normalize_math_answer(self._gold):
            return StepResult(
                obs=CORRECT_OBS, reward=1.0 / 2**attempt, terminated=True, success=True, info=info
            )
        if self._attempts >= self.max_attempts:
            return StepResult(obs=OUT_OF_ATTEMPTS_OBS, truncated=True, info=info)
        return StepResult(obs=INCORRECT_OBS, info=info)

    def expert(self) -> ExpertMove:
        """Answer the gold answer, with the computation that yields it as the reasoning."""
        if self._steps:
            work = ", then ".join(self._steps)
            think = f"{work}. So the answer is {self._gold}."
        else:
            think = f"Working it through, the answer is {self._gold}."
        return ExpertMove(action=self._gold, think=think)
