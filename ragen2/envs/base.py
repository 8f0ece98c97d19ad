"""The text-environment contract every ragen2 environment follows.

Every environment is a :class:`gymnasium.Env` whose observations and actions are strings:

- ``reset(seed=..., options=None) -> (obs: str, info: dict)``; all randomness comes from the seed
  (through ``self.np_random``, which Gymnasium seeds in ``super().reset``), so the same seed gives the
  same episode in any process.
- ``step(action: str) -> (obs, reward: float, terminated: bool, truncated: bool, info: dict)`` where
  ``info`` always carries ``success`` (bool), ``action_is_valid`` (bool) and ``action_is_effective``
  (bool).
- Any action string whatsoever is accepted. An action the environment cannot use is a step that
  changes nothing, flagged ``action_is_valid=False``; it never raises.
- ``copy.deepcopy(env)`` is an independent branch of the episode (experts and tests search with it).
- ``expert()`` returns an :class:`ExpertMove`: the expert's next action and a reasoning text
  grounded in the current state (used by the SFT warm start and as an upper-bound policy).

Subclasses implement ``_reset(options) -> (obs, info)``, ``_step(action) -> StepResult`` and
``expert()``; this base class owns seeding, type normalisation and the after-the-end behaviour.
"""

from __future__ import annotations

import copy
import functools
import string
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

# Characters that random action strings are drawn from: printable ASCII plus a few non-ASCII ones
# that appear in observations or that a tokenizer might produce.
SAMPLE_CHARSET = string.printable + "√→←↑↓éü中\u00a0\u200b"


class TextSpace(gym.spaces.Text):
    """A text space that contains *every* string up to ``max_length`` characters.

    Gymnasium's ``Text`` space restricts the character set; language-model actions and our
    observations are arbitrary strings, so membership only checks type and length. Sampling
    still draws from :data:`SAMPLE_CHARSET` (useful for fuzzing).
    """

    def __init__(self, max_length: int = 65536, *, min_length: int = 0, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"


@functools.cache
def _unseeded_text_space(max_length: int) -> TextSpace:
    return TextSpace(max_length=max_length)


def fresh_text_space(max_length: int = 65536) -> TextSpace:
    """A new, unseeded :class:`TextSpace`: a shallow copy of a cached one that is never seeded, so that an env's
    construction (64 per rollout step) skips Gymnasium's per-character tables (immutable, so shared); each copy
    draws its own RNG when first sampled or seeded."""
    return copy.copy(_unseeded_text_space(max_length))


@dataclass
class StepResult:
    """What a subclass's ``_step`` returns; the base class turns it into Gymnasium's 5-tuple."""

    obs: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    success: bool = False
    action_is_valid: bool = True
    action_is_effective: bool = True
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExpertMove:
    """The expert's next action and a reasoning text grounded in the current state."""

    action: str
    think: str


@dataclass(frozen=True)
class AgentDefaults:
    """Per-environment agent-loop defaults (docs/method.md §2.1)."""

    max_turns: int = 5
    max_actions_per_turn: int = 2
    max_actions_per_traj: int = 10
    max_tokens_hint: int = 120  # only printed in the prompt ("Max response length: ...")


class TextEnv(gym.Env):
    """Base class for ragen2's text environments (see the module docstring for the contract)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    #: Registry name (``ragen2.envs.make(name)``).
    name: ClassVar[str] = ""
    #: Instruction text placed in the system prompt after "You're a helpful assistant. ".
    instruction: ClassVar[str] = ""
    #: Action names for grid games (matched case-insensitively), or ``None`` for free-form actions.
    action_names: ClassVar[tuple[str, ...] | None] = None
    #: Agent-loop defaults for this environment.
    agent_defaults: ClassVar[AgentDefaults] = AgentDefaults()

    def __init__(self, render_mode: str | None = None):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.observation_space = fresh_text_space()
        self.action_space = fresh_text_space(max_length=4096)
        self._obs: str | None = None
        self._terminated = False
        self._truncated = False
        self._last_success = False

    # -- the Gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        obs, info = self._reset(options or {})
        self._obs = str(obs)
        self._terminated = self._truncated = False
        self._last_success = False
        info = dict(info)
        info.setdefault("success", False)
        return self._obs, info

    def step(self, action: Any):
        if self._obs is None:
            raise RuntimeError(f"{type(self).__name__}.step() called before reset()")
        if not isinstance(action, str):
            # Not a string at all: an invalid action, never an exception.
            return self._invalid_step()
        if self.done:
            return self._invalid_step()
        res = self._step(action)
        self._obs = str(res.obs)
        terminated, truncated = bool(res.terminated), bool(res.truncated)
        self._terminated, self._truncated = terminated, truncated
        self._last_success = bool(res.success)
        info = dict(res.info)
        info.update(
            success=bool(res.success),
            action_is_valid=bool(res.action_is_valid),
            action_is_effective=bool(res.action_is_effective and res.action_is_valid),
        )
        return self._obs, float(res.reward), terminated, truncated, info

    def render(self) -> str | None:
        return self._obs if self.render_mode == "ansi" else None

    # -- helpers for subclasses and callers -------------------------------------------------
    @property
    def done(self) -> bool:
        """True once the episode has terminated or been truncated."""
        return self._terminated or self._truncated

    @property
    def rng(self) -> np.random.Generator:
        return self.np_random

    def _invalid_step(self):
        info = {"success": self._last_success, "action_is_valid": False, "action_is_effective": False}
        return self._obs, 0.0, self._terminated, self._truncated, info

    # -- to implement --------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _step(self, action: str) -> StepResult:
        raise NotImplementedError

    def expert(self) -> ExpertMove:
        """The expert's next move from the current state."""
        raise NotImplementedError
