"""The actor update on a tiny random model and synthetic batches."""

import numpy as np
import pytest
import torch

from ragen2.trainer.actor import actor_terms, compute_logprobs, term_denominators, update_actor
from tests.trainer._tiny import grpo_batch, settings, tiny_lm

SCORES = [[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 0.0, 1.0]]


def _update(micro: int, **kw):
    torch.set_num_threads(1)
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    logs = update_actor(model, opt, batch, settings(**kw), mini_batch_size=6, micro_batch_size=micro, epochs=1,
                        grad_clip=1.0, rng=np.random.default_rng(0))
    return model, logs


def test_update_moves_parameters_and_logs_finite_values():
    before = [p.detach().clone() for p in tiny_lm().parameters()]
    model, logs = _update(micro=2)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert logs["actor/optimizer_steps"] == 2.0  # 12 rows / 6
    assert all(np.isfinite(v) for v in logs.values())
    assert logs["actor/entropy"] > 0 and logs["actor/kl"] >= 0


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_result_does_not_depend_on_micro_batch_size(mode):
    a, _ = _update(micro=1, agg_mode=mode)
    b, _ = _update(micro=6, agg_mode=mode)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-4, atol=1e-6)


def test_reasoning_scope_uses_only_reasoning_tokens():
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    s_all, s_reason = settings(entropy_scope="all"), settings(entropy_scope="reasoning")
    _, st_all = actor_terms(model, batch, s_all, term_denominators(batch, s_all))
    _, st_reason = actor_terms(model, batch, s_reason, term_denominators(batch, s_reason))
    _, ent = compute_logprobs(model, batch, 4)
    m = batch.reasoning_mask
    assert st_reason["entropy"] == pytest.approx(float((ent * m).sum() / m.sum()), rel=1e-5)
    assert st_reason["entropy"] != pytest.approx(st_all["entropy"], rel=1e-6)


def test_task_scale_scales_only_the_task_term():
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    batch.old_logp = batch.old_logp - 0.1  # ratio != 1 so the task loss is non-trivial
    s1, s2 = settings(), settings(task_scale=0.25)
    t1, _ = actor_terms(model, batch, s1, term_denominators(batch, s1))
    t2, _ = actor_terms(model, batch, s2, term_denominators(batch, s2))
    assert t2["task"].item() == pytest.approx(0.25 * t1["task"].item(), rel=1e-5)
    assert t2["kl"].item() == pytest.approx(t1["kl"].item())
    assert t2["entropy"].item() == pytest.approx(t1["entropy"].item())


def test_rows_with_zero_task_weight_carry_only_regularisers():
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    batch.old_logp = batch.old_logp - 0.1
    batch.task_weight = torch.tensor([1.0] * 4 + [0.0] * 8)
    s = settings()
    terms, _ = actor_terms(model, batch, s, term_denominators(batch, s))
    kept = batch.select(range(4))
    kept_terms, _ = actor_terms(model, kept, s, term_denominators(kept, s))
    assert terms["task"].item() == pytest.approx(kept_terms["task"].item(), rel=1e-5)
    assert terms["kl"].item() != pytest.approx(kept_terms["kl"].item(), rel=1e-3)


def test_kl_without_reference_is_an_error():
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    batch.ref_logp = None
    with pytest.raises(ValueError, match="ref_logp"):
        actor_terms(model, batch, settings(), term_denominators(batch, settings()))


def test_logits_start_at_the_first_trained_token_and_match_the_full_forward():
    from ragen2.trainer.actor import forward_logprobs
    from ragen2.trainer.batch import build_batch
    from ragen2.trainer.losses import logprobs_and_entropy
    from tests.trainer._tiny import trajectories

    model = tiny_lm()
    batch = build_batch(trajectories([[1.0, 0.0], [0.0, 1.0]], seed=3), pad_id=0)
    start = int(torch.nonzero(batch.loss_mask.any(dim=0)).flatten()[0])
    assert start > 0  # the prompt is skipped
    logp, entropy = forward_logprobs(model, batch)
    full = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
    ref_logp, ref_entropy = logprobs_and_entropy(full, batch.targets)
    mask = batch.loss_mask.bool()
    torch.testing.assert_close(logp[mask], ref_logp[mask], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(entropy[mask], ref_entropy[mask], atol=1e-6, rtol=1e-5)
    assert logp.shape == batch.loss_mask.shape and float(logp[:, :start].abs().sum()) == 0.0
    # the gradient of a loss on trained tokens is the same as through the full forward
    grads = []
    for lp in (forward_logprobs(model, batch)[0], logprobs_and_entropy(
            model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1], batch.targets)[0]):
        model.zero_grad()
        (lp * batch.loss_mask).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)


def test_mini_batches_hold_whole_groups_in_a_seeded_random_order(monkeypatch):
    import ragen2.trainer.actor as actor_mod

    seen: list[list[int]] = []
    real = actor_mod.actor_terms

    def spy(model, mb, s, denoms, *args, **kw):
        seen.append(mb.group_ids.tolist())
        return real(model, mb, s, denoms, *args, **kw)

    monkeypatch.setattr(actor_mod, "actor_terms", spy)
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)  # 3 groups of 4 rows
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    orders = []
    for seed in range(6):
        seen.clear()
        update_actor(model, opt, batch, settings(), mini_batch_size=4, micro_batch_size=4, epochs=1,
                     grad_clip=1.0, rng=np.random.default_rng(seed))
        assert all(len(set(ids)) == 1 and len(ids) == 4 for ids in seen)  # one whole group per mini-batch
        orders.append(tuple(ids[0] for ids in seen))
        assert sorted(orders[-1]) == [0, 1, 2]
    assert len(set(orders)) > 1  # the group order is drawn from rng
