"""Countdown: combine the given numbers with + - * / into an expression equal to the target (v0).

## Description

One problem is a target integer and a list of numbers (3 or 4 by default). The agent answers with one arithmetic
expression over those numbers; the episode is a single step. Problems come either from a seeded
generator (the default, no files needed) or from a parquet file in the schema of the paper's
``Jiayi-Pan/Countdown-Tasks-3to4`` set (columns ``target`` and ``nums``). Every problem the
environment serves is solvable: the generator builds each target from a solution, and the real-data
loader drops rows that the exhaustive solver :func:`solve` cannot solve with ``+ - * /`` (the
reference keeps rows solvable with ``+``/``-`` only; for positive targets our filter keeps a
superset of those rows).

## Actions

Any string (the text inside ``<answer>``). It is read as an expression made only of non-negative
integer literals, ``+ - * /``, parentheses and whitespace, at most ``max_expression_length``
characters. It is parsed with :mod:`ast` and evaluated by our own walker on exact fractions;
nothing is ever passed to ``eval``. Unary signs, powers, floats, names and calls are rejected.

## Observation

``Target: <T>, nums: [<a>, <b>, ...]``, e.g. ``Target: 24, nums: [3, 5, 8, 2]``. The observation does
not change after the answer.

## Rewards

- 0.0 when the text is not such an expression, or it uses integers that are not the given numbers
  (with ``require_all_numbers=True``, the default, the multiset of integers must *equal* the given
  numbers, as in the reference; with ``False`` it must be a sub-multiset, i.e. each number used at
  most once), or it cannot be evaluated (division by zero). These steps carry
  ``action_is_valid=False``: they are not a legal Countdown answer.
- 0.1 when it is a legal answer whose value differs from the target by 1e-5 or more.
- 1.0 when the value equals the target (within 1e-5); ``success`` is then true.

## Episode end

Terminated after the first string action, whatever it is (one action per episode, ``max_turns=1``).
Truncation never happens inside the environment.

## Arguments

- ``data_path`` (``None`` or path): ``None`` serves the generated set
  (``generate_problems(num_problems, data_seed)``, built once per process); a path loads that parquet
  file with :func:`load_countdown_parquet`.
- ``num_problems`` (int or ``None``): size of the generated set (default 10,000), or how many leading
  rows of the parquet file are read before unsolvable ones are dropped (default 20,000, as in the
  reference; the environment may then hold fewer problems).
- ``data_seed`` (int): seed of the generated set (ignored for a parquet file).
- ``min_numbers``, ``max_numbers`` (int in [2, 6], default 3 and 4): how many numbers a generated problem
  has (generated set only). ``min_numbers=max_numbers=2`` is the one-operation variant a tiny CPU policy
  can partly learn (the CPU profile's).
- ``require_all_numbers`` (bool): see Rewards. Also decides the solvability filter of real data.
  The instruction text always asks for every number exactly once (the stricter rule).
- ``max_expression_length`` (int): longer answers are rejected unparsed.

The problem for ``reset(seed=s)`` is number ``s mod N``; ``reset()`` without a seed draws the index
from the environment's generator.

## Version History

- v0: initial version.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv
from ragen2.envs.countdown_arithmetic import (
    ATOM,
    DEFAULT_MAX_EXPRESSION_LENGTH,
    expression_steps,
    join_texts,
    parse_expression,
    score_expression,
    solve,
)
from ragen2.fileio import atomic_path

DEFAULT_NUM_GENERATED = 10_000
DEFAULT_NUM_REAL_ROWS = 20_000  # the reference reads the first 20,000 rows of the real set
DEFAULT_DATA_SEED = 0

# Generated problems: 3-4 numbers (by default) in [1, 99], a target in [1, 100].
MIN_NUMBER, MAX_NUMBER = 1, 99
DEFAULT_MIN_NUMBERS, DEFAULT_MAX_NUMBERS = 3, 4
MIN_TARGET, MAX_TARGET = 1, 100
# Real data: the most numbers a row may have (the exhaustive solver grows fast with this).
MAX_ROW_NUMBERS = 6


# ---------------------------------------------------------------------------------------------
# Data: generated set, real-data loader, offline file
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CountdownProblem:
    target: int
    nums: tuple[int, ...]
    solution: str

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "nums": list(self.nums), "solution": self.solution}


def _random_problem(rng: np.random.Generator, min_numbers: int = DEFAULT_MIN_NUMBERS,
                    max_numbers: int = DEFAULT_MAX_NUMBERS) -> CountdownProblem | None:
    """Draw ``min_numbers``-``max_numbers`` numbers and fold them with random operations; ``None`` when no
    target in range results.

    Every intermediate value is a positive integer, as in the TV game: subtraction takes the larger
    operand first and needs distinct operands, division must be exact. The operation at each step is
    drawn among those allowed (at the last step, among those landing in the target range).
    """
    # one draw per attempt keeps generation fast: a count, the numbers and three picks per fold (4n - 2 at most)
    uniforms = iter(rng.random(max(16, 4 * max_numbers)).tolist())

    def pick(count: int) -> int:
        return min(int(next(uniforms) * count), count - 1)

    nums = [MIN_NUMBER + pick(MAX_NUMBER - MIN_NUMBER + 1) for _ in range(min_numbers + pick(max_numbers - min_numbers + 1))]
    terms = [(n, str(n), ATOM) for n in nums]  # (value, text, precedence) on plain ints
    while len(terms) > 1:
        i = pick(len(terms))
        j = (i + 1 + pick(len(terms) - 1)) % len(terms)
        (big, big_text, big_prec), (small, small_text, small_prec) = sorted(
            (terms[i], terms[j]), reverse=True
        )
        results = {"+": big + small, "*": big * small}
        if big != small:
            results["-"] = big - small
        if big % small == 0:
            results["/"] = big // small
        if len(terms) == 2:
            results = {op: value for op, value in results.items() if MIN_TARGET <= value <= MAX_TARGET}
            if not results:
                return None
        op = sorted(results)[pick(len(results))]
        text, precedence = join_texts(big_text, big_prec, op, small_text, small_prec)
        terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [(results[op], text, precedence)]
    value, text, _ = terms[0]
    return CountdownProblem(value, tuple(nums), text)


@functools.lru_cache(maxsize=8)
def _generated_set(num_problems: int, seed: int, min_numbers: int = DEFAULT_MIN_NUMBERS,
                   max_numbers: int = DEFAULT_MAX_NUMBERS) -> tuple[CountdownProblem, ...]:
    rng = np.random.default_rng(seed)
    problems: list[CountdownProblem] = []
    while len(problems) < num_problems:
        problem = _random_problem(rng, min_numbers, max_numbers)
        if problem is not None:
            problems.append(problem)
    return tuple(problems)


def generate_problems(n: int, seed: int, min_numbers: int = DEFAULT_MIN_NUMBERS,
                      max_numbers: int = DEFAULT_MAX_NUMBERS) -> list[dict[str, Any]]:
    """``n`` solvable problems ``{"target", "nums", "solution"}``, the same for the same ``seed``.

    Targets lie in [1, 100]; there are ``min_numbers`` to ``max_numbers`` numbers (default 3 or 4) in
    [1, 99]; ``solution`` uses every number exactly once and evaluates to the target.
    """
    _check_count("n", n)
    _check_seed("seed", seed)
    _check_number_range(min_numbers, max_numbers)
    return [problem.as_dict() for problem in _generated_set(n, seed, min_numbers, max_numbers)]


def _check_number_range(min_numbers: int, max_numbers: int) -> None:
    for name, value in (("min_numbers", min_numbers), ("max_numbers", max_numbers)):
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_ROW_NUMBERS:
            raise ValueError(f"{name} must be an int in [2, {MAX_ROW_NUMBERS}], got {value!r}")
    if min_numbers > max_numbers:
        raise ValueError(f"min_numbers must be <= max_numbers, got min_numbers={min_numbers!r}, "
                         f"max_numbers={max_numbers!r}")


def load_countdown_parquet(
    path: str | os.PathLike[str],
    *,
    num_problems: int = DEFAULT_NUM_REAL_ROWS,
    require_all_numbers: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Read the first ``num_problems`` rows of a Countdown parquet file and keep the solvable ones.

    The file needs columns ``target`` (int) and ``nums`` (list of int), as in
    ``Jiayi-Pan/Countdown-Tasks-3to4``. It is read with ``datasets.load_dataset("parquet", ...)``
    (``cache_dir`` is passed on). A row is kept when :func:`solve` finds an expression (all numbers
    used if ``require_all_numbers``); that expression becomes the row's ``solution``.

    Raises:
        FileNotFoundError: if ``path`` is not a file.
        ValueError: if a column is missing, or a row's values are not ints, or a row has no numbers,
            more than six, or a negative one (the answer grammar has no negative literals).
    """
    _check_count("num_problems", num_problems)
    return [
        p.as_dict() for p in _load_real_set(*_file_key(path), num_problems, require_all_numbers, cache_dir)
    ]


