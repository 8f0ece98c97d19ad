"""Per-step metric logging of a run: ``metrics.jsonl`` (always; what :mod:`ragen2.rundir` reads) and the loggers
``trainer.report_to`` names: dvclive (``run_dir/dvclive``), TensorBoard (``run_dir/tensorboard``), Weights & Biases
in offline mode (``run_dir/wandb``). Each logger's package is imported only when it is asked for.

On resume from a checkpoint at step ``S`` the records are cut back to steps ``<= S`` first, so the steps replayed
after a crash are not duplicated: ``metrics.jsonl`` is rewritten from the history stored in the checkpoint,
dvclive's per-metric ``.tsv`` files lose their rows with step > S, and TensorBoard's writer purges the events after
S. A wandb offline run cannot be cut: the replayed steps are logged again under the same run id.

dvclive is always opened with ``dvcyaml=None`` (it would otherwise rewrite the project's ``dvc.yaml``),
``save_dvc_exp=False`` and ``report=None``. Without a DVC Studio configuration a step ends with dvclive's summary and
its VS Code step signal only: ``Live.next_step()`` would also re-read the logged params and every metric history to
build a Studio update that is then dropped (30 ms a step of a CPU-profile run, 3 % of it).
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
from pathlib import Path
from typing import Any

from ragen2.config import REPORT_TO
from ragen2.errors import ConfigError
from ragen2.fileio import write_bytes_atomic

PACKAGES = {"dvclive": ("dvclive", "repro"), "tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb")}
"""Each logger's package and the ``ragen2`` extra that installs it."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def resolve_report_to(report_to: str) -> list[str]:
    """The loggers of a ``trainer.report_to`` value: ``auto`` is dvclive when it is installed, ``none`` nothing.
    A named logger whose package is missing is a ConfigError naming the extra that installs it (checked before any
    training starts)."""
    if report_to == "none":
        return []
    if report_to == "auto":
        return ["dvclive"] if importlib.util.find_spec("dvclive") is not None else []
    names = [name for name in REPORT_TO if name in report_to.split(",")]
    for name in names:
        package, extra = PACKAGES[name]
        if importlib.util.find_spec(package) is None:
            raise ConfigError(f"trainer.report_to={report_to!r}: {package} is not installed "
                              f"(pip install 'ragen2[{extra}]')")
    return names


class RunLogger:
    """Writes one row per logged step to ``metrics.jsonl`` and to the loggers of ``report_to``.

    Args:
        run_dir: the run directory.
        history: rows already logged (from a checkpoint); ``None`` starts fresh and clears old records.
        params: logged once to each logger (the run's config).
        report_to: ``trainer.report_to`` (:func:`resolve_report_to`).
    """

    def __init__(self, run_dir: Path, history: list[dict[str, Any]] | None = None,
                 params: dict[str, Any] | None = None, report_to: str = "auto"):
        self.run_dir = Path(run_dir)
        self.jsonl = self.run_dir / "metrics.jsonl"
        self.history: list[dict[str, Any]] = list(history or [])
        rows = "".join(json.dumps({k: _jsonable(v) for k, v in r.items()}) + "\n" for r in self.history)
        write_bytes_atomic(self.jsonl, rows.encode())
        last = max((int(r["step"]) for r in self.history), default=-1) if history is not None else None
        self.loggers = [LOGGERS[name](self.run_dir, last, params) for name in resolve_report_to(report_to)]

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` for ``step`` (the loggers get the numeric values)."""
        row = {"step": int(step), **metrics}
        self.history.append(row)
        with open(self.jsonl, "a") as fh:
            fh.write(json.dumps({k: _jsonable(v) for k, v in row.items()}) + "\n")
        numbers = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        for logger in self.loggers:
            logger.log(int(step), numbers)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


class DvcliveLogger:
    """dvclive in ``run_dir/dvclive``; ``last_step`` (a resume) cuts its histories back to that step."""

    def __init__(self, run_dir: Path, last_step: int | None, params: dict[str, Any] | None):
        from dvclive import Live
        from dvclive.studio import get_dvc_studio_config

        live_dir = run_dir / "dvclive"
        resume = last_step is not None and live_dir.exists()
        if resume:
            _truncate_dvclive(live_dir, last_step)
        self.live = Live(dir=str(live_dir), dvcyaml=None, save_dvc_exp=False, report=None, resume=resume)
        self.studio = bool(get_dvc_studio_config(self.live))
        """Whether dvclive posts live updates to DVC Studio (a configured token and repository)."""
        if params is not None:
            self.live.log_params(params)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.live.step = step
        for name, value in metrics.items():
            self.live.log_metric(name, value)
        if self.studio:
            self.live.next_step()
        else:  # what next_step() leaves on disk without Studio (dvcyaml and report are off)
            from dvclive.vscode import mark_dvclive_step_completed

            self.live.make_summary()
            mark_dvclive_step_completed(step)

    def close(self) -> None:
        self.live.end()


class TensorboardLogger:
    """TensorBoard event files in ``run_dir/tensorboard`` (``tensorboard --logdir data/runs``); the config as text."""

    def __init__(self, run_dir: Path, last_step: int | None, params: dict[str, Any] | None):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"),
                                    purge_step=None if last_step is None else last_step + 1)
        if params is not None and last_step is None:
            self.writer.add_text("config", "```\n" + json.dumps(params, indent=2) + "\n```", 0)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """A Weights & Biases run in offline mode under ``run_dir/wandb`` (no network; ``wandb sync`` uploads it), its id
    the run directory's name, so a resumed run continues the same record."""

    def __init__(self, run_dir: Path, last_step: int | None, params: dict[str, Any] | None):
        import wandb

        self.run = wandb.init(mode="offline", dir=str(run_dir), id=run_dir.name, name=run_dir.name,
                              config=params or {}, resume="allow")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


LOGGERS = {"dvclive": DvcliveLogger, "tensorboard": TensorboardLogger, "wandb": WandbLogger}


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
