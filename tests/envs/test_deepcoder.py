"""The DeepCoder environment: code extraction, the class-indentation rule, the offline problem set
(every reference solution passes, the tests tell solutions apart), the DeepCoder-schema loader,
scoring and determinism. The sandbox itself is tested in ``test_sandbox.py``."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragen2.envs import deepcoder, make, sandbox
from ragen2.envs.deepcoder import DeepCoderEnv, apply_starter, cannot_pass, extract_code, write_offline_data
from ragen2.envs.deepcoder_problems import FAMILIES, PROBLEMS

pytestmark = pytest.mark.filterwarnings("ignore:DeepCoder sandbox is WEAKER")


def _index_of(problem_id: str) -> int:
    return next(i for i, p in enumerate(PROBLEMS) if p["id"] == problem_id)


def _env_at(problem_id: str, **kw) -> DeepCoderEnv:
    env = DeepCoderEnv(cache_results=False, **kw)
    env.reset(seed=0, options={"index": _index_of(problem_id)})
    return env


# -- extraction and the class rule --------------------------------------------------------------
@pytest.mark.parametrize(
    "action, code",
    [
        ("```python\nprint(1)\n```", "print(1)"),
        ("Some words.\n```py\nx = 1\nprint(x)\n```\nMore words.", "x = 1\nprint(x)"),
        ("```python\nprint('draft')\n```\nBetter:\n```python\nprint('final')\n```", "print('final')"),
        ("```\nprint(2)\n```", "print(2)"),
        ("```python\nprint(3)\n", "print(3)"),  # cut off before the closing fence
        ("   print(4)\n\n", "print(4)"),
        ("def f(x):\n    return x\n", "def f(x):\n    return x"),
        ("```Python3 title\n    print(5)\n```", "print(5)"),
    ],
)
def test_extract_code(action, code):
    assert extract_code(action) == code


@pytest.mark.parametrize("action", ["", "   \n", "```python\n\n```", "```cpp\nint main() {}\n```", "print(1)\x00"])
def test_extract_code_rejects_no_code(action):
    assert extract_code(action) is None


def test_class_indentation_rule():
    starter = "class Solution:\n    def f(self, x):\n        "
    body = "def f(self, x):\n    return x + 1"
    assert apply_starter(body, starter) == "class Solution:\n    def f(self, x):\n        return x + 1"
    assert apply_starter("class Solution:\n    pass", starter) == "class Solution:\n    pass"
    assert apply_starter("import math\ndef f(self, x):\n    return x", starter).startswith("import math")
    assert apply_starter(body, "") == body  # no starter class: leave the code alone


def test_bare_method_is_indented_into_the_class_and_passes():
    env = _env_at("strings-reverse-words")
    body = "```python\ndef reverse_each_word(self, s):\n    return ' '.join(w[::-1] for w in s.split(' '))\n```"
    _, reward, terminated, _, info = env.step(body)
    assert (reward, terminated, info["success"]) == (1.0, True, True)


# -- the offline problem set ---------------------------------------------------------------------
def test_problem_set_shape():
    assert len(PROBLEMS) >= 40
    assert len({p["id"] for p in PROBLEMS}) == len(PROBLEMS)
    cells = Counter((p["family"], p["difficulty"]) for p in PROBLEMS)
    assert set(cells) == {(f, d) for f in FAMILIES for d in (1, 2, 3)}
    kinds = Counter(t["testtype"] for p in PROBLEMS for t in p["tests"])
    assert kinds["functional"] >= 60 and kinds["stdin"] >= 60
    for p in PROBLEMS:
        assert len(p["tests"]) >= 3, p["id"]
        sandbox.validate_tests(p["tests"])
        assert p["plan"] and p["solution"].strip()
        functional = p["tests"][0]["testtype"] == "functional"
        assert ("class Solution" in p["starter_code"]) == functional, p["id"]


def test_every_reference_solution_passes_all_its_tests():
    failures = []
    for index, problem in enumerate(PROBLEMS):
        env = DeepCoderEnv(cache_results=False)
        env.reset(seed=0, options={"index": index})
        move = env.expert()
        _, reward, _, _, info = env.step(move.action)
        if not info["success"]:
            failures.append((problem["id"], reward, info))
        assert move.think == f"Plan: {problem['plan']}."
    assert failures == []


def test_tests_tell_solutions_apart():
    """The reference solution of a problem from another family (same test kind) fails some test."""
    by_kind: dict[str, list[dict]] = {}
    for problem in PROBLEMS:
        by_kind.setdefault(problem["tests"][0]["testtype"], []).append(problem)
    for group in by_kind.values():
        half = len(group) // 2
        for problem, other in zip(group, group[half:] + group[:half]):
            assert problem["family"] != other["family"]
            result = sandbox.run_tests(other["solution"], problem["tests"])
            assert not result.all_passed, (problem["id"], other["id"])


# -- scoring through the env --------------------------------------------------------------------
def test_partial_credit_and_episode_end():
    env = _env_at("arithmetic-triangle")  # tests: n = 5, 1, 100
    obs, reward, terminated, truncated, info = env.step("n = int(input())\nprint(15 if n == 5 else 1)")
    assert reward == pytest.approx(2 / 3)
    assert (terminated, truncated, info["success"]) == (True, False, False)
    assert obs == "Passed 2 of 3 tests."
    assert (info["passed"], info["total"]) == (2, 3)
    # After the end, any action is an invalid no-op.
    assert env.step("print(1)")[4]["action_is_valid"] is False


def test_invalid_actions_change_nothing():
    env = _env_at("lists-range")
    obs0 = env.render() or env._obs
    for action in ("", "```cpp\nint main(){}\n```", "\x00"):
        obs, reward, terminated, truncated, info = env.step(action)
        assert (obs, reward, terminated, truncated) == (obs0, 0.0, False, False)
        assert info["action_is_valid"] is False


def test_code_that_cannot_pass_is_scored_without_the_sandbox():
    env = _env_at("lists-range")
    _, reward, terminated, _, info = env.step("def broken(:\n    pass")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, True)
    assert info["sandbox"].startswith("skipped: does not compile")
    stdin_tests = PROBLEMS[_index_of("lists-range")]["tests"]
    assert cannot_pass("while True:\n    pass", stdin_tests) == "cannot produce the required output"
    assert cannot_pass("import sys", stdin_tests) is None
    functional = PROBLEMS[_index_of("dp-lis")]["tests"]
    assert cannot_pass("def other(x):\n    return 4", functional) == "cannot produce the required output"
    assert cannot_pass("def lis_length(x):\n    return 4", functional) is None


def test_timeout_scores_zero():
    env = _env_at("strings-anagram", time_limit_s=0.5)
    obs, reward, _, _, info = env.step("while True:\n    print(1)")
    assert (reward, info["timed_out"]) == (0.0, True)
    assert obs.endswith("Time limit exceeded.")


# -- observation, determinism, arguments -----------------------------------------------------------
def test_observation_has_statement_and_starter_code():
    env = DeepCoderEnv()
    obs, info = env.reset(seed=0, options={"index": _index_of("strings-reverse-words")})
    assert obs.startswith("Reverse Every Word\n\nGiven a sentence")
    assert obs.endswith("Starter code:\nclass Solution:\n    def reverse_each_word(self, s):")
    obs, _ = env.reset(seed=0, options={"index": _index_of("lists-range")})
    assert "Starter code" not in obs
    assert info["problem_id"] == "strings-reverse-words"


def test_same_seed_same_problem_and_reward():
    a, b = DeepCoderEnv(), DeepCoderEnv()
    seen = set()
    for seed in range(12):
        obs_a, info_a = a.reset(seed=seed)
        obs_b, _ = b.reset(seed=seed)
        assert obs_a == obs_b
        seen.add(info_a["index"])
    assert len(seen) > 5
    code = "print(0)"
    a.reset(seed=3)
    b.reset(seed=3)
    assert a.step(code)[:4] == b.step(code)[:4]


def test_difficulty_and_family_filters():
    env = DeepCoderEnv(difficulty=3, family="dp")
    assert env.num_problems() == sum(p["difficulty"] == 3 and p["family"] == "dp" for p in PROBLEMS)
    for seed in range(5):
        _, info = env.reset(seed=seed)
        assert info["problem_id"].startswith("dp-")


def test_agent_defaults_and_registry():
    defaults = DeepCoderEnv.agent_defaults
    assert (defaults.max_turns, defaults.max_actions_per_turn, defaults.max_actions_per_traj) == (1, 1, 1)
    assert defaults.max_tokens_hint == 8000
    assert isinstance(make("deepcoder"), DeepCoderEnv)


# -- data files ------------------------------------------------------------------------------------
def test_write_offline_data_round_trips_through_the_loader(tmp_path):
    paths = write_offline_data(tmp_path)
    assert paths == [tmp_path / "deepcoder" / "problems.jsonl"]
    assert sorted(p.name for p in (tmp_path / "deepcoder").iterdir()) == ["problems.jsonl"]  # no temp files
    rows = [json.loads(line) for line in paths[0].read_text().splitlines()]
    assert len(rows) == len(PROBLEMS)
    assert isinstance(rows[0]["tests"], str) and json.loads(rows[0]["tests"]) == PROBLEMS[0]["tests"]
    real = DeepCoderEnv(data_path=paths[0], cache_results=False)
    offline = DeepCoderEnv(cache_results=False)
    for index in (0, 17, len(PROBLEMS) - 1):
        assert real.reset(seed=0, options={"index": index})[0] == offline.reset(seed=0, options={"index": index})[0]
    assert real.step(real.expert().action)[4]["success"]


def test_loader_reads_a_deepcoder_parquet(tmp_path):
    functional_tests = [
        {"input": "[1, 2]\n3", "output": "[1, 2, 3]", "testtype": "functional", "metadata": {"func_name": "push"}},
        {"input": "[]\n0", "output": "[0]", "testtype": "functional", "metadata": {"func_name": "push"}},
    ]
    stdin_tests = [{"input": "abc\n", "output": "cba\n", "testtype": "stdin", "metadata": {}}]
    table = pa.table({
        "problem": ["Append x to the list and return it.", "Print the input line reversed."],
        "tests": [json.dumps(functional_tests), json.dumps(stdin_tests)],
        "starter_code": ["class Solution:\n    def push(self, xs: List[int], x: int) -> List[int]:\n        ", ""],
    })
    path = tmp_path / "test.parquet"
    pq.write_table(table, path)
    env = DeepCoderEnv(data_path=path, cache_results=False)
    assert env.num_problems() == 2
    obs, _ = env.reset(seed=0, options={"index": 0})
    assert obs.endswith("def push(self, xs: List[int], x: int) -> List[int]:")
    # A bare method with typing annotations: indented into the class, List predefined.
    _, reward, *_ = env.step("def push(self, xs: List[int], x: int) -> List[int]:\n    return xs + [x]")
    assert reward == 1.0
    env.reset(seed=0, options={"index": 1})
    assert env.step("print(input()[::-1])")[1] == 1.0
    assert env.expert().think == "No reference solution is available for this problem."


def test_loader_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        DeepCoderEnv(data_path=tmp_path / "nowhere.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "p", "starter_code": ""}) + "\n")
    with pytest.raises(ValueError, match="tests"):
        DeepCoderEnv(data_path=bad)
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text(json.dumps({"problem": "p", "tests": json.dumps([{"input": "1"}])}) + "\n")
    env = DeepCoderEnv(data_path=malformed)
    with pytest.raises(ValueError, match="row 0"):
        env.reset(seed=0)


def test_taco_style_tests_are_accepted():
    tests = deepcoder._normalise_tests(
        json.dumps({"inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]], "fn_name": "add"}), "row 0"
    )
    assert tests[0] == {"input": "1\n2", "output": "3", "testtype": "functional", "metadata": {"func_name": "add"}}
    stdin = deepcoder._normalise_tests([{"input": "1\n", "output": "1\n", "type": "stdin_stdout"}], "row 1")
    assert stdin[0]["testtype"] == "stdin"
