"""Algorithm presets (docs/method.md §6.3): named option bundles, no subclasses.

| algo      | advantages                    | critic | loss_agg_mode             | group filter          |
| --------- | ----------------------------- | ------ | ------------------------- | --------------------- |
| ``ppo``   | GAE (gamma, lam), whitened    | yes    | ``token-mean``            | -                     |
| ``grpo``  | group-normalised (std)        | no     | ``seq-mean-token-mean``   | -                     |
| ``dapo``  | group-normalised (std)        | no     | ``token-mean``            | non-zero reward var.  |
| ``dr_grpo`` | group-centred (no std)      | no     | ``seq-mean-token-sum-norm`` | -                   |

The clip range comes from ``TrainerConfig.clip_low/clip_high`` (default 0.2 / 0.28, DAPO's decoupled
clip, also the reference's base default) and the KL from ``kl_coef`` (default 0) for every preset.

DAPO follows the published recipe rather than the reference repository (whose "DAPO" equals its
PPO preset): group-relative advantages, decoupled clip, a token-level loss, and *dynamic sampling*,
which trains only on groups whose scores are not all equal and draws fresh groups to replace the
others (:mod:`ragen2.trainer.dynamic_sampling`: at most ``trainer.max_refill_rounds`` extra rollouts
a step, each of the groups still missing; a batch still short after them trains on fewer groups, and
one with no varied group skips the update, like an empty filter result). DAPO's overlong reward
shaping is not implemented.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragen2.trainer.losses import AGG_MODES


@dataclass(frozen=True)
class AlgoPreset:
    name: str
    estimator: str
    """``gae`` (critic) | ``grpo`` (group outcome advantages)."""
    norm_by_std: bool
    """GRPO family: divide by the group std."""
    loss_agg_mode: str
    """The preset's aggregation mode (used when ``trainer.loss_agg_mode = preset``)."""
    dynamic_sampling: bool
    """Drop groups whose scores are all equal (DAPO)."""

    @property
    def uses_critic(self) -> bool:
        return self.estimator == "gae"


PRESETS: dict[str, AlgoPreset] = {
    "ppo": AlgoPreset("ppo", "gae", False, "token-mean", False),
    "grpo": AlgoPreset("grpo", "grpo", True, "seq-mean-token-mean", False),
    "dapo": AlgoPreset("dapo", "grpo", True, "token-mean", True),
    "dr_grpo": AlgoPreset("dr_grpo", "grpo", False, "seq-mean-token-sum-norm", False),
}


def get_preset(algo: str) -> AlgoPreset:
    """The preset named ``algo`` (``trainer.algo``)."""
    if algo not in PRESETS:
        raise ValueError(f"unknown trainer.algo {algo!r}; known: {sorted(PRESETS)}")
    return PRESETS[algo]


def resolve_agg_mode(algo: str, loss_agg_mode: str) -> str:
    """``trainer.loss_agg_mode``, with ``preset`` replaced by the algorithm's own mode."""
    if loss_agg_mode == "preset":
        return get_preset(algo).loss_agg_mode
    if loss_agg_mode not in AGG_MODES:
        raise ValueError(f"unknown trainer.loss_agg_mode {loss_agg_mode!r}; known: preset, {list(AGG_MODES)}")
    return loss_agg_mode


DYNAMIC_SAMPLING_EPS = 1e-10
"""A group is 'constant' when max - min of its scores is at most this."""


def dynamic_sampling_keep(scores) -> list[int]:
    """DAPO's group filter: indices of the groups (rows of ``scores [G, K]``) with non-constant scores."""
    scores = np.asarray(scores, dtype=np.float64)
    spread = scores.max(axis=1) - scores.min(axis=1)
    return [int(g) for g in np.flatnonzero(spread > DYNAMIC_SAMPLING_EPS)]
