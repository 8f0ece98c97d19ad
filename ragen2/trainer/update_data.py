"""One step's update data: rollout statistics, the padded update batch with its old log-probs, values and advantages
(:func:`prepare_update_batch`, :func:`attach_update_targets`) and the loss settings of the actor update."""

from __future__ import annotations

import numpy as np
import torch

from ragen2.config import RunConfig, TrainerConfig
from ragen2.kernels import exact_sqrt
from ragen2.rollout.types import RolloutBatch
from ragen2.trainer.actor import LossSettings, compute_logprobs
from ragen2.trainer.advantages import compute_gae, grpo_advantages, whiten
from ragen2.trainer.algos import AlgoPreset, resolve_agg_mode
from ragen2.trainer.batch import UpdateBatch, build_batch
from ragen2.trainer.critic import compute_values
from ragen2.trainer.models import Models, run_precision


def rollout_metrics(batch: RolloutBatch, prefix: str = "rollout") -> dict[str, float]:
    """Score, success and length statistics of a rollout batch (``<prefix>/...``)."""
    scores = batch.scores
    successes = batch.successes
    lengths = np.array([t.response_length for t in batch.trajectories], dtype=np.float64)
    actions = np.array([t.num_actions for t in batch.trajectories], dtype=np.float64)
    out = {
        f"{prefix}/score_mean": float(scores.mean()),
        f"{prefix}/score_std": float(scores.std()),
        f"{prefix}/score_max": float(scores.max()),
        f"{prefix}/score_min": float(scores.min()),
        f"{prefix}/success": float(successes.mean()),
        f"{prefix}/response_length_mean": float(lengths.mean()),
        f"{prefix}/response_length_max": float(lengths.max()),
        f"{prefix}/num_actions_mean": float(actions.mean()),
    }
    if batch.group_size > 1:
        out[f"{prefix}/pass_at_group"] = float((successes.max(axis=1) > 0.5).mean())
    return out


def norm_constant(cfg: RunConfig) -> float:
    """``C`` of ``seq-mean-token-sum-norm``: ``max_new_tokens * max_turns`` (env default if 0)."""
    from ragen2.envs import env_class

    turns = cfg.rollout.max_turns or env_class(cfg.env.name).agent_defaults.max_turns
    return float(cfg.rollout.max_new_tokens * turns)


def loss_settings(cfg: RunConfig, scales: tuple[float, float] = (1.0, 1.0)) -> LossSettings:
    """The actor's :class:`LossSettings` for this run; ``scales``: the filter's ``(task, regulariser)`` multipliers
    (:func:`ragen2.filter.loss_scales`)."""
    return trainer_loss_settings(cfg.trainer, norm_const=norm_constant(cfg), temperature=cfg.rollout.temperature,
                                 precision=run_precision(cfg), scales=scales)


def trainer_loss_settings(t: TrainerConfig, *, norm_const: float, temperature: float, precision: str,
                          scales: tuple[float, float] = (1.0, 1.0)) -> LossSettings:
    """:class:`LossSettings` from the trainer section and the values that come from elsewhere in a run."""
    return LossSettings(agg_mode=resolve_agg_mode(t.algo, t.loss_agg_mode), clip_low=t.clip_low,
                        clip_high=t.clip_high, dual_clip=t.dual_clip, entropy_coef=t.entropy_coef,
                        entropy_scope=t.entropy_scope, kl_coef=t.kl_coef, kl_type=t.kl_type,
                        norm_const=norm_const, temperature=temperature, task_scale=scales[0], reg_scale=scales[1],
                        precision=precision)


