"""Per-section claim verdicts and their merge into one table (the paper's claims C1..C7).

Each notebook ends by writing ``paper_figures/claims_<section>.csv`` with exactly the columns
``claim, verdict, evidence`` (one row per claim it tests; verdict one of ``agree``, ``disagree``,
``inconclusive`` (:func:`ragen2.repro.stats.decide`), or ``untested`` where a precondition of the claim's argument
did not hold in its runs (:func:`ragen2.repro.preconditions.gate`)). :func:`merge_claims` joins the section files into
``paper_figures/claims.csv`` (same columns, claims in C1..C7 order, the evidence of each section
prefixed with ``[<section>]``). Two sections that reach different verdicts on one claim are an error:
the conflict must be resolved in the notebooks, not hidden by the merge.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ragen2.fileio import write_text_atomic

CLAIM_IDS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7")
"""The claim ids of the project's paper-claims reference."""
VERDICTS = ("agree", "disagree", "inconclusive", "untested")
"""A test's three outcomes, and ``untested``: the test ran where the claim's argument cannot act."""
COLUMNS = ("claim", "verdict", "evidence")
_SECTION_RE = re.compile(r"^[a-z0-9][a-z0-9_]*$")


class ClaimsConflictError(ValueError):
    """Two sections gave one claim different verdicts."""


@dataclass(frozen=True)
class Claim:
    """One verdict on one claim, with the numbers behind it."""

    claim: str
    """Claim id, ``C1`` .. ``C7``."""
    verdict: str
    """``agree`` | ``disagree`` | ``inconclusive`` | ``untested``."""
    evidence: str
    """The numbers (effect, CI, p, n seeds) and where they come from; one line."""

    def __post_init__(self) -> None:
        if self.claim not in CLAIM_IDS:
            raise ValueError(f"claim id {self.claim!r} is not one of {CLAIM_IDS}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} of {self.claim} is not one of {VERDICTS}")
        if not isinstance(self.evidence, str) or not self.evidence.strip():
            raise ValueError(f"evidence of {self.claim} must be a non-empty string, got {self.evidence!r}")
        if "\n" in self.evidence or "\r" in self.evidence:
            raise ValueError(f"evidence of {self.claim} must be one line, got {self.evidence!r}")


@dataclass(frozen=True)
class MergedClaims:
    path: Path
    """The written ``claims.csv``."""
    rows: tuple[Claim, ...]
    """Merged rows in C1..C7 order."""
    missing: tuple[str, ...]
    """Claim ids no section tested."""
    sections: tuple[str, ...]
    """Sections read, sorted."""


def _as_claim(row: Claim | Mapping[str, str] | tuple[str, str, str]) -> Claim:
    if isinstance(row, Claim):
        return row
    if isinstance(row, Mapping):
        extra = set(row) - set(COLUMNS)
        if extra:
            raise ValueError(f"claim row has unknown key(s) {sorted(extra)}; expected {COLUMNS}")
        return Claim(**row)
    if isinstance(row, tuple) and len(row) == 3:
        return Claim(*row)
    raise TypeError(f"cannot read a claim row from {row!r}")


def _order(claim_id: str) -> int:
    return CLAIM_IDS.index(claim_id)


