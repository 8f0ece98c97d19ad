"""DeepCoder: write a Python program that passes a problem's hidden tests (docs/method.md §1.7).

## Description

Each episode is one programming problem, single turn. The offline world (default) draws from
ragen2's own 46 problems (:mod:`ragen2.envs.deepcoder_problems`: six families - strings,
arithmetic, lists, dynamic programming, input parsing, grids - at difficulty 1-3, with both
function-call and stdin/stdout tests). With ``data_path`` the problems come from a local file in
the schema of ``agentica-org/DeepCoder-Preview-Dataset`` (columns ``problem``, ``tests`` - a JSON
string holding a list of ``{input, output, testtype: "functional" | "stdin", metadata:
{func_name}}`` - and ``starter_code``). The problem index is drawn from the reset seed. The code
runs in the sandbox of :mod:`ragen2.envs.sandbox` (bubblewrap; an rlimit-only fallback with a
warning where bubblewrap cannot run).

## Actions

Python source code, bare or in a fenced block (the last `````python`` / `````py`` / bare `````
block is used; an unclosed final fence, as in a cut-off generation, runs to the end of the text).
If the code has no ``class Solution`` but the starter code defines one and the code starts with
``def ``, the code is indented into ``class Solution:`` (as the reference does). Empty code, a response whose only
fenced blocks are in another language, and code containing control characters other than
whitespace (e.g. NUL) are invalid: nothing changes, reward 0, ``action_is_valid=False``.

## Observation

The problem statement, followed by a blank line, ``Starter code:`` and the starter code when the
problem has one, e.g.::

    Reverse Every Word

    Given a sentence `s` of words separated by single spaces, reverse the letters of every word
    but keep the words in their order. Return the new sentence.

    Starter code:
    class Solution:
        def reverse_each_word(self, s):

After the step: ``Passed <p> of <n> tests.`` (plus ``Time limit exceeded.`` on a timeout).

## Rewards

``passed / total`` over all tests of the problem (partial credit); a timeout or sandbox failure
gives 0. Comparison rules are those of :func:`ragen2.envs.sandbox.run_tests`. Code that cannot pass
is scored 0 without starting the sandbox: a syntax error; for function-call problems, code that
never mentions the function name or ``Solution``; for stdin problems, code that contains none of
the words through which Python can produce output (``print``, ``write``, ``stdout``, ``open``,
``exec``, ``eval``, ``import``, ``__``, ...). Identical code on an identical problem reuses the
previous verdict (a process-wide cache of 4,096 entries).

## Episode end

Terminated after the first valid action (``success`` = every test passed).

## Arguments

- ``difficulty`` (``1``, ``2``, ``3`` or ``"mixed"``, default ``"mixed"``): offline difficulty.
- ``family`` (str or None): restrict the offline world to one family (see ``FAMILIES``).
- ``data_path`` (path or None): a DeepCoder ``.parquet``/``.jsonl``/``.json`` file; None uses the
  offline world (``difficulty`` and ``family`` must then stay at their defaults).
- ``time_limit_s`` (float, 3.0): wall-clock limit for the whole test suite (the reference: 3 s).
- ``memory_mb`` (int, 1024), ``max_processes`` (int, 16): sandbox limits.
- ``backend`` (``"auto"``, ``"bwrap"`` or ``"rlimit"``): see :func:`ragen2.envs.sandbox.run_tests`.
- ``cache_results`` (bool, True): reuse verdicts for identical (problem, code) pairs.
- ``render_mode`` (None or ``"ansi"``).

## Version history

- v0: first version.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import textwrap
import threading
import unicodedata
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from ragen2.envs import sandbox
from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv
from ragen2.envs.datafiles import load_table
from ragen2.envs.deepcoder_problems import FAMILIES, PROBLEMS
from ragen2.fileio import atomic_path

DIFFICULTIES = (1, 2, 3)
#: Words through which Python code can put text on stdout; code with none of them cannot.
OUTPUT_WORDS = (
    "print", "write", "stdout", "open", "exec", "eval", "compile", "import", "__", "getattr", "globals",
    "locals", "vars", "help", "breakpoint", "input",
)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = ("", "python", "py", "python3", "py3")
_CACHE_SIZE = 4096
_cache: OrderedDict[tuple, sandbox.SandboxResult] = OrderedDict()
_cache_lock = threading.Lock()


# -- the action -----------------------------------------------------------------------------------
def extract_code(action: str) -> str | None:
    """The code in a response: the last Python fenced block, else the whole text; None if there is none.

    >>> extract_code("Here:\\n```python\\nprint(1)\\n```")
    'print(1)'
    >>> extract_code("  print(2)  ")
    'print(2)'
    """
    blocks = _FENCE.findall(action)
    if blocks:
        python_blocks = [body for tag, body in blocks if tag.lower() in _PYTHON_TAGS]
        if not python_blocks:
            return None
        code = python_blocks[-1]
    else:
        code = action
    code = code.strip("\n").rstrip()
    if not code.strip():
        return None
    if any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r\f\v" for ch in code):
        return None
    return textwrap.dedent(code)


def apply_starter(code: str, starter_code: str) -> str:
    """Indent a bare method body into ``class Solution`` when the starter code expects one (docs/method.md §1.7)."""
    if "class Solution" in code or "class Solution" not in starter_code or not code.lstrip().startswith("def "):
        return code
    return "class Solution:\n" + textwrap.indent(code, "    ")


def cannot_pass(code: str, tests: list[dict]) -> str | None:
    """Why ``code`` is certain to fail every test without running it, or None if it might pass."""
    try:
        compile(code, "<solution>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError) as exc:
        return f"does not compile: {type(exc).__name__}"
    for test in tests:
        if test["testtype"] == "functional":
            name = (test.get("metadata") or {}).get("func_name") if isinstance(test.get("metadata"), dict) else None
            if name is None or name in code or "Solution" in code:
                return None
        elif not test["output"].strip() or any(word in code for word in OUTPUT_WORDS):
            return None
    return "cannot produce the required output"


# -- problems ---------------------------------------------------------------------------------------
def _normalise_tests(raw: Any, where: str) -> list[dict]:
    """Tests in the schema :func:`ragen2.envs.sandbox.run_tests` takes, from a DeepCoder ``tests`` cell.

    Accepts the DeepCoder schema (a JSON string or list of ``{input, output, testtype, metadata}``),
    ``type: "stdin_stdout" | "function_call"`` (with ``fn_name``) instead of ``testtype``, and
    TACO's ``{inputs: [...], outputs: [...], fn_name?}``.
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{where}: 'tests' is not valid JSON") from exc
    if isinstance(raw, dict) and "inputs" in raw and "outputs" in raw:
        fn_name = raw.get("fn_name")
        raw = [
            {"input": "\n".join(json.dumps(a) for a in i) if fn_name else i,
             "output": json.dumps(o[0] if isinstance(o, list) and len(o) == 1 else o) if fn_name else o,
             "testtype": "functional" if fn_name else "stdin", "metadata": {"func_name": fn_name}}
            for i, o in zip(raw["inputs"], raw["outputs"])
        ]
    if not isinstance(raw, list):
        raise ValueError(f"{where}: 'tests' must be a list of tests, got {type(raw).__name__}")
    tests = []
    for test in raw:
        if not isinstance(test, dict):
            raise ValueError(f"{where}: each test must be a dict, got {test!r:.100}")
        testtype = test.get("testtype") or {"stdin_stdout": "stdin", "function_call": "functional"}.get(
            str(test.get("type")), test.get("type")
        )
        metadata = test.get("metadata") or {}
        if isinstance(metadata, str):
            metadata = json.loads(metadata) if metadata.strip() else {}
        if test.get("fn_name") and not metadata.get("func_name"):
            metadata = {**metadata, "func_name": test["fn_name"]}
        tests.append({"input": test.get("input"), "output": test.get("output"), "testtype": testtype,
                      "metadata": metadata})
    try:
        sandbox.validate_tests(tests)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from exc
    return tests


