"""Tests for the bench's records (ragen2/bench/records.py): a run kept as a dated file, docs/performance.md's tables
made from the committed ones."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from ragen2.bench import records

REPO = Path(__file__).resolve().parents[2]


def _report(value: float | None = 1.3, load=(0.4, 0.5, 0.6)) -> dict:
    details = {"min": 1.2, "max": 1.4, "load_average_after": [1.1, 0.9, 0.8]} if value is not None else {"failed": "x"}
    return {"step_over_floor_grpo": value, "details": {"step_over_floor_grpo": details},
            "targets": {"step_over_floor_grpo": {"op": "<=", "value": 1.5, "met": value is not None and value <= 1.5}},
            "machine": {"cpu_model": "AMD EPYC 7B13", "kernels": "avx2", "load_average_before": list(load)}}


def test_a_record_says_when_what_and_where_and_is_named_by_date_cpu_and_mode(tmp_path):
    ended = datetime(2026, 12, 6, 3, 4, 5, tzinfo=timezone.utc)
    record = records.make_record(_report(), mode="full", threads=1, ended=ended, commit=("abc123def456", False))
    assert (record["ended_utc"], record["commit"], record["dirty"], record["mode"]) == (
        "2026-12-06T03:04:05Z", "abc123def456", False, "full")
    assert record["load_average_before"] == [0.4, 0.5, 0.6] and record["load_average_after"] == [1.1, 0.9, 0.8]
    assert (record["cpu_model"], record["kernels"], record["threads"]) == ("AMD EPYC 7B13", "avx2", 1)
    path = records.write_record(record, tmp_path)
    assert path.name == "20261206T030405Z_amd-epyc-7b13_full.json"
    assert records.load_records(tmp_path) == [record]
    with pytest.raises(ValueError, match="mode"):
        records.make_record(_report(), mode="fast", threads=1)


def test_quick_and_full_runs_get_tables_of_their_own(tmp_path):
    full = records.make_record(_report(1.3), mode="full", threads=1, commit=("a" * 12, True),
                               ended=datetime(2026, 12, 6, tzinfo=timezone.utc))
    quick = records.make_record(_report(None), mode="quick", threads=1, commit=("b" * 12, False),
                                ended=datetime(2026, 12, 7, tzinfo=timezone.utc))
    text = records.tables([full, quick])
    full_part, quick_part = text.split("**Quick runs**")
    assert "**Full runs**" in full_part and "a" * 12 + " (changed)" in full_part and "b" * 12 not in full_part
    assert "1.3 (1.2-1.4), met" in full_part and "0.4 / 1.1" in full_part
    assert "failed" in quick_part and "a" * 12 not in quick_part
    assert records.tables([]) == "No full bench run is recorded yet.\n\nNo quick bench run is recorded yet."
    doc = f"# Perf\n\n{records.BEGIN}\nold\n{records.END}\nafter\n"
    assert records.with_tables(doc, [full]) == f"# Perf\n\n{records.BEGIN}\n{records.tables([full])}\n{records.END}\nafter\n"
    with pytest.raises(ValueError, match="block"):
        records.with_tables("# no block", [full])


def test_the_performance_page_shows_the_committed_records():
    """docs/performance.md's tables are the committed records' (make bench rewrites both)."""
    text = (REPO / "docs" / "performance.md").read_text()
    assert text == records.with_tables(text, records.load_records(REPO / records.RECORDS_DIR)), (
        "docs/performance.md differs from data/bench/: python -m ragen2.bench.records --write docs/performance.md")


def test_the_command_line_rewrites_a_page_and_names_a_missing_one(tmp_path, capsys):
    doc = tmp_path / "perf.md"
    doc.write_text(f"x\n{records.BEGIN}\n{records.END}\n")
    assert records.main(["--records", str(tmp_path / "none"), "--write", str(doc)]) == 0
    assert "No full bench run is recorded yet." in doc.read_text()
    with pytest.raises(SystemExit):
        records.main(["--write", str(tmp_path / "missing.md")])
    assert "missing.md: no such file" in capsys.readouterr().err
