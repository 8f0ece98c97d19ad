"""SNR-aware rollout filtering (docs/method.md §4): score prompt groups, keep the informative ones.

A group of ``K`` rollouts whose rewards do not vary has zero group-normalised advantage: no task gradient, only
regulariser pull and noise. The filter scores each group by the Bessel std of its rewards (the paper's reward
variance, RV), keeps the high-signal ones (:func:`select_groups`) and says how to scale the loss (:func:`loss_scales`);
:func:`apply_filter` does it all and logs ``filter/...`` metrics (§4.9).

Variants beyond the paper's path, reached by their option names (at the end of the module; none is used by the
paper's experiments, they are kept for ablations and the TRL plug-in):

- ``strategy="top_k_abs"``: keep the ``int(value)`` best groups (a count, not a fraction);
- ``strategy="min_p"``: keep groups scoring at least ``value * max(s)`` (``largest``), or at most
  ``min(s) / value`` (``smallest``), with ``value`` in (0, 1];
- ``filter_type="smallest"``: rank low scores first (every strategy);
- ``metric``: ``reward`` (group mean), ``reward_sum``, ``success_std`` (Bessel std of the 0/1 success flags: ranks
  groups by their *task* spread, so a group whose rollouts all fail scores 0 whatever its format penalties),
  ``length`` (mean response tokens) instead of the reward std;
- ``loss_scaling="sqrt_keep_rate"``: the whole loss times ``sqrt(rho)`` instead of ``rho``;
- ``loss_scaling="keep_rate_task"``: only the policy-gradient term times ``rho`` (the reference implementation's
  optional advantage scaling). Where the dropped groups carry no task gradient (GRPO, DAPO, Dr. GRPO: their
  advantages are 0), this gives a filtered step the task-to-regulariser gradient ratio of an unfiltered one: it
  undoes the lever the filter exists for (docs/method.md §4.8). Kept to show that, not to be used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ragen2.checks import at_least, between, one_of, validate

VARIANT_STRATEGIES = ("top_k_abs", "min_p")
STRATEGIES = ("top_p", "top_k", *VARIANT_STRATEGIES, "none")
TOP_P_MODES = ("linear", "softmax")
FILTER_TYPES = ("largest", "smallest")
METRICS = ("reward_std", "reward", "reward_sum", "success_std", "length")
LOSS_SCALINGS = ("none", "keep_rate", "sqrt_keep_rate", "keep_rate_task")
MIN_P_TOL = 1e-10  # slack of the min_p comparisons
ZERO_SCORE_TOL = 1e-10  # a group score with |s| <= this counts as zero (include_zero)
STD_ZERO_TOL = 1e-9  # a group std below this is float noise (the std of [0.1, 0.1, 0.1]) and is set to 0


@dataclass(frozen=True)
class FilterConfig:
    strategy: str = "top_p"
    """``top_p`` | ``top_k`` (a fraction of the groups) | ``none`` (keep all) | variants ``top_k_abs``, ``min_p``."""
    value: float = 1.0
    """Top-p's p or Top-k's fraction, in (0, 1] (top_p 1.0 with include_zero = no filtering)."""
    top_p_mode: str = "linear"
    """``linear`` (share of the score mass) | ``softmax`` (scores as logits)."""
    filter_type: str = "largest"
    """``largest`` keeps high scores (variant: ``smallest``)."""
    include_zero: bool = True
    """Keep zero-score groups as candidates."""
    selection_eps: float = 0.01
    """epsilon of the linear Top-p threshold ``p * sum(s) - eps``."""
    metric: str = "reward_std"
    """Group score: ``reward_std`` (Bessel std of the trajectory scores) or a variant's."""
    loss_scaling: str = "none"
    """The mini-batch rule of a filtered step, at keep rate rho = kept / all groups. ``keep_rate``, **the paper's
    mini-batch rule** (its text): the mini-batch shrinks by rho, so every step makes as many optimiser updates as an
    unfiltered one, and the whole loss is scaled by rho (:func:`loss_scales`). ``none``, **the reference code's
    rule**: a fixed mini-batch and no scaling, so a step that keeps rho of the rows makes about rho times the
    updates. A variant (``sqrt_keep_rate``, ``keep_rate_task``) shrinks the mini-batch as ``keep_rate`` does and
    scales as its name says (:func:`ragen2.trainer.update_data.mini_batch_rows`)."""
    regularize_kept_only: bool = True
    """KL and entropy on kept groups only, as the paper (``False``: dropped rows get those terms, an ablation)."""

    def __post_init__(self) -> None:
        rule = _variant_value_rule(self.strategy) if self.strategy in VARIANT_STRATEGIES else between(0, 1, open_low=True)
        validate("filter", self, [
            ("strategy", *one_of(STRATEGIES)), ("top_p_mode", *one_of(TOP_P_MODES)), ("filter_type", *one_of(FILTER_TYPES)),
            ("metric", *one_of(METRICS)), ("loss_scaling", *one_of(LOSS_SCALINGS)), ("selection_eps", *at_least(0)),
            ("value", rule[0], f"{rule[1]} for strategy {self.strategy!r}")])

    @property
    def is_noop(self) -> bool:
        """True when every group is always kept (``none``, or top_p 1 with ``include_zero``): the one rule."""
        return self.strategy == "none" or (self.strategy == "top_p" and self.value >= 1 and self.include_zero)


