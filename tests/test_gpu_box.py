"""The paper profile's route on a GPU box without network: only torch, transformers, numpy and the package's core
dependencies installed (no vLLM, TRL, DVC, dvclive, datasets or bm25s), weights from a local directory.

Run here on a CPU with those packages made unimportable; the same route ran on an H200 (docs/paper_profile.md,
"Offline on a GPU box")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ragen2.config import RunConfig, apply_overrides
from ragen2.warmstart import initial_policy
from tests.trainer._tiny import TINY_RUN

ROOT = Path(__file__).resolve().parents[1]
ABSENT_ON_GPU_BOX = ("vllm", "trl", "dvc", "dvclive", "datasets", "bm25s", "papermill", "seaborn", "matplotlib",
                     "tensorboard", "wandb", "ipykernel", "jupyterlab", "deepspeed")
"""What a bare GPU image (PyTorch, transformers and their usual companions) lacks of ragen2's dependencies; of the
core ones it lacks gymnasium too, which the environments need (docs/paper_profile.md names the wheels)."""


def test_paper_profile_run_trains_offline_from_a_local_directory_without_the_optional_packages(tmp_path):
    policy_dir = initial_policy(apply_overrides(RunConfig(), ["warm_start.steps=0"]), tmp_path / "cache")
    params = tmp_path / "params.yaml"
    assert subprocess.run([sys.executable, "-m", "ragen2", "profile", "paper", "--write", str(params)],
                          cwd=ROOT, capture_output=True, text=True).returncode == 0
    sets = [*TINY_RUN, "trainer.steps=1", f"policy.name_or_path={policy_dir}", "policy.device=cpu"]
    code = ("import runpy, sys\n"
            f"for name in {ABSENT_ON_GPU_BOX!r}:\n"
            "    sys.modules[name] = None  # import fails, find_spec says absent\n"
            "sys.argv = ['ragen2', 'train', 'frozenlake__ppo__none__main__s0', '--params', sys.argv[1],\n"
            "            '--run-dir', sys.argv[2], '--cache-dir', sys.argv[3], '--threads', '1',\n"
            "            *[a for s in sys.argv[4:] for a in ('--set', s)]]\n"
            "runpy.run_module('ragen2', run_name='__main__')\n")
    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-c", code, str(params), str(run_dir), str(tmp_path / "cache"), *sets],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "vLLM is not installed: generating with the HF backend" in out.stderr
    config = json.loads((run_dir / "config.json").read_text())
    # the paper profile's own settings, not the tiny run's, where the route differs from the CPU profile's
    assert config["rollout"]["backend"] == "vllm" and config["policy"]["name_or_path"] == str(policy_dir)
    assert (config["trainer"]["algo"], config["trainer"]["precision"], config["trainer"]["gradient_checkpointing"]) \
        == ("ppo", "bf16", True)
    assert json.loads((run_dir / "summary.json").read_text())["steps_completed"] == 1
