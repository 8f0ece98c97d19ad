"""The value model and its clipped update."""

import numpy as np
import torch

from ragen2.trainer.advantages import compute_gae
from ragen2.trainer.critic import ValueModel, compute_values, update_critic
from tests.trainer._tiny import grpo_batch, tiny_lm


def test_value_model_starts_at_zero_and_learns_returns():
    torch.set_num_threads(1)
    critic = ValueModel(tiny_lm())
    batch = grpo_batch(tiny_lm(), [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    batch.values = compute_values(critic, batch, micro_batch_size=2)
    assert batch.values.shape == batch.loss_mask.shape
    assert torch.count_nonzero(batch.values) == 0
    _, batch.returns = compute_gae(batch.rewards, batch.values, batch.loss_mask, 1.0, 1.0)
    opt = torch.optim.AdamW(critic.parameters(), lr=5e-2)
    first = update_critic(critic, opt, batch, mini_batch_size=6, micro_batch_size=3, epochs=1, grad_clip=1.0,
                          rng=np.random.default_rng(0))
    for _ in range(20):
        batch.values = compute_values(critic, batch, micro_batch_size=6)
        last = update_critic(critic, opt, batch, mini_batch_size=6, micro_batch_size=3, epochs=1, grad_clip=1.0,
                             rng=np.random.default_rng(0))
    assert np.isfinite(last["critic/vf_loss"])
    assert last["critic/vf_loss"] < first["critic/vf_loss"]
