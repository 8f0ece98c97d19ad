"""Data types that rollouts produce and the trainer and diagnostics consume."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Turn:
    """One LLM turn of a trajectory."""

    prompt_text: str
    """The chat-templated context up to and including the generation prompt and ``<think>``."""
    response_text: str
    """The stored (rebuilt) response, starting with ``<think>`` (docs/method.md §2.4)."""
    think: str
    """The reasoning text between the think tags ("" if the response did not parse)."""
    actions: list[str]
    """Parsed actions kept for this turn."""
    valid: bool
    """Whether the turn had at least one valid action."""
    env_reward: float
    """Sum of the environment rewards of the actions executed this turn."""
    prompt_ids: list[int] = field(default_factory=list)
    """X of this turn: token ids of the context up to and including ``<think>`` (MI diagnostics)."""
    reasoning_ids: list[int] = field(default_factory=list)
    """Z of this turn: token ids of the reasoning content, both tags removed (empty if unparsed)."""


@dataclass
class Trajectory:
    """One episode, rendered as one token sequence for training (docs/method.md §2.6)."""

    group: int
    """Index of the prompt group (env seed) in the batch."""
    env_seed: int
    """Seed the environment was reset with (shared by the whole group)."""
    turns: list[Turn]
    input_ids: list[int]
    """The whole conversation as one token sequence."""
    loss_mask: list[int]
    """1 on assistant tokens (trained), 0 elsewhere; same length as ``input_ids``."""
    reasoning_mask: list[int]
    """1 on assistant tokens inside <think>...</think> (for a reasoning-only entropy bonus)."""
    score: float
    """Trajectory score = sum of env rewards + format penalties (written on the last token)."""
    success: bool
    num_actions: int
    first_prompt_ids: list[int]
    """X of the first turn: the prompt up to and including ``<think>`` (MI diagnostics)."""
    first_reasoning_ids: list[int]
    """Z of the first turn: the reasoning content, both tags removed (empty if unparsed)."""
    response_length: int = 0
    """Trained (assistant) tokens over all turns."""
    info: dict = field(default_factory=dict)
    behaviour_logprobs: list[float] | None = None
    """Per token of ``input_ids``, its log-prob under the distribution it was sampled from (0 on tokens no trained
    position needs), when the sequence is exactly what was sampled: every turn's generation prompt is a prefix of
    it, followed by the sampled tokens and their stop token, and every trained token is one of those or the
    prompt's last token (:func:`ragen2.rollout.sequence.behaviour_scores`). None otherwise (a warning line shown to
    the model, a dropped turn, a reply cut at ``max_new_tokens``, a backend that records no log-probs): the
    trainer then recomputes them."""
    behaviour_entropies: list[float] | None = None
    """The full-vocabulary entropy of those distributions, aligned with ``behaviour_logprobs``."""
    behaviour_temperature: float | None = None
    """The sampling temperature of ``behaviour_logprobs``."""


@dataclass
class RolloutBatch:
    """``env_groups x group_size`` trajectories, group-contiguous (rows g*K .. g*K+K-1 = group g)."""

    trajectories: list[Trajectory]
    env_groups: int
    group_size: int

    @property
    def scores(self) -> np.ndarray:
        """Trajectory scores, shape (env_groups, group_size)."""
        return np.array([t.score for t in self.trajectories], dtype=np.float64).reshape(
            self.env_groups, self.group_size)

    @property
    def successes(self) -> np.ndarray:
        """Success flags as floats, shape (env_groups, group_size)."""
        return np.array([float(t.success) for t in self.trajectories], dtype=np.float64).reshape(
            self.env_groups, self.group_size)

    @property
    def response_lengths(self) -> np.ndarray:
        """Trained tokens per trajectory as floats, shape (env_groups, group_size)."""
        return np.array([t.response_length for t in self.trajectories], dtype=np.float64).reshape(
            self.env_groups, self.group_size)

    def group_rows(self, groups) -> list[int]:
        """Row indices of the given groups."""
        k = self.group_size
        return [g * k + i for g in groups for i in range(k)]

    def append_groups(self, other: RolloutBatch, groups: Sequence[int]) -> RolloutBatch:
        """A new batch: this batch's groups, then ``groups`` of ``other`` renumbered after them."""
        if other.group_size != self.group_size:
            raise ValueError(f"group_size {other.group_size} of the appended batch != {self.group_size}")
        added = [dataclasses.replace(t, group=self.env_groups + i)
                 for i, g in enumerate(groups) for t in (other.trajectories[r] for r in other.group_rows([g]))]
        return RolloutBatch(self.trajectories + added, self.env_groups + len(groups), self.group_size)

    def __len__(self) -> int:
        return len(self.trajectories)
