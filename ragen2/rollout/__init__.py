"""Multi-turn rollouts: prompts, parsing, generation backends and the batched agent loop.

The names below are loaded on first use (module ``__getattr__``), so that importing one submodule, say
``ragen2.rollout.types`` or ``ragen2.rollout.backends``, does not import the agent loop and with it the
environments (gymnasium, bm25s, ...): the trainer's tensor code and ``python -m ragen2.bench --gpu`` need neither.
``from ragen2.rollout import collect_rollouts`` works as before.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "GenerationBackend": "backends", "HFBackend": "backends", "make_backend": "backends",
    "stop_token_ids": "stops",
    "collect_rollouts": "collect", "execute_actions": "collect",
    "Parsed": "parse", "parse_response": "parse",
    "AgentLimits": "prompt", "conversation": "prompt", "render": "prompt", "resolve_limits": "prompt",
    "reward_message": "prompt", "system_prompt": "prompt", "turn_block": "prompt",
    "TokenizedConversation": "sequence", "fit_context": "sequence", "tokenize_conversations": "sequence",
    "RolloutBatch": "types", "Trajectory": "types", "Turn": "types",
}
"""Each public name and the submodule that defines it."""

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
