"""The four-regime helpers of notebook 01 (ragen2.repro.regimes)."""

from __future__ import annotations

import math

import pytest

from ragen2.repro import regimes


def test_toy_helpers():
    point = regimes.toy_point(1.0, 4, 4, num_inputs=8)
    assert point["mi"] == pytest.approx(math.log(8)) and point["cond_entropy"] == pytest.approx(math.log(4))
    est = regimes.toy_estimates(rows_per_column=32, seed=0).set_index("regime")
    assert est.loc["template_collapse", "estimated_mi"] == pytest.approx(0.0, abs=1e-9)
    assert est.loc["diverse_reasoning", "estimated_mi"] == pytest.approx(math.log(8), abs=1e-6)
    image = regimes.show_toy_policy(0.5, 4, 4)
    assert image.data[:4] == b"\x89PNG"
