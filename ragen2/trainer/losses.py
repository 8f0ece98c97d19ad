"""Pure loss functions of the actor and the critic (docs/method.md §6.2).

Every tensor of shape ``[B, T]`` is token-aligned with the shifted sequence (position ``t`` = token
``t + 1``); ``mask`` selects the tokens a term applies to.

Aggregation modes (``loss_agg_mode``), for a per-token quantity ``x`` and a mask ``m``:

- ``token-mean``: ``sum(x m) / sum(m)``, a mean over all masked tokens.
- ``seq-mean-token-mean``: the mean over sequences of each sequence's token mean.
- ``seq-mean-token-sum``: the mean over sequences of each sequence's token sum (no length
  normalisation).
- ``seq-mean-token-sum-norm``: the mean over sequences of each sequence's token sum divided by a
  constant ``C`` (Dr. GRPO's ``1/(G * MAX_TOKENS)``). The trainer uses
  ``C = max_new_tokens * max_turns``, the largest number of trained tokens a trajectory can have.

"Sequences" are rows with at least one masked token. With gradient accumulation, the denominators
(token count or sequence count) can be taken from the whole mini-batch (``denom=``), so that the
micro-batch losses add up exactly to the mini-batch loss.
"""

from __future__ import annotations

import torch

from ragen2.config import KL_TYPES, LOSS_AGG_MODES

AGG_MODES = LOSS_AGG_MODES
KL_KINDS = KL_TYPES


# ---------------------------------------------------------------------------------------------
# Log-probs and entropy
# ---------------------------------------------------------------------------------------------
def _chunked_log_softmax(logits: torch.Tensor, targets: torch.Tensor, chunk: int, with_entropy: bool,
                         temperature: float) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per chunk of ``chunk`` leading-dimension entries: the float32 log-softmax's log-prob of each target and,
    with ``with_entropy``, the entropy; lists of the chunks' results (concatenated by the callers)."""
    logps, entropies = [], []
    for start in range(0, logits.shape[0], max(1, chunk)):
        part = logits[start:start + chunk].float()
        if temperature != 1.0:
            part = part / temperature
        lsm = torch.log_softmax(part, dim=-1)
        logps.append(lsm.gather(-1, targets[start:start + chunk].unsqueeze(-1)).squeeze(-1))
        if with_entropy:
            entropies.append(-(lsm.exp() * lsm).sum(-1))
    return logps, entropies


