"""One function per paper figure: tidy DataFrames in, a matplotlib ``Figure`` out, no file I/O.

Every function draws with the package style on a figure that has its own Agg canvas
(:mod:`ragen2.repro.figure_style`). Single-panel figures take an optional ``ax`` to draw into;
multi-panel ones an optional empty ``fig``. Save with :func:`ragen2.repro.artifacts.save_figure`.

Column conventions (the output of :func:`ragen2.repro.runs.load_runs` and friends):

- ``steps``: tidy per-step rows ``run_id, env, algo, condition, seed, step, metric, value``;
- ``runs``: one row per run with ``env, algo, condition, seed`` and final values
  (``final_success``, final metric columns from :func:`ragen2.repro.runs.final_values`);
- ``condition``: the filter label (``top_p``, ``top_k``, ``none``, ...); curves are mean ± std over
  seeds (runs that stopped early simply end, so later points average fewer seeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ragen2.repro.figure_style import (
    ALGO_ORDER,
    CONDITION_ORDER,
    HUE_TITLES,
    curve_legend,
    entries_per_row,
    level_colors,
    level_label,
    level_order,
    metric_rows,
    new_figure,
    numeric_or_label,
    panel_grid,
    require_columns,
    runs_per_level,
    single_axes,
    styled,
    tick_label,
    wrapped_panels,
)

QUADRANTS = {
    "diverse reasoning": ("right", "top"),
    "template collapse": ("right", "bottom"),
    "compressed reasoning": ("left", "top"),
    "low-entropy collapse": ("left", "bottom"),
}
"""The four regimes (docs/method.md §5.5) by their corner of the (H(Z|X), I(X;Z)) plane."""

DYNAMICS_METRICS = {
    "filter/kept_ratio": "kept ratio (share of prompt groups)",
    "filter/zero_variance_count": "zero-variance groups (per step)",
    "filter/zero_task_spread_count": "groups without task signal:\nall fail or all succeed (per step)",
    "filter/reward_std_mean": "in-group reward std, RV (reward)",
    "val/success": "validation success (share of episodes)",
}
"""Default panels of :func:`fig_training_dynamics` (metric name -> axis label with its unit); the names are the
trainer's (:mod:`ragen2.trainer.loop`, :mod:`ragen2.filter`)."""

SWEEP_METRICS = {"final_success": "final success", "final_mi": "final MI proxy"}
"""Default rows of :func:`fig_intervention_sweeps` (column -> axis label)."""


# ---------------------------------------------------------------------------------------------
# MI regimes
# ---------------------------------------------------------------------------------------------
def _quadrants(ax: Axes, x_split: float, y_split: float) -> None:
    ax.axvline(x_split, color="0.4", ls="--", lw=0.8)
    ax.axhline(y_split, color="0.4", ls="--", lw=0.8)
    for text, (horiz, vert) in QUADRANTS.items():
        ax.text(
            0.98 if horiz == "right" else 0.02,
            0.97 if vert == "top" else 0.03,
            text,
            transform=ax.transAxes,
            ha=horiz,
            va=vert,
            fontsize=7,
            color="0.3",
            style="italic",
        )


def _split(values: pd.Series, given: float | None) -> float:
    return float(given) if given is not None else float((values.min() + values.max()) / 2)


@styled
def fig_four_regimes(
    points: pd.DataFrame,
    *,
    x: str = "cond_entropy",
    y: str = "mi",
    hue: str = "source",
    style: str | None = None,
    label: str | None = "label",
    entropy_split: float | None = None,
    mi_split: float | None = None,
    ax: Axes | None = None,
) -> Figure:
    """H(Z|X) vs MI scatter with the four regimes labelled in their quadrants.

    Args:
        points: one row per policy/checkpoint with ``x``, ``y``, ``hue`` (e.g. ``toy policy`` vs
            ``checkpoint``) and optionally ``label`` (written beside each point, unless it names the point's regime,
            which the quadrant's label already does).
        style: the column that sets the marker (default: ``hue``), e.g. ``source`` (first or last reading) beside a
            ``condition`` hue (the run's filter, named as readers see it).
        entropy_split, mi_split: where the quadrant lines go (default: mid-range of the data).
        ax: draw into this axes.
    """
    two_keys = style is not None and style != hue  # colour and marker say different things: a longer legend
    style = style or hue
    require_columns(points, (x, y, hue, style), "points")
    fig, ax = single_axes(ax, (5.8, 3.4) if two_keys else (4.2, 3.4))
    levels = level_order(points[hue], CONDITION_ORDER if hue == "condition" else ())
    marks = level_order(points[style])
    sns.scatterplot(
        data=points,
        x=x,
        y=y,
        hue=hue,
        style=style,
        hue_order=levels,
        style_order=marks,
        palette=level_colors(levels, hue),
        s=55,
        ax=ax,
    )
    if label is not None and label in points.columns:
        for row in points.itertuples(index=False):
            if str(getattr(row, label)).replace("_", " ").replace("-", " ") in {q.replace("-", " ") for q in QUADRANTS}:
                continue  # a point named after its regime: the quadrant's own label already says it
            ax.annotate(
                str(getattr(row, label)).replace("_", " "),
                (getattr(row, x), getattr(row, y)),
                xytext=(4, 3),
                textcoords="offset points",
                fontsize=6.5,
            )
    _quadrants(ax, _split(points[x], entropy_split), _split(points[y], mi_split))
    ax.set_xlabel("conditional entropy H(Z|X) (nats)")
    ax.set_ylabel("mutual information I(X;Z) (nats)")
    ax.margins(0.15)
    where = "given" if entropy_split is not None and mi_split is not None else "mid-range"
    handles, labels = ax.get_legend_handles_labels()
    names = {"condition": "filter", "source": "reading"}
    labels = [names.get(t, level_label(t, hue) if t in levels else t) for t in labels]
    handles.append(Line2D([], [], color="0.4", ls="--", lw=0.8))
    labels.append(f"regime boundary ({where})")
    if two_keys:
        ax.legend(handles, labels, loc="center left", bbox_to_anchor=(1.02, 0.5))
    else:
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1 if len(labels) > 2 else 2)
    return fig


