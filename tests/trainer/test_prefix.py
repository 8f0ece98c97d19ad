"""The shared-prefix forward equals the plain forward: log-probs, entropies, values and gradients."""

import pytest
import torch

from ragen2.trainer.actor import forward_logprobs
from ragen2.trainer.batch import build_batch
from ragen2.trainer.critic import ValueModel
from ragen2.trainer.prefix import first_trained_column, shared_prefix_forward
from tests.trainer._tiny import tiny_lm, trajectories


def shared_prompt_batch(groups=((1, 0, 1), (0, 1), (1, 1, 0, 0)), seed=0):
    """Rows of a group share their 4-token prompt; responses differ in length (right padding)."""
    trajs = trajectories([list(g) for g in groups], seed)
    for t in trajs:
        first = next(u for u in trajs if u.group == t.group)
        t.input_ids[:4] = first.input_ids[:4]
    return build_batch(trajs, pad_id=0)


def grads(model):
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def test_actor_logprobs_entropy_and_gradients_match_the_plain_forward():
    model = tiny_lm()
    model.train()
    batch = shared_prompt_batch()
    results = []
    for share in (False, True):
        model.zero_grad(set_to_none=True)
        logp, ent = forward_logprobs(model, batch, temperature=0.7, share_prefix=share)
        ((logp * batch.loss_mask).sum() + 0.3 * (ent * batch.loss_mask).sum()).backward()
        results.append((logp.detach(), ent.detach(), grads(model)))
    (lp0, e0, g0), (lp1, e1, g1) = results
    assert torch.allclose(lp0, lp1, atol=1e-5) and torch.allclose(e0, e1, atol=1e-5)
    assert len(g0) == len(g1) > 0
    for a, b in zip(g0, g1, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_the_prefix_runs_once_per_distinct_prompt():
    model = tiny_lm()
    batch = shared_prompt_batch()
    start = first_trained_column(batch.loss_mask)
    assert start == 3  # 4 prompt tokens: the first trained column predicts token 4
    split = shared_prefix_forward(model, batch.input_ids, batch.attention_mask, start)
    assert split is not None
    assert split.prefix.logits.shape[0] == 3  # three groups, nine rows
    assert split.suffix.logits.shape[:2] == (len(batch), batch.input_ids.shape[1] - start)
    # rows of the same group point at the same prefix, rows of different groups at different ones
    for i in range(len(batch)):
        for j in range(len(batch)):
            same = bool(batch.group_ids[i] == batch.group_ids[j])
            assert (split.rows[i] == split.rows[j]).item() == same


def test_no_sharing_when_every_prefix_is_distinct_or_start_is_out_of_range():
    model = tiny_lm()
    batch = build_batch(trajectories([[1.0], [0.0], [1.0]], seed=3), pad_id=0)
    assert shared_prefix_forward(model, batch.input_ids, batch.attention_mask, 3) is None
    shared = shared_prompt_batch()
    assert shared_prefix_forward(model, shared.input_ids, shared.attention_mask, 0) is None
    assert shared_prefix_forward(model, shared.input_ids, shared.attention_mask, shared.input_ids.shape[1]) is None


def test_padding_inside_the_prefix_is_an_error():
    model = tiny_lm()
    batch = shared_prompt_batch()
    mask = batch.attention_mask.clone()
    mask[0, 1] = 0
    with pytest.raises(ValueError, match="real tokens"):
        shared_prefix_forward(model, batch.input_ids, mask, 3)


def test_critic_values_and_gradients_match_the_plain_forward():
    critic = ValueModel(tiny_lm())
    torch.nn.init.normal_(critic.head.weight, std=0.5)  # a zero head would hide differences in the body
    batch = shared_prompt_batch()
    results = []
    for start in (0, first_trained_column(batch.loss_mask)):
        critic.zero_grad(set_to_none=True)
        values = critic(batch.input_ids, batch.attention_mask, shared_prefix=start)
        (values * batch.loss_mask).pow(2).sum().backward()
        results.append((values.detach(), grads(critic)))
    (v0, g0), (v1, g1) = results
    assert v0.shape == v1.shape == batch.loss_mask.shape
    assert torch.allclose(v0, v1, atol=1e-5)
    for a, b in zip(g0, g1, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
