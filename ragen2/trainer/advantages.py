"""Advantage estimators (docs/method.md §6.1): GAE with a critic, and group-normalised outcome advantages.

All tensors are token-aligned with the *shifted* sequence: position ``t`` holds the quantities of
token ``t + 1`` (its log-prob under the prefix ``0..t``), so ``mask[b, t] = 1`` marks a trained token.
"""

from __future__ import annotations

import torch

from ragen2.kernels import exact_sqrt


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over token sequences, vectorised over the batch.

    The recursion runs backwards over the whole sequence. At a trained token (``mask = 1``)::

        delta_t   = r_t + gamma * V_next - V_t
        A_t       = delta_t + gamma * lam * A_next
        V_next   <- V_t,  A_next <- A_t

    At an untrained token (``mask = 0``: prompt, observation, padding) both running quantities are
    carried through unchanged, so values bootstrap only across trained tokens (docs/method.md §6.1). A reward
    that sits on an untrained token is therefore ignored; the trainer puts the score on the last
    trained token.

    Args:
        rewards: ``[B, T]`` per-token rewards.
        values: ``[B, T]`` critic values.
        mask: ``[B, T]`` 1 on trained tokens, 0 elsewhere (any numeric or bool dtype).
        gamma: discount.
        lam: GAE lambda.

    Returns:
        ``(advantages, returns)``, both ``[B, T]``, with ``returns = advantages + values``. Neither is
        whitened (see :func:`whiten`).
    """
    if not (rewards.shape == values.shape == mask.shape) or rewards.dim() != 2:
        raise ValueError(f"rewards, values and mask must share a [B, T] shape, got "
                         f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(mask.shape)}")
    rewards = rewards.detach().float()
    values = values.detach().float()
    trained = mask.bool()
    batch, horizon = rewards.shape
    next_value = torch.zeros(batch, dtype=torch.float32, device=rewards.device)
    running = torch.zeros_like(next_value)
    advantages = torch.zeros_like(rewards)
    for t in range(horizon - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        candidate = delta + gamma * lam * running
        next_value = torch.where(trained[:, t], values[:, t], next_value)
        running = torch.where(trained[:, t], candidate, running)
        advantages[:, t] = running
    return advantages, advantages + values


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the positions where ``mask`` is non-zero (0 if the mask is empty)."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps)`` with the masked mean and the *unbiased* masked variance.

    The statistics are taken over every masked position of the whole tensor (docs/method.md §6.1). Unmasked
    positions are transformed too (their values are meaningless but finite).

    Raises:
        ValueError: if fewer than two positions are masked (the unbiased variance is undefined).
    """
    fmask = mask.to(torch.float32)
    count = fmask.sum()
    if count < 2:
        raise ValueError(f"whiten needs at least 2 masked positions, got {int(count.item())}")
    mean = (x * fmask).sum() / count
    var = (((x - mean) ** 2) * fmask).sum() / (count - 1)
    return (x - mean) * torch.rsqrt(var + eps)


def grpo_advantages(scores: torch.Tensor, group_ids: torch.Tensor, norm_by_std: bool = True,
                    eps: float = 1e-6) -> torch.Tensor:
    """Group-relative outcome advantages, one per trajectory (docs/method.md §6.1).

    ``A_i = (R_i - mean_g) / (std_g + eps)`` with the unbiased std of the trajectory's group, or
    ``A_i = R_i - mean_g`` when ``norm_by_std`` is False (Dr. GRPO). A group with a single member
    gets mean 0 and std 1, so its advantage is ``R_i / (1 + eps)`` (or ``R_i``). Groups need not be
    contiguous; rows with the same id form one group (duplicated rows count twice).

    Args:
        scores: ``[N]`` trajectory scores.
        group_ids: ``[N]`` integer group ids.
        norm_by_std: divide by the group std.
        eps: added to the std.

    Returns:
        ``[N]`` float32 advantages.
    """
    if scores.dim() != 1 or scores.shape != group_ids.shape:
        raise ValueError(f"scores and group_ids must be 1-D of equal length, got "
                         f"{tuple(scores.shape)} and {tuple(group_ids.shape)}")
    scores = scores.detach().to(torch.float32)
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    n_groups = counts.numel()
    sums = torch.zeros(n_groups, dtype=torch.float32, device=scores.device).index_add_(0, inverse, scores)
    counts_f = counts.to(torch.float32)
    means = sums / counts_f
    sq = torch.zeros_like(sums).index_add_(0, inverse, (scores - means[inverse]) ** 2)
    stds = exact_sqrt(sq / (counts_f - 1).clamp_min(1.0))  # torch.sqrt's last bit depends on the CPU vendor
    single = counts == 1
    means = torch.where(single, torch.zeros_like(means), means)
    stds = torch.where(single, torch.ones_like(stds), stds)
    centred = scores - means[inverse]
    if not norm_by_std:
        return centred
    return centred / (stds[inverse] + eps)
