"""The environment contract, checked for every environment in the registry.

For each registered environment: Gymnasium's env checker, same seed -> same trajectory, deep-copy
branches, at least 1,000 random and hostile action strings (hypothesis) without an exception, the
docstring headings, the Gymnasium id, the expert's success rate, keyword-only arguments, a reset that
reads no file (data sets are loaded once per process, not per episode), and bad constructor arguments answered by a
one-line ValueError naming the key and the value (:data:`BAD_ARGUMENTS`, a table with rows for every environment).
"""

from __future__ import annotations

import builtins
import copy
import importlib
import io
import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragen2 import envs

ALL_ENVS = sorted(envs.REGISTRY)

# Arguments for the expert test: FrozenLake with success_rate 1 (a deterministic lake), per the issue.
EXPERT_KWARGS = {"frozenlake": {"success_rate": 1.0}}
# Minimum share of seeds the expert must solve; Bandit "success" means choosing the high-risk arm.
EXPERT_MIN_SUCCESS = {name: 0.95 for name in ALL_ENVS}
EXPERT_SEEDS = {name: 100 for name in ALL_ENVS}
EXPERT_SEEDS["deepcoder"] = 40  # each episode runs a sandboxed test suite

HOSTILE = [
    "", " ", "\n", "\x00", "||", "Up || Down", "<answer>Up</answer>", "search[", "search[]", "click[",
    "click[]]", "finish[", "finish[]", "]]]]", "[[[[", "__import__('os').system('id')", "9**9**9**9",
    "1/0", "(" * 500, "\u202e\u200b\ufeff", "中文动作", "😀" * 50, "a" * 100_000, "Up" * 5000,
    "import os; os.system('touch /tmp/pwned')", "while True: pass", "None", "nan", "-1", "1e309",
]

ACTIONS = st.one_of(
    st.text(max_size=60),
    st.sampled_from(HOSTILE),
    st.sampled_from(["Up", "Down", "Left", "Right", "up", " LEFT ", "search[x]", "finish[x]", "click[x]"]),
    st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
)


BAD_ARGUMENTS: dict[str, list[tuple[dict, str]]] = {
    "bandit": [({"split": "val"}, "'val'")],
    "countdown": [({"num_problems": 0}, "0"), ({"num_problems": "10"}, "'10'"), ({"data_seed": -1}, "-1"),
                  ({"require_all_numbers": "yes"}, "'yes'"), ({"max_expression_length": 0}, "0"),
                  ({"data_path": 123}, "123"), ({"render_mode": "human"}, "'human'")],
    "deepcoder": [({"difficulty": 4}, "4"), ({"family": "poetry"}, "poetry"), ({"time_limit_s": -1}, "-1"),
                  ({"memory_mb": 1.5}, "1.5"), ({"backend": "docker"}, "docker"), ({"cache_results": "yes"}, "yes"),
                  ({"data_path": 3}, "3")],
    "frozenlake": [({"success_rate": 1.5}, "1.5"), ({"success_rate": -0.1}, "-0.1"),
                   ({"success_rate": "high"}, "high"), ({"p": 0.0}, "0.0"), ({"size": 1}, "1"), ({"max_steps": 0}, "0")],
    "metamathqa": [({"difficulty": 4}, "4"), ({"difficulty": "hard"}, "hard"), ({"difficulty": True}, "True"),
                   ({"max_attempts": 0}, "0"), ({"max_attempts": "5"}, "'5'"), ({"max_attempts": True}, "True"),
                   ({"data_path": 3}, "3"), ({"render_mode": "human"}, "human")],
    "searchqa": [({"hops": 3}, "3"), ({"hops": "many"}, "many"), ({"top_k": 0}, "0"), ({"top_k": 2.5}, "2.5"),
                 ({"max_steps": -1}, "-1"), ({"max_questions": True}, "True"),
                 ({"data_path": "q.parquet"}, "None"),  # data_path without corpus_path
                 ({"corpus_path": 5}, "5")],
    "sokoban": [({"dim_x": 2}, "2"), ({"dim_y": 0}, "0"), ({"num_boxes": 0}, "0"),
                ({"num_boxes": 3, "dim_x": 4, "dim_y": 4}, "num_boxes=3"), ({"max_steps": -5}, "-5"),
                ({"search_depth": 1.5}, "1.5")],
    "webshop": [({"split": "dev"}, "dev"), ({"max_steps": 0}, "0"), ({"binary_reward": 1}, "1"),
                ({"num_products": 3}, "3"), ({"num_products": "many"}, "many"), ({"catalog_seed": -1}, "-1"),
                ({"data_path": 5}, "5")],
}
"""Per environment: constructor arguments that must be refused, and the text naming the bad value."""


def _make(name: str, **kw) -> envs.TextEnv:
    return envs.make(name, **kw)


def _play(env: envs.TextEnv, actions: list[str]) -> list[tuple]:
    out = []
    for a in actions:
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.mark.parametrize("name", ALL_ENVS)
def test_gymnasium_env_checker(name):
    env = _make(name)
    check_env(env, skip_render_check=True)


@pytest.mark.parametrize("name", ALL_ENVS)
def test_reset_and_step_types(name):
    env = _make(name)
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and obs
    assert isinstance(info, dict)
    action = envs.expert_action(env)
    assert isinstance(action, str)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert type(reward) is float
    assert type(terminated) is bool and type(truncated) is bool
    for key in ("success", "action_is_valid", "action_is_effective"):
        assert type(info[key]) is bool, key
    assert info["action_is_valid"], "the expert's action must be valid"


