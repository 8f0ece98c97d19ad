"""What a run directory records about the machine that made it."""

import numpy as np
import torch

from ragen2 import kernels, rundir


def test_environment_info_records_the_machine_and_threads():
    info = rundir.environment_info(torch.nn.Linear(2, 2))
    assert info["cpu_model"] == kernels.cpu_model() and info["cpu_model"]
    assert info["torch_threads"] == torch.get_num_threads() and info["device"] == "cpu"
    record = kernels.machine_record()
    assert {k: info[k] for k in record} == record
    assert info["torch_capability"] == torch.backends.cpu.get_cpu_capability()


def test_validation_episodes_round_trip_and_a_resumed_run_rewrites_what_it_validates_again(tmp_path):
    rundir.write_val_episodes(tmp_path, 0, [1.0, 0.0, 1.0], first_seed=100)
    rundir.write_val_episodes(tmp_path, 25, np.array([0.0, 0.0, 1.0]), first_seed=100)
    rundir.write_val_episodes(tmp_path, 50, [1.0, 1.0, 1.0], first_seed=100)
    got = rundir.read_val_episodes(tmp_path)
    assert sorted(got) == [0, 25, 50] and got[25].tolist() == [0.0, 0.0, 1.0]
    rundir.cut_val_episodes(tmp_path, 25)  # resumed from the step-25 checkpoint
    assert sorted(rundir.read_val_episodes(tmp_path)) == [0, 25]
    rundir.write_val_episodes(tmp_path, 25, [1.0, 1.0, 0.0], first_seed=100)  # validated again: replaced
    got = rundir.read_val_episodes(tmp_path)
    assert sorted(got) == [0, 25] and got[25].tolist() == [1.0, 1.0, 0.0]
    assert rundir.read_val_episodes(tmp_path / "none") == {}
