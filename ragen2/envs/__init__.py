"""Text environments of the RAGEN-2 paper, behind one registry.

>>> from ragen2 import envs
>>> env = envs.make("frozenlake", success_rate=1.0)
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step(envs.expert_action(env))

The same environments are registered with Gymnasium under versioned ids
(``gymnasium.make("ragen2/FrozenLake-v0")``). Bump an id's version whenever dynamics, observation
text or reward change.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv, TextSpace
from ragen2.errors import ConfigError


@dataclass(frozen=True)
class EnvSpec:
    name: str
    gym_id: str
    entry_point: str  # "module:Class"


REGISTRY: dict[str, EnvSpec] = {
    spec.name: spec
    for spec in (
        EnvSpec("sokoban", "ragen2/Sokoban-v0", "ragen2.envs.sokoban:SokobanEnv"),
        EnvSpec("frozenlake", "ragen2/FrozenLake-v0", "ragen2.envs.frozenlake:FrozenLakeEnv"),
        EnvSpec("countdown", "ragen2/Countdown-v0", "ragen2.envs.countdown:CountdownEnv"),
        EnvSpec("bandit", "ragen2/Bandit-v0", "ragen2.envs.bandit:BanditEnv"),
        EnvSpec("metamathqa", "ragen2/MetaMathQA-v0", "ragen2.envs.metamathqa:MetaMathQAEnv"),
        EnvSpec("searchqa", "ragen2/SearchQA-v0", "ragen2.envs.searchqa:SearchQAEnv"),
        EnvSpec("webshop", "ragen2/WebShop-v0", "ragen2.envs.webshop:WebShopEnv"),
        EnvSpec("deepcoder", "ragen2/DeepCoder-v0", "ragen2.envs.deepcoder:DeepCoderEnv"),
    )
}


def available() -> list[str]:
    """Names of the environments whose modules are present in this installation."""
    names = []
    for name, spec in REGISTRY.items():
        module = spec.entry_point.split(":")[0]
        if importlib.util.find_spec(module) is not None:
            names.append(name)
    return names


def env_class(name: str) -> type[TextEnv]:
    """The class behind a registry name."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown environment {name!r}; known: {sorted(REGISTRY)}")
    module, cls = REGISTRY[name].entry_point.split(":")
    return getattr(importlib.import_module(module), cls)


def make(name: str, **config: Any) -> TextEnv:
    """Create environment ``name`` with keyword ``config`` (each env's Arguments section)."""
    return env_class(name)(**config)


def expert_action(env: gym.Env) -> str:
    """The expert policy's next action for ``env`` in its current state."""
    return env.unwrapped.expert().action


def expert_move(env: gym.Env) -> ExpertMove:
    """The expert's next action together with its state-grounded reasoning."""
    return env.unwrapped.expert()


for _spec in REGISTRY.values():
    if _spec.gym_id not in gym.registry:
        gym.register(id=_spec.gym_id, entry_point=_spec.entry_point, disable_env_checker=True)

__all__ = [
    "REGISTRY",
    "AgentDefaults",
    "EnvSpec",
    "ExpertMove",
    "StepResult",
    "TextEnv",
    "TextSpace",
    "available",
    "env_class",
    "expert_action",
    "expert_move",
    "make",
]
