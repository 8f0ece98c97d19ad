"""SNR-aware rollout filtering (spec section 4). TODO(helper): select_groups and metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FilterConfig:
    strategy: str = "top_p"
    """``top_p`` | ``top_k`` (fraction of groups) | ``top_k_abs`` (count) | ``min_p``."""
    value: float = 1.0
    """The strategy's parameter (top_p 1.0 with include_zero = no filtering)."""
    top_p_mode: str = "linear"
    """``linear`` (score mass) | ``softmax`` (scores as logits)."""
    filter_type: str = "largest"
    """``largest`` keeps high scores, ``smallest`` low ones."""
    include_zero: bool = True
    """Keep zero-score groups as candidates."""
    selection_eps: float = 0.01
    """epsilon of the linear top-p threshold p*sum(s) - eps."""
    metric: str = "reward_std"
    """Group score: ``reward_std`` (Bessel-corrected std of trajectory scores) | ``reward`` |
    ``reward_sum`` | ``success_std`` | ``length``."""
    loss_scaling: str = "keep_rate"
    """``keep_rate`` (paper text: minibatch shrinks with the keep rate, loss rescaled) | ``none``."""
    regularize_kept_only: bool = False
    """Apply the KL and entropy terms only to kept groups."""
