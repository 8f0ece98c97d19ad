"""Exact-resume checkpoints of a run directory: writing and reading the training state.

The file layout (``step_<NNNNNN>.pt`` holding the whole training state, ``latest.json`` pointing at the newest)
is the run directory's (:mod:`ragen2.rundir`). Both files are written to a temporary name, flushed to disk and
renamed, so a run killed at any moment leaves either the old or the new checkpoint, never a torn one. Older
checkpoint files are removed after ``latest.json`` points at the new one.
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen2.errors import UserError, first_line
from ragen2.fileio import write_json_atomic
from ragen2.rundir import (
    CHECKPOINTS,
    GRAD_ANALYSIS,
    LATEST,
    SUMMARY,
    checkpoint_name,
    checkpoint_step,
    config_changes,
    latest_checkpoint,
)


def rng_state(shuffle_rng: np.random.Generator) -> dict[str, Any]:
    """The global Python / NumPy / torch RNG states plus the trainer's own NumPy generator."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
             "shuffle": shuffle_rng.bit_generator.state}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], shuffle_rng: np.random.Generator) -> None:
    """Restore what :func:`rng_state` captured."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    shuffle_rng.bit_generator.state = state["shuffle"]
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: Path, step: int, state: dict[str, Any], keep_every: int = 0) -> Path:
    """Write ``state`` as the checkpoint of ``step`` and point ``latest.json`` at it.

    Older checkpoints are removed, except those of steps > 0 that are multiples of ``keep_every`` (> 0).
    """
    ckpt_dir = Path(run_dir) / CHECKPOINTS
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    name = checkpoint_name(step)
    tmp = ckpt_dir / f".{name}.tmp"
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, ckpt_dir / name)
    write_json_atomic(ckpt_dir / LATEST, {"step": step, "file": name})
    for old in ckpt_dir.glob("step_*.pt"):
        kept = keep_every > 0 and checkpoint_step(old) > 0 and checkpoint_step(old) % keep_every == 0
        if old.name != name and not kept:
            old.unlink(missing_ok=True)
    return ckpt_dir / name


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (it holds Python objects: trusted files only); an
    unreadable or truncated file is a UserError naming it."""
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as e:
        raise UserError(f"checkpoint {str(path)!r} cannot be read ({type(e).__name__}: {first_line(e, 'empty')}); "
                        "delete it to start over (--no-resume) or point latest.json at an earlier one") from None


def resumable_checkpoint(cfg, run_dir: Path, resume: bool) -> Path | None:
    """The checkpoint a run resumes from, or ``None`` to start fresh.

    ``resume=False`` first removes the checkpoints, summary and gradient table of an earlier run, so nothing
    of it is resumed or mixed in later. A checkpoint of another config is refused (resuming would mix two runs).
    """
    run_dir = Path(run_dir)
    if not resume:
        shutil.rmtree(run_dir / CHECKPOINTS, ignore_errors=True)
        for name in (SUMMARY, GRAD_ANALYSIS):
            (run_dir / name).unlink(missing_ok=True)
    path = latest_checkpoint(run_dir)
    if path is not None:
        changed = config_changes(cfg, run_dir)
        if changed:
            raise ValueError(f"{run_dir} holds a run of another config ({', '.join(changed[:6])} differ): "
                             "resuming would mix the two; start over with resume=False (--no-resume)")
    return path
