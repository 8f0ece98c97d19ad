"""A forward pass over right-padded rows that computes each token only where some output needs it.

The rollouts of a prompt group share their prompt, and in a single-turn batch the prompt is most of every row
(about 62 of 90 tokens on the CPU profile); the responses then differ in length (7 to 66 tokens in one batch),
so a padded micro-batch is mostly padding past its shorter rows. :func:`ragged_forward` returns the last hidden
states at the positions a caller wants (the trained tokens) and runs:

1. the columns before the first wanted one (the untrained prompt every row has) once per distinct prefix,
   with a KV cache gathered to the rows that have it (an index, so the gradients of every row flow back into
   the shared pass); or, when that computes more tokens, the prefix all rows have in common once (SFT rows
   share only the system message);
2. the rest in a few column *segments*: each segment runs only the rows that still have a wanted position in
   or after it, on top of the cache of the columns before it (cut to those rows). The segment bounds minimise
   the rows x columns computed plus :data:`SEGMENT_COST` per segment (the cost of one more forward call).

The hidden states equal the plain forward's up to float rounding (tested: log-probs within 1e-5 on the tiny
models, 4e-6 on the CPU policy). A model whose layers recompute in the backward pass (activation
checkpointing) cannot take a cache in them, so then the callers run the plain forward
(:mod:`ragen2.model.activation_checkpointing`).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import torch
from torch import nn

from ragen2.model.activation_checkpointing import recomputes

SEGMENT_COST = 64
"""The fixed cost of one more segment in row-columns: a forward + backward call of the CPU policy costs about as
much as 64 more tokens of work (the CPU profile's PPO update: 0.63 s with 64, 0.66 with 32 or 128, 0.75 with 16)."""


LM_HEAD_MODELS = frozenset({"llama", "mistral", "qwen2", "qwen3"})
"""Model types whose logits are their output embedding applied to the body's last hidden states (no scaling or
capping), so that the head can run on chosen positions alone."""


def head_on_hidden(model: nn.Module) -> bool:
    """Whether ``model``'s logits are ``model.get_output_embeddings()`` of its body's last hidden states."""
    return getattr(getattr(model, "config", None), "model_type", None) in LM_HEAD_MODELS


@functools.cache
def cache_kwarg(model_type: type) -> str | None:
    """The name ``forward`` takes a KV cache under (``cache`` in transformers 5, ``past_key_values`` before)."""
    params = inspect.signature(model_type.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in params), None)


@dataclass
class RaggedOutput:
    """Last hidden states at the wanted positions, and where each comes from."""

    hidden: torch.Tensor
    """``[N, H]``: one row per wanted position."""
    rows: torch.Tensor
    """``[N]`` the batch row of each."""
    cols: torch.Tensor
    """``[N]`` its column (input position)."""


def segment_bounds(ends: list[int], start: int, cost: int = SEGMENT_COST) -> list[int]:
    """Column bounds ``start = b_0 < b_1 < ... < b_S = max(ends)`` of the segments after a shared prefix.

    Segment ``s`` covers columns ``[b_{s-1}, b_s)`` and runs the rows whose ``end`` (one past their last wanted
    column) exceeds ``b_{s-1}``; the bounds minimise the row-columns run plus ``cost`` per segment (every bound but
    the last is some row's end).
    """
    points = [start] + sorted({e for e in ends if e > start})
    if len(points) == 1:
        return points
    alive = [sum(e > p for e in ends) for p in points]
    best = [0.0] + [float("inf")] * (len(points) - 1)
    previous = [0] * len(points)
    for j in range(1, len(points)):
        for i in range(j):
            c = best[i] + alive[i] * (points[j] - points[i]) + cost
            if c < best[j]:
                best[j], previous[j] = c, i
    bounds, j = [points[-1]], len(points) - 1
    while j:
        j = previous[j]
        bounds.append(points[j])
    return bounds[::-1]


def _cache_of(output):
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


def ragged_forward(body: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   wanted: torch.Tensor) -> RaggedOutput | None:
    """The last hidden states of ``body`` at the ``wanted`` positions of right-padded rows (see the module docstring).

    Args:
        body: a ``transformers`` base model (``model.base_model``) whose ``forward`` takes a KV cache.
        input_ids, attention_mask: ``[B, L]``, right-padded.
        wanted: ``[B, L]`` bool, the positions whose hidden states are needed (real tokens only). Rows without one
            are not run.

    Returns:
        A :class:`RaggedOutput` (segment by segment, row-major inside a segment), or ``None`` when the model takes no
        cache, returns one that cannot be cut to rows, or its layers would recompute in the backward pass.

    Raises:
        ValueError: a row has padding before its first wanted position ends the shared prefix.
    """
    name = cache_kwarg(type(body))
    if name is None or recomputes(body):
        return None
    active = torch.nonzero(wanted.any(dim=1)).flatten()
    if len(active) == 0:
        empty = torch.zeros(0, dtype=torch.long, device=input_ids.device)
        return RaggedOutput(torch.zeros((0, body.config.hidden_size), device=input_ids.device), empty, empty)
    columns = torch.arange(wanted.shape[1], device=wanted.device)
    wanted, ids, mask = wanted[active], input_ids[active], attention_mask[active]
    ends = (torch.where(wanted, columns, -1).max(dim=1).values + 1).tolist()
    start = int(torch.where(wanted, columns, wanted.shape[1]).min())
    if not bool(mask[:, :start].all()):
        raise ValueError(f"every row needs {start} real tokens before its first wanted position (right padding)")
    cache = None
    if start > 0:
        prefixes, owner = torch.unique(ids[:, :start], dim=0, return_inverse=True)
        common = int((ids[:, :start] == ids[:1, :start]).all(dim=0).long().cumprod(dim=0).sum())
        if common + len(ids) * (start - common) < len(prefixes) * start:  # the rows' common prefix is cheaper
            prefixes, owner, start = ids[:1, :common], torch.zeros_like(owner), common
    if start > 0:
        cache = _cache_of(body(input_ids=prefixes, use_cache=True))
        if cache is None or not hasattr(cache, "batch_select_indices"):
            return None
        cache.batch_select_indices(owner)
    bounds = segment_bounds(ends, start)
    ends_t = torch.tensor(ends, device=ids.device)
    alive = torch.arange(len(ids), device=ids.device)  # rows of `ids` the cache holds, in order
    hidden, rows, cols = [], [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        keep = torch.nonzero(ends_t[alive] > lo).flatten()
        if len(keep) < len(alive):
            alive = alive[keep]
            if cache is not None:
                cache.batch_select_indices(keep)
        positions = columns[lo:hi].unsqueeze(0).expand(len(alive), -1)
        kwargs = {name: cache} if cache is not None else {}
        out = body(input_ids=ids[alive, lo:hi], attention_mask=mask[alive, :hi], position_ids=positions,
                   use_cache=hi < bounds[-1], **kwargs)
        if cache is None:
            cache = _cache_of(out)
        pick = wanted[alive, lo:hi]
        hidden.append(out.last_hidden_state[pick])
        rows.append(active[alive].unsqueeze(1).expand(-1, hi - lo)[pick])
        cols.append(positions[pick])
    return RaggedOutput(torch.cat(hidden), torch.cat(rows), torch.cat(cols))


def first_trained_column(loss_mask: torch.Tensor) -> int:
    """The first column any row trains on (``loss_mask`` is shifted: column ``t`` is token ``t + 1``); 0 if none."""
    trained = torch.nonzero(loss_mask.any(dim=0)).flatten()
    return int(trained[0]) if len(trained) else 0
