"""Tests for ragen2.repro.artifacts: deterministic figure and table files."""

from __future__ import annotations

import pandas as pd
import pytest

from ragen2.markdown import to_markdown
from ragen2.repro.artifacts import save_figure, save_table


def _figure():
    from ragen2.repro.figure_style import new_figure

    fig = new_figure(3, 2)
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [0, 1, 4], label="y")
    ax.set_title("det")
    ax.legend()
    return fig


def test_save_figure_is_byte_identical(tmp_path):
    fig = _figure()
    first = save_figure(fig, "fig_test", tmp_path / "a", caption="A test figure.")
    second = save_figure(_figure(), "fig_test", tmp_path / "b", caption="A test figure.")
    for kind in ("png", "pdf", "caption"):
        assert first[kind].read_bytes() == second[kind].read_bytes(), kind
    assert first["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = first["pdf"].read_bytes()
    assert pdf.startswith(b"%PDF") and b"CreationDate" not in pdf
    assert b"Software" not in first["png"].read_bytes()
    assert first["caption"].read_text() == "**fig_test**: A test figure.\n"


def test_save_figure_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="caption"):
        save_figure(_figure(), "f", tmp_path, caption="  ")
    with pytest.raises(ValueError, match="a/b"):
        save_figure(_figure(), "a/b", tmp_path, caption="x")
    with pytest.raises(TypeError, match="Figure"):
        save_figure("not a figure", "f", tmp_path, caption="x")


def test_save_table_csv_and_markdown(tmp_path):
    df = pd.DataFrame({"algo": ["PPO", "GRPO"], "success": [0.5, float("nan")], "note": ["a|b", "c"]})
    paths = save_table(df, "table_x", tmp_path, caption="Numbers.")
    back = pd.read_csv(paths["csv"])
    assert list(back.columns) == ["algo", "success", "note"] and back["success"].iloc[0] == 0.5
    md = paths["md"].read_text()
    assert md.startswith("**table_x**: Numbers.\n\n| algo | success | note |")
    assert "a\\|b" in md
    multi = pd.DataFrame(
        [[1.0, 2]],
        index=pd.Index(["PPO"], name="algorithm"),
        columns=pd.MultiIndex.from_tuples([("Sokoban", "mean"), ("Sokoban", "n")]),
    )
    paths = save_table(multi, "table_multi", tmp_path)
    assert paths["csv"].read_text().splitlines()[0] == "algorithm,Sokoban/mean,Sokoban/n"
    assert "| algorithm | Sokoban/mean | Sokoban/n |" in to_markdown(multi)


def test_smoke_runs_end_every_caption_with_the_note_and_only_they(tmp_path):
    from ragen2.repro.artifacts import SMOKE_NOTE

    df = pd.DataFrame({"x": [1]})
    assert save_figure(_figure(), "f", tmp_path, caption="Curves.", smoke=True)["caption"].read_text() \
        == f"**f**: Curves.{SMOKE_NOTE}\n"
    assert save_table(df, "t", tmp_path, caption="Numbers.", smoke=True)["md"].read_text().startswith(
        f"**t**: Numbers.{SMOKE_NOTE}\n\n")
    assert save_table(df, "u", tmp_path, smoke=True)["md"].read_text().startswith(f"**u**: {SMOKE_NOTE.strip()}\n\n")
    assert SMOKE_NOTE.strip() not in save_table(df, "v", tmp_path, caption="Numbers.")["md"].read_text()
