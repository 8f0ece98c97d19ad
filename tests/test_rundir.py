"""What a run directory records about the machine that made it."""

import torch

from ragen2 import kernels, rundir


def test_environment_info_records_the_machine_and_threads():
    info = rundir.environment_info(torch.nn.Linear(2, 2))
    assert info["cpu_model"] == kernels.cpu_model() and info["cpu_model"]
    assert info["torch_threads"] == torch.get_num_threads() and info["device"] == "cpu"
    record = kernels.machine_record()
    assert {k: info[k] for k in record} == record
    assert info["torch_capability"] == torch.backends.cpu.get_cpu_capability()