def problem_record(problem: dict[str, Any]) -> dict[str, Any]:
    """An offline problem as a DeepCoder-schema row (``tests`` as a JSON string), plus our extra fields."""
    return {
        "problem": problem["problem"],
        "tests": json.dumps(problem["tests"]),
        "starter_code": problem["starter_code"],
        "id": problem["id"],
        "family": problem["family"],
        "difficulty": problem["difficulty"],
        "solution": problem["solution"],
        "plan": problem["plan"],
    }


def write_offline_data(root: Path) -> list[Path]:
    """Write the offline problem set to ``root/deepcoder/problems.jsonl`` (DeepCoder schema), atomically."""
    path = Path(root) / "deepcoder" / "problems.jsonl"
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for problem in PROBLEMS:
            handle.write(json.dumps(problem_record(problem), ensure_ascii=False) + "\n")
    return [path]


def load_deepcoder(path: str | os.PathLike) -> Any:
    """Load a DeepCoder-schema file (``.parquet``/``.jsonl``/``.json``) with ``datasets``, cached per process.

    Raises:
        FileNotFoundError: if ``path`` is not a file.
        ValueError: if the ``problem`` or ``tests`` column is missing, or there are no rows.
    """
    return load_table(path, {"problem", "tests"}, "DeepCoder")


