import pytest
from transformers import PreTrainedTokenizerFast

from ragen2.config import RolloutConfig
from ragen2.policy import train_tokenizer
from ragen2.rollout.prompt import (
    CHATML_TEMPLATE,
    conversation,
    render,
    resolve_limits,
    reward_message,
    system_prompt,
    turn_block,
)
from tests.rollout._fake_env import LineEnv


class _NoActionsEnv(LineEnv):
    action_names = None


def test_system_prompt_lists_actions_only_for_grid_envs():
    text = system_prompt(LineEnv, 4)
    assert text.startswith("You're a helpful assistant. " + LineEnv.instruction)
    assert "Your available actions are:\nLeft, Right\n" in text
    assert 'You can make up to 4 actions, separated by the action separator " || "\n' in text
    assert system_prompt(_NoActionsEnv, 4) == "You're a helpful assistant. " + LineEnv.instruction


def test_turn_block_layout():
    block = turn_block(2, "A\nB", 3, 120)
    assert block == ("\nTurn 2:\nState:\nA\nB\nYou have 3 actions left. Always output: <think> [Your thoughts] "
                     "</think> <answer> [your answer] </answer> with no extra text. Strictly follow this "
                     "format. Max response length: 120 words (tokens).\n")
    warned = turn_block(2, "A", 3, 120, warning=True)
    assert "\nA\nNo valid action provided previously. Environment state remains the same. Please try again.\n" \
           "You have 3" in warned
    with pytest.raises(ValueError, match="1-based"):
        turn_block(0, "A", 3, 120)


def test_reward_message_uses_python_float_format():
    assert reward_message(-0.2) == "Reward:\n-0.2\n"
    assert reward_message(1) == "Reward:\n1.0\n"
    assert reward_message(0.1 + 0.2) == "Reward:\n0.30000000000000004\n"


def test_resolve_limits_defaults_and_overrides():
    limits = resolve_limits(RolloutConfig(), LineEnv)
    assert (limits.max_turns, limits.max_actions_per_turn, limits.max_actions_per_traj) == (3, 2, 4)
    limits = resolve_limits(RolloutConfig(max_turns=7, max_actions_per_traj=9), LineEnv)
    assert (limits.max_turns, limits.max_actions_per_turn, limits.max_actions_per_traj) == (7, 2, 9)
    with pytest.raises(ValueError, match="max_turns"):
        resolve_limits(RolloutConfig(max_turns=-1), LineEnv)


def test_render_chatml_generation_prompt_ends_with_think():
    tok = train_tokenizer(["hello world", "user\nhi"], 300)
    assert isinstance(tok, PreTrainedTokenizerFast) and tok.chat_template == CHATML_TEMPLATE
    messages = conversation("sys", ["u1", "u2"], ["a1"])
    text = render(tok, messages, generation=True)
    assert text == ("<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nu1<|im_end|>\n"
                    "<|im_start|>assistant\na1<|im_end|>\n<|im_start|>user\nu2<|im_end|>\n"
                    "<|im_start|>assistant\n<think>")
    assert text == tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + "<think>"
    done = conversation("sys", ["u1"], ["a1"])
    assert render(tok, done, generation=False) == tok.apply_chat_template(done, tokenize=False)
    assert render(tok, done, generation=False).endswith("a1<|im_end|>\n")
    with pytest.raises(ValueError, match="do not fit"):
        conversation("sys", ["u1"], ["a1", "a2"])
