"""Run directories as DataFrames: the runs table, the per-step table, gradient-analysis tables, end values.

A run directory ``<root>/<run_id>/`` (layout: :mod:`ragen2.rundir`) holds

- ``config.json``: the :class:`ragen2.config.RunConfig` as a dict (required);
- ``summary.json``: final/best validation success, steps, early-stop reason (optional);
- ``val_episodes.jsonl``: each validation episode's success (optional; the runs table's ``val_episodes``: step ->
  per-board array, and ``start_episodes`` and ``final_episodes``: those of step 0 and of the last validation; None
  without it);
- ``metrics.jsonl``: one JSON object per logged step with ``step`` and slash-namespaced metrics
  (optional; non-finite floats are stored as the strings ``"nan"``, ``"inf"``, ``"-inf"``);
- gradient-analysis tables ``grad_analysis*.csv`` (optional, read by :func:`load_grad_tables`).

:func:`load_runs` returns two DataFrames: ``runs`` (one row per run: ``run_id``, the label columns
of :data:`LABEL_COLUMNS`, the flattened config as dotted columns such as ``trainer.algo`` or
``env.kwargs.slip_rate``, the summary as ``summary.<key>`` columns, and ``final_success`` /
``best_success`` / ``last_step``) and ``steps`` (tidy: ``run_id``, the label columns, ``step``,
``metric``, ``value``). JSON files are read through :mod:`ragen2.rundir`, the one reader of what a run
writes. Writing figures and tables is :mod:`ragen2.repro.artifacts`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragen2 import rundir
from ragen2.config import flatten, from_dict
from ragen2.filter import FilterConfig

LABEL_COLUMNS = ("env", "algo", "condition", "seed")
"""Short columns derived from the config that figures and tables group by."""

SUCCESS_METRIC = "val/success"
"""The per-step metric whose last value is a run's ``final_success``."""

EPISODE_COLUMNS = {"final_success": "final_episodes"}
"""A per-run value that is a mean over the validation boards -> the runs-table column holding its per-board outcomes
(``start_episodes``: the same at step 0), so that its intervals can include the evaluation's noise
(:func:`ragen2.repro.stats.paired_test`'s ``boards``)."""

MI_METRIC = "collapse_first_turn/mi_estimate"
"""The per-token MI proxy used as "the MI" in verdicts (the per-token estimate of docs/method.md §5.5)."""

_NON_FINITE = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "-infinity": -math.inf,
}


def filter_condition(filter_cfg: Mapping[str, Any]) -> str:
    """The filter label of a run: ``none`` when every group is always kept, else the strategy name.

    The rule is :attr:`ragen2.filter.FilterConfig.is_noop` (``top_p`` 1.0 *without* include_zero drops
    the zero-RV groups, so it is a filter); a missing ``filter`` section reads as the default config.
    """
    cfg = from_dict(FilterConfig, dict(filter_cfg), "filter")
    return "none" if cfg.is_noop else cfg.strategy


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in _NON_FINITE:
        return _NON_FINITE[value.strip().lower()]
    return None


def read_metrics_jsonl(path: str | Path) -> pd.DataFrame:
    """Long table (``step``, ``metric``, ``value``) of one ``metrics.jsonl``; numeric values only.

    Rows logged twice for the same ``(step, metric)`` keep the last value (a resumed run).
    """
    path = Path(path)
    records = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{lineno}: not valid JSON ({e})") from None
        if not isinstance(row, dict) or "step" not in row:
            raise ValueError(f"{path}:{lineno}: expected an object with a 'step' key, got {line[:80]!r}")
        step = _as_number(row["step"])
        if step is None or not math.isfinite(step):
            raise ValueError(f"{path}:{lineno}: bad step {row['step']!r}")
        for metric, raw in row.items():
            value = _as_number(raw) if metric != "step" else None
            if value is not None:
                records.append((int(step), metric, value))
    df = pd.DataFrame(records, columns=["step", "metric", "value"])
    df = df.drop_duplicates(["step", "metric"], keep="last")
    return df.sort_values(["metric", "step"], kind="stable").reset_index(drop=True)


def _summary_number(summary: Mapping[str, Any], keys: tuple[str, ...]) -> float:
    for key in keys:
        value = _as_number(summary.get(key))
        if value is not None:
            return value
    return math.nan


