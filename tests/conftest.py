"""Test-wide settings: everything offline, quiet, deterministic (the pinned math kernels of
:mod:`ragen2.kernels`, set before anything imports torch)."""

import os

import pytest

from ragen2 import kernels

for _var, _val in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DVC_NO_ANALYTICS": "1",
    "DVC_STUDIO_OFFLINE": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MPLBACKEND": "Agg",
}.items():
    os.environ.setdefault(_var, _val)
kernels.pin()


@pytest.fixture
def one_torch_thread():
    """Run the test on one torch thread (runs are deterministic per thread count), then restore the count."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
