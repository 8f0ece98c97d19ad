"""Pre-flight filter audit: sample a few groups with the untrained policy and ask whether filtering helps.

Before committing GPUs to a run, roll out ``K`` trajectories for each of ``N`` prompts (env seeds) at
the training temperature and look at the groups the filter would see on step 1:

- **Zero-variance share.** A group whose rewards do not vary (reward std ``RV = 0``) has zero
  group-normalised advantage and gives no policy-gradient signal. The share is split with the
  success flags into *all succeeded*, *all failed* and *other* (same reward, mixed success flags).
- **RV distribution.** The Bessel group reward std of every group (``ragen2.filter.group_scores``),
  summarised by quantiles, mean, std and a histogram with its own row for RV = 0.
- **Dispersion** ``D = Std(RV) / Mean(RV)`` over the ``N`` groups (population std, ``ddof=0``; NaN
  when every RV is 0). It predicts how much filtering changes the batch. When most groups have RV 0,
  or the non-zero RVs are spread out, ``D`` is large and top-p keeps a small, very different subset
  (with a share ``z`` of zero groups and the rest equal, ``D = sqrt(z / (1 - z))``: 0.33 at
  ``z = 0.1``, 1 at ``z = 0.5``). When all RVs are similar, ``D`` is near 0 and top-p ``p`` keeps about
  a share ``p`` of the groups: filtering then mostly shrinks the batch without changing what it holds.
- **Keep ratios** that each top-p value would give in ``linear`` and ``softmax`` mode, with and without
  ``include_zero``, and top-k 0.25 / 0.5 for comparison, all through ``ragen2.filter.select_groups``.
  With ``step_groups`` (the training ``env_groups``) the groups are also cut into consecutive
  training-sized batches, giving the mean per-step keep ratio and the share of steps that would be
  empty (linear top-p skips a step whose RVs are all 0).
- **A suggested filter setting** from :func:`suggest_filter`, a documented heuristic (not a result of
  the paper): read its rationale, then decide.

:func:`audit_from_scores` does everything after sampling (pure, unit-testable); :func:`audit` samples
with :func:`ragen2.rollout.collect.collect_rollouts` first.

Caveats. The zero-variance share depends on ``K``: a prompt solved with probability ``q`` gives an
all-failed group with probability ``(1 - q)^K``, so audit with the training ``group_size``. With ``N``
prompts every share is an estimate with a standard error of about ``sqrt(s (1 - s) / N)``. The
audit describes the *initial* policy only: RVs move during training (the paper's point is that they
often collapse), so it says whether filtering matters at the start, not over the whole run.

>>> report = audit_from_scores(np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]),
...                            np.array([[1, 0, 1, 0], [1, 1, 1, 1]]))
>>> report.zero_variance["all_success"], report.zero_variance["share"]
(1, 0.5)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragen2.fileio import json_ready
from ragen2.filter import METRICS, FilterConfig, group_scores, select_groups
from ragen2.markdown import to_markdown as _table_markdown

logger = logging.getLogger(__name__)

DEFAULT_TOP_P_VALUES = (1.0, 0.98, 0.95, 0.9, 0.8, 0.6, 0.4)
"""The top-p values of the paper's top-p sweep (docs/preregistrations.md §7.2)."""
DEFAULT_TOP_K_VALUES = (0.25, 0.5)
"""Top-k fractions shown for comparison."""
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
"""RV quantiles in the report (min and max are always added)."""

# Thresholds of the suggestion rule (see :func:`suggest_filter`). Heuristic choices, not paper values.
LOW_ZERO_SHARE = 0.1
"""At most this share of zero-variance groups counts as "almost every group carries signal"."""
LOW_DISPERSION = 0.25
"""A dispersion ``Std(RV) / Mean(RV)`` at most this counts as "the RVs are alike"."""
FEW_KEPT_GROUPS = 2
"""Warn when the suggested setting keeps fewer groups than this per training step."""


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FilterSuggestion:
    """A suggested filter setting and why (the output of :func:`suggest_filter`)."""

    rule: str
    """Which branch of the rule fired: ``no_signal`` | ``uniform`` | ``drop_zero_only`` | ``spread``."""
    strategy: str
    value: float
    top_p_mode: str
    include_zero: bool
    expected_kept_ratio: float
    """Keep ratio of this setting on the audited groups."""
    rationale: str
    """One paragraph: the numbers that decided and what the setting does with them."""
    warnings: tuple[str, ...] = ()

    def filter_config(self, base: FilterConfig | None = None) -> FilterConfig:
        """``base`` (default :class:`FilterConfig`) with this strategy, value, mode, include_zero and the
        ``reward_std`` metric."""
        return dataclasses.replace(base or FilterConfig(), strategy=self.strategy, value=self.value,
                                   top_p_mode=self.top_p_mode, include_zero=self.include_zero, metric="reward_std")

    @property
    def label(self) -> str:
        """A short human-readable form, e.g. ``top_p 0.9 (linear, include_zero=False)``."""
        return f"{self.strategy} {self.value:g} ({self.top_p_mode}, include_zero={self.include_zero})"