def _to_csv(rows: Iterable[Claim]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow([r.claim, r.verdict, r.evidence])
    return buf.getvalue()


def write_claims(
    section: str,
    rows: Iterable[Claim | Mapping[str, str] | tuple[str, str, str]],
    out_dir: str | Path = "paper_figures",
) -> Path:
    """Validate ``rows`` and write ``<out_dir>/claims_<section>.csv`` atomically (sorted by claim id).

    Args:
        section: lowercase slug of the notebook section (``main_table``, ``mi_diagnostics``, ...).
        rows: :class:`Claim` objects, or dicts / 3-tuples with ``claim, verdict, evidence``.
        out_dir: target folder.

    Raises:
        ValueError: a bad section name, claim id, verdict or evidence, no rows, or a claim twice.
    """
    if not isinstance(section, str) or not _SECTION_RE.match(section):
        raise ValueError(f"section {section!r} must be a lowercase slug (a-z, 0-9, '_')")
    claims = [_as_claim(r) for r in rows]
    if not claims:
        raise ValueError(f"section {section!r} has no claim rows")
    seen: set[str] = set()
    for c in claims:
        if c.claim in seen:
            raise ValueError(
                f"claim {c.claim} appears twice in section {section!r}; give one verdict per claim"
            )
        seen.add(c.claim)
    claims.sort(key=lambda c: _order(c.claim))
    return write_text_atomic(Path(out_dir) / f"claims_{section}.csv", _to_csv(claims))


def read_claims(path: str | Path) -> list[Claim]:
    """Read and validate a claims CSV (columns exactly ``claim, verdict, evidence``)."""
    path = Path(path)
    reader = csv.reader(io.StringIO(path.read_text()))
    header = next(reader, None)
    if header is None or tuple(header) != COLUMNS:
        raise ValueError(f"{path}: columns must be exactly {list(COLUMNS)}, got {header}")
    out = []
    for lineno, fields in enumerate(reader, start=2):
        if len(fields) != 3:
            raise ValueError(f"{path}:{lineno}: expected 3 fields, got {fields}")
        try:
            out.append(Claim(*fields))
        except ValueError as e:
            raise ValueError(f"{path}:{lineno}: {e}") from None
    return out


def merged_rows(files: Iterable[str | Path]) -> tuple[list[Claim], tuple[str, ...]]:
    """The claims of several ``claims_<section>.csv`` files merged (C1..C7 order) and the sections read.

    A claim tested by several sections must get the same verdict from each; its evidence strings are joined as
    ``[sec_a] ... | [sec_b] ...`` (in the order of ``files``).

    Raises:
        ClaimsConflictError: one claim with different verdicts (names the sections and verdicts).
        ValueError: a malformed section file.
    """
    by_claim: dict[str, list[tuple[str, Claim]]] = {}
    sections = []
    for f in files:
        section = Path(f).stem.removeprefix("claims_")
        sections.append(section)
        for c in read_claims(f):
            by_claim.setdefault(c.claim, []).append((section, c))
    merged = []
    for claim_id in sorted(by_claim, key=_order):
        entries = by_claim[claim_id]
        verdicts = {c.verdict for _, c in entries}
        if len(verdicts) > 1:
            detail = ", ".join(f"{s}={c.verdict}" for s, c in entries)
            raise ClaimsConflictError(f"claim {claim_id} has conflicting verdicts: {detail}")
        evidence = " | ".join(f"[{s}] {c.evidence}" for s, c in entries)
        merged.append(Claim(claim_id, entries[0][1].verdict, evidence))
    return merged, tuple(sections)


def write_merged(path: str | Path, rows: Iterable[Claim]) -> Path:
    """Write merged claims (the section files' columns), atomically."""
    return write_text_atomic(Path(path), _to_csv(rows))


def merge_claims(out_dir: str | Path = "paper_figures", *, require_all: bool = False) -> MergedClaims:
    """Merge every ``claims_<section>.csv`` in ``out_dir`` into ``claims.csv``.

    A claim tested by several sections must get the same verdict from each; its evidence strings
    are joined as ``[sec_a] ... | [sec_b] ...`` (sections sorted). Claims no section tested are
    listed in :attr:`MergedClaims.missing` and left out of the file (no verdict is invented).

    Args:
        out_dir: the folder with the section files; ``claims.csv`` is written there.
        require_all: raise if any of C1..C7 is missing.

    Raises:
        FileNotFoundError: no section file.
        ClaimsConflictError: one claim with different verdicts (names the sections and verdicts).
        ValueError: a malformed section file, or missing claims with ``require_all``.
    """
    out_dir = Path(out_dir)
    files = sorted(out_dir.glob("claims_*.csv"))
    if not files:
        raise FileNotFoundError(f"no claims_<section>.csv under {str(out_dir)!r}")
    merged, sections = merged_rows(files)
    tested = {c.claim for c in merged}
    missing = tuple(c for c in CLAIM_IDS if c not in tested)
    if missing and require_all:
        raise ValueError(f"claims not tested by any section: {', '.join(missing)}")
    path = write_merged(out_dir / "claims.csv", merged)
    return MergedClaims(path=path, rows=tuple(merged), missing=missing, sections=sections)