def as_matrix(values, name: str) -> np.ndarray:
    """``values`` as a finite, non-empty ``[groups, group_size]`` float64 matrix."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a non-empty [groups, group_size] matrix with no non-finite values, "
                         f"got shape {arr.shape}: {arr.ravel()[:8].tolist()}")
    return arr


def group_std(values: np.ndarray) -> np.ndarray:
    """Bessel-corrected std of each row of a ``[G, K]`` matrix, float noise (< 1e-9) set to 0."""
    arr = as_matrix(values, "values")
    if arr.shape[1] < 2:
        raise ValueError(f"a group std needs group_size >= 2, got group_size {arr.shape[1]}")
    std = arr.std(axis=1, ddof=1)
    return np.where(std < STD_ZERO_TOL, 0.0, std)


def group_scores(values: np.ndarray, metric: str = "reward_std", successes: np.ndarray | None = None) -> np.ndarray:
    """``[G]`` scores from ``[G, K]`` trajectory scores: their Bessel std (``reward_std``) or a variant's metric."""
    return group_std(values) if metric == "reward_std" else _variant_group_scores(values, metric, successes)


def ranked(candidates: np.ndarray, scores: np.ndarray, largest: bool = True) -> np.ndarray:
    """Candidates ordered best first; ties go to the lower group index (a stable sort)."""
    return candidates[np.argsort(-scores[candidates] if largest else scores[candidates], kind="stable")]


def _top_p_linear(candidates: np.ndarray, s: np.ndarray, p: float, eps: float, largest: bool) -> list[int]:
    threshold, walked, mass = p * float(s[candidates].sum()) - eps, [], 0.0  # walk the ranking to the mass
    for g in ranked(candidates, s, largest):
        if mass >= threshold or s[g] <= 0:
            break
        walked.append(int(g))
        mass += float(s[g])
    return walked if mass >= threshold else []


def _top_p_softmax(candidates: np.ndarray, s: np.ndarray, p: float, largest: bool) -> list[int]:
    logits = s[candidates] if largest else -s[candidates]
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    order = np.argsort(-probs, kind="stable")
    reached = np.nonzero(np.cumsum(probs[order]) >= p)[0]
    k = min(int(reached[0]) + 1 if reached.size else len(candidates), len(candidates))
    return candidates[order[:k]].tolist()


def select_groups(group_scores: np.ndarray, cfg: FilterConfig) -> np.ndarray:
    """Indices of the groups to keep, sorted ascending (docs/method.md §4.3). With ``s`` the ``G`` scores:

    0. ``include_zero=False`` drops groups with ``|s_g| <= 1e-10``; the rest are the *candidates*.
    1. ``top_p``: ``p >= 1`` keeps every candidate. ``linear``: walk the candidates by descending score, adding
       scores until the sum reaches ``tau = p * sum(s) - selection_eps``, stopping at the first score <= 0;
       keep the walked groups if the sum reached ``tau``, else **none** (all-zero scores skip the step).
       ``softmax``: rank by ``pi = softmax(s)``; keep the first ``1 + (first index with cumsum(pi) >= p)``.
    2. ``top_k``: the ``int(value * G)`` best, clipped to ``[1, candidates]``. 3. ``none``: every group. Ties: lower index.

    >>> select_groups(np.array([4.0, 3.0, 2.0, 1.0]), FilterConfig(value=0.6)).tolist()
    [0, 1]
    """
    s = np.asarray(group_scores, dtype=np.float64)
    if s.ndim != 1 or not np.all(np.isfinite(s)):
        raise ValueError(f"group_scores must be one-dimensional and finite, got {s.tolist()}")
    candidates = np.arange(len(s), dtype=np.int64)
    if cfg.strategy == "none":
        return candidates
    if not cfg.include_zero:
        candidates = candidates[np.abs(s) > ZERO_SCORE_TOL]
    if candidates.size == 0:
        return np.zeros(0, dtype=np.int64)
    largest = cfg.filter_type == "largest"
    if cfg.strategy == "top_p" and cfg.value >= 1:
        kept = candidates.tolist()
    elif cfg.strategy == "top_p":
        kept = (_top_p_linear(candidates, s, cfg.value, cfg.selection_eps, largest) if cfg.top_p_mode == "linear"
                else _top_p_softmax(candidates, s, cfg.value, largest))
    elif cfg.strategy == "top_k":
        kept = ranked(candidates, s, largest)[:min(max(int(cfg.value * len(s)), 1), candidates.size)].tolist()
    else:
        kept = _variant_select(candidates, s, cfg)
    return np.array(sorted(kept), dtype=np.int64)


