"""The math kernels' instruction set, pinned, and the machine record that says which kernels a run used.

PyTorch's own CPU kernels (ATen), MKL (BLAS and vector maths) and oneDNN each choose their code path per CPU at
run time: an AVX-512 machine sums in other orders than an AVX2 one, and MKL takes other paths on AMD CPUs than on
Intel ones, so the same seed trains other weights on each, and every number downstream moves. The pin puts ATen
and oneDNN on their AVX2 kernels and MKL on its vendor-neutral branch (``MKL_CBWR=COMPATIBLE``: MKL honours its
AVX2 branch on Intel CPUs only), which makes one seed give the same bits on any x86-64 CPU with AVX2 (nearly every
server and laptop of the last decade), Intel or AMD, with or without AVX-512. MKL's vendor-neutral branch is the
slow part: about twice the time of a CPU-profile training step (``python -m ragen2.bench.ab --kernels``). One MKL
path stays vendor-dependent under the pin: ``torch.sqrt`` on a CPU goes through MKL's vector maths, which is not
correctly rounded and whose last bit differs between Intel and AMD CPUs, already for a tensor of eight elements. So
the trainer's AdamW uses torch's fused kernel (:func:`ragen2.model.optim.adamw`) and every other square root on the
training path is :func:`exact_sqrt`.

The pin is three environment variables, read once per process when each library first runs, so :func:`pin` must
run before torch is imported: the command-line entry points (``python -m ragen2``, ``python -m ragen2.repro...``,
``python -m ragen2.bench``, ``python -m ragen2.bitcheck``) and the reproduction layer call it first thing, the
Makefile exports the same values (DVC stages and papermill kernels inherit them), and the test suite's
``conftest.py`` sets them. The library itself never pins on import: a practitioner's own training keeps its
kernels unless it calls :func:`pin`.

Opt out (speed over bits) with ``RAGEN2_KERNELS=native``; a variable set by hand wins over the pin. On a
CPU without AVX2 (or not x86-64) nothing is pinned and runs give other bits. :func:`machine_record` goes into
every ``env.json`` and ``warm_start.json``; :func:`check_pinned` warns, in one line, when a run's kernels are
not the ones the committed results were made with.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import warnings
from typing import Any

PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""The variables and values that pin ATen and oneDNN to their AVX2 kernels and MKL to its vendor-neutral branch."""
REFERENCE_CAPABILITY = "AVX2"
"""``torch.backends.cpu.get_cpu_capability()`` under the pin: what the committed results were made with."""
OPT_OUT = "RAGEN2_KERNELS"
"""``RAGEN2_KERNELS=native`` leaves every library its own choice (faster on AVX-512, other bits)."""
MODES = ("avx2", "native")
_requested = False
"""Whether this process asked for the pin (:func:`pin`), as every entry point of the package does."""
FLAGS = ("avx2", "avx512f", "amx_tile", "amx_bf16", "amx_int8")
"""The ``/proc/cpuinfo`` flags that decide which kernels the libraries would pick by themselves."""


def exact_sqrt(x):
    """The correctly rounded square root of a tensor, the same bits on every CPU (see the module docstring): on a CPU
    through numpy's IEEE square root (the hardware instruction), elsewhere ``torch.sqrt`` (CUDA's is correctly
    rounded). Not differentiable: for statistics such as a group's standard deviation."""
    import numpy as np
    import torch

    if x.device.type != "cpu":
        return torch.sqrt(x)
    return torch.from_numpy(np.asarray(np.sqrt(x.detach().numpy())))


def cpu_model() -> str:
    """The CPU's model name as the OS reports it (``/proc/cpuinfo``'s ``model name``, else ``platform``)."""
    value = _cpuinfo_field("model name")
    return value or platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> dict[str, bool]:
    """Which of :data:`FLAGS` the CPU has (all False where ``/proc/cpuinfo`` is not readable)."""
    have = set((_cpuinfo_field("flags") or "").split())
    return {flag: flag in have for flag in FLAGS}


def _cpuinfo_field(key: str) -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                name, _, value = line.partition(":")
                if name.strip() == key and value.strip():
                    return value.strip()
    except OSError:
        pass
    return None


def can_pin() -> bool:
    """True on an x86-64 CPU with AVX2, where the pin gives the reference bits."""
    return platform.machine().lower() in ("x86_64", "amd64") and cpu_flags()["avx2"]


