"""Same commit, same bits: the fixed training's weights hash equals the committed one on this machine.

Runs ``python -m ragen2.bitcheck`` in a fresh interpreter (the pin must come before torch) under the pinned kernels.
Skipped, with the reason, where the guarantee does not reach: a CPU that is not x86-64 with AVX2, or library versions
other than the locked ones the reference was made with. Anywhere else a different hash fails, naming the machine and
what differs from the reference.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from ragen2 import bitcheck, kernels


def _bitcheck(*prefix: str) -> dict:
    """``python -m ragen2.bitcheck`` in a fresh interpreter (``prefix``: e.g. an emulator), pinned by itself."""
    if not kernels.can_pin():
        pytest.skip(f"{kernels.cpu_model()} is not an x86-64 CPU with AVX2: the pinned bits do not apply here")
    import importlib.metadata as md

    versions = {"torch": md.version("torch"), "transformers": md.version("transformers")}
    if versions != bitcheck.REFERENCE["versions"]:
        pytest.skip(f"versions {versions} are not the locked {bitcheck.REFERENCE['versions']} of the reference hash")
    env = {k: v for k, v in os.environ.items() if k not in kernels.PINNED and k != kernels.OPT_OUT}
    proc = subprocess.run([*prefix, sys.executable, "-m", "ragen2.bitcheck", "--json"], capture_output=True,
                          text=True, env=env, timeout=900)
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_fixed_training_gives_the_committed_bits():
    result = _bitcheck()
    assert result["machine"]["kernels"] == "avx2" and result["machine"]["torch_capability"] == "AVX2"
    assert result["same_bits"], result["verdict"]


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["EPYC-Rome-v1", "Haswell-v4"])
def test_emulated_cpus_of_both_vendors_give_the_same_bits(cpu):
    """The same check on an emulated AMD Zen 2 and Intel Haswell (qemu-user: its own CPUID, AVX2 without AVX-512),
    whatever this machine's CPU: MKL takes vendor-specific paths, which the pin must close. About three minutes each
    (Debian's qemu-user)."""
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        pytest.skip("qemu-x86_64 is not installed (Debian: apt-get install qemu-user)")
    result = _bitcheck(qemu, "-cpu", cpu)
    assert result["machine"]["torch_capability"] == "AVX2"
    assert result["same_bits"], f"{cpu}: {result['verdict']}"


def test_the_verdict_names_what_differs():
    same = {**bitcheck.REFERENCE, "machine": {}}
    assert bitcheck.verdict(same) == (True, "same bits as the committed results")
    other = {**bitcheck.REFERENCE, "actor_sha256": "0" * 64,
             "versions": {"torch": "9.9", "transformers": "9.9"},
             "machine": {"cpu_model": "Some CPU", "torch_capability": "AVX512", "kernels": "native",
                         "kernel_settings": dict.fromkeys(kernels.PINNED)}}
    ok, line = bitcheck.verdict(other)
    assert not ok and "\n" not in line
    assert line.startswith("other bits (actor_sha256) on Some CPU (capability AVX512)")
    assert "torch CPU capability AVX512" in line and "'torch': '9.9'" in line


def test_state_hash_covers_names_dtypes_and_bytes():
    import torch

    a = {"w": torch.zeros(3), "b": torch.ones(2)}
    assert bitcheck.state_sha256(a) == bitcheck.state_sha256(dict(reversed(list(a.items()))))
    assert bitcheck.state_sha256(a) != bitcheck.state_sha256({"w": torch.zeros(3), "c": torch.ones(2)})
    assert bitcheck.state_sha256(a) != bitcheck.state_sha256({"w": torch.zeros(3, dtype=torch.float64),
                                                               "b": torch.ones(2)})
    b = {"w": torch.zeros(3), "b": torch.ones(2)}
    b["w"][1] = -0.0  # one bit
    assert bitcheck.state_sha256(a) != bitcheck.state_sha256(b)


def test_the_advantage_hash_meets_the_vendor_dependent_square_root(monkeypatch):
    """The check reaches the one step measured to round differently per CPU vendor: GRPO's advantages over every group
    of 16 FrozenLake rewards hash otherwise when their square roots come from torch.sqrt (MKL's vector maths) instead
    of :func:`ragen2.kernels.exact_sqrt`. Skipped on a CPU where torch.sqrt happens to be correctly rounded on those
    values (none measured so far: docs/sqrt_vendor_check.json)."""
    import numpy as np
    import torch

    import ragen2.trainer.advantages as advantages
    from ragen2.bench.sqrt_vendor import grpo_group_variances

    variances = grpo_group_variances()
    if np.array_equal(torch.sqrt(torch.from_numpy(variances)).numpy(), np.sqrt(variances)):
        pytest.skip("torch.sqrt is correctly rounded on every GRPO group variance on this CPU")
    assert len(bitcheck.reward_groups()[0]) == 153 * bitcheck.GROUP_SIZE
    exact = bitcheck.advantages_sha256()
    monkeypatch.setattr(advantages, "exact_sqrt", torch.sqrt)
    assert bitcheck.advantages_sha256() != exact
