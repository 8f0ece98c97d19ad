"""A training run's directory: its layout, and the one reader of what a run writes.

::

    <run_dir>/
        config.json        the RunConfig (``ragen2.config.to_dict``)
        env.json           package versions, commit, device, threads, machine record (:func:`environment_info`)
        summary.json       final and best validation, steps, timings (written when the run ends)
        metrics.jsonl      one JSON row per step (``ragen2.trainer.runlog``)
        grad_analysis.csv  the RV-bucketed gradient norms (when ``grad_analysis.enabled``)
        val_episodes.jsonl one row per validation: each validation episode's success, in env-seed order
                           (:func:`read_val_episodes`; what evaluation-noise intervals resample)
        dvclive/           the same metrics for DVC and dvclive
        checkpoints/       step_NNNNNN.pt (the training state, ``ragen2.trainer.checkpoint``) and latest.json
                           (``{"step": N, "file": "step_NNNNNN.pt"}``: the newest)

Every module that reads a run directory (the trainer's resume check, ``evaluate``, the reproduction
layer) goes through the functions here, so the layout is written down once. Nothing here loads a model: a run's
policy at a checkpoint is :func:`ragen2.evaluate.load_run_policy`.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ragen2.config import RunConfig, flatten, from_dict, to_dict
from ragen2.errors import MissingPathError, UserError
from ragen2.fileio import write_text_atomic
from ragen2.kernels import machine_record

CONFIG = "config.json"
ENV = "env.json"
SUMMARY = "summary.json"
METRICS = "metrics.jsonl"
GRAD_ANALYSIS = "grad_analysis.csv"
VAL_EPISODES = "val_episodes.jsonl"
CHECKPOINTS = "checkpoints"
LATEST = "latest.json"


def read_json(path: str | Path) -> dict[str, Any]:
    """A JSON object from ``path``; a missing file, bad JSON or a non-object raise errors naming the file."""
    path = Path(path)
    if not path.is_file():
        raise MissingPathError(f"{str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory holding a ``config.json``."""
    return (Path(path) / CONFIG).is_file()


def read_config_dict(run_dir: str | Path) -> dict[str, Any]:
    """The run's ``config.json`` as a dict (as written; see :func:`read_config` for the checked form)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise MissingPathError(f"run directory {str(run_dir)!r} does not exist")
    if not is_run_dir(run_dir):
        raise MissingPathError(f"{str(run_dir)!r} is not a run directory (no {CONFIG})")
    return read_json(run_dir / CONFIG)


def read_config(run_dir: str | Path) -> RunConfig:
    """The run's :class:`~ragen2.config.RunConfig`, strictly loaded from its ``config.json``."""
    return from_dict(RunConfig, read_config_dict(run_dir))


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """The ``summary.json`` of a finished run."""
    return read_json(Path(run_dir) / SUMMARY)


def config_changes(cfg: RunConfig, run_dir: str | Path) -> list[str]:
    """Dotted keys whose value in ``run_dir/config.json`` differs from ``cfg`` (none when no config is recorded)."""
    if not is_run_dir(run_dir):
        return []
    old, new = flatten(read_config_dict(run_dir)), flatten(to_dict(cfg))
    return sorted(k for k in old.keys() | new.keys() if old.get(k, "<missing>") != new.get(k, "<missing>"))


