"""Interleaved timing of a candidate against a baseline, and the machine it ran on.

Every figure of :mod:`ragen2.bench` is a ratio of two measurements taken in the same process,
alternating which one runs first in each repetition so that load from other processes hits both
alike. A repetition yields one :class:`Sample` per side; the ratio is formed per repetition and
summarised by its median, min and max.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragen2.kernels import machine_record


@dataclass(frozen=True)
class Sample:
    """One timed run: wall seconds and the work done (tokens, rows...; 1.0 when not counted)."""

    seconds: float
    work: float = 1.0


def timed(fn: Callable[[], float | None]) -> Sample:
    """Run ``fn`` and time it; a float it returns is the work done (default 1.0)."""
    start = time.perf_counter()
    work = fn()
    return Sample(time.perf_counter() - start, 1.0 if work is None else float(work))


RATIOS: dict[str, Callable[[Sample, Sample], float]] = {
    "speedup": lambda base, cand: base.seconds / cand.seconds,
    "throughput": lambda base, cand: (cand.work / cand.seconds) / (base.work / base.seconds),
    "time_fraction": lambda base, cand: cand.seconds / base.seconds,
}
"""How a repetition's ratio is formed from ``(baseline, candidate)`` samples."""


@dataclass
class Comparison:
    """The repetitions of one candidate/baseline pair and their per-repetition ratios."""

    kind: str
    """A key of :data:`RATIOS`."""
    baseline: list[Sample] = field(default_factory=list)
    candidate: list[Sample] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else worth reporting (sizes, phase times, token counts)."""

    def add(self, baseline: Sample, candidate: Sample) -> None:
        self.baseline.append(baseline)
        self.candidate.append(candidate)

    @property
    def ratios(self) -> list[float]:
        ratio = RATIOS[self.kind]
        return [ratio(b, c) for b, c in zip(self.baseline, self.candidate)]

    def summary(self) -> dict[str, Any]:
        """``median``/``min``/``max`` of the ratios, median ``baseline_s``/``candidate_s``, the runs."""
        if not self.baseline:
            raise ValueError("no repetitions were recorded")
        ratios = self.ratios
        out: dict[str, Any] = {
            "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "baseline_s": statistics.median(s.seconds for s in self.baseline),
            "candidate_s": statistics.median(s.seconds for s in self.candidate),
            "reps": len(ratios), "ratio_kind": self.kind,
            "ratios": ratios,
            "baseline_runs_s": [s.seconds for s in self.baseline],
            "candidate_runs_s": [s.seconds for s in self.candidate],
        }
        if self.kind == "throughput":
            out["baseline_work"] = [s.work for s in self.baseline]
            out["candidate_work"] = [s.work for s in self.candidate]
        out.update(self.extra)
        return out


def interleave(kind: str, baseline: Callable[[], Sample], candidate: Callable[[], Sample], *, reps: int,
               warmup: int = 1) -> Comparison:
    """Run ``warmup`` untimed pairs, then ``reps`` pairs, baseline first on even repetitions.

    Args:
        kind: how each repetition's ratio is formed (a key of :data:`RATIOS`).
        baseline: one baseline run, returning its :class:`Sample`.
        candidate: one candidate run, returning its :class:`Sample`.
        reps: timed repetitions (>= 1).
        warmup: untimed repetitions run first (>= 0).
    """
    if kind not in RATIOS:
        raise ValueError(f"unknown ratio kind {kind!r}; known: {sorted(RATIOS)}")
    if reps < 1 or warmup < 0:
        raise ValueError(f"reps must be >= 1 and warmup >= 0, got reps={reps!r}, warmup={warmup!r}")
    for _ in range(warmup):
        baseline()
        candidate()
    comparison = Comparison(kind)
    for rep in range(reps):
        if rep % 2 == 0:
            base = baseline()
            cand = candidate()
        else:
            cand = candidate()
            base = baseline()
        comparison.add(base, cand)
    return comparison


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine_info() -> dict[str, Any]:
    """The machine record (:func:`ragen2.kernels.machine_record`), cores, torch threads, load average and package
    versions."""
    import importlib.metadata as md

    import torch

    versions = {"python": sys.version.split()[0]}
    for pkg in ("ragen2", "torch", "transformers", "trl", "tokenizers", "accelerate", "numpy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {
        **machine_record(), "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
        "cuda": torch.cuda.is_available(), "platform": platform.platform(),
        "load_average": load_average(), "versions": versions,
    }
