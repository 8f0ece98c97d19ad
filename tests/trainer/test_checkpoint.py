"""Atomic checkpoints and RNG state capture."""

import random

import numpy as np
import torch

from ragen2.rundir import kept_checkpoints, latest_checkpoint
from ragen2.trainer.checkpoint import (
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)


def test_latest_pointer_and_old_files_removed(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    save_checkpoint(tmp_path, 1, {"step": 1, "w": torch.ones(2)})
    save_checkpoint(tmp_path, 2, {"step": 2, "w": torch.zeros(2)})
    path = latest_checkpoint(tmp_path)
    assert path.name == "step_000002.pt"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest.json", "step_000002.pt"]
    assert load_checkpoint(path)["step"] == 2


def test_rng_round_trip():
    gen = np.random.default_rng(3)
    state = rng_state(gen)
    first = (random.random(), np.random.rand(), torch.rand(1).item(), gen.random())
    set_rng_state(state, gen)
    assert (random.random(), np.random.rand(), torch.rand(1).item(), gen.random()) == first


def test_keep_every_keeps_multiples_besides_the_latest(tmp_path):
    for step in range(1, 8):
        save_checkpoint(tmp_path, step, {"step": step}, keep_every=3)
    assert sorted(kept_checkpoints(tmp_path)) == [3, 6, 7]
    assert latest_checkpoint(tmp_path).name == "step_000007.pt"
    assert kept_checkpoints(tmp_path / "nowhere") == {}