def _file_key(path: str | os.PathLike[str]) -> tuple[str, int, int]:
    """Resolved path plus modification time and size, so the cache notices a rewritten file."""
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise FileNotFoundError(f"Countdown data file {str(path)!r} does not exist")
    stat = resolved.stat()
    return str(resolved), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=4)
def _load_real_set(
    path: str, mtime_ns: int, size: int, num_rows: int, require_all: bool, cache_dir: Any
) -> tuple[CountdownProblem, ...]:
    from datasets import load_dataset  # heavy import, only needed for real data

    dataset = load_dataset("parquet", data_files=path, split="train", cache_dir=cache_dir)
    missing = {"target", "nums"} - set(dataset.column_names)
    if missing:
        raise ValueError(
            f"Countdown file {path!r} lacks column(s) {sorted(missing)}; has {dataset.column_names}"
        )
    head = dataset.select(range(min(num_rows, len(dataset))))
    problems = []
    for index, (target, nums) in enumerate(zip(head["target"], head["nums"])):
        if type(target) is not int or not isinstance(nums, list) or not all(type(n) is int for n in nums):
            raise ValueError(
                f"Countdown file {path!r} row {index}: target={target!r}, nums={nums!r} are not ints"
            )
        if not 1 <= len(nums) <= MAX_ROW_NUMBERS or min(nums) < 0:
            raise ValueError(
                f"Countdown file {path!r} row {index}: nums={nums!r} must be 1 to {MAX_ROW_NUMBERS} "
                "non-negative ints"
            )
        solution = solve(nums, target, use_all=require_all)
        if solution is not None:
            problems.append(CountdownProblem(target, tuple(nums), solution))
    return tuple(problems)


