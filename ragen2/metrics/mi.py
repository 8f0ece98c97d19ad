"""Mutual-information proxies of reasoning collapse (docs/method.md §5.5) and an EMA monitor over training.

Setting: M reasoning samples ``z_i`` (rows) and N prompts ``x_j`` (columns); row i was generated
from its true column ``c(i)``. Given the cross log-probabilities ``L_sum[i, j] = log p(z_i | x_j)``
(summed over z_i's tokens, :func:`ragen2.metrics.cross_logprobs`) and the per-token matrix
``L = L_sum / |z_i|``:

- ``matched_i = L[i, c(i)]`` estimates ``log p(z_i | x)`` at the true input;
- ``marginal_i = logsumexp_j L[i, j] - log N`` estimates ``log p(z_i)`` with the batch's prompts
  as a uniform mixture (for the per-token matrix: a mixture of length-normalised scores);
- ``I(X; Z) ~ mean(matched - marginal)``, ``H(Z | X) ~ -mean(matched)``, ``H(Z) ~ -mean(marginal)``.

Read together they place a policy in one of four regimes on (H(Z|X), I(X;Z)): diverse reasoning
(high, high), **template collapse** (high entropy, low MI: reasoning looks varied but ignores the
input), compressed reasoning (low, high) and low-entropy collapse (low, low). The MI estimate is
bounded by ``log N``; small negative values mean "about 0 within noise".

Retrieval asks the same question as a classifier: does ``argmax_j L[i, j]`` point back at the
prompt z_i came from? Columns with the same *key* (e.g. identical prompt token ids) count as the
same answer, and the chance level accounts for them.

>>> import numpy as np
>>> logp = np.log(np.array([[0.9, 0.1], [0.2, 0.8]]))
>>> m = mi_proxies(logp, lengths=np.ones(2), prompt_index=np.array([0, 1]))
>>> round(m["retrieval_accuracy"], 3), round(m["mi_upper_bound"], 3)
(1.0, 0.693)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

TOP_KS = (2, 4, 8)
"""The k of the reported top-k retrieval accuracies (k_eff = min(k, 8, N))."""


@dataclass(frozen=True)
class MIRows:
    """Per-row vectors behind :func:`mi_proxies` (``return_rows=True``)."""

    matched: np.ndarray
    """[M] per-token ``L[i, c(i)]``."""
    marginal: np.ndarray
    """[M] per-token ``logsumexp_j L[i, j] - log N``."""
    matched_seq: np.ndarray
    """[M] the same from ``L_sum``."""
    marginal_seq: np.ndarray
    """[M] the same from ``L_sum``."""
    prompt_class: np.ndarray | None = None
    """[M] which distinct prompt (key) each row came from: rows of one prompt are not independent
    samples, so :func:`gap_stderr` treats them as one cluster. None = every row its own."""


def gap_stderr(rows: MIRows) -> float:
    """Standard error of ``mean_i(matched_i - marginal_i)`` (per token), clustered by prompt.

    A batch draws a few prompts and several reasonings from each, so most of the estimate's noise is
    which prompts were drawn; the cluster-robust (CR1) error counts it, a plain ``std / sqrt(M)`` does
    not. With fewer than 2 prompts it falls back to rows as clusters; with fewer than 2 rows it is 0.
    """
    gap = np.asarray(rows.matched, dtype=np.float64) - np.asarray(rows.marginal, dtype=np.float64)
    num_rows = gap.size
    if num_rows < 2:
        return 0.0
    classes = np.arange(num_rows) if rows.prompt_class is None else np.asarray(rows.prompt_class)
    _, cluster = np.unique(classes, return_inverse=True)
    num_clusters = int(cluster.max()) + 1
    if num_clusters < 2:
        cluster, num_clusters = np.arange(num_rows), num_rows
    sums = np.bincount(cluster, weights=gap - gap.mean(), minlength=num_clusters)
    return float(math.sqrt(num_clusters / (num_clusters - 1) * np.sum(sums ** 2)) / num_rows)


def _logmeanexp_rows(mat: np.ndarray) -> np.ndarray:
    """``logsumexp_j mat[i, j] - log N`` row by row (entries may be -inf, never all of a row)."""
    peak = mat.max(axis=1, keepdims=True)
    return (peak + np.log(np.exp(mat - peak).mean(axis=1, keepdims=True)))[:, 0]


def _check_inputs(logp_sum, lengths, prompt_index, prompt_keys):
    logp = np.asarray(logp_sum, dtype=np.float64)
    if logp.ndim != 2 or logp.shape[0] < 1 or logp.shape[1] < 2:
        raise ValueError(f"logp_sum must be an [M, N] matrix with M >= 1 rows and N >= 2 columns, "
                         f"got shape {logp.shape}")
    num_rows, num_cols = logp.shape
    if np.isnan(logp).any() or np.isposinf(logp).any():
        raise ValueError("logp_sum contains NaN or +inf (log-probabilities must be <= 0 or -inf)")
    lens = np.asarray(lengths, dtype=np.float64)
    if lens.shape != (num_rows,) or not np.all(lens > 0):
        raise ValueError(f"lengths must be {num_rows} positive token counts, got {np.asarray(lengths).tolist()}")
    index = np.asarray(prompt_index)
    if index.shape != (num_rows,) or not np.issubdtype(index.dtype, np.integer) \
            or index.min() < 0 or index.max() >= num_cols:
        raise ValueError(f"prompt_index must be {num_rows} integers in [0, {num_cols}), got {index.tolist()}")
    matched_sum = logp[np.arange(num_rows), index]
    if not np.all(np.isfinite(matched_sum)):
        bad = np.nonzero(~np.isfinite(matched_sum))[0][:5].tolist()
        raise ValueError(f"rows {bad} have log p(z | true prompt) = -inf; a sample must be possible "
                         "under the prompt it came from")
    if prompt_keys is None:
        keys = list(range(num_cols))
    else:
        keys = list(prompt_keys)
        if len(keys) != num_cols:
            raise ValueError(f"prompt_keys has {len(keys)} entries for {num_cols} columns")
    return logp, lens, index.astype(np.int64), keys


def _retrieval(per_token: np.ndarray, index: np.ndarray, keys: Sequence[Hashable]) -> dict[str, float]:
    num_rows, num_cols = per_token.shape
    key_ids = {}
    col_class = np.array([key_ids.setdefault(k, len(key_ids)) for k in keys])  # column -> key class
    true_class = col_class[index]
    # Columns ranked best first; a stable sort breaks ties toward the lower column index.
    ranking = np.argsort(-per_token, axis=1, kind="stable")
    hits = col_class[ranking] == true_class[:, None]  # [M, N]: ranked column shares the true key
    class_size = np.bincount(col_class)
    chance = float(np.mean(class_size[true_class] / num_cols))
    out = {"retrieval_accuracy": float(hits[:, 0].mean()), "retrieval_chance_level": chance}
    for k in TOP_KS:
        k_eff = min(k, min(8, num_cols))
        out[f"retrieval_accuracy@{k}"] = float(hits[:, :k_eff].any(axis=1).mean())
        out[f"retrieval_chance_level@{k}"] = min(1.0, chance * k_eff)
    out["retrieval_above_chance"] = out["retrieval_accuracy"] - chance
    for k in TOP_KS:
        out[f"retrieval_above_chance@{k}"] = out[f"retrieval_accuracy@{k}"] - out[f"retrieval_chance_level@{k}"]
    return out


def mi_proxies(logp_sum: np.ndarray, lengths: np.ndarray, prompt_index: np.ndarray,
               prompt_keys: Sequence[Hashable] | None = None, std_eps: float = 1e-3,
               return_rows: bool = False) -> dict[str, float] | tuple[dict[str, float], MIRows]:
    """The MI / entropy / retrieval proxies of one batch (docs/method.md §5.5).

    Args:
        logp_sum: ``[M, N]`` ``log p(z_i | x_j)`` summed over z_i's tokens. ``-inf`` is allowed off
            the true column (exact toy policies); NaN and +inf are errors.
        lengths: ``[M]`` token counts ``|z_i|`` (> 0); the per-token matrix is ``logp_sum / lengths``.
        prompt_index: ``[M]`` true column ``c(i)`` of each row.
        prompt_keys: ``N`` hashable keys; equal keys mark duplicate prompts, which retrieval treats
            as the same answer (None: all columns distinct). MI, entropies and z-scores do not
            de-duplicate: duplicates count separately in the mixture.
        std_eps: epsilon added to the marginal std in the z-scores.
        return_rows: also return the per-row vectors (:class:`MIRows`).

    Returns:
        A dict with exactly these keys (per-token unless ``seq`` is in the name):
        ``mi_estimate``, ``mi_seq_estimate`` (mean(matched - marginal)); ``mi_upper_bound`` (log N);
        ``conditional_entropy_est``, ``conditional_entropy_seq_est`` (-mean(matched));
        ``reasoning_entropy_est``, ``reasoning_entropy_seq_est`` (-mean(marginal));
        ``matched_log_prob_mean``, ``marginal_log_prob_mean``;
        ``marginal_std``, ``marginal_std_seq`` (population std of marginal_i);
        ``mi_zscore``, ``mi_zscore_seq`` (mean((matched - marginal) / (marginal_std + std_eps)));
        ``retrieval_accuracy`` and ``@2/@4/@8`` (true key among the top ``min(k, 8, N)`` columns
        of the per-token matrix; ties in ranking go to the lower column index),
        ``retrieval_chance_level`` (mean over rows of #columns sharing the true key / N) and
        ``@k`` (``min(1, chance * k_eff)``), ``retrieval_above_chance`` and ``@k``
        (accuracy - chance). With ``return_rows`` a tuple ``(metrics, MIRows)``.
    """
    logp, lens, index, keys = _check_inputs(logp_sum, lengths, prompt_index, prompt_keys)
    if not std_eps >= 0:
        raise ValueError(f"std_eps must be >= 0, got {std_eps!r}")
    rows = np.arange(logp.shape[0])
    per_token = logp / lens[:, None]
    matched, matched_seq = per_token[rows, index], logp[rows, index]
    marginal, marginal_seq = _logmeanexp_rows(per_token), _logmeanexp_rows(logp)

    out: dict[str, float] = {}
    for suffix, m, g in (("", matched, marginal), ("_seq", matched_seq, marginal_seq)):
        gap = float(np.mean(m - g))
        std = float(np.std(g))
        out[f"mi{suffix}_estimate"] = gap
        out[f"conditional_entropy{suffix}_est"] = -float(np.mean(m))
        out[f"reasoning_entropy{suffix}_est"] = -float(np.mean(g))
        out[f"marginal_std{suffix}"] = std
        out[f"mi_zscore{suffix}"] = gap / (std + std_eps)
    out["mi_upper_bound"] = math.log(logp.shape[1])
    out["matched_log_prob_mean"] = float(np.mean(matched))
    out["marginal_log_prob_mean"] = float(np.mean(marginal))
    out.update(_retrieval(per_token, index, keys))
    if return_rows:
        key_ids: dict = {}
        column_class = np.array([key_ids.setdefault(k, len(key_ids)) for k in keys])
        return out, MIRows(matched, marginal, matched_seq, marginal_seq, prompt_class=column_class[index])
    return out


WARN_MIN_PEAK = 0.1
"""Default :attr:`CollapseMonitor.warn_min_peak`. An input-independent policy reads about 0 (a
random-initialised tiny Llama in ``examples/trl_snr_filter.py``: -0.01 to 0.10), while the warm-started
CPU-profile runs start at 0.4-0.9 and peak at 0.9-1.4, far above it."""
WARN_NOISE_SIGMAS = 2.0
"""Default :attr:`CollapseMonitor.warn_noise_sigmas`: about a 2.5 % one-sided chance per comparison."""


class CollapseWarning(UserWarning):
    """The MI z-score EMA fell far below its running peak: the reasoning may be collapsing."""


class CollapseMonitor:
    """EMA of the marginal std across compute steps, one monitor per metric family (docs/method.md §5.5).

    ``marginal_std_ema`` starts at the first value and then follows ``decay * ema + (1 - decay) *
    current``. ``mi_zscore_ema = mean_i[(matched_i - marginal_i) / (ema + std_eps)]``; the
    denominator does not depend on i, so this equals ``mi_estimate / (ema + std_eps)`` and the
    monitor needs only the dict of :func:`mi_proxies`. The smoothed denominator makes the z-score
    comparable across steps: a per-step std that itself shrinks under collapse would hide the drop.

    Alarm: when the per-token ``mi_zscore_ema`` falls below ``(1 - warn_drop) * peak``, where
    ``peak`` is its running maximum, a :class:`CollapseWarning` is issued once; the alarm re-arms
    after the value recovers above that line. Floors keep the estimator's noise from raising it:

    - the peak must have reached ``warn_min_peak``: a policy whose z-score never left the noise
      around 0 (a randomly initialised one) has no MI to lose;
    - when :meth:`update` is given the rows (:class:`MIRows`), each z-score gets a standard error,
      ``se = gap_stderr(rows) / (ema + std_eps)`` (clustered by prompt), and the peak must lie more
      than ``warn_noise_sigmas`` of its own standard errors above 0, and the fall more than
      ``warn_noise_sigmas * hypot(se_peak, se_now)`` below it. A random-initialised tiny Llama's
      z-score reads -0.01 to 0.10 with standard errors of 0.08-0.18 (4 prompts x 4 reasonings).

    The floors only ever suppress an alarm the plain rule would raise. ``collapse_alarm`` (1.0 / 0.0)
    in the returned dict reports the current state.

    Args:
        ema_decay: weight of the old EMA, in [0, 1).
        warn_drop: fraction of the peak whose loss raises the alarm, in (0, 1].
        std_eps: epsilon added to the EMA in the z-score.
        warn_min_peak: the alarm is armed only once the peak reaches this z-score (>= 0; a peak must
            be positive in any case).
        warn_noise_sigmas: how many standard errors the peak must clear 0 by and the fall must
            exceed, when rows are given (>= 0; 0 = off).
    """

    warn_min_peak: float = WARN_MIN_PEAK
    warn_noise_sigmas: float = WARN_NOISE_SIGMAS
    peak_stderr: float = 0.0
    # Class-level defaults: monitors pickled in checkpoints written before these settings existed
    # unpickle without them and use the defaults.

    def __init__(self, ema_decay: float = 0.9, warn_drop: float = 0.5, std_eps: float = 1e-3, *,
                 warn_min_peak: float = WARN_MIN_PEAK, warn_noise_sigmas: float = WARN_NOISE_SIGMAS) -> None:
        if not 0 <= ema_decay < 1:
            raise ValueError(f"ema_decay must be in [0, 1), got {ema_decay!r}")
        if not 0 < warn_drop <= 1:
            raise ValueError(f"warn_drop must be in (0, 1], got {warn_drop!r}")
        if not std_eps >= 0:
            raise ValueError(f"std_eps must be >= 0, got {std_eps!r}")
        for name, value in (("warn_min_peak", warn_min_peak), ("warn_noise_sigmas", warn_noise_sigmas)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        self.ema_decay, self.warn_drop, self.std_eps = ema_decay, warn_drop, std_eps
        self.warn_min_peak, self.warn_noise_sigmas = float(warn_min_peak), float(warn_noise_sigmas)
        self.ema: dict[str, float] = {}
        """Current EMA of ``marginal_std`` (key ``""``) and ``marginal_std_seq`` (key ``"_seq"``)."""
        self.peak = -math.inf
        """Running maximum of the per-token ``mi_zscore_ema``."""
        self.peak_stderr = 0.0
        """Standard error of the peak's z-score (0.0 when its update had no rows)."""
        self.alarm = False
        self.num_updates = 0

    def state_dict(self) -> dict[str, float | bool | int | dict[str, float]]:
        """Plain-Python state for checkpoints (loadable with ``torch.load(weights_only=True)``)."""
        return {"ema_decay": self.ema_decay, "warn_drop": self.warn_drop, "std_eps": self.std_eps,
                "warn_min_peak": self.warn_min_peak, "warn_noise_sigmas": self.warn_noise_sigmas,
                "ema": dict(self.ema), "peak": self.peak, "peak_stderr": self.peak_stderr, "alarm": self.alarm,
                "num_updates": self.num_updates}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output (an older state without the floors gets the defaults)."""
        self.ema_decay, self.warn_drop, self.std_eps = state["ema_decay"], state["warn_drop"], state["std_eps"]
        self.warn_min_peak = float(state.get("warn_min_peak", WARN_MIN_PEAK))
        self.warn_noise_sigmas = float(state.get("warn_noise_sigmas", WARN_NOISE_SIGMAS))
        self.ema, self.peak = dict(state["ema"]), float(state["peak"])
        self.peak_stderr = float(state.get("peak_stderr", 0.0))
        self.alarm, self.num_updates = bool(state["alarm"]), int(state["num_updates"])

    def zscore_stderr(self, rows: MIRows) -> float:
        """Standard error of the current per-token ``mi_zscore_ema``: :func:`gap_stderr` over the EMA."""
        return gap_stderr(rows) / (self.ema[""] + self.std_eps)

    def _alarming(self, zscore: float, stderr: float) -> bool:
        """Whether ``zscore`` (standard error ``stderr``) is in alarm territory given the peak (the rule above)."""
        sigmas = self.warn_noise_sigmas
        return (self.peak > 0 and self.peak >= self.warn_min_peak and self.peak > sigmas * self.peak_stderr
                and zscore < (1 - self.warn_drop) * self.peak
                and self.peak - zscore > sigmas * math.hypot(self.peak_stderr, stderr))

    def update(self, metrics: dict[str, float], rows: MIRows | None = None) -> dict[str, float]:
        """``metrics`` (from :func:`mi_proxies`) plus ``marginal_std_ema``, ``marginal_std_ema_seq``,
        ``mi_zscore_ema``, ``mi_zscore_ema_seq``, ``mi_zscore_ema_peak`` and ``collapse_alarm``.

        ``rows``: the same batch's :class:`MIRows` (``mi_proxies(..., return_rows=True)``); they give the
        noise floor of the alarm. Without them only ``warn_drop`` and ``warn_min_peak`` apply."""
        out = dict(metrics)
        for suffix in ("", "_seq"):
            current = float(metrics[f"marginal_std{suffix}"])
            previous = self.ema.get(suffix)
            ema = current if previous is None else self.ema_decay * previous + (1 - self.ema_decay) * current
            self.ema[suffix] = ema
            out[f"marginal_std_ema{suffix}"] = ema
            out[f"mi_zscore_ema{suffix}"] = float(metrics[f"mi{suffix}_estimate"]) / (ema + self.std_eps)
        self.num_updates += 1
        zscore = out["mi_zscore_ema"]
        stderr = self.zscore_stderr(rows) if rows is not None else 0.0
        if zscore > self.peak:
            self.peak, self.peak_stderr = zscore, stderr
        below = self._alarming(zscore, stderr)
        if below and not self.alarm:
            warnings.warn(f"MI z-score EMA {zscore:.3f} is more than {self.warn_drop:.0%} below its peak "
                          f"{self.peak:.3f} (update {self.num_updates}): possible template collapse",
                          CollapseWarning, stacklevel=2)
        self.alarm = below
        out["mi_zscore_ema_peak"] = self.peak
        out["collapse_alarm"] = float(below)
        return out
