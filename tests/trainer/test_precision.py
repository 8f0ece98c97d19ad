"""Mixed precision: fp32 masters move at the paper's learning rate under bf16 autocast; bf16 weights do not."""

import numpy as np
import pytest
import torch

from ragen2.config import ConfigError, RunConfig, TrainerConfig, apply_overrides
from ragen2.model.optim import adamw, clip_and_step
from ragen2.trainer.actor import compute_logprobs, update_actor
from ragen2.trainer.models import run_precision
from ragen2.trainer.precision import autocast, grad_scaler, resolve_precision
from tests.trainer._tiny import grpo_batch, settings, tiny_lm

SCORES = [[1.0, 0.0, 2.0], [0.0, 1.0, 0.5]]


def _step(model, precision: str, scaler=None) -> float:
    """One actor update at lr 1e-6 (the paper's); returns the share of parameter elements that changed."""
    batch = grpo_batch(model, SCORES, ref_shift=0.0)
    batch.old_logp, _ = compute_logprobs(model, batch, 6, precision=precision)  # the update's own numerics
    before = [p.detach().clone() for p in model.parameters()]
    opt = adamw(model, lr=1e-6, weight_decay=0.01)
    logs = update_actor(model, opt, batch, settings(kl_coef=0.0, precision=precision), mini_batch_size=6,
                        micro_batch_size=3, epochs=1, grad_clip=1.0, rng=np.random.default_rng(0), scaler=scaler)
    assert logs["actor/optimizer_steps"] == 1.0 and np.isfinite(logs["actor/pg_loss"])
    changed = sum(int((p.detach() != b).sum()) for p, b in zip(model.parameters(), before))
    return changed / sum(b.numel() for b in before)


def test_bf16_autocast_with_fp32_masters_moves_almost_every_weight_at_lr_1e6():
    model = tiny_lm()
    assert _step(model, "bf16") > 0.99
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_bf16_weights_without_autocast_mostly_do_not_move_at_lr_1e6():
    """The behaviour that trainer.precision replaces: a step of ~1e-6 rounds away in bf16's 8-bit significand."""
    model = tiny_lm().to(torch.bfloat16)
    assert _step(model, "fp32") < 0.05


def test_fp16_autocast_with_a_loss_scaler_moves_the_weights():
    model = tiny_lm()
    scaler = grad_scaler("fp16", "cpu")
    scale = scaler.get_scale()
    assert _step(model, "fp16", scaler) > 0.99
    assert scaler.get_scale() == scale  # no overflow: the scale stays until its growth interval


def test_autocast_region_only_for_lower_precisions():
    with autocast("fp32", "cpu"):
        assert not torch.is_autocast_enabled("cpu")
    with autocast("bf16", "cpu"):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert grad_scaler("bf16", "cpu") is None and grad_scaler("fp32", "cpu") is None
    assert isinstance(grad_scaler("fp16", "cpu"), torch.amp.GradScaler)


def test_log_softmax_and_values_stay_float32_under_autocast():
    from ragen2.trainer.critic import ValueModel, compute_values

    model = tiny_lm()
    batch = grpo_batch(model, SCORES)
    logp, entropy = compute_logprobs(model, batch, 6, precision="bf16")
    assert logp.dtype == entropy.dtype == torch.float32
    fp32, _ = compute_logprobs(model, batch, 6)
    assert torch.allclose(logp, fp32, atol=0.1) and not torch.equal(logp, fp32)  # bf16 compute, close
    critic = ValueModel(tiny_lm(1))
    torch.nn.init.normal_(critic.head.weight)
    with autocast("bf16", "cpu"):
        values = critic(batch.input_ids, batch.attention_mask)
    assert values.dtype == torch.float32
    assert compute_values(critic, batch, 6, precision="bf16").dtype == torch.float32


def test_clip_and_step_skips_a_non_finite_gradient():
    model = tiny_lm()
    opt = adamw(model, lr=1e-3, weight_decay=0.0)
    before = [p.detach().clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = torch.full_like(p, float("nan"))
    norm, stepped = clip_and_step(opt, list(model.parameters()), 1.0)
    assert not stepped and not np.isfinite(norm)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------
def test_precision_key_is_validated_and_auto_follows_policy_dtype():
    with pytest.raises(ConfigError, match=r"trainer.precision='fp8': must be one of auto, fp32, bf16, fp16"):
        TrainerConfig(precision="fp8")
    assert run_precision(RunConfig()) == "fp32"  # the CPU default: float32, no autocast
    assert run_precision(apply_overrides(RunConfig(), ["policy.dtype=bfloat16"])) == "bf16"
    assert run_precision(apply_overrides(RunConfig(), ["trainer.precision=bf16"])) == "bf16"
    assert resolve_precision("auto", "float16") == "fp16"


@pytest.mark.parametrize("precision, dtype", [("fp32", "bfloat16"), ("fp32", "float16"), ("bf16", "float16"),
                                              ("fp16", "bfloat16")])
def test_trained_weights_in_a_low_dtype_without_its_autocast_are_refused(precision, dtype):
    with pytest.raises(ConfigError, match=rf"trainer.precision='{precision}' with policy.dtype='{dtype}'"):
        apply_overrides(RunConfig(), [f"trainer.precision={precision}", f"policy.dtype={dtype}"])


@pytest.mark.parametrize("precision, dtype, computes", [("bf16", "bfloat16", "bf16"), ("bf16", "float32", "bf16"),
                                                        ("fp16", "float16", "fp16"), ("auto", "bfloat16", "bf16")])
def test_allowed_precision_and_frozen_copy_dtypes(precision, dtype, computes):
    """Each pair is kept as given, and the run computes in the precision that pair names."""
    cfg = apply_overrides(RunConfig(), [f"trainer.precision={precision}", f"policy.dtype={dtype}"])
    assert (cfg.trainer.precision, cfg.policy.dtype) == (precision, dtype)
    assert run_precision(cfg) == computes


def test_memory_keys_are_validated():
    with pytest.raises(ConfigError, match="trainer.logprob_micro_batch_size=-1: must be >= 0"):
        TrainerConfig(logprob_micro_batch_size=-1)
    with pytest.raises(ConfigError, match="trainer.gradient_checkpointing=1: expected bool"):
        TrainerConfig(gradient_checkpointing=1)
