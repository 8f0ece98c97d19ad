"""Tests for ragen2.repro.claims: validated per-section claim files and their merge."""

from __future__ import annotations

import csv

import pytest

from ragen2.repro.claims import Claim, ClaimsConflictError, merge_claims, read_claims, write_claims


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_write_claims_exact_columns_sorted(tmp_path):
    path = write_claims(
        "main_table",
        [
            Claim("C5", "inconclusive", "gap +0.01, p=0.6, n=4"),
            {"claim": "C1", "verdict": "agree", "evidence": "gain +3.1 pts, p=0.03"},
            ("C3", "disagree", "Q4 < Q1, rho=-0.5, p=0.01"),
        ],
        tmp_path,
    )
    assert path == tmp_path / "claims_main_table.csv"
    rows = _rows(path)
    assert rows[0] == ["claim", "verdict", "evidence"]
    assert [r[0] for r in rows[1:]] == ["C1", "C3", "C5"]
    assert read_claims(path)[0] == Claim("C1", "agree", "gain +3.1 pts, p=0.03")


@pytest.mark.parametrize(
    "row, match",
    [
        (("C8", "agree", "x"), "claim id 'C8'"),
        (("C1", "yes", "x"), "verdict 'yes'"),
        (("C1", "agree", " "), "evidence"),
        (("C1", "agree", "two\nlines"), "one line"),
        ({"claim": "C1", "verdict": "agree", "evidence": "x", "extra": 1}, "unknown key"),
    ],
)
def test_write_claims_rejects_bad_rows(tmp_path, row, match):
    with pytest.raises(ValueError, match=match):
        write_claims("sec", [row], tmp_path)


def test_write_claims_rejects_bad_section_duplicates_and_empty(tmp_path):
    with pytest.raises(ValueError, match="section 'Bad Name'"):
        write_claims("Bad Name", [("C1", "agree", "x")], tmp_path)
    with pytest.raises(ValueError, match="C2 appears twice"):
        write_claims("sec", [("C2", "agree", "x"), ("C2", "agree", "y")], tmp_path)
    with pytest.raises(ValueError, match="no claim rows"):
        write_claims("sec", [], tmp_path)


def test_merge_claims_joins_sections_and_lists_missing(tmp_path):
    write_claims("main_table", [("C1", "agree", "gain +3 pts")], tmp_path)
    write_claims(
        "filtering", [("C1", "agree", "curves above"), ("C6", "inconclusive", "ZV count flat")], tmp_path
    )
    merged = merge_claims(tmp_path)
    assert merged.path == tmp_path / "claims.csv"
    assert merged.missing == ("C2", "C3", "C4", "C5", "C7")
    assert merged.sections == ("filtering", "main_table")
    rows = _rows(merged.path)
    assert rows == [
        ["claim", "verdict", "evidence"],
        ["C1", "agree", "[filtering] curves above | [main_table] gain +3 pts"],
        ["C6", "inconclusive", "[filtering] ZV count flat"],
    ]
    with pytest.raises(ValueError, match="C2, C3, C4, C5, C7"):
        merge_claims(tmp_path, require_all=True)
    # merging again does not read claims.csv as a section
    assert merge_claims(tmp_path).sections == ("filtering", "main_table")


def test_merge_claims_conflict_and_no_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        merge_claims(tmp_path)
    write_claims("a", [("C4", "agree", "x")], tmp_path)
    write_claims("b", [("C4", "disagree", "y")], tmp_path)
    with pytest.raises(ClaimsConflictError, match="C4 .*a=agree, b=disagree"):
        merge_claims(tmp_path)


def test_read_claims_rejects_wrong_columns(tmp_path):
    bad = tmp_path / "claims_x.csv"
    bad.write_text("claim,verdict,evidence,extra\nC1,agree,x,y\n")
    with pytest.raises(ValueError, match="columns must be exactly"):
        read_claims(bad)
    bad.write_text("claim,verdict,evidence\nC1,maybe,x\n")
    with pytest.raises(ValueError, match=r"claims_x.csv:2: verdict 'maybe'"):
        read_claims(bad)