@styled
def fig_entropy_vs_mi_widget_frame(
    frames: pd.DataFrame,
    *,
    frame: str = "frame",
    x: str = "cond_entropy",
    y: str = "mi",
    hue: str = "source",
    highlight: Any = None,
    ncols: int = 3,
    fig: Figure | None = None,
) -> Figure:
    """Small multiples of the (H(Z|X), MI) plane, one panel per value of ``frame``, shared axes.

    For the interactive notebook: a widget picks ``highlight`` (one ``frame`` value, e.g. a step or a
    toy dependence d) and the panel for it is drawn with a bold title and a thicker frame.
    """
    require_columns(frames, (frame, x, y, hue), "frames")
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    panels = list(pd.unique(frames[frame]))
    n_cols = min(ncols, len(panels))
    n_rows = math.ceil(len(panels) / n_cols)
    fig, axes = panel_grid(n_rows, n_cols, fig, (2.4, 2.1), sharex=True, sharey=True)
    levels = level_order(frames[hue])
    palette = level_colors(levels, hue)
    x_split, y_split = _split(frames[x], None), _split(frames[y], None)
    flat = axes.ravel()
    for ax, value in zip(flat, panels):
        sub = frames[frames[frame] == value]
        sns.scatterplot(
            data=sub, x=x, y=y, hue=hue, hue_order=levels, palette=palette, s=30, ax=ax, legend=ax is flat[0]
        )
        ax.axvline(x_split, color="0.5", ls="--", lw=0.6)
        ax.axhline(y_split, color="0.5", ls="--", lw=0.6)
        chosen = highlight is not None and value == highlight
        ax.set_title(f"{frame} = {tick_label(value)}", fontweight="bold" if chosen else "normal")
        for spine in ax.spines.values():
            spine.set_linewidth(2.0 if chosen else 0.8)
        ax.set_xlabel("H(Z|X)")
        ax.set_ylabel("I(X;Z)")
    for ax in flat[len(panels) :]:
        fig.delaxes(ax)
    return fig


# ---------------------------------------------------------------------------------------------
# Gradient decomposition (C4)
# ---------------------------------------------------------------------------------------------
@styled
def fig_grad_decomposition(
    grad: pd.DataFrame, *, hue: str = "algo", steps: Sequence[int] | None = None, fig: Figure | None = None
) -> Figure:
    """The paper's 3-panel gradient decomposition per RV bucket; one row per analysed step.

    Panels: (1) bucket RV mean with min-max whiskers (symmetric-log y, so zero-RV buckets stay
    visible); (2) task gradient norm vs bucket RV mean; (3) regularisation (KL + entropy) gradient
    norm vs bucket RV mean. Several runs with the same ``hue`` (seeds) are averaged per bucket
    (min/max whiskers span them).

    Args:
        grad: rows of :mod:`ragen2.trainer.grad_analysis` tables with ``step, bucket, rv_mean,
            task_norm, reg_norm, <hue>`` and optionally ``rv_min, rv_max``; the ``all`` bucket is
            ignored.
        steps: which steps to show (default: all, ascending).
    """
    require_columns(grad, ("step", "bucket", "rv_mean", "task_norm", "reg_norm", hue), "grad")
    data = grad[grad["bucket"].astype(str) != "all"].copy()
    data["bucket"] = data["bucket"].astype(int)
    has_range = {"rv_min", "rv_max"} <= set(data.columns)
    if not has_range:
        data["rv_min"] = data["rv_mean"]
        data["rv_max"] = data["rv_mean"]
    agg = data.groupby([hue, "step", "bucket"], as_index=False).agg(
        rv_mean=("rv_mean", "mean"),
        rv_min=("rv_min", "min"),
        rv_max=("rv_max", "max"),
        task_norm=("task_norm", "mean"),
        reg_norm=("reg_norm", "mean"),
    )
    show = sorted(agg["step"].unique()) if steps is None else list(steps)
    absent = [s for s in show if s not in set(agg["step"])]
    if absent:
        raise ValueError(f"step(s) {absent} not in grad (has {sorted(agg['step'].unique())})")
    levels = level_order(agg[hue], ALGO_ORDER)
    palette = level_colors(levels, hue)
    fig, axes = panel_grid(len(show), 3, fig, (3.0, 2.4))
    dodge = np.linspace(-0.12, 0.12, len(levels)) if len(levels) > 1 else [0.0]
    for r, step in enumerate(show):
        ax_rv, ax_task, ax_reg = axes[r]
        for offset, level in zip(dodge, levels):
            sub = agg[(agg["step"] == step) & (agg[hue] == level)].sort_values("bucket")
            if sub.empty:
                continue
            # the mean of equal RVs over runs can round an ulp past their min or max (3 x 0.0577...),
            # and errorbar rejects negative whiskers
            err = np.clip(np.vstack([sub["rv_mean"] - sub["rv_min"], sub["rv_max"] - sub["rv_mean"]]), 0.0, None)
            ax_rv.errorbar(
                sub["bucket"] + offset,
                sub["rv_mean"],
                yerr=err,
                fmt="o",
                capsize=2,
                color=palette[level],
                label=level_label(level, hue),
            )
            for ax, col in ((ax_task, "task_norm"), (ax_reg, "reg_norm")):
                ax.plot(sub["rv_mean"], sub[col], "o-", color=palette[level], label=level_label(level, hue))
        ax_rv.set_yscale("symlog", linthresh=1e-2)
        ax_rv.set_xlabel("RV bucket (1 = lowest)")
        ax_rv.set_ylabel(f"step {step}\nbucket RV (reward std)")
        ax_task.set_xlabel("bucket RV mean")
        ax_task.set_ylabel("task grad norm")
        ax_reg.set_xlabel("bucket RV mean")
        ax_reg.set_ylabel("KL + entropy grad norm")
        if r == 0:
            ax_rv.set_title("RV per bucket")
            ax_task.set_title("task gradient")
            ax_reg.set_title("regularisation gradient")
            ax_reg.legend(title=HUE_TITLES.get(hue, hue))
    return fig


