"""Tests for the decline study's measures (ragen2/repro/decline_analysis.py, docs/preregistrations.md §7.19)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragen2.repro import decline_analysis as da

BOARDS = 512


def _episodes(rates: dict[int, float], rng) -> dict[int, np.ndarray]:
    """Per-board outcomes with exactly ``rate`` of the boards won at each step (shuffled)."""
    out = {}
    for step, rate in rates.items():
        flags = np.zeros(BOARDS)
        flags[: round(rate * BOARDS)] = 1.0
        out[step] = rng.permutation(flags)
    return out


def _runs(curves: dict[tuple[str, int, int, str], dict[int, float]]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for (algo, warm, seed, condition), rates in curves.items():
        tag = {"none": "none", "top_p": "topp0p9"}[condition]
        rows.append({"run_id": f"frozenlake__{algo}__{tag}__decline{warm}__s{seed}", "algo": algo, "warm": warm,
                     "seed": seed, "pair": warm * 100 + seed, "condition": condition,
                     "val_episodes": _episodes(rates, rng)})
    return pd.DataFrame(rows)


RISE_AND_FALL = {0: 0.25, 25: 0.30, 50: 0.40, 75: 0.45, 100: 0.30}
STEADY = {0: 0.25, 25: 0.30, 50: 0.40, 75: 0.45, 100: 0.45}


def test_a_runs_peak_final_and_drop_come_from_its_readings_after_step_0():
    table = da.run_table(_runs({("grpo", 0, 0, "none"): {0: 0.5, 25: 0.25, 50: 0.375, 100: 0.25}}))
    row = table.iloc[0]
    assert (row["start"], row["peak"], row["peak_step"], row["final"]) == (0.5, 0.375, 50, 0.25)  # step 0 is no peak
    assert row["drop"] == pytest.approx(0.125) and row["peak_gain"] == pytest.approx(-0.125)
    assert row["final_boards"].mean() == 0.25 and row["peak_boards"].mean() == 0.375


def test_the_contrast_pairs_runs_by_warm_start_and_seed_and_carries_the_boards_noise():
    curves = {}
    for warm in (0, 1):
        for seed in range(4):
            curves[("ppo", warm, seed, "none")] = RISE_AND_FALL
            curves[("ppo", warm, seed, "top_p")] = {**STEADY, 100: 0.45 + 0.01 * seed}
    table = da.run_table(_runs(curves))
    pooled, one = da.contrast(table, "ppo", "final"), da.contrast(table, "ppo", "final", warm=1)
    assert (pooled.n, one.n) == (8, 4)
    assert pooled.mean_diff == pytest.approx(np.mean([0.15 + 0.01 * s for s in range(4)]), abs=1e-3)
    assert pooled.t_ci_low < pooled.mean_diff - 0.01  # wider than the pairs' own spread: the boards add noise
    drop = da.contrast(table, "ppo", "drop")
    assert drop.mean_diff < -0.14  # Top-p does not fall from its peak, no filter falls 15 points
    assert da.contrast(table, "grpo", "final") is None
    with pytest.raises(ValueError, match="value"):
        da.contrast(table, "ppo", "success")
    contrasts = da.contrasts_table(table)
    assert set(contrasts["scope"]) == {"warm start 0", "warm start 1", "pooled"}
    assert set(contrasts["value"]) == set(da.VALUES) and (contrasts["algo"] == "ppo").all()


def test_no_filter_declines_only_beyond_what_the_maximum_of_noisy_readings_gives():
    falling = {("grpo", 0, s, "none"): {**RISE_AND_FALL, 100: 0.30 + 0.01 * s} for s in range(4)}
    flat = {("grpo", 0, s, "none"): {0: 0.4, 25: 0.41, 50: 0.40, 75: 0.42, 100: 0.40 + 0.005 * s} for s in range(4)}
    got = da.decline_test(da.run_table(_runs(falling)), "grpo")
    assert got["declines"] and got["runs"] == 4 and got["low"] > got["floor"]
    assert got["floor"] == pytest.approx(da.MAX_OF_EIGHT * np.sqrt(0.3 * 0.7 / BOARDS), rel=0.2)
    assert not da.decline_test(da.run_table(_runs(flat)), "grpo")["declines"]  # drops of 1-2 points: noise
    assert not da.decline_test(da.run_table(_runs(flat)), "ppo")["declines"]  # no runs


@pytest.mark.parametrize(("verdicts", "want"), [
    ([("agree", True), ("agree", True)], "agree"),
    ([("agree", True), ("disagree", False)], "agree"),  # an algorithm whose preconditions fail does not count
    ([("disagree", True), ("inconclusive", True)], "disagree"),
    ([("disagree", True), ("agree", True)], "inconclusive"),
    ([("inconclusive", True), ("agree", True)], "inconclusive"),
    ([("agree", False), ("agree", False)], "untested"),
])
def test_the_study_level_verdict_combines_the_algorithms_whose_preconditions_hold(verdicts, want):
    assert da.combine(verdicts) == want


def test_the_snr_table_takes_the_median_ratio_per_bucket_over_runs():
    grad = pd.DataFrame({
        "run_id": ["a", "b", "c", "a", "b"], "algo": ["ppo"] * 5, "condition": ["none"] * 5, "step": [1] * 5,
        "bucket": ["1", "1", "1", "all", "all"], "rv_mean": [0.0, 0.1, 0.2, 0.5, 0.5], "snr": [10.0, 30.0, 20.0, 99.0, 99.0]})
    table = da.snr_table(grad)
    assert table.to_dict("records") == [{"algo": "ppo", "condition": "none", "step": 1, "bucket": "1", "runs": 3,
                                        "rv_median": 0.1, "snr_median": 20.0}]  # the batch's "all" row is left out
