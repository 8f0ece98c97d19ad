"""The square-root rounding check: its inputs are fixed, its report names the CPU and counts misses per input."""

import numpy as np

from ragen2.bench.sqrt_vendor import SIZES, check, grpo_group_variances


def test_grpo_group_variances_are_the_130_a_group_of_16_can_have():
    v = grpo_group_variances()
    assert len(v) == 130 and v.dtype == np.float32 and v[0] == 0.0 and np.all(np.diff(v) > 0)


def test_report_counts_misses_against_the_ieee_square_root():
    report = check()
    assert report["cpu"] and report["grpo_group_variances"]["n"] == 130
    for n in SIZES:
        for name in ("float32", "float64"):
            entry = report[f"{name}[{n}]"]
            assert 0 <= entry["mismatch_vs_ieee"] <= n and len(entry["sha"]) == 12