def loss_scales(kept: int, total: int, cfg: FilterConfig) -> tuple[float, float]:
    """``(task, regulariser)``: the multipliers of a filtered step's policy-gradient term and of its KL and entropy
    terms, at keep rate ``rho = kept / total`` (docs/method.md §4.8).

    ``none``: ``(1, 1)``. ``keep_rate``: ``(rho, rho)``, the whole loss. The loss is a mean over the kept rows, so a
    kept row weighs ``1 / (rho N_all)``; ``rho`` restores ``1 / N_all`` for every term: a filtered step moves about
    as far as an unfiltered one, and keeps the filter's higher task-to-regulariser ratio (the dropped groups carried
    regulariser gradient and little task gradient). Scaling the task term alone would undo that ratio (the variant
    ``keep_rate_task``)."""
    if total <= 0 or not 0 <= kept <= total:
        raise ValueError(f"need 0 <= kept <= total and total > 0, got kept={kept}, total={total}")
    rho = kept / total
    if cfg.loss_scaling == "none":
        return 1.0, 1.0
    if cfg.loss_scaling == "keep_rate":
        return float(rho), float(rho)
    return _variant_loss_scales(rho, cfg.loss_scaling)


@dataclass
class FilterOutcome:
    """One step's decision: ``kept`` (sorted group indices, int64, maybe empty), the ``filter/...`` ``metrics``
    (docs/method.md §4.9), the ``[G]`` ``group_scores`` selected on and every group's Bessel ``reward_std``."""

    kept: np.ndarray
    metrics: dict[str, float]
    group_scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    reward_std: np.ndarray = field(default_factory=lambda: np.zeros(0))


