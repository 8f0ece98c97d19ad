"""Run ids: ``<env>__<algo>__<filter>__<study><value>__s<seed>``, built and parsed in one place.

A run id names a run's directory and its DVC stage (``train@<run id>``), and the analysis reads a run's
study, filter and seed back from it, so the grammar is written once, here.

- ``<env>``, ``<algo>``: registry env name and ``trainer.algo`` (``frozenlake``, ``dr_grpo``).
- ``<filter>``: ``none``, or the strategy without underscores and its value (``topp0p9``, ``topk0p25``).
- ``<study><value>``: the study the run belongs to (:data:`ragen2.repro.study_catalog.CATALOG`), with the value it
  sweeps when it has one (``slip0p05``, ``ent0``, ``mech0p02``; ``main`` and ``toppsweep`` carry none).
- ``<seed>``: the run's seed.

Numbers are written without dots or signs (``0.02`` -> ``0p02``, ``1.0`` -> ``1``): DVC splits parameter
paths such as ``runs.<run id>`` on dots.
"""

from __future__ import annotations

import math
import re
from typing import Any

RUN_ID_RE = re.compile(r"^(?P<env>[^_]+(?:_[^_]+)*)__(?P<algo>[a-z_]+)__(?P<filter>[a-z0-9p]+)__"
                       r"(?P<study>[a-z]+)(?P<value>[0-9p]*)__s(?P<seed>\d+)$")
"""The shape of a run id; :func:`parse_run_id` reads its parts."""


def fmt_value(value: float) -> str:
    """A number without dots or signs for run ids: ``0.02`` -> ``0p02``, ``1.0`` -> ``1``."""
    if value < 0 or not math.isfinite(value):
        raise ValueError(f"run-id values must be finite and >= 0, got {value!r}")
    text = f"{value:g}"
    if "e" in text:
        raise ValueError(f"value {value!r} is too small or large for a run id")
    return text.replace(".", "p")


def filter_tag(strategy: str, value: float) -> str:
    """``none``, ``topp0p9``, ``topk0p25``, ..."""
    if strategy == "none":
        return "none"
    return f"{strategy.replace('_', '')}{fmt_value(value)}"


def run_id(env: str, algo: str, filt: str, study: str, seed: int) -> str:
    """``<env>__<algo>__<filter>__<study>__s<seed>``; every part a plain slug."""
    parts = (env, algo, filt, study)
    for part in parts:
        if not part or "__" in part or "." in part or "/" in part:
            raise ValueError(f"run-id part {part!r} must be non-empty without '__', '.' or '/'")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed!r}")
    return "__".join([*parts, f"s{seed}"])


def parse_run_id(run_id: str) -> dict[str, Any]:
    """The parts of ``<env>__<algo>__<filter>__<study><value>__s<seed>``.

    Returns:
        ``env, algo, filter_tag, study, study_value (float or NaN), seed``.

    Raises:
        ValueError: the id does not have that shape.
    """
    m = RUN_ID_RE.match(run_id)
    if m is None:
        raise ValueError(f"run id {run_id!r} is not of the form <env>__<algo>__<filter>__<study>__s<seed>")
    value = m["value"]
    return {"env": m["env"], "algo": m["algo"], "filter_tag": m["filter"], "study": m["study"],
            "study_value": float(value.replace("p", ".")) if value else math.nan, "seed": int(m["seed"])}