def environment_info(model) -> dict[str, Any]:
    """``env.json``: package versions, git commit, device, thread count and the machine record
    (:func:`ragen2.kernels.machine_record`: CPU model and flags, torch's kernel capability, the pinned kernel
    settings, the BLAS), which together decide a run's float realization."""
    import importlib.metadata as md

    import torch

    versions = {}
    for pkg in ("ragen2", "torch", "transformers", "numpy", "gymnasium", "dvclive", "trl"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                                cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    device = next(model.parameters()).device
    return {
        "python": sys.version.split()[0], "platform": platform.platform(), "versions": versions,
        "git_commit": commit, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "dtype": str(next(model.parameters()).dtype), **machine_record(),
    }


def write_val_episodes(run_dir: str | Path, step: int, successes, first_seed: int) -> Path:
    """Record validation ``step``'s per-episode successes (``successes[i]``: env seed ``first_seed + i``) in
    ``val_episodes.jsonl``, replacing the rows of this step and later ones (a resumed run validates them again), so
    the file always equals an uninterrupted run's. A row: ``{"step", "first_seed", "success"}``, ``success`` a
    string of ``0``/``1`` per episode."""
    flags = "".join("1" if float(x) > 0.5 else "0" for x in successes)
    rows = [r for r in _val_rows(run_dir) if r["step"] < step]
    rows.append({"step": int(step), "first_seed": int(first_seed), "success": flags})
    return _write_val_rows(run_dir, rows)


def cut_val_episodes(run_dir: str | Path, through_step: int) -> None:
    """Drop the validation rows after ``through_step`` (a run resuming from that step's checkpoint)."""
    rows = _val_rows(run_dir)
    if any(r["step"] > through_step for r in rows):
        _write_val_rows(run_dir, [r for r in rows if r["step"] <= through_step])


def read_val_episodes(run_dir: str | Path) -> dict[int, np.ndarray]:
    """Validation step -> per-episode successes (a float numpy array in env-seed order); ``{}`` when the run kept
    none. Every row of a run covers the same env seeds (``rollout.val_seed`` onwards)."""
    return {r["step"]: np.frombuffer(r["success"].encode(), dtype=np.uint8).astype(np.float64) - ord("0")
            for r in _val_rows(run_dir)}


def _val_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / VAL_EPISODES
    if not path.is_file():
        return []
    rows = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({e})") from None
    return rows


def _write_val_rows(run_dir: str | Path, rows: list[dict[str, Any]]) -> Path:
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
    return write_text_atomic(Path(run_dir) / VAL_EPISODES, text)


def checkpoint_name(step: int) -> str:
    """The checkpoint file of ``step`` in ``checkpoints/``."""
    return f"step_{step:06d}.pt"


def checkpoint_step(path: Path) -> int:
    """The step of a checkpoint file (:func:`checkpoint_name`'s inverse)."""
    return int(Path(path).stem.removeprefix("step_"))


def kept_checkpoints(run_dir: str | Path) -> dict[int, Path]:
    """Step -> checkpoint file of every checkpoint on disk (the latest and those ``keep_every`` kept)."""
    ckpt_dir = Path(run_dir) / CHECKPOINTS
    return dict(sorted((checkpoint_step(p), p) for p in ckpt_dir.glob("step_*.pt"))) if ckpt_dir.is_dir() else {}


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The file ``latest.json`` points at, or ``None`` if the run has no checkpoint."""
    pointer = Path(run_dir) / CHECKPOINTS / LATEST
    if not pointer.exists():
        return None
    try:
        path = pointer.parent / json.loads(pointer.read_text())["file"]
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{str(pointer)!r} is not a checkpoint pointer ({{\"file\": ...}}); delete it to start "
                        "over") from None
    if not path.exists():
        raise MissingPathError(f"{pointer} points at {path.name}, which does not exist")
    return path


def checkpoint_path(run_dir: str | Path, checkpoint: str = "latest") -> Path | None:
    """The checkpoint file of ``checkpoint``: ``latest``, ``mid`` (the kept one nearest half the latest step),
    ``initial`` (None: the policy the run started from) or a kept step number."""
    run_dir = Path(run_dir)
    if checkpoint == "initial":
        return None
    latest = latest_checkpoint(run_dir)
    if checkpoint in ("latest", "mid") and latest is None:
        raise MissingPathError(f"{run_dir} has no checkpoint")
    if checkpoint == "latest":
        return latest
    kept = kept_checkpoints(run_dir)
    if checkpoint == "mid":
        earlier = {step: path for step, path in kept.items() if path != latest}
        if not earlier:
            raise MissingPathError(f"{run_dir} kept no checkpoint before its latest (set trainer.keep_every)")
        half = max(kept) / 2
        return earlier[min(earlier, key=lambda s: (abs(s - half), s))]
    try:
        return kept[int(checkpoint)]
    except (ValueError, KeyError):
        raise ValueError(f"checkpoint {checkpoint!r} is not 'latest', 'mid', 'initial' or a kept step "
                         f"of {run_dir} ({sorted(kept)})") from None
