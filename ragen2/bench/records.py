"""The bench on record: each ``make bench`` run kept as a dated JSON file, docs/performance.md's tables made from them.

A record is the bench's report (:func:`ragen2.bench.cases.run_benchmarks`: every figure, its details and target, the
machine with its CPU model and kernel settings, the sizes) with what tells runs apart: the UTC time it ended, the
commit (and whether the tree had changes), the mode (``quick`` or ``full``; their sizes differ, so their figures are
never compared), the torch threads and the load average before and after. Records live in a committed folder
(:data:`RECORDS_DIR`), one file per run, named by date, CPU and mode.

``python -m ragen2.bench.records --write docs/performance.md`` rewrites the block between :data:`BEGIN` and
:data:`END` there: one table of full runs and one of quick runs, a row per record, a column per figure (its median
and range, and whether it met its target). A test fails when the committed block differs from what the committed
records give.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ragen2.bench.targets import BENCHMARKS, TARGETS

RECORDS_DIR = Path("data/bench")
"""Where ``make bench`` keeps its records (git-tracked)."""
BEGIN = "<!-- bench records: begin (python -m ragen2.bench.records --write docs/performance.md) -->"
END = "<!-- bench records: end -->"
MODES = ("full", "quick")


def git_commit(root: Path | None = None) -> tuple[str | None, bool | None]:
    """The checkout's commit (12 hex digits) and whether its tracked files have changes; None, None outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit, dirty


def make_record(report: dict[str, Any], *, mode: str, threads: int, ended: datetime | None = None,
                commit: tuple[str | None, bool | None] | None = None) -> dict[str, Any]:
    """The record of one bench run: ``report`` with its end time, commit, mode and threads beside it."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {MODES}")
    ended = ended or datetime.now(timezone.utc)
    sha, dirty = commit if commit is not None else git_commit()
    machine = report.get("machine", {})
    return {"ended_utc": ended.strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": sha, "dirty": dirty, "mode": mode,
            "threads": threads, "cpu_model": machine.get("cpu_model"), "kernels": machine.get("kernels"),
            "load_average_before": machine.get("load_average_before"),
            "load_average_after": _load_after(report), "report": report}


def _load_after(report: dict[str, Any]) -> list[float] | None:
    """The load average after the last figure that finished (its details hold it)."""
    for name in reversed(BENCHMARKS):
        after = (report.get("details", {}).get(name) or {}).get("load_average_after")
        if after is not None:
            return after
    return None


def record_name(record: dict[str, Any]) -> str:
    """``<date>T<time>_<cpu>_<mode>.json``: sorted by time, the CPU in a few words."""
    cpu = re.sub(r"[^a-z0-9]+", "-", (record.get("cpu_model") or "unknown-cpu").lower()).strip("-")[:40]
    stamp = record["ended_utc"].replace(":", "").replace("-", "")
    return f"{stamp}_{cpu}_{record['mode']}.json"


def write_record(record: dict[str, Any], folder: Path = RECORDS_DIR) -> Path:
    from ragen2.fileio import json_ready, write_json_atomic

    path = Path(folder) / record_name(record)
    write_json_atomic(path, json_ready(record))
    return path


def load_records(folder: Path = RECORDS_DIR) -> list[dict[str, Any]]:
    """Every record in ``folder``, oldest first."""
    paths = sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []
    return [json.loads(p.read_text()) for p in paths]


def _cell(report: dict[str, Any], name: str) -> str:
    if name not in report:
        return ""
    value = report[name]
    if value is None:
        return "failed"
    details, target = report["details"][name], report["targets"][name]
    met = "met" if target["met"] else "**missed**"
    return f"{value:.3g} ({details['min']:.3g}-{details['max']:.3g}), {met}"


def _load(value: Sequence[float] | None) -> str:
    return f"{value[0]:.1f}" if value else "?"


def tables(records: Sequence[dict[str, Any]]) -> str:
    """The Markdown block: per mode (full, then quick), a table of the runs (a number each, when, which commit, CPU,
    kernels, threads and load) and a table with a row per figure, its target, and a column per run."""
    out = []
    for mode in MODES:
        rows = [r for r in records if r["mode"] == mode]
        if not rows:
            out.append(f"No {mode} bench run is recorded yet.")
            continue
        runs = ["| run | ended (UTC) | commit | CPU | kernels | threads | load before / after |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for i, r in enumerate(rows, 1):
            commit = f"{r['commit']}{' (changed)' if r.get('dirty') else ''}" if r.get("commit") else "?"
            runs.append(f"| {mode} {i} | {r['ended_utc'].replace('T', ' ').rstrip('Z')} | {commit} | "
                        f"{r.get('cpu_model') or '?'} | {r.get('kernels') or '?'} | {r['threads']} | "
                        f"{_load(r.get('load_average_before'))} / {_load(r.get('load_average_after'))} |")
        names = [n for n in BENCHMARKS if any(n in r["report"] for r in rows)]
        figures = ["| figure | target | " + " | ".join(f"{mode} {i}" for i in range(1, len(rows) + 1)) + " |",
                   "| --- | --- | " + " | ".join("---" for _ in rows) + " |"]
        for n in names:
            op, value = TARGETS[n]
            figures.append(f"| `{n}` | {op} {value:g} | " + " | ".join(_cell(r["report"], n) for r in rows) + " |")
        out.append(f"**{mode.capitalize()} runs** (each cell: the median over repetitions, its range, and whether it "
                   f"met the target):\n\n" + "\n".join(runs) + "\n\n" + "\n".join(figures))
    return "\n\n".join(out)


def with_tables(text: str, records: Sequence[dict[str, Any]]) -> str:
    """``text`` (docs/performance.md) with the block between :data:`BEGIN` and :data:`END` made from ``records``."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"the document has no bench-records block ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{tables(records)}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragen2.bench.records", description=__doc__.split("\n")[0])
    p.add_argument("--records", type=Path, default=RECORDS_DIR, help=f"the records' folder (default: {RECORDS_DIR})")
    p.add_argument("--write", type=Path, default=None, metavar="DOC", help="rewrite DOC's bench-records block")
    args = p.parse_args(argv)
    records = load_records(args.records)
    if args.write is None:
        print(tables(records))
        return 0
    if not args.write.is_file():
        p.error(f"--write {args.write}: no such file")
    from ragen2.fileio import write_text_atomic

    try:
        text = with_tables(args.write.read_text(), records)
    except ValueError as e:
        p.error(f"--write {args.write}: {e}")
    write_text_atomic(args.write, text)
    print(f"wrote {len(records)} record(s) into {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
