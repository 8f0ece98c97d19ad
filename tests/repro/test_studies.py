"""Studies (ragen2.repro.studies): loading runs by study, and pairing runs across studies."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragen2.repro import regimes, studies
from ragen2.repro.runs import MI_METRIC
from tests.repro.synthetic import c7_runs as _c7_runs


def test_filter_gain_units_pair_on_settings_and_count_each_no_filter_run_once():
    runs = _c7_runs(lambda algo, seed: 0.05, sweep_seeds=2)
    units = studies.filter_gain_units(runs)
    assert len(units) == 16 and units["diff"].round(9).eq(0.05).all()  # 16 Top-p 0.9 pairs, 2 x 0.6 folded in
    grpo = units.set_index(["algo", "seed"]).loc[("grpo", 0)]
    assert grpo["n_partners"] == 2 and "toppsweep" in grpo["partners"] and grpo["base_run_id"].endswith("none__main__s0")
    # a filtered run whose other settings differ from every no-filter run has no partner
    odd = runs.assign(**{"trainer.kl_coef": np.where(runs["study"] == "toppsweep", 0.5, runs["trainer.kl_coef"])})
    assert studies.filter_gain_units(odd)["n_partners"].max() == 1
    ent, base = studies.sweep_units(runs, "ent", runs[runs["study"] == "main"])
    assert base == [0.001] and len(ent) == 2 and ent["n_partners"].tolist() == [2, 2]  # one unit per base run (seed)
    # without a borrowed base point, the sweep's smallest value is its base
    own, base = studies.sweep_units(runs, "kl")
    assert base == [0.01] and len(own) == 2 and own["partners"].str.contains("kl0p1").all()


def test_sweep_table_borrows_base_points():
    def run(rid, study, seed, success, mi, ent=0.001, kl=0.0, value=1.0, zero=True):
        return {"run_id": rid, "study": study, "env": "frozenlake", "algo": "grpo", "seed": seed, "trainer.steps": 30,
                "trainer.entropy_coef": ent, "trainer.entropy_scope": "all", "trainer.kl_coef": kl,
                "filter.strategy": "top_p", "filter.value": value, "filter.top_p_mode": "linear",
                "filter.include_zero": zero, "env.kwargs.success_rate": 0.98, "final_success": success, "mi": mi}

    runs = pd.DataFrame([run("e", "ent", 0, 0.3, 1.0, ent=0.05), run("t", "toppsweep", 0, 0.4, 2.0, value=0.6, zero=False)])
    main = pd.DataFrame([run("m0", "main", 0, 0.5, 1.5), run("m1", "main", 1, 0.6, 1.6),
                         run("m2", "main", 0, 0.7, 1.7, value=0.9, zero=False),
                         run("x", "main", 0, 0.1, 0.1, kl=0.1)])  # differs in a second setting: never borrowed
    sweeps = studies.sweep_table(runs, {"ent": "entropy coef", "toppsweep": "top-p"}, mi_metric="mi")
    assert sweeps[["sweep", "value", "final_mi"]].values.tolist() == [["entropy coef", 0.05, 1.0], ["top-p", 0.6, 2.0]]
    both = studies.sweep_table(runs, {"ent": "entropy coef", "toppsweep": "top-p"}, mi_metric="mi", base=main)
    assert sorted(both.loc[both["sweep"] == "entropy coef", "run_id"]) == ["e", "m0", "m1"]
    assert sorted(both.loc[both["sweep"] == "top-p", "run_id"]) == ["m0", "m1", "m2", "t"]
    assert both.set_index(["sweep", "run_id"]).loc[("top-p", "m2"), "value"] == 0.9


def _write_run(root, rid, *, success, mi, filt, success_rate=0.98):
    run = root / rid
    run.mkdir(parents=True)
    cfg = {"seed": int(rid[-1]), "env": {"name": "frozenlake", "kwargs": {"success_rate": success_rate}},
           "trainer": {"algo": "grpo"}, "filter": filt}
    (run / "config.json").write_text(json.dumps(cfg))
    lines = [{"step": 0, "val/success": 0.1},
             {"step": 1, "collapse_first_turn/mi_estimate": 1.0, "collapse_first_turn/conditional_entropy_est": 2.0},
             {"step": 2, "val/success": success, "collapse_first_turn/mi_estimate": mi,
              "collapse_first_turn/conditional_entropy_est": 2.5}]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_load_study_and_regime_points(tmp_path):
    none = {"strategy": "top_p", "value": 1.0, "include_zero": True}
    topp = {"strategy": "top_p", "value": 0.9, "include_zero": True}
    _write_run(tmp_path, "frozenlake__grpo__none__mech0p02__s0", success=0.3, mi=0.5, filt=none)
    _write_run(tmp_path, "frozenlake__grpo__topp0p9__mech0p02__s0", success=0.4, mi=0.9, filt=topp)
    _write_run(tmp_path, "frozenlake__grpo__none__main__s1", success=0.2, mi=0.7, filt=none)
    runs, steps = studies.load_study(tmp_path, "mech", metrics=[MI_METRIC])
    assert sorted(runs["condition"]) == ["none", "top_p"] and set(runs["study_value"]) == {0.02}
    assert runs.set_index("condition").loc["top_p", MI_METRIC] == 0.9
    assert set(steps["run_id"]) == set(runs["run_id"])
    points = regimes.regime_points_from_steps(steps)
    assert len(points) == 4 and set(points["source"]) == {"checkpoint (start)", "checkpoint (end)"}
    with pytest.raises(FileNotFoundError, match="slip"):
        studies.load_study(tmp_path, "slip")


def test_slip_runs_borrow_the_main_cells_with_equal_settings(tmp_path):
    none = {"strategy": "top_p", "value": 1.0, "include_zero": True}
    topp = {"strategy": "top_p", "value": 0.9, "include_zero": False}
    _write_run(tmp_path, "frozenlake__grpo__none__slip0p2__s0", success=0.3, mi=0.5, filt=none, success_rate=0.8)
    _write_run(tmp_path, "frozenlake__grpo__topp0p9__slip0p2__s0", success=0.4, mi=0.5, filt=topp, success_rate=0.8)
    _write_run(tmp_path, "frozenlake__grpo__none__main__s0", success=0.5, mi=0.5, filt=none)
    _write_run(tmp_path, "frozenlake__grpo__topp0p9__main__s0", success=0.6, mi=0.5, filt=topp)
    _write_run(tmp_path, "frozenlake__grpo__topp0p6__main__s0", success=0.9, mi=0.5,  # no slip run filters so
               filt={"strategy": "top_p", "value": 0.6, "include_zero": False})
    runs = studies.slip_runs(tmp_path)
    table = runs.set_index(["slip_rate", "condition"])["final_success"].sort_index()
    assert table.to_dict() == {(0.02, "none"): 0.5, (0.02, "top_p"): 0.6, (0.2, "none"): 0.3, (0.2, "top_p"): 0.4}


def test_curve_steps_show_each_environments_ppo_runs_or_its_only_algorithm():
    steps = pd.DataFrame({"env": ["sokoban", "sokoban", "webshop", "deepcoder", "deepcoder"],
                          "algo": ["ppo", "grpo", "grpo", "grpo", "dapo"], "step": range(5)})
    assert studies.curve_steps(steps, "algo").equals(steps)
    shown = studies.curve_steps(steps, "env")
    assert list(zip(shown["env"], shown["algo"])) == [("sokoban", "ppo"), ("webshop", "grpo"), ("deepcoder", "grpo"),
                                                      ("deepcoder", "dapo")]
