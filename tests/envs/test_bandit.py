"""Bandit environment: arm pairs, seeding, reward statistics, action matching, expert (docs/method.md §1.8)."""

from __future__ import annotations

import copy
import math
import re

import gymnasium as gym
import numpy as np
import pytest

from ragen2 import envs
from ragen2.envs.bandit import (
    HIGH_ARM_PROBABILITY,
    LOW_ARM_REWARD,
    TEST_PAIRS,
    TRAIN_PAIRS,
    BanditEnv,
)

N_SEEDS = 4000


def test_pair_lists():
    assert len(TRAIN_PAIRS) == 12 and len(TEST_PAIRS) == 8
    train_names = {name for pair in TRAIN_PAIRS for name in pair}
    test_names = {name for pair in TEST_PAIRS for name in pair}
    assert len(train_names) == 24 and len(test_names) == 16
    assert not train_names & test_names
    # Names are single words, so "<answer> Name </answer>" is unambiguous.
    assert all(re.fullmatch(r"[A-Z][a-z]+", name) for name in train_names | test_names)


@pytest.mark.parametrize(("split", "pairs"), [("train", TRAIN_PAIRS), ("test", TEST_PAIRS)])
def test_reset_covers_every_pair_in_both_orders(split, pairs):
    env = BanditEnv(split=split)
    seen = set()
    for seed in range(400):
        obs, info = env.reset(seed=seed)
        low, high = info["low_arm"], info["high_arm"]
        assert (low, high) in pairs
        first, second = re.search(r"called (\w+) and (\w+)\.", obs).groups()
        assert {first, second} == {low, high}
        assert f"<answer> {first} </answer>" in obs
        seen.add((low, high, first == high))
    assert seen == {(low, high, high_first) for low, high in pairs for high_first in (False, True)}


def test_same_seed_same_episode():
    for seed in (0, 1, 99):
        a, b = BanditEnv(), BanditEnv()
        oa, ia = a.reset(seed=seed)
        ob, ib = b.reset(seed=seed)
        assert (oa, ia) == (ob, ib)
        assert a.step(ia["high_arm"])[:4] == b.step(ib["high_arm"])[:4]


def test_episode_does_not_depend_on_how_many_envs_exist():
    # Unlike the reference's per-instance counter, a fresh instance and a long-lived one agree.
    veteran = BanditEnv()
    for seed in range(30):
        veteran.reset(seed=seed)
    assert veteran.reset(seed=7) == BanditEnv().reset(seed=7)


def play(arm: str, seeds: range) -> np.ndarray:
    env = BanditEnv()
    rewards = []
    for seed in seeds:
        _, info = env.reset(seed=seed)
        _, reward, terminated, _, step_info = env.step(info[arm])
        assert terminated and step_info["action_is_valid"]
        assert step_info["success"] == (arm == "high_arm")
        rewards.append(reward)
    return np.array(rewards)


def test_high_arm_reward_statistics():
    rewards = play("high_arm", range(N_SEEDS))
    assert set(np.unique(rewards)) <= {0.0, 1.0}
    # Binomial(4000, 0.25): 4 standard deviations is about 0.027.
    tolerance = 4 * math.sqrt(HIGH_ARM_PROBABILITY * (1 - HIGH_ARM_PROBABILITY) / N_SEEDS)
    assert abs(rewards.mean() - HIGH_ARM_PROBABILITY) < tolerance


def test_low_arm_always_pays_a_little():
    rewards = play("low_arm", range(500))
    assert np.all(rewards == LOW_ARM_REWARD)


@pytest.mark.parametrize("transform", [str.lower, str.upper, lambda s: f"  {s}\n", str.swapcase])
def test_arm_names_match_case_insensitively(transform):
    env = BanditEnv()
    _, info = env.reset(seed=4)
    _, _, terminated, _, step_info = env.step(transform(info["high_arm"]))
    assert terminated and step_info["success"] and step_info["action_is_valid"]


@pytest.mark.parametrize(
    "action",
    ["", " ", "Trader!", "Teacher Trader", "<answer> Trader </answer>", "Ｔｒａｄｅｒ", "\x00", "1", None],
)
def test_anything_else_is_invalid_and_changes_nothing(action):
    env = BanditEnv()
    obs, _ = env.reset(seed=0)  # any pair; none of these strings is an arm name
    obs2, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert not info["action_is_valid"] and not info["success"]
    assert obs2 == obs
    assert not env.done


def test_after_the_pull_further_steps_are_invalid():
    env = BanditEnv()
    _, info = env.reset(seed=2)
    env.step(info["low_arm"])
    _, reward, terminated, _, step_info = env.step(info["high_arm"])
    assert (reward, terminated, step_info["action_is_valid"]) == (0.0, True, False)


def test_expert_always_picks_the_high_arm():
    env = BanditEnv(split="test")
    for seed in range(300):
        _, info = env.reset(seed=seed)
        move = env.expert()
        assert move.action == info["high_arm"]
        assert move.think.startswith(f"{info['high_arm']} takes risks")
        assert "0.25 > " in move.think and info["low_arm"] in move.think
        assert env.step(move.action)[4]["success"]


def test_expert_before_reset_is_a_clear_error():
    with pytest.raises(RuntimeError, match="reset"):
        BanditEnv().expert()


def test_deepcopy_is_an_independent_branch():
    env = BanditEnv()
    _, info = env.reset(seed=11)
    branch = copy.deepcopy(env)
    branch_result = branch.step(info["high_arm"])
    assert branch.done and not env.done
    # Same state, same generator: the original pays out exactly as the branch did.
    assert env.step(info["high_arm"])[:4] == branch_result[:4]


def test_registry_gym_id_and_defaults():
    assert isinstance(envs.make("bandit", split="test"), BanditEnv)
    env = gym.make("ragen2/Bandit-v0", split="test")
    _, info = env.reset(seed=0)
    assert (info["low_arm"], info["high_arm"]) in TEST_PAIRS
    defaults = BanditEnv.agent_defaults
    assert (defaults.max_turns, defaults.max_actions_per_turn, defaults.max_actions_per_traj) == (1, 1, 1)
    assert defaults.max_tokens_hint == 100
