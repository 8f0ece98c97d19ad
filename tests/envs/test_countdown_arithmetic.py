"""Countdown's safe expression scorer and exhaustive solver (docs/method.md §1.3)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen2.envs.countdown_arithmetic import (
    ExpressionError,
    evaluate,
    expression_numbers,
    expression_steps,
    parse_expression,
    score_expression,
    solve,
)


# -- reward tiers -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "reward", "reason"),
    [
        ("8 + (3 + 5) * 2", 1.0, "correct"),
        ("  (5 - 2) * 8 * 2 / 2 ", 0.0, "wrong_numbers"),  # 2 used twice
        ("3 * 8", 0.0, "wrong_numbers"),  # all numbers required by default
        ("3 + 5 + 8 + 2", 0.1, "wrong_value"),
        ("(3 + 5 + 8) / 2", 0.1, "wrong_value"),
        ("3 * 8 * (5 - 2)", 0.1, "wrong_value"),
        ("2 * 8 + 5 + 3", 1.0, "correct"),
        ("08 * 3 + 5 - 2 - 3 - 3", 0.0, "wrong_numbers"),
        ("(8 * 3) * (5 - 5 + 2 - 2)", 0.0, "wrong_numbers"),
    ],
)
def test_reward_tiers(text, reward, reason):
    score = score_expression(text, 24, [3, 5, 8, 2])
    assert (score.reward, score.reason) == (reward, reason)
    assert score.valid == (reward > 0)


def test_leading_zeros_read_as_decimal():
    assert score_expression("08 * 03", 24, [3, 8]).reward == 1.0


def test_value_is_exact_not_float():
    # 1/3 * 3 is exactly 1 on fractions (and would be 0.999... on some float orderings).
    assert score_expression("1 / 3 * 3", 1, [1, 3, 3]).reward == 1.0
    assert score_expression("7 / 2", 3, [7, 2]).reward == 0.1
    assert score_expression("7 / 2", 3, [7, 2]).value == Fraction(7, 2)


def test_division_by_zero_scores_zero_and_is_invalid():
    score = score_expression("3 / (5 - 5)", 3, [3, 5, 5])
    assert (score.reward, score.valid, score.reason) == (0.0, False, "division_by_zero")


def test_sub_multiset_when_not_all_numbers_required():
    assert score_expression("3 * 8", 24, [3, 5, 8, 2], require_all_numbers=False).reward == 1.0
    assert score_expression("8 + 8 + 8", 24, [3, 5, 8, 2], require_all_numbers=False).reward == 0.0
    assert score_expression("3 + 5", 24, [3, 5, 8, 2], require_all_numbers=False).reward == 0.1


HOSTILE = [
    "",
    "   ",
    "9**9**9",
    "9 ** 9",
    "__import__('os').system('id')",
    "().__class__.__bases__",
    "lambda: 1",
    "[3, 5]",
    "3 // 5",
    "3 % 5",
    "3.0 + 5",
    "1e308 * 10",
    "-3 + 5",
    "+3 + 5",
    "True + 1",
    "0x10 + 1",
    "1_0 + 1",
    "3 + 5 = 8",
    "３ + ５",  # full-width digits
    "3\u00a0+ 5",  # no-break space
    "3 + 5\u200b",
    "中文",
    "\x00",
    "(" * 300 + "3" + ")" * 300,
    "3 + " * 500 + "5",
    "9" * 5000,
    "99999999999999999999 * 99999999999999999999",
    "3 5",
    "(3 + 5",
    "3 + 5)",
    "*3",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_expressions_score_zero_without_raising(text):
    score = score_expression(text, 8, [3, 5])
    assert score.reward == 0.0
    assert not score.valid


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=st.text(max_size=80) | st.text(alphabet="0123456789+-*/() ", max_size=80))
def test_any_text_scores_without_raising(text):
    score = score_expression(text, 10, [1, 2, 3, 4])
    assert score.reward in (0.0, 0.1, 1.0)


def test_deep_but_legal_parentheses_are_fine():
    assert score_expression("(" * 60 + "3 + 5" + ")" * 60, 8, [3, 5]).reward == 1.0


def test_length_cap():
    text = "1 + 2"
    assert score_expression(text, 3, [1, 2], max_length=5).reward == 1.0
    assert score_expression(text, 3, [1, 2], max_length=4).reason == "malformed"


def test_long_chains_are_rejected_without_recursion_errors():
    text = "1 + " * 3000 + "1"
    score = score_expression(text, 3001, [1] * 3001, max_length=len(text))
    assert (score.reward, score.reason) == (0.0, "malformed")
    longest = "1 + " * 63 + "1"  # MAX_LITERALS numbers is still fine
    assert score_expression(longest, 64, [1] * 64, max_length=len(longest)).reward == 1.0


def test_parse_rejects_with_a_message_naming_the_text():
    with pytest.raises(ExpressionError, match="abc"):
        parse_expression("abc")


def test_numbers_and_steps():
    tree = parse_expression("(5 - 2) * 8 + 1 / 2")
    assert expression_numbers(tree) == [5, 2, 8, 1, 2]
    assert evaluate(tree) == Fraction(49, 2)
    assert expression_steps(tree) == ["5 - 2 = 3", "3 * 8 = 24", "1 / 2 = 1/2", "24 + 1/2 = 49/2"]


# -- solver -------------------------------------------------------------------------------------
def brute_force_solvable(nums: list[int], target: int) -> bool:
    """Every permutation, operator choice and bracketing of ``nums`` (3 or 4 of them), scored by
    ``score_expression``: an independent check of ``solve`` that shares no search code with it."""
    shapes = {
        3: ["({0} {3} {1}) {4} {2}", "{0} {3} ({1} {4} {2})"],
        4: [
            "(({0} {4} {1}) {5} {2}) {6} {3}",
            "({0} {4} ({1} {5} {2})) {6} {3}",
            "({0} {4} {1}) {5} ({2} {6} {3})",
            "{0} {4} (({1} {5} {2}) {6} {3})",
            "{0} {4} ({1} {5} ({2} {6} {3}))",
        ],
    }[len(nums)]
    for perm in set(itertools.permutations(nums)):
        for ops in itertools.product("+-*/", repeat=len(nums) - 1):
            for shape in shapes:
                if score_expression(shape.format(*perm, *ops), target, nums).reward == 1.0:
                    return True
    return False


def test_solver_matches_brute_force():
    rng = np.random.default_rng(7)
    cases = [([int(x) for x in rng.integers(1, 13, size=3)], int(rng.integers(1, 40))) for _ in range(60)]
    cases += [([int(x) for x in rng.integers(1, 10, size=4)], int(rng.integers(1, 60))) for _ in range(3)]
    cases += [([3, 5, 8, 2], 24), ([1, 1, 1], 100), ([2, 3, 4], 24), ([1, 5, 5, 5], 24)]
    outcomes = []
    for nums, target in cases:
        solution = solve(nums, target)
        assert (solution is not None) == brute_force_solvable(nums, target), (nums, target, solution)
        if solution is not None:
            assert score_expression(solution, target, nums).reward == 1.0, (nums, target, solution)
        outcomes.append(solution is not None)
    assert any(outcomes) and not all(outcomes)  # the cases exercise both answers


def test_solver_needs_fractional_intermediates():
    # 5 * (5 - 1/5) = 24: only reachable through a non-integer intermediate value.
    solution = solve([1, 5, 5, 5], 24)
    assert solution is not None
    assert score_expression(solution, 24, [1, 5, 5, 5]).reward == 1.0


def test_solver_with_a_subset():
    assert solve([10, 100, 7], 1000) is None
    solution = solve([10, 100, 7], 1000, use_all=False)
    assert score_expression(solution, 1000, [10, 100, 7], require_all_numbers=False).reward == 1.0


def test_solver_rejects_bad_sizes():
    with pytest.raises(ValueError, match=r"\[\]"):
        solve([], 3)
