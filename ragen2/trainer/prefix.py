"""Forward passes that run a prefix shared by several rows only once.

The rollouts of a prompt group share their prompt, and in a single-turn batch the prompt is most of
every row (about 100 of 130 tokens on the CPU profile). :func:`shared_prefix_forward` runs each
distinct prefix ``input_ids[:, :start]`` through the model once, gathers its KV cache to the rows
that have it (an index, so gradients of every row flow back into the shared pass) and runs the rest
of each row on top. Outputs equal the plain forward's up to float rounding (tested). A model whose layers
recompute in the backward pass (activation checkpointing) cannot take a cache in them, so then the plain forward
runs (:mod:`ragen2.trainer.activation_checkpointing`).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ragen2.trainer.activation_checkpointing import recomputes


@functools.cache
def cache_kwarg(model_type: type) -> str | None:
    """The name ``forward`` takes a KV cache under (``cache`` in transformers 5, ``past_key_values`` before)."""
    params = inspect.signature(model_type.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in params), None)


@dataclass
class SplitOutput:
    prefix: Any
    """The model's output on the distinct prefixes (``[U, start, ...]``)."""
    rows: torch.Tensor
    """``[B]`` the distinct prefix of each row (an index into ``prefix``)."""
    suffix: Any
    """The model's output on columns ``start..L-1`` of every row (``[B, L - start, ...]``)."""


def shared_prefix_forward(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int,
                          prefix_kwargs: dict[str, Any] | None = None) -> SplitOutput | None:
    """Run ``model`` on right-padded rows with their first ``start`` columns computed once per distinct prefix.

    Args:
        model: a ``transformers`` model (causal LM or bare body) whose ``forward`` takes a KV cache.
        input_ids, attention_mask: ``[B, L]``, right-padded, every row at least ``start`` real tokens long.
        start: prefix length (``1 <= start < L``).
        prefix_kwargs: extra arguments of the prefix pass (e.g. ``logits_to_keep=1`` when its logits are unused).

    Returns:
        A :class:`SplitOutput`, or ``None`` when sharing cannot help or work: no two rows share their prefix,
        ``start`` is out of range, the model takes no cache / returns one that cannot be gathered, or its layers
        would recompute in the backward pass (activation checkpointing drops the cache inside them).
    """
    name = cache_kwarg(type(model))
    length = input_ids.shape[1]
    if name is None or not 1 <= start < length or recomputes(model):
        return None
    prefixes, rows = torch.unique(input_ids[:, :start], dim=0, return_inverse=True)
    if len(prefixes) == len(input_ids):
        return None
    if not bool(attention_mask[:, :start].all()):
        raise ValueError(f"every row needs {start} real tokens before its shared prefix ends (right padding)")
    prefix = model(input_ids=prefixes, use_cache=True, **(prefix_kwargs or {}))
    cache = getattr(prefix, "cache", None)
    cache = cache if cache is not None else getattr(prefix, "past_key_values", None)
    if cache is None or not hasattr(cache, "batch_select_indices"):
        return None
    cache.batch_select_indices(rows)
    positions = torch.arange(start, length, device=input_ids.device).unsqueeze(0).expand(len(input_ids), -1)
    suffix = model(input_ids=input_ids[:, start:], attention_mask=attention_mask, position_ids=positions,
                   use_cache=False, **{name: cache})
    return SplitOutput(prefix=prefix, rows=rows, suffix=suffix)


def first_trained_column(loss_mask: torch.Tensor) -> int:
    """The first column any row trains on (``loss_mask`` is shifted: column ``t`` is token ``t + 1``); 0 if none."""
    trained = torch.nonzero(loss_mask.any(dim=0)).flatten()
    return int(trained[0]) if len(trained) else 0
