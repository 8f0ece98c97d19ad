"""Preconditions: each claim's measured on synthetic runs, the gate that turns a verdict into untested, the files."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragen2.repro import preconditions as pc
from ragen2.repro.claims import Claim


def _val_steps(curves: dict[str, list[float]], every: int = 10) -> pd.DataFrame:
    """A tidy steps table with ``val/success`` readings every ``every`` steps from step 0."""
    rows = [{"run_id": rid, "step": i * every, "metric": pc.VAL_METRIC, "value": v}
            for rid, values in curves.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_validation_gains_read_final_or_peak_minus_step_zero_in_points():
    steps = _val_steps({"a": [0.2, 0.5, 0.3], "b": [0.4, 0.4, 0.6], "no_start": [0.1]})
    final = pc.validation_gains(steps, ["a", "b", "no_start"])
    assert final.to_dict() == pytest.approx({"a": 10.0, "b": 20.0})
    assert pc.validation_gains(steps, ["a"], peak=True)["a"] == pytest.approx(30.0)


def test_rl_learns_holds_at_the_threshold_and_is_not_measured_without_runs():
    steps = _val_steps({"a": [0.20, 0.36], "b": [0.10, 0.24]})
    p = pc.rl_learns("C1", steps, ["a", "b"], where="no-filter runs")
    assert p.value == pytest.approx(15.0) and p.held is True and "over 2 no-filter runs" in p.measured
    low = pc.rl_learns("C1", _val_steps({"a": [0.2, 0.25]}), ["a"], where="runs")
    assert low.held is False and low.value == pytest.approx(5.0)
    absent = pc.rl_learns("C7", steps, [], where="sweep runs")
    assert absent.held is None and math.isnan(absent.value) and absent.measured.startswith("not measured")


def test_gate_turns_a_verdict_untested_only_where_a_precondition_failed():
    claim = Claim("C1", "disagree", "diff -2")
    held = pc.Precondition("C1", "RL learns", "gain >= 15", "gain +20", 20.0, True)
    unknown = pc.Precondition("C1", "x", "y", "not measured", math.nan, None)
    other = pc.Precondition("C5", "slip", "turns > 1", "1 turn", 1.0, False)
    assert pc.gate(claim, [held, unknown, other]) is claim
    failed = pc.Precondition("C1", "RL learns", "gain >= 15", "gain +4", 4.0, False)
    gated = pc.gate(claim, [held, failed])
    assert gated.verdict == "untested"
    assert gated.evidence == "precondition unmet: RL learns (gain +4; needs gain >= 15) || the test alone: disagree: diff -2"


def test_c1_reads_only_the_no_filter_runs():
    runs = pd.DataFrame({"run_id": ["n", "f"], "condition": ["none", "top_p"]})
    steps = _val_steps({"n": [0.2, 0.25], "f": [0.2, 0.9]})
    (p,) = pc.c1_preconditions(runs, steps, screen="")
    assert p.value == pytest.approx(5.0) and p.held is False and p.measured.endswith("over 1 no-filter runs of the C1 "
                                                                                     "comparison")
    (cited,) = pc.c1_preconditions(runs, steps, screen="learning screen: none")
    assert cited.measured.endswith("; learning screen: none") and cited.held is False


def test_c2_spread_within_arms_against_noise_and_the_share_the_arms_explain():
    runs = pd.DataFrame({"env": ["frozenlake"] * 6, "condition": ["none"] * 3 + ["top_k"] * 3,
                         "filter.value": [1.0] * 3 + [0.25] * 3, "env.kwargs.success_rate": [0.98] * 6,
                         "final_success": [0.9, 0.6, 0.75, 0.3, 0.05, 0.18], "rollout.val_groups": [512] * 6})
    noise, share = pc.c2_preconditions(runs)
    assert noise.held is True and noise.value > pc.NOISE_FACTOR and "in 2 arms" in noise.measured
    assert share.held is False and share.value > 0.5 and share.gates == "pooled reading"
    # the arms' means apart, the pooled reading stands; a flat success within arms is noise
    mixed = runs.assign(final_success=[0.9, 0.3, 0.6, 0.85, 0.32, 0.6])
    assert pc.c2_preconditions(mixed)[1].held is True
    flat = runs.assign(final_success=[0.5] * 3 + [0.3] * 3)
    assert pc.c2_preconditions(flat)[0].held is False
    # the condition share gates only the pooled reading, not the verdict
    claim = Claim("C2", "disagree", "within arms")
    assert pc.gate(claim, [share]) == claim
    assert pc.pooled_untested([noise, share], "C2").startswith("filter condition does not explain the spread (R^2")
    assert pc.pooled_untested([noise], "C2") is None


def test_rl_learns_interval_includes_the_evaluation_noise_of_the_shared_boards():
    """Two runs gaining exactly the same: without per-board records the interval has no width; with them it has the
    width the boards' sampling gives, and the measured text says so."""
    steps = _val_steps({"a": [0.25, 0.50], "b": [0.25, 0.50]})
    bare = pc.rl_learns("C1", steps, ["a", "b"], where="runs")
    assert "[+25.0, +25.0]" in bare.measured
    rng = np.random.default_rng(0)
    start = (rng.random(512) < 0.25).astype(float)
    end = start.copy()
    flip = np.flatnonzero(start == 0)[: int(0.25 * 512)]
    end[flip] = 1.0
    episodes = {0: start, 10: end}
    gain = 100 * (end.mean() - start.mean())
    steps = _val_steps({"a": [start.mean(), end.mean()], "b": [start.mean(), end.mean()]})
    runs = pd.DataFrame({"run_id": ["a", "b"], "val_episodes": [episodes, episodes]})
    noisy = pc.rl_learns("C1", steps, ["a", "b"], where="runs", runs=runs)
    assert noisy.value == pytest.approx(gain)
    lo, hi = (float(x) for x in noisy.measured.split("[")[1].split("]")[0].split(","))
    assert lo < gain - 2 and hi == pytest.approx(gain + (gain - lo), abs=0.11)  # symmetric about the gain
    assert "evaluation noise of 512 boards" in noisy.measured


