"""Safe arithmetic for Countdown: parse and score an answer, and solve a problem exhaustively.

An answer is parsed with :mod:`ast` and walked by our own evaluator on exact fractions; only
non-negative integer literals, ``+ - * /`` and parentheses are accepted, and nothing ever reaches
``eval``. The solver finds an expression over given numbers for a target, or proves none exists.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

DEFAULT_MAX_EXPRESSION_LENGTH = 200
MAX_LITERALS = 64  # far more than any problem has; bounds the depth of a parsed tree
TOLERANCE = Fraction(1, 10**5)
CORRECT_REWARD, FORMAT_REWARD = 1.0, 0.1


# ---------------------------------------------------------------------------------------------
# Safe arithmetic: parse, check, evaluate
# ---------------------------------------------------------------------------------------------
class ExpressionError(ValueError):
    """The text is not an expression of the allowed grammar."""


_ALLOWED_TEXT = re.compile(r"[0-9+\-*/() \t\r\n]+")
_LEADING_ZEROS = re.compile(r"(?<![0-9])0+(?=[0-9])")  # Python rejects "07"; we read it as 7
_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def parse_expression(text: str, *, max_length: int = DEFAULT_MAX_EXPRESSION_LENGTH) -> ast.expr:
    """Parse ``text`` into an AST made only of integer literals and ``+ - * /``.

    Raises:
        ExpressionError: if the text is empty, longer than ``max_length``, contains any other
            character or construct, or does not parse.
    """
    text = text.strip()
    if not text:
        raise ExpressionError("empty expression")
    if len(text) > max_length:
        raise ExpressionError(f"expression has {len(text)} characters, more than {max_length}")
    if not _ALLOWED_TEXT.fullmatch(text):
        raise ExpressionError(f"expression {text!r} contains characters other than digits, + - * / ( )")
    try:
        tree = ast.parse(_LEADING_ZEROS.sub("", text), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise ExpressionError(f"expression {text!r} does not parse: {err}") from None
    # Check every node without recursion first: the recursive walkers below then only ever see
    # shallow trees, however long ``max_length`` is.
    literals = 0
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            literals += 1
        elif not ((isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS) or type(node) in _OPERATORS):
            raise ExpressionError(f"{type(node).__name__} is not allowed in an expression")
    if literals > MAX_LITERALS:
        raise ExpressionError(f"expression has {literals} numbers, more than {MAX_LITERALS}")
    return tree.body


def expression_numbers(node: ast.expr) -> list[int]:
    """The integer literals of a parsed expression, left to right."""
    if isinstance(node, ast.BinOp):
        return expression_numbers(node.left) + expression_numbers(node.right)
    return [node.value]


def evaluate(node: ast.expr) -> Fraction:
    """Exact value of a parsed expression. Raises ``ZeroDivisionError`` on division by zero."""
    return _evaluate_with_steps(node, steps=None)


def expression_steps(node: ast.expr) -> list[str]:
    """The expression's operations in evaluation order, e.g. ``["5 - 2 = 3", "3 * 8 = 24"]``."""
    steps: list[str] = []
    _evaluate_with_steps(node, steps)
    return steps


def _evaluate_with_steps(node: ast.expr, steps: list[str] | None) -> Fraction:
    if isinstance(node, ast.Constant):
        return Fraction(node.value)
    left, right = _evaluate_with_steps(node.left, steps), _evaluate_with_steps(node.right, steps)
    op = _OPERATORS[type(node.op)]
    value = _apply(left, op, right)
    if steps is not None:
        steps.append(f"{_format_number(left)} {op} {_format_number(right)} = {_format_number(value)}")
    return value


def _apply(left: Fraction, op: str, right: Fraction) -> Fraction:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    return left / right  # raises ZeroDivisionError for right == 0


def _format_number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def uses_allowed_numbers(used: Sequence[int], given: Sequence[int], *, require_all: bool) -> bool:
    """Whether ``used`` equals the multiset ``given`` (``require_all``) or is a sub-multiset of it."""
    used_counts, given_counts = Counter(used), Counter(given)
    if require_all:
        return used_counts == given_counts
    return all(count <= given_counts[number] for number, count in used_counts.items())


