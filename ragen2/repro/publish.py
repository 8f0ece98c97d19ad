"""Executed notebooks as published copies: readable on a code host, the same bytes whenever the results are the same.

The pipeline executes each paper notebook with papermill into ``data/executed/`` (outside git: machine-specific
timings in every cell). :func:`publish_notebooks` copies them to ``docs/notebooks/``, which git tracks, so a reader
sees every figure, table and verdict of the committed results without running anything. A published copy keeps
the code, its outputs and the parameters the pipeline injected, and drops what changes from one execution to the
next without the results changing: papermill's timings, Jupyter's execution timestamps, the random id papermill
gives the parameters cell, the repository's absolute path in printed paths, and interactive widgets (their state
carries random model ids, and a static page cannot move a slider: the copy says to run the notebook). Two executions
of the same commit on the same machine kind give the same files.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragen2.fileio import write_text_atomic

PUBLISHED_DIR = Path("docs/notebooks")
"""Where the published copies go (relative to the repository root)."""
VOLATILE_CELL_METADATA = ("execution", "papermill")
"""Per-cell metadata that records when and how long, not what."""
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = "[an interactive widget: run the notebook in JupyterLab to use it]"


def published(notebook: dict[str, Any], root: str | Path) -> dict[str, Any]:
    """``notebook`` (nbformat JSON) without its volatile metadata, with ``root``'s absolute path made relative."""
    out = json.loads(json.dumps(notebook))
    out.get("metadata", {}).pop("papermill", None)
    out.get("metadata", {}).pop("widgets", None)
    for cell in out.get("cells", []):
        meta = cell.get("metadata", {})
        for key in VOLATILE_CELL_METADATA:
            meta.pop(key, None)
        if "injected-parameters" in meta.get("tags", []):
            cell["id"] = "injected-parameters"
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if data.pop(WIDGET_VIEW, None) is not None:
                data["text/plain"] = [WIDGET_NOTE]
    text = json.dumps(out, indent=1, ensure_ascii=False, sort_keys=True)
    prefix = str(Path(root).resolve()) + "/"
    return json.loads(text.replace(json.dumps(prefix)[1:-1], ""))


def publish_notebooks(executed: Sequence[str | Path], out_dir: str | Path = PUBLISHED_DIR,
                      root: str | Path = ".") -> list[Path]:
    """Write the published copy of each executed notebook to ``out_dir`` (same file name, atomically).

    Raises:
        FileNotFoundError: an executed notebook is missing (named).
        ValueError: one is not notebook JSON or has an error output (a failed cell is not published).
    """
    written = []
    for path in map(Path, executed):
        if not path.is_file():
            raise FileNotFoundError(f"executed notebook {str(path)!r} does not exist (run its pipeline stage first)")
        try:
            notebook = json.loads(path.read_text())
            cells = notebook["cells"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a notebook ({e})") from None
        errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            raise ValueError(f"{path}: {len(errors)} cell(s) ended in an error ({errors[0].get('ename')}); "
                             "not published")
        text = json.dumps(published(notebook, root), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
        written.append(write_text_atomic(Path(out_dir) / path.name, text))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragen2.repro.publish", description=__doc__.splitlines()[0])
    parser.add_argument("executed", nargs="+", help="executed notebooks (data/executed/*.ipynb)")
    parser.add_argument("--out-dir", default=str(PUBLISHED_DIR), help="where the copies go (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in publish_notebooks(args.executed, args.out_dir):
        print(f"published {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
