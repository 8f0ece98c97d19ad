"""Behavioural template signs: grounding in the prompt's own state, openings shared across prompts."""

import math

import numpy as np
import pytest

from ragen2 import envs
from ragen2.metrics.templates import (
    input_atoms,
    names_its_input,
    opening,
    shared_prefix_flags,
    state_text,
    template_metrics,
)
from ragen2.rollout.expert import TEMPLATE_THINKS
from ragen2.rollout.prompt import system_prompt, turn_block


def _prompt(name, seed):
    env = envs.make(name)
    obs, _ = env.reset(seed=seed)
    return env, system_prompt(env, 10) + "\n" + turn_block(1, obs, 10, 64)


@pytest.mark.parametrize("name", ["frozenlake", "sokoban", "countdown"])
def test_the_expert_names_its_own_state_and_a_template_does_not(name):
    for seed in range(20):
        env, prompt = _prompt(name, seed)
        assert names_its_input(prompt, envs.expert_move(env).think), (name, seed)
        for think in TEMPLATE_THINKS:
            assert not names_its_input(prompt, think)


def test_atoms_come_from_the_state_block_only():
    _, prompt = _prompt("frozenlake", 3)
    state = state_text(prompt)
    assert state.startswith("Coordinates:") and "actions left" not in state and "(0,0) at the top-left" not in state
    assert all("," in a for a in input_atoms(prompt))  # coordinates, not the budget's integers
    # another board's coordinates do not count as grounding
    env_b, prompt_b = _prompt("frozenlake", 4)
    other = envs.expert_move(env_b).think
    assert names_its_input(prompt_b, other)
    assert names_its_input(prompt, other) == bool(input_atoms(prompt) & input_atoms(prompt_b))
    _, countdown = _prompt("countdown", 1)
    assert input_atoms(countdown) == {"21", "54", "30", "42", "3"}  # target and numbers, not the action budget


def test_shared_openings_need_three_prompts():
    thinks = ["i will think step by step and solve it"] * 3 + ["player (0,1) goal (1,2). go down"] * 2 + [""]
    flags = shared_prefix_flags(thinks, [0, 1, 2, 3, 3, 4])
    assert flags.tolist() == [True, True, True, False, False, False]
    assert shared_prefix_flags(thinks[:3], [0, 0, 1]).tolist() == [False, False, False]  # 2 prompts only
    assert opening("  I Will think step by step ") == "i will think step by"
    with pytest.raises(ValueError, match="prompt ids"):
        shared_prefix_flags(["a"], [0, 1])


def test_a_template_batch_reads_ungrounded_and_shared_noise_only_ungrounded():
    prompts = [_prompt("frozenlake", s)[1] for s in range(8)]
    groups = list(range(8))
    template = template_metrics(prompts, [TEMPLATE_THINKS[0]] * 8, groups)
    assert template["ungrounded_share"] == 1.0 and template["shared_prefix_share"] == 1.0
    rng = np.random.default_rng(0)
    noise = [" ".join(rng.choice(list("abcdefgh"), 12)) for _ in range(8)]
    noisy = template_metrics(prompts, noise, groups)
    assert noisy["ungrounded_share"] == 1.0 and noisy["shared_prefix_share"] == 0.0
    grounded = template_metrics(prompts, [envs.expert_move(_prompt("frozenlake", s)[0]).think for s in range(8)], groups)
    assert grounded["ungrounded_share"] == 0.0 and grounded["shared_prefix_share"] <= 0.25
    assert math.isnan(template_metrics([], [], [])["ungrounded_share"])
