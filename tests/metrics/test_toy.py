"""The toy mixture policies: analytic values, estimator convergence, and the four regimes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragen2.metrics import mi_proxies
from ragen2.metrics.toy import (
    REGIMES,
    MixturePolicy,
    analytic_conditional_entropy,
    analytic_entropy,
    analytic_mi,
    sample_batch,
)


def _entropies_by_enumeration(policy: MixturePolicy):
    """H(Z|X), H(Z), I(X;Z) by summing over every (x, z) pair of the exact log-prob matrix."""
    num_z = policy.template_size + policy.num_inputs * policy.diversity
    logp = policy.log_prob_matrix(np.arange(num_z), np.arange(policy.num_inputs))  # [Z, X]
    p_zx = np.exp(logp)
    np.testing.assert_allclose(p_zx.sum(axis=0), 1.0)
    p_z = p_zx.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = -np.nansum(p_zx * np.where(p_zx > 0, logp, 0.0)) / policy.num_inputs
        ent = -np.sum(np.where(p_z > 0, p_z * np.log(p_z), 0.0))
    return cond, ent, ent - cond


@pytest.mark.parametrize("policy", [
    MixturePolicy(4, 0.3, 3, 5), MixturePolicy(6, 0.0, 2, 7), MixturePolicy(5, 1.0, 1, 1),
    MixturePolicy(3, 0.77, 9, 2), *REGIMES.values(),
])
def test_analytic_formulas_match_enumeration(policy):
    cond, ent, mi = _entropies_by_enumeration(policy)
    assert analytic_conditional_entropy(policy) == pytest.approx(cond, abs=1e-12)
    assert analytic_entropy(policy) == pytest.approx(ent, abs=1e-12)
    assert analytic_mi(policy) == pytest.approx(mi, abs=1e-12)
    assert analytic_mi(policy) == pytest.approx(policy.dependence * math.log(policy.num_inputs))


def test_sampling_frequencies_match_the_policy():
    policy = MixturePolicy(num_inputs=3, dependence=0.4, diversity=2, template_size=5)
    rng = np.random.default_rng(0)
    inputs = np.full(40000, 1)
    z = policy.sample(inputs, rng)
    owner = policy.owner(z)
    assert set(np.unique(owner)) <= {-1, 1}
    assert np.mean(owner == 1) == pytest.approx(0.4, abs=0.01)


@pytest.mark.parametrize("policy", [MixturePolicy(8, 0.6, 4, 6, length=3), MixturePolicy(4, 0.25, 2, 3)])
def test_estimates_approach_analytic_values(policy):
    """Seq estimates are unbiased when the columns are every input once; error shrinks with M."""
    rng = np.random.default_rng(1)
    targets = {"mi_seq_estimate": analytic_mi(policy),
               "conditional_entropy_seq_est": analytic_conditional_entropy(policy),
               "reasoning_entropy_seq_est": analytic_entropy(policy)}
    errors = {}
    for rows_per_column in (8, 4000):
        b = sample_batch(policy, rows_per_column, rng)
        m = mi_proxies(b.logp_sum, b.lengths, b.prompt_index, b.prompt_keys)
        errors[rows_per_column] = {k: abs(m[k] - v) for k, v in targets.items()}
        # Per-token H(Z|X) is the seq one over the fixed length; per-token MI is not (its marginal
        # mixes length-normalised scores, a tempered mixture), except when length is 1.
        assert m["conditional_entropy_est"] == pytest.approx(m["conditional_entropy_seq_est"] / policy.length)
        if policy.length == 1:
            assert m["mi_estimate"] == pytest.approx(m["mi_seq_estimate"])
    # Standard error at M = 32000 rows is about 0.005 nats for these policies; allow 5 of them.
    assert max(errors[4000].values()) < 0.03
    assert sum(errors[4000].values()) < sum(errors[8].values())


def test_duplicate_columns_keep_retrieval_at_chance_consistent():
    policy = MixturePolicy(num_inputs=4, dependence=1.0, diversity=3, template_size=1)
    b = sample_batch(policy, 50, np.random.default_rng(2), columns=np.array([0, 0, 1, 2, 3, 3]))
    m = mi_proxies(b.logp_sum, b.lengths, b.prompt_index, b.prompt_keys)
    assert m["retrieval_accuracy"] == 1.0  # input-specific strings are always retrieved
    assert m["retrieval_chance_level"] == pytest.approx((2 * 2 + 1 + 1 + 2 * 2) / 6 / 6)


@pytest.mark.parametrize("name,high_entropy,high_mi", [
    ("diverse_reasoning", True, True), ("template_collapse", True, False),
    ("compressed_reasoning", False, True), ("low_entropy_collapse", False, False),
])
def test_regimes_land_in_their_quadrants(name, high_entropy, high_mi):
    policy = REGIMES[name]
    b = sample_batch(policy, 32, np.random.default_rng(3))
    m = mi_proxies(b.logp_sum, b.lengths, b.prompt_index, b.prompt_keys)
    bound = m["mi_upper_bound"]
    assert (m["mi_estimate"] > bound / 2) == high_mi
    assert (m["conditional_entropy_est"] > 1.0) == high_entropy
    assert (m["retrieval_above_chance"] > 0.5) == high_mi


def test_bad_policy_and_batch_arguments():
    with pytest.raises(ValueError, match="1.5"):
        MixturePolicy(dependence=1.5)
    with pytest.raises(ValueError, match="0"):
        MixturePolicy(num_inputs=0)
    with pytest.raises(ValueError, match="9"):
        sample_batch(MixturePolicy(num_inputs=4), 2, np.random.default_rng(0), columns=np.array([0, 9]))
