"""The warm starts runs started from, as a table: which policy RL began with, and how good it was.

Every run of a profile starts from a cached SFT warm start (``ragen2.warmstart.initial_policy``). Its weights
decide much of what RL can show, and floating-point details of the machine (the CPU model, the thread count)
and the package versions can change them, so the pipeline's ``warm_starts`` stage writes every warm start of
both realizations to ``paper_figures/table_warm_starts`` (:func:`pipeline_warm_starts`, ``python -m
ragen2.repro.warm_starts``): a changed warm start (another weights hash, another greedy success) is then visible in
``git diff``, with the CPU and thread count that built it. :func:`warm_start_table` lists the warm starts of a set
of run directories (what a notebook shows of its own runs).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from ragen2.config import load_config, read_params
from ragen2.repro.artifacts import save_table
from ragen2.repro.run_ids import parse_run_id
from ragen2.rundir import read_config, read_json

COLUMNS = ("warm_start", "env", "sft_steps", "template_fraction", "sft_seed", "greedy_success",
           "greedy_template_share", "final_loss", "weights_sha256", "runs")


WEIGHTS_HASH_FILE = "weights.sha256"
"""A bundled warm start's record of :func:`weights_sha256` (the bundle keeps no weights: :mod:`ragen2.repro.bundle`)."""


def weights_sha256(policy_dir: str | Path) -> str:
    """SHA-256 over the policy's weight files (``*.safetensors``, in name order); for a bundled warm start, which
    has no weights, the hash recorded in its :data:`WEIGHTS_HASH_FILE`."""
    digest = hashlib.sha256()
    files = sorted(Path(policy_dir).glob("*.safetensors"))
    if not files and (Path(policy_dir) / WEIGHTS_HASH_FILE).is_file():
        return (Path(policy_dir) / WEIGHTS_HASH_FILE).read_text().strip()
    if not files:
        raise FileNotFoundError(f"{policy_dir} holds no *.safetensors weights")
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _warm_start_row(cfg, path: Path) -> dict:
    """A warm start's recipe (from ``cfg``), its own greedy evaluation and build (``path/warm_start.json``; missing: a
    MissingPathError naming it) and its weights hash; the machine columns are empty for a warm start built before its
    report recorded them."""
    report = read_json(path / "warm_start.json")
    return {"env": cfg.env.name, "sft_steps": cfg.warm_start.steps,
            "template_fraction": cfg.warm_start.template_fraction, "sft_seed": cfg.warm_start.seed,
            "greedy_success": report["greedy_success"], "greedy_template_share": report["greedy_template_share"],
            "final_loss": report["final_loss"], "torch_threads": report.get("torch_threads"),
            **machine_columns(report), "weights_sha256": weights_sha256(path)}


def machine_columns(report: dict) -> dict[str, str]:
    """A build report's machine record (:func:`ragen2.kernels.machine_record`) as table cells: CPU model, the flags
    it has of avx2/avx512f/amx, torch's kernel capability, the kernels' state, the BLAS."""
    flags = report.get("cpu_flags") or {}
    return {"cpu_model": report.get("cpu_model", ""), "cpu_flags": " ".join(f for f, on in flags.items() if on),
            "torch_capability": report.get("torch_capability") or "", "kernels": report.get("kernels", ""),
            "blas": report.get("blas", "")}


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
            rows[key] = {"warm_start": key, **_warm_start_row(cfg, Path(cache_dir) / "warm_start" / key), "runs": 0}
        rows[key]["runs"] += 1
    return pd.DataFrame(list(rows.values()), columns=list(COLUMNS))


TABLE = "table_warm_starts"
"""The pipeline's warm-start table in ``paper_figures/`` (``.csv`` and ``.md``)."""
PIPELINE_COLUMNS = ("realization", "warm_start", "studies", "runs", "env", "sft_steps", "template_fraction",
                    "sft_seed", "greedy_success", "greedy_template_share", "final_loss", "torch_threads",
                    "cpu_model", "cpu_flags", "torch_capability", "kernels", "blas", "weights_sha256")
CAPTION = ("Every warm start of the pipeline, both realizations: the studies and number of runs it starts, SFT "
           "steps, template share of its corpus, SFT seed, greedy success and template share on 32 seeds, final "
           "SFT loss, the machine that built it (torch threads, CPU model and flags, torch's kernel capability, "
           "the kernels' state: avx2 = pinned, native or unpinned, the BLAS), SHA-256 of its weights.")


def pipeline_warm_starts(params_path: str | Path = "params.yaml") -> pd.DataFrame:
    """One row per warm start a params file's pipeline builds (:data:`PIPELINE_COLUMNS`), the first realization's
    (``pipeline.warm_starts``) then the second's (``pipeline.realization.warm_starts``), in the file's order.

    Paths in the params file are read relative to its folder. Warm starts of zero SFT steps (runs that start from
    the base policy) are left out.

    Raises:
        MissingPathError: a warm start has no ``warm_start.json`` (not built yet).
    """
    root = Path(params_path).parent
    pipeline = read_params(params_path).get("pipeline") or {}
    second = pipeline.get("realization") or {}
    rows = []
    for label, entry, overrides in (("first", pipeline, []), ("second", second, list(second.get("set") or []))):
        train = entry.get("train") or {}
        for key, spec in (entry.get("warm_starts") or {}).items():
            cfg = load_config(spec["run"], params_path=params_path, overrides=overrides)
            if cfg.warm_start.steps == 0:
                continue
            users = [rid for rid, item in train.items() if (item or {}).get("warm_start") == spec["path"]]
            rows.append({"realization": label, "warm_start": key,
                         "studies": " ".join(sorted({parse_run_id(rid)["study"] for rid in users})),
                         "runs": len(users), **_warm_start_row(cfg, root / spec["path"])})
    return pd.DataFrame(rows, columns=list(PIPELINE_COLUMNS))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragen2.repro.warm_starts",
                                     description="write the pipeline's warm-start table")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out-dir", default="paper_figures")
    args = parser.parse_args(argv)
    table = pipeline_warm_starts(args.params)
    paths = save_table(table, TABLE, args.out_dir, caption=CAPTION)
    print(f"wrote {len(table)} warm starts to {paths['md']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