def test_c3_counts_failing_prompts_in_each_runs_lowest_rv_quartile():
    rows = []
    for rid in ("r1", "r2"):
        for prompt in range(8):
            rv = prompt / 10  # prompts 0 and 1 form the lowest quartile
            success = 0.0 if (rid == "r1" and prompt < 2) else 1.0
            rows.append({"run_id": rid, "phase": "end", "prompt": prompt, "success": success, "rv": rv})
    (p,) = pc.c3_preconditions(pd.DataFrame(rows))
    assert p.value == pytest.approx(0.5) and p.held is True and "4 lowest-quartile prompts over 2 runs" in p.measured
    (start,) = pc.c3_preconditions(pd.DataFrame(rows), phase="start")
    assert start.held is None


def test_c4_regulariser_and_zero_variance_share():
    runs = pd.DataFrame({"run_id": ["a", "b"], "trainer.entropy_coef": [0.001, 0.001], "trainer.kl_coef": [0.0, 0.0]})
    rows = []
    for rid, zv in (("a", [0, 2]), ("b", [1, 1])):
        for step, count in enumerate(zv, start=1):
            rows += [{"run_id": rid, "step": step, "metric": "filter/zero_variance_count", "value": count},
                     {"run_id": rid, "step": step, "metric": "filter/total_groups", "value": 8}]
    reg, zv = pc.c4_preconditions(runs, pd.DataFrame(rows))
    assert reg.held is True and zv.value == pytest.approx(0.125) and zv.held is True
    no_reg, _ = pc.c4_preconditions(runs.assign(**{"trainer.entropy_coef": 0.0}), pd.DataFrame(rows))
    assert no_reg.held is False


def test_c4_counts_groups_without_task_signal_where_the_runs_logged_them():
    """A group whose rollouts all fail but differ by a format penalty has reward spread and no task signal: the share
    C4 reads is the task-signal one, the exact zero-spread share beside it."""
    runs = pd.DataFrame({"run_id": ["a"], "trainer.entropy_coef": [0.001], "trainer.kl_coef": [0.0]})
    rows = []
    for step in (1, 2):
        rows += [{"run_id": "a", "step": step, "metric": "filter/zero_variance_count", "value": 0},
                 {"run_id": "a", "step": step, "metric": "filter/zero_task_spread_count", "value": 2},
                 {"run_id": "a", "step": step, "metric": "filter/total_groups", "value": 8}]
    _, share = pc.c4_preconditions(runs, pd.DataFrame(rows))
    assert share.value == pytest.approx(0.25) and share.held is True
    assert "without task signal" in share.measured and "zero reward spread 0%" in share.measured


def test_c5_needs_more_than_one_turn_and_c6_an_unforced_entropy_bonus():
    (single,) = pc.c5_preconditions(pd.DataFrame({"rollout.max_turns": [1, 1]}))
    (multi,) = pc.c5_preconditions(pd.DataFrame({"rollout.max_turns": [5, 5]}))
    assert single.held is False and multi.held is True
    treated = pd.DataFrame({"run_id": ["n"], "condition": ["none"], "trainer.entropy_coef": [0.03]})
    learns, forced = pc.c6_preconditions(treated, _val_steps({"n": [0.2, 0.5, 0.1]}))
    assert learns.held is True and learns.value == pytest.approx(30.0)  # the peak, not the end
    assert forced.held is False and "0.03" in forced.measured


def test_c7_reads_the_sweep_runs_at_the_paper_defaults():
    runs = pd.DataFrame({"run_id": ["d", "e"], "condition": ["none", "none"], "trainer.entropy_coef": [0.001, 0.1],
                         "trainer.kl_coef": [0.0, 0.0]})
    (p,) = pc.c7_preconditions(runs, _val_steps({"d": [0.1, 0.3], "e": [0.1, 0.1]}))
    assert p.value == pytest.approx(20.0) and "over 1 sweep runs" in p.measured


def test_files_round_trip_and_the_table_joins_realizations(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second" / "03_main_results"
    rows = [pc.Precondition("C5", "slip", "turns > 1", "1 turn", 1.0, False),
            pc.Precondition("C1", "RL learns", "gain >= 15", "gain +20", 20.0, True)]
    path = pc.write_preconditions("main_results", rows, first)
    assert [p.claim for p in pc.read_preconditions(path)] == ["C1", "C5"]
    pc.write_preconditions("main_results", [pc.Precondition("C1", "RL learns", "gain >= 15", "gain +9", 9.0, False)],
                           second)
    table, read = pc.precondition_table({"first": first, "second": tmp_path / "second"})
    assert list(table.columns) == ["claim", "precondition", "holds_when", "first", "second", "held"]
    assert table["held"].tolist() == ["no", "no"]  # C1 failed in the second realization
    assert table.loc[0, "second"] == "gain +9" and len(read) == 3
    assert np.isnan(pc.read_preconditions(pc.write_preconditions(
        "x", [pc.Precondition("C2", "a", "b", "not measured", math.nan, None)], tmp_path))[0].value)
    with pytest.raises(ValueError, match="one line"):
        pc.Precondition("C1", "a", "b", "two\nlines", 1.0, True)
