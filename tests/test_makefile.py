"""`make repro` runs the pipeline stage by stage (no final whole-pipeline `dvc repro`), so its recipe must name
every stage of dvc.yaml: a stage added to dvc.yaml and forgotten here would never run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
VENV = ".venv"

# The foreach groups `make repro` runs through ragen2's own commands rather than by stage name.
BY_COMMAND = {"build-warm-starts": {"warmstart", "warmstart_realization"},
              "train-runs": {"train", "train_realization"}}


def _recipe() -> list[list[str]]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "--no-print-directory", "repro"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [line.split() for line in out.splitlines() if line.startswith(("dvc ", f"{VENV}/bin/python "))]


def test_make_repro_names_every_stage_of_the_pipeline():
    stages = set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    covered: set[str] = set()
    for words in _recipe():
        if words[:2] == ["dvc", "repro"]:
            covered |= {w for w in words[2:] if not w.startswith("-")}
        if "run-stages" in words:
            covered |= {w for w in words[words.index("run-stages") + 1:] if not w.startswith("-") and not w.isdigit()}
    text = (ROOT / "Makefile").read_text().split("\nrepro: setup", 1)[1].split("\n\n", 1)[0]
    for command, groups in BY_COMMAND.items():
        assert command in text
        covered |= groups
    assert stages - covered == set()
    assert covered - stages == set()
    assert any(s.startswith("nb_") for s in covered)  # the notebook stages come from dvc.yaml itself


def test_the_notebook_stages_run_after_their_inputs_and_before_the_claims():
    lines = [" ".join(words) for words in _recipe()]
    inputs = next(i for i, line in enumerate(lines) if line.startswith("dvc repro -s") and "inputs" in line)
    notebooks = next(i for i, line in enumerate(lines) if "run-stages" in line)
    claims = next(i for i, line in enumerate(lines) if line.startswith("dvc repro -s") and "claims" in line)
    assert inputs < notebooks < claims


def test_make_exports_the_pinned_kernels_and_native_opts_out():
    """The Makefile's exports are ragen2.kernels.PINNED (on an x86-64 CPU with AVX2); RAGEN2_KERNELS=native drops
    them, so every stage and notebook kernel under make runs on the kernels the committed results were made with."""
    from ragen2 import kernels

    if shutil.which("make") is None:
        pytest.skip("make is not installed")

    def exported(*extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in kernels.PINNED and k != kernels.OPT_OUT}
        out = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "show", *extra],
                             input="show:\n\t@env\n", cwd=ROOT, capture_output=True, text=True, check=True,
                             env=env).stdout
        pairs = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        return {k: pairs[k] for k in (*kernels.PINNED, kernels.OPT_OUT) if k in pairs}

    if kernels.can_pin():
        assert exported() == {**kernels.PINNED, kernels.OPT_OUT: "avx2"}
    else:
        assert exported() == {kernels.OPT_OUT: "avx2"}
    assert exported("RAGEN2_KERNELS=native") == {kernels.OPT_OUT: "native"}
