"""The reference's early stops as a factor, replayed on runs trained without them.

The reference's main-table runs stop on three rules (docs/method.md §4.7, :mod:`ragen2.trainer.early_stop`): five
steps in a row whose filter kept nothing; the in-group reward std below 10 % of its mean over the first 10 non-empty
steps for 10 steps in a row; five validations in a row under 1 % success. A stop only ends a run: every step before
it is the same computation with the stops on or off (each step's rollout and update draw from their own seeded
streams). So a run trained with the stops off holds the run with the stops on as a prefix, and
:func:`replay_stop` finds where that prefix ends by feeding the run's logged metrics to the trainer's own
:class:`~ragen2.trainer.early_stop.EarlyStopper`, in the order the training loop calls it.

Scoring a stopped run as the reference does, by its validation at the stop: a run trained with the stops on
validates at the step it stops; the replayed run has that validation only when the step was a validation step
anyway, so otherwise the last validation before the stop stands in for it (at most ``test_freq - 1`` steps
earlier). :func:`stop_table` says which step scored each run.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ragen2.repro.collapse_criteria import wide_steps
from ragen2.repro.stats import pair_by_seed, paired_test
from ragen2.trainer.early_stop import EarlyStopper

REFERENCE_STOPS = {"empty_stop_steps": 5, "rv_collapse": True, "low_val_patience": 5}
"""The reference's settings of the three rules (all on)."""
STD = "filter/reward_std_mean"
EMPTY = "filter/consecutive_empty"
SUCCESS = "val/success"
METRICS = (STD, EMPTY, SUCCESS)
"""The per-step metrics the replay reads (every run logs them, stops on or off)."""


def replay_stop(frame: pd.DataFrame) -> tuple[int | None, str]:
    """The step at which the reference's stops would have ended one run, and the rule that fired.

    ``frame`` is the run's rows of a wide steps frame (``step`` and the :data:`METRICS` columns). Step 0's
    validation is counted first; then per step the filter's outcome (an empty step when ``filter/consecutive_empty``
    is positive, else its mean in-group reward std) and, where the step validated, its success.

    Returns:
        ``(step, reason)``, or ``(None, "")`` when no rule fires.
    """
    stopper = EarlyStopper(**REFERENCE_STOPS)
    for values in frame.sort_values("step").to_dict("records"):
        step = int(values["step"])
        if step > 0:
            empty = values.get(EMPTY)
            if empty is not None and not math.isnan(empty) and empty > 0:
                stopper.on_empty_step()
            elif values.get(STD) is not None and not math.isnan(values[STD]):
                stopper.on_step(values[STD])
        success = values.get(SUCCESS)
        if success is not None and not math.isnan(success):
            stopper.on_validation(success)
        if stopper.reason is not None:
            return step, stopper.reason
    return None, ""


def stop_table(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per run of ``runs``: where the reference's stops end it and its success with the stops off and on.

    Columns: ``run_id, seed, condition, stop_step`` (NaN: never stopped), ``stop_reason``, ``success_off`` (the last
    validation), ``scored_step`` (the validation that scores the run with the stops on) and ``success_on``.
    ``steps`` is a tidy steps frame (:func:`ragen2.repro.runs.read_runs`) holding the runs.
    """
    wide = wide_steps(steps[steps["run_id"].isin(set(runs["run_id"]))], METRICS)
    for column in METRICS:
        if column not in wide:
            wide[column] = math.nan
    rows = []
    episodes = runs["val_episodes"] if "val_episodes" in runs else pd.Series(None, index=runs.index, dtype=object)
    for run, per_board in zip(runs.itertuples(index=False), episodes):
        frame = wide[wide["run_id"] == run.run_id]
        stop, reason = replay_stop(frame)
        validations = frame[["step", SUCCESS]].dropna().sort_values("step")
        before = validations if stop is None else validations[validations["step"] <= stop]
        last = int(validations["step"].iloc[-1]) if len(validations) else None
        scored = int(before["step"].iloc[-1]) if len(before) else None
        boards = per_board if isinstance(per_board, dict) else {}
        rows.append({"run_id": run.run_id, "seed": run.seed, "condition": run.condition,
                     "stop_step": math.nan if stop is None else stop, "stop_reason": reason,
                     "success_off": float(validations[SUCCESS].iloc[-1]) if len(validations) else math.nan,
                     "scored_step": math.nan if scored is None else scored,
                     "success_on": float(before[SUCCESS].iloc[-1]) if len(before) else math.nan,
                     "episodes_off": boards.get(last), "episodes_on": boards.get(scored)})
    return pd.DataFrame(rows, columns=["run_id", "seed", "condition", "stop_step", "stop_reason", "success_off",
                                       "scored_step", "success_on", "episodes_off", "episodes_on"])


def stops_comparison(table: pd.DataFrame, baseline: str = "none") -> pd.DataFrame:
    """Per filter condition and stops setting (off, on): runs, runs stopped, mean success and the paired difference
    from ``baseline`` over seeds (mean, 95 % t-interval, paired t p; with the evaluation's noise where the runs kept
    per-board records). ``table`` is :func:`stop_table`."""
    rows = []
    for condition in sorted(table["condition"].unique(), key=lambda c: (c != baseline, c)):
        part = table[table["condition"] == condition]
        for stops, column in (("off", "success_off"), ("on", "success_on")):
            row = {"condition": condition, "stops": stops, "runs": len(part),
                   "stopped": int(part["stop_step"].notna().sum()) if stops == "on" else 0,
                   "mean_success": float(part[column].mean()), "diff_vs_" + baseline: math.nan,
                   "t_ci_low": math.nan, "t_ci_high": math.nan, "t_p": math.nan}
            if condition != baseline:
                pairs = pair_by_seed(table[table["condition"].isin([condition, baseline])], column, "condition",
                                     condition, baseline)
                if len(pairs) >= 2:
                    result = paired_test(pairs[condition].to_numpy(), pairs[baseline].to_numpy(),
                                         boards=_boards(table, column, condition, baseline, pairs.index))
                    row.update({"diff_vs_" + baseline: result.mean_diff, "t_ci_low": result.t_ci_low,
                                "t_ci_high": result.t_ci_high, "t_p": result.t_p})
            rows.append(row)
    return pd.DataFrame(rows)


def _boards(table: pd.DataFrame, column: str, condition: str, baseline: str, seeds) -> np.ndarray | None:
    """Per-board differences of ``column``'s validation, ``condition`` minus ``baseline``, at the paired ``seeds``
    (None where a run kept no per-board record): the evaluation's noise in the interval."""
    episodes = "episodes_off" if column == "success_off" else "episodes_on"
    if episodes not in table:
        return None
    sides = [table[table["condition"] == c].set_index("seed")[episodes].reindex(seeds) for c in (condition, baseline)]
    if any(x is None or not isinstance(x, np.ndarray) for side in sides for x in side):
        return None
    return np.stack(sides[0].to_list()) - np.stack(sides[1].to_list())
