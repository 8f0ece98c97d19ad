"""Shared drawing helpers of the paper's figures: the package style, figure and axes setup, level order, colours.

Every figure function of :mod:`ragen2.repro.figures` is wrapped in :func:`styled` (drawn under
``ragen2/repro/style.mplstyle``) and draws on a figure made by :func:`new_figure`, which has its own Agg
canvas: no pyplot, no global backend switch, no global figure registry.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import style as mpl_style
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ragen2.repro.tables import ALGO_LABELS, ENV_LABELS

STYLE_PATH = str(resources.files("ragen2.repro") / "style.mplstyle")
"""The package's matplotlib style file."""

CONDITION_ORDER = ("top_p", "top_k", "top_k_abs", "min_p", "none")
"""Filter conditions in legend order."""
CONDITION_COLORS = dict(zip(CONDITION_ORDER, ("#0173b2", "#de8f05", "#cc78bc", "#029e73", "#949494")))
"""One fixed colour per filter condition, the same in every figure."""
ALGO_ORDER = ("ppo", "dapo", "grpo", "dr_grpo")
"""Algorithms in the paper's row order."""
LEVEL_LABELS = {
    "condition": {"top_p": "Top-p", "top_k": "Top-k", "top_k_abs": "Top-k (absolute)", "min_p": "min-p",
                  "none": "no filter"},
    "algo": ALGO_LABELS,
    "env": ENV_LABELS,
}
"""Column -> value -> what a reader sees in legends and titles (other values are shown as they are)."""
HUE_TITLES = {"condition": "filter", "algo": "algorithm", "env": "environment"}
"""Column -> the legend title a reader sees (other columns are shown by name)."""
BAND = "band: ± 1 std over seeds"
"""What the shaded band around a mean curve is."""


def styled(func: Callable[..., Figure]) -> Callable[..., Figure]:
    """Run ``func`` under the package style and lay the figure out while the style is active."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with mpl_style.context(STYLE_PATH):
            fig = func(*args, **kwargs)
            fig.draw_without_rendering()  # creates ticks and text with the style's sizes
        return fig

    return wrapper


def new_figure(width: float, height: float) -> Figure:
    """An empty figure with its own Agg canvas and constrained layout (not registered with pyplot)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def panel_grid(
    n_rows: int, n_cols: int, fig: Figure | None, panel_size: tuple[float, float] = (3.2, 2.6), **kw: Any
) -> tuple[Figure, np.ndarray]:
    """An ``n_rows x n_cols`` grid of axes on ``fig`` (which must be empty) or on a new figure sized per panel."""
    if fig is None:
        fig = new_figure(panel_size[0] * n_cols, panel_size[1] * n_rows)
    elif fig.axes:
        raise ValueError(f"fig must be empty, it already has {len(fig.axes)} axes")
    axes = fig.subplots(n_rows, n_cols, squeeze=False, **kw)
    return fig, axes


def wrapped_panels(n: int, fig: Figure | None, panel_size: tuple[float, float], max_cols: int = 4,
                   **kw: Any) -> tuple[Figure, list[Axes]]:
    """``n`` panels in rows of at most ``max_cols`` (:func:`panel_grid`); the grid's unused axes are hidden."""
    n_cols = min(max_cols, n)
    fig, axes = panel_grid(math.ceil(n / n_cols), n_cols, fig, panel_size, **kw)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, list(axes.ravel()[:n])


def single_axes(ax: Axes | None, size: tuple[float, float] = (3.6, 2.8)) -> tuple[Figure, Axes]:
    """``ax`` and its figure, or a new figure of ``size`` with one axes."""
    if ax is not None:
        return ax.figure, ax
    fig = new_figure(*size)
    return fig, fig.add_subplot()


def require_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Raise a message naming ``what`` unless ``df`` is a non-empty DataFrame with ``columns``."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what}: expected a DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; has {list(df.columns)}")
    if df.empty:
        raise ValueError(f"{what}: the table is empty")


def level_order(values: pd.Series, preferred: Sequence[str] = ()) -> list:
    """Distinct values: the ``preferred`` ones first (in that order), then the rest sorted."""
    present = list(pd.unique(values.dropna()))
    first = [v for v in preferred if v in present]
    rest = sorted((v for v in present if v not in first), key=lambda v: (isinstance(v, str), v))
    return first + rest


def level_colors(levels: Sequence, column: str) -> dict:
    """Level -> colour: the fixed condition colours for filter conditions, else the colourblind palette."""
    if column == "condition" and all(v in CONDITION_COLORS for v in levels):
        return {v: CONDITION_COLORS[v] for v in levels}
    colors = sns.color_palette("colorblind", max(len(levels), 1))
    return dict(zip(levels, colors))


def level_label(value: Any, column: str) -> str:
    """``value`` of ``column`` as a reader should see it (:data:`LEVEL_LABELS`; ``top_p`` -> ``Top-p``)."""
    return LEVEL_LABELS.get(column, {}).get(value, tick_label(value))


def runs_per_level(part: pd.DataFrame, column: str, levels: Sequence) -> str:
    """How many runs each level of ``column`` has in ``part``: ``4 runs each`` or ``runs: Top-p 4, no filter 3``."""
    n = part.groupby(column)["run_id"].nunique()
    counts = [int(n.get(v, 0)) for v in levels]
    if len(set(counts)) == 1:
        return f"{counts[0]} run{'s' if counts[0] != 1 else ''}" + (" each" if len(levels) > 1 else "")
    return "runs: " + ", ".join(f"{level_label(v, column)} {c}" for v, c in zip(levels, counts))


def curve_legend(fig: Figure, levels: Sequence, column: str, *, mark: str = "line: mean over seeds",
                 band: str | None = BAND) -> None:
    """One legend for all panels, below them (off the data): a line per level, and what the lines and bands are."""
    colors = level_colors(levels, column)
    handles = [Line2D([], [], color=colors[v], label=level_label(v, column)) for v in levels]
    handles.append(Line2D([], [], color="none", label=mark))
    if band:
        handles.append(Patch(facecolor="0.5", alpha=0.25, label=band))
    fig.legend(handles=handles, loc="outside lower center", ncol=entries_per_row(fig, len(handles)))


def entries_per_row(fig: Figure, entries: int, inches: float = 1.6) -> int:
    """Legend columns for a legend below ``fig``'s panels: about ``inches`` an entry, never wider than the figure."""
    return max(1, min(entries, int(fig.get_figwidth() // inches)))


def metric_rows(steps: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The finite rows of one metric in a tidy ``steps`` table (an unknown metric names some known ones)."""
    require_columns(steps, ("metric", "step", "value"), "steps")
    sub = steps[steps["metric"] == metric]
    if sub.empty:
        known = sorted(steps["metric"].unique())[:30]
        raise ValueError(f"metric {metric!r} not in steps (some known metrics: {known})")
    return sub.replace([np.inf, -np.inf], np.nan).dropna(subset=["value"])


def numeric_or_label(v: Any) -> tuple[int, float, str]:
    """Sort key: numbers ascending, then labels."""
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, math.inf, str(v))


def tick_label(v: Any) -> str:
    """A tick's text: numbers in ``%g``, anything else as is."""
    return f"{v:g}" if isinstance(v, (int, float, np.number)) else str(v)