def _final_and_best(steps: pd.DataFrame, metric: str) -> tuple[float, float]:
    series = steps.loc[steps["metric"] == metric].dropna(subset=["value"]).sort_values("step")["value"]
    if series.empty:
        return math.nan, math.nan
    return float(series.iloc[-1]), float(series.max())


def find_run_dirs(root: str | Path, pattern: str = "*") -> list[Path]:
    """The run directories (:func:`ragen2.rundir.is_run_dir`) under ``root`` whose name matches ``pattern``, sorted.

    Raises:
        FileNotFoundError: ``root`` is missing or no directory matches.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"runs root {str(root)!r} is not a directory")
    dirs = sorted(p for p in root.glob(pattern) if rundir.is_run_dir(p))
    if not dirs:
        raise FileNotFoundError(
            f"no run directory with a config.json matches {pattern!r} under {str(root)!r}"
        )
    return dirs


def _labels(config: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`LABEL_COLUMNS` of one run, from its config."""
    return {
        "env": (config.get("env") or {}).get("name"),
        "algo": (config.get("trainer") or {}).get("algo"),
        "condition": filter_condition(config.get("filter") or {}),
        "seed": config.get("seed"),
    }


def _empty_steps() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": pd.Series(dtype="int64"),
            "metric": pd.Series(dtype=object),
            "value": pd.Series(dtype=float),
        }
    )


METRICS_TABLE = "metrics.parquet"
"""A bundled run's per-step metrics (:mod:`ragen2.repro.bundle`): :func:`read_metrics_jsonl`'s table, in Parquet."""


def _read_steps(run_dir: Path) -> pd.DataFrame:
    """The run's long per-step table: from ``metrics.jsonl``, else from a bundled run's :data:`METRICS_TABLE`."""
    if (run_dir / rundir.METRICS).is_file():
        return read_metrics_jsonl(run_dir / rundir.METRICS)
    if (run_dir / METRICS_TABLE).is_file():
        return pd.read_parquet(run_dir / METRICS_TABLE)
    return _empty_steps()


