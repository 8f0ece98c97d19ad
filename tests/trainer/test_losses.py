"""Loss functions: aggregation modes, clipping, dual clip, KL estimators, value loss, log-probs."""

import math

import pytest
import torch

from ragen2.trainer.losses import (
    agg_denominator,
    aggregate,
    kl_penalty,
    logprobs_and_entropy,
    policy_loss,
    value_loss,
)

X = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], [5.0, 5.0, 5.0, 5.0]])
M = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1], [0, 0, 0, 0]])  # row 2 has no masked token


def test_token_mean_by_hand():
    assert aggregate(X, M, "token-mean").item() == pytest.approx((1 + 2 + 20 + 30 + 40) / 5)


def test_seq_mean_token_sum_by_hand():
    assert aggregate(X, M, "seq-mean-token-sum").item() == pytest.approx((3 + 90) / 2)


def test_seq_mean_token_mean_by_hand():
    assert aggregate(X, M, "seq-mean-token-mean").item() == pytest.approx((1.5 + 30) / 2)


def test_seq_mean_token_sum_norm_by_hand():
    assert aggregate(X, M, "seq-mean-token-sum-norm", norm_const=10).item() == pytest.approx((0.3 + 9) / 2)
    with pytest.raises(ValueError, match="norm_const"):
        aggregate(X, M, "seq-mean-token-sum-norm")


def test_unknown_mode_named():
    with pytest.raises(ValueError, match="'bogus'"):
        aggregate(X, M, "bogus")


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                  "seq-mean-token-sum-norm"])
def test_micro_batches_with_global_denominator_add_up(mode):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 9, generator=g)
    m = (torch.rand(6, 9, generator=g) > 0.5).float()
    full = aggregate(x, m, mode, norm_const=7.0)
    denom = agg_denominator(m, mode)
    parts = sum(aggregate(x[i:i + 2], m[i:i + 2], mode, denom=denom, norm_const=7.0) for i in range(0, 6, 2))
    assert parts.item() == pytest.approx(full.item(), rel=1e-6)


def _pg(logp, old, adv, dual=3.0, low=0.2, high=0.28):
    t = lambda v: torch.tensor([[v]])  # noqa: E731
    loss, stats = policy_loss(t(logp), t(old), t(adv), t(1.0), low, high, dual, "token-mean")
    return loss.item(), stats


def test_unclipped_region():
    ratio = 1.1
    loss, stats = _pg(math.log(ratio), 0.0, 2.0)
    assert loss == pytest.approx(-2.0 * ratio)
    assert stats["clipfrac"] == 0.0


def test_positive_advantage_clips_at_one_plus_high():
    loss, stats = _pg(math.log(1.5), 0.0, 1.0)
    assert loss == pytest.approx(-1.28)
    assert stats["clipfrac"] == 1.0


def test_negative_advantage_clips_at_one_minus_low():
    loss, stats = _pg(math.log(0.5), 0.0, -1.0)
    assert loss == pytest.approx(0.8)  # max(0.5, 0.8)
    assert stats["clipfrac"] == 1.0


def test_dual_clip_bounds_negative_advantage():
    loss, stats = _pg(math.log(10.0), 0.0, -1.0, dual=3.0)
    assert loss == pytest.approx(3.0)  # min(max(10, 1.28), 3)
    assert stats["dual_clipfrac"] == 1.0
    loss_off, _ = _pg(math.log(10.0), 0.0, -1.0, dual=0.0)
    assert loss_off == pytest.approx(10.0)
    # positive advantages are never dual-clipped
    loss_pos, _ = _pg(math.log(10.0), 0.0, 1.0, dual=3.0)
    assert loss_pos == pytest.approx(-1.28)


def test_dual_clip_must_exceed_one():
    with pytest.raises(ValueError, match="dual_clip"):
        _pg(0.0, 0.0, 1.0, dual=0.5)


def test_policy_gradient_zero_with_zero_advantage():
    logp = torch.zeros(2, 3, requires_grad=True)
    loss, _ = policy_loss(logp, torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3), 0.2, 0.28, 3.0,
                          "token-mean")
    loss.backward()
    assert torch.count_nonzero(logp.grad) == 0


def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([-1.0]), torch.tensor([-1.5])
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(0.5)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.125)
    d = -0.5
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(math.exp(d) - d - 1)
    assert kl_penalty(ref, ref, "k3").item() == 0.0
    assert kl_penalty(torch.tensor([0.0]), torch.tensor([-100.0]), "k3").item() <= 10.0
    with pytest.raises(ValueError, match="'kl'"):
        kl_penalty(logp, ref, "kl")


def test_k3_is_unbiased_kl_estimate_on_samples():
    # E_{x~p}[k3] = KL(p || q) for categorical p, q
    p = torch.tensor([0.6, 0.3, 0.1])
    q = torch.tensor([0.2, 0.5, 0.3])
    exact = float((p * (p / q).log()).sum())
    k3 = kl_penalty(p.log(), q.log(), "k3")
    assert float((p * k3).sum()) == pytest.approx(exact, rel=1e-5)


def test_value_loss_clipping():
    v_old = torch.tensor([[0.0, 0.0]])
    v = torch.tensor([[1.0, 0.1]])
    g = torch.tensor([[2.0, 0.0]])
    loss, stats = value_loss(v, v_old, g, torch.ones(1, 2), clip=0.5)
    # token 0: max((1-2)^2, (0.5-2)^2) = 2.25; token 1: max(0.01, 0.01) = 0.01
    assert loss.item() == pytest.approx(0.5 * (2.25 + 0.01) / 2)
    assert stats["vf_clipfrac"] == pytest.approx(0.5)


def test_logprobs_and_entropy_match_direct_computation():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 4, 11, generator=g)
    targets = torch.randint(0, 11, (5, 4), generator=g)
    logp, ent = logprobs_and_entropy(logits, targets, chunk_rows=2)
    dist = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(logp, dist.log_prob(targets))
    torch.testing.assert_close(ent, dist.entropy())
