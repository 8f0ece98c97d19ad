"""A copy of what a clone has, without runs, caches or outputs, for tests that open notebooks as a new reader would
(code is the installed package)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from tests.repro.dvcyaml import REPO


def clone_without_runs(root: Path, *, bundle: bool, notebooks: Sequence[Path] | None = None) -> Path:
    """``root`` holding dvc.yaml, params.yaml, pyproject.toml and ``notebooks`` (default: every notebook), with the
    committed results bundle (``bundle``) or without it."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", "params.yaml", "pyproject.toml"):
        shutil.copy(REPO / name, root / name)
    if notebooks is None:
        shutil.copytree(REPO / "notebooks", root / "notebooks")
    else:
        (root / "notebooks").mkdir()
        for notebook in notebooks:
            shutil.copy(notebook, root / "notebooks" / notebook.name)
    if bundle:
        shutil.copytree(REPO / "data" / "bundle", root / "data" / "bundle")
    return root
