"""The PPO critic: a separate value model (the actor's backbone checkpoint + a scalar head).

The critic is initialised from the same checkpoint as the actor (docs/method.md §6.1) but trained separately:
it keeps the transformer body of a causal LM (its LM head is dropped) and adds a linear head that
maps each hidden state to a value. The head starts at zero, so initial values are 0 and the first
update moves only the head.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ragen2.model.activation_checkpointing import recompute_in_backward
from ragen2.model.optim import backward, clip_and_step
from ragen2.model.prefix import ragged_forward
from ragen2.trainer.batch import UpdateBatch, chunks, group_order
from ragen2.trainer.losses import agg_denominator, value_loss
from ragen2.trainer.precision import autocast


class ValueModel(nn.Module):
    """Token values ``V[b, t]`` of the state after tokens ``0..t`` (aligned with shifted tensors)."""

    def __init__(self, causal_lm: nn.Module):
        super().__init__()
        self.backbone = causal_lm.base_model
        hidden = causal_lm.config.hidden_size
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                wanted: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, L-1]`` values. With ``wanted`` (``[B, L-1]`` bool, shifted like the batch's masks) only those are
        computed, the others are 0: the body runs as a ragged forward (each distinct prompt once, each row up to
        its last wanted position: :func:`ragen2.model.prefix.ragged_forward`), or the plain forward if it cannot.

        Under autocast the body computes in the lower dtype and the head stays float32 (values and the value
        loss in full precision); with gradient, checkpointed layers recompute in the backward pass."""
        with recompute_in_backward(self.backbone):
            ragged = None
            if wanted is not None:
                ragged = ragged_forward(self.backbone, input_ids, attention_mask, F.pad(wanted, (0, 1)))
            if ragged is None:
                hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
            else:
                hidden = ragged.hidden
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            values = self.head(hidden.to(self.head.weight.dtype)).squeeze(-1)
        if ragged is None:
            return values
        out = values.new_zeros((input_ids.shape[0], input_ids.shape[1] - 1))
        return out.index_put((ragged.rows, ragged.cols), values)


@torch.no_grad()
def compute_values(critic: ValueModel, batch: UpdateBatch, micro_batch_size: int, share_prefix: bool = True,
                   precision: str = "fp32") -> torch.Tensor:
    """``[B, L-1]`` values of every row (no gradient), computed ``micro_batch_size`` rows at a time under
    ``precision``'s autocast."""
    out = torch.zeros_like(batch.loss_mask)
    for rows in chunks(len(batch), micro_batch_size):
        mb = batch.select(rows)
        with autocast(precision, mb.input_ids.device):
            values = critic(mb.input_ids, mb.attention_mask, wanted=(mb.loss_mask > 0) if share_prefix else None)
        out[rows.start:rows.stop, : mb.loss_mask.shape[1]] = values.float()
    return out


def update_critic(critic: ValueModel, optimizer: torch.optim.Optimizer, batch: UpdateBatch, *,
                  mini_batch_size: int, micro_batch_size: int, epochs: int, grad_clip: float,
                  rng: np.random.Generator, value_clip: float = 0.5, share_prefix: bool = True,
                  precision: str = "fp32", scaler: torch.amp.GradScaler | None = None) -> dict[str, float]:
    """Clipped value regression onto ``batch.returns`` over the task mask (kept rows only).

    The prompt groups are put in a random order (``rng``, :func:`~ragen2.trainer.batch.group_order`)
    and cut into mini-batches (one optimiser step each), each accumulated over micro-batches; the
    loss is a token mean over the whole mini-batch.
    ``share_prefix`` runs the ragged forward (each distinct prompt once per micro-batch, each row up to its last
    trained token; off only to benchmark it).
    ``precision`` is the forward passes' autocast, ``scaler`` the fp16 loss scaler
    (:mod:`ragen2.trainer.precision`). The gradients are freed at the end.

    Returns:
        ``critic/vf_loss``, ``critic/vf_clipfrac``, ``critic/grad_norm``, ``critic/values_mean`` (means
        over mini-batches).
    """
    if batch.returns is None or batch.values is None:
        raise ValueError("update_critic needs batch.returns and batch.values (old values)")
    params = [p for p in critic.parameters() if p.requires_grad]
    logs: dict[str, list[float]] = {"critic/vf_loss": [], "critic/vf_clipfrac": [], "critic/grad_norm": []}
    for _ in range(epochs):
        order = group_order(batch.group_ids, rng)
        for mini_rows in chunks(len(batch), mini_batch_size):
            mini = batch.select(np.sort(order[mini_rows.start:mini_rows.stop]))  # groups contiguous
            denom = agg_denominator(mini.task_mask, "token-mean")
            if denom == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            loss_total, clip_total = 0.0, 0.0
            for rows in chunks(len(mini), micro_batch_size):
                mb = mini.select(rows)
                with autocast(precision, mb.input_ids.device):
                    values = critic(mb.input_ids, mb.attention_mask,
                                    wanted=(mb.loss_mask > 0) if share_prefix else None)
                loss, stats = value_loss(values, mb.values, mb.returns, mb.task_mask, "token-mean",
                                         value_clip, denom=denom)
                backward(loss, scaler)
                loss_total += float(loss.detach())
                clip_total += stats["vf_clipfrac"] * float(mb.task_mask.sum()) / denom
            grad_norm, _ = clip_and_step(optimizer, params, grad_clip, scaler)
            logs["critic/vf_loss"].append(loss_total)
            logs["critic/vf_clipfrac"].append(clip_total)
            logs["critic/grad_norm"].append(grad_norm)
    optimizer.zero_grad(set_to_none=True)  # the next mini-batch starts from zero anyway; free the memory now
    out = {k: float(np.mean(v)) if v else 0.0 for k, v in logs.items()}
    mask = batch.task_mask
    out["critic/values_mean"] = float((batch.values * mask).sum() / mask.sum().clamp_min(1.0))
    return out
