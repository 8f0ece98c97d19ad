"""Tests for ragen2.repro.stats: paired tests, Spearman with bootstrap CI, the verdict rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ragen2.repro.stats import bootstrap_mean_ci, decide, pair_by_seed, paired_test, spearman


def test_paired_test_counts_and_pvalues_match_direct_computation():
    a = [0.9, 0.8, 0.7, 0.75, 0.6, 0.5]
    b = [0.5, 0.6, 0.7, 0.55, 0.65, 0.3]
    r = paired_test(a, b, n_boot=2000, seed=1)
    d = np.subtract(a, b)
    assert r.n == 6 and (r.wins, r.losses, r.ties) == (4, 1, 1)
    assert r.mean_diff == pytest.approx(d.mean()) and r.std_diff == pytest.approx(d.std(ddof=1))
    # sign test: 4 wins of 5 non-ties, two-sided exact binomial = 2 * (5 + 1) / 32
    assert r.sign_p == pytest.approx(12 / 32)
    assert r.wilcoxon_p == pytest.approx(sps.wilcoxon(d[d != 0]).pvalue)
    assert r.t_p == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert r.ci_low <= r.mean_diff <= r.ci_high and r.ci_level == 0.95


def test_paired_test_is_deterministic_and_seed_dependent():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 8), rng.normal(0, 1, 8)
    assert paired_test(a, b, seed=3) == paired_test(a, b, seed=3)
    assert paired_test(a, b, seed=3).ci_low != paired_test(a, b, seed=4).ci_low


def test_paired_test_all_ties_and_single_pair():
    r = paired_test([0.5, 0.5], [0.5, 0.5])
    assert r.sign_p == 1.0 and r.wilcoxon_p == 1.0 and r.mean_diff == 0 and r.ties == 2
    one = paired_test([1.0], [0.0])
    assert one.n == 1 and math.isnan(one.std_diff) and one.ci_low == one.ci_high == 1.0
    assert math.isnan(one.t_p) and math.isnan(one.t_ci_low)
    same = paired_test([1.0, 2.0], [0.0, 1.0])  # every difference +1: t is infinite
    assert same.t_p == 0.0 and same.t_ci_low == same.t_ci_high == 1.0 and r.t_p == 1.0


def test_t_interval_and_verdict_with_four_pairs():
    a, b = [0.9, 0.8, 0.75, 0.7], [0.5, 0.6, 0.45, 0.55]
    r = paired_test(a, b)
    d = np.subtract(a, b)
    half = sps.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    assert (r.t_ci_low, r.t_ci_high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert r.t_p < 0.05 and r.wilcoxon_p > 0.05  # the t-test can decide with 4 pairs, the rank test cannot
    assert r.verdict("greater") == "agree" and r.verdict("less") == "disagree"
    null = paired_test([0.5, 0.52, 0.49, 0.51], [0.5, 0.5, 0.5, 0.5])
    assert null.verdict("greater") == "inconclusive"
    assert null.verdict("greater", paper_effect=0.069) == "disagree"  # the CI rules out the paper's gain


def test_rank_tests_cannot_reach_005_with_four_seeds():
    r = paired_test([1.0, 2.0, 3.0, 4.0], [0.0, 0.5, 1.0, 1.5])
    assert r.sign_p == pytest.approx(0.125) and r.wilcoxon_p == pytest.approx(0.125)


def test_paired_test_clear_effect_is_significant():
    a = np.linspace(0.6, 0.9, 10)
    r = paired_test(a, a - 0.1 - np.linspace(0, 0.05, 10))
    assert r.wins == 10 and r.sign_p == pytest.approx(2 / 2**10) and r.wilcoxon_p < 0.01
    assert r.ci_low > 0


@pytest.mark.parametrize(
    "a, b, match",
    [
        ([1, 2], [1], "pair up"),
        ([], [], "at least one"),
        ([1, float("nan")], [1, 2], "finite"),
        ([[1]], [[1]], "one-dimensional"),
    ],
)
def test_paired_test_bad_input(a, b, match):
    with pytest.raises(ValueError, match=match):
        paired_test(a, b)


def test_bootstrap_mean_ci_brackets_mean():
    low, high = bootstrap_mean_ci([1, 2, 3, 4, 5], n_boot=5000)
    assert 1 < low < 3 < high < 5
    with pytest.raises(ValueError, match="ci"):
        bootstrap_mean_ci([1, 2], ci=1.5)


def test_spearman_matches_scipy_and_ci():
    rng = np.random.default_rng(5)
    x = rng.normal(size=30)
    y = x + rng.normal(scale=0.5, size=30)
    r = spearman(x, y, n_boot=2000)
    ref = sps.spearmanr(x, y)
    assert r.rho == pytest.approx(ref.statistic) and r.p == pytest.approx(ref.pvalue) and r.n == 30
    assert r.ci_low < r.rho < r.ci_high <= 1
    perfect = spearman([1, 2, 3, 4], [10, 20, 30, 40], n_boot=200)
    assert perfect.rho == pytest.approx(1.0) and perfect.ci_low == pytest.approx(1.0)


def test_spearman_nan_policy_constant_and_small():
    with pytest.raises(ValueError, match=r"index \[1\]"):
        spearman([1, np.nan, 3, 4], [1, 2, 3, 4])
    r = spearman([1, np.nan, 3, 4, 5], [1, 2, 3, 5, 4], nan_policy="omit", n_boot=200)
    assert r.n == 4
    const = spearman([1, 1, 1, 1], [1, 2, 3, 4], n_boot=100)
    assert math.isnan(const.rho) and math.isnan(const.p)
    with pytest.raises(ValueError, match="at least 3"):
        spearman([1, 2], [1, 2])


@pytest.mark.parametrize(
    "stat, p, direction, kwargs, expected",
    [
        (0.3, 0.01, "greater", {}, "agree"),
        (-0.3, 0.01, "less", {}, "agree"),
        (-0.3, 0.01, "greater", {}, "disagree"),
        (0.3, 0.2, "greater", {}, "inconclusive"),
        (0.3, 0.2, "greater", {"ci": (-0.1, 0.5), "paper_effect": 0.39}, "inconclusive"),
        (
            0.05,
            0.6,
            "greater",
            {"ci": (-0.2, 0.3), "paper_effect": 0.39},
            "disagree",
        ),  # rules out the paper's size
        (0.9, 0.001, "greater", {"ci": (0.8, 0.95), "paper_effect": 0.39}, "agree"),  # larger, same direction
        (float("nan"), float("nan"), "greater", {}, "inconclusive"),
        (0.0, 0.01, "greater", {}, "inconclusive"),
    ],
)
def test_decide_rule(stat, p, direction, kwargs, expected):
    assert decide(stat, p, direction, **kwargs) == expected


def test_decide_bad_arguments():
    with pytest.raises(ValueError, match="direction"):
        decide(0.1, 0.01, "up")
    with pytest.raises(ValueError, match="alpha"):
        decide(0.1, 0.01, "greater", alpha=0)
    with pytest.raises(ValueError, match="p must"):
        decide(0.1, 1.5, "greater")
    with pytest.raises(ValueError, match="low <= high"):
        decide(0.1, 0.5, "greater", ci=(0.3, 0.1), paper_effect=0.2)


def test_pair_by_seed_joins_on_common_seeds():
    df = pd.DataFrame(
        {
            "seed": [0, 1, 2, 0, 1, 3],
            "condition": ["top_p"] * 3 + ["none"] * 3,
            "final_success": [0.5, 0.6, 0.7, 0.4, 0.6, 0.1],
        }
    )
    paired = pair_by_seed(df, "final_success", "condition", "top_p", "none")
    assert list(paired.index) == [0, 1]
    assert paired["diff"].tolist() == pytest.approx([0.1, 0.0])
    with pytest.raises(ValueError, match="occur twice"):
        pair_by_seed(pd.concat([df, df.iloc[[0]]]), "final_success", "condition", "top_p", "none")
    with pytest.raises(ValueError, match="'missing'"):
        pair_by_seed(df, "missing", "condition", "top_p", "none")


def test_spearman_bootstrap_rows_match_scalar_rho():
    from ragen2.repro.stats import _rho, _rho_rows

    rng = np.random.default_rng(2)
    x, y = rng.integers(0, 4, size=(50, 7)).astype(float), rng.normal(size=(50, 7))
    x[0] = 1.0  # a constant row
    rows = _rho_rows(x, y)
    assert math.isnan(rows[0])
    assert rows[1:] == pytest.approx([_rho(a, b) for a, b in zip(x[1:], y[1:])])


def test_summaries_are_one_line_with_the_numbers():
    text = paired_test([0.5, 0.7, 0.6], [0.4, 0.5, 0.6], n_boot=500).summary(scale=100, unit="pts")
    assert "\n" not in text and text.startswith("diff +10 pts") and "wins 2/3 (ties 1)" in text
    text = spearman([1, 2, 3, 4], [1, 3, 2, 4], n_boot=200).summary()
    assert text.startswith("rho +0.80") and text.endswith("n=4 runs")


def test_pairs_needed_matches_the_textbook_values():
    from ragen2.repro.stats import pairs_needed

    # d = 0.5 at alpha 0.05, power 0.8 needs 34 pairs (Cohen's table, paired t); d = 1 needs 10
    assert pairs_needed(1.0, 0.5) == 34 and pairs_needed(2.0, 2.0) == 10
    assert pairs_needed(1.0, -0.5) == 34  # the sign does not matter
    with pytest.raises(ValueError, match="diff_std"):
        pairs_needed(0.0, 0.5)


def test_runs_needed_for_rho():
    from ragen2.repro.stats import runs_needed_for_rho

    assert runs_needed_for_rho(-0.3) == 85 and runs_needed_for_rho(0.5) == 30
    with pytest.raises(ValueError, match="rho"):
        runs_needed_for_rho(0.0)


def test_a_gains_interval_includes_the_evaluation_noise_of_the_shared_boards():
    """Every run is scored on the same validation boards, so which boards were drawn moves every pair alike and never
    shows as spread between pairs. With per-board outcomes the interval carries that variance: it widens by the boards'
    standard error, its p grows, and without board noise (every board the same) it is the plain paired t-test."""
    from ragen2.repro.stats import board_variance, two_way_bootstrap_mean_ci

    rng = np.random.default_rng(0)
    n, boards = 8, 512
    easy = rng.random(boards)  # a board's own difficulty: shared by every unit
    per_board = (rng.random((n, boards)) < easy).astype(float) - (rng.random((n, boards)) < easy * 0.8).astype(float)
    a, b = per_board.clip(0).mean(axis=1) + 0.3, per_board.clip(None, 0).mean(axis=1) * -1 + 0.3
    d = a - b
    np.testing.assert_allclose(per_board.mean(axis=1), d, atol=1e-12)
    plain, noisy = paired_test(a, b), paired_test(a, b, boards=per_board)
    v = board_variance(per_board)
    assert v == pytest.approx(per_board.mean(axis=0).var(ddof=1) / boards) and v > 0
    assert noisy.mean_diff == pytest.approx(plain.mean_diff) and noisy.boards == boards
    half_plain, half_noisy = plain.t_ci_high - plain.mean_diff, noisy.t_ci_high - noisy.mean_diff
    t = sps.t.ppf(0.975, n - 1)
    assert half_noisy == pytest.approx(t * math.sqrt(d.var(ddof=1) / n + v))
    assert half_noisy > half_plain and noisy.t_p > plain.t_p
    assert "evaluation noise of 512 boards" in noisy.summary(scale=100)
    lo, hi = two_way_bootstrap_mean_ci(per_board, n_boot=2000)
    plain_lo, plain_hi = bootstrap_mean_ci(d, n_boot=2000)
    assert hi - lo > plain_hi - plain_lo  # the bootstrap resamples the boards too
    same = np.repeat(d[:, None], 4, axis=1)  # no board-to-board variation: the plain test
    flat = paired_test(a, b, boards=same)
    assert flat.t_ci_low == pytest.approx(plain.t_ci_low) and flat.t_p == pytest.approx(plain.t_p)
    with pytest.raises(ValueError, match="average to its pair's difference"):
        paired_test(a, b, boards=per_board + 0.1)


def test_within_strata_spearman_is_blind_to_the_strata_means():
    """Two settings whose means run against each other: pooled, rho is negative; within each, x and y rise together."""
    from ragen2.repro.stats import within_strata_spearman

    rng = np.random.default_rng(1)
    x, y, strata, runs = [], [], [], []
    for name, shift in (("A", 0.0), ("B", 5.0)):
        for run in range(5):
            for _ in range(4):
                v = rng.normal()
                x.append(v + shift), y.append(v + 0.3 * rng.normal() - shift), strata.append(name)
                runs.append(f"{name}{run}")
    within = within_strata_spearman(x, y, strata, runs, n_boot=2000)
    assert within.rho > 0.8 and within.ci_low > 0.5 and within.p < 0.01 and within.n == 40
    assert spearman(x, y).rho < -0.3
    few = within_strata_spearman(x, y, strata, [s + "0" for s in strata], min_clusters=1, n_boot=200)
    assert few.rho == pytest.approx(within.rho)  # one cluster per stratum: the same point estimate
    with pytest.raises(ValueError, match="no stratum"):
        within_strata_spearman(x, y, strata, [s + "0" for s in strata])


def test_power_numbers_carry_the_boards_noise_that_more_pairs_do_not_shrink():
    from ragen2.repro.stats import pairs_for_interval, pairs_needed, t_interval_width

    plain, noisy = t_interval_width(0.04, 16), t_interval_width(0.04, 16, board_se=0.01)
    assert noisy == pytest.approx(2 * sps.t.ppf(0.975, 15) * math.sqrt(0.04 ** 2 / 16 + 0.01 ** 2)) and noisy > plain
    assert pairs_for_interval(0.04, 0.05, board_se=0.01) > pairs_for_interval(0.04, 0.05)
    assert pairs_needed(0.04, 0.05, board_se=0.01) > pairs_needed(0.04, 0.05)
    # a floor of 2 x 1.96 x 0.015 = 0.059 never fits under an effect of 0.05, however many pairs
    assert pairs_for_interval(0.04, 0.05, board_se=0.015, max_pairs=5000) == 5000
