"""Actor forward passes and the clipped-PPO actor update (docs/method.md §6.2).

:func:`actor_terms` computes the three loss components of one micro-batch (task, entropy, KL) with
the coefficients included; the update and the gradient analysis (:mod:`ragen2.trainer.grad_analysis`)
both use it, so they optimise and measure exactly the same objective::

    loss = scale * agg(pg) - entropy_coef * agg(H) + kl_coef * agg(KL)

``scale`` is the filter's loss scaling (docs/method.md §4.8: only the policy-gradient term is scaled).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ragen2.model.activation_checkpointing import recompute_in_backward
from ragen2.model.optim import backward, clip_and_step
from ragen2.model.prefix import first_trained_column, head_on_hidden, ragged_forward
from ragen2.trainer.batch import UpdateBatch, chunks, group_order
from ragen2.trainer.losses import (
    agg_denominator,
    aggregate,
    kl_penalty,
    logprobs_and_entropy,
    policy_loss,
    token_logprobs_and_entropy,
)
from ragen2.trainer.precision import autocast


@dataclass(frozen=True)
class LossSettings:
    """Everything :func:`actor_terms` needs besides the model and the batch."""

    agg_mode: str
    clip_low: float
    clip_high: float
    dual_clip: float
    entropy_coef: float
    entropy_scope: str
    kl_coef: float
    kl_type: str
    norm_const: float
    """The constant of ``seq-mean-token-sum-norm``."""
    temperature: float = 1.0
    """Logits are divided by it (the rollout temperature), as the sampler did."""
    task_scale: float = 1.0
    """Multiplier of the policy-gradient term (the filter's loss scaling, :func:`ragen2.filter.loss_scales`)."""
    reg_scale: float = 1.0
    """Multiplier of the entropy and KL terms (the same)."""
    share_prefix: bool = True
    """The ragged forward (each distinct prompt once per micro-batch, each row up to its last trained token:
    :func:`forward_logprobs`); off only to benchmark it."""
    precision: str = "fp32"
    """Compute precision of the actor's forward passes (resolved: ``fp32`` | ``bf16`` | ``fp16``;
    :mod:`ragen2.trainer.precision`)."""


@functools.cache
def _accepts_logits_to_keep(model_type: type) -> bool:
    return "logits_to_keep" in inspect.signature(model_type.forward).parameters


def forward_logprobs(model: nn.Module, batch: UpdateBatch, temperature: float = 1.0,
                     with_entropy: bool = True, share_prefix: bool = True, precision: str = "fp32",
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and entropies) of the shifted tokens of ``batch`` under ``model``, with gradient.

    With ``share_prefix`` (and a model of :data:`ragen2.model.prefix.LM_HEAD_MODELS`) the body runs as a ragged forward
    (:func:`ragen2.model.prefix.ragged_forward`): the untrained prompt every row has once per distinct prompt,
    then each row only up to its last trained token, and the head and the log-softmax only at the trained tokens
    (``loss_mask``); every other column is 0. A group's rollouts share their prompt and their responses differ in
    length, so this removes most of the prompt's compute and the padding's. Otherwise (or when the model cannot
    take a cache: activation checkpointing) the plain forward runs, the head and the log-softmax from the batch's
    first trained column on (``logits_to_keep``; every column for models without it), earlier columns 0. The
    model runs under ``precision``'s autocast (and, with gradient, recomputes its checkpointed layers in the
    backward pass); the log-softmax is float32.
    """
    device = batch.input_ids.device
    with autocast(precision, device), recompute_in_backward(model):
        ragged = None
        if share_prefix and head_on_hidden(model):
            wanted = F.pad(batch.loss_mask > 0, (0, 1))  # column t of the shifted mask is input position t
            ragged = ragged_forward(model.base_model, batch.input_ids, batch.attention_mask, wanted)
        if ragged is not None:
            logits = model.get_output_embeddings()(ragged.hidden)
        else:
            start = first_trained_column(batch.loss_mask) if _accepts_logits_to_keep(type(model)) else 0
            kwargs = {"logits_to_keep": batch.input_ids.shape[1] - start} if start > 0 else {}
            logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, **kwargs).logits
    if ragged is not None:
        lp, ent = token_logprobs_and_entropy(logits, batch.input_ids[ragged.rows, ragged.cols + 1],
                                             with_entropy=with_entropy, temperature=temperature)
        index = (ragged.rows, ragged.cols)
        logp = torch.zeros_like(batch.loss_mask, dtype=lp.dtype).index_put(index, lp)
        entropy = torch.zeros_like(logp).index_put(index, ent) if ent is not None else None
        return logp, entropy
    logp, entropy = logprobs_and_entropy(logits[:, :-1], batch.targets[:, start:], with_entropy=with_entropy,
                                         temperature=temperature)
    if start > 0:
        logp = F.pad(logp, (start, 0))
        entropy = F.pad(entropy, (start, 0)) if entropy is not None else None
    return logp, entropy


@torch.no_grad()
def compute_logprobs(model: nn.Module, batch: UpdateBatch, micro_batch_size: int, temperature: float = 1.0,
                     share_prefix: bool = True, precision: str = "fp32") -> tuple[torch.Tensor, torch.Tensor]:
    """``(logp, entropy)``, both ``[B, L-1]``, without gradient, ``micro_batch_size`` rows at a time."""
    logp = torch.zeros_like(batch.loss_mask)
    entropy = torch.zeros_like(batch.loss_mask)
    for rows in chunks(len(batch), micro_batch_size):
        mb = batch.select(rows)
        lp, ent = forward_logprobs(model, mb, temperature, share_prefix=share_prefix, precision=precision)
        width = lp.shape[1]
        logp[rows.start:rows.stop, :width] = lp
        entropy[rows.start:rows.stop, :width] = ent
    return logp, entropy


def term_denominators(batch: UpdateBatch, s: LossSettings) -> dict[str, float]:
    """Aggregation denominators of each term over a whole mini-batch (for exact accumulation)."""
    return {
        "task": agg_denominator(batch.task_mask, s.agg_mode),
        "entropy": agg_denominator(batch.entropy_mask(s.entropy_scope), s.agg_mode),
        "kl": agg_denominator(batch.loss_mask, s.agg_mode),
    }


def actor_terms(model: nn.Module, mb: UpdateBatch, s: LossSettings, denoms: dict[str, float],
                components: tuple[str, ...] = ("task", "entropy", "kl"),
                ) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """The loss components of one micro-batch, coefficients included.

    Args:
        model: the actor.
        mb: a micro-batch carrying ``old_logp``, ``advantages`` (and ``ref_logp`` if ``kl_coef > 0``).
        s: loss settings.
        denoms: :func:`term_denominators` of the enclosing mini-batch.
        components: which of ``task``, ``entropy``, ``kl`` to build (zero coefficients are skipped).

    Returns:
        ``(terms, stats)``: ``terms[name]`` is a scalar tensor whose sum over the micro-batches of a
        mini-batch is that component of the mini-batch loss; ``stats`` holds the detached
        aggregated entropy and KL and the policy-loss statistics.
    """
    want_entropy = "entropy" in components and s.entropy_coef != 0
    logp, entropy = forward_logprobs(model, mb, s.temperature, with_entropy=True, share_prefix=s.share_prefix,
                                     precision=s.precision)
    terms: dict[str, torch.Tensor] = {}
    stats: dict[str, float] = {}
    if "task" in components:
        pg, pg_stats = policy_loss(logp, mb.old_logp, mb.advantages, mb.task_mask, s.clip_low, s.clip_high,
                                   s.dual_clip, s.agg_mode, denom=denoms["task"], norm_const=s.norm_const)
        terms["task"] = s.task_scale * pg
        stats.update(pg_stats)
    ent_agg = aggregate(entropy, mb.entropy_mask(s.entropy_scope), s.agg_mode, denom=denoms["entropy"],
                        norm_const=s.norm_const)
    stats["entropy"] = float(ent_agg.detach())
    if want_entropy:
        terms["entropy"] = -s.reg_scale * s.entropy_coef * ent_agg
    if s.kl_coef != 0:
        if mb.ref_logp is None:
            raise ValueError("kl_coef != 0 but the batch has no reference log-probs (ref_logp)")
        kl_agg = aggregate(kl_penalty(logp, mb.ref_logp, s.kl_type), mb.loss_mask, s.agg_mode,
                           denom=denoms["kl"], norm_const=s.norm_const)
        stats["kl"] = float(kl_agg.detach())
        if "kl" in components:
            terms["kl"] = s.reg_scale * s.kl_coef * kl_agg
    return terms, stats


def update_actor(model: nn.Module, optimizer: torch.optim.Optimizer, batch: UpdateBatch, s: LossSettings, *,
                 mini_batch_size: int, micro_batch_size: int, epochs: int, grad_clip: float,
                 rng: np.random.Generator, scaler: torch.amp.GradScaler | None = None) -> dict[str, float]:
    """PPO actor update: mini-batches of whole prompt groups in a seeded random order
    (:func:`~ragen2.trainer.batch.group_order`; one optimiser step each), micro-batch accumulation.

    Each mini-batch's loss uses that mini-batch's denominators, so accumulation over micro-batches
    is exact and the result does not depend on ``micro_batch_size``. A step whose gradient norm is
    not finite is skipped (counted in ``actor/skipped_steps``). ``scaler`` is the fp16 loss scaler
    (:func:`ragen2.trainer.precision.grad_scaler`). The gradients are freed at the end.

    Returns:
        Means over mini-batches: ``actor/pg_loss``, ``actor/entropy_loss``, ``actor/kl_loss``,
        ``actor/entropy``, ``actor/kl``, ``actor/pg_clipfrac``, ``actor/dual_clipfrac``,
        ``actor/ppo_kl``, ``actor/grad_norm``; plus ``actor/skipped_steps`` and
        ``actor/optimizer_steps``.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    keys = ("pg_loss", "entropy_loss", "kl_loss", "entropy", "kl", "pg_clipfrac", "dual_clipfrac", "ppo_kl",
            "grad_norm")
    logs: dict[str, list[float]] = {k: [] for k in keys}
    skipped = steps = 0
    for _ in range(epochs):
        order = group_order(batch.group_ids, rng)
        for mini_rows in chunks(len(batch), mini_batch_size):
            # rows in batch order inside a mini-batch, groups contiguous (the sum over micro-batches is order-free)
            mini = batch.select(np.sort(order[mini_rows.start:mini_rows.stop]))
            denoms = term_denominators(mini, s)
            optimizer.zero_grad(set_to_none=True)
            acc = dict.fromkeys(keys, 0.0)
            for rows in chunks(len(mini), micro_batch_size):
                mb = mini.select(rows)
                terms, stats = actor_terms(model, mb, s, denoms)
                total = sum(terms.values())
                if isinstance(total, torch.Tensor) and total.requires_grad:
                    backward(total, scaler)
                share = float(mb.task_mask.sum()) / max(float(mini.task_mask.sum()), 1.0)
                acc["pg_loss"] += float(terms["task"].detach())
                acc["entropy_loss"] += float(terms["entropy"].detach()) if "entropy" in terms else 0.0
                acc["kl_loss"] += float(terms["kl"].detach()) if "kl" in terms else 0.0
                acc["entropy"] += stats["entropy"]
                acc["kl"] += stats.get("kl", 0.0)
                acc["pg_clipfrac"] += stats["clipfrac"] * share
                acc["dual_clipfrac"] += stats["dual_clipfrac"] * share
                acc["ppo_kl"] += stats["approx_kl"] * share
            grad_norm, stepped = clip_and_step(optimizer, params, grad_clip, scaler)
            steps += int(stepped)
            skipped += int(not stepped)
            acc["grad_norm"] = grad_norm
            for k in keys:
                logs[k].append(acc[k])
    optimizer.zero_grad(set_to_none=True)  # the next mini-batch starts from zero anyway; free the memory now
    out = {f"actor/{k}": float(np.mean(v)) if v else 0.0 for k, v in logs.items()}
    out["actor/skipped_steps"] = float(skipped)
    out["actor/optimizer_steps"] = float(steps)
    return out