def _cached_run(code: str, tests: list[dict], limits: dict[str, Any], use_cache: bool) -> sandbox.SandboxResult:
    key = (hashlib.sha256(json.dumps(tests, sort_keys=True).encode()).hexdigest(), code, tuple(sorted(limits.items())))
    if use_cache:
        with _cache_lock:
            if key in _cache:
                _cache.move_to_end(key)
                return _cache[key]
    result = sandbox.run_tests(code, tests, **limits)
    if use_cache and result.error is None:
        with _cache_lock:
            _cache[key] = result
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return result


# -- the environment ------------------------------------------------------------------------------
class DeepCoderEnv(TextEnv):
    """Solve a programming problem in one Python submission; reward = share of tests passed.

    The module docstring is the full specification (Description, Actions, ..., Arguments).
    """

    name = "deepcoder"
    instruction = (
        "You are solving programming problems. Provide a complete Python solution only, inside the answer: "
        "for a problem with starter code, complete the given class or function; otherwise write a program "
        "that reads standard input and prints the answer."
    )
    agent_defaults = AgentDefaults(max_turns=1, max_actions_per_turn=1, max_actions_per_traj=1, max_tokens_hint=8000)

    def __init__(
        self,
        *,
        difficulty: int | str = "mixed",
        family: str | None = None,
        data_path: str | os.PathLike | None = None,
        time_limit_s: float = 3.0,
        memory_mb: int = 1024,
        max_processes: int = 16,
        backend: str = "auto",
        cache_results: bool = True,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if isinstance(difficulty, bool) or difficulty not in (*DIFFICULTIES, "mixed"):
            raise ValueError(f"difficulty must be one of {DIFFICULTIES} or 'mixed', got {difficulty!r}")
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family must be None or one of {FAMILIES}, got {family!r}")
        if data_path is not None and not isinstance(data_path, (str, os.PathLike)):
            raise ValueError(f"data_path must be a path or None, got {data_path!r}")
        if data_path is not None and (difficulty != "mixed" or family is not None):
            raise ValueError("difficulty and family only apply to the offline world (data_path=None)")
        if backend not in sandbox.BACKENDS:
            raise ValueError(f"backend must be one of {sandbox.BACKENDS}, got {backend!r}")
        if not isinstance(cache_results, bool):
            raise ValueError(f"cache_results must be a bool, got {cache_results!r}")
        sandbox.check_limits(time_limit_s, memory_mb, max_processes, 16, 64)
        self.difficulty, self.family = difficulty, family
        self.data_path = None if data_path is None else Path(data_path)
        self.limits = {"time_limit_s": float(time_limit_s), "memory_mb": memory_mb,
                       "max_processes": max_processes, "backend": backend}
        self.cache_results = cache_results
        self._offline = [
            p for p in PROBLEMS
            if difficulty in ("mixed", p["difficulty"]) and family in (None, p["family"])
        ]
        if self.data_path is not None:
            load_deepcoder(self.data_path)  # fail fast on a bad file
        elif not self._offline:
            raise ValueError(f"no offline problem has difficulty={difficulty!r} and family={family!r}")
        self._problem: dict[str, Any] = {}

    # -- data ------------------------------------------------------------------------------------
    def num_problems(self) -> int:
        """How many problems the current world draws from."""
        return len(self._offline) if self.data_path is None else len(load_deepcoder(self.data_path))

    def _load_problem(self, index: int) -> dict[str, Any]:
        if self.data_path is None:
            return self._offline[index]
        row = load_deepcoder(self.data_path)[index]
        where = f"row {index} of {str(self.data_path)!r}"
        return {
            "id": str(row.get("id") or index),
            "problem": str(row["problem"]),
            "tests": _normalise_tests(row["tests"], where),
            "starter_code": str(row.get("starter_code") or ""),
            "solution": str(row.get("solution") or ""),
            "plan": str(row.get("plan") or ""),
        }

    @staticmethod
    def observation(problem: dict[str, Any]) -> str:
        """The prompt for ``problem``: its statement, then the starter code if any."""
        text = problem["problem"].strip()
        if problem["starter_code"].strip():
            text += "\n\nStarter code:\n" + problem["starter_code"].rstrip()
        return text

    # -- the Gymnasium API -------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        size = self.num_problems()
        index = options.get("index")
        if index is None:
            index = int(self.np_random.integers(size))
        elif isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < size:
            raise ValueError(f"options['index'] must be an int in [0, {size}), got {index!r}")
        self._problem = self._load_problem(int(index))
        info = {"index": int(index), "problem_id": self._problem["id"], "num_tests": len(self._problem["tests"])}
        return self.observation(self._problem), info

    def _step(self, action: str) -> StepResult:
        code = extract_code(action)
        if code is None:
            return StepResult(obs=self._obs or "", action_is_valid=False, action_is_effective=False,
                              info={"reason": "no code found"})
        code = apply_starter(code, self._problem["starter_code"])
        tests = self._problem["tests"]
        skip = cannot_pass(code, tests)
        info: dict[str, Any] = {"problem_id": self._problem["id"], "total": len(tests)}
        if skip is not None:
            info.update(passed=0, timed_out=False, sandbox="skipped: " + skip)
            return StepResult(obs=f"Passed 0 of {len(tests)} tests.", terminated=True, info=info)
        result = _cached_run(code, tests, self.limits, self.cache_results)
        info.update(passed=result.passed, timed_out=result.timed_out, sandbox=result.backend)
        obs = f"Passed {result.passed} of {result.total} tests." + (" Time limit exceeded." if result.timed_out else "")
        return StepResult(obs=obs, reward=result.fraction, terminated=True, success=result.all_passed, info=info)

    def expert(self) -> ExpertMove:
        """Submit the problem's reference solution, with its one-line plan as the reasoning.

        Real DeepCoder rows carry no solutions; there the expert submits the starter code (or
        ``pass``) and says so: it is an upper bound only in the offline world.
        """
        if self._problem.get("solution"):
            plan = self._problem.get("plan") or "write the straightforward solution"
            return ExpertMove(action=self._problem["solution"], think=f"Plan: {plan}.")
        starter = self._problem.get("starter_code", "").rstrip()
        action = starter + "\n        pass" if starter else "pass"
        return ExpertMove(action=action, think="No reference solution is available for this problem.")
