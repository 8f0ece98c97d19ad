"""RV-bucketed gradient decomposition on a tiny random model."""

import math

import pytest
import torch

from ragen2.trainer.grad_analysis import COLUMNS, grad_analysis, quantile_buckets, table_metrics
from tests.trainer._tiny import grpo_batch, settings, tiny_lm

SCORES = [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.0, 2.0, 1.0]]


def test_quantile_buckets_remainder_goes_last():
    rv = {0: 0.5, 1: 0.0, 2: 0.2, 3: 0.9, 4: 0.1, 5: 0.3, 6: 0.0}
    assert quantile_buckets(rv, 3) == [[1, 6], [4, 2], [5, 0, 3]]
    assert quantile_buckets({0: 1.0, 1: 2.0}, 6) == [[0], [1]]  # B = min(6, #groups)
    with pytest.raises(ValueError, match="num_buckets"):
        quantile_buckets(rv, 0)


def test_zero_variance_bucket_has_zero_task_and_nonzero_reg_gradient():
    torch.set_num_threads(1)
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    rv = {g: float(torch.tensor(s).std()) for g, s in enumerate(SCORES)}
    before = [p.detach().clone() for p in model.parameters()]
    table = grad_analysis(model, batch, rv, settings(), num_buckets=2, mini_batch_size=4, micro_batch_size=2,
                          step=7)
    assert list(table.columns) == list(COLUMNS)
    assert table["bucket"].tolist() == ["1", "2", "all"]
    low = table.iloc[0]
    assert low.rv_max == 0.0 and low.num_groups == 2
    assert low.task_norm == 0.0
    assert low.reg_norm > 0 and low.kl_norm > 0 and low.entropy_norm > 0
    assert low.snr == 0.0
    high = table.iloc[1]
    assert high.rv_min > 0 and high.task_norm > 0 and math.isfinite(high.snr)
    assert (table["step"] == 7).all()
    # no optimiser step, gradients cleared
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())
    metrics = table_metrics(table)
    assert metrics["grad_norm/1/task"] == 0.0 and metrics["grad_norm/all/reg"] > 0


def test_reg_norm_combines_kl_and_entropy_gradients():
    torch.set_num_threads(1)
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    rv = {g: float(torch.tensor(s).std()) for g, s in enumerate(SCORES)}
    table = grad_analysis(model, batch, rv, settings(), num_buckets=1, mini_batch_size=64, micro_batch_size=3)
    row = table.iloc[-1]
    # triangle inequality on the combined gradient, and only entropy when kl is off
    assert row.reg_norm <= row.kl_norm + row.entropy_norm + 1e-6
    only_ent = grad_analysis(model, batch, rv, settings(kl_coef=0.0), num_buckets=1, mini_batch_size=64,
                             micro_batch_size=3).iloc[-1]
    assert only_ent.kl_norm == 0.0
    assert only_ent.reg_norm == pytest.approx(row.entropy_norm, rel=1e-5)


def test_missing_group_rv_is_named():
    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    with pytest.raises(ValueError, match=r"\[4\]"):
        grad_analysis(model, batch, {0: 0.0, 1: 0.0, 2: 0.5, 3: 0.5}, settings())


def test_one_forward_serves_every_component_of_a_one_micro_batch_mini_batch():
    from ragen2.trainer.grad_analysis import component_grad_norms

    model = tiny_lm()
    batch = grpo_batch(model, [[1.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    s = settings(entropy_coef=0.05, kl_coef=0.1)
    entries = (("task",), ("entropy",), ("kl",), ("entropy", "kl"))
    together = component_grad_norms(model, batch, s, entries, mini_batch_size=6, micro_batch_size=6)
    alone = [component_grad_norms(model, batch, s, (e,), mini_batch_size=6, micro_batch_size=6)[0] for e in entries]
    assert together == alone  # the same computation, bit for bit
    split = component_grad_norms(model, batch, s, entries, mini_batch_size=6, micro_batch_size=2)
    assert split == pytest.approx(together, rel=1e-5)  # accumulated over micro-batches: the same up to rounding
    assert all(p.grad is None for p in model.parameters())
