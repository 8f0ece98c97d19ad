"""What a run directory records about the machine that made it."""

import platform

import torch

from ragen2 import rundir


def test_environment_info_records_the_cpu_model_and_threads():
    info = rundir.environment_info(torch.nn.Linear(2, 2))
    assert info["cpu_model"] == rundir.cpu_model() and info["cpu_model"]
    assert info["torch_threads"] == torch.get_num_threads() and info["device"] == "cpu"


def test_cpu_model_reads_proc_cpuinfo_or_falls_back(monkeypatch, tmp_path):
    real_open = open
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nvendor_id\t: X\nmodel name\t: Example CPU @ 2.0GHz\nflags\t: avx\n")
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(fake if path == "/proc/cpuinfo" else path,
                                                                          *a, **k))
    assert rundir.cpu_model() == "Example CPU @ 2.0GHz"
    fake.write_text("processor\t: 0\n")
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert rundir.cpu_model() == platform.machine()
