"""``ragen2.rollout`` loads its names on first use: the trainer's tensor code and the GPU check need no envs."""

import subprocess
import sys
from pathlib import Path

import pytest

import ragen2.rollout

REPO = Path(__file__).resolve().parents[2]


def test_public_names_still_import_from_the_package():
    from ragen2.rollout import HFBackend, RolloutBatch, collect_rollouts, parse_response

    assert collect_rollouts.__module__ == "ragen2.rollout.collect" and HFBackend.__module__ == "ragen2.rollout.backends"
    assert RolloutBatch.__name__ == "RolloutBatch" and callable(parse_response)
    assert set(ragen2.rollout.__all__) <= set(dir(ragen2.rollout))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ragen2.rollout.nope  # noqa: B018


def test_trainer_and_backends_import_without_the_environments():
    code = ("import sys\n"
            "sys.modules['gymnasium'] = None  # importing it would fail\n"
            "import ragen2.trainer.update_data, ragen2.trainer.actor, ragen2.rollout.backends, ragen2.bench.gpu_check\n"
            "assert 'ragen2.envs' not in sys.modules and 'ragen2.rollout.collect' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=120)
