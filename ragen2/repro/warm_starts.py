"""The warm starts a set of runs started from, as a table: which policy RL began with, and how good it was.

Every run of a profile starts from a cached SFT warm start (``ragen2.warmstart.initial_policy``). Its weights
decide much of what RL can show, and floating-point details of the machine and the package versions can
change them, so the pipeline writes this table to ``paper_figures/``: a changed warm start (another weights
hash, another greedy success) is then visible in ``git diff``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ragen2.rundir import read_config, read_json

COLUMNS = ("warm_start", "env", "sft_steps", "template_fraction", "sft_seed", "greedy_success",
           "greedy_template_share", "final_loss", "weights_sha256", "runs")


def weights_sha256(policy_dir: str | Path) -> str:
    """SHA-256 over the policy's weight files (``*.safetensors``, in name order)."""
    digest = hashlib.sha256()
    files = sorted(Path(policy_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{policy_dir} holds no *.safetensors weights")
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def warm_start_table(run_dirs: Iterable[str | Path], cache_dir: str | Path) -> pd.DataFrame:
    """One row per distinct warm start of ``run_dirs`` (:data:`COLUMNS`), in order of first use.

    ``greedy_success`` and ``greedy_template_share`` are the warm start's own greedy evaluation
    (``warm_start.json``); runs without a warm start (``warm_start.steps: 0``) are left out.
    """
    from ragen2.warmstart import warm_start_key

    rows: dict[str, dict] = {}
    for run_dir in map(Path, run_dirs):
        cfg = read_config(run_dir)
        if cfg.warm_start.steps == 0:
            continue
        key = warm_start_key(cfg)
        if key not in rows:
            path = Path(cache_dir) / "warm_start" / key
            report = read_json(path / "warm_start.json")  # missing: a MissingPathError naming it
            rows[key] = {"warm_start": key, "env": cfg.env.name, "sft_steps": cfg.warm_start.steps,
                         "template_fraction": cfg.warm_start.template_fraction, "sft_seed": cfg.warm_start.seed,
                         "greedy_success": report["greedy_success"],
                         "greedy_template_share": report["greedy_template_share"],
                         "final_loss": report["final_loss"], "weights_sha256": weights_sha256(path), "runs": 0}
        rows[key]["runs"] += 1
    return pd.DataFrame(list(rows.values()), columns=list(COLUMNS))
