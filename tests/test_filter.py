"""Tests of ragen2.filter: the selection table (docs/method.md §4.3), brute-force references, metrics, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ragen2.filter import (
    FilterConfig,
    apply_filter,
    group_scores,
    loss_scales,
    select_groups,
)

SOKOBAN_SIGMAS = [5, 4.5, 3, 0.5, 0, 0, 0, 0]
FROZENLAKE_SIGMAS = [0.5, 0.5, 0.48, 0.3, 0, 0, 0, 0]

# (id, scores, config kwargs, expected kept indices)
SELECTION_TABLE = [
    # --- the worked checks of docs/method.md §4.3 ---
    ("method linear p.6", [4, 3, 2, 1], dict(value=0.6), [0, 1]),
    ("method linear [10,1,0,0]", [10, 1, 0, 0], dict(value=0.9, include_zero=False), [0]),
    ("method linear [4,2,0,0]", [4, 2, 0, 0], dict(value=0.9, include_zero=False), [0, 1]),
    ("method linear [3,1,1,0]", [3, 1, 1, 0], dict(value=0.9, include_zero=False), [0, 1, 2]),
    ("method linear all zero", [0, 0, 0], dict(value=0.9), []),
    ("method softmax [10,1,0,0]", [10, 1, 0, 0], dict(value=0.9, top_p_mode="softmax", include_zero=False), [0]),
    ("method softmax [4,2,0,0]", [4, 2, 0, 0], dict(value=0.9, top_p_mode="softmax", include_zero=False), [0, 1]),
    ("method softmax [1,1,1]", [1, 1, 1], dict(value=0.6, top_p_mode="softmax"), [0, 1]),
    ("method softmax [1,1,1,0]", [1, 1, 1, 0], dict(value=0.6, top_p_mode="softmax", include_zero=False), [0, 1]),
    # The same with include_zero=True: pi = e/(3e+1) = 0.297 each, so 3 groups are needed for 0.6.
    ("softmax [1,1,1,0] zero kept", [1, 1, 1, 0], dict(value=0.6, top_p_mode="softmax"), [0, 1, 2]),
    ("method p=1 include_zero", [3, 0, 1, 0], dict(value=1.0, include_zero=True), [0, 1, 2, 3]),
    ("method figure 9,5,1", [9, 1, 5], dict(value=0.9), [0, 2]),
    ("method softmax sokoban scale", SOKOBAN_SIGMAS, dict(value=0.9, top_p_mode="softmax"), [0, 1]),
    ("method softmax frozenlake scale", FROZENLAKE_SIGMAS, dict(value=0.9, top_p_mode="softmax"),
     [0, 1, 2, 3, 4, 5, 6]),
    # --- top_p edge cases ---
    ("linear zeros never picked", [2, 0, 0, 2], dict(value=0.99), [0, 3]),
    ("linear tiny mass under eps", [0.004, 0.003, 0.0, 0.0], dict(value=0.9), []),
    ("linear unreachable: zero stops walk", [1, 1, 0, 0], dict(value=0.9, filter_type="smallest"), []),
    ("linear smallest all positive", [4, 1, 2, 3], dict(value=0.3, filter_type="smallest"), [1, 2]),
    ("linear ties go to lower index", [1, 2, 2, 1], dict(value=0.5), [1, 2]),
    ("linear ties, one needed", [2, 2, 2, 2], dict(value=0.2), [0]),
    ("linear p=1 keeps all", [3, 0, 1], dict(value=1.0), [0, 1, 2]),
    ("linear p=1 include_zero=False", [3, 0, 1], dict(value=1.0, include_zero=False), [0, 2]),
    ("linear one group", [0.7], dict(value=0.9), [0]),
    ("linear one zero group", [0.0], dict(value=0.9), []),
    ("linear negative scores stop walk", [-1, -2], dict(value=0.5), []),
    ("empty after include_zero=False", [0, 0, 1e-12], dict(value=1.0, include_zero=False), []),
    ("softmax all zero keeps by p", [0, 0, 0, 0], dict(value=0.5, top_p_mode="softmax"), [0, 1]),
    ("softmax all zero excluded", [0, 0, 0], dict(value=0.5, top_p_mode="softmax", include_zero=False), []),
    ("softmax smallest", [5, 0, 4, 0.1], dict(value=0.9, top_p_mode="softmax", filter_type="smallest"),
     [1, 3]),
    ("softmax one group", [3.0], dict(value=0.1, top_p_mode="softmax"), [0]),
    # --- top_k / top_k_abs ---
    ("top_k half", [0.1, 0.9, 0.5, 0.3], dict(strategy="top_k", value=0.5), [1, 2]),
    ("top_k floors to at least one", [0.1, 0.9, 0.5, 0.3], dict(strategy="top_k", value=0.1), [1]),
    ("top_k G before dropping zeros", [0, 0, 0.5, 0.3], dict(strategy="top_k", value=0.25, include_zero=False),
     [2]),
    ("top_k clipped to candidates", [0, 0, 0.5, 0.3], dict(strategy="top_k", value=1.0, include_zero=False),
     [2, 3]),
    ("top_k value=1 keeps all", [1, 2, 3], dict(strategy="top_k", value=1.0), [0, 1, 2]),
    ("top_k ties", [1, 1, 1, 1], dict(strategy="top_k", value=0.5), [0, 1]),
    ("top_k smallest", [0.1, 0.9, 0.5, 0.3], dict(strategy="top_k", value=0.5, filter_type="smallest"), [0, 3]),
    ("top_k all zero, include_zero", [0, 0, 0, 0], dict(strategy="top_k", value=0.5), [0, 1]),
    ("top_k_abs", [0.1, 0.9, 0.5, 0.3], dict(strategy="top_k_abs", value=3), [1, 2, 3]),
    ("top_k_abs over G", [0.1, 0.9], dict(strategy="top_k_abs", value=5), [0, 1]),
    ("top_k_abs truncates", [0.1, 0.9, 0.5], dict(strategy="top_k_abs", value=1.9), [1]),
    # --- min_p ---
    ("min_p largest", [1.0, 0.5, 0.49, 0.0], dict(strategy="min_p", value=0.5), [0, 1]),
    # min(s)/(value + 1e-10) lies just below 2.0, so a score of exactly 2.0 is not kept.
    ("min_p smallest", [1.0, 1.9, 2.0, 4.1], dict(strategy="min_p", value=0.5, filter_type="smallest"),
     [0, 1]),
    ("min_p all zero", [0, 0, 0], dict(strategy="min_p", value=0.5), [0, 1, 2]),
    ("min_p all zero excluded", [0, 0, 0], dict(strategy="min_p", value=0.5, include_zero=False), []),
    ("min_p value 1 keeps ties of max", [2, 1, 2], dict(strategy="min_p", value=1.0), [0, 2]),
    # --- none ---
    ("none keeps all", [0, 0, 3], dict(strategy="none", include_zero=False), [0, 1, 2]),
]


@pytest.mark.parametrize("scores,kwargs,expected", [c[1:] for c in SELECTION_TABLE],
                         ids=[c[0] for c in SELECTION_TABLE])
def test_selection_table(scores, kwargs, expected):
    kept = select_groups(np.array(scores, dtype=float), FilterConfig(**kwargs))
    assert kept.dtype == np.int64
    assert kept.tolist() == expected


def _brute_top_k(s, k_frac, largest, include_zero, absolute=False):
    """Reference: the k best by an explicit sort on (score, index) tuples."""
    cands = [g for g in range(len(s)) if include_zero or abs(s[g]) > 1e-10]
    if not cands:
        return []
    k = int(k_frac) if absolute else int(k_frac * len(s))
    k = min(max(k, 1), len(cands))
    order = sorted(cands, key=lambda g: ((-s[g] if largest else s[g]), g))
    return sorted(order[:k])


def _brute_min_p(s, value, largest, include_zero):
    cands = [g for g in range(len(s)) if include_zero or abs(s[g]) > 1e-10]
    if not cands:
        return []
    if largest:
        m = max(s[g] for g in cands)
        return [g for g in cands if s[g] >= value * m - 1e-10]
    m = min(s[g] for g in cands)
    return [g for g in cands if s[g] <= m / (value + 1e-10) + 1e-10]


@pytest.mark.parametrize("seed", range(40))
def test_top_k_and_min_p_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    num_groups = int(rng.integers(1, 12))
    # Rounded values create ties and exact zeros.
    s = np.round(rng.exponential(1.0, num_groups) * (rng.random(num_groups) > 0.3), 1)
    for largest, include_zero in itertools.product([True, False], [True, False]):
        ftype = "largest" if largest else "smallest"
        frac = min(float(rng.uniform(0.05, 1.2)), 1.0)  # a fraction above 1 is refused by FilterConfig
        cfg = FilterConfig(strategy="top_k", value=frac, filter_type=ftype, include_zero=include_zero)
        assert select_groups(s, cfg).tolist() == _brute_top_k(s, frac, largest, include_zero)
        count = int(rng.integers(1, num_groups + 2))
        cfg = FilterConfig(strategy="top_k_abs", value=count, filter_type=ftype, include_zero=include_zero)
        assert select_groups(s, cfg).tolist() == _brute_top_k(s, count, largest, include_zero, absolute=True)
        p = float(rng.uniform(0.05, 1.0))
        cfg = FilterConfig(strategy="min_p", value=p, filter_type=ftype, include_zero=include_zero)
        assert select_groups(s, cfg).tolist() == _brute_min_p(s, p, largest, include_zero)


@pytest.mark.parametrize("seed", range(20))
def test_linear_top_p_invariants(seed):
    """Kept set reaches the threshold, is a prefix of the ranking, and no shorter prefix reaches it."""
    rng = np.random.default_rng(seed)
    s = np.round(rng.exponential(1.0, 8) * (rng.random(8) > 0.4), 2)
    p = float(rng.uniform(0.1, 0.99))
    cfg = FilterConfig(value=p)
    kept = select_groups(s, cfg)
    tau = p * s.sum() - cfg.selection_eps
    if len(kept) == 0:
        assert tau <= 0 or s[s > 0].sum() < tau
        return
    assert s[kept].sum() >= tau
    assert np.all(s[kept] > 0)
    assert s[kept].min() >= np.delete(s, kept).max(initial=-np.inf)
    assert s[kept].sum() - s[kept].min() < tau


def test_group_scores_metrics():
    rewards = np.array([[1.0, 0.0, 1.0, 0.0], [0.1, 0.1, 0.1, 0.1], [2.0, 4.0, 6.0, 8.0]])
    std = group_scores(rewards)
    assert std[0] == pytest.approx(np.std([1, 0, 1, 0], ddof=1))
    assert std[1] == 0.0  # float noise of 0.1's is snapped to exactly 0
    assert std[2] == pytest.approx(math.sqrt(20 / 3))
    np.testing.assert_allclose(group_scores(rewards, "reward"), [0.5, 0.1, 5.0])
    np.testing.assert_allclose(group_scores(rewards, "reward_sum"), [2.0, 0.4, 20.0])
    np.testing.assert_allclose(group_scores(rewards, "length"), [0.5, 0.1, 5.0])
    flags = np.array([[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0]])
    np.testing.assert_allclose(group_scores(rewards, "success_std", successes=flags),
                               [0.0, np.std([0, 1, 0, 1], ddof=1), 0.0])


def test_apply_filter_metrics():
    rewards = np.array([
        [1.0, 1.0, 1.0, 1.0],   # all success
        [0.0, 0.0, 0.0, 0.0],   # all fail
        [1.0, 0.0, 0.0, 0.0],   # low variance (mixed) -> dropped by top_k
        [1.0, 0.0, 1.0, 0.0],   # high variance
        [1.0, 1.0, 0.0, 0.0],   # high variance
    ])
    cfg = FilterConfig(strategy="top_k_abs", value=2)
    out = apply_filter(rewards, cfg, successes=rewards)
    assert out.kept.tolist() == [3, 4]
    m = out.metrics
    sig = rewards.std(axis=1, ddof=1)
    assert m["filter/kept_count"] == 2 and m["filter/kept_ratio"] == pytest.approx(0.4)
    assert m["filter/dropped_count"] == 3
    assert (m["filter/dropped_all_success"], m["filter/dropped_all_fail"], m["filter/dropped_low_variance"]) \
        == (1, 1, 1)
    assert m["filter/zero_variance_count"] == 2 and m["filter/zero_score_count"] == 2
    assert m["filter/variance_mass_kept"] == pytest.approx(sig[3:].sum() / sig.sum())
    assert m["filter/reward_std_mean"] == pytest.approx(sig.mean())
    assert m["filter/kept_reward_std_mean"] == pytest.approx(sig[3:].mean())
    assert m["filter/reward_mean"] == pytest.approx(rewards.mean())
    assert m["filter/loss_scale"] == m["filter/reg_scale"] == 1.0  # loss_scaling none (the default)
    scaled = apply_filter(rewards, FilterConfig(strategy="top_k_abs", value=2, loss_scaling="keep_rate")).metrics
    assert scaled["filter/loss_scale"] == scaled["filter/reg_scale"] == pytest.approx(0.4)
    assert m["filter/empty"] == 0.0
    assert (m["filter/zero_task_spread_count"], m["filter/all_fail_count"]) == (2, 1)
    assert all(k.startswith("filter/") for k in m)
    assert "filter/zero_task_spread_count" not in apply_filter(rewards, cfg).metrics  # no flags, no task counts


def test_apply_filter_reasons_without_flags_and_empty_step():
    rewards = np.array([[1.0, 1.0, 1.0], [-0.1, -0.1, -0.1], [0.0, 0.0, 0.0]])
    out = apply_filter(rewards, FilterConfig(value=0.9))
    assert out.kept.size == 0
    m = out.metrics
    assert m["filter/empty"] == 1.0 and m["filter/loss_scale"] == 1.0  # nothing kept: no update (scaling none)
    assert (m["filter/dropped_all_success"], m["filter/dropped_all_fail"], m["filter/dropped_low_variance"]) \
        == (1, 2, 0)
    assert math.isnan(m["filter/variance_mass_kept"]) and math.isnan(m["filter/kept_reward_std_mean"])


def test_apply_filter_success_std_and_length_metrics():
    rewards = np.array([[1.0, 0.9, 1.0], [0.0, 1.0, 0.0]])
    flags = np.array([[1, 1, 1], [0, 1, 0]])
    out = apply_filter(rewards, FilterConfig(metric="success_std", value=0.9), successes=flags)
    assert out.kept.tolist() == [1]  # group 0 has reward variance but no success variance
    lengths = np.array([[10, 10, 10], [30, 20, 40]])
    out = apply_filter(rewards, FilterConfig(metric="length", strategy="top_k_abs", value=1), lengths=lengths)
    assert out.kept.tolist() == [1]


def test_loss_scales_of_the_whole_loss_and_of_the_task_alone():
    keep_rate = FilterConfig(loss_scaling="keep_rate")
    assert loss_scales(2, 8, keep_rate) == (0.25, 0.25) and loss_scales(0, 8, keep_rate) == (0.0, 0.0)
    assert loss_scales(2, 8, FilterConfig(loss_scaling="sqrt_keep_rate")) == (0.5, 0.5)
    assert loss_scales(2, 8, FilterConfig(loss_scaling="keep_rate_task")) == (0.25, 1.0)
    assert loss_scales(2, 8, FilterConfig()) == (1.0, 1.0)  # default: none
    with pytest.raises(ValueError, match="9"):
        loss_scales(9, 8, keep_rate)
    with pytest.raises(ValueError, match="0"):
        loss_scales(0, 0, keep_rate)


def test_is_noop():
    assert FilterConfig().is_noop and FilterConfig(strategy="none").is_noop
    assert not FilterConfig(value=1.0, include_zero=False).is_noop
    assert not FilterConfig(value=0.9).is_noop


@pytest.mark.parametrize("kwargs,bad", [
    (dict(strategy="top-p"), "'top-p'"),
    (dict(top_p_mode="exp"), "'exp'"),
    (dict(filter_type="biggest"), "'biggest'"),
    (dict(metric="reward_variance"), "'reward_variance'"),
    (dict(loss_scaling="linear"), "'linear'"),
    (dict(value=0.0), "0.0"),
    (dict(value=-0.5), "-0.5"),
    (dict(value=float("nan")), "nan"),
    (dict(strategy="min_p", value=1.5), "1.5"),
    (dict(strategy="top_k_abs", value=0.5), "0.5"),
    (dict(selection_eps=-1.0), "-1.0"),
    (dict(value=1.5), r"filter.value=1.5: must be in \(0, 1\] for strategy 'top_p'"),
    (dict(strategy="top_k", value=2.0), r"filter.value=2.0: must be in \(0, 1\] for strategy 'top_k'"),
    (dict(strategy="top_k", value=True), "expected a number"),
])
def test_bad_config_names_the_value(kwargs, bad):
    with pytest.raises(ValueError, match=bad):
        FilterConfig(**kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match="group_size >= 2"):
        group_scores(np.ones((3, 1)))
    with pytest.raises(ValueError, match="non-finite"):
        group_scores(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="successes"):
        group_scores(np.ones((2, 2)), "success_std")
    with pytest.raises(ValueError, match="lengths"):
        apply_filter(np.ones((2, 2)), FilterConfig(metric="length"))
    with pytest.raises(ValueError, match="one-dimensional"):
        select_groups(np.ones((2, 2)), FilterConfig())


def test_task_spread_counts_and_ranking_see_through_a_format_penalty():
    """Groups whose rollouts all fail but differ by the -0.1 format penalty have reward spread and no task signal:
    the task-signal counts name them, and ranking by ``success_std`` scores them 0 where ``reward_std`` keeps them."""
    rewards = np.array([[0.0, -0.1, 0.0, -0.1],   # all fail, format penalty only
                        [-0.1, -0.1, 0.0, 0.0],   # all fail, format penalty only
                        [1.0, 0.0, 1.0, 0.0],     # task signal
                        [1.0, 1.0, 1.0, 1.0]])    # all succeed
    flags = (rewards > 0.5).astype(float)
    shaped = apply_filter(rewards, FilterConfig(value=0.9, include_zero=False), successes=flags)
    task = apply_filter(rewards, FilterConfig(value=0.9, include_zero=False, metric="success_std"), successes=flags)
    assert shaped.metrics["filter/zero_variance_count"] == 1  # exact zero spread misses the two penalty-only groups
    assert shaped.metrics["filter/zero_task_spread_count"] == 3 and shaped.metrics["filter/all_fail_count"] == 2
    assert 0 in shaped.kept.tolist() or 1 in shaped.kept.tolist()  # the shaped spread keeps a penalty-only group
    assert task.kept.tolist() == [2]
