"""Activation checkpointing of the trained models (``trainer.gradient_checkpointing``).

Each decoder layer keeps only its input for the backward pass and runs its forward again there
(``torch.utils.checkpoint`` with ``use_reentrant=False``): at the paper's shape the saved activations drop from
about 5.6 MB to about 0.3 MB per token for a 3B model (``ragen2.bench.memory``), for about a third more compute.

Two things differ from Hugging Face's own use of the switch:

- Hugging Face checkpoints a layer only while that layer is in training mode, and the trainer keeps its models in
  eval mode (dropout off). :func:`recompute_in_backward` sets the ``training`` flag of the checkpointed decoder
  layers alone, for one gradient pass; their attention and MLP submodules stay in eval mode, so no dropout turns on.
- A checkpointed layer cannot take a KV cache (its backward replay would write the cache a second time), so
  Hugging Face drops the cache inside it. The shared-prefix forward (:mod:`ragen2.model.prefix`) hands the
  suffix pass a cache, so it steps aside while layers recompute (:func:`recomputes`): the gradient passes then run
  every row's whole prompt. The passes without gradient (old and reference log-probs, values, generation, MI
  scoring) never recompute and keep sharing prompts. In multi-turn rows the shared prefix is only the first
  prompt, so little is lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


def enable(model: nn.Module) -> None:
    """Turn on activation checkpointing of a Hugging Face model's decoder layers (non-reentrant).

    Uses ``activation_checkpointing_enable`` where transformers has it, else ``gradient_checkpointing_enable``.
    The forward hook that makes the input embeddings require grad, which both install, is removed again: only
    reentrant checkpointing and frozen embeddings need it, and it would touch every inference forward.
    """
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    elif hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        raise ValueError(f"{type(model).__name__} has no gradient_checkpointing_enable (not a transformers model)")
    if hasattr(model, "disable_input_require_grads"):
        model.disable_input_require_grads()


def _checkpointed_layers(model: nn.Module) -> list[nn.Module]:
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing]


def is_enabled(model: nn.Module) -> bool:
    """Whether any decoder layer of ``model`` has checkpointing switched on."""
    return bool(_checkpointed_layers(model))


@contextlib.contextmanager
def recompute_in_backward(model: nn.Module) -> Iterator[None]:
    """Inside, a gradient-enabled forward of ``model`` checkpoints its switched-on decoder layers.

    Sets the ``training`` flag of those layers only (not of their submodules) and restores it on exit; without
    gradient, or without checkpointing switched on, it does nothing.
    """
    layers = [m for m in _checkpointed_layers(model) if not m.training] if torch.is_grad_enabled() else []
    for layer in layers:
        layer.training = True
    try:
        yield
    finally:
        for layer in layers:
            layer.training = False


def recomputes(model: nn.Module) -> bool:
    """Whether a forward of ``model`` run now would checkpoint (and so drop any KV cache) in some layer."""
    return torch.is_grad_enabled() and any(m.training for m in _checkpointed_layers(model))