@dataclass
class AuditReport:
    """Everything the audit measured; :meth:`to_markdown` prints it, :meth:`to_dict` saves it."""

    groups: pd.DataFrame
    """One row per group: ``group``, ``seed``, ``reward_mean``, ``reward_std`` (RV), ``success_rate``,
    ``score`` (the filter metric's group score) and ``kind`` (``all_success`` | ``all_fail`` |
    ``other_zero_variance`` | ``varied``)."""
    zero_variance: dict[str, Any]
    """``count``, ``share``, ``all_success``, ``all_fail``, ``other`` (counts) and their ``*_share``."""
    rv_summary: dict[str, float]
    """``mean``, ``std``, ``min``, ``q10`` .. ``q90``, ``max``, ``dispersion``, ``mean_nonzero``,
    ``dispersion_nonzero`` (the last two over groups with RV > 0; NaN when there are none)."""
    histogram: pd.DataFrame
    """``bin`` label, ``rv_low``, ``rv_high``, ``count``, ``share``; the first row is RV = 0 exactly."""
    keep_ratios: pd.DataFrame
    """One row per setting: ``strategy``, ``value``, ``mode`` (top-p only; missing for top-k),
    ``include_zero``, ``kept_groups``, ``kept_ratio``, ``rv_mass_kept`` and, with ``step_groups``,
    ``step_kept_ratio`` and ``step_empty_share``."""
    suggestion: FilterSuggestion
    meta: dict[str, Any] = field(default_factory=dict)
    """Settings of the audit (prompts, samples, metric, and from :func:`audit` env, policy, seed, ...)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN becomes ``None``)."""
        out = {
            "meta": self.meta,
            "zero_variance": self.zero_variance,
            "rv_summary": self.rv_summary,
            "histogram": self.histogram.to_dict(orient="records"),
            "keep_ratios": self.keep_ratios.to_dict(orient="records"),
            "suggestion": dataclasses.asdict(self.suggestion),
            "groups": self.groups.to_dict(orient="records"),
        }
        return json_ready(out)

    def to_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` to ``path`` (strict JSON, indented); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return path

    def to_markdown(self) -> str:
        """The report as markdown: setting, zero-variance split, RV distribution, keep ratios, suggestion."""
        m, zv, rv = self.meta, self.zero_variance, self.rv_summary
        where = ", ".join(f"{k}={m[k]}" for k in ("env", "env_kwargs", "policy", "temperature", "seed")
                          if k in m)
        lines = ["# Pre-flight filter audit", "",
                 f"{m['num_prompts']} prompts x {m['samples_per_prompt']} samples, filter metric "
                 f"`{m['metric']}`" + (f"; {where}" if where else "") + ".", "",
                 "## Zero-variance groups", ""]
        zv_table = pd.DataFrame({
            "kind": ["all succeeded", "all failed", "other (same reward, mixed success)", "total"],
            "groups": [zv["all_success"], zv["all_fail"], zv["other"], zv["count"]],
            "share": [zv["all_success_share"], zv["all_fail_share"], zv["other_share"], zv["share"]]})
        lines += [_table_markdown(zv_table), "## Reward-std (RV) distribution", ""]
        summary = pd.DataFrame([{k: rv[k] for k in ("mean", "std", "min", *_quantile_keys(), "max")}])
        lines += [_table_markdown(summary),
                  f"Dispersion Std(RV)/Mean(RV) = {_fmt(rv['dispersion'])} over all groups, "
                  f"{_fmt(rv['dispersion_nonzero'])} over groups with RV > 0. Large: filtering changes the "
                  "batch a lot; near 0: top-p keeps about a share p of the groups.", "",
                  _table_markdown(self.histogram[["bin", "count", "share"]]),
                  "## Keep ratio per filter setting", "", _keep_table_markdown(self.keep_ratios)]
        if "step_kept_ratio" in self.keep_ratios:
            lines += [f"Mean keep ratio per training step ({m['step_groups']} groups per step, "
                      f"{m['num_steps']} step(s) audited):", "",
                      _keep_table_markdown(self.keep_ratios, column="step_kept_ratio")]
            if (self.keep_ratios.step_empty_share > 0).any():
                lines += ["Share of those steps that would keep no group (the step is skipped):", "",
                          _keep_table_markdown(self.keep_ratios, column="step_empty_share")]
        s = self.suggestion
        lines += ["## Suggested filter (heuristic)", "", f"**{s.label}**, expected keep ratio "
                  f"{_fmt(s.expected_kept_ratio)} (rule `{s.rule}`).", "", s.rationale, ""]
        lines += [f"- Warning: {w}" for w in s.warnings]
        return "\n".join(lines).rstrip() + "\n"


def _fmt(value: float) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3g}"


def _quantile_keys() -> list[str]:
    return [f"q{round(q * 100):02d}" for q in QUANTILES]


def _keep_table_markdown(keep: pd.DataFrame, column: str = "kept_ratio") -> str:
    """``column`` of the top-p rows as value x (mode, include_zero), then the top-k rows."""
    def wide(rows: pd.DataFrame, key: str, modes: tuple[str | None, ...]) -> pd.DataFrame:
        table = pd.DataFrame({key: sorted(rows.value.unique(), reverse=True)})
        for mode in modes:
            for include_zero in (True, False):
                sel = rows[rows.include_zero == include_zero]
                if mode is not None:
                    sel = sel[sel["mode"] == mode]
                name = (f"{mode}, " if mode else "") + ("keep zero" if include_zero else "drop zero")
                table[name] = table[key].map(sel.set_index("value")[column])
        return table

    text = _table_markdown(wide(keep[keep.strategy == "top_p"], "top_p", ("linear", "softmax")))
    top_k = keep[keep.strategy == "top_k"]
    if len(top_k):
        text += "\n" + _table_markdown(wide(top_k, "top_k", (None,)))
    return text


# ---------------------------------------------------------------------------------------------
# The analysis (pure)
# ---------------------------------------------------------------------------------------------
def _check_inputs(scores, successes, lengths, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    rewards = np.asarray(scores, dtype=np.float64)
    if rewards.ndim != 2 or rewards.shape[0] < 1 or rewards.shape[1] < 2:
        raise ValueError(f"scores must be a [prompts, samples] matrix with samples >= 2, got shape {rewards.shape}")
    if not np.all(np.isfinite(rewards)):
        raise ValueError(f"scores contains non-finite values: {rewards[~np.isfinite(rewards)][:5].tolist()}")
    flags = np.asarray(successes, dtype=np.float64)
    if flags.shape != rewards.shape:
        raise ValueError(f"successes shape {flags.shape} != scores shape {rewards.shape}")
    if not np.all((flags == 0) | (flags == 1)):
        raise ValueError(f"successes must be 0/1 flags, got values {np.unique(flags)[:5].tolist()}")
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not one of {METRICS}")
    lens = None
    if metric == "length":
        if lengths is None:
            raise ValueError("metric 'length' needs the response lengths (lengths=None was given)")
        lens = np.asarray(lengths, dtype=np.float64)
        if lens.shape != rewards.shape:
            raise ValueError(f"lengths shape {lens.shape} != scores shape {rewards.shape}")
    return rewards, flags, lens


def _group_kinds(rv: np.ndarray, flags: np.ndarray) -> np.ndarray:
    kinds = np.full(len(rv), "varied", dtype=object)
    zero = rv == 0
    all_success = (flags == 1).all(axis=1)
    all_fail = (flags == 0).all(axis=1)
    kinds[zero & all_success] = "all_success"
    kinds[zero & all_fail] = "all_fail"
    kinds[zero & ~all_success & ~all_fail] = "other_zero_variance"
    return kinds


def _dispersion(values: np.ndarray) -> float:
    if values.size == 0 or values.mean() == 0:
        return math.nan
    return float(values.std(ddof=0) / values.mean())


def _rv_summary(rv: np.ndarray) -> dict[str, float]:
    nonzero = rv[rv > 0]
    out = {"mean": float(rv.mean()), "std": float(rv.std(ddof=0)), "min": float(rv.min())}
    out.update({k: float(np.quantile(rv, q)) for k, q in zip(_quantile_keys(), QUANTILES)})
    out.update({"max": float(rv.max()), "dispersion": _dispersion(rv),
                "mean_nonzero": float(nonzero.mean()) if nonzero.size else math.nan,
                "dispersion_nonzero": _dispersion(nonzero)})
    return out


def _histogram(rv: np.ndarray, num_bins: int) -> pd.DataFrame:
    """A row for RV = 0, then ``num_bins`` equal-width bins over ``(0, max RV]``."""
    rows = [{"bin": "0 (zero variance)", "rv_low": 0.0, "rv_high": 0.0, "count": int(np.sum(rv == 0))}]
    nonzero = rv[rv > 0]
    if nonzero.size:
        counts, edges = np.histogram(nonzero, bins=num_bins, range=(0.0, float(nonzero.max())))
        for i, count in enumerate(counts):
            close = "]" if i == num_bins - 1 else ")"
            rows.append({"bin": f"({edges[i]:.3g}, {edges[i + 1]:.3g}{close}" if i == 0
                         else f"[{edges[i]:.3g}, {edges[i + 1]:.3g}{close}",
                         "rv_low": float(edges[i]), "rv_high": float(edges[i + 1]), "count": int(count)})
    table = pd.DataFrame(rows)
    table["share"] = table["count"] / len(rv)
    return table


def _keep_row(group_score: np.ndarray, rv: np.ndarray, cfg: FilterConfig, step_groups: int | None
              ) -> dict[str, Any]:
    kept = select_groups(group_score, cfg)
    mass = float(rv.sum())
    row = {"strategy": cfg.strategy, "value": float(cfg.value), "mode": cfg.top_p_mode,
           "include_zero": cfg.include_zero, "kept_groups": int(len(kept)),
           "kept_ratio": len(kept) / len(group_score),
           "rv_mass_kept": float(rv[kept].sum()) / mass if mass > 0 else math.nan}
    if step_groups:
        num_steps = len(group_score) // step_groups
        ratios = [len(select_groups(group_score[i * step_groups:(i + 1) * step_groups], cfg)) / step_groups
                  for i in range(num_steps)]
        row["step_kept_ratio"] = float(np.mean(ratios))
        row["step_empty_share"] = float(np.mean([r == 0 for r in ratios]))
    return row


def keep_ratio_table(group_score: np.ndarray, rv: np.ndarray, *,
                     top_p_values: Sequence[float] = DEFAULT_TOP_P_VALUES,
                     top_k_values: Sequence[float] = DEFAULT_TOP_K_VALUES, base: FilterConfig | None = None,
                     step_groups: int | None = None) -> pd.DataFrame:
    """Keep ratios of every top-p value (linear and softmax, include_zero True and False) and top-k value.

    Args:
        group_score: ``[G]`` filter-metric scores the selection ranks.
        rv: ``[G]`` reward stds (for ``rv_mass_kept``, the share of total RV the kept groups hold).
        top_p_values: top-p values to try.
        top_k_values: top-k fractions to try.
        base: Filter settings not varied here (``filter_type``, ``selection_eps``); default
            :class:`FilterConfig`.
        step_groups: Also cut the groups into consecutive batches of this many (the training
            ``env_groups``) and report the mean per-step keep ratio and the share of empty steps.

    Returns:
        The ``keep_ratios`` table of :class:`AuditReport`.
    """
    base = base or FilterConfig()
    if step_groups is not None and not 1 <= step_groups <= len(group_score):
        raise ValueError(f"step_groups={step_groups!r} must be in [1, {len(group_score)}] (the audited groups)")
    rows = []
    for p in top_p_values:
        for mode in ("linear", "softmax"):
            for include_zero in (True, False):
                cfg = dataclasses.replace(base, strategy="top_p", value=float(p), top_p_mode=mode,
                                          include_zero=include_zero)
                rows.append(_keep_row(group_score, rv, cfg, step_groups))
    for k in top_k_values:
        for include_zero in (True, False):
            cfg = dataclasses.replace(base, strategy="top_k", value=float(k), include_zero=include_zero)
            rows.append(_keep_row(group_score, rv, cfg, step_groups) | {"mode": None})
    return pd.DataFrame(rows)


def suggest_filter(zero_share: float, dispersion: float, dispersion_nonzero: float, keep_ratios: pd.DataFrame,
                   num_groups: int, step_groups: int | None = None) -> FilterSuggestion:
    """A suggested filter setting from the audit's numbers. **A heuristic**, not a paper result.

    The rule, with ``z`` the zero-variance share and ``D`` / ``D+`` the dispersion over all groups /
    over the groups with RV > 0:

    1. ``no_signal`` (``z = 1``): no group has any reward variance. No filter can create signal; linear
       top-p would skip every step. Suggest no filter (top_p 1.0, include_zero) and fix the task
       first (difficulty, warm start, temperature).
    2. ``uniform`` (``z <= LOW_ZERO_SHARE`` and ``D <= LOW_DISPERSION``): nearly every group carries a
       similar signal, so top-p would drop groups about as informative as the ones it keeps. Suggest no
       filter (top_p 1.0, include_zero).
    3. ``drop_zero_only`` (``z > LOW_ZERO_SHARE`` and ``D+ <= LOW_DISPERSION``): the groups with signal
       are alike, the rest have none. Suggest top_p 1.0 with include_zero=False, which drops exactly
       the zero-variance groups (the "1.0" point of the paper's top-p sweep).
    4. ``spread`` (otherwise): the RVs are spread out, so ranking by RV separates informative groups
       from weak ones. Suggest top_p 0.9, linear mode, include_zero=False (the setting most of the
       paper's released runs use). Linear rather than softmax because linear top-p is invariant to the
       reward scale, while softmax uses the raw stds as logits (docs/method.md §4.3).

    The suggestion is always a reward-std (RV) filter, and ``keep_ratios`` must hold RV keep ratios.
    The thresholds ``LOW_ZERO_SHARE`` and ``LOW_DISPERSION`` are judgement calls. A warning is added when
    the setting keeps fewer than ``FEW_KEPT_GROUPS`` groups per training step.
    """
    def keep_of(value: float, mode: str, include_zero: bool) -> pd.Series:
        sel = keep_ratios[(keep_ratios.strategy == "top_p") & np.isclose(keep_ratios.value, value)
                          & (keep_ratios["mode"] == mode) & (keep_ratios.include_zero == include_zero)]
        if sel.empty:
            raise ValueError(f"keep_ratios has no top_p {value} {mode} include_zero={include_zero} row")
        return sel.iloc[0]

    pct = f"{zero_share:.0%}"
    if zero_share >= 1:
        rule, value, mode, include_zero = "no_signal", 1.0, "linear", True
        why = (f"Every audited group has zero reward variance ({pct}), so no group gives a policy-gradient "
               "signal and no filter can create one: linear top-p would skip every step, softmax and top-k "
               "would keep groups without signal. With this policy the run would learn only from the KL and "
               "entropy terms whatever the filter, so make the task give mixed outcomes first (easier levels, "
               "a warm start, a higher temperature) and audit again; no filter is suggested only so that "
               "steps are not skipped.")
    elif zero_share <= LOW_ZERO_SHARE and dispersion <= LOW_DISPERSION:
        rule, value, mode, include_zero = "uniform", 1.0, "linear", True
        why = (f"Only {pct} of groups have zero variance and the RVs are alike (dispersion {dispersion:.2f} "
               f"<= {LOW_DISPERSION}). Top-p has little to rank: top_p 0.9 linear keeps "
               f"{_fmt(keep_of(0.9, 'linear', True).kept_ratio)} of the groups, and any group it drops is about "
               "as informative as those it keeps, so filtering mostly shrinks the batch and is unlikely to "
               "help at the start. Re-audit later in training: RVs tend to collapse as the policy sharpens.")
    elif dispersion_nonzero <= LOW_DISPERSION:
        rule, value, mode, include_zero = "drop_zero_only", 1.0, "linear", False
        why = (f"{pct} of groups have zero variance and carry no signal, while the others have similar RVs "
               f"(dispersion among them {dispersion_nonzero:.2f} <= {LOW_DISPERSION}). Dropping exactly the "
               "zero-variance groups (top_p 1.0, include_zero=False) removes the noise-only part of the "
               "batch; ranking the rest would discard groups as informative as the kept ones.")
    else:
        rule, value, mode, include_zero = "spread", 0.9, "linear", False
        why = (f"{pct} of groups have zero variance and the RVs are spread out (dispersion {_fmt(dispersion)} "
               f"over all groups, {_fmt(dispersion_nonzero)} among those with RV > 0, above {LOW_DISPERSION}), so "
               "ranking by RV has weak groups to drop. top_p 0.9 in linear mode keeps the highest-RV groups "
               "until they hold 90% of the total RV, here {kept} of the groups; the larger the dispersion, "
               "the smaller and more different that subset. Linear mode does not depend on the reward scale, "
               "unlike softmax. This is the setting most of the paper's released runs use.")
    row = keep_of(value, mode, include_zero)
    why = why.replace("{kept}", _fmt(float(row.kept_ratio)))
    warnings = []
    per_step = step_groups or num_groups
    kept_per_step = (row.step_kept_ratio if "step_kept_ratio" in row.index else row.kept_ratio) * per_step
    if rule != "no_signal" and kept_per_step < FEW_KEPT_GROUPS:
        warnings.append(f"this setting keeps about {kept_per_step:.1f} of {per_step} groups per step; the "
                        "update rests on very few prompts (more groups per step would help)")
    if "step_empty_share" in row.index and row.step_empty_share > 0 and rule != "no_signal":
        warnings.append(f"{row.step_empty_share:.0%} of audited training-sized steps would keep no group "
                        "and be skipped")
    why += (" This is a heuristic rule (thresholds: zero share "
            f"{LOW_ZERO_SHARE}, dispersion {LOW_DISPERSION}), not a measured result; check it with a short run.")
    return FilterSuggestion(rule=rule, strategy="top_p", value=value, top_p_mode=mode, include_zero=include_zero,
                            expected_kept_ratio=float(row.kept_ratio), rationale=why, warnings=tuple(warnings))


def audit_from_scores(scores, successes, *, env_seeds: Sequence[int] | None = None,
                      top_p_values: Sequence[float] = DEFAULT_TOP_P_VALUES,
                      top_k_values: Sequence[float] = DEFAULT_TOP_K_VALUES, metric: str = "reward_std",
                      lengths=None, base_filter: FilterConfig | None = None, step_groups: int | None = None,
                      num_bins: int = 10, meta: dict[str, Any] | None = None) -> AuditReport:
    """The audit of a sampled ``[G, K]`` table of trajectory scores (everything after sampling).

    Args:
        scores: ``[G, K]`` trajectory scores (rewards incl. format penalties), row g = prompt g.
        successes: ``[G, K]`` 0/1 success flags.
        env_seeds: The env seed of each group (default ``0 .. G-1``).
        top_p_values: top-p values for the keep-ratio table (must include 0.9 and 1.0, which the
            suggestion uses).
        top_k_values: top-k fractions for comparison.
        metric: The filter metric that ranks groups (``ragen2.filter.METRICS``); the RV statistics
            always use the reward std.
        lengths: ``[G, K]`` response token counts, needed by ``metric="length"``.
        base_filter: Filter settings not varied (``filter_type``, ``selection_eps``).
        step_groups: Groups per training step, for the per-step keep ratio and empty-step share.
        num_bins: Histogram bins over ``(0, max RV]``.
        meta: Extra settings recorded in the report.

    Returns:
        An :class:`AuditReport`.
    """
    rewards, flags, lens = _check_inputs(scores, successes, lengths, metric)
    num_groups, group_size = rewards.shape
    seeds = list(range(num_groups)) if env_seeds is None else [int(s) for s in env_seeds]
    if len(seeds) != num_groups:
        raise ValueError(f"env_seeds has {len(seeds)} entries for {num_groups} groups")
    if missing := {0.9, 1.0} - {float(p) for p in top_p_values}:
        raise ValueError(f"top_p_values={tuple(top_p_values)} must include {sorted(missing)} (used by the suggestion)")
    if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 1:
        raise ValueError(f"num_bins={num_bins!r} must be a positive integer")

    rv = group_scores(rewards, "reward_std")
    score = rv if metric == "reward_std" else group_scores(lens if metric == "length" else rewards, metric,
                                                           successes=flags)
    kinds = _group_kinds(rv, flags)
    groups = pd.DataFrame({"group": np.arange(num_groups), "seed": seeds, "reward_mean": rewards.mean(axis=1),
                           "reward_std": rv, "success_rate": flags.mean(axis=1), "score": score, "kind": kinds})
    counts = {kind: int(np.sum(kinds == kind)) for kind in ("all_success", "all_fail", "other_zero_variance")}
    zero_count = sum(counts.values())
    zero_variance = {"count": zero_count, "share": zero_count / num_groups,
                     "all_success": counts["all_success"], "all_fail": counts["all_fail"],
                     "other": counts["other_zero_variance"],
                     "all_success_share": counts["all_success"] / num_groups,
                     "all_fail_share": counts["all_fail"] / num_groups,
                     "other_share": counts["other_zero_variance"] / num_groups}
    rv_summary = _rv_summary(rv)
    keep = keep_ratio_table(score, rv, top_p_values=top_p_values, top_k_values=top_k_values, base=base_filter,
                            step_groups=step_groups)
    # The suggestion is an RV filter whatever metric the table ranks by, so it reads RV keep ratios.
    rv_keep = keep if metric == "reward_std" else keep_ratio_table(
        rv, rv, top_p_values=top_p_values, top_k_values=(), base=base_filter, step_groups=step_groups)
    suggestion = suggest_filter(zero_variance["share"], rv_summary["dispersion"], rv_summary["dispersion_nonzero"],
                                rv_keep, num_groups, step_groups)
    info = {"num_prompts": num_groups, "samples_per_prompt": group_size, "metric": metric}
    if step_groups:
        info.update(step_groups=step_groups, num_steps=num_groups // step_groups)
    info.update(meta or {})
    return AuditReport(groups=groups, zero_variance=zero_variance, rv_summary=rv_summary,
                       histogram=_histogram(rv, num_bins), keep_ratios=keep, suggestion=suggestion, meta=info)


# ---------------------------------------------------------------------------------------------
# Sampling + analysis
# ---------------------------------------------------------------------------------------------
def audit(model, tokenizer, env_cfg, rollout_cfg, *, num_prompts: int, samples_per_prompt: int, seed: int,
          top_p_values: Sequence[float] = DEFAULT_TOP_P_VALUES, metric: str = "reward_std",
          env_seeds: Sequence[int] | None = None, backend=None, base_filter: FilterConfig | None = None,
          meta: dict[str, Any] | None = None) -> AuditReport:
    """Sample ``samples_per_prompt`` rollouts for each of ``num_prompts`` env seeds and audit them.

    Rollouts use :func:`ragen2.rollout.collect.collect_rollouts` at ``rollout_cfg.temperature`` (the
    training temperature), ``rollout_cfg.env_groups`` groups per call (a training step's worth, so
    memory stays that of training). Call ``c`` samples with seed ``seed * 1_000_003 + c``.

    Args:
        model: The policy (eval mode).
        tokenizer: Its tokenizer (left padding).
        env_cfg: :class:`ragen2.config.EnvConfig`.
        rollout_cfg: :class:`ragen2.config.RolloutConfig` (limits, temperature, env_groups, train_seed).
        num_prompts: Groups ``N`` (>= 1).
        samples_per_prompt: Rollouts per group ``K`` (>= 2; use the training ``group_size``).
        seed: Sampling seed; the same seed gives the same report.
        top_p_values: top-p values for the keep-ratio table.
        metric: The filter metric that ranks groups.
        env_seeds: Env seeds of the groups (default: the first ``N`` training seeds,
            ``rollout_cfg.train_seed + i``).
        backend: Optional generation backend (default: ``rollout_cfg.backend``).
        base_filter: Filter settings not varied (``filter_type``, ``selection_eps``).
        meta: Extra settings recorded in the report.

    Returns:
        An :class:`AuditReport`; ``meta`` records env, temperature, seed and env seeds.
    """
    from ragen2.rollout.backends import backend_settings, make_backend
    from ragen2.rollout.collect import collect_rollouts

    for name, value, low in (("num_prompts", num_prompts, 1), ("samples_per_prompt", samples_per_prompt, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}={value!r} must be an integer >= {low}")
    seeds = ([rollout_cfg.train_seed + i for i in range(num_prompts)] if env_seeds is None
             else [int(s) for s in env_seeds])
    if len(seeds) != num_prompts:
        raise ValueError(f"env_seeds has {len(seeds)} entries, num_prompts={num_prompts}")
    if backend is None:
        backend = make_backend(rollout_cfg.backend, model, tokenizer, **backend_settings(rollout_cfg))
    chunk = max(1, rollout_cfg.env_groups)
    scores, successes, lengths = [], [], []
    for call, start in enumerate(range(0, num_prompts, chunk)):
        batch = collect_rollouts(model, tokenizer, env_cfg, rollout_cfg, seeds[start:start + chunk],
                                 group_size=samples_per_prompt, temperature=rollout_cfg.temperature,
                                 seed=seed * 1_000_003 + call, backend=backend)
        scores.append(batch.scores)
        successes.append(batch.successes)
        lengths.append(np.array([t.response_length for t in batch.trajectories], dtype=np.float64)
                       .reshape(batch.env_groups, batch.group_size))
        logger.info("audit: %d of %d prompt groups sampled (%d rollouts each)", min(start + chunk, num_prompts),
                    num_prompts, samples_per_prompt)
    info = {"env": env_cfg.name, "env_kwargs": dict(env_cfg.kwargs), "temperature": rollout_cfg.temperature,
            "seed": seed, "env_seeds": seeds, "mean_response_tokens": float(np.concatenate(lengths).mean())}
    info.update(meta or {})
    step_groups = rollout_cfg.env_groups if 1 <= rollout_cfg.env_groups <= num_prompts else None
    return audit_from_scores(np.concatenate(scores), np.concatenate(successes), env_seeds=seeds,
                             top_p_values=top_p_values, metric=metric, lengths=np.concatenate(lengths),
                             base_filter=base_filter, step_groups=step_groups, meta=info)


def run_audit_command(policy: str, env: str, *, env_kwargs: dict[str, Any] | None = None, num_prompts: int = 32,
                      samples_per_prompt: int = 16, seed: int = 0, out: str | Path | None = None,
                      cache_dir: str | Path = "data/cache", device: str = "auto",
                      max_new_tokens: int | None = None) -> AuditReport:
    """What ``python -m ragen2 audit`` does: resolve and load the policy, audit, optionally save JSON.

    Args:
        policy: ``tiny`` (the cached tiny Llama for ``env``), a local directory or a model id.
        env: Registry name of the environment.
        env_kwargs: Its constructor kwargs.
        num_prompts: Groups.
        samples_per_prompt: Rollouts per group.
        seed: Sampling seed.
        out: If given, write the report's JSON there.
        cache_dir: Where the tiny policy is cached (``<cache_dir>/policies``).
        device: ``auto`` | ``cpu`` | ``cuda``.
        max_new_tokens: Override of ``RolloutConfig.max_new_tokens`` (e.g. small for a quick CPU check).
    """
    from ragen2.config import ConfigError, EnvConfig, PolicyConfig, RolloutConfig, check_policy_source

    EnvConfig(name=env)  # an unknown environment is a ConfigError naming it
    if env_kwargs is not None and not isinstance(env_kwargs, dict):
        raise ConfigError(f"--env-kwargs={env_kwargs!r}: must be a JSON object")
    for flag, value, least in (("--prompts", num_prompts, 1), ("--samples", samples_per_prompt, 2)):
        if value < least:
            raise ConfigError(f"{flag}={value}: must be >= {least}")
    check_policy_source(policy, key="--policy")
    from ragen2.policy import load_policy, resolve_policy  # torch and transformers: import after the checks

    policy_cfg = PolicyConfig(name_or_path=policy, device=device)
    path = resolve_policy(policy_cfg, [env], Path(cache_dir) / "policies")
    model, tokenizer = load_policy(path, dtype=policy_cfg.dtype, device=device)
    rollout_cfg = RolloutConfig(group_size=samples_per_prompt)
    if max_new_tokens is not None:
        rollout_cfg = dataclasses.replace(rollout_cfg, max_new_tokens=max_new_tokens)
    report = audit(model, tokenizer, EnvConfig(name=env, kwargs=dict(env_kwargs or {})), rollout_cfg,
                   num_prompts=num_prompts, samples_per_prompt=samples_per_prompt, seed=seed,
                   meta={"policy": policy})
    if out is not None:
        report.to_json(out)
    return report
