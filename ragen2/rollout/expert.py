"""Expert episodes rendered as agent-loop conversations (SFT corpus, tokenizer corpus).

The conversation is built by the same prompt functions and action semantics as the rollouts, so an
expert trajectory is token-for-token what a perfect policy would produce (docs/method.md §2.5-§2.6).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ragen2 import envs
from ragen2.envs.base import TextEnv
from ragen2.rollout.collect import execute_actions
from ragen2.rollout.parse import JOIN_SEP
from ragen2.rollout.prompt import AgentLimits, conversation, reward_message, system_prompt, turn_block

TEMPLATE_THINKS = (
    "i will think step by step and solve it",
    "let me think carefully and find the answer",
    "i should solve this step by step",
)
"""Generic reasoning that ignores the state (the "template" of template collapse)."""


def is_template(think: str) -> bool:
    """Whether ``think`` is one of :data:`TEMPLATE_THINKS` (case and outer spaces ignored)."""
    return think.strip().lower() in TEMPLATE_THINKS


@dataclass
class ExpertEpisode:
    messages: list[dict[str, Any]]
    """system, user/assistant pairs; no final state, no reward message after the last turn."""
    score: float
    success: bool
    template: bool


def expert_response(env: TextEnv, max_actions: int, template_think: str | None = None) -> str:
    """The expert's stored response for the current state: up to ``max_actions`` planned moves.

    The moves are planned on a copy of the env; the reasoning joins each move's grounded think
    (or is ``template_think``).
    """
    planner = copy.deepcopy(env)
    actions, thinks = [], []
    for _ in range(max_actions):
        move = envs.expert_move(planner)
        actions.append(move.action)
        thinks.append(move.think)
        planner.step(move.action)
        if planner.unwrapped.done:
            break
    think = template_think if template_think is not None else " ".join(thinks)
    return f"<think>{think}</think><answer>{JOIN_SEP.join(actions)}</answer>"


def expert_episode(env: TextEnv, seed: int, limits: AgentLimits, *,
                   template_think: str | None = None) -> ExpertEpisode:
    """Play one expert episode from ``env.reset(seed=seed)`` under the agent-loop ``limits``."""
    obs, _ = env.reset(seed=seed)
    system = system_prompt(env, limits.max_actions_per_traj)
    user_texts: list[str] = []
    responses: list[str] = []
    used, reward_sum, last_reward, success = 0, 0.0, None, False
    for turn in range(1, limits.max_turns + 1):
        prefix = reward_message(last_reward) if last_reward is not None else ""
        user_texts.append(prefix + turn_block(turn, obs, limits.max_actions_per_traj - used,
                                              limits.max_tokens_hint))
        per_turn = min(limits.max_actions_per_turn, limits.max_actions_per_traj - used)
        response = expert_response(env, per_turn, template_think)
        responses.append(response)
        actions = response.split("<answer>", 1)[1].removesuffix("</answer>").split(JOIN_SEP)
        outcome = execute_actions(env, actions, limits.max_actions_per_traj - used)
        used += len(outcome.executed)
        reward_sum += outcome.env_reward
        last_reward = outcome.env_reward
        if outcome.obs is not None:
            obs = outcome.obs
        if env.unwrapped.done:
            success = bool(outcome.info.get("success", False))
            break
        if used >= limits.max_actions_per_traj:
            break
    return ExpertEpisode(conversation(system, user_texts, responses), reward_sum, success,
                         template_think is not None)
