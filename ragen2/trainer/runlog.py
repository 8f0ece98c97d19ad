"""Per-step metric logging of a run: ``metrics.jsonl`` (ours) and dvclive (``run_dir/dvclive``).

On resume from a checkpoint at step ``S`` both records are cut back to steps ``<= S`` first, so the
steps replayed after a crash are not duplicated: ``metrics.jsonl`` is rewritten from the history
stored in the checkpoint, and dvclive's per-metric ``.tsv`` files lose their rows with step > S.
dvclive is always opened with ``dvcyaml=None`` (it would otherwise rewrite the project's
``dvc.yaml``), ``save_dvc_exp=False`` and ``report=None``. Without a DVC Studio configuration a step
ends with dvclive's summary and its VS Code step signal only: ``Live.next_step()`` would also re-read
the logged params and every metric history to build a Studio update that is then dropped (30 ms a
step of a CPU-profile run, 3 % of it).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from ragen2.fileio import write_bytes_atomic


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class RunLogger:
    """Writes one row per logged step to ``metrics.jsonl`` and to dvclive.

    Args:
        run_dir: the run directory.
        history: rows already logged (from a checkpoint); ``None`` starts fresh and clears old records.
        params: logged once to dvclive's ``params.yaml``.
    """

    def __init__(self, run_dir: Path, history: list[dict[str, Any]] | None = None,
                 params: dict[str, Any] | None = None):
        from dvclive import Live
        from dvclive.studio import get_dvc_studio_config

        self.run_dir = Path(run_dir)
        self.jsonl = self.run_dir / "metrics.jsonl"
        self.history: list[dict[str, Any]] = list(history or [])
        rows = "".join(json.dumps({k: _jsonable(v) for k, v in r.items()}) + "\n" for r in self.history)
        write_bytes_atomic(self.jsonl, rows.encode())
        live_dir = self.run_dir / "dvclive"
        resume = history is not None and live_dir.exists()
        if resume:
            last = max((int(r["step"]) for r in self.history), default=-1)
            _truncate_dvclive(live_dir, last)
        self.live = Live(dir=str(live_dir), dvcyaml=None, save_dvc_exp=False, report=None, resume=resume)
        self.studio = bool(get_dvc_studio_config(self.live))
        """Whether dvclive posts live updates to DVC Studio (a configured token and repository)."""
        if params is not None:
            self.live.log_params(params)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` for ``step`` (non-numeric values are skipped by dvclive)."""
        row = {"step": int(step), **metrics}
        self.history.append(row)
        with open(self.jsonl, "a") as fh:
            fh.write(json.dumps({k: _jsonable(v) for k, v in row.items()}) + "\n")
        self.live.step = int(step)
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.live.log_metric(name, float(value))
        if self.studio:
            self.live.next_step()
        else:  # what next_step() leaves on disk without Studio (dvcyaml and report are off)
            from dvclive.vscode import mark_dvclive_step_completed

            self.live.make_summary()
            mark_dvclive_step_completed(int(step))

    def close(self) -> None:
        self.live.end()


def _truncate_dvclive(live_dir: Path, last_step: int) -> None:
    """Drop the rows with ``step > last_step`` from every dvclive metric history file."""
    for tsv in (live_dir / "plots" / "metrics").rglob("*.tsv"):
        text = tsv.read_text()
        reader = csv.DictReader(io.StringIO(text), delimiter="\t")
        if reader.fieldnames is None or "step" not in reader.fieldnames:
            continue
        kept = [row for row in reader if int(float(row["step"])) <= last_step]
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=reader.fieldnames, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
        write_bytes_atomic(tsv, out.getvalue().encode())


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of ``run_dir/metrics.jsonl`` (a torn last line, from a run killed mid-write, is skipped)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    lines = [line for line in path.read_text().split("\n") if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise
    return rows
