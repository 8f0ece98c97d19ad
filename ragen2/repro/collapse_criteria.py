"""What counts as template collapse in a training run, fixed before the runs that decide it.

The paper's template collapse: the reasoning stops depending on the input (MI and retrieval accuracy fall)
while it stays varied (the conditional entropy H(Z|X) does not fall), behind a preamble shared across
inputs. Two other ways for MI to fall must not count: *low-entropy collapse* (H(Z|X) falls with it) and an
*entropy blow-up into noise* (H(Z|X) shoots up, the texts become random, nothing is shared across
prompts). :func:`classify_run` applies the rules below to one run's logged steps; :data:`CRITERIA` holds
every threshold, each chosen from what was known before the deciding runs (docs/preregistrations.md §7.0: one MI
reading moves by 0.1-0.2 nats within a run; the paper-like falls seen at CPU scale were 0.13-0.67 nats).

A run is in **template collapse** when all of:

1. *MI fell*: the smoothed first-turn MI (per token; the mean of :data:`SMOOTH_READINGS` consecutive
   readings) ends at least ``mi_drop`` nats below its peak;
2. *retrieval fell*: the smoothed retrieval accuracy ends at least ``retrieval_drop`` below its value at
   the MI peak;
3. *entropy held*: the smoothed H(Z|X) at the end is no more than ``entropy_fall`` below its value at the
   MI peak (else: ``low_entropy_collapse``) and no more than ``noise_rise`` above its first reading (else:
   ``noise``);
4. *a shared template*: the shared-prefix share (:mod:`ragen2.metrics.templates`) ends at least
   ``template_rise`` above its first reading (without it: ``input_dependence_lost``, reported apart).

Otherwise the run is ``stable``. A condition of the regime map *collapses* when at least half of its
no-filter runs are in template collapse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

MI = "collapse_first_turn/mi_estimate"
RETRIEVAL = "collapse_first_turn/retrieval_accuracy"
ENTROPY = "collapse_first_turn/conditional_entropy_est"
SHARED_PREFIX = "collapse_first_turn/shared_prefix_share"
UNGROUNDED = "collapse_first_turn/ungrounded_share"
LENGTH = "rollout/response_length_mean"
SMOOTH_READINGS = 3
WIDE_METRICS = (MI, RETRIEVAL, ENTROPY, SHARED_PREFIX, UNGROUNDED, LENGTH, "val/success", "filter/zero_variance_count",
                "filter/kept_ratio")
"""The per-step metrics :func:`wide_steps` keeps by default: what the rules and the run tables read."""
REGIMES = ("template_collapse", "input_dependence_lost", "low_entropy_collapse", "noise", "stable")
REGIME_MEANINGS = {
    "template_collapse": "MI and retrieval fell, entropy held, a shared preamble rose",
    "input_dependence_lost": "MI and retrieval fell, entropy held, no shared preamble",
    "low_entropy_collapse": "MI fell with the entropy",
    "noise": "the entropy blew up (random text)",
    "stable": "none of the above",
}
"""Each regime of :data:`REGIMES` in a few words (figure legends)."""


@dataclass(frozen=True)
class Criteria:
    mi_drop: float = 0.2
    """Nats per token the smoothed MI must end below its peak (about twice a smoothed reading's noise)."""
    retrieval_drop: float = 0.1
    """Retrieval accuracy lost between the MI peak and the end."""
    entropy_fall: float = 0.1
    """Largest fall of H(Z|X) (nats per token) from the MI peak that still counts as 'entropy held'."""
    noise_rise: float = 1.0
    """A rise of H(Z|X) above its first reading larger than this is an entropy blow-up into noise."""
    template_rise: float = 0.1
    """Rise of the shared-prefix share from its first reading that marks a shared template."""
    collapsing_share: float = 0.5
    """Share of a condition's no-filter runs in template collapse for the condition to collapse."""


CRITERIA = Criteria()


def _smoothed(values: pd.Series) -> pd.Series:
    return values.rolling(SMOOTH_READINGS, min_periods=1).mean()


def _readings(steps: pd.DataFrame, metric: str) -> pd.Series:
    if metric not in steps.columns:
        return pd.Series(dtype=float)
    rows = steps[["step", metric]].dropna().sort_values("step")
    return pd.Series(rows[metric].to_numpy(dtype=float), index=rows["step"].to_numpy())


def classify_run(steps: pd.DataFrame, criteria: Criteria = CRITERIA) -> dict:
    """The regime of one run (:data:`REGIMES`) and the numbers the rules compared.

    ``steps`` is the run's rows of a steps frame (``step`` plus the metric columns; rows without an MI
    reading are ignored). A run with fewer than two MI readings is ``stable`` with NaN numbers. ``mi_fall_step`` is
    the first logged step whose smoothed MI stands ``mi_drop`` below its peak so far (NaN if none does): when the
    first rule began to hold.
    """
    mi = _smoothed(_readings(steps, MI))
    out = {"regime": "stable", "mi_start": math.nan, "mi_peak": math.nan, "mi_end": math.nan,
           "mi_drop": math.nan, "mi_fall_step": math.nan, "retrieval_drop": math.nan,
           "entropy_change_from_peak": math.nan, "entropy_rise_from_start": math.nan, "shared_prefix_rise": math.nan,
           "ungrounded_rise": math.nan, "length_ratio": math.nan, "readings": int(len(mi))}
    if len(mi) < 2:
        return out
    peak_step = mi.idxmax()
    fallen = mi[mi.cummax() - mi >= criteria.mi_drop]
    out["mi_fall_step"] = float(fallen.index[0]) if len(fallen) else math.nan

    def at(metric: str) -> tuple[float, float, float]:
        series = _smoothed(_readings(steps, metric))
        if series.empty:
            return math.nan, math.nan, math.nan
        raw = _readings(steps, metric)
        upto = series.loc[:peak_step]
        return float(raw.iloc[0]), float((upto if len(upto) else series).iloc[-1]), float(series.iloc[-1])

    ret_first, ret_peak, ret_end = at(RETRIEVAL)
    ent_first, ent_peak, ent_end = at(ENTROPY)
    pre_first, _, pre_end = at(SHARED_PREFIX)
    ung_first, _, ung_end = at(UNGROUNDED)
    len_first, _, len_end = at(LENGTH)
    out.update(mi_start=float(_readings(steps, MI).iloc[0]), mi_peak=float(mi.max()), mi_end=float(mi.iloc[-1]),
               mi_drop=float(mi.max() - mi.iloc[-1]), retrieval_drop=ret_peak - ret_end,
               entropy_change_from_peak=ent_end - ent_peak, entropy_rise_from_start=ent_end - ent_first,
               shared_prefix_rise=pre_end - pre_first, ungrounded_rise=ung_end - ung_first,
               length_ratio=len_end / len_first if len_first else math.nan)
    c = criteria
    if not (out["mi_drop"] >= c.mi_drop and out["retrieval_drop"] >= c.retrieval_drop):
        return out
    if out["entropy_rise_from_start"] > c.noise_rise:
        out["regime"] = "noise"
    elif out["entropy_change_from_peak"] < -c.entropy_fall:
        out["regime"] = "low_entropy_collapse"
    elif out["shared_prefix_rise"] >= c.template_rise:
        out["regime"] = "template_collapse"
    else:
        out["regime"] = "input_dependence_lost"
    return out


def classify_runs(steps: pd.DataFrame, criteria: Criteria = CRITERIA) -> pd.DataFrame:
    """:func:`classify_run` for every ``run_id`` of a steps frame, one row each."""
    rows = [{"run_id": rid, **classify_run(group, criteria)} for rid, group in steps.groupby("run_id", sort=True)]
    return pd.DataFrame(rows)


def condition_collapses(regimes: pd.Series, criteria: Criteria = CRITERIA) -> bool:
    """Whether a condition's no-filter runs collapse: at least ``collapsing_share`` of them in template collapse."""
    regimes = pd.Series(regimes)
    return bool(len(regimes) and np.mean(regimes == "template_collapse") >= criteria.collapsing_share)


def wide_steps(steps: pd.DataFrame, metrics: Sequence[str] = WIDE_METRICS) -> pd.DataFrame:
    """The tidy steps frame as one row per (run, step) with a column per metric (what :func:`classify_run` reads),
    keeping each run's ``condition`` and ``seed`` (:data:`ragen2.repro.runs.LABEL_COLUMNS`)."""
    part = steps[steps["metric"].isin(metrics)]
    wide = part.pivot_table(index=["run_id", "condition", "seed", "step"], columns="metric", values="value",
                            aggfunc="last")
    wide.columns.name = None
    return wide.reset_index()


def last_smoothed(frame: pd.DataFrame, metric: str, window: int = SMOOTH_READINGS) -> float:
    """The mean of a run's last ``window`` readings of ``metric`` (NaN without any)."""
    values = frame[["step", metric]].dropna().sort_values("step")[metric] if metric in frame else pd.Series(dtype=float)
    return float(values.tail(window).mean()) if len(values) else math.nan


def plane_steps(steps: pd.DataFrame, smooth: int = SMOOTH_READINGS) -> pd.DataFrame:
    """Smoothed first-turn (H(Z|X), MI) readings per run, the path a run takes on the plane of the four regimes:
    ``run_id, seed, condition, step, cond_entropy, mi`` (rolling means of ``smooth`` readings)."""
    wide = wide_steps(steps, (MI, ENTROPY)).dropna()
    out = []
    for (rid, condition, seed), frame in wide.groupby(["run_id", "condition", "seed"]):
        frame = frame.sort_values("step")
        out.append(pd.DataFrame({
            "run_id": rid, "seed": seed, "condition": condition, "step": frame["step"].to_numpy(),
            "cond_entropy": frame[ENTROPY].rolling(smooth, min_periods=1).mean().to_numpy(),
            "mi": frame[MI].rolling(smooth, min_periods=1).mean().to_numpy()}))
    cols = ["run_id", "seed", "condition", "step", "cond_entropy", "mi"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def run_regimes(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per run of ``runs``: ``run_id, seed, condition, regime`` (:func:`classify_run`) and the numbers behind
    it (``mi_fall_step``: when the MI had fallen), with ``final_mi`` (smoothed, as the rules read it) and
    ``final_success`` (mean of the last readings).

    ``steps`` is a tidy steps frame (:func:`ragen2.repro.runs.read_runs`) holding at least those runs.
    """
    wide = wide_steps(steps[steps["run_id"].isin(set(runs["run_id"]))])
    rows = []
    for run in runs.itertuples(index=False):
        frame = wide[wide["run_id"] == run.run_id]
        klass = classify_run(frame)
        rows.append({"run_id": run.run_id, "seed": run.seed, "condition": run.condition, "regime": klass["regime"],
                     "final_mi": klass["mi_end"], "mi_drop": klass["mi_drop"], "mi_fall_step": klass["mi_fall_step"],
                     "shared_prefix_rise": klass["shared_prefix_rise"], "length_ratio": klass["length_ratio"],
                     "final_success": last_smoothed(frame, "val/success")})
    return pd.DataFrame(rows, columns=["run_id", "seed", "condition", "regime", "final_mi", "mi_drop", "mi_fall_step",
                                       "shared_prefix_rise", "length_ratio", "final_success"])


def criteria_table(criteria: Criteria = CRITERIA) -> pd.DataFrame:
    """The thresholds as a two-column table (for the notebooks and the README)."""
    return pd.DataFrame({"threshold": list(asdict(criteria)), "value": list(asdict(criteria).values())})
