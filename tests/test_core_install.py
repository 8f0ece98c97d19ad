"""The practitioner's install: `pip install .` in a clean virtual environment brings the core library alone, which
runs the README's snippet and a training step. Slow (about two minutes: torch from the local wheel, the rest from the
package registry, pinned by requirements-cpu.lock); `make test-slow`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs_code import python_blocks

ROOT = Path(__file__).resolve().parents[1]
REPRODUCTION_ONLY = {"dvc", "dvclive", "jupyterlab", "papermill", "seaborn", "matplotlib", "trl", "datasets",
                     "accelerate", "ipykernel"}
TRAIN_ONE_STEP = """
from pathlib import Path
from ragen2.config import RunConfig, apply_overrides
from ragen2.trainer.loop import train
from ragen2.warmstart import initial_policy
cfg = apply_overrides(RunConfig(), ["warm_start.steps=0", "rollout.env_groups=2", "rollout.group_size=3",
    "rollout.max_turns=1", "rollout.max_new_tokens=12", "rollout.val_groups=2", "trainer.algo=grpo",
    "trainer.steps=1", "trainer.mini_batch_size=3", "trainer.micro_batch_size=3", "collapse.num_samples=4"])
print(train(cfg, Path("run"), initial_policy(cfg, Path("cache")), progress=False)["steps_completed"])
"""


def _packages(python: Path) -> set[str]:
    out = subprocess.run([python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    return {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}


@pytest.mark.slow
def test_the_core_install_runs_the_practitioner_snippet_and_trains(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    before = _packages(python)
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c",
           str(ROOT / "requirements-cpu.lock")]
    subprocess.run([*pip, "torch==2.13.0"], check=True, capture_output=True)
    subprocess.run([*pip, str(ROOT)], check=True, capture_output=True, cwd=tmp_path)
    installed = _packages(python) - before
    assert "ragen2" in installed and not installed & REPRODUCTION_ONLY, sorted(installed & REPRODUCTION_ONLY)
    stated = re.search(r"pip install \.\s+# the library .*?: (\d+) packages", (ROOT / "README.md").read_text())
    assert stated and int(stated[1]) == len(installed), (len(installed), sorted(installed))

    snippet = next(b for b in python_blocks(ROOT / "README.md") if "mi_proxies" in b.code)
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run([python, "-c", snippet.code], cwd=work, capture_output=True, text=True, check=True)
    assert out.stdout == snippet.expected
    out = subprocess.run([python, "-c", TRAIN_ONE_STEP], cwd=work, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == ["1"], out.stderr[-2000:]
    assert sorted(p.name for p in (work / "run").iterdir()) == ["checkpoints", "config.json", "env.json",
                                                               "metrics.jsonl", "summary.json"]  # no dvclive