@pytest.mark.parametrize("name", ALL_ENVS)
def test_same_seed_same_trajectory(name):
    rng = np.random.default_rng(0)
    for seed in (0, 7, 12345):
        a, b = _make(name), _make(name)
        oa, _ = a.reset(seed=seed)
        ob, _ = b.reset(seed=seed)
        assert oa == ob
        for _ in range(6):
            if a.done:
                break
            action = envs.expert_action(a) if rng.random() < 0.7 else "Up"
            ra, rb = a.step(action), b.step(action)
            assert ra[:4] == rb[:4]
            assert ra[4] == rb[4]


@pytest.mark.parametrize("name", ALL_ENVS)
def test_different_seeds_differ(name):
    observations = {_make(name).reset(seed=s)[0] for s in range(20)}
    assert len(observations) > 1


@pytest.mark.parametrize("name", ALL_ENVS)
def test_deepcopy_is_an_independent_branch(name):
    env = _make(name)
    obs0, _ = env.reset(seed=5)
    branch = copy.deepcopy(env)
    # Advance the branch with the expert; the original must not move.
    for _ in range(3):
        if branch.done:
            break
        branch.step(envs.expert_action(branch))
    assert env._obs == obs0
    # And both continue identically from the same state when given the same actions.
    twin = copy.deepcopy(env)
    for _ in range(3):
        if env.done:
            break
        action = envs.expert_action(env)
        assert env.step(action)[:4] == twin.step(action)[:4]


@pytest.mark.parametrize("name", ALL_ENVS)
def test_hostile_actions_never_raise(name):
    env = _make(name)
    counter = {"n": 0}

    @settings(max_examples=100, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(seed=st.integers(0, 2**31 - 1), actions=st.lists(ACTIONS, min_size=10, max_size=10))
    def run(seed, actions):
        e = copy.deepcopy(env)
        e.reset(seed=seed)
        for a in actions:
            obs, reward, terminated, truncated, info = e.step(a)
            counter["n"] += 1
            assert isinstance(obs, str)
            assert np.isfinite(reward)
            assert type(info["action_is_valid"]) is bool
            if terminated or truncated:
                e.reset(seed=seed + 1)

    run()
    assert counter["n"] >= 1000


@pytest.mark.parametrize("name", ALL_ENVS)
def test_invalid_action_changes_nothing(name):
    env = _make(name)
    obs, _ = env.reset(seed=11)
    obs2, reward, terminated, truncated, info = env.step("\x00 definitely not an action \x00")
    assert not info["action_is_valid"]
    assert reward == 0.0
    assert (terminated, truncated) == (False, False) or name in {"countdown", "searchqa"}
    if not (terminated or truncated):
        # The state did not move: the expert's next action is the same as before.
        fresh = _make(name)
        fresh.reset(seed=11)
        assert envs.expert_action(env) == envs.expert_action(fresh)


@pytest.mark.parametrize("name", ALL_ENVS)
def test_docstring_has_gymnasium_headings(name):
    module = importlib.import_module(envs.REGISTRY[name].entry_point.split(":")[0])
    doc = module.__doc__ or ""
    for heading in ("Description", "Actions", "Observation", "Rewards", "Episode end", "Arguments"):
        assert heading in doc, f"{name}: module docstring lacks the '{heading}' heading"


@pytest.mark.parametrize("name", ALL_ENVS)
def test_gymnasium_registration(name):
    env = gym.make(envs.REGISTRY[name].gym_id)
    obs, _ = env.reset(seed=1)
    assert isinstance(obs, str)
    assert env.unwrapped.name == name
    env.close()


@pytest.mark.parametrize("name", ALL_ENVS)
def test_expert_success_rate(name):
    n = EXPERT_SEEDS[name]
    successes = 0
    for seed in range(n):
        env = _make(name, **EXPERT_KWARGS.get(name, {}))
        env.reset(seed=seed)
        info = {"success": False}
        for _ in range(200):
            _, _, terminated, truncated, info = env.step(envs.expert_action(env))
            if terminated or truncated:
                break
        successes += bool(info["success"])
    rate = successes / n
    assert rate >= EXPERT_MIN_SUCCESS[name], f"{name}: expert succeeded on {rate:.0%} of {n} seeds"


def test_unknown_env_name_is_a_clear_error():
    with pytest.raises(ValueError, match="no_such_env"):
        envs.make("no_such_env")


@pytest.mark.parametrize("name", ALL_ENVS)
def test_arguments_are_keyword_only(name):
    """Every constructor takes keyword arguments only: a positional one is a TypeError, not a silent misread."""
    with pytest.raises(TypeError):
        envs.env_class(name)(4)


@pytest.mark.parametrize("name", ALL_ENVS)
def test_reset_reads_no_file(name, monkeypatch):
    """After the first reset (which may load a data set), 50 resets on new seeds open no file: an episode's start
    costs no I/O, so rollouts of thousands of episodes do not re-read their data."""
    env = _make(name)
    env.reset(seed=0)

    def refuse(*args, **kwargs):
        raise AssertionError(f"{name}: reset opened a file: {args[:1]}")

    for module, attr in ((builtins, "open"), (io, "open"), (os, "open")):
        monkeypatch.setattr(module, attr, refuse)
    for seed in range(1, 51):
        env.reset(seed=seed)


def test_every_environment_has_bad_arguments_in_the_table():
    assert sorted(BAD_ARGUMENTS) == ALL_ENVS


@pytest.mark.parametrize("name, kwargs, bad", [(n, kw, bad) for n in ALL_ENVS for kw, bad in BAD_ARGUMENTS.get(n, [])])
def test_bad_arguments_are_one_line_naming_the_key_and_the_value(name, kwargs, bad):
    with pytest.raises(ValueError) as err:
        envs.make(name, **kwargs)
    message = str(err.value)
    assert bad in message and next(iter(kwargs)) in message and "\n" not in message, message
