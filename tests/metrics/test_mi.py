"""mi_proxies against a direct loop implementation, and the CollapseMonitor EMA / alarm."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

from ragen2.metrics import CollapseMonitor, CollapseWarning, MIRows, mi_proxies
from ragen2.metrics.mi import gap_stderr

EXPECTED_KEYS = {
    "mi_estimate", "mi_seq_estimate", "mi_upper_bound", "conditional_entropy_est",
    "conditional_entropy_seq_est", "reasoning_entropy_est", "reasoning_entropy_seq_est",
    "matched_log_prob_mean", "marginal_log_prob_mean", "retrieval_accuracy", "retrieval_accuracy@2",
    "retrieval_accuracy@4", "retrieval_accuracy@8", "retrieval_chance_level", "retrieval_chance_level@2",
    "retrieval_chance_level@4", "retrieval_chance_level@8", "retrieval_above_chance",
    "retrieval_above_chance@2", "retrieval_above_chance@4", "retrieval_above_chance@8", "marginal_std",
    "marginal_std_seq", "mi_zscore", "mi_zscore_seq",
}


def direct_reference(logp_sum, lengths, index, keys, eps=1e-3):
    """Row-by-row transcription of docs/method.md §5.5, written independently of the module."""
    num_rows, num_cols = logp_sum.shape
    out = {}
    for tag, mat in (("tok", logp_sum / lengths[:, None]), ("seq", logp_sum)):
        matched = [mat[i, index[i]] for i in range(num_rows)]
        marginal = [logsumexp(mat[i]) - math.log(num_cols) for i in range(num_rows)]
        mu = sum(marginal) / num_rows
        std = math.sqrt(sum((g - mu) ** 2 for g in marginal) / num_rows)
        out[tag] = dict(
            mi=sum(m - g for m, g in zip(matched, marginal)) / num_rows,
            cond=-sum(matched) / num_rows, ent=-mu, std=std, matched=sum(matched) / num_rows, marg=mu,
            z=sum((m - g) / (std + eps) for m, g in zip(matched, marginal)) / num_rows)
    mat = logp_sum / lengths[:, None]
    top = {}
    for k in (1, 2, 4, 8):
        k_eff = min(k, 8, num_cols)
        hits = 0
        for i in range(num_rows):
            ranked = sorted(range(num_cols), key=lambda j: (-mat[i, j], j))[:k_eff]
            hits += any(keys[j] == keys[index[i]] for j in ranked)
        top[k] = hits / num_rows
    chance = sum(sum(1 for j in range(num_cols) if keys[j] == keys[index[i]]) / num_cols
                 for i in range(num_rows)) / num_rows
    return out, top, chance


@pytest.mark.parametrize("seed,duplicates", [(s, d) for s in range(6) for d in (False, True)])
def test_matches_direct_computation(seed, duplicates):
    rng = np.random.default_rng(seed)
    num_cols = int(rng.integers(2, 12))
    num_rows = int(rng.integers(1, 40))
    logp_sum = -rng.gamma(2.0, 5.0, size=(num_rows, num_cols))
    lengths = rng.integers(1, 30, size=num_rows)
    index = rng.integers(0, num_cols, size=num_rows)
    keys = [int(k) for k in rng.integers(0, max(1, num_cols // 2), num_cols)] if duplicates else None
    m = mi_proxies(logp_sum, lengths, index, keys)
    assert set(m) == EXPECTED_KEYS
    ref, top, chance = direct_reference(logp_sum, lengths.astype(float), index,
                                        keys if keys is not None else list(range(num_cols)))
    for suffix, tag in (("", "tok"), ("_seq", "seq")):
        r = ref[tag]
        assert m[f"mi{suffix}_estimate"] == pytest.approx(r["mi"], abs=1e-10)
        assert m[f"conditional_entropy{suffix}_est"] == pytest.approx(r["cond"], abs=1e-10)
        assert m[f"reasoning_entropy{suffix}_est"] == pytest.approx(r["ent"], abs=1e-10)
        assert m[f"marginal_std{suffix}"] == pytest.approx(r["std"], abs=1e-10)
        assert m[f"mi_zscore{suffix}"] == pytest.approx(r["z"], rel=1e-9, abs=1e-9)
    assert m["matched_log_prob_mean"] == pytest.approx(ref["tok"]["matched"])
    assert m["marginal_log_prob_mean"] == pytest.approx(ref["tok"]["marg"])
    assert m["mi_upper_bound"] == pytest.approx(math.log(num_cols))
    assert m["retrieval_accuracy"] == pytest.approx(top[1])
    assert m["retrieval_chance_level"] == pytest.approx(chance)
    assert m["retrieval_above_chance"] == pytest.approx(top[1] - chance)
    for k in (2, 4, 8):
        k_eff = min(k, 8, num_cols)
        assert m[f"retrieval_accuracy@{k}"] == pytest.approx(top[k])
        assert m[f"retrieval_chance_level@{k}"] == pytest.approx(min(1.0, chance * k_eff))
        assert m[f"retrieval_above_chance@{k}"] == pytest.approx(top[k] - min(1.0, chance * k_eff))
    if keys is None:
        assert m["retrieval_chance_level"] == pytest.approx(1 / num_cols)


def test_duplicates_count_in_retrieval_but_not_in_mixture():
    # Two identical prompts (columns 0 and 1) and a distinct one; every row prefers column 1.
    logp = np.log(np.array([[0.2, 0.7, 0.1], [0.3, 0.6, 0.1]]))
    index = np.array([0, 1])
    with_keys = mi_proxies(logp, np.ones(2), index, prompt_keys=["a", "a", "b"])
    without = mi_proxies(logp, np.ones(2), index)
    assert with_keys["retrieval_accuracy"] == 1.0 and without["retrieval_accuracy"] == 0.5
    assert with_keys["retrieval_chance_level"] == pytest.approx(2 / 3)
    assert without["retrieval_chance_level"] == pytest.approx(1 / 3)
    assert with_keys["mi_estimate"] == without["mi_estimate"]  # the mixture keeps all 3 columns
    expected_marginal = np.log(np.array([1.0, 1.0]) / 3).mean()
    assert with_keys["marginal_log_prob_mean"] == pytest.approx(expected_marginal)


def test_minus_inf_off_the_true_column_is_allowed():
    logp = np.array([[-1.0, -np.inf], [-np.inf, -2.0]])
    m = mi_proxies(logp, np.ones(2), np.array([0, 1]))
    assert m["mi_estimate"] == pytest.approx(math.log(2))
    assert m["retrieval_accuracy"] == 1.0


@pytest.mark.parametrize("kwargs,match", [
    (dict(logp_sum=np.zeros((3, 1))), "N >= 2"),
    (dict(logp_sum=np.full((2, 2), np.nan)), "NaN"),
    (dict(lengths=np.array([1, 0])), "lengths"),
    (dict(prompt_index=np.array([0, 2])), "prompt_index"),
    (dict(prompt_index=np.array([0.0, 1.0])), "prompt_index"),
    (dict(prompt_keys=["a"]), "prompt_keys"),
    (dict(logp_sum=np.array([[-np.inf, -1.0], [-1.0, -1.0]])), "rows \\[0\\]"),
])
def test_bad_inputs(kwargs, match):
    args = dict(logp_sum=-np.ones((2, 2)), lengths=np.ones(2), prompt_index=np.array([0, 1]))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        mi_proxies(**args)


def test_return_rows():
    logp = np.log(np.array([[0.5, 0.25], [0.2, 0.4]])) * np.array([[2.0], [1.0]])
    m, rows = mi_proxies(logp, np.array([2, 1]), np.array([0, 1]), return_rows=True)
    np.testing.assert_allclose(rows.matched_seq, [logp[0, 0], logp[1, 1]])
    np.testing.assert_allclose(rows.matched, [logp[0, 0] / 2, logp[1, 1]])
    assert m["mi_estimate"] == pytest.approx(np.mean(rows.matched - rows.marginal))


def _metrics(mi, std, mi_seq=None, std_seq=None):
    return {"mi_estimate": mi, "marginal_std": std, "mi_seq_estimate": mi if mi_seq is None else mi_seq,
            "marginal_std_seq": std if std_seq is None else std_seq}


def test_monitor_ema_and_zscore():
    mon = CollapseMonitor(ema_decay=0.9, std_eps=1e-3)
    first = mon.update(_metrics(1.0, 2.0, mi_seq=5.0, std_seq=10.0))
    assert first["marginal_std_ema"] == 2.0 and first["marginal_std_ema_seq"] == 10.0
    assert first["mi_zscore_ema"] == pytest.approx(1.0 / 2.001)
    second = mon.update(_metrics(0.5, 1.0, mi_seq=5.0, std_seq=0.0))
    assert second["marginal_std_ema"] == pytest.approx(0.9 * 2.0 + 0.1 * 1.0)
    assert second["marginal_std_ema_seq"] == pytest.approx(9.0)
    assert second["mi_zscore_ema"] == pytest.approx(0.5 / (1.9 + 1e-3))
    assert second["mi_zscore_ema_seq"] == pytest.approx(5.0 / (9.0 + 1e-3))
    assert second["mi_estimate"] == 0.5  # the input metrics pass through


@pytest.mark.filterwarnings("ignore::ragen2.metrics.CollapseWarning")
def test_monitor_ema_zscore_equals_row_definition():
    rng = np.random.default_rng(3)
    mon = CollapseMonitor()
    for _ in range(3):
        logp = -rng.gamma(2.0, 3.0, size=(20, 5))
        m, rows = mi_proxies(logp, rng.integers(1, 9, 20), rng.integers(0, 5, 20), return_rows=True)
        out = mon.update(m)
        ema = out["marginal_std_ema"]
        assert out["mi_zscore_ema"] == pytest.approx(np.mean((rows.matched - rows.marginal) / (ema + 1e-3)))


def test_monitor_warns_once_on_drop_and_rearms():
    mon = CollapseMonitor(ema_decay=0.0, warn_drop=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mon.update(_metrics(1.0, 1.0))["collapse_alarm"] == 0.0
        assert mon.update(_metrics(0.6, 1.0))["collapse_alarm"] == 0.0  # 40 % below the peak
    with pytest.warns(CollapseWarning, match="below its peak"):
        assert mon.update(_metrics(0.4, 1.0))["collapse_alarm"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mon.update(_metrics(0.3, 1.0))["collapse_alarm"] == 1.0  # still low: no repeat
        assert mon.update(_metrics(0.9, 1.0))["collapse_alarm"] == 0.0  # recovered: re-armed
    with pytest.warns(CollapseWarning):
        mon.update(_metrics(0.1, 1.0))


def test_monitor_state_round_trip():
    mon = CollapseMonitor(ema_decay=0.5)
    mon.update(_metrics(1.0, 2.0))
    restored = CollapseMonitor()
    restored.load_state_dict(mon.state_dict())
    assert restored.update(_metrics(0.8, 1.0)) == mon.update(_metrics(0.8, 1.0))


def test_monitor_bad_arguments():
    for kwargs, match in ((dict(ema_decay=1.0), "ema_decay"), (dict(warn_drop=0.0), "warn_drop"),
                          (dict(std_eps=-1.0), "std_eps")):
        with pytest.raises(ValueError, match=match):
            CollapseMonitor(**kwargs)


def test_monitor_does_not_warn_on_noise_around_zero():
    # The TRL example's random-initialised policy: MI z-score EMA -0.001, 0.008, then -0.002.
    sequence = [_metrics(-0.00005, 0.04), _metrics(0.00033, 0.04), _metrics(-0.00008, 0.04)]
    mon = CollapseMonitor(ema_decay=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [mon.update(m)["collapse_alarm"] for m in sequence] == [0.0, 0.0, 0.0]
    assert mon.peak == pytest.approx(0.008, abs=1e-4)
    unfloored = CollapseMonitor(ema_decay=0.0, warn_min_peak=0.0)  # the rule before the floor warned here
    with pytest.warns(CollapseWarning):
        assert [unfloored.update(m)["collapse_alarm"] for m in sequence] == [0.0, 0.0, 1.0]


def _rows(gaps_by_prompt, spread=1.0):
    """MIRows whose per-token gaps (matched - marginal) are the given values, one list per prompt;
    the marginals spread with std about ``spread``."""
    gaps = np.concatenate([np.asarray(g, dtype=np.float64) for g in gaps_by_prompt])
    prompt = np.concatenate([np.full(len(g), j) for j, g in enumerate(gaps_by_prompt)])
    marginal = -3.0 + spread * np.linspace(-1.7, 1.7, gaps.size)
    return MIRows(matched=marginal + gaps, marginal=marginal, matched_seq=marginal + gaps, marginal_seq=marginal,
                  prompt_class=prompt)


def _from_rows(rows):
    return _metrics(float(np.mean(rows.matched - rows.marginal)), float(np.std(rows.marginal)))


def test_monitor_warns_on_a_real_fall_from_a_clear_peak():
    rng = np.random.default_rng(0)
    mon = CollapseMonitor(ema_decay=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):  # a clear MI: z about 1 with a standard error near 0.03
            rows = _rows([1.0 + 0.1 * rng.standard_normal(8) for _ in range(8)])
            assert mon.update(_from_rows(rows), rows)["collapse_alarm"] == 0.0
    assert mon.peak > 0.9 and mon.peak_stderr < 0.05
    rows = _rows([0.1 + 0.1 * rng.standard_normal(8) for _ in range(8)])  # the reasoning stops reading the input
    with pytest.warns(CollapseWarning, match="possible template collapse"):
        assert mon.update(_from_rows(rows), rows)["collapse_alarm"] == 1.0


def test_monitor_noise_floor_needs_a_peak_clear_of_zero_and_a_fall_beyond_noise():
    # z about 0.1 +- 0.15 (four prompts that disagree): a fall to about -0.05 is noise, and so is the peak.
    noisy_peak = _rows([[0.5] * 4, [-0.3] * 4, [0.4] * 4, [-0.2] * 4])
    noisy_now = _rows([[0.3] * 4, [-0.5] * 4, [0.2] * 4, [-0.2] * 4])
    for rows_given, alarm in ((True, 0.0), (False, 1.0)):
        mon = CollapseMonitor(ema_decay=0.0, warn_min_peak=0.0)
        mon.update(_from_rows(noisy_peak), noisy_peak if rows_given else None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CollapseWarning)
            out = mon.update(_from_rows(noisy_now), noisy_now if rows_given else None)
        assert out["collapse_alarm"] == alarm  # without rows only warn_drop and warn_min_peak apply
    off = CollapseMonitor(ema_decay=0.0, warn_min_peak=0.0, warn_noise_sigmas=0.0)
    off.update(_from_rows(noisy_peak), noisy_peak)
    with pytest.warns(CollapseWarning):
        off.update(_from_rows(noisy_now), noisy_now)


def test_gap_stderr_clusters_rows_by_prompt():
    rng = np.random.default_rng(1)
    gaps = rng.standard_normal(12)
    iid = _rows([gaps])
    iid = MIRows(iid.matched, iid.marginal, iid.matched_seq, iid.marginal_seq)  # no classes: rows independent
    assert gap_stderr(iid) == pytest.approx(np.std(gaps, ddof=1) / math.sqrt(12))
    clustered = _rows([gaps[:4], gaps[4:8], gaps[8:]])
    means = np.array([gaps[:4].mean(), gaps[4:8].mean(), gaps[8:].mean()])
    direct = math.sqrt(3 / 2 * np.sum((4 * (means - gaps.mean())) ** 2)) / 12  # CR1, written out
    assert gap_stderr(clustered) == pytest.approx(direct)
    # Identical rows within a prompt are one sample: the clustered error is the std of 3 means, not of 12 rows.
    copies = _rows([[0.0] * 4, [1.0] * 4, [2.0] * 4])
    assert gap_stderr(copies) == pytest.approx(np.std([0.0, 1.0, 2.0], ddof=1) / math.sqrt(3))
    one_prompt = _rows([gaps])  # a single cluster falls back to rows
    assert gap_stderr(one_prompt) == pytest.approx(gap_stderr(iid))
    assert gap_stderr(_rows([[0.3]])) == 0.0


def test_mi_proxies_rows_carry_the_prompt_class_of_keys():
    logp = -np.abs(np.random.default_rng(2).normal(size=(4, 3)))
    _, rows = mi_proxies(logp, np.ones(4), np.array([0, 1, 2, 2]), prompt_keys=["a", "b", "a"], return_rows=True)
    assert rows.prompt_class.tolist() == [0, 1, 0, 0]  # columns 0 and 2 are the same prompt


def test_monitor_loads_states_and_pickles_from_before_the_floors():
    mon = CollapseMonitor(warn_min_peak=0.3, warn_noise_sigmas=1.5)
    mon.update(_metrics(1.0, 2.0))
    state = mon.state_dict()
    restored = CollapseMonitor()
    restored.load_state_dict(state)
    assert (restored.warn_min_peak, restored.warn_noise_sigmas) == (0.3, 1.5)
    old = {k: v for k, v in state.items() if k not in ("warn_min_peak", "warn_noise_sigmas", "peak_stderr")}
    restored.load_state_dict(old)
    assert (restored.warn_min_peak, restored.warn_noise_sigmas, restored.peak_stderr) == (0.1, 2.0, 0.0)
    unpickled = CollapseMonitor()  # a monitor pickled by an older version lacks the new attributes
    for name in ("warn_min_peak", "warn_noise_sigmas", "peak_stderr"):
        del unpickled.__dict__[name]
    assert unpickled.update(_metrics(1.0, 1.0))["collapse_alarm"] == 0.0


def test_monitor_rejects_bad_floors():
    for kwargs in (dict(warn_min_peak=-0.1), dict(warn_noise_sigmas=float("nan")), dict(warn_min_peak="0.1")):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            CollapseMonitor(**kwargs)