@dataclass(frozen=True)
class ExpressionScore:
    """How an answer scored: ``reason`` is one of ``correct``, ``wrong_value``, ``malformed``,
    ``wrong_numbers``, ``division_by_zero``."""

    reward: float
    valid: bool
    reason: str
    value: Fraction | None = None


def score_expression(
    text: str,
    target: int,
    nums: Sequence[int],
    *,
    require_all_numbers: bool = True,
    max_length: int = DEFAULT_MAX_EXPRESSION_LENGTH,
) -> ExpressionScore:
    """Score one answer to a Countdown problem (the tiers of the module docstring). Never raises."""
    try:
        tree = parse_expression(text, max_length=max_length)
    except ExpressionError:
        return ExpressionScore(0.0, False, "malformed")
    # The literals are checked before evaluating, so only the given (small) numbers are ever computed with.
    if not uses_allowed_numbers(expression_numbers(tree), nums, require_all=require_all_numbers):
        return ExpressionScore(0.0, False, "wrong_numbers")
    try:
        value = evaluate(tree)
    except ZeroDivisionError:
        return ExpressionScore(0.0, False, "division_by_zero")
    if abs(value - target) < TOLERANCE:
        return ExpressionScore(CORRECT_REWARD, True, "correct", value)
    return ExpressionScore(FORMAT_REWARD, True, "wrong_value", value)


# ---------------------------------------------------------------------------------------------
# Exhaustive solver
# ---------------------------------------------------------------------------------------------
#: A partial expression: its value (a Fraction, or a float in the fast pass), its text, and the
#: precedence of its outermost operator (ATOM for a bare number).
Term = tuple[Fraction, str, int]
ATOM, _PRODUCT, _SUM = 3, 2, 1
_PRECEDENCE = {"+": _SUM, "-": _SUM, "*": _PRODUCT, "/": _PRODUCT}


def combine(left: Term, op: str, right: Term) -> Term:
    """The term ``left op right``, with only the parentheses the precedence rules need."""
    text, precedence = join_texts(left[1], left[2], op, right[1], right[2])
    return _apply(left[0], op, right[0]), text, precedence


def join_texts(
    left: str, left_precedence: int, op: str, right: str, right_precedence: int
) -> tuple[str, int]:
    """Text and precedence of ``left op right``, parenthesising an operand only where needed."""
    precedence = _PRECEDENCE[op]
    left_text = left if left_precedence >= precedence else f"({left})"
    right_is_safe = right_precedence > precedence or (right_precedence == precedence and op in "+*")
    right_text = right if right_is_safe else f"({right})"
    return f"{left_text} {op} {right_text}", precedence


def _pair_results(a: Term, b: Term) -> list[Term]:
    results = [combine(a, "+", b), combine(a, "*", b), combine(a, "-", b), combine(b, "-", a)]
    if b[0] != 0:
        results.append(combine(a, "/", b))
    if a[0] != 0:
        results.append(combine(b, "/", a))
    return results


def _reachable_floats(nums: Sequence[int]) -> list[set[float]]:
    """For every subset (bit mask) of ``nums``: the values its numbers can make, in floating point."""
    full = (1 << len(nums)) - 1
    reach: list[set[float]] = [set() for _ in range(full + 1)]
    for i, number in enumerate(nums):
        reach[1 << i] = {float(number)}
    for mask in sorted(range(1, full + 1), key=lambda m: bin(m).count("1")):
        if mask & (mask - 1) == 0:
            continue  # a single number
        values = reach[mask]
        part = (mask - 1) & mask
        while part:  # every split of ``mask`` into two non-empty parts, each once
            other = mask ^ part
            if part < other:
                for a in reach[part]:
                    for b in reach[other]:
                        values.update((a + b, a * b, a - b, b - a))
                        if b:
                            values.add(a / b)
                        if a:
                            values.add(b / a)
            part = (part - 1) & mask
    return reach