def read_runs(run_dirs: Iterable[str | Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(runs, steps)`` of the given run directories, in their order (see :func:`load_runs`)."""
    run_rows, step_frames = [], []
    for run_dir in map(Path, run_dirs):
        config = rundir.read_config_dict(run_dir)
        summary = rundir.read_summary(run_dir) if (run_dir / rundir.SUMMARY).is_file() else {}
        steps = _read_steps(run_dir)
        labels = _labels(config)
        final, best = _final_and_best(steps, SUCCESS_METRIC)
        if math.isnan(final):
            final = _summary_number(summary, ("final_val_success", SUCCESS_METRIC))
        if math.isnan(best):
            best = _summary_number(summary, ("best_val_success",))
        episodes = rundir.read_val_episodes(run_dir)
        row = {
            "run_id": run_dir.name,
            **labels,
            "final_success": final,
            "best_success": best,
            "last_step": int(steps["step"].max()) if len(steps) else -1,
            "start_episodes": episodes.get(0),
            "final_episodes": episodes[max(episodes)] if episodes else None,
            "val_episodes": episodes or None,
        }
        row.update(flatten(config))
        row.update(flatten(summary, "summary."))
        run_rows.append(row)
        step_frames.append(steps.assign(run_id=run_dir.name, **labels))
    runs = pd.DataFrame(run_rows)
    steps = pd.concat(step_frames, ignore_index=True)
    steps = steps[["run_id", *LABEL_COLUMNS, "step", "metric", "value"]]
    return runs, steps


def load_runs(root: str | Path, pattern: str = "*") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load every run directory under ``root`` whose name matches ``pattern`` (glob).

    ``final_success`` is the last finite ``val/success`` in ``metrics.jsonl``; when the run has no
    such metric it falls back to ``summary.json``'s ``final_val_success`` / ``val/success`` keys.
    ``best_success`` likewise (fallback ``best_val_success``).

    Args:
        root: folder holding run directories (``data/runs``).
        pattern: glob on the run-directory names, e.g. ``"sokoban__*"``.

    Returns:
        ``(runs, steps)``: one row per run, and the tidy per-step table (see the module docstring).

    Raises:
        FileNotFoundError: ``root`` is missing or no directory matches.
        ValueError: a malformed ``config.json``, ``summary.json`` or ``metrics.jsonl`` (named).
    """
    return read_runs(find_run_dirs(root, pattern))


GRAD_TABLES = "grad_analysis*.csv"
"""The gradient-analysis tables of a run (:mod:`ragen2.trainer.grad_analysis` writes ``grad_analysis.csv``)."""
_GRAD_REQUIRED = {"step", "bucket", "rv_mean", "task_norm", "reg_norm"}


def _grad_frames(run_dirs: Iterable[str | Path], filename: str) -> list[pd.DataFrame]:
    frames = []
    for run_dir in map(Path, run_dirs):
        labels = _labels(rundir.read_config_dict(run_dir))
        for csv_path in sorted(run_dir.glob(filename)):
            table = pd.read_csv(csv_path, dtype={"bucket": str})
            missing = _GRAD_REQUIRED - set(table.columns)
            if missing:
                raise ValueError(f"{csv_path}: missing column(s) {sorted(missing)}")
            frames.append(table.assign(run_id=run_dir.name, **labels, source=csv_path.name))
    return frames


def read_grad_tables(run_dirs: Iterable[str | Path], filename: str = GRAD_TABLES) -> pd.DataFrame:
    """The gradient-analysis CSVs of the given run directories, with ``run_id`` and label columns.

    Expected CSV columns include ``step, bucket, rv_mean, task_norm, kl_norm, entropy_norm, reg_norm,
    snr`` (see :mod:`ragen2.trainer.grad_analysis`). Runs without such a file are skipped.

    Raises:
        FileNotFoundError: none of the runs has one.
        ValueError: a table lacks a required column.
    """
    frames = _grad_frames(run_dirs, filename)
    if not frames:
        raise FileNotFoundError(f"no {filename!r} in the given runs")
    return pd.concat(frames, ignore_index=True)


def load_grad_tables(root: str | Path, pattern: str = "*", filename: str = GRAD_TABLES) -> pd.DataFrame:
    """:func:`read_grad_tables` of every run under ``root`` whose name matches ``pattern``.

    Raises:
        FileNotFoundError: no matching run has such a table.
    """
    frames = _grad_frames(find_run_dirs(root, pattern), filename)
    if not frames:
        raise FileNotFoundError(f"no {filename!r} in the runs matching {pattern!r} under {str(root)!r}")
    return pd.concat(frames, ignore_index=True)


def final_values(
    steps: pd.DataFrame, metrics: list[str] | tuple[str, ...], how: str = "last"
) -> pd.DataFrame:
    """One row per run with the final (``how="last"``) or mean-over-run (``"mean"``) value of each metric.

    Non-finite values are ignored; a run without a finite value of a metric gets NaN. Columns:
    ``run_id`` plus one column per metric (named as the metric).
    """
    if how not in ("last", "mean"):
        raise ValueError(f"how must be 'last' or 'mean', got {how!r}")
    sub = steps[steps["metric"].isin(metrics)].replace([np.inf, -np.inf], np.nan).dropna(subset=["value"])
    sub = sub.sort_values(["run_id", "metric", "step"], kind="stable")
    grouped = sub.groupby(["run_id", "metric"])["value"]
    agg = grouped.last() if how == "last" else grouped.mean()
    wide = agg.unstack("metric").reindex(columns=list(metrics))
    wide = wide.reindex(sorted(steps["run_id"].unique()))
    wide.columns.name = None
    return wide.rename_axis("run_id").reset_index()


def start_end_values(steps: pd.DataFrame, metric: str, window: int = 1) -> pd.DataFrame:
    """Per run: the mean of the first ``window`` and of the last ``window`` logged values of ``metric``.

    Only runs that log ``metric`` at ``2 * window`` or more steps (so the windows do not overlap) are kept.

    Returns:
        Index ``run_id``; columns ``first``, ``last`` and ``count`` (the number of logged values).
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window!r}")
    sub = steps[steps["metric"] == metric].dropna(subset=["value"]).sort_values("step", kind="stable")
    ends = sub.groupby("run_id")["value"].agg(first=lambda v: v.iloc[:window].mean(),
                                              last=lambda v: v.iloc[-window:].mean(), count="count")
    return ends[ends["count"] >= 2 * window]
