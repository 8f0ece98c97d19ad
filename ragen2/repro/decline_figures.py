"""The decline study's figures (docs/preregistrations.md §7.19): its paths through training and each run's drop from
its peak, one plotting function each, readable without their captions."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ragen2.repro.figure_style import (
    ALGO_ORDER,
    CONDITION_ORDER,
    curve_legend,
    entries_per_row,
    level_colors,
    level_label,
    level_order,
    metric_rows,
    panel_grid,
    require_columns,
    runs_per_level,
    styled,
)

PATH_METRICS = {
    "val/success": "validation success\n(share of 512 boards)",
    "collapse_first_turn/mi_zscore": "MI-ZScore\n(input dependence)",
    "collapse_first_turn/conditional_entropy_est": "H(Z|X)\n(nats per token)",
    "filter/zero_task_spread_count": "groups with no task spread\n(all fail or all win, of 8)",
}
"""The rows of :func:`fig_decline_paths`: success, the MI proxy, the within-input entropy the paper sets beside it,
and the prompt groups whose rollouts all failed or all succeeded (no task signal; before the filter)."""


def _setting(part: pd.DataFrame, algo: str) -> str:
    """A panel's title: the environment, where the table names one, and the algorithm."""
    env = f"{level_label(part['env'].iloc[0], 'env')}, " if "env" in part and part["env"].nunique() == 1 else ""
    return f"{env}{level_label(algo, 'algo')}"


@styled
def fig_decline_paths(steps: pd.DataFrame, *, metrics: Mapping[str, str] = PATH_METRICS,
                      fig: Figure | None = None) -> Figure:
    """One row per metric (:data:`PATH_METRICS`), one column per algorithm: the mean over runs per filter, with a band
    of ± 1 std over runs; the column titles give the runs per filter."""
    require_columns(steps, ("metric", "step", "value", "algo", "condition", "run_id"), "steps")
    algos = level_order(steps["algo"], ALGO_ORDER)
    levels = level_order(steps["condition"], CONDITION_ORDER)
    fig, axes = panel_grid(len(metrics), len(algos), fig, (3.6, 2.3))
    for row, (metric, label) in enumerate(metrics.items()):
        sub = metric_rows(steps, metric)
        for col, algo in enumerate(algos):
            ax, part = axes[row, col], sub[sub["algo"] == algo]
            sns.lineplot(data=part, x="step", y="value", hue="condition", hue_order=levels,
                         palette=level_colors(levels, "condition"), estimator="mean", errorbar="sd", ax=ax,
                         legend=False)
            if row == 0:
                ax.set_title(f"{_setting(part, algo)}\n({runs_per_level(part, 'condition', levels)})")
            ax.set_xlabel("training step" if row == len(metrics) - 1 else "")
            ax.set_ylabel(label if col == 0 else "")
    curve_legend(fig, levels, "condition", mark="line: mean over runs (both warm starts)",
                 band="band: ± 1 std over runs")
    return fig


@styled
def fig_decline_drops(table: pd.DataFrame, *, floors: Mapping[str, float] | None = None,
                      fig: Figure | None = None) -> Figure:
    """Each run's drop from its peak (points: its largest validation reading after step 0 minus its last), one panel
    per algorithm, one column of dots per filter, a grey line joining the two runs of a pair (same warm start and
    seed), a black bar at each filter's mean; ``floors`` (algorithm -> drop noise alone gives, as a fraction) a
    dashed line."""
    require_columns(table, ("algo", "condition", "pair", "drop"), "run table")
    algos = level_order(table["algo"], ALGO_ORDER)
    levels = level_order(table["condition"], CONDITION_ORDER)
    colors = level_colors(levels, "condition")
    fig, axes = panel_grid(1, len(algos), fig, (3.2, 2.8))
    for ax, algo in zip(axes[0], algos):
        part = table[table["algo"] == algo]
        wide = part.pivot_table(index="pair", columns="condition", values="drop")
        for _, pair in wide.iterrows():
            ax.plot(range(len(levels)), [100 * pair.get(c, np.nan) for c in levels], color="0.8", lw=0.8, zorder=1)
        for x, level in enumerate(levels):
            drops = 100 * part.loc[part["condition"] == level, "drop"].to_numpy()
            jitter = np.linspace(-0.12, 0.12, len(drops)) if len(drops) > 1 else np.zeros(1)
            ax.scatter(x + jitter, drops, s=14, color=colors[level], zorder=2)
            if len(drops):
                ax.plot([x - 0.25, x + 0.25], [drops.mean()] * 2, color="black", lw=2, zorder=3)
        if floors and algo in floors:
            ax.axhline(100 * floors[algo], color="0.4", ls="--", lw=1, zorder=0)
        ax.set_xticks(range(len(levels)), [level_label(c, "condition") for c in levels])
        ax.set_xlim(-0.6, len(levels) - 0.4)
        ax.set_title(f"{_setting(part, algo)}\n({runs_per_level(part, 'condition', levels)})")
        ax.set_ylabel("drop from peak to last reading\n(points of success)")
    handles = [Line2D([], [], color="0.5", marker="o", ls="none", ms=4, label="one run"),
               Line2D([], [], color="0.8", lw=0.8, label="its pair (warm start, seed)"),
               Line2D([], [], color="black", lw=2, label="mean over runs")]
    if floors:
        handles.append(Line2D([], [], color="0.4", ls="--", lw=1, label="drop from reading noise alone"))
    fig.legend(handles=handles, loc="outside lower center", ncol=entries_per_row(fig, len(handles), 2.0))
    return fig
