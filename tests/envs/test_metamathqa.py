"""Tests for the MetaMathQA environment (ragen2/envs/metamathqa.py)."""

from __future__ import annotations

import copy
import json
import pickle
import re

import numpy as np
import pytest

from ragen2.envs.metamathqa import (
    CORRECT_OBS,
    DIFFICULTIES,
    INCORRECT_OBS,
    OFFLINE_PROBLEMS_PER_LEVEL,
    OUT_OF_ATTEMPTS_OBS,
    TEMPLATES,
    MetaMathQAEnv,
    extract_gold_answer,
    generate_problem,
    normalize_math_answer,
    offline_problems,
    write_offline_data,
)


@pytest.fixture(autouse=True)
def _offline_hf(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def _fresh(seed: int = 0, **kw) -> MetaMathQAEnv:
    env = MetaMathQAEnv(**kw)
    env.reset(seed=seed)
    return env


# -- rewards and episode end -------------------------------------------------------------------


@pytest.mark.parametrize("wrong_first", range(5))
def test_reward_halves_with_each_wrong_attempt(wrong_first):
    env = _fresh(seed=3)
    gold = env.expert().action
    for _ in range(wrong_first):
        obs, reward, terminated, truncated, info = env.step(gold + "0")
        assert (obs, reward, terminated, truncated) == (INCORRECT_OBS, 0.0, False, False)
        assert info["action_is_valid"] and not info["success"]
    obs, reward, terminated, truncated, info = env.step(gold)
    assert obs == CORRECT_OBS and terminated and not truncated and info["success"]
    assert reward == 1.0 / 2**wrong_first


def test_truncated_after_max_attempts_then_inert():
    env = _fresh(seed=4, max_attempts=2)
    assert env.step("not it")[1:4] == (0.0, False, False)
    obs, reward, terminated, truncated, info = env.step("still not it")
    assert (obs, reward, terminated, truncated) == (OUT_OF_ATTEMPTS_OBS, 0.0, False, True)
    # After the end every action is an invalid no-op, even the right answer.
    obs2, reward2, _, truncated2, info2 = env.step(env.expert().action)
    assert (obs2, reward2, truncated2, info2["action_is_valid"]) == (obs, 0.0, True, False)


def test_answer_comparison_ignores_case_and_whitespace_only():
    assert normalize_math_answer(" 2 1\n") == "21"
    assert normalize_math_answer("\\Frac{1}{ 2}") == "\\frac{1}{2}"
    env = _fresh(seed=5)
    gold = env.expert().action
    assert env.step(f"${gold}")[0] == INCORRECT_OBS  # a unit sign is not stripped
    spaced = " ".join(gold) + "\t"
    obs, reward, *_ = env.step(spaced)
    assert obs == CORRECT_OBS and reward == 0.5


@pytest.mark.parametrize("action", ["", "   ", "\n\t", "\u00a0", "\x00", "4\x00", "\x1b[31m4"])
def test_empty_or_malformed_action_is_invalid_and_uses_no_attempt(action):
    env = MetaMathQAEnv(max_attempts=1)
    question, _ = env.reset(seed=6)
    obs, reward, terminated, truncated, info = env.step(action)
    assert (obs, reward, terminated, truncated) == (question, 0.0, False, False)
    assert not info["action_is_valid"] and not info["action_is_effective"]
    assert env.step(env.expert().action)[1] == 1.0  # the only attempt is still available


@pytest.mark.parametrize(
    "action", ["x" * 100_000, "中文答案 √2 → é", "<answer>3</answer>", "\u200b", None, 7, b"7"]
)
def test_hostile_actions_never_raise(action):
    env = _fresh(seed=7)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and reward == 0.0 and not terminated
    assert info["action_is_valid"] == isinstance(action, str)


# -- the offline world -------------------------------------------------------------------------


def test_offline_problems_are_consistent_and_graded():
    problems = offline_problems()
    assert len(problems) == len(DIFFICULTIES) * OFFLINE_PROBLEMS_PER_LEVEL
    for problem in problems:
        assert isinstance(problem.answer, int) and problem.answer >= 0
        # The last computation step ends in the answer (optionally as dollars).
        assert re.search(rf"= \$?{problem.answer}(\D|$)", problem.steps[-1]), problem
    steps_by_level = {d: {len(p.steps) for p in problems if p.difficulty == d} for d in DIFFICULTIES}
    assert steps_by_level[1] == {1} and min(steps_by_level[2]) >= 2 and steps_by_level[3] == {3}
    for level in DIFFICULTIES:
        topics = {p.topic for p in problems if p.difficulty == level}
        assert topics == {topic for topic, _ in TEMPLATES[level]}
    assert any("%" in p.question for p in problems if p.difficulty == 3)
    assert any("1/" in p.question for p in problems if p.difficulty == 3)
    assert len({p.question for p in problems}) > 0.9 * len(problems)


def test_offline_problems_are_identical_across_calls_and_generators():
    a = [generate_problem(np.random.default_rng(11), d) for d in DIFFICULTIES]
    b = [generate_problem(np.random.default_rng(11), d) for d in DIFFICULTIES]
    assert a == b
    with pytest.raises(ValueError, match="4"):
        generate_problem(np.random.default_rng(0), 4)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_difficulty_selects_its_level(difficulty):
    env = MetaMathQAEnv(difficulty=difficulty)
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        levels = {p.difficulty for p in offline_problems() if p.question == obs}
        assert levels == {difficulty}


def test_same_seed_same_problem_and_seeds_vary():
    first = [MetaMathQAEnv().reset(seed=s)[0] for s in range(30)]
    again = [MetaMathQAEnv().reset(seed=s)[0] for s in range(30)]
    assert first == again
    assert len(set(first)) > 25


def test_deepcopy_is_an_independent_branch():
    env = _fresh(seed=8)
    branch = copy.deepcopy(env)
    gold = env.expert().action
    assert branch.step(gold)[1] == 1.0
    assert env.step("wrong")[0] == INCORRECT_OBS  # the original did not see the branch's answer
    assert pickle.loads(pickle.dumps(env)).step(gold)[1] == 0.5


def test_expert_solves_every_seed_with_grounded_reasoning():
    env = MetaMathQAEnv()
    successes = 0
    for seed in range(100):
        env.reset(seed=seed)
        move = env.expert()
        assert move.think.endswith(f"the answer is {move.action}.")
        assert "=" in move.think  # it shows the computation
        successes += env.step(move.action)[4]["success"]
    assert successes == 100



# -- arguments -------------------------------------------------------------------------------------


def test_bad_reset_index_names_the_value():
    env = MetaMathQAEnv(difficulty=1)
    with pytest.raises(ValueError, match="1000"):
        env.reset(options={"index": 1000})
    assert env.reset(options={"index": 999})[1]["index"] == 999


# -- data files and the real loader --------------------------------------------------------------


def test_write_offline_data_round_trips_through_the_real_loader(tmp_path):
    paths = write_offline_data(tmp_path)
    assert paths == [tmp_path / "metamathqa" / "train.jsonl"]
    assert sorted(p.name for p in (tmp_path / "metamathqa").iterdir()) == ["train.jsonl"]  # no temp files
    rows = [json.loads(line) for line in paths[0].read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(offline_problems())
    assert set(rows[0]) == {"query", "response", "type", "original_question"}
    assert all(extract_gold_answer(r["response"]) == str(p.answer) for r, p in zip(rows, offline_problems()))
    offline, real = MetaMathQAEnv(), MetaMathQAEnv(data_path=paths[0])
    for seed in range(10):
        assert offline.reset(seed=seed) == real.reset(seed=seed)
        assert real.step(real.expert().action)[1] == 1.0


def test_real_loader_reads_metamathqa_json_and_parquet(tmp_path):
    records = [
        {
            "query": "What is $\\frac{2}{4}$ in lowest terms?",
            "response": "Divide both by 2.\nThe answer is: \\frac{1}{2}",
            "type": "MATH_AnsAug",
            "original_question": "Simplify 2/4.",
        },
        {
            "query": "Tom has 3 apples and gets 4 more. How many?",
            "response": "3 + 4 = 7. The answer is: 7",
            "type": "GSM_Rephrased",
            "original_question": "...",
        },
    ]
    json_path = tmp_path / "MetaMathQA-395K.json"
    json_path.write_text(json.dumps(records), encoding="utf-8")  # the real file is one JSON list
    import pandas as pd

    parquet_path = tmp_path / "mmqa.parquet"
    pd.DataFrame(records).to_parquet(parquet_path)
    for path in (json_path, parquet_path):
        env = MetaMathQAEnv(data_path=path)
        assert env.num_problems() == 2
        obs, _ = env.reset(options={"index": 0})
        assert obs == records[0]["query"]
        move = env.expert()
        assert move.action == "\\frac{1}{2}" and "Divide both by 2." in move.think
        assert env.step("\\frac{1}{ 2 }")[1] == 1.0


def test_real_loader_rejects_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.json"):
        MetaMathQAEnv(data_path=tmp_path / "missing.json")
    no_response = tmp_path / "no_response.jsonl"
    no_response.write_text(json.dumps({"query": "q"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="response"):
        MetaMathQAEnv(data_path=no_response)
    no_marker = tmp_path / "no_marker.jsonl"
    no_marker.write_text(json.dumps({"query": "q", "response": "just text"}) + "\n", encoding="utf-8")
    env = MetaMathQAEnv(data_path=no_marker)
    with pytest.raises(ValueError, match="row 0"):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="difficulty=2"):
        MetaMathQAEnv(data_path=no_marker, difficulty=2)


def test_registry_and_docstring():
    from ragen2 import envs
    from ragen2.envs import metamathqa as metamathqa_module

    env = envs.make("metamathqa", max_attempts=3)
    assert isinstance(env, MetaMathQAEnv) and env.max_attempts == 3
    for heading in ("Description", "Actions", "Observation", "Rewards", "Episode end", "Arguments"):
        assert f"## {heading}" in metamathqa_module.__doc__
    assert MetaMathQAEnv.agent_defaults.max_actions_per_traj == 5
