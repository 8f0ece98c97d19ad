"""Advantage estimators against plain-Python references and hand-computed values."""

import math

import pytest
import torch

from ragen2.trainer.advantages import compute_gae, grpo_advantages, masked_mean, whiten


def gae_reference(rewards, values, mask, gamma, lam):
    """Textbook GAE on the trained tokens only, then each untrained token copies the advantage of the
    next trained token to its right (0 if none) -- a different formulation of the carry rule of docs/method.md §6.1."""
    adv_rows, ret_rows = [], []
    for r, v, m in zip(rewards, values, mask):
        idx = [t for t in range(len(m)) if m[t]]
        adv_trained = {}
        running, next_v = 0.0, 0.0
        for t in reversed(idx):
            delta = r[t] + gamma * next_v - v[t]
            running = delta + gamma * lam * running
            adv_trained[t] = running
            next_v = v[t]
        row = []
        for t in range(len(m)):
            later = [u for u in idx if u >= t]
            row.append(adv_trained[later[0]] if later else 0.0)
        adv_rows.append(row)
        ret_rows.append([a + vv for a, vv in zip(row, v)])
    return torch.tensor(adv_rows), torch.tensor(ret_rows)


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.9, 0.95), (0.5, 0.0)])
def test_gae_matches_plain_loop(gamma, lam):
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(5, 13, generator=g)
    values = torch.randn(5, 13, generator=g)
    mask = (torch.rand(5, 13, generator=g) > 0.4).float()
    mask[0] = 0  # a row with no trained token
    mask[1] = 1  # a fully trained row
    adv, ret = compute_gae(rewards, values, mask, gamma, lam)
    ref_adv, ref_ret = gae_reference(rewards.tolist(), values.tolist(), mask.tolist(), gamma, lam)
    torch.testing.assert_close(adv, ref_adv, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret, ref_ret, rtol=1e-5, atol=1e-5)


def test_gae_terminal_reward_gamma_one_is_reward_minus_value():
    # gamma = lam = 1 with one terminal reward R: A_t = R - V_t on every trained token
    rewards = torch.tensor([[0.0, 0.0, 0.0, 2.0, 0.0]])
    values = torch.tensor([[0.5, 0.1, 0.3, 0.7, 9.0]])
    mask = torch.tensor([[0, 1, 1, 1, 0]])
    adv, ret = compute_gae(rewards, values, mask, 1.0, 1.0)
    torch.testing.assert_close(adv[0, 1:4], torch.tensor([1.9, 1.7, 1.3]))
    assert adv[0, 4] == 0.0  # nothing trained after it
    torch.testing.assert_close(adv[0, 0], adv[0, 1])  # carried through the untrained prefix
    torch.testing.assert_close(ret[0, 1:4], torch.tensor([2.0, 2.0, 2.0]))


def test_gae_shape_error_names_shapes():
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        compute_gae(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2, 3), 1.0, 1.0)


def test_whiten_uses_masked_unbiased_stats():
    x = torch.tensor([[1.0, 2.0, 100.0], [3.0, -50.0, 4.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    vals = [1.0, 2.0, 3.0, 4.0]
    mean = sum(vals) / 4
    var = sum((v - mean) ** 2 for v in vals) / 3
    out = whiten(x, mask)
    assert out[0, 0].item() == pytest.approx((1.0 - mean) / math.sqrt(var + 1e-8), rel=1e-6)
    assert masked_mean(out, mask).item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="at least 2"):
        whiten(x, torch.tensor([[1, 0, 0], [0, 0, 0]]))


def test_grpo_by_hand():
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 5.0, 5.0, 2.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 2])
    adv = grpo_advantages(scores, groups)
    # group 0: mean 0.25, unbiased std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    expected0 = [(1 - 0.25) / (0.5 + 1e-6)] + [(0 - 0.25) / (0.5 + 1e-6)] * 3
    torch.testing.assert_close(adv[:4], torch.tensor(expected0))
    # group 1: zero variance -> advantage 0; group 2: single member -> mean 0, std 1
    torch.testing.assert_close(adv[4:6], torch.zeros(2))
    assert adv[6].item() == pytest.approx(2.0 / (1 + 1e-6))


def test_dr_grpo_is_mean_centred_only():
    scores = torch.tensor([3.0, 1.0, 2.0, 10.0, 10.0])
    groups = torch.tensor([7, 7, 7, 3, 3])  # ids need not be contiguous or sorted
    adv = grpo_advantages(scores, groups, norm_by_std=False)
    torch.testing.assert_close(adv, torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0]))


def test_grpo_interleaved_groups_equal_contiguous():
    scores = torch.tensor([1.0, 4.0, 0.0, 2.0])
    a = grpo_advantages(scores, torch.tensor([0, 1, 0, 1]))
    b = grpo_advantages(scores[[0, 2, 1, 3]], torch.tensor([0, 0, 1, 1]))
    torch.testing.assert_close(a[[0, 2, 1, 3]], b)


def test_grpo_std_is_correctly_rounded_so_every_cpu_gives_the_same_bits():
    """A thousand groups of 16 scores: the advantages equal a float32 numpy computation with the IEEE square root
    (torch.sqrt on a CPU rounds its last bit by CPU vendor, and would miss here on Intel and AMD alike)."""
    import numpy as np

    g = torch.Generator().manual_seed(3)
    scores = torch.rand(16_000, generator=g) * 3
    ids = torch.arange(1000).repeat_interleave(16)
    got = grpo_advantages(scores, ids).numpy()
    s = scores.numpy().reshape(1000, 16)
    means = torch.zeros(1000).index_add_(0, ids, scores).numpy() / np.float32(16)  # the same summation order
    sq = torch.zeros(1000).index_add_(0, ids, (scores - torch.from_numpy(means)[ids]) ** 2).numpy()
    stds = np.sqrt(sq / np.float32(15))
    want = (s - means[:, None]) / (stds[:, None] + np.float32(1e-6))
    assert np.array_equal(got, want.reshape(-1))
