"""Activation checkpointing: the same gradients with it on and off, layers really recomputed, prefix sharing off."""

import pytest
import torch

from ragen2.model import activation_checkpointing as ac
from ragen2.model.prefix import ragged_forward
from ragen2.trainer.actor import actor_terms, compute_logprobs, term_denominators
from ragen2.trainer.critic import ValueModel
from ragen2.trainer.losses import value_loss
from tests.trainer._tiny import grpo_batch, settings, tiny_lm

SCORES = [[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 0.5, 0.0]]


def _layer_calls(model) -> list[int]:
    """Counts of the decoder layers' MLP runs (a checkpointed layer runs again in the backward pass; module hooks
    do not fire in that replay, so the count wraps ``forward`` itself)."""
    calls = [0]
    for layer in model.model.layers:
        def counted(*args, _forward=layer.mlp.forward, **kwargs):
            calls[0] += 1
            return _forward(*args, **kwargs)
        layer.mlp.forward = counted
    return calls


def _shared_prompt_batch(model, scores=None):
    """``grpo_batch`` with the rows of a group sharing their 4-token prompt (as a group's rollouts do)."""
    batch = grpo_batch(model, scores or SCORES)
    for g in batch.group_ids.unique():
        rows = torch.nonzero(batch.group_ids == g).flatten()
        batch.input_ids[rows, :4] = batch.input_ids[rows[0], :4]
    batch.old_logp, _ = compute_logprobs(model, batch, micro_batch_size=4)
    return batch


def _actor_grads(checkpointing: bool, share_prefix: bool, precision: str = "fp32"):
    model = tiny_lm()
    if checkpointing:
        ac.enable(model)
    calls = _layer_calls(model)
    batch = _shared_prompt_batch(model)
    s = settings(share_prefix=share_prefix, precision=precision)
    model.zero_grad(set_to_none=True)
    calls[0] = 0
    terms, _ = actor_terms(model, batch, s, term_denominators(batch, s))
    sum(terms.values()).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}, calls[0], model


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_actor_gradients_equal_with_and_without_checkpointing(precision):
    plain, plain_calls, _ = _actor_grads(False, share_prefix=False, precision=precision)
    ckpt, ckpt_calls, model = _actor_grads(True, share_prefix=False, precision=precision)
    layers = len(model.model.layers)
    assert plain_calls == layers and ckpt_calls == 2 * layers  # each layer recomputed once in the backward
    for name in plain:
        assert torch.allclose(plain[name], ckpt[name], rtol=1e-5, atol=1e-7), name
    # the model is back in eval mode everywhere once the pass is over
    assert not any(m.training for m in model.modules())


def test_checkpointed_pass_runs_whole_prompts_and_matches_the_shared_prefix_gradients():
    shared, _, _ = _actor_grads(False, share_prefix=True)
    ckpt, _, _ = _actor_grads(True, share_prefix=True)  # sharing steps aside: plain forward, same gradient
    for name in shared:
        assert torch.allclose(shared[name], ckpt[name], rtol=1e-4, atol=1e-6), name


def test_recompute_flag_is_set_only_on_layers_and_only_with_gradient():
    model = tiny_lm()
    batch = _shared_prompt_batch(model)
    wanted = torch.nn.functional.pad(batch.loss_mask > 0, (0, 1))
    assert not ac.is_enabled(model)
    ac.enable(model)
    assert ac.is_enabled(model)
    with ac.recompute_in_backward(model):
        assert ac.recomputes(model)
        assert all(layer.training for layer in model.model.layers)
        assert not any(layer.self_attn.training or layer.mlp.training for layer in model.model.layers)
        assert not model.training and not model.model.training
        assert ragged_forward(model.base_model, batch.input_ids, batch.attention_mask, wanted) is None
    with torch.no_grad(), ac.recompute_in_backward(model):
        assert not ac.recomputes(model)  # no backward to replay: the layers take caches, prefixes are shared
        assert ragged_forward(model.base_model, batch.input_ids, batch.attention_mask, wanted) is not None
    assert not any(m.training for m in model.modules())


def test_no_gradient_passes_are_unchanged_by_checkpointing():
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    before = compute_logprobs(model, batch, 4)
    ac.enable(model)
    after = compute_logprobs(model, batch, 4)
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])


def test_critic_gradients_equal_with_and_without_checkpointing():
    def grads(checkpointing: bool):
        backbone = tiny_lm(1)
        if checkpointing:
            ac.enable(backbone)
        critic = ValueModel(backbone)
        torch.nn.init.normal_(critic.head.weight, std=0.1)
        critic.eval()
        batch = grpo_batch(tiny_lm(), SCORES)
        values = critic(batch.input_ids, batch.attention_mask)
        returns = torch.randn(values.shape, generator=torch.Generator().manual_seed(0))
        loss, _ = value_loss(values, values.detach() * 0, returns, batch.task_mask)
        loss.backward()
        return {n: p.grad.clone() for n, p in critic.named_parameters()}

    plain, ckpt = grads(False), grads(True)
    for name in plain:
        assert torch.allclose(plain[name], ckpt[name], rtol=1e-5, atol=1e-7), name
