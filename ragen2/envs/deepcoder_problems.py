"""ragen2's own offline coding problems for the DeepCoder environment (written for this package), as data.

Six families (strings, arithmetic, lists, dynamic programming, input parsing, grids) at three
difficulty levels (1 easy, 2 medium, 3 hard), in ``data/deepcoder_problems.yaml``. Each problem carries
its cases (``functional``: ``Solution().<func>(*args)`` must return ``expected``; ``stdin``: the program
reads ``input`` and prints ``output``), a reference solution and a one-line plan that the expert uses
as its reasoning. Loading turns the cases into DeepCoder-schema tests. Expected outputs were worked out
by hand; ``tests/envs/test_deepcoder.py`` runs every reference solution against its tests in the sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

FAMILIES = ("strings", "arithmetic", "lists", "dp", "parsing", "grids")
DATA = Path(__file__).parent / "data" / "deepcoder_problems.yaml"


def _tests(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """DeepCoder-schema tests of one problem's cases."""
    if entry["kind"] == "functional":
        return [{"input": "\n".join(json.dumps(arg) for arg in case["args"]), "output": json.dumps(case["expected"]),
                 "testtype": "functional", "metadata": {"func_name": entry["func"]}} for case in entry["cases"]]
    return [{"input": case["input"], "output": case["output"], "testtype": "stdin", "metadata": {}}
            for case in entry["cases"]]


def _problem(entry: dict[str, Any]) -> dict[str, Any]:
    """One problem as the environment reads it; a family or level outside the six and three is an error."""
    pid, level = entry["id"], entry["level"]
    family = pid.split("-")[0]
    if family not in FAMILIES or level not in (1, 2, 3) or entry["kind"] not in ("functional", "stdin"):
        raise ValueError(f"{DATA.name}: problem {pid!r} has family {family!r}, level {level!r}, kind "
                         f"{entry['kind']!r}; expected one of {FAMILIES}, 1-3, functional or stdin")
    starter = (f"class Solution:\n    def {entry['func']}(self, {entry['params']}):\n        "
               if entry["kind"] == "functional" else "")
    return {"id": pid, "family": family, "difficulty": level, "title": entry["title"],
            "problem": f"{entry['title']}\n\n{entry['statement'].strip()}", "tests": _tests(entry),
            "starter_code": starter, "solution": entry["solution"].strip() + "\n", "plan": entry["plan"]}


PROBLEMS: list[dict[str, Any]] = [_problem(entry) for entry in yaml.safe_load(DATA.read_text(encoding="utf-8"))]
