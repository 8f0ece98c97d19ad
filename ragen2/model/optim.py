"""The trainer's optimiser steps: AdamW on float32 master weights, gradient clipping, optional loss scaling.

One mini-batch is: gradients accumulated over its micro-batches (:func:`backward`), then one
:func:`clip_and_step`. A step whose gradient norm is not finite is skipped; with an fp16 loss scaler
(:func:`ragen2.trainer.precision.grad_scaler`) that is also how an overflow lowers the scale.
"""

from __future__ import annotations

import math

import torch

ADAM_BETAS = (0.9, 0.999)


def adamw(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over ``model``'s trainable parameters, with torch's fused kernel (CPU and GPU).

    On a GPU the fused kernel updates every tensor in one launch and, unlike the default multi-tensor path,
    allocates no parameter-sized temporaries (12 GB at 3B parameters). On the CPU it computes its square roots
    in torch's own vector code, where the default path hands large tensors to MKL's vector maths, whose results
    depend on the CPU's vendor even under the pinned kernels (:mod:`ragen2.kernels`).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=lr, betas=ADAM_BETAS, weight_decay=weight_decay, fused=True)


def backward(loss: torch.Tensor, scaler: torch.amp.GradScaler | None = None) -> None:
    """``loss.backward()``, on the scaled loss when a loss scaler is given."""
    (loss if scaler is None else scaler.scale(loss)).backward()


def clip_and_step(optimizer: torch.optim.Optimizer, params: list[torch.Tensor], grad_clip: float,
                  scaler: torch.amp.GradScaler | None = None) -> tuple[float, bool]:
    """Clip the gradient norm to ``grad_clip`` and step, unless the norm is not finite.

    With ``scaler``, the gradients are unscaled first and the scaler's step (which skips on inf/NaN) and update
    run. Returns ``(grad_norm before clipping, whether the optimiser stepped)``.
    """
    if scaler is not None:
        scaler.unscale_(optimizer)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip))
    stepped = math.isfinite(grad_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    elif stepped:
        optimizer.step()
    return grad_norm, stepped
