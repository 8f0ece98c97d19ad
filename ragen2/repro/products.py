"""Tables a notebook computes from checkpoints, kept for a clone that has only the results bundle.

Prompt tables (notebooks 04 and 07) and sampled reasonings (notebook 01) roll a trained policy out, so they need
the run's checkpoints, which the bundle (:mod:`ragen2.repro.bundle`) leaves out. The pipeline's notebook stages
write each such table to ``data/bundle/products/<notebook>/`` as well, named by what it was computed from (the
table's kind, the run and the arguments that change it); a notebook reading a bundled run, which has no checkpoints,
reads the table from there instead of computing it. So a fresh clone shows the same tables and figures as the
pipeline, and says where they came from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ragen2 import rundir
from ragen2.fileio import atomic_path

PRODUCTS_ROOT = Path("data/bundle/products")
"""Where the pipeline's notebook stages keep their tables, one folder per notebook (relative to the repository)."""


def has_checkpoints(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds checkpoints (a trained run), not only its bundled files."""
    return (Path(run_dir) / rundir.CHECKPOINTS).is_dir()


def product_path(products_dir: str | Path, kind: str, key: dict[str, Any]) -> Path:
    """Where the table of ``kind`` computed from ``key`` (plain JSON values) is kept."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(products_dir) / f"{kind}-{digest}.parquet"


def computed_or_kept(kind: str, key: dict[str, Any], compute: Callable[[], pd.DataFrame], *, can_compute: bool,
                     products_dir: str | Path | None, write: bool = False) -> pd.DataFrame:
    """``compute()`` where ``can_compute`` (and, with ``write``, keep the result in ``products_dir``); else the table
    kept there.

    Raises:
        FileNotFoundError: it cannot be computed and no table is kept for ``key`` (named in the message).
    """
    if can_compute:
        table = compute()
        if write and products_dir is not None:
            with atomic_path(product_path(products_dir, kind, key)) as tmp:
                table.to_parquet(tmp, index=False, compression="zstd")
        return table
    path = product_path(products_dir, kind, key) if products_dir is not None else None
    if path is None or not path.is_file():
        raise FileNotFoundError(f"no checkpoints to compute the {kind} of {key} and none kept in {products_dir} "
                                "(train the runs: make repro)")
    return pd.read_parquet(path)
