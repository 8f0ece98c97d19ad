"""Mixed precision of the trained models: float32 master weights, forward passes in a lower dtype (autocast).

Why masters: AdamW moves each weight by about the learning rate per step, and at the paper's actor rate (1e-6)
that is far below bfloat16's spacing near a typical weight (about 1e-4 at 0.02), so weights *stored* in bf16
mostly do not move at all (measured: 1.3 % of the actor's weights changed between two checkpoints). The trained
models (actor, critic) therefore keep float32 weights, gradients and AdamW state, and ``trainer.precision``
only sets what their forward passes compute in:

- ``fp32``: no autocast, every op as written (the CPU profile; the code path is the one without this module).
- ``bf16``: ``torch.autocast(dtype=torch.bfloat16)``: matmuls and attention run in bf16 on bf16 casts of the
  weights; the norms and the residual stream stay float32. bf16 has float32's exponent range: no loss scaling.
- ``fp16``: autocast in float16 with dynamic loss scaling (:func:`grad_scaler`): without it, fp16's 5-bit
  exponent flushes small gradients to zero.

Autocast covers the model calls only: the update passes (actor, critic), the old and reference log-prob and
value passes (so that the first mini-batch's ratio is exactly 1: same numerics as the update's forward), the
HF-backend rollouts and the MI scoring. The head's logits come out in the compute dtype; the log-softmax,
entropies, ratios, advantages and losses are float32 (:func:`ragen2.trainer.losses.logprobs_and_entropy` upcasts
the logits, the critic's value head runs outside autocast). The gradient analysis runs without loss scaling.
"""

from __future__ import annotations

import contextlib

import torch

from ragen2.config import PRECISION_DTYPES

COMPUTE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
"""The dtype each resolved precision computes in."""


def resolve_precision(precision: str, policy_dtype: str) -> str:
    """``trainer.precision`` with ``auto`` replaced by the precision ``policy.dtype`` names."""
    if precision != "auto":
        if precision not in COMPUTE_DTYPES:
            raise ValueError(f"unknown precision {precision!r}; known: auto, {', '.join(COMPUTE_DTYPES)}")
        return precision
    by_dtype = {dtype: name for name, dtype in PRECISION_DTYPES.items()}
    if policy_dtype not in by_dtype:
        raise ValueError(f"unknown policy dtype {policy_dtype!r}; known: {', '.join(by_dtype)}")
    return by_dtype[policy_dtype]


def autocast(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """The autocast region of ``precision`` on ``device`` (a no-op context for ``fp32``)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=COMPUTE_DTYPES[precision])


def grad_scaler(precision: str, device: torch.device | str) -> torch.amp.GradScaler | None:
    """A dynamic loss scaler for ``fp16``; ``None`` (no scaling) otherwise."""
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(torch.device(device).type)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter."""
    return next(model.parameters()).device
