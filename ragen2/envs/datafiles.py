"""Reading a real data set from a local file with ``datasets``, cached per process.

The corpus-backed environments accept a ``data_path`` in their real schema. This module loads such a
file once per process (keyed by path, modification time and size, so an edited file is read again)
and checks the columns the environment needs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_TABLES: dict[tuple, Any] = {}


def file_key(path: Path) -> tuple:
    """A cache key that changes when the file does: (resolved path, mtime in ns, size)."""
    stat = path.stat()
    return (str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def load_table(path: str | os.PathLike, required: set[str], label: str) -> Any:
    """Load a ``.parquet`` (else JSON / JSON Lines) file as a ``datasets.Dataset``, cached per process.

    Args:
        path: the file.
        required: columns the file must have.
        label: the data set's name, for error messages (e.g. ``"MetaMathQA"``).

    Raises:
        FileNotFoundError: if ``path`` is not a file.
        ValueError: if a required column is missing or the file has no rows.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{label} data_path {str(path)!r} is not a file")
    key = file_key(path)
    if key not in _TABLES:
        import datasets  # heavy import, only for real data

        builder = "parquet" if path.suffix == ".parquet" else "json"
        table = datasets.load_dataset(builder, data_files=str(path), split="train", keep_in_memory=True)
        missing = set(required) - set(table.column_names)
        if missing:
            raise ValueError(f"{label} file {str(path)!r} lacks columns {sorted(missing)}")
        if len(table) == 0:
            raise ValueError(f"{label} file {str(path)!r} has no rows")
        _TABLES[key] = table
    return _TABLES[key]