def write_offline_data(root: Path, *, num_problems: int = DEFAULT_NUM_GENERATED) -> list[Path]:
    """Write the generated set (seed ``DEFAULT_DATA_SEED``) to ``root/countdown/train.parquet``.

    The file is written to a temporary name in the same folder and then renamed, so a reader never
    sees half a file. Columns: ``target`` (int64), ``nums`` (list of int64), ``solution`` (string),
    readable by :func:`load_countdown_parquet`. Returns the written paths.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    _check_count("num_problems", num_problems)
    problems = _generated_set(num_problems, DEFAULT_DATA_SEED)
    table = pa.table(
        {
            "target": pa.array([p.target for p in problems], pa.int64()),
            "nums": pa.array([list(p.nums) for p in problems], pa.list_(pa.int64())),
            "solution": pa.array([p.solution for p in problems], pa.string()),
        }
    )
    out_path = Path(root) / "countdown" / "train.parquet"
    with atomic_path(out_path) as tmp:
        pq.write_table(table, tmp)
    return [out_path]


def _check_count(name: str, value: Any) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_seed(name: str, value: Any) -> None:
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")


# ---------------------------------------------------------------------------------------------
# The environment
# ---------------------------------------------------------------------------------------------
def observation_text(target: int, nums: Sequence[int]) -> str:
    """``Target: <T>, nums: [<a>, <b>, ...]``."""
    return f"Target: {target}, nums: [{', '.join(str(n) for n in nums)}]"


class CountdownEnv(TextEnv):
    """Countdown arithmetic puzzle; see the module docstring for the full specification."""

    name = "countdown"
    instruction = (
        "You are solving the Countdown puzzle. Use every number in the list exactly once, with "
        "+ - * / and parentheses, to write an expression equal to the target. Put only the "
        "expression in the answer. Example: for Target: 10, nums: [2, 3, 4] you could write "
        "<think> target 10 nums 2 3 4. 2 * 3 = 6, 6 + 4 = 10. </think> <answer> 2 * 3 + 4 </answer>"
    )
    agent_defaults = AgentDefaults(
        max_turns=1, max_actions_per_turn=1, max_actions_per_traj=1, max_tokens_hint=100
    )

    def __init__(
        self,
        *,
        data_path: str | os.PathLike[str] | None = None,
        num_problems: int | None = None,
        data_seed: int = DEFAULT_DATA_SEED,
        require_all_numbers: bool = True,
        max_expression_length: int = DEFAULT_MAX_EXPRESSION_LENGTH,
        min_numbers: int = DEFAULT_MIN_NUMBERS,
        max_numbers: int = DEFAULT_MAX_NUMBERS,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        _check_number_range(min_numbers, max_numbers)
        if data_path is not None and (min_numbers, max_numbers) != (DEFAULT_MIN_NUMBERS, DEFAULT_MAX_NUMBERS):
            raise ValueError(f"min_numbers / max_numbers shape the generated set only; with data_path "
                             f"{str(data_path)!r} leave them at {DEFAULT_MIN_NUMBERS} / {DEFAULT_MAX_NUMBERS}")
        if num_problems is not None:
            _check_count("num_problems", num_problems)
        _check_seed("data_seed", data_seed)
        if type(require_all_numbers) is not bool:
            raise ValueError(f"require_all_numbers must be a bool, got {require_all_numbers!r}")
        _check_count("max_expression_length", max_expression_length)
        if data_path is None:
            self._problems = _generated_set(num_problems or DEFAULT_NUM_GENERATED, data_seed, min_numbers, max_numbers)
        elif isinstance(data_path, (str, os.PathLike)):
            key = _file_key(data_path)
            self._problems = _load_real_set(
                *key, num_problems or DEFAULT_NUM_REAL_ROWS, require_all_numbers, None
            )
            if not self._problems:
                raise ValueError(f"no solvable Countdown problem among the rows read from {str(data_path)!r}")
        else:
            raise ValueError(f"data_path must be None or a path, got {data_path!r}")
        self.require_all_numbers = require_all_numbers
        self.max_expression_length = max_expression_length
        self._reset_seed: int | None = None
        self._problem: CountdownProblem | None = None

    @property
    def num_problems(self) -> int:
        """How many problems the environment serves."""
        return len(self._problems)

    @property
    def problem(self) -> CountdownProblem:
        """The current problem (after ``reset``)."""
        if self._problem is None:
            raise RuntimeError("CountdownEnv.problem read before reset()")
        return self._problem

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self._reset_seed is not None:
            index = self._reset_seed % len(self._problems)
        else:
            index = int(self.np_random.integers(len(self._problems)))
        self._problem = self._problems[index]
        info = {"problem_index": index, "target": self._problem.target, "nums": list(self._problem.nums)}
        return observation_text(self._problem.target, self._problem.nums), info

    def _step(self, action: str) -> StepResult:
        problem = self.problem
        score = score_expression(
            action,
            problem.target,
            problem.nums,
            require_all_numbers=self.require_all_numbers,
            max_length=self.max_expression_length,
        )
        value = None if score.value is None else float(score.value)
        return StepResult(
            obs=observation_text(problem.target, problem.nums),
            reward=score.reward,
            terminated=True,
            success=score.reason == "correct",
            action_is_valid=score.valid,
            action_is_effective=score.valid,
            info={"reason": score.reason, "value": value},
        )

    def expert(self) -> ExpertMove:
        """The stored solution, with its steps as the reasoning."""
        problem = self.problem
        steps = expression_steps(parse_expression(problem.solution, max_length=len(problem.solution)))
        nums = " ".join(str(n) for n in problem.nums)
        think = f"target {problem.target} nums {nums}. " + (", ".join(steps) or "no operation needed") + "."
        return ExpertMove(action=problem.solution, think=think)

    def __deepcopy__(self, memo: dict[int, Any]) -> CountdownEnv:
        # The problem set is immutable and may hold 20,000 problems: share it between branches.
        memo[id(self._problems)] = self._problems
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            setattr(clone, key, copy.deepcopy(value, memo))
        return clone
