"""The ragged forward equals the plain forward: log-probs, entropies, values and gradients; and it runs less."""

import itertools
import random

import pytest
import torch
import torch.nn.functional as F

from ragen2.model.prefix import SEGMENT_COST, ragged_forward, segment_bounds
from ragen2.trainer.actor import forward_logprobs
from ragen2.trainer.batch import build_batch
from ragen2.trainer.critic import ValueModel
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


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_actor_logprobs_entropy_and_gradients_match_the_plain_forward(temperature):
    model = tiny_lm()
    batch = shared_prompt_batch()
    results = []
    for share in (False, True):
        model.zero_grad(set_to_none=True)
        logp, ent = forward_logprobs(model, batch, temperature=temperature, share_prefix=share)
        ((logp * batch.loss_mask).sum() + 0.3 * (ent * batch.loss_mask).sum()).backward()
        results.append((logp.detach() * batch.loss_mask, ent.detach() * batch.loss_mask, grads(model)))
    (lp0, e0, g0), (lp1, e1, g1) = results
    assert torch.allclose(lp0, lp1, atol=1e-5) and torch.allclose(e0, e1, atol=1e-5)
    assert len(g0) == len(g1) > 0
    for a, b in zip(g0, g1, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_the_ragged_forward_is_zero_off_the_trained_tokens():
    batch = shared_prompt_batch()
    logp, ent = forward_logprobs(tiny_lm(), batch)
    off = batch.loss_mask == 0
    assert (logp[off] == 0).all() and (ent[off] == 0).all() and (logp[~off] < 0).all()


def ragged_forward_shapes(model, batch, wanted):
    """:func:`ragged_forward` of ``batch`` and the ``input_ids`` shape of every pass it made through the model."""
    shapes = []
    hook = model.model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        out = ragged_forward(model.base_model, batch.input_ids, batch.attention_mask, wanted)
    finally:
        hook.remove()
    return out, shapes


def test_prompts_run_once_and_rows_only_up_to_their_last_wanted_position():
    model = tiny_lm()
    batch = shared_prompt_batch()
    wanted = F.pad(batch.loss_mask > 0, (0, 1))
    out, shapes = ragged_forward_shapes(model, batch, wanted)
    # three groups' prompts, nine rows: the hidden state of the 4th prompt token predicts the first trained one
    assert shapes[0] == (3, 3)
    ends = [int(torch.nonzero(w).max()) + 1 for w in wanted]
    assert sum(r * c for r, c in shapes[1:]) == sum(
        sum(e > lo for e in ends) * (hi - lo) for lo, hi in itertools.pairwise(segment_bounds(ends, 3)))
    assert sum(r * c for r, c in shapes[1:]) < len(batch) * (batch.input_ids.shape[1] - 3)  # less than padded
    assert len(out.hidden) == int(wanted.sum())
    assert set(zip(out.rows.tolist(), out.cols.tolist())) == {tuple(x) for x in torch.nonzero(wanted).tolist()}


def test_rows_without_a_wanted_position_are_not_run():
    model = tiny_lm()
    batch = shared_prompt_batch()
    wanted = F.pad(batch.loss_mask > 0, (0, 1))
    wanted[2:5] = False
    out = ragged_forward(model.base_model, batch.input_ids, batch.attention_mask, wanted)
    assert not set(out.rows.tolist()) & {2, 3, 4}
    full = model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    assert torch.allclose(out.hidden, full[out.rows, out.cols], atol=1e-5)


def test_without_a_shared_prompt_the_first_segment_starts_at_column_zero():
    model = tiny_lm()
    batch = shared_prompt_batch()
    wanted = torch.zeros_like(batch.attention_mask, dtype=torch.bool)
    wanted[:, 0] = True
    wanted[0, 3] = True
    out = ragged_forward(model.base_model, batch.input_ids, batch.attention_mask, wanted)
    full = model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    assert torch.allclose(out.hidden, full[out.rows, out.cols], atol=1e-5)


def test_segment_bounds_minimise_the_work_plus_a_cost_per_segment():
    rng = random.Random(0)
    for _ in range(50):
        start = rng.randint(0, 5)
        ends = [rng.randint(start + 1, start + 30) for _ in range(rng.randint(1, 7))]
        bounds = segment_bounds(ends, start)
        assert bounds[0] == start and bounds[-1] == max(ends) and bounds == sorted(set(bounds))

        def cost(b, ends=ends):
            return sum(sum(e > lo for e in ends) * (hi - lo) + SEGMENT_COST for lo, hi in itertools.pairwise(b))
        inner = sorted({e for e in ends if e < max(ends)})
        best = min(cost([start, *c, max(ends)]) for k in range(len(inner) + 1) for c in itertools.combinations(inner, k))
        assert cost(bounds) == best
    assert segment_bounds([5, 5], 5) == [5]


def test_padding_inside_the_prefix_is_an_error():
    model = tiny_lm()
    batch = shared_prompt_batch()
    mask = batch.attention_mask.clone()
    mask[0, 1] = 0
    with pytest.raises(ValueError, match="real tokens"):
        ragged_forward(model.base_model, batch.input_ids, mask, F.pad(batch.loss_mask > 0, (0, 1)))


def test_critic_values_and_gradients_match_the_plain_forward():
    critic = ValueModel(tiny_lm())
    torch.nn.init.normal_(critic.head.weight, std=0.5)  # a zero head would hide differences in the body
    batch = shared_prompt_batch()
    results = []
    for wanted in (None, batch.loss_mask > 0):
        critic.zero_grad(set_to_none=True)
        values = critic(batch.input_ids, batch.attention_mask, wanted=wanted)
        (values * batch.loss_mask).pow(2).sum().backward()
        results.append((values.detach() * batch.loss_mask, grads(critic)))
    (v0, g0), (v1, g1) = results
    assert v0.shape == v1.shape == batch.loss_mask.shape
    assert torch.allclose(v0, v1, atol=1e-5)
    for a, b in zip(g0, g1, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_rows_without_shared_prompts_share_their_common_prefix_once():
    """SFT rows: every prompt differs (the observation) but all start with the same system message."""
    model = tiny_lm()
    trajs = trajectories([[1.0]] * 6, seed=7)
    for t in trajs:
        t.input_ids[:3] = [5, 6, 7 + t.group]  # a common 2-token head, then a token of its own
    batch = build_batch(trajs, pad_id=0)
    wanted = F.pad(batch.loss_mask > 0, (0, 1))
    out, shapes = ragged_forward_shapes(model, batch, wanted)
    assert len({tuple(t.input_ids[:3]) for t in trajs}) == 6 and shapes[0] == (1, 2)
    full = model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    assert torch.allclose(out.hidden, full[out.rows, out.cols], atol=1e-5)
