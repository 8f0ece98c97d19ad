"""Verdicts pooled over two realizations: the same claim tests on both warm starts' units, pairs kept apart."""

from __future__ import annotations

import pandas as pd
import pytest

from ragen2.repro import pooled, verdicts
from ragen2.repro.claims import Claim
from ragen2.repro.run_ids import run_id
from tests.repro.test_runs import make_run


def _main_study(root, base, gain, seeds=range(4), algos=("ppo", "grpo")):
    for algo in algos:
        for seed in seeds:
            for strategy, value, tag in (("none", 1.0, "none"), ("top_p", 0.9, "topp0p9")):
                success = base + 0.01 * seed + (gain + 0.002 * seed if tag != "none" else 0.0)
                make_run(root, run_id("frozenlake", algo, tag, "main", seed), algo=algo, strategy=strategy,
                         value=value, seed=seed, success=[0.3, success])


def test_relabel_moves_seeds_and_run_ids_apart():
    frame = pd.DataFrame({"run_id": ["frozenlake__ppo__none__main__s3", "warm start"], "seed": [3, 0]})
    out = pooled.relabel(frame)
    assert out["seed"].tolist() == [1003, 1000]
    assert out["run_id"].tolist() == ["frozenlake__ppo__none__main__s1003", f"warm start (+{pooled.SEED_OFFSET})"]
    assert frame["seed"].tolist() == [3, 0]  # the input is left alone


def test_c1_pooled_pairs_runs_within_each_warm_start_and_doubles_the_pairs(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    _main_study(first, base=0.5, gain=0.03)
    _main_study(second, base=0.7, gain=0.05)  # another level: pairs across warm starts would be off by 0.2
    out = pooled.pooled_verdicts((first, second), (tmp_path, tmp_path), claims=("C1",))
    power = out["C1"].power["success"]
    assert power.n == 16
    assert power.mean == pytest.approx((0.03 + 0.05) / 2 + 0.002 * 1.5)
    assert out["C1"].claim.verdict == "agree"
    alone = verdicts.c1_filter_gain(pooled.load_study(first, "main")[0]).power["success"]
    assert alone.n == 8 and alone.mean == pytest.approx(0.03 + 0.002 * 1.5)
    assert pooled.pooled_claims(out) == [out["C1"].claim]


def test_c3_pools_each_realizations_quartile_tables(tmp_path):
    def table(folder, shift):
        folder.mkdir()
        rows = [{"run_id": f"frozenlake__grpo__none__main__s{s}", "phase": "end", "quartile": q,
                 "success": 0.5 + shift * (q == 4) + 0.01 * s * q, "mi": 1.0 - 0.05 * q, "rv": 0.05 * q}
                for s in range(3) for q in (1, 2, 3, 4)]
        rows.append({"run_id": "warm start", "phase": "start", "quartile": 1, "success": 0.5, "mi": 1.0, "rv": 0.0})
        pd.DataFrame(rows).to_csv(folder / pooled.QUARTILES_TABLE, index=False)
    table(tmp_path / "a", 0.1)
    table(tmp_path / "b", 0.2)
    out = pooled.pooled_verdicts((tmp_path, tmp_path), (tmp_path / "a", tmp_path / "b"), claims=("C3",))
    assert out["C3"].power["success"].n == 6  # three runs from each realization, none merged
    assert out["C3"].power["success"].mean == pytest.approx(0.15 + 0.03)


def test_a_claim_whose_runs_are_missing_is_not_pooled(tmp_path):
    _main_study(tmp_path / "first", base=0.5, gain=0.03)
    out = pooled.pooled_verdicts((tmp_path / "first", tmp_path / "none"), (tmp_path, tmp_path), claims=("C1", "C7"))
    for claim in ("C1", "C7"):
        assert isinstance(out[claim], Claim) and out[claim].verdict == "untested"
        assert out[claim].evidence.startswith("not pooled: ")


def test_every_claim_has_a_loader_and_the_notebook_that_decides_it():
    from ragen2.repro.notebook_stages import NOTEBOOK_CLAIMS

    assert sorted(pooled.CLAIM_LOADERS) == list(pooled.CLAIM_IDS)
    for claim, (notebook, _) in pooled.CLAIM_LOADERS.items():
        assert NOTEBOOK_CLAIMS[notebook] == claim
