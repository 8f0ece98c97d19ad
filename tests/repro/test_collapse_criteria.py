"""The template-collapse rules on synthetic runs: each regime, and the thresholds at their edges."""

import math

import numpy as np
import pandas as pd
import pytest

from ragen2.repro.collapse_criteria import (
    CRITERIA,
    ENTROPY,
    LENGTH,
    MI,
    RETRIEVAL,
    SHARED_PREFIX,
    UNGROUNDED,
    classify_run,
    classify_runs,
    condition_collapses,
    criteria_table,
)

STEPS = np.arange(1, 201, 10)


def _run(mi, retrieval, entropy, prefix, run_id="r", ungrounded=None, length=None):
    n = len(STEPS)
    ramp = np.linspace(0, 1, n)

    def path(a, b):
        return a + (b - a) * ramp

    return pd.DataFrame({"run_id": run_id, "step": STEPS, MI: path(*mi), RETRIEVAL: path(*retrieval),
                         ENTROPY: path(*entropy), SHARED_PREFIX: path(*prefix),
                         UNGROUNDED: path(*(ungrounded or prefix)), LENGTH: path(*(length or (28, 28)))})


@pytest.mark.parametrize("kwargs, regime", [
    (dict(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.6)), "template_collapse"),
    (dict(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.1)), "input_dependence_lost"),
    (dict(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.1), prefix=(0.1, 0.6)), "low_entropy_collapse"),
    (dict(mi=(0.5, -0.1), retrieval=(0.7, 0.2), entropy=(0.9, 7.6), prefix=(0.1, 0.0)), "noise"),
    (dict(mi=(0.6, 0.9), retrieval=(0.8, 0.95), entropy=(0.6, 0.2), prefix=(0.1, 0.0)), "stable"),
    (dict(mi=(0.9, 0.75), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.6)), "stable"),  # fell < 0.2
    (dict(mi=(0.9, 0.4), retrieval=(0.9, 0.85), entropy=(0.4, 0.45), prefix=(0.1, 0.6)), "stable"),  # retrieval held
])
def test_each_regime(kwargs, regime):
    assert classify_run(_run(**kwargs))["regime"] == regime


def test_the_numbers_compared_come_back_and_mi_is_smoothed():
    out = classify_run(_run(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.6)))
    assert out["readings"] == len(STEPS) and out["mi_start"] == pytest.approx(0.9)
    assert out["mi_end"] == pytest.approx(np.mean(np.linspace(0.9, 0.4, len(STEPS))[-3:]))
    assert out["mi_drop"] >= CRITERIA.mi_drop and out["shared_prefix_rise"] > 0.4
    # a single low reading at the end is smoothed away: no collapse from one noisy point
    steps = _run(mi=(0.9, 0.9), retrieval=(0.9, 0.9), entropy=(0.4, 0.4), prefix=(0.1, 0.1))
    steps.loc[steps.index[-1], [MI, RETRIEVAL]] = [0.5, 0.6]
    assert classify_run(steps)["regime"] == "stable"


def test_the_mi_fall_step_is_the_first_reading_the_first_rule_holds_at():
    out = classify_run(_run(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.6)))
    smoothed = pd.Series(np.linspace(0.9, 0.4, len(STEPS))).rolling(3, min_periods=1).mean().to_numpy()
    first = int(np.argmax(smoothed.max() - smoothed >= CRITERIA.mi_drop))
    assert out["mi_fall_step"] == STEPS[first] and STEPS[first - 1] < out["mi_fall_step"] < STEPS[-1]
    # measured from the peak so far: a rise first, then the fall
    rise = _run(mi=(0.5, 0.5), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.6))
    rise[MI] = np.r_[np.linspace(0.3, 0.9, 10), np.linspace(0.9, 0.3, 10)]
    out = classify_run(rise)
    assert STEPS[10] < out["mi_fall_step"] and out["mi_drop"] >= CRITERIA.mi_drop
    held = classify_run(_run(mi=(0.6, 0.9), retrieval=(0.8, 0.95), entropy=(0.6, 0.2), prefix=(0.1, 0.0)))
    assert math.isnan(held["mi_fall_step"])


def test_too_few_readings_and_missing_metrics():
    one = _run(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.4), prefix=(0.1, 0.6)).iloc[:1]
    out = classify_run(one)
    assert out["regime"] == "stable" and math.isnan(out["mi_drop"])
    no_prefix = _run(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.6)).drop(columns=SHARED_PREFIX)
    assert classify_run(no_prefix)["regime"] == "input_dependence_lost"


def test_runs_and_conditions():
    steps = pd.concat([_run(mi=(0.9, 0.4), retrieval=(0.9, 0.5), entropy=(0.4, 0.45), prefix=(0.1, 0.6), run_id="a"),
                       _run(mi=(0.6, 0.9), retrieval=(0.8, 0.95), entropy=(0.6, 0.5), prefix=(0.1, 0.0), run_id="b")])
    table = classify_runs(steps)
    assert table["run_id"].tolist() == ["a", "b"] and table["regime"].tolist() == ["template_collapse", "stable"]
    assert condition_collapses(table["regime"]) and not condition_collapses(pd.Series(["stable", "noise"]))
    assert not condition_collapses(pd.Series([], dtype=str))
    assert set(criteria_table()["threshold"]) == {"mi_drop", "retrieval_drop", "entropy_fall", "noise_rise",
                                                  "template_rise", "collapsing_share"}
