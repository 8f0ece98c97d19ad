"""Prompt text of the agent loop: system prompt, per-turn user block, reward message (docs/method.md §2.2-§2.5).

The texts are plain strings; :func:`render` turns a message list into the model's chat format with
the tokenizer's chat template. A generation prompt always ends with the literal ``<think>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragen2.config import RolloutConfig
from ragen2.envs.base import TextEnv

THINK_OPEN = "<think>"
FORMAT_HINT = "<think> [Your thoughts] </think> <answer> [your answer] </answer>"
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""The tiny policy's chat template (ChatML without a default system message)."""
INVALID_WARNING = ("No valid action provided previously. Environment state remains the same. "
                   "Please try again.")


@dataclass(frozen=True)
class AgentLimits:
    """The agent-loop limits in effect for one environment (config value, or the env's default)."""

    max_turns: int
    max_actions_per_turn: int
    max_actions_per_traj: int
    max_tokens_hint: int
    """Only printed in the prompt ("Max response length: ...")."""


def resolve_limits(rollout_cfg: RolloutConfig, env: TextEnv | type[TextEnv]) -> AgentLimits:
    """Limits from ``rollout_cfg``, where a 0 means "the environment's ``agent_defaults``"."""
    defaults = env.agent_defaults
    values = {}
    for name, default in (("max_turns", defaults.max_turns),
                          ("max_actions_per_turn", defaults.max_actions_per_turn),
                          ("max_actions_per_traj", defaults.max_actions_per_traj)):
        value = getattr(rollout_cfg, name)
        if value < 0:
            raise ValueError(f"rollout.{name} must be >= 0 (0 = env default), got {value!r}")
        values[name] = value or default
        if values[name] < 1:
            raise ValueError(f"{name} resolved to {values[name]!r}; it must be >= 1")
    return AgentLimits(**values, max_tokens_hint=defaults.max_tokens_hint)


def system_prompt(env: TextEnv | type[TextEnv], max_actions_per_traj: int) -> str:
    """``You're a helpful assistant. `` + the env instruction (+ the action list for grid games)."""
    text = "You're a helpful assistant. " + env.instruction
    if env.action_names:
        text += ("\nYour available actions are:\n" + ", ".join(env.action_names)
                 + f"\nYou can make up to {max_actions_per_traj} actions, separated by the action "
                 'separator " || "\n')
    return text


def turn_block(turn: int, obs: str, actions_left: int, max_tokens_hint: int, *,
               warning: bool = False) -> str:
    """The user block of turn ``turn`` (1-based) showing observation ``obs`` (docs/method.md §2.3).

    ``warning`` inserts the "No valid action provided previously" line (inference prompts only).
    """
    if turn < 1:
        raise ValueError(f"turn is 1-based, got {turn!r}")
    text = f"\nTurn {turn}:\nState:\n{obs}\n"
    if warning:
        text += INVALID_WARNING + "\n"
    text += (f"You have {actions_left} actions left. Always output: {FORMAT_HINT} with no extra text. "
             f"Strictly follow this format. Max response length: {max_tokens_hint} words (tokens).\n")
    return text


def reward_message(reward: float) -> str:
    """The feedback that opens the next user message (Python's default float formatting)."""
    return f"Reward:\n{float(reward)}\n"


def conversation(system: str, user_texts: list[str], responses: list[str]) -> list[dict[str, Any]]:
    """Chat messages: system, then user/assistant pairs (``len(responses)`` is ``len(user_texts)``
    or one less, for a conversation that ends with a user message awaiting generation)."""
    if len(responses) not in (len(user_texts), len(user_texts) - 1):
        raise ValueError(f"{len(user_texts)} user messages do not fit {len(responses)} responses")
    messages = [{"role": "system", "content": system}]
    for i, user in enumerate(user_texts):
        messages.append({"role": "user", "content": user})
        if i < len(responses):
            messages.append({"role": "assistant", "content": responses[i]})
    return messages


def render(tokenizer, messages: list[dict[str, Any]], *, generation: bool) -> str:
    """The chat-templated text; with ``generation`` the assistant header plus ``<think>`` follow."""
    if tokenizer.chat_template == CHATML_TEMPLATE:  # fast path, same text as the Jinja template
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + "<|im_start|>assistant\n" + THINK_OPEN if generation else text
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
    return text + THINK_OPEN if generation else text
