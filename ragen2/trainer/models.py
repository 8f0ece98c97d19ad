"""The models a run trains and reads: actor, frozen reference and critic, built from the policy RL starts from
(:func:`ragen2.warmstart.initial_policy`), and the run's compute precision."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ragen2.config import RunConfig
from ragen2.model import activation_checkpointing
from ragen2.trainer.algos import get_preset
from ragen2.trainer.critic import ValueModel
from ragen2.trainer.precision import resolve_precision


@dataclass
class Models:
    """What a run trains and reads: the actor and its tokenizer, the frozen KL reference (None without KL), the critic
    (None without GAE) and the policy directory they were built from."""

    actor: torch.nn.Module
    tokenizer: Any
    reference: torch.nn.Module | None
    critic: ValueModel | None
    init_path: Path


def build_models(cfg: RunConfig, init_path: Path) -> Models:
    """Actor, tokenizer, frozen reference (only if ``kl_coef > 0``) and critic (only for GAE).

    The trained models (actor, critic) are float32 master weights whatever ``policy.dtype`` says
    (:mod:`ragen2.trainer.precision`), with activation checkpointing if ``trainer.gradient_checkpointing``;
    the frozen reference is loaded in ``policy.dtype``.
    """
    from ragen2.policy import load_policy

    device = cfg.policy.device
    actor, tokenizer = load_policy(init_path, dtype="float32", device=device)
    reference = None
    if cfg.trainer.kl_coef != 0:
        reference, _ = load_policy(init_path, dtype=cfg.policy.dtype, device=device)
        reference.requires_grad_(False)
        reference.eval()
    critic = None
    if get_preset(cfg.trainer.algo).uses_critic:
        backbone, _ = load_policy(init_path, dtype="float32", device=device)
        if cfg.trainer.gradient_checkpointing:
            activation_checkpointing.enable(backbone)
        critic = ValueModel(backbone).to(next(backbone.parameters()).device)
        critic.eval()  # dropout off, as for the actor; gradients still flow
    if cfg.trainer.gradient_checkpointing:
        activation_checkpointing.enable(actor)
    return Models(actor, tokenizer, reference, critic, Path(init_path))


def run_precision(cfg: RunConfig) -> str:
    """The run's compute precision, ``fp32`` | ``bf16`` | ``fp16`` (``trainer.precision`` with ``auto`` resolved)."""
    return resolve_precision(cfg.trainer.precision, cfg.policy.dtype)
