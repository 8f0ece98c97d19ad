"""Filter variants beyond the paper's path, reached through :mod:`ragen2.filter` by their option names.

- ``strategy="top_k_abs"``: keep the ``int(value)`` best groups (a count, not a fraction);
- ``strategy="min_p"``: keep groups scoring at least ``value * max(s)`` (``largest``), or at most
  ``min(s) / value`` (``smallest``), with ``value`` in (0, 1];
- ``filter_type="smallest"``: rank low scores first (every strategy);
- ``metric``: ``reward`` (group mean), ``reward_sum``, ``success_std`` (Bessel std of the 0/1 success flags),
  ``length`` (mean response tokens) instead of the reward std;
- ``loss_scaling="sqrt_keep_rate"``: the whole loss times ``sqrt(rho)`` instead of ``rho``;
- ``loss_scaling="keep_rate_task"``: only the policy-gradient term times ``rho`` (the reference implementation's
  optional advantage scaling). Where the dropped groups carry no task gradient (GRPO, DAPO, Dr. GRPO: their
  advantages are 0), this gives a filtered step the task-to-regulariser gradient ratio of an unfiltered one: it
  undoes the lever the filter exists for (docs/method.md §4.8). Kept to show that, not to be used.

None of them is used by the paper's experiments; they are kept for ablations and for the TRL plug-in.
"""

from __future__ import annotations

import math

import numpy as np

STRATEGIES = ("top_k_abs", "min_p")
FILTER_TYPES = ("smallest",)
METRICS = ("reward", "reward_sum", "success_std", "length")
LOSS_SCALINGS = ("sqrt_keep_rate", "keep_rate_task")
MIN_P_TOL = 1e-10
"""Slack of the min_p comparisons."""


def value_rule(strategy: str):
    """``(predicate, what is allowed)`` for ``FilterConfig.value`` under a variant strategy."""
    if strategy == "top_k_abs":
        return (lambda v: v >= 1), ">= 1 (a number of groups)"
    return (lambda v: 0 < v <= 1), "in (0, 1]"


def same_shape(values, like: np.ndarray, name: str) -> np.ndarray:
    """``values`` as a matrix of the shape of ``like`` (the rewards)."""
    from ragen2.filter import as_matrix

    arr = as_matrix(values, name)
    if arr.shape != like.shape:
        raise ValueError(f"{name} shape {arr.shape} != scores shape {like.shape}")
    return arr


def group_scores(values: np.ndarray, metric: str, successes: np.ndarray | None = None) -> np.ndarray:
    """``[G]`` scores of a variant metric from ``[G, K]`` values (rewards, or token counts for ``length``)."""
    from ragen2.filter import as_matrix, group_std

    if metric == "success_std":
        if successes is None:
            raise ValueError("metric 'success_std' needs the success flags (successes=None was given)")
        return group_std(successes)
    arr = as_matrix(values, "values")
    if metric in ("reward", "length"):
        return arr.mean(axis=1)
    if metric == "reward_sum":
        return arr.sum(axis=1)
    raise ValueError(f"unknown group metric {metric!r}; known: reward_std, {', '.join(METRICS)}")


def metric_scores(rewards: np.ndarray, metric: str, successes: np.ndarray | None,
                  lengths: np.ndarray | None) -> np.ndarray:
    """The per-group scores :func:`ragen2.filter.apply_filter` selects on for a variant metric."""
    if metric != "length":
        return group_scores(rewards, metric, successes)
    if lengths is None:
        raise ValueError("metric 'length' needs the response lengths (lengths=None was given)")
    return group_scores(same_shape(lengths, rewards, "lengths"), "length")


def select_groups(candidates: np.ndarray, s: np.ndarray, cfg) -> list[int]:
    """Kept group indices (unsorted) for the variant strategies ``top_k_abs`` and ``min_p``."""
    from ragen2.filter import ranked

    largest = cfg.filter_type == "largest"
    if cfg.strategy == "top_k_abs":
        return ranked(candidates, s, largest)[:min(max(int(cfg.value), 1), candidates.size)].tolist()
    if cfg.strategy == "min_p":
        cs = s[candidates]
        if largest:
            mask = cs >= cfg.value * cs.max() - MIN_P_TOL
        else:
            mask = cs <= cs.min() / (cfg.value + MIN_P_TOL) + MIN_P_TOL
        return candidates[mask].tolist()
    raise ValueError(f"unknown filter strategy {cfg.strategy!r}")


def loss_scales(rho: float, loss_scaling: str) -> tuple[float, float]:
    """``(policy-gradient, KL and entropy)`` multipliers of a variant ``loss_scaling`` at keep rate ``rho``."""
    if loss_scaling == "sqrt_keep_rate":
        return float(math.sqrt(rho)), float(math.sqrt(rho))
    if loss_scaling == "keep_rate_task":
        return float(rho), 1.0
    raise ValueError(f"unknown loss_scaling {loss_scaling!r}")
