"""``python -m ragen2.bench.sqrt_vendor``: is ``torch.sqrt`` on this CPU correctly rounded, and which bits does it give?

Prints, as one JSON line, for float32 and float64 inputs of several sizes (from numpy's generator, so the same on any
torch version) how many of torch's square roots miss the IEEE result and a hash of them, and the same for the 130
standard deviations a GRPO group of 16 rewards in {-0.1, 0, 1} can have. Run it on two machines and compare: the
hashes differ where MKL's vector maths takes another path (an Intel and an AMD CPU do, under ragen2's pin too), which
is why the trainer takes its square roots with :func:`ragen2.kernels.exact_sqrt`. docs/sqrt_vendor_check.json holds
one AMD EPYC's and one Intel Xeon's output."""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any

import numpy as np

SIZES = (8, 64, 1000, 100_000)


def _record(values: np.ndarray) -> dict[str, Any]:
    import torch

    got = torch.sqrt(torch.from_numpy(values)).numpy()
    return {"mismatch_vs_ieee": int((got != np.sqrt(values)).sum()), "sha": hashlib.sha256(got.tobytes()).hexdigest()[:12]}


def grpo_group_variances() -> np.ndarray:
    """The unbiased variances a group of 16 rewards in {-0.1, 0, 1} can have (float32, sorted): those of the bit
    check's reward groups (:func:`ragen2.bitcheck.reward_groups`)."""
    from ragen2.bitcheck import GROUP_SIZE, REWARDS

    combos = itertools.combinations_with_replacement(REWARDS, GROUP_SIZE)
    return np.array(sorted({float(np.var(np.array(c, dtype=np.float32), ddof=1)) for c in combos}), dtype=np.float32)


def check() -> dict[str, Any]:
    """The report (see the module docstring)."""
    import torch

    from ragen2 import kernels

    torch.set_num_threads(1)
    out: dict[str, Any] = {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(),
                           "cpu": kernels.cpu_model()}
    rng = np.random.default_rng(0)
    for n in SIZES:
        for dtype in (np.float32, np.float64):
            out[f"{np.dtype(dtype).name}[{n}]"] = _record((rng.random(n) * 10).astype(dtype))
    variances = grpo_group_variances()
    out["grpo_group_variances"] = {"n": len(variances), **_record(variances)}
    return out


if __name__ == "__main__":
    from ragen2 import kernels

    kernels.pin()  # before torch loads
    print(json.dumps(check()))