def mode() -> str:
    """``avx2`` (the default) or ``native`` (``RAGEN2_KERNELS``); another value is an error naming it."""
    value = os.environ.get(OPT_OUT, "avx2").strip().lower() or "avx2"
    if value not in MODES:
        raise ValueError(f"{OPT_OUT}={value!r}: must be one of {', '.join(MODES)}")
    return value


def pin() -> dict[str, str]:
    """Set :data:`PINNED` in ``os.environ`` (a variable already set keeps its value) unless opted out or the CPU
    cannot take the pin; returns the variables it set. Warns when torch was imported already: the pin then
    comes too late for this process (its children still get it)."""
    global _requested
    _requested = True
    if mode() == "native" or not can_pin():
        return {}
    added = {k: v for k, v in PINNED.items() if k not in os.environ}
    os.environ.update(added)
    if added and "torch" in sys.modules:
        warnings.warn("ragen2.kernels.pin() ran after torch was imported: this process keeps its kernels",
                      RuntimeWarning, stacklevel=2)
    return added


def settings() -> dict[str, str | None]:
    """The three variables as this process sees them (None where unset)."""
    return {k: os.environ.get(k) for k in PINNED}


def torch_capability() -> str | None:
    """The instruction set torch's CPU kernels use (``AVX2``, ``AVX512``, ``DEFAULT``...); None without torch."""
    if "torch" not in sys.modules:
        return None
    import torch

    return torch.backends.cpu.get_cpu_capability()


def blas() -> str:
    """The BLAS torch was built with, e.g. ``MKL 2024.2-Product Build 20240605`` (``torch.__config__``), or
    ``unknown``."""
    if "torch" not in sys.modules:
        return "unknown"
    import torch

    config = torch.__config__.show()
    if found := re.search(r"Math Kernel Library Version (\S+(?: Build \d+)?)", config):
        return f"MKL {found.group(1)}"
    if found := re.search(r"BLAS_INFO=(\w+)", config):
        return found.group(1)
    return "unknown"


def state() -> str:
    """``avx2`` (all three variables at the pin's values), ``native`` (opted out) or ``unpinned`` (anything else:
    a CPU without AVX2, a pin that came after torch, a variable set by hand to another value)."""
    if settings() == PINNED:
        return "avx2"
    return "native" if mode() == "native" else "unpinned"


def machine_record() -> dict[str, Any]:
    """What decides a run's float realization besides its code and seed: CPU model and flags, torch's kernel
    capability, the kernels' state (:func:`state`) and variables, the BLAS."""
    return {"cpu_model": cpu_model(), "cpu_flags": cpu_flags(), "torch_capability": torch_capability(),
            "kernels": state(), "kernel_settings": settings(), "blas": blas()}


def mismatch(record: dict[str, Any]) -> str | None:
    """Why a machine record's kernels differ from the committed results' (one line), or None when they match."""
    problems = []
    if record.get("kernel_settings") != PINNED:
        set_now = ", ".join(f"{k}={v}" for k, v in (record.get("kernel_settings") or {}).items())
        problems.append(f"kernel settings {set_now} (pinned: {', '.join(f'{k}={v}' for k, v in PINNED.items())})")
    capability = record.get("torch_capability")
    if capability is not None and capability != REFERENCE_CAPABILITY:
        problems.append(f"torch CPU capability {capability} (pinned: {REFERENCE_CAPABILITY})")
    if not problems:
        return None
    return ("kernels differ from the committed results' (" + "; ".join(problems) + "): expect other bits"
            + (f"; {OPT_OUT}=native is set" if record.get("kernels") == "native" else ""))


def check_pinned(record: dict[str, Any] | None = None, *, device: str = "cpu") -> str | None:
    """Warn (``RuntimeWarning``, one line) when this process's kernels are not the pinned ones; returns the
    line. Only where the pin was asked for (an entry point called :func:`pin`, or ``RAGEN2_KERNELS`` is set: a
    practitioner's own training is not compared with the committed results) and on the CPU (a GPU's float
    realization is its own)."""
    if device != "cpu" or not (_requested or OPT_OUT in os.environ):
        return None
    line = mismatch(record if record is not None else machine_record())
    if line is not None:
        warnings.warn(f"ragen2: {line}", RuntimeWarning, stacklevel=2)
    return line