# ---------------------------------------------------------------------------------------------
# Curves over training steps (C1, C6)
# ---------------------------------------------------------------------------------------------
def _curves_by_panel(
    steps: pd.DataFrame, metric: str, ylabel: str, hue: str, panel: str, fig: Figure | None
) -> Figure:
    sub = metric_rows(steps, metric)
    require_columns(sub, (hue, panel), "steps")
    panels = level_order(sub[panel])
    levels = level_order(sub[hue], CONDITION_ORDER)
    fig, axes = panel_grid(1, len(panels), fig)
    for ax, value in zip(axes[0], panels):
        part = sub[sub[panel] == value]
        sns.lineplot(
            data=part,
            x="step",
            y="value",
            hue=hue,
            hue_order=levels,
            palette=level_colors(levels, hue),
            estimator="mean",
            errorbar="sd",
            ax=ax,
            legend=False,
        )
        title = level_label(value, panel)
        if panel != "env" and "env" in part.columns and part["env"].nunique() == 1:  # name the one environment too
            title = f"{level_label(part['env'].iloc[0], 'env')}, {title}"
        ax.set_title(title if "run_id" not in part.columns else f"{title}\n({runs_per_level(part, hue, levels)})")
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
    curve_legend(fig, levels, hue)
    return fig


@styled
def fig_success_curves(
    steps: pd.DataFrame,
    *,
    metric: str = "val/success",
    hue: str = "condition",
    panel: str = "env",
    fig: Figure | None = None,
) -> Figure:
    """Validation success vs step, one panel per env, hue = filter condition, mean ± std over seeds.

    The panel title names the panel (and the environment, where the panels are another column) and gives the number
    of runs per condition; the legend sits below the panels.
    """
    return _curves_by_panel(steps, metric, "validation success\n(share of episodes)", hue, panel, fig)


@styled
def fig_output_length(
    steps: pd.DataFrame,
    *,
    metric: str = "rollout/response_length_mean",
    hue: str = "condition",
    panel: str = "env",
    fig: Figure | None = None,
) -> Figure:
    """Mean output length vs step, one panel per env.

    The default metric is the response tokens per trajectory (all turns) of the unfiltered batch.
    """
    return _curves_by_panel(steps, metric, "output length (tokens)", hue, panel, fig)


@styled
def fig_curve_pair(curves: Mapping[str, pd.DataFrame], *, ylabel: str, title: str, fig: Figure | None = None) -> Figure:
    """One run's curve per filter condition (``curves``: condition -> a dvclive table, ``step`` and one value column),
    as ``dvc plots show`` draws it from the plot_data stage's copies (:mod:`ragen2.repro.plot_data`)."""
    levels = level_order(pd.Series(list(curves)), CONDITION_ORDER)
    fig, axes = panel_grid(1, 1, fig, (4.2, 2.8))
    ax = axes[0, 0]
    colors = level_colors(levels, "condition")
    for level in levels:
        table = curves[level]
        require_columns(table, ("step",), f"curve {level}")
        value = [c for c in table.columns if c not in ("step", "timestamp")][-1]
        ax.plot(table["step"], table[value], color=colors[level], marker="o", ms=3, label=level_label(level, "condition"))
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    handles = [Line2D([], [], color=colors[v], marker="o", ms=3, label=level_label(v, "condition")) for v in levels]
    handles.append(Line2D([], [], color="none", label="one run each (seed 0); dots: readings"))
    fig.legend(handles=handles, loc="outside lower center", ncol=entries_per_row(fig, len(handles), inches=2.2))
    return fig


@styled
def fig_training_dynamics(
    steps: pd.DataFrame,
    *,
    metrics: Mapping[str, str] = DYNAMICS_METRICS,
    hue: str = "condition",
    fig: Figure | None = None,
) -> Figure:
    """Filter dynamics of one environment: one panel per metric (default :data:`DYNAMICS_METRICS`).

    Raises:
        ValueError: ``steps`` mixes environments (averaging them would mislead), or a metric is absent.
    """
    require_columns(steps, ("metric", "step", "value", hue), "steps")
    if "env" in steps.columns and steps["env"].nunique() > 1:
        raise ValueError(f"steps holds several envs {sorted(steps['env'].unique())}; pass one env at a time")
    levels = level_order(steps[hue], CONDITION_ORDER)
    fig, axes = panel_grid(1, len(metrics), fig, (2.9, 2.6))
    for ax, (metric, label) in zip(axes[0], metrics.items()):
        sub = metric_rows(steps, metric)
        sns.lineplot(
            data=sub,
            x="step",
            y="value",
            hue=hue,
            hue_order=levels,
            palette=level_colors(levels, hue),
            estimator="mean",
            errorbar="sd",
            ax=ax,
            legend=False,
        )
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
    n = runs_per_level(steps, hue, levels) if "run_id" in steps.columns else ""
    curve_legend(fig, levels, hue, mark=f"line: mean over seeds ({n})" if n else "line: mean over seeds")
    return fig


