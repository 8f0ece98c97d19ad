"""SNR-aware rollout filtering (spec section 4): score prompt groups, keep the informative ones.

A training step rolls out ``G`` prompt groups of ``K`` trajectories each. A group whose rewards do
not vary (every rollout succeeded, or every one failed) has zero group-normalised advantage: it adds
no policy-gradient signal, only regulariser pull and noise. The filter scores each group (by default
the Bessel-corrected reward std, the paper's "reward variance", RV) and keeps the high-signal ones.

Three steps, each a plain function:

1. :func:`group_scores` turns a ``[G, K]`` score matrix into one score per group.
2. :func:`select_groups` picks group indices from those scores with exactly the reference
   ``_select_top_groups`` rules (spec 4.3; the rules are repeated in its docstring).
3. :func:`apply_filter` does both and computes the per-step log metrics; :func:`keep_rate_scale`
   gives the policy-gradient loss multiplier of ``FilterConfig.loss_scaling``.

Log metrics returned by :func:`apply_filter` (all per step, over the ``G`` groups *before*
filtering unless the name says ``kept``). ``sigma_g`` is the Bessel std of group g's rewards:

==================================  ===============================================================
``filter/total_groups``             G
``filter/kept_count``               groups kept
``filter/kept_ratio``               kept / G
``filter/empty``                    1.0 if no group was kept (the step does no update), else 0.0
``filter/dropped_count``            G - kept
``filter/dropped_all_success``      dropped groups in which every rollout succeeded (see below)
``filter/dropped_all_fail``         dropped groups in which every rollout failed (see below)
``filter/dropped_low_variance``     the remaining dropped groups (mixed outcomes, score too low)
``filter/zero_score_count``         groups with ``|score| <= 1e-10`` (the spec's
                                    ``rollout/filter_zero_count``; score = the filter metric)
``filter/zero_variance_count``      groups with ``sigma_g == 0``
``filter/variance_mass_kept``       sum of sigma_g over kept groups / sum over all groups
                                    (NaN when every sigma_g is 0: there is no mass to keep)
``filter/reward_std_mean``          mean of sigma_g over all groups (the spec's
                                    ``rollout/in_group_reward_std``, used by the RV-collapse stop)
``filter/kept_reward_std_mean``     mean of sigma_g over kept groups (NaN when none is kept)
``filter/reward_mean``              mean reward over all G x K trajectories
``filter/loss_scale``               :func:`keep_rate_scale` of this step
==================================  ===============================================================

Drop reasons partition the dropped groups. With success flags, a dropped group is *all success*
when every flag is 1, *all fail* when every flag is 0, otherwise *low variance*. Without flags,
a dropped group with ``sigma_g == 0`` is *all success* when its common reward is > 0 and *all
fail* when it is <= 0; every other dropped group is *low variance*.

>>> cfg = FilterConfig(strategy="top_p", value=0.9, include_zero=False)
>>> rewards = np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
>>> out = apply_filter(rewards, cfg)
>>> out.kept.tolist(), out.metrics["filter/dropped_all_success"]
([0, 2], 1.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

STRATEGIES = ("top_p", "top_k", "top_k_abs", "min_p", "none")
TOP_P_MODES = ("linear", "softmax")
FILTER_TYPES = ("largest", "smallest")
METRICS = ("reward_std", "reward", "reward_sum", "success_std", "length")
LOSS_SCALINGS = ("keep_rate", "sqrt_keep_rate", "none")

ZERO_SCORE_TOL = 1e-10
"""A group score with ``|s| <= ZERO_SCORE_TOL`` counts as zero (``include_zero``, min_p slack)."""
STD_ZERO_TOL = 1e-9
"""A group std below this is float noise (e.g. the std of [0.1, 0.1, 0.1]) and is set to exactly 0."""


@dataclass(frozen=True)
class FilterConfig:
    strategy: str = "top_p"
    """``top_p`` | ``top_k`` (fraction of groups) | ``top_k_abs`` (count) | ``min_p`` | ``none``
    (keep every group; a convenience equal to top_p 1.0 with include_zero)."""
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
    """``keep_rate`` (paper text: minibatch shrinks with the keep rate, loss rescaled) |
    ``sqrt_keep_rate`` | ``none``. See :func:`keep_rate_scale`."""
    regularize_kept_only: bool = True
    """Apply the KL and entropy terms only to kept groups (default: the reference's and the paper's
    filter, which removes dropped groups from the update entirely). ``False`` keeps the dropped groups'
    rows in the update for the KL and entropy terms only (an ablation: the CPU probe found that this
    regularisation of dropped groups changes the outcome)."""

    def __post_init__(self) -> None:
        def check(name: str, value: str, allowed: tuple[str, ...]) -> None:
            if value not in allowed:
                raise ValueError(f"FilterConfig.{name}={value!r} is not one of {allowed}")

        check("strategy", self.strategy, STRATEGIES)
        check("top_p_mode", self.top_p_mode, TOP_P_MODES)
        check("filter_type", self.filter_type, FILTER_TYPES)
        check("metric", self.metric, METRICS)
        check("loss_scaling", self.loss_scaling, LOSS_SCALINGS)
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)) \
                or not math.isfinite(self.value):
            raise ValueError(f"FilterConfig.value={self.value!r} must be a finite number")
        if self.strategy != "none" and self.value <= 0:
            raise ValueError(f"FilterConfig.value={self.value!r} must be > 0 for strategy {self.strategy!r}")
        if self.strategy == "min_p" and self.value > 1:
            raise ValueError(f"FilterConfig.value={self.value!r} must be in (0, 1] for strategy 'min_p'")
        if self.strategy == "top_k_abs" and self.value < 1:
            raise ValueError(f"FilterConfig.value={self.value!r} must be >= 1 for strategy 'top_k_abs' "
                             "(a number of groups)")
        if not math.isfinite(self.selection_eps) or self.selection_eps < 0:
            raise ValueError(f"FilterConfig.selection_eps={self.selection_eps!r} must be >= 0")

    @property
    def is_noop(self) -> bool:
        """True when every group is always kept (``none``, or top_p >= 1 with ``include_zero``)."""
        return self.strategy == "none" or (
            self.strategy == "top_p" and self.value >= 1 and self.include_zero)


# ---------------------------------------------------------------------------------------------
# 1. Group scores
# ---------------------------------------------------------------------------------------------
def _as_matrix(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty [groups, group_size] matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values: {arr[~np.isfinite(arr)][:5].tolist()}")
    return arr


def group_std(values: np.ndarray) -> np.ndarray:
    """Bessel-corrected std of each row of a ``[G, K]`` matrix, float noise (< 1e-9) set to 0."""
    arr = _as_matrix(values, "values")
    if arr.shape[1] < 2:
        raise ValueError(f"a group std needs group_size >= 2, got group_size {arr.shape[1]}")
    std = arr.std(axis=1, ddof=1)
    std[std < STD_ZERO_TOL] = 0.0
    return std


def group_scores(values: np.ndarray, metric: str = "reward_std", successes: np.ndarray | None = None
                 ) -> np.ndarray:
    """One score per prompt group (spec 4.2).

    Args:
        values: ``[G, K]`` per-trajectory values: rewards (trajectory scores, format penalties
            included) for the reward metrics, response token counts for ``length``.
        metric: ``reward_std`` (Bessel std), ``reward`` (mean), ``reward_sum``, ``success_std``
            (Bessel std of the 0/1 success flags in ``successes``) or ``length`` (mean).
        successes: ``[G, K]`` success flags; required by ``success_std``, ignored otherwise.

    Returns:
        ``[G]`` float64 scores. Stds below :data:`STD_ZERO_TOL` are exactly 0.
    """
    if metric == "reward_std":
        return group_std(values)
    if metric == "success_std":
        if successes is None:
            raise ValueError("metric 'success_std' needs the success flags (successes=None was given)")
        return group_std(successes)
    arr = _as_matrix(values, "values")
    if metric in ("reward", "length"):
        return arr.mean(axis=1)
    if metric == "reward_sum":
        return arr.sum(axis=1)
    raise ValueError(f"unknown group metric {metric!r}; known: {METRICS}")


# ---------------------------------------------------------------------------------------------
# 2. Group selection
# ---------------------------------------------------------------------------------------------
def _ranked(candidates: np.ndarray, scores: np.ndarray, largest: bool) -> np.ndarray:
    """Candidates ordered best first; ties go to the lower group index (a stable sort)."""
    keys = -scores[candidates] if largest else scores[candidates]
    return candidates[np.argsort(keys, kind="stable")]


def _top_p_linear(candidates: np.ndarray, s: np.ndarray, p: float, eps: float, largest: bool) -> list[int]:
    threshold = p * float(s[candidates].sum()) - eps
    walked: list[int] = []
    mass = 0.0
    for g in _ranked(candidates, s, largest):
        if mass >= threshold or s[g] <= 0:
            break
        walked.append(int(g))
        mass += float(s[g])
    return walked if mass >= threshold else []


def _top_p_softmax(candidates: np.ndarray, s: np.ndarray, p: float, largest: bool) -> list[int]:
    logits = s[candidates] if largest else -s[candidates]
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")
    reached = np.nonzero(np.cumsum(probs[order]) >= p)[0]
    k = min(int(reached[0]) + 1 if reached.size else len(candidates), len(candidates))
    return candidates[order[:k]].tolist()


def select_groups(group_scores: np.ndarray, cfg: FilterConfig) -> np.ndarray:
    """Indices of the groups to keep, sorted ascending (spec 4.3, the reference ``_select_top_groups``).

    With ``s`` the scores of all ``G`` groups:

    0. ``include_zero=False`` first drops groups with ``|s_g| <= 1e-10``; if none remain, nothing is
       kept. The rest are the *candidates*; sums, maxima and softmaxes below run over them.
    1. ``top_p`` (p = value). ``p >= 1`` keeps every candidate. Otherwise:

       - ``linear``: rank candidates (descending; ascending for ``smallest``), threshold
         ``tau = p * sum(s) - selection_eps``. Walk the ranking adding scores until the running sum
         reaches ``tau``, stopping early at the first score <= 0. Keep the walked groups if the sum
         reached ``tau``, else keep **none**. So zero scores are never picked, and ``tau <= 0``
         (e.g. all-zero scores) keeps nothing: the step is skipped.
       - ``softmax``: ``pi = softmax(s)`` (``softmax(-s)`` for ``smallest``) ranked descending;
         keep the first ``k = 1 + (first index with cumsum(pi) >= p)`` groups, capped at the
         number of candidates (at least one is kept).
    2. ``top_k``: ``k = int(value * G)`` with ``G`` counted *before* step 0, clipped to
       ``[1, candidates]``; keep the k best. ``top_k_abs``: the same with ``k = int(value)``.
    3. ``min_p``: ``largest`` keeps ``s_g >= value * max(s) - 1e-10``; ``smallest`` keeps
       ``s_g <= min(s) / (value + 1e-10) + 1e-10``.
    4. ``none``: keep every group.

    Ranking ties go to the lower group index.

    Args:
        group_scores: ``[G]`` scores from :func:`group_scores`.
        cfg: the filter configuration.

    Returns:
        Sorted ``int64`` array of kept group indices (possibly empty).

    >>> select_groups(np.array([4.0, 3.0, 2.0, 1.0]), FilterConfig(value=0.6)).tolist()
    [0, 1]
    """
    s = np.asarray(group_scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"group_scores must be one-dimensional, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"group_scores contains non-finite values: {s.tolist()}")
    num_groups = len(s)
    if cfg.strategy == "none":
        return np.arange(num_groups, dtype=np.int64)
    candidates = np.arange(num_groups, dtype=np.int64)
    if not cfg.include_zero:
        candidates = candidates[np.abs(s) > ZERO_SCORE_TOL]
    if candidates.size == 0:
        return np.zeros(0, dtype=np.int64)
    largest = cfg.filter_type == "largest"

    if cfg.strategy == "top_p":
        if cfg.value >= 1:
            kept = candidates.tolist()
        elif cfg.top_p_mode == "linear":
            kept = _top_p_linear(candidates, s, cfg.value, cfg.selection_eps, largest)
        else:
            kept = _top_p_softmax(candidates, s, cfg.value, largest)
    elif cfg.strategy in ("top_k", "top_k_abs"):
        k = int(cfg.value * num_groups) if cfg.strategy == "top_k" else int(cfg.value)
        k = min(max(k, 1), candidates.size)
        kept = _ranked(candidates, s, largest)[:k].tolist()
    else:  # min_p
        cs = s[candidates]
        if largest:
            mask = cs >= cfg.value * cs.max() - ZERO_SCORE_TOL
        else:
            mask = cs <= cs.min() / (cfg.value + ZERO_SCORE_TOL) + ZERO_SCORE_TOL
        kept = candidates[mask].tolist()
    return np.array(sorted(kept), dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# 3. Loss scaling and the whole filter step
# ---------------------------------------------------------------------------------------------
def keep_rate_scale(kept: int, total: int, cfg: FilterConfig) -> float:
    """The multiplier of the policy-gradient loss term for ``cfg.loss_scaling``.

    What it is: with keep rate ``rho = kept / total`` (groups; all groups have the same size),
    ``keep_rate`` returns ``rho``, ``sqrt_keep_rate`` returns ``sqrt(rho)``, ``none`` returns 1.0.
    Multiply the policy-gradient term by it, not the KL or entropy terms (spec 4.8, where veRL
    applies the same factor to the advantages; ``keep_rate`` = its ``linear``).

    Why ``rho``: the loss is a mean over the rows (tokens) of the batch it is computed on. After
    filtering that batch is the kept rows only, so each kept row's weight grows from ``1 / N_all``
    to ``1 / N_kept`` = ``1 / (rho N_all)``. Multiplying by ``rho`` restores ``1 / N_all``: a kept
    sample moves the policy exactly as much as it would have in the unfiltered batch (where the
    dropped zero-variance groups contributed zero advantage anyway), so the filter changes *which*
    samples drive the step but not the step size, and runs with different keep rates stay
    comparable. (Exact for token-mean with equal lengths; otherwise the token ratio differs
    slightly from the group ratio.)

    Args:
        kept: number of groups kept.
        total: number of groups before filtering (> 0).
        cfg: the filter configuration.

    Returns:
        The scale factor in ``[0, 1]``; 0.0 when nothing is kept (the step is skipped anyway).
    """
    if total <= 0:
        raise ValueError(f"total groups must be > 0, got {total}")
    if not 0 <= kept <= total:
        raise ValueError(f"kept groups must be in [0, {total}], got {kept}")
    rho = kept / total
    if cfg.loss_scaling == "keep_rate":
        return float(rho)
    if cfg.loss_scaling == "sqrt_keep_rate":
        return float(math.sqrt(rho))
    return 1.0


@dataclass
class FilterOutcome:
    """What :func:`apply_filter` decided for one step."""

    kept: np.ndarray
    """Sorted indices of the kept groups (int64, possibly empty)."""
    metrics: dict[str, float]
    """The ``filter/...`` log metrics (module docstring)."""
    group_scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """``[G]`` scores the selection used (the configured metric)."""
    reward_std: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """``[G]`` Bessel reward std of every group (attached to kept rows for gradient analysis)."""

    def kept_rows(self, group_size: int) -> np.ndarray:
        """Row indices of the kept groups in a group-contiguous batch (rows g*K .. g*K+K-1)."""
        return (self.kept[:, None] * group_size + np.arange(group_size)[None, :]).reshape(-1)


def _drop_reasons(dropped: np.ndarray, rewards: np.ndarray, reward_std: np.ndarray,
                  successes: np.ndarray | None) -> tuple[int, int, int]:
    """(all success, all fail, low variance) counts among the dropped groups (module docstring)."""
    if successes is not None:
        flags = successes[dropped] > 0.5
        all_success = flags.all(axis=1)
        all_fail = (~flags).all(axis=1)
    else:
        flat = reward_std[dropped] == 0
        common = rewards[dropped, 0]
        all_success = flat & (common > 0)
        all_fail = flat & (common <= 0)
    n_success, n_fail = int(all_success.sum()), int(all_fail.sum())
    return n_success, n_fail, len(dropped) - n_success - n_fail


def apply_filter(scores: np.ndarray, cfg: FilterConfig, successes: np.ndarray | None = None,
                 lengths: np.ndarray | None = None) -> FilterOutcome:
    """Score the groups, select them and compute the step's log metrics.

    Args:
        scores: ``[G, K]`` trajectory scores (rewards incl. format penalties), group-contiguous.
        cfg: the filter configuration.
        successes: optional ``[G, K]`` 0/1 success flags (needed by ``success_std``; refine the
            drop reasons when given).
        lengths: ``[G, K]`` response token counts; required by the ``length`` metric.

    Returns:
        A :class:`FilterOutcome`.
    """
    rewards = _as_matrix(scores, "scores")
    if rewards.shape[1] < 2:
        raise ValueError(f"filtering needs group_size >= 2, got scores of shape {rewards.shape}")
    flags = None
    if successes is not None:
        flags = _as_matrix(successes, "successes")
        if flags.shape != rewards.shape:
            raise ValueError(f"successes shape {flags.shape} != scores shape {rewards.shape}")
    if cfg.metric == "length":
        if lengths is None:
            raise ValueError("metric 'length' needs the response lengths (lengths=None was given)")
        metric_values = _as_matrix(lengths, "lengths")
        if metric_values.shape != rewards.shape:
            raise ValueError(f"lengths shape {metric_values.shape} != scores shape {rewards.shape}")
    else:
        metric_values = rewards
    per_group = group_scores(metric_values, cfg.metric, successes=flags)
    kept = select_groups(per_group, cfg)

    num_groups = rewards.shape[0]
    reward_std = group_std(rewards)
    dropped = np.setdiff1d(np.arange(num_groups), kept)
    n_success, n_fail, n_low = _drop_reasons(dropped, rewards, reward_std, flags)
    mass = float(reward_std.sum())
    metrics = {
        "filter/total_groups": float(num_groups),
        "filter/kept_count": float(len(kept)),
        "filter/kept_ratio": len(kept) / num_groups,
        "filter/empty": float(len(kept) == 0),
        "filter/dropped_count": float(len(dropped)),
        "filter/dropped_all_success": float(n_success),
        "filter/dropped_all_fail": float(n_fail),
        "filter/dropped_low_variance": float(n_low),
        "filter/zero_score_count": float(np.sum(np.abs(per_group) <= ZERO_SCORE_TOL)),
        "filter/zero_variance_count": float(np.sum(reward_std == 0)),
        "filter/variance_mass_kept": float(reward_std[kept].sum()) / mass if mass > 0 else math.nan,
        "filter/reward_std_mean": float(reward_std.mean()),
        "filter/kept_reward_std_mean": float(reward_std[kept].mean()) if len(kept) else math.nan,
        "filter/reward_mean": float(rewards.mean()),
        "filter/loss_scale": keep_rate_scale(len(kept), num_groups, cfg),
    }
    return FilterOutcome(kept=kept, metrics=metrics, group_scores=per_group, reward_std=reward_std)
