"""The update-count control table and the per-board intervals of paired claims, on synthetic runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragen2.repro.claim_tests import paired_claim
from ragen2.repro.update_control import update_control_table

BOARDS = 64


def _runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """No filter, Top-k under the paper's rule and under the reference's, seeds 0-3, with per-board records; the
    reference's Top-k makes a quarter of the updates and ends 10 points lower."""
    rng = np.random.default_rng(0)
    rows, steps = [], []
    arms = (("none", "keep_rate", 4, 0.40), ("top_k", "keep_rate", 4, 0.42), ("top_k", "none", 1, 0.30))
    for cond, rule, updates, level in arms:
        for seed in range(4):
            episodes = (rng.random(BOARDS) < level).astype(float)
            rid = f"{cond}_{rule}_{seed}"
            rows.append({"run_id": rid, "env": "frozenlake", "algo": "grpo", "condition": cond, "seed": seed,
                         "filter.loss_scaling": rule, "final_success": episodes.mean(), "final_episodes": episodes})
            steps += [{"run_id": rid, "step": s, "metric": "actor/optimizer_steps", "value": updates}
                      for s in range(1, 11)]
    return pd.DataFrame(rows), pd.DataFrame(steps)


def test_the_table_sets_each_filter_under_both_rules_with_its_updates():
    runs, steps = _runs()
    table = update_control_table(runs, steps).set_index(["filter", "rule"])
    assert list(table.index) == [("no filter", "either"), ("Top-k", "paper's rule"),
                                 ("Top-k", "reference's fixed mini-batch")]
    assert table["updates_per_run"].tolist() == [40.0, 40.0, 10.0]
    assert table.loc[("no filter", "either"), "vs_no_filter"] == ""
    assert table.loc[("Top-k", "paper's rule"), "vs_other_rule"].endswith("(4 pairs)")
    assert table.loc[("Top-k", "reference's fixed mini-batch"), "vs_no_filter"].startswith("-")


def test_a_paired_claim_on_final_success_carries_the_boards_noise():
    runs, _ = _runs()
    runs = runs[runs["filter.loss_scaling"] == "keep_rate"]
    with_boards = paired_claim("C1", runs, "final_success", "top_k", "none", scale=100)
    without = paired_claim("C1", runs.drop(columns="final_episodes"), "final_success", "top_k", "none", scale=100)
    assert f"with the evaluation noise of {BOARDS} boards" in with_boards.evidence
    assert "evaluation noise" not in without.evidence

    def width(claim):
        low, high = claim.evidence.split("[")[1].split("]")[0].split(", ")
        return float(high) - float(low)

    assert width(with_boards) > width(without)
    assert pytest.approx(float(with_boards.evidence.split("diff ")[1].split()[0])) == \
        float(without.evidence.split("diff ")[1].split()[0])