# ---------------------------------------------------------------------------------------------
# RV quartiles (C3)
# ---------------------------------------------------------------------------------------------
@styled
def fig_rv_quartiles(
    quartiles: pd.DataFrame,
    *,
    quartile: str = "quartile",
    success: str = "success",
    mi: str = "mi",
    hue: str | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Task performance and MI proxy per RV quartile (bars = mean, error bars = std over rows).

    Args:
        quartiles: one row per (quartile, seed[, hue]) with columns ``quartile`` (1 = lowest RV),
            ``success`` and ``mi``.
        hue: optional column to split bars by (e.g. ``step`` or ``condition``).
    """
    cols = [quartile, success, mi] + ([hue] if hue else [])
    require_columns(quartiles, cols, "quartiles")
    order = level_order(quartiles[quartile])
    fig, axes = panel_grid(1, 2, fig, (3.0, 2.6))
    hue_kw: dict[str, Any] = {}
    if hue:
        levels = level_order(quartiles[hue], CONDITION_ORDER)
        hue_kw = {"hue": hue, "hue_order": levels, "palette": level_colors(levels, hue)}
    else:
        hue_kw = {"color": "#0173b2"}
    for ax, col, label in ((axes[0, 0], success, "task success"), (axes[0, 1], mi, "MI proxy")):
        sns.barplot(
            data=quartiles,
            x=quartile,
            y=col,
            order=order,
            errorbar="sd",
            capsize=0.15,
            err_kws={"linewidth": 1.0},
            ax=ax,
            **hue_kw,
        )
        ax.set_xlabel("RV quartile (1 = lowest)")
        ax.set_ylabel(label)
    if hue and axes[0, 0].get_legend() is not None:
        axes[0, 0].get_legend().remove()
    return fig


# ---------------------------------------------------------------------------------------------
# Stochasticity sweep (C5)
# ---------------------------------------------------------------------------------------------
def _slip_label(v: float) -> str:
    return f"{100 * v:g}%" if 0 <= v <= 1 else f"{v:g}"


@styled
def fig_stochasticity(
    runs: pd.DataFrame,
    *,
    slip: str = "slip_rate",
    value: str = "final_success",
    condition: str = "condition",
    filtered: str = "top_p",
    baseline: str = "none",
    pair_on: str = "seed",
    fig: Figure | None = None,
) -> Figure:
    """Final success vs slip rate, filter vs none (left), and the paired per-seed gain (right).

    Left: mean ± std over seeds per condition. Right: one dot per seed (``filtered - baseline`` on
    the same seed) and the mean ± std of those differences; slip rates in (0, 1) are shown as %.
    """
    require_columns(runs, (slip, value, condition, pair_on), "runs")
    data = runs[runs[condition].isin([filtered, baseline])]
    if data.empty:
        raise ValueError(f"no rows with {condition} in {[filtered, baseline]}")
    slips = sorted(data[slip].unique())
    pos = {s: i for i, s in enumerate(slips)}
    fig, axes = panel_grid(1, 2, fig, (3.4, 2.7))
    ax_abs, ax_gain = axes[0]
    palette = level_colors([filtered, baseline], condition)
    for offset, cond in ((-0.08, filtered), (0.08, baseline)):
        stats = data[data[condition] == cond].groupby(slip)[value].agg(["mean", "std"]).reset_index()
        ax_abs.errorbar(
            stats[slip].map(pos) + offset,
            stats["mean"],
            yerr=stats["std"].fillna(0),
            fmt="o-",
            capsize=2,
            color=palette[cond],
            label=level_label(cond, condition),
        )
    ax_abs.set_ylabel(value.replace("_", " "))
    ax_abs.legend(title=HUE_TITLES.get(condition, condition))
    wide = data.pivot_table(index=[slip, pair_on], columns=condition, values=value, aggfunc="mean")
    if filtered in wide.columns and baseline in wide.columns:
        gain = (wide[filtered] - wide[baseline]).dropna().rename("gain").reset_index()
        for s, part in gain.groupby(slip):
            jitter = np.linspace(-0.15, 0.15, len(part)) if len(part) > 1 else np.zeros(1)
            ax_gain.scatter(pos[s] + jitter, part["gain"], s=12, color="0.55", zorder=2)
            ax_gain.errorbar(
                pos[s],
                part["gain"].mean(),
                yerr=part["gain"].std() if len(part) > 1 else 0,
                fmt="D",
                color="k",
                capsize=3,
                zorder=3,
            )
    ax_gain.axhline(0, color="0.3", lw=0.8)
    ax_gain.set_ylabel(f"paired gain\n({level_label(filtered, condition)} - {level_label(baseline, condition)})")
    for ax in (ax_abs, ax_gain):
        ax.set_xticks(range(len(slips)), [_slip_label(float(s)) for s in slips])
        ax.set_xlabel("slip rate")
    return fig


# ---------------------------------------------------------------------------------------------
# Metrics vs success (C2)
# ---------------------------------------------------------------------------------------------
def _paper_lookup(paper: pd.DataFrame | Mapping[str, float] | None) -> dict[str, float]:
    if paper is None:
        return {}
    if isinstance(paper, pd.DataFrame):
        require_columns(paper, ("metric", "paper_rho"), "paper")
        return dict(zip(paper["metric"], paper["paper_rho"].astype(float)))
    return {str(k): float(v) for k, v in paper.items()}


@styled
def fig_metric_correlations(
    corr: pd.DataFrame, *, paper: pd.DataFrame | Mapping[str, float] | None = None, ax: Axes | None = None
) -> Figure:
    """Spearman rho of each metric vs final success (bars, bootstrap CI whiskers), paper values as ◆.

    Args:
        corr: one row per metric: ``metric``, ``rho`` and optionally ``ci_low``, ``ci_high`` and
            ``label`` (tick text; default the metric name).
        paper: the paper's rho per metric (:func:`ragen2.repro.tables.paper_reference_values` or a dict).
            A metric matches a paper entry by its full name or by the part after its last ``/``
            (``collapse_first_turn/mi_zscore`` matches ``mi_zscore``).
    """
    require_columns(corr, ("metric", "rho"), "corr")
    fig, ax = single_axes(ax, (max(3.6, 0.8 * len(corr) + 1.2), 3.0))
    positions = np.arange(len(corr))
    rho = corr["rho"].astype(float).to_numpy()
    yerr = None
    if {"ci_low", "ci_high"} <= set(corr.columns):
        yerr = np.vstack([rho - corr["ci_low"].to_numpy(float), corr["ci_high"].to_numpy(float) - rho])
    colors = ["#0173b2" if r >= 0 else "#d55e00" for r in np.nan_to_num(rho)]
    ax.bar(positions, np.nan_to_num(rho), yerr=yerr, color=colors, capsize=3, label="this package")
    lookup = _paper_lookup(paper)
    marks = [
        (p, lookup.get(m, lookup.get(str(m).rsplit("/", 1)[-1]))) for p, m in zip(positions, corr["metric"])
    ]
    marks = [(p, v) for p, v in marks if v is not None]
    if marks:
        ax.scatter(
            [p for p, _ in marks], [v for _, v in marks], marker="D", color="k", zorder=3, s=22, label="paper"
        )
    labels = corr["label"] if "label" in corr.columns else corr["metric"]
    ax.set_xticks(positions, [str(v) for v in labels], rotation=30, ha="right")
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Spearman ρ with final success")
    ax.legend(loc="best")
    return fig


SCATTER_LABELS = {
    "collapse_first_turn/mi_zscore": "MI-ZScore at the last reading\n(z-score, no unit)",
    "collapse_first_turn/mi_estimate": "MI proxy at the last reading\n(nats per token)",
    "collapse_first_turn/conditional_entropy_est": "conditional entropy H(Z|X)\nat the last reading (nats)",
    "collapse_first_turn/reasoning_entropy_est": "reasoning entropy H(Z)\nat the last reading (nats)",
    "final_success": "final validation success\n(share of episodes)",
}
"""Axis labels of the scatter figures, in words with units (other columns are shown as they are)."""


def _scatter_vs_success(
    runs: pd.DataFrame, x: str, y: str, hue: str | None, annotation: str | None, ax: Axes | None
) -> Figure:
    require_columns(runs, [x, y] + ([hue] if hue else []), "runs")
    fig, ax = single_axes(ax, size=(5.6, 3.0))
    hue_kw: dict[str, Any] = {}
    levels: list = []
    if hue:
        levels = level_order(runs[hue], CONDITION_ORDER)
        hue_kw = {"hue": hue, "hue_order": levels, "palette": level_colors(levels, hue), "legend": False}
    fixed = (runs["filter.loss_scaling"] == "none") & (runs["condition"] != "none") if "filter.loss_scaling" in runs \
        else pd.Series(False, index=runs.index)
    both_rules = bool(fixed.any() and (~fixed & (runs["condition"] != "none")).any())
    for marker, part in (("o", runs[~fixed]), ("X", runs[fixed])):
        if len(part):
            sns.scatterplot(data=part, x=x, y=y, s=30, marker=marker, ax=ax, **hue_kw)
    ax.set_xlabel(SCATTER_LABELS.get(x, x))
    ax.set_ylabel(SCATTER_LABELS.get(y, y))
    colors = level_colors(levels, hue) if hue else {}
    handles = [Line2D([], [], ls="", marker="o", color=colors[v], label=level_label(v, hue)) for v in levels]
    handles.append(Line2D([], [], ls="", marker="o", color="0.3" if hue else "C0", label="one dot: one run"))
    if both_rules:  # the update-count control's runs beside the paper's rule
        handles.append(Line2D([], [], ls="", marker="X", color="0.3", label="cross: reference's fixed\nmini-batch"))
    if annotation:
        handles.append(Line2D([], [], color="none", label=annotation))
    fig.legend(handles=handles, loc="outside right upper")
    return fig


@styled
def fig_mi_vs_success(
    runs: pd.DataFrame,
    *,
    x: str = "collapse_first_turn/mi_zscore",
    y: str = "final_success",
    hue: str | None = "condition",
    annotation: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """One dot per run: final MI proxy vs final success (``annotation``, e.g. the Spearman result, in the legend)."""
    return _scatter_vs_success(runs, x, y, hue, annotation, ax)


@styled
def fig_entropy_vs_success(
    runs: pd.DataFrame,
    *,
    x: str = "collapse_first_turn/conditional_entropy_est",
    y: str = "final_success",
    hue: str | None = "condition",
    annotation: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """One dot per run: final entropy measure vs final success."""
    return _scatter_vs_success(runs, x, y, hue, annotation, ax)


# ---------------------------------------------------------------------------------------------
# Prompt-level reward heatmaps (C6)
# ---------------------------------------------------------------------------------------------
def reward_matrix(
    rewards: pd.DataFrame, prompt: str = "prompt", rollout: str = "rollout", reward: str = "reward"
) -> tuple[np.ndarray, np.ndarray, list]:
    """The K x G reward matrix sorted for display, its per-prompt RV and the prompt order.

    Rows are prompts sorted by mean reward (high first; ties by prompt id), and each row's rewards
    are sorted high to low. RV is the population variance of a row.
    """
    wide = rewards.pivot_table(index=prompt, columns=rollout, values=reward, aggfunc="mean")
    if wide.isna().any().any():
        raise ValueError("every prompt needs a reward for every rollout index (the K x G matrix has holes)")
    means = wide.mean(axis=1)
    order = sorted(wide.index, key=lambda p: (-means[p], p))
    matrix = -np.sort(-wide.loc[order].to_numpy(float), axis=1)
    return matrix, matrix.var(axis=1), order


@styled
def fig_reward_heatmaps(
    rewards: pd.DataFrame,
    *,
    phase: str = "phase",
    prompt: str = "prompt",
    rollout: str = "rollout",
    reward: str = "reward",
    phase_order: Sequence | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Prompt-level reward heatmaps (K prompts x G rollouts) and per-prompt RV, e.g. early/mid/late.

    Each phase gets a heatmap (rows sorted by mean reward, rollouts sorted high to low, see
    :func:`reward_matrix`) and a bar strip of RV (population variance) per prompt; one colour bar is
    shared. Axes: ``2 * phases + 1``.
    """
    require_columns(rewards, (phase, prompt, rollout, reward), "rewards")
    phases = list(phase_order) if phase_order is not None else list(pd.unique(rewards[phase]))
    unknown = [p for p in phases if p not in set(rewards[phase])]
    if unknown:
        raise ValueError(f"phase(s) {unknown} not in rewards (has {list(pd.unique(rewards[phase]))})")
    lo, hi = min(0.0, float(rewards[reward].min())), max(1.0, float(rewards[reward].max()))
    if fig is None:
        fig = new_figure(3.3 * len(phases) + 0.5, 3.2)
    elif fig.axes:
        raise ValueError(f"fig must be empty, it already has {len(fig.axes)} axes")
    grid = fig.add_gridspec(1, 2 * len(phases) + 1, width_ratios=[4, 1] * len(phases) + [0.25])
    image = None
    for i, name in enumerate(phases):
        matrix, rv, _ = reward_matrix(rewards[rewards[phase] == name], prompt, rollout, reward)
        ax_map = fig.add_subplot(grid[0, 2 * i])
        ax_rv = fig.add_subplot(grid[0, 2 * i + 1], sharey=ax_map)
        image = ax_map.imshow(
            matrix,
            aspect="auto",
            vmin=lo,
            vmax=hi,
            interpolation="nearest",
            extent=(-0.5, matrix.shape[1] - 0.5, matrix.shape[0] - 0.5, -0.5),
        )
        ax_map.grid(False)
        ax_map.set_title(f"{name}")
        ax_map.set_xlabel("rollouts (sorted)")
        ax_map.set_ylabel("prompts (by mean reward)" if i == 0 else "")
        ax_rv.barh(np.arange(len(rv)), rv, color="0.45", height=0.8)
        ax_rv.set_xlabel("RV")
        ax_rv.tick_params(labelleft=False)
    fig.colorbar(image, cax=fig.add_subplot(grid[0, -1]), label="reward")
    return fig


# ---------------------------------------------------------------------------------------------
# Intervention sweeps (C7)
# ---------------------------------------------------------------------------------------------
@styled
def fig_intervention_sweeps(
    sweeps: pd.DataFrame,
    *,
    sweep: str = "sweep",
    value: str = "value",
    metrics: Mapping[str, str] = SWEEP_METRICS,
    value_order: Mapping[str, Sequence] | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Final success and MI vs the swept value; columns = sweeps (entropy coef, KL coef, top-p).

    Each panel shows every run as a grey dot and the mean ± std over seeds per swept value. Values
    are placed as categories: numbers ascending, then labels such as ``nofilter``, unless
    ``value_order[sweep]`` gives the order (e.g. top-p 1.0 -> 0.4 as in the paper).

    Args:
        sweeps: one row per run with ``sweep``, ``value`` and the ``metrics`` columns.
        metrics: column -> axis label, one row of panels each.
    """
    if sweeps.empty:  # a realization without sweep runs: say so instead of an empty grid
        fig, axes = panel_grid(1, 1, fig, (6.0, 1.6))
        axes[0, 0].axis("off")
        axes[0, 0].text(0.5, 0.5, "No sweep runs in this realization: nothing to draw.", ha="center", va="center")
        return fig
    require_columns(sweeps, [sweep, value, *metrics], "sweeps")
    names = list(pd.unique(sweeps[sweep]))
    fig, axes = panel_grid(len(metrics), len(names), fig, (2.8, 2.4))
    for c, name in enumerate(names):
        part = sweeps[sweeps[sweep] == name]
        if value_order and name in value_order:
            order = list(value_order[name])
        else:
            order = sorted(pd.unique(part[value]), key=numeric_or_label)
        pos = {v: i for i, v in enumerate(order)}
        xs = part[value].map(pos)
        if xs.isna().any():
            raise ValueError(
                f"sweep {name!r}: values {sorted(set(part[value]) - set(order), key=str)} not in value_order"
            )
        for r, (col, label) in enumerate(metrics.items()):
            ax = axes[r, c]
            ax.scatter(xs, part[col], s=10, color="0.6", zorder=2)
            stats = part.groupby(value)[col].agg(["mean", "std"]).reindex(order)
            ax.errorbar(
                range(len(order)),
                stats["mean"],
                yerr=stats["std"].fillna(0),
                fmt="o-",
                capsize=2,
                color="#0173b2",
                zorder=3,
            )
            ax.set_xticks(range(len(order)), [tick_label(v) for v in order], rotation=45)
            ax.set_ylabel(label if c == 0 else "")
            if r == 0:
                ax.set_title(str(name))
            if r == len(metrics) - 1:
                ax.set_xlabel(f"{name} value")
    return fig


# ---------------------------------------------------------------------------------------------
# The regime map (ragen2.repro.regime_map)
# ---------------------------------------------------------------------------------------------
def _on_two_lines(label: str, sep: str = " · ") -> str:
    """``a · b · c · d`` as ``a · b`` over ``c · d`` (a regime-map cell's levels)."""
    parts = label.split(sep)
    half = (len(parts) + 1) // 2
    return sep.join(parts[:half]) + "\n" + sep.join(parts[half:])


@styled
def fig_regime_map(table: pd.DataFrame, *, fig: Figure | None = None) -> Figure:
    """Per cell of the regime map: the no-filter run's MI change (left) and Top-p minus none final MI (right).

    Args:
        table: :func:`ragen2.repro.regime_map.map_table` (``label, cell, horizon, mi_change_none, mi_diff,
            regime_none``); one point per cell and horizon, the 0 line marked; cells whose no-filter run is in a
            collapse regime other than ``stable`` are named on the left panel.
    """
    from ragen2.repro.collapse_criteria import REGIME_MEANINGS

    require_columns(table, ("label", "cell", "horizon", "mi_change_none", "mi_diff", "regime_none"), "table")
    order = table.sort_values("cell")["label"].drop_duplicates().tolist()
    horizons = level_order(table["horizon"])
    palette = level_colors(horizons, "horizon")
    fig, axes = panel_grid(1, 2, fig, (3.4, 0.5 * len(order) + 1.6), sharey=True)
    for ax, column, title in ((axes[0, 0], "mi_change_none", "no filter:\nMI at the end − MI at the start"),
                              (axes[0, 1], "mi_diff", "final MI:\nTop-p − no filter")):
        sns.stripplot(data=table, x=column, y="label", hue="horizon", order=order, hue_order=horizons,
                      palette=palette, dodge=True, jitter=False, size=6, ax=ax, legend=False)
        ax.axvline(0.0, color="0.4", ls="--", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel("nats per token")
        ax.set_ylabel("")
    axes[0, 0].set_yticks(range(len(order)), [_on_two_lines(label) for label in order])
    last = table[table["horizon"] == max(horizons)].set_index("label")
    named = []
    for i, label in enumerate(order):
        regime = str(last.loc[label, "regime_none"]) if label in last.index else "missing"
        if regime != "stable":
            named.append(regime)
            axes[0, 0].annotate(regime.replace("_", " "), (1.0, i), xycoords=("axes fraction", "data"),
                                xytext=(-3, 0), textcoords="offset points", ha="right", va="center", fontsize=6.5,
                                color="0.2")
    handles = [Line2D([], [], color=palette[h], marker="o", ls="none", markersize=5, label=f"after {h} RL steps")
               for h in horizons]
    handles.append(Line2D([], [], color="0.4", ls="--", lw=0.8, label="0: no change, no difference"))
    handles += [Line2D([], [], ls="none", label=f"{name.replace('_', ' ')}: {REGIME_MEANINGS.get(name, 'no run')}")
                for name in dict.fromkeys(sorted(named))]
    fig.legend(handles=handles, loc="outside lower center", ncols=1, fontsize=7, title_fontsize=7,
               title=f"one run per cell and filter; named at the right of the left panel: the no-filter run's "
                     f"regime after {max(horizons)} steps (collapse definition; unnamed: stable)")
    return fig


@styled
def fig_regime_trajectories(points: pd.DataFrame, *, panel: str = "cell", labels: Mapping[int, str] | None = None,
                            fig: Figure | None = None) -> Figure:
    """Each cell's runs on the (H(Z|X), MI) plane over training: one panel per cell, a path per filter condition.

    The dashed lines cross at the no-filter run's first reading, so the lower-right quadrant is "more varied and
    less input-dependent than at the start": a path that ends there went towards template collapse.

    Args:
        points: :func:`ragen2.repro.regime_map.cell_steps` (``cell, condition, seed, step, cond_entropy, mi``).
        panel: the column with one panel per value (``cell``; ``seed`` for the confirming runs of one cell).
        labels: panel value -> panel title (default: ``<panel> <value>``).
    """
    require_columns(points, (panel, "condition", "seed", "step", "cond_entropy", "mi"), "points")
    cells = sorted(points[panel].unique())
    levels = level_order(points["condition"], CONDITION_ORDER)
    colors = level_colors(levels, "condition")
    fig, axes = wrapped_panels(len(cells), fig, (2.6, 2.4))
    for ax, cell in zip(axes, cells):
        part = points[points[panel] == cell]
        for (cond, _seed), run in part.groupby(["condition", "seed"]):
            run = run.sort_values("step")
            ax.plot(run["cond_entropy"], run["mi"], color=colors[cond], lw=1.1, label=cond)
            ax.scatter(run["cond_entropy"].iloc[:1], run["mi"].iloc[:1], color=colors[cond], marker="o", s=18)
            ax.scatter(run["cond_entropy"].iloc[-1:], run["mi"].iloc[-1:], color=colors[cond], marker="X", s=30)
        start = part[part["condition"] == "none"].sort_values("step")
        if len(start):
            ax.axvline(start["cond_entropy"].iloc[0], color="0.5", ls="--", lw=0.7)
            ax.axhline(start["mi"].iloc[0], color="0.5", ls="--", lw=0.7)
        ax.set_title((labels or {}).get(cell, f"{panel} {cell}"), fontsize=7)
        ax.set_xlabel("H(Z|X) (nats/token)")
        ax.set_ylabel("MI (nats/token)")
    handles = [Line2D([], [], color=colors[c], lw=1.1, label=level_label(c, "condition")) for c in levels]
    handles += [Line2D([], [], color="0.3", marker="o", ls="none", markersize=4, label="first reading"),
                Line2D([], [], color="0.3", marker="X", ls="none", markersize=5, label="last reading"),
                Line2D([], [], color="0.5", ls="--", lw=0.7, label="no filter's first reading")]
    fig.legend(handles=handles, loc="outside lower center", ncols=entries_per_row(fig, len(handles)), fontsize=7)
    return fig


@styled
def fig_regime_curves(steps: pd.DataFrame, metric: str, *, ylabel: str, labels: Mapping[int, str] | None = None,
                      fig: Figure | None = None) -> Figure:
    """One metric over training for each cell of the regime map (a panel per cell, a line per filter condition).

    Args:
        steps: tidy steps of the map's runs with a ``cell`` column (``cell, condition, step, metric, value``).
        metric: e.g. ``rollout/response_length_mean``.
    """
    require_columns(steps, ("cell", "condition", "step", "metric", "value"), "steps")
    sub = metric_rows(steps, metric)
    cells = sorted(sub["cell"].unique())
    levels = level_order(sub["condition"], CONDITION_ORDER)
    fig, axes = wrapped_panels(len(cells), fig, (2.6, 2.1), sharey=True)
    for i, (ax, cell) in enumerate(zip(axes, cells)):
        sns.lineplot(data=sub[sub["cell"] == cell], x="step", y="value", hue="condition", hue_order=levels,
                     palette=level_colors(levels, "condition"), estimator="mean", errorbar=None, lw=1.0, ax=ax,
                     legend=i == len(cells) - 1)
        ax.set_title((labels or {}).get(cell, f"cell {cell}"), fontsize=7)
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
    return fig


# ---------------------------------------------------------------------------------------------
# The learning-regime screen


@styled
def fig_learning_screen(table: pd.DataFrame, *, threshold: float, steps: tuple[int, int] | None = None,
                        ax: Axes | None = None) -> Figure:
    """Gain in success over the warm start per setting and algorithm: one mark per run (seed).

    Filled marks are the end of training, hollow ones the midpoint checkpoint of the same run (to its left); colour is
    the algorithm; a cell's seeds side by side in seed order; bars are 95 % intervals of the paired gain over the env
    seeds; the tick labels give each warm start's success. The dashed line is the pre-registered threshold a setting
    must reach to count as learning.

    Args:
        table: :func:`ragen2.repro.learning_screen.screen_table` (``env, turns, algo, start, gain, gain_se,
            gain_mid``).
        threshold: the learning threshold in points (drawn).
        steps: ``(midpoint, final)`` training steps, named in the legend (else "midpoint", "end of training").
    """
    require_columns(table, ("env", "turns", "algo", "start", "gain", "gain_se", "gain_mid"), "table")
    fig, ax = single_axes(ax, (5.2, 3.2))
    algos = level_order(table["algo"])
    colors = level_colors(algos, "algo")
    cells = table.groupby(["env", "turns", "algo"], sort=True)["start"].mean()
    order = sorted(cells.index, key=lambda c: (c[0], c[1], algos.index(c[2])))
    for x, (env, turns, algo) in enumerate(order):
        part = table[(table["env"] == env) & (table["turns"] == turns) & (table["algo"] == algo)]
        offsets = np.linspace(-0.3, 0.3, len(part)) if len(part) > 1 else np.zeros(1)
        for dx, (_, row) in zip(offsets, part.iterrows()):
            color = colors[algo]
            ax.plot([x + dx - 0.05, x + dx], [row["gain_mid"], row["gain"]], color=color, lw=0.6, alpha=0.5)
            ax.scatter(x + dx - 0.05, row["gain_mid"], marker="o", s=22, facecolors="none", edgecolors=[color])
            ax.errorbar(x + dx, row["gain"], yerr=1.96 * row["gain_se"], fmt="o", color=color, ms=5, capsize=2, lw=0.9)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([f"{env}\n{turns} turn{'s' if turns > 1 else ''} · {algo.upper().replace('_', ' ')}\n"
                        f"start {cells[(env, turns, algo)]:.1f} %" for env, turns, algo in order], fontsize=7)
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.axhline(threshold, color="0.3", ls="--", lw=0.9)
    ax.annotate(f"threshold: +{threshold:g} points", (0.99, threshold), xycoords=("axes fraction", "data"),
                xytext=(0, 3), textcoords="offset points", ha="right", fontsize=7, color="0.3")
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.set_ylabel("gain over warm start (points)")
    ax.set_xlabel("setting · algorithm · warm-start success")
    final, mid = ((f"step {steps[1]}, end of training", f"step {steps[0]}, same run") if steps is not None
                  else ("end of training", "midpoint, same run"))
    handles = [ax.errorbar([np.nan], [np.nan], yerr=[np.nan], fmt="o", color="0.3", ms=5, capsize=2, lw=0.9,
                           label=f"{final}\n(bar: 95 % interval)"),
               Line2D([], [], color="0.3", marker="o", ls="", mfc="none", label=f"{mid}\n(thin line joins the two)"),
               Line2D([], [], color="0.6", lw=0.6, label="no change")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              title="one pair of marks per seed", title_fontsize=7)
    return fig