def prepare_update_batch(models: Models, rollout: RolloutBatch, kept_groups: list[int], cfg: RunConfig,
                         preset: AlgoPreset) -> tuple[UpdateBatch, dict[str, float]]:
    """Tensorise the rows to train on and attach old/ref log-probs, values, advantages and returns.

    Rows: the kept groups' rows, or every row when ``filter.regularize_kept_only`` is False and some
    group was dropped (dropped rows get ``task_weight = 0``: KL/entropy only).

    Returns:
        ``(batch, metrics)`` with ``actor/entropy_old`` (token-mean entropy of the current actor on the
        trained tokens), ``adv/mean|std|abs_max`` over the task tokens, ``train/...`` sizes.
    """
    t = cfg.trainer
    k = rollout.group_size
    kept = set(int(g) for g in kept_groups)
    groups = range(rollout.env_groups) if not cfg.filter.regularize_kept_only else sorted(kept)
    rows = [g * k + i for g in groups for i in range(k)]
    weights = [1.0 if r // k in kept else 0.0 for r in rows]
    pad_id = models.tokenizer.pad_token_id
    device = next(models.actor.parameters()).device
    batch = build_batch([rollout.trajectories[r] for r in rows], pad_id, weights, device,
                        temperature=cfg.rollout.temperature)
    entropy = attach_update_targets(batch, models, preset, t, temperature=cfg.rollout.temperature,
                                    precision=run_precision(cfg))

    mask = batch.task_mask
    n = mask.sum().clamp_min(1.0)
    adv_mean = (batch.advantages * mask).sum() / n
    metrics = {
        "actor/entropy_old": float((entropy * batch.loss_mask).sum() / batch.loss_mask.sum().clamp_min(1.0)),
        "adv/mean": float(adv_mean),
        "adv/std": float(exact_sqrt((((batch.advantages - adv_mean) ** 2) * mask).sum() / n)),
        "adv/abs_max": float((batch.advantages.abs() * mask).max()),
        "train/batch_rows": float(len(batch)),
        "train/task_rows": float(sum(weights)),
        "train/task_tokens": float(mask.sum()),
    }
    return batch, metrics


def attach_update_targets(batch: UpdateBatch, models: Models, preset: AlgoPreset, t: TrainerConfig, *,
                          temperature: float, precision: str) -> torch.Tensor:
    """Fill in ``batch``'s old (and reference) log-probs, values, advantages and returns, in place.

    The old log-probs are the behaviour policy's (:func:`old_logprobs`). The passes run without gradient,
    ``trainer.logprob_micro_batch_size`` rows at a time (0 = ``micro_batch_size``), under ``precision``'s autocast,
    as the update's forward passes do.

    Returns:
        The entropies ``[B, L-1]`` of the distributions the old log-probs come from.
    """
    micro = t.logprob_micro_batch_size or t.micro_batch_size
    batch.old_logp, entropy = old_logprobs(models.actor, batch, micro, temperature, precision=precision)
    if models.reference is not None:
        batch.ref_logp, _ = compute_logprobs(models.reference, batch, micro, temperature, precision=precision)
    if preset.estimator == "gae":
        batch.values = compute_values(models.critic, batch, micro, precision=precision)
        adv, ret = compute_gae(batch.rewards, batch.values, batch.loss_mask, t.gamma, t.lam)
        if float(batch.task_mask.sum()) >= 2:
            adv = whiten(adv, batch.task_mask)
        batch.advantages, batch.returns = adv * batch.loss_mask, ret
    else:
        per_row = grpo_advantages(batch.scores, batch.group_ids, norm_by_std=preset.norm_by_std)
        batch.advantages = per_row[:, None] * batch.loss_mask
    return entropy


def old_logprobs(actor: torch.nn.Module, batch: UpdateBatch, micro_batch_size: int, temperature: float, *,
                 precision: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(old_logp, entropy)``, both ``[B, L-1]``: the log-probs of the policy that sampled the batch.

    A row sampled by the current actor in float32 (``behaviour_logp``: the rollout kept the log-probs it sampled
    from, and the trained tokens are exactly the sampled ones) takes them as they are: they are what a forward of
    the current actor gives, up to float rounding (the decode computes them a token at a time; max difference
    about 1e-5 on the CPU profile), and skipping that forward saves a sixth of a GRPO update. The other rows (and
    every row under a lower-precision autocast, whose decode and update forwards round differently) get the
    actor's forward, without gradient.
    """
    if batch.behaviour_logp is None or precision != "fp32":
        return compute_logprobs(actor, batch, micro_batch_size, temperature, precision=precision)
    logp = torch.nan_to_num(batch.behaviour_logp, nan=0.0) * batch.loss_mask
    entropy = torch.nan_to_num(batch.behaviour_entropy, nan=0.0) * batch.loss_mask
    missing = torch.nonzero(torch.isnan(batch.behaviour_logp).any(dim=1)).flatten()
    if len(missing):
        rest = batch.select(missing)
        lp, ent = compute_logprobs(actor, rest, micro_batch_size, temperature, precision=precision)
        logp[missing, :lp.shape[1]] = lp
        entropy[missing, :ent.shape[1]] = ent
    return logp, entropy


def mini_batch_rows(cfg: RunConfig, update_rows: int, total_rows: int) -> int:
    """Rows per optimiser step after filtering.

    With ``filter.loss_scaling = none`` it is ``trainer.mini_batch_size``. Otherwise (the paper's
    text) the mini-batch shrinks with the share of rows kept, ``round(mini_batch_size * update_rows /
    total_rows)`` (at least 1), so a filtered step takes as many optimiser steps as an unfiltered one
    and, with the loss scaled by the keep rate, each kept sample weighs what it would unfiltered.
    """
    size = cfg.trainer.mini_batch_size
    if cfg.filter.loss_scaling == "none" or update_rows >= total_rows:
        return size
    return max(1, int(round(size * update_rows / total_rows)))
