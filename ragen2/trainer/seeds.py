"""A run's random streams: the global generators, independent step-indexed streams (so a resumed run draws exactly
what an uninterrupted one would) and the environment seeds of training and validation."""

from __future__ import annotations

import random
import zlib

import numpy as np
import torch

from ragen2.config import RunConfig


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def stream_seed(seed: int, purpose: str, step: int = 0) -> int:
    """A 63-bit seed for one random stream (``purpose``) at one step, derived from the run seed."""
    seq = np.random.SeedSequence([int(seed) % 2**32, zlib.crc32(purpose.encode()), int(step)])
    return int(seq.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def train_seeds(cfg: RunConfig, step: int) -> list[int]:
    """Env seeds of training step ``step`` (1-based): ``train_seed + env_groups*(step-1) + g`` (docs/method.md §1.0)."""
    r = cfg.rollout
    return [r.train_seed + r.env_groups * (step - 1) + g for g in range(r.env_groups)]


def val_seeds(cfg: RunConfig) -> list[int]:
    """The fixed validation env seeds ``val_seed .. val_seed + val_groups - 1``."""
    return [cfg.rollout.val_seed + g for g in range(cfg.rollout.val_groups)]
