"""Where a notebook's paths point, whatever the kernel's working directory.

JupyterLab starts a notebook's kernel in the notebook's own folder (``notebooks/``); papermill, as the DVC
pipeline runs it, starts it in the repository root. The notebooks' path parameters are written relative to
the repository root, so :func:`in_repository` resolves them there in both cases. A notebook run by hand
writes its figures into :data:`SCRATCH_FIGURES` (ignored by git) unless it is given another ``fig_dir``;
the pipeline passes ``fig_dir=paper_figures`` explicitly.
"""

from __future__ import annotations

from pathlib import Path

from ragen2.errors import MissingPathError

SCRATCH_FIGURES = "data/scratch/paper_figures"
"""The interactive default of a notebook's ``fig_dir``: the committed ``paper_figures/`` stays untouched."""


def repository_root(start: str | Path | None = None) -> Path:
    """The nearest folder holding ``dvc.yaml`` and ``notebooks/``, looking up from ``start`` (default: the
    working directory), then up from this package (an editable install sits inside the repository)."""
    for base in (Path(start) if start is not None else Path.cwd(), Path(__file__)):
        base = base.resolve()
        for folder in (base, *base.parents):
            if (folder / "dvc.yaml").is_file() and (folder / "notebooks").is_dir():
                return folder
    raise MissingPathError(f"no repository root (a folder with dvc.yaml and notebooks/) above {Path.cwd()} "
                           "or the installed package; pass absolute paths instead")


def in_repository(*paths: str | Path, root: str | Path | None = None) -> tuple[Path, ...]:
    """``paths`` with the relative ones resolved against the repository root (absolute ones unchanged).

    >>> runs_root, fig_dir = in_repository("data/runs", "/tmp/figures")  # doctest: +SKIP
    """
    base = Path(root) if root is not None else None
    out = []
    for path in map(Path, paths):
        if not path.is_absolute():
            base = base if base is not None else repository_root()
            path = base / path
        out.append(path)
    return tuple(out)