def solve(nums: Sequence[int], target: int, *, use_all: bool = True) -> str | None:
    """An expression over ``nums`` (each used once; all of them if ``use_all``) equal to ``target``.

    Considers every way of repeatedly combining two numbers with ``+ - * /`` (any intermediate value
    allowed, division by zero excluded) and returns ``None`` only when no expression exists. Three
    stages, cheapest first:

    1. sums and differences only (what the reference's data filter checks), giving simple answers;
    2. a floating-point pass over all subsets that finds the reachable values, then rebuilds the
       expression of the value nearest the target and checks it on exact fractions;
    3. only if that check fails (a float artefact), an exact depth-first search on fractions.
    """
    nums = list(nums)
    if not nums or len(nums) > 6:
        raise ValueError(f"solve() takes 1 to 6 numbers, got {nums!r}")
    signed = _solve_with_signs(nums, target, use_all=use_all)
    if signed is not None:
        return signed
    reach = _reachable_floats(nums)
    masks = [len(reach) - 1] if use_all else range(1, len(reach))
    for mask in masks:
        value = next((v for v in reach[mask] if abs(v - target) < 1e-6), None)
        if value is not None:
            text = _rebuild(nums, reach, mask, value)[1]
            try:
                if evaluate(parse_expression(text, max_length=len(text))) == target:
                    return text
            except ZeroDivisionError:
                pass
            return _search_exact(nums, target, use_all=use_all)  # a float artefact: decide exactly
    return None


def _solve_with_signs(nums: list[int], target: int, *, use_all: bool) -> str | None:
    """``a + b - c``-style answers: every number added, subtracted (or, unless ``use_all``, skipped)."""
    for signs in itertools.product((1, -1) if use_all else (1, -1, 0), repeat=len(nums)):
        plus = [n for n, sign in zip(nums, signs) if sign == 1]
        minus = [n for n, sign in zip(nums, signs) if sign == -1]
        if plus and sum(plus) - sum(minus) == target:
            return " - ".join([" + ".join(map(str, plus)), *map(str, minus)])
    return None


def _rebuild(nums: Sequence[int], reach: list[set[float]], mask: int, value: float) -> tuple[float, str, int]:
    """A term (value, text, precedence) over the numbers in ``mask`` whose float value is ``value``."""
    if mask & (mask - 1) == 0:
        number = nums[mask.bit_length() - 1]
        return float(number), str(number), ATOM
    part = (mask - 1) & mask
    while part:
        other = mask ^ part
        if part < other:
            for a in reach[part]:
                for b in reach[other]:
                    for swapped, op, result in _float_results(a, b):
                        if result == value:
                            (left_mask, left), (right_mask, right) = (
                                ((other, b), (part, a)) if swapped else ((part, a), (other, b))
                            )
                            return combine(
                                _rebuild(nums, reach, left_mask, left),
                                op,
                                _rebuild(nums, reach, right_mask, right),
                            )
        part = (part - 1) & mask
    raise AssertionError(f"value {value} is not reachable from mask {mask}")  # reach is inconsistent


def _float_results(a: float, b: float) -> list[tuple[bool, str, float]]:
    """``(swapped, op, value)`` for every operation on the pair, in the order ``_reachable_floats`` uses."""
    results = [(False, "+", a + b), (False, "*", a * b), (False, "-", a - b), (True, "-", b - a)]
    if b:
        results.append((False, "/", a / b))
    if a:
        results.append((True, "/", b / a))
    return results


def _search_exact(nums: Sequence[int], target: int, *, use_all: bool) -> str | None:
    """Depth-first search over pairwise combinations on exact fractions, skipping multisets of values
    already explored (whether a multiset can reach the goal depends only on its values)."""
    goal = Fraction(target)
    explored: set[tuple[Fraction, ...]] = set()

    def search(terms: list[Term]) -> str | None:
        if not use_all:
            hit = next((text for value, text, _ in terms if value == goal), None)
            if hit is not None:
                return hit
        if len(terms) == 1:
            return terms[0][1] if terms[0][0] == goal else None
        key = tuple(sorted(value for value, _, _ in terms))
        if key in explored:
            return None
        explored.add(key)
        for i in range(len(terms)):
            for j in range(i + 1, len(terms)):
                rest = terms[:i] + terms[i + 1 : j] + terms[j + 1 :]
                for term in _pair_results(terms[i], terms[j]):
                    found = search([*rest, term])
                    if found is not None:
                        return found
        return None

    return search([(Fraction(n), str(n), ATOM) for n in nums])