def apply_filter(scores: np.ndarray, cfg: FilterConfig, successes: np.ndarray | None = None,
                 lengths: np.ndarray | None = None) -> FilterOutcome:
    """Score the groups of ``[G, K]`` trajectory scores, select them, compute the step's log metrics.

    ``successes`` (``[G, K]`` 0/1) refine the drop reasons and add the task-signal counts
    ``filter/zero_task_spread_count`` (groups whose rollouts all fail or all succeed: no task signal, though a shaped
    reward such as a format penalty may still spread) and ``filter/all_fail_count``; ``lengths`` (``[G, K]`` tokens)
    feed the ``length`` variant.
    """
    rewards = as_matrix(scores, "scores")
    if rewards.shape[1] < 2:
        raise ValueError(f"filtering needs group_size >= 2, got scores of shape {rewards.shape}")
    flags = None if successes is None else _same_shape(successes, rewards, "successes")
    per_group = (group_std(rewards) if cfg.metric == "reward_std"
                 else _variant_metric_scores(rewards, cfg.metric, flags, lengths))
    kept = select_groups(per_group, cfg)
    reward_std = group_std(rewards)
    dropped = np.setdiff1d(np.arange(rewards.shape[0]), kept)
    if flags is not None:
        all_success, all_fail = (flags[dropped] > 0.5).all(axis=1), (flags[dropped] <= 0.5).all(axis=1)
    else:  # without flags, a constant dropped group succeeded when its common reward is > 0
        flat = reward_std[dropped] == 0
        all_success, all_fail = flat & (rewards[dropped, 0] > 0), flat & (rewards[dropped, 0] <= 0)
    mass, n = float(reward_std.sum()), rewards.shape[0]
    metrics = {
        "filter/total_groups": float(n), "filter/kept_count": float(len(kept)), "filter/kept_ratio": len(kept) / n,
        "filter/empty": float(len(kept) == 0), "filter/dropped_count": float(len(dropped)),
        "filter/dropped_all_success": float(all_success.sum()), "filter/dropped_all_fail": float(all_fail.sum()),
        "filter/dropped_low_variance": float(len(dropped) - all_success.sum() - all_fail.sum()),
        "filter/zero_score_count": float(np.sum(np.abs(per_group) <= ZERO_SCORE_TOL)),
        "filter/zero_variance_count": float(np.sum(reward_std == 0)),
        "filter/variance_mass_kept": float(reward_std[kept].sum()) / mass if mass > 0 else math.nan,
        "filter/reward_std_mean": float(reward_std.mean()),
        "filter/kept_reward_std_mean": float(reward_std[kept].mean()) if len(kept) else math.nan,
        "filter/reward_mean": float(rewards.mean())}
    if flags is not None:  # task signal: a group whose rollouts all fail (or all succeed) has none, whatever its
        # shaped-reward spread (a format penalty alone gives a non-zero std that GRPO scales to full advantages)
        fails, wins = (flags <= 0.5).all(axis=1), (flags > 0.5).all(axis=1)
        metrics["filter/zero_task_spread_count"] = float((fails | wins).sum())
        metrics["filter/all_fail_count"] = float(fails.sum())
    metrics["filter/loss_scale"], metrics["filter/reg_scale"] = loss_scales(len(kept), n, cfg)
    return FilterOutcome(kept=kept, metrics=metrics, group_scores=per_group, reward_std=reward_std)


# ---------------------------------------------------------------------------------------------
# Variants beyond the paper's path
# ---------------------------------------------------------------------------------------------
def _variant_value_rule(strategy: str):
    """``(predicate, what is allowed)`` for ``FilterConfig.value`` under a variant strategy."""
    if strategy == "top_k_abs":
        return (lambda v: v >= 1), ">= 1 (a number of groups)"
    return (lambda v: 0 < v <= 1), "in (0, 1]"


def _same_shape(values, like: np.ndarray, name: str) -> np.ndarray:
    """``values`` as a matrix of the shape of ``like`` (the rewards)."""
    arr = as_matrix(values, name)
    if arr.shape != like.shape:
        raise ValueError(f"{name} shape {arr.shape} != scores shape {like.shape}")
    return arr


def _variant_group_scores(values: np.ndarray, metric: str, successes: np.ndarray | None = None) -> np.ndarray:
    """``[G]`` scores of a variant metric from ``[G, K]`` values (rewards, or token counts for ``length``)."""
    if metric == "success_std":
        if successes is None:
            raise ValueError("metric 'success_std' needs the success flags (successes=None was given)")
        return group_std(successes)
    arr = as_matrix(values, "values")
    if metric in ("reward", "length"):
        return arr.mean(axis=1)
    if metric == "reward_sum":
        return arr.sum(axis=1)
    raise ValueError(f"unknown group metric {metric!r}; known: {', '.join(METRICS)}")


def _variant_metric_scores(rewards: np.ndarray, metric: str, successes: np.ndarray | None,
                           lengths: np.ndarray | None) -> np.ndarray:
    """The per-group scores :func:`apply_filter` selects on for a variant metric."""
    if metric != "length":
        return _variant_group_scores(rewards, metric, successes)
    if lengths is None:
        raise ValueError("metric 'length' needs the response lengths (lengths=None was given)")
    return _variant_group_scores(_same_shape(lengths, rewards, "lengths"), "length")


def _variant_select(candidates: np.ndarray, s: np.ndarray, cfg) -> list[int]:
    """Kept group indices (unsorted) for the variant strategies ``top_k_abs`` and ``min_p``."""
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


def _variant_loss_scales(rho: float, loss_scaling: str) -> tuple[float, float]:
    """``(policy-gradient, KL and entropy)`` multipliers of a variant ``loss_scaling`` at keep rate ``rho``."""
    if loss_scaling == "sqrt_keep_rate":
        return float(math.sqrt(rho)), float(math.sqrt(rho))
    if loss_scaling == "keep_rate_task":
        return float(rho), 1.0
    raise ValueError(f"unknown loss_scaling {loss_scaling!r}")
