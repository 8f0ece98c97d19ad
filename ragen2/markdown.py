"""DataFrames as GitHub-style Markdown tables (the audit report, the learning table, the paper's tables)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def flat_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with MultiIndex columns joined by ``/`` (``gain/mean``)."""
    if isinstance(df.columns, pd.MultiIndex):
        df = df.copy()
        df.columns = ["/".join(str(p) for p in col if str(p)) for col in df.columns]
    return df


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub-style markdown table of ``df`` (index included when it is named or not a RangeIndex)."""
    df = flat_columns(df)
    if not isinstance(df.index, pd.RangeIndex) or any(n is not None for n in df.index.names):
        df = df.reset_index()
    header = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"
