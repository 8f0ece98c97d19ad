"""Writing the paper's artefacts: figures (PNG, PDF, caption) and tables (CSV, Markdown), reproducibly.

Every file goes through the core's atomic writers (:mod:`ragen2.fileio`), so a reader never sees a
half-written file, and tables through the core's Markdown writer (:mod:`ragen2.markdown`).
:func:`save_figure` writes PNG and PDF at a fixed dpi with the date/software metadata removed, so the same
figure saved twice gives byte-identical files (``dvc.lock`` and the committed ``paper_figures/`` agree
across reruns).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ragen2.fileio import write_bytes_atomic, write_text_atomic
from ragen2.markdown import flat_columns, to_markdown

FIGURE_DPI = 200
"""Resolution of every saved PNG (the PDF is vector; its raster parts use the same dpi)."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"artefact name {name!r} must be a plain file stem (letters, digits, '_', '.', '-')")
    return name


SMOKE_NOTE = " SMOKE RUN."
"""Ends the caption of every figure and table made from smoke runs (``save_figure(..., smoke=True)``): one seed of
short runs, whose numbers decide nothing."""


def figure_bytes(fig: Any, fmt: str, dpi: int = FIGURE_DPI) -> bytes:
    """``fig`` encoded as ``png`` or ``pdf`` without date, producer or software metadata (deterministic bytes)."""
    metadata = {
        "png": {"Software": None},
        "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    }[fmt]
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=metadata, bbox_inches="tight", pad_inches=0.05)
    return buf.getvalue()


def save_figure(
    fig: Any, name: str, out_dir: str | Path = "paper_figures", *, caption: str, dpi: int = FIGURE_DPI,
    smoke: bool = False,
) -> dict[str, Path]:
    """Write ``<name>.png``, ``<name>.pdf`` and the caption ``<name>.md`` into ``out_dir``.

    Output is deterministic: fixed dpi, tight bounding box, and no creation date, producer or
    software tag in the metadata, so unchanged inputs give byte-identical files.

    Args:
        fig: a matplotlib ``Figure``.
        name: file stem, shared with the figure function (e.g. ``fig_success_curves``).
        out_dir: target folder (created if missing).
        caption: what the figure shows (markdown); required so no figure goes out unexplained.
        dpi: raster resolution.
        smoke: the figure is made from smoke runs: :data:`SMOKE_NOTE` ends its caption.

    Returns:
        ``{"png": path, "pdf": path, "caption": path}``.
    """
    from matplotlib.figure import Figure

    _check_name(name)
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError(f"caption of figure {name!r} must be a non-empty string, got {caption!r}")
    out = Path(out_dir)
    paths = {
        fmt: write_bytes_atomic(out / f"{name}.{fmt}", figure_bytes(fig, fmt, dpi)) for fmt in ("png", "pdf")
    }
    paths["caption"] = write_text_atomic(out / f"{name}.md", f"**{name}**: {caption.strip()}{SMOKE_NOTE * smoke}\n")
    return paths


def save_table(
    df: pd.DataFrame, name: str, out_dir: str | Path = "paper_figures", *, caption: str | None = None,
    smoke: bool = False,
) -> dict[str, Path]:
    """Write ``<name>.csv`` (numbers, full precision) and ``<name>.md`` (caption + markdown table).

    ``smoke``: the table is made from smoke runs: :data:`SMOKE_NOTE` ends its caption (or is its caption).

    A MultiIndex on the columns is flattened to ``level0/level1``; a named or non-range index is
    written as leading column(s).

    Returns:
        ``{"csv": path, "md": path}``.
    """
    _check_name(name)
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    flat = flat_columns(df)
    keep_index = not isinstance(flat.index, pd.RangeIndex) or any(n is not None for n in flat.index.names)
    csv_text = flat.to_csv(index=keep_index, lineterminator="\n")
    out = Path(out_dir)
    caption = ((caption or "").strip() + SMOKE_NOTE * smoke).strip()
    md = (f"**{name}**: {caption}\n\n" if caption else "") + to_markdown(flat)
    return {
        "csv": write_text_atomic(out / f"{name}.csv", csv_text),
        "md": write_text_atomic(out / f"{name}.md", md),
    }
