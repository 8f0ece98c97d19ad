"""The pinned math kernels: which variables the pin sets, when it steps aside, and what the machine record says."""

import os
import platform
import subprocess
import sys
import warnings

import pytest

from ragen2 import kernels


@pytest.fixture
def clean_env(monkeypatch):
    """No kernel variable and no opt-out set; an x86-64 CPU with AVX2."""
    for key in (*kernels.PINNED, kernels.OPT_OUT):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(kernels, "cpu_flags", lambda: dict.fromkeys(kernels.FLAGS, False) | {"avx2": True})
    return monkeypatch


def test_pin_sets_the_three_variables(clean_env):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch is imported in this process: the pin warns it comes late
        assert kernels.pin() == kernels.PINNED
    assert kernels.settings() == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert kernels.state() == "avx2"


def test_a_variable_set_by_hand_wins_and_the_state_says_unpinned(clean_env):
    clean_env.setenv("MKL_CBWR", "AVX2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        added = kernels.pin()
    assert "MKL_CBWR" not in added and kernels.settings()["MKL_CBWR"] == "AVX2"
    assert kernels.state() == "unpinned"


def test_native_opts_out_and_no_avx2_pins_nothing(clean_env):
    clean_env.setenv(kernels.OPT_OUT, "native")
    assert kernels.pin() == {} and kernels.settings() == dict.fromkeys(kernels.PINNED)
    assert kernels.state() == "native"
    clean_env.delenv(kernels.OPT_OUT)
    clean_env.setattr(kernels, "cpu_flags", lambda: dict.fromkeys(kernels.FLAGS, False))
    assert not kernels.can_pin() and kernels.pin() == {}
    clean_env.setattr(platform, "machine", lambda: "aarch64")
    clean_env.setattr(kernels, "cpu_flags", lambda: dict.fromkeys(kernels.FLAGS, True))
    assert not kernels.can_pin()


def test_a_bad_opt_out_value_is_named(clean_env):
    clean_env.setenv(kernels.OPT_OUT, "fast")
    with pytest.raises(ValueError, match="RAGEN2_KERNELS='fast': must be one of avx2, native"):
        kernels.pin()


def test_the_pin_set_before_torch_gives_torch_the_avx2_kernels():
    """In a fresh interpreter (the only place the pin can act) torch reports AVX2 whatever the CPU's best."""
    if not kernels.can_pin():
        pytest.skip("not an x86-64 CPU with AVX2: nothing is pinned")
    env = {k: v for k, v in os.environ.items() if k not in kernels.PINNED and k != kernels.OPT_OUT}
    code = ("from ragen2 import kernels; kernels.pin(); import torch; "
            "print(torch.backends.cpu.get_cpu_capability(), kernels.machine_record()['kernels'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["AVX2", "avx2"]


def test_mismatch_names_what_differs_in_one_line():
    pinned = {"kernel_settings": dict(kernels.PINNED), "torch_capability": "AVX2", "kernels": "avx2"}
    assert kernels.mismatch(pinned) is None
    native = {"kernel_settings": dict.fromkeys(kernels.PINNED), "torch_capability": "AVX512", "kernels": "native"}
    line = kernels.mismatch(native)
    assert "\n" not in line and "AVX512" in line and "ATEN_CPU_CAPABILITY=None" in line
    assert line.endswith("RAGEN2_KERNELS=native is set")
    with pytest.warns(RuntimeWarning, match="torch CPU capability AVX512"):
        assert kernels.check_pinned(native) == line  # conftest.py asked for the pin
    assert kernels.check_pinned(native, device="cuda") is None  # a GPU's float realization is its own


def test_a_process_that_never_asked_for_the_pin_is_not_warned(monkeypatch):
    """A practitioner's own training (the library imported, no entry point) is not compared with our results."""
    monkeypatch.setattr(kernels, "_requested", False)
    monkeypatch.delenv(kernels.OPT_OUT, raising=False)
    native = {"kernel_settings": dict.fromkeys(kernels.PINNED), "torch_capability": "AVX512", "kernels": "unpinned"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernels.check_pinned(native) is None
    monkeypatch.setenv(kernels.OPT_OUT, "native")
    with pytest.warns(RuntimeWarning):
        kernels.check_pinned(native)


def test_machine_record_names_the_cpu_its_flags_capability_settings_and_blas():
    import torch  # noqa: F401  (the record reads torch's capability and BLAS once torch is loaded)

    record = kernels.machine_record()
    assert set(record) == {"cpu_model", "cpu_flags", "torch_capability", "kernels", "kernel_settings", "blas"}
    assert record["cpu_model"] and set(record["cpu_flags"]) == set(kernels.FLAGS)
    assert record["torch_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "NO AVX", "VSX") or \
        record["torch_capability"].startswith(("SVE", "AVX"))
    assert record["blas"] != ""


def test_cpu_model_and_flags_read_proc_cpuinfo_or_fall_back(monkeypatch, tmp_path):
    real_open = open
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nvendor_id\t: X\nmodel name\t: Example CPU @ 2.0GHz\nflags\t: fpu avx2 amx_tile\n")
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(fake if path == "/proc/cpuinfo" else path,
                                                                          *a, **k))
    assert kernels.cpu_model() == "Example CPU @ 2.0GHz"
    assert kernels.cpu_flags() == {"avx2": True, "avx512f": False, "amx_tile": True, "amx_bf16": False,
                                   "amx_int8": False}
    fake.write_text("processor\t: 0\n")
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert kernels.cpu_model() == platform.machine()
    assert not any(kernels.cpu_flags().values())


def test_exact_sqrt_is_the_ieee_square_root_where_torch_sqrt_need_not_be():
    import numpy as np
    import torch

    x = torch.rand(4096, generator=torch.Generator().manual_seed(0)) * 10
    for values in (x, x.double(), x[7]):
        got = kernels.exact_sqrt(values)
        assert got.dtype == values.dtype and got.shape == values.shape
        assert np.array_equal(got.numpy(), np.sqrt(values.numpy()))  # the hardware's correctly rounded result


def test_no_vendor_dependent_square_root_on_the_training_path():
    """torch.sqrt on a CPU is MKL's vector maths (last bit by CPU vendor): the training path uses exact_sqrt."""
    import re
    from pathlib import Path

    package = Path(kernels.__file__).parent
    paths = [*package.glob("trainer/*.py"), *package.glob("model/*.py"), *package.glob("rollout/*.py"),
             package / "filter.py", package / "warmstart.py"]
    found = [f"{p.relative_to(package)}:{i}" for p in paths for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"torch\.sqrt\(|\.sqrt\(\)", line) and not line.lstrip().startswith("#")]
    assert not found, found
