"""Multi-turn rollouts: prompts, parsing, generation backends and the batched agent loop."""

from ragen2.rollout.backends import GenerationBackend, HFBackend, make_backend, stop_token_ids
from ragen2.rollout.collect import collect_rollouts, execute_actions
from ragen2.rollout.parse import Parsed, parse_response
from ragen2.rollout.prompt import (
    AgentLimits,
    conversation,
    render,
    resolve_limits,
    reward_message,
    system_prompt,
    turn_block,
)
from ragen2.rollout.sequence import TokenizedConversation, fit_context, tokenize_conversations
from ragen2.rollout.types import RolloutBatch, Trajectory, Turn

__all__ = [
    "AgentLimits",
    "GenerationBackend",
    "HFBackend",
    "Parsed",
    "RolloutBatch",
    "TokenizedConversation",
    "Trajectory",
    "Turn",
    "collect_rollouts",
    "conversation",
    "execute_actions",
    "fit_context",
    "make_backend",
    "parse_response",
    "render",
    "resolve_limits",
    "reward_message",
    "stop_token_ids",
    "system_prompt",
    "tokenize_conversations",
    "turn_block",
]
