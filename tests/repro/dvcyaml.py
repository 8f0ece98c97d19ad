"""``dvc.yaml`` as DVC resolves it (templating, YAML anchors), without opening the repository."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import yaml

REPO = Path(__file__).resolve().parents[2]


def resolved(root: Path = REPO) -> dict:
    """The resolved ``stages`` and ``plots`` of ``root/dvc.yaml`` with ``root/params.yaml`` as its variables."""
    from dvc.fs import LocalFileSystem
    from dvc.parsing import DataResolver

    data = yaml.safe_load((root / "dvc.yaml").read_text())
    cwd = os.getcwd()
    os.chdir(root)  # DVC resolves params.yaml and the plot paths relative to the working directory
    try:
        resolver = DataResolver(SimpleNamespace(fs=LocalFileSystem(), config={}), "", data)
        return {"stages": resolver.resolve()["stages"], "plots": resolver.resolve_plots()}
    finally:
        os.chdir(cwd)


def paths(entries: list) -> list[str]:
    """The paths of a stage's ``deps`` or ``outs`` (an entry is a path or ``{path: options}``)."""
    return [next(iter(e)) if isinstance(e, dict) else e for e in entries]