def logprobs_and_entropy(logits: torch.Tensor, targets: torch.Tensor, *, with_entropy: bool = True,
                         chunk_rows: int = 4, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token log-probs of ``targets`` and full-vocabulary entropies from ``logits``.

    The log-softmax is computed ``chunk_rows`` rows at a time in float32 (logits of a lower-precision forward
    are upcast chunk by chunk, before the division by the temperature), so the peak extra memory is that of a
    ``[chunk_rows, T, V]`` float32 tensor rather than of the whole batch.

    Args:
        logits: ``[B, T, V]`` in any float dtype.
        targets: ``[B, T]`` token ids whose log-probs are wanted.
        with_entropy: also return ``H_t = -sum_v p log p``.
        chunk_rows: rows per chunk.
        temperature: the logits are divided by it (the sampling temperature).

    Returns:
        ``(logp [B, T], entropy [B, T] or None)``, float32.
    """
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(f"logits [B, T, V] and targets [B, T] disagree: {tuple(logits.shape)} vs "
                         f"{tuple(targets.shape)}")
    logps, entropies = _chunked_log_softmax(logits, targets, chunk_rows, with_entropy, temperature)
    return torch.cat(logps), (torch.cat(entropies) if with_entropy else None)


def token_logprobs_and_entropy(logits: torch.Tensor, targets: torch.Tensor, *, with_entropy: bool = True,
                               chunk_tokens: int = 512, temperature: float = 1.0,
                               ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`logprobs_and_entropy` of a flat list of positions: ``logits [N, V]``, ``targets [N]``; the
    float32 log-softmax runs ``chunk_tokens`` positions at a time."""
    if logits.dim() != 2 or logits.shape[0] != targets.shape[0]:
        raise ValueError(f"logits [N, V] and targets [N] disagree: {tuple(logits.shape)} vs {tuple(targets.shape)}")
    logps, entropies = _chunked_log_softmax(logits, targets, chunk_tokens, with_entropy, temperature)
    empty = logits.new_zeros(0, dtype=torch.float32)
    return (torch.cat(logps) if logps else empty), ((torch.cat(entropies) if entropies else empty)
                                                    if with_entropy else None)


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------
def agg_denominator(mask: torch.Tensor, mode: str) -> float:
    """The denominator ``mode`` divides by: the masked-token count, or the number of masked rows."""
    _check_mode(mode)
    mask = mask.to(torch.float32)
    if mode == "token-mean":
        return float(mask.sum().item())
    return float((mask.sum(-1) > 0).sum().item())


def aggregate(x: torch.Tensor, mask: torch.Tensor, mode: str, *, denom: float | None = None,
              norm_const: float | None = None) -> torch.Tensor:
    """Reduce a per-token ``[B, T]`` quantity to a scalar (see the module docstring for the modes).

    Args:
        x: ``[B, T]`` values.
        mask: ``[B, T]`` weights (0/1).
        mode: one of :data:`AGG_MODES`.
        denom: overrides :func:`agg_denominator` (e.g. the whole mini-batch's count). An empty
            denominator gives a zero loss.
        norm_const: the constant ``C`` of ``seq-mean-token-sum-norm`` (required there).
    """
    _check_mode(mode)
    mask = mask.to(x.dtype)
    if denom is None:
        denom = agg_denominator(mask, mode)
    denom = max(float(denom), 1.0)
    token_sums = (x * mask).sum(-1)
    if mode == "token-mean":
        return token_sums.sum() / denom
    if mode == "seq-mean-token-sum":
        return token_sums.sum() / denom
    if mode == "seq-mean-token-mean":
        counts = mask.sum(-1)
        return (token_sums / counts.clamp_min(1.0)).sum() / denom
    if norm_const is None or norm_const <= 0:
        raise ValueError(f"seq-mean-token-sum-norm needs a positive norm_const, got {norm_const!r}")
    return (token_sums / norm_const).sum() / denom


def _check_mode(mode: str) -> None:
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss_agg_mode {mode!r}; known: {list(AGG_MODES)}")


# ---------------------------------------------------------------------------------------------
# Actor terms
# ---------------------------------------------------------------------------------------------
def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                clip_low: float, clip_high: float, dual_clip: float, agg_mode: str, *,
                denom: float | None = None, norm_const: float | None = None,
                ) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate with decoupled clip range and dual clip (docs/method.md §6.2).

    Per token, with ``rho = exp(clamp(logp - old_logp, -20, 20))``::

        pg = max(-A rho, -A clip(rho, 1 - clip_low, 1 + clip_high))
        pg = min(pg, -A c)      where A < 0 (dual clip, only if c > 0)

    Returns:
        ``(loss, stats)``; ``stats`` holds ``clipfrac`` (tokens where the clipped branch is active),
        ``dual_clipfrac`` (tokens where the dual clip bound is active) and ``approx_kl``
        (token-mean of ``old_logp - logp``), all over the masked tokens.
    """
    if dual_clip and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (or 0 = off), got {dual_clip}")
    log_ratio = torch.clamp(logp - old_logp, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(unclipped, clipped)
    dual_active = torch.zeros_like(pg, dtype=torch.bool)
    if dual_clip:
        bound = -adv * dual_clip
        dual_active = (adv < 0) & (pg > bound)
        pg = torch.where(adv < 0, torch.minimum(pg, bound), pg)
    loss = aggregate(pg, mask, agg_mode, denom=denom, norm_const=norm_const)
    with torch.no_grad():
        fmask = mask.to(torch.float32)
        n = fmask.sum().clamp_min(1.0)
        stats = {
            "clipfrac": float(((clipped > unclipped).float() * fmask).sum() / n),
            "dual_clipfrac": float((dual_active.float() * fmask).sum() / n),
            "approx_kl": float(((old_logp - logp) * fmask).sum() / n),
        }
    return loss, stats


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k1") -> torch.Tensor:
    """Per-token estimator of KL(pi || pi_ref) from sampled tokens.

    - ``k1``: ``logp - ref_logp`` (unbiased, high variance, can be negative);
    - ``k2``: ``0.5 (logp - ref_logp)^2``;
    - ``k3``: ``exp(d) - d - 1`` with ``d = ref_logp - logp`` clamped to +-20, result clamped to
      [-10, 10] (low variance, non-negative).
    """
    if kind == "k1":
        return logp - ref_logp
    if kind == "k2":
        return 0.5 * (logp - ref_logp) ** 2
    if kind == "k3":
        d = torch.clamp(ref_logp - logp, -20.0, 20.0)
        return torch.clamp(torch.exp(d) - d - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown kl kind {kind!r}; known: {list(KL_KINDS)}")


# ---------------------------------------------------------------------------------------------
# Critic
# ---------------------------------------------------------------------------------------------
def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               agg_mode: str = "token-mean", clip: float = 0.5, *, denom: float | None = None,
               ) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped value loss ``0.5 agg(max((V - G)^2, (clip(V, V_old +- clip) - G)^2))`` (docs/method.md §6.2).

    Returns:
        ``(loss, stats)`` with ``vf_clipfrac`` = share of masked tokens where the clipped branch wins.
    """
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
    err = (values - returns) ** 2
    err_clipped = (clipped_values - returns) ** 2
    loss = 0.5 * aggregate(torch.maximum(err, err_clipped), mask, agg_mode, denom=denom)
    with torch.no_grad():
        fmask = mask.to(torch.float32)
        frac = float(((err_clipped > err).float() * fmask).sum() / fmask.sum().clamp_min(1.0))
    return loss, {"vf_clipfrac": frac}
