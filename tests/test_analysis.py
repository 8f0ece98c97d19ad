"""Notebook helpers: study loading, verdict functions on synthetic data with known answers, toy regimes."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ragen2 import analysis
from ragen2.claims import Claim


def _runs(gains, base=0.5, seeds=6):
    """Paired runs: top_p = base + gain, none = base, one row per (seed, condition)."""
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(seeds):
        noise = rng.normal(0, 0.01)
        rows.append({"seed": seed, "condition": "none", "final_success": base + noise})
        rows.append({"seed": seed, "condition": "top_p", "final_success": base + noise + gains[seed % len(gains)]})
    return pd.DataFrame(rows)


def test_paired_claim_agrees_disagrees_and_needs_pairs():
    up = analysis.paired_claim("C1", _runs([0.1, 0.12, 0.08]), "final_success", "top_p", "none")
    down = analysis.paired_claim("C1", _runs([-0.1, -0.12, -0.08]), "final_success", "top_p", "none")
    mixed = analysis.paired_claim("C1", _runs([0.1, -0.1]), "final_success", "top_p", "none")
    few = analysis.paired_claim("C1", _runs([0.1], seeds=1), "final_success", "top_p", "none")
    assert (up.verdict, down.verdict, mixed.verdict, few.verdict) == ("agree", "disagree", "inconclusive",
                                                                     "inconclusive")
    assert "wins 6/6" in up.evidence and "too few" in few.evidence


def test_trend_claim_and_combine():
    rows = [{"run_id": f"r{i}", "step": s, "metric": "zv", "value": s * (1 + 0.1 * i)} for i in range(6)
            for s in (1, 5, 10)]
    rising = analysis.trend_claim("C6", pd.DataFrame(rows), "zv", direction="greater")
    assert rising.verdict == "agree"
    assert analysis.trend_claim("C6", pd.DataFrame(rows), "zv", direction="less").verdict == "disagree"
    # windows: mean of the first two vs the last two of four values per run
    wide = [{"run_id": f"r{i}", "step": s, "metric": "zv", "value": v + 0.01 * i}
            for i in range(3) for s, v in ((1, 1.0), (2, 3.0), (3, 3.0), (4, 5.0))]
    windowed = analysis.trend_claim("C6", pd.DataFrame(wide), "zv", direction="greater", window=2)
    assert "mean of the last 2 - first 2 steps" in windowed.evidence and "diff +2 " in windowed.evidence
    flat = [{**r, "value": 1.0 + 0.01 * (r["step"] % 2) * int(r["run_id"][1])} for r in wide]
    assert analysis.trend_claim("C6", pd.DataFrame(flat), "zv", direction="greater", window=2,
                                paper_effect=0.5).verdict == "disagree"  # the interval rules out a rise of 0.5
    a, i, d = Claim("C6", "agree", "x"), Claim("C6", "inconclusive", "y"), Claim("C6", "disagree", "z")
    assert analysis.combine("C6", [a, a]).verdict == "agree"
    assert analysis.combine("C6", [a, i]).verdict == "inconclusive"
    assert analysis.combine("C6", [a, i, d]).verdict == "disagree"
    ctx = analysis.with_context(a, d)
    assert ctx.verdict == "agree" and "(context) z" in ctx.evidence


def test_correlation_table_and_claim():
    rng = np.random.default_rng(1)
    success = rng.random(30)
    runs = pd.DataFrame({"final_success": success, "mi": success + rng.normal(0, 0.05, 30),
                         "ent": rng.random(30), "missing_some": np.where(np.arange(30) < 28, np.nan, 1.0)})
    corr = analysis.correlation_table(runs, {"mi": "MI", "ent": "entropy", "missing_some": "few", "absent": "no"},
                                      paper=pd.DataFrame({"metric": ["mi"], "paper_rho": [0.39]}))
    table = corr.set_index("metric")
    assert table.loc["mi", "rho"] > 0.9 and table.loc["mi", "paper_rho"] == 0.39
    assert math.isnan(table.loc["missing_some", "rho"]) and table.loc["absent", "n"] == 0
    assert analysis.correlation_claim("C2", corr, "mi", ["ent"]).verdict == "agree"
    flipped = runs.assign(mi=-runs["mi"])
    corr2 = analysis.correlation_table(flipped, {"mi": "MI", "ent": "entropy"})
    assert analysis.correlation_claim("C2", corr2, "mi", ["ent"]).verdict == "disagree"
    # no correlation at all: not significant, but the CI rules out the paper's +0.39 once n is large
    big = pd.DataFrame({"final_success": rng.random(200), "mi": rng.random(200), "ent": rng.random(200)})
    paper = pd.DataFrame({"metric": ["mi"], "paper_rho": [0.39]})
    corr3 = analysis.correlation_table(big, {"mi": "MI", "ent": "entropy"}, paper=paper)
    assert corr3.set_index("metric").loc["mi", "ci_high"] < 0.39
    assert analysis.correlation_claim("C2", corr3, "mi", ["ent"]).verdict == "disagree"


def test_grad_claim_task_grows_reg_flat():
    rows = []
    for run in range(3):
        for b in range(1, 7):
            rows.append({"bucket": str(b), "rv_mean": 0.05 * b + 0.001 * run, "task_norm": b + 0.1 * run,
                         "reg_norm": 1.0 + 0.01 * ((b * 7 + run) % 5), "algo": "ppo"})
        rows.append({"bucket": "all", "rv_mean": 0.2, "task_norm": 100.0, "reg_norm": 1.0, "algo": "ppo"})
    claim = analysis.grad_claim("C4", pd.DataFrame(rows))
    assert claim.verdict == "agree" and claim.evidence.startswith("ppo:")
    both_grow = pd.DataFrame(rows).assign(reg_norm=lambda d: d["task_norm"] * 2)
    assert analysis.grad_claim("C4", both_grow).verdict == "inconclusive"


def test_sweeps_and_intervention_claim():
    rows = []
    for seed in range(4):
        for v in (1.0, 0.9, 0.8, 0.6, 0.4):
            rows.append({"sweep": "top-p", "value": v, "seed": seed, "final_success": 1 - v + 0.01 * seed})
        for v in (0.0, 0.01, 0.1):
            rows.append({"sweep": "entropy coef", "value": v, "seed": seed, "final_success": 0.3 + 0.05 * ((seed + v * 100) % 3)})
    table = pd.DataFrame(rows)
    assert analysis.intervention_claim("C7", table, "top-p", ["entropy coef"]).verdict == "agree"
    flat = table.assign(final_success=np.where(table["sweep"] == "top-p", 0.5, table["value"]))
    assert analysis.intervention_claim("C7", flat, "top-p", ["entropy coef"]).verdict == "disagree"
    def run(rid, study, seed, success, mi, ent=0.001, kl=0.0, value=1.0, zero=True):
        return {"run_id": rid, "study": study, "env": "frozenlake", "algo": "grpo", "seed": seed, "trainer.steps": 30,
                "trainer.entropy_coef": ent, "trainer.entropy_scope": "all", "trainer.kl_coef": kl,
                "filter.strategy": "top_p", "filter.value": value, "filter.top_p_mode": "linear",
                "filter.include_zero": zero, "env.kwargs.success_rate": 0.98, "final_success": success, "mi": mi}

    runs = pd.DataFrame([run("e", "ent", 0, 0.3, 1.0, ent=0.05), run("t", "toppsweep", 0, 0.4, 2.0, value=0.6, zero=False)])
    main = pd.DataFrame([run("m0", "main", 0, 0.5, 1.5), run("m1", "main", 1, 0.6, 1.6),
                         run("m2", "main", 0, 0.7, 1.7, value=0.9, zero=False),
                         run("x", "main", 0, 0.1, 0.1, kl=0.1)])  # differs in a second setting: never borrowed
    sweeps = analysis.sweep_table(runs, {"ent": "entropy coef", "toppsweep": "top-p"}, mi_metric="mi")
    assert sweeps[["sweep", "value", "final_mi"]].values.tolist() == [["entropy coef", 0.05, 1.0], ["top-p", 0.6, 2.0]]
    both = analysis.sweep_table(runs, {"ent": "entropy coef", "toppsweep": "top-p"}, mi_metric="mi", base=main)
    assert sorted(both.loc[both["sweep"] == "entropy coef", "run_id"]) == ["e", "m0", "m1"]
    assert sorted(both.loc[both["sweep"] == "top-p", "run_id"]) == ["m0", "m1", "m2", "t"]
    assert both.set_index(["sweep", "run_id"]).loc[("top-p", "m2"), "value"] == 0.9


def test_stochasticity_gain_and_claim():
    rows = []
    for seed in range(6):
        for slip in (0.0, 0.05, 0.2, 0.5, 1.0):
            gain = 0.2 if 0.05 <= slip <= 0.5 else 0.0
            rows += [{"seed": seed, "slip_rate": slip, "condition": "none", "final_success": 0.4 + 0.01 * seed},
                     {"seed": seed, "slip_rate": slip, "condition": "top_p",
                      "final_success": 0.4 + 0.01 * seed + gain + 0.001 * seed}]
    runs = pd.DataFrame(rows)
    gains = analysis.gain_by_value(runs, "slip_rate").set_index("slip_rate")
    assert gains.loc[0.2, "gain_mean"] == pytest.approx(0.2 + 0.0025) and gains.loc[0.0, "n_pairs"] == 6
    assert analysis.stochasticity_claim("C5", runs).verdict == "agree"
    assert analysis.stochasticity_claim("C5", runs[runs["seed"] == 0]).verdict == "inconclusive"


def test_rv_quartiles_and_claim():
    rows = []
    for run in ("a", "b", "c", "d", "e", "f"):
        for prompt in range(8):
            rv = prompt / 10
            for k in range(2):
                rows.append({"run_id": run, "phase": "end", "prompt": prompt, "rollout": k, "success": float(prompt >= 4),
                             "rv": rv, "mi": rv + 0.01 * ord(run[0])})
    table = analysis.rv_quartile_table(pd.DataFrame(rows))
    assert sorted(table["quartile"].unique()) == [1, 2, 3, 4]
    q = table[table["run_id"] == "a"].set_index("quartile")
    assert q.loc[1, "rv"] == pytest.approx(0.05) and q.loc[4, "success"] == 1.0 and q.loc[1, "success"] == 0.0
    assert analysis.quartile_claim("C3", table).verdict == "agree"


def test_toy_helpers():
    point = analysis.toy_point(1.0, 4, 4, num_inputs=8)
    assert point["mi"] == pytest.approx(math.log(8)) and point["cond_entropy"] == pytest.approx(math.log(4))
    est = analysis.toy_estimates(rows_per_column=32, seed=0).set_index("regime")
    assert est.loc["template_collapse", "estimated_mi"] == pytest.approx(0.0, abs=1e-9)
    assert est.loc["diverse_reasoning", "estimated_mi"] == pytest.approx(math.log(8), abs=1e-6)
    image = analysis.show_toy_policy(0.5, 4, 4)
    assert image.data[:4] == b"\x89PNG"


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
    runs, steps = analysis.load_study(tmp_path, "mech", metrics=[analysis.MI_METRIC])
    assert sorted(runs["condition"]) == ["none", "top_p"] and set(runs["study_value"]) == {0.02}
    assert runs.set_index("condition").loc["top_p", analysis.MI_METRIC] == 0.9
    assert set(steps["run_id"]) == set(runs["run_id"])
    points = analysis.regime_points_from_steps(steps)
    assert len(points) == 4 and set(points["source"]) == {"checkpoint (start)", "checkpoint (end)"}
    with pytest.raises(FileNotFoundError, match="slip"):
        analysis.load_study(tmp_path, "slip")


def test_slip_runs_borrow_the_main_cells_with_equal_settings(tmp_path):
    none = {"strategy": "top_p", "value": 1.0, "include_zero": True}
    topp = {"strategy": "top_p", "value": 0.9, "include_zero": False}
    _write_run(tmp_path, "frozenlake__grpo__none__slip0p2__s0", success=0.3, mi=0.5, filt=none, success_rate=0.8)
    _write_run(tmp_path, "frozenlake__grpo__topp0p9__slip0p2__s0", success=0.4, mi=0.5, filt=topp, success_rate=0.8)
    _write_run(tmp_path, "frozenlake__grpo__none__main__s0", success=0.5, mi=0.5, filt=none)
    _write_run(tmp_path, "frozenlake__grpo__topp0p9__main__s0", success=0.6, mi=0.5, filt=topp)
    _write_run(tmp_path, "frozenlake__grpo__topp0p6__main__s0", success=0.9, mi=0.5,  # no slip run filters so
               filt={"strategy": "top_p", "value": 0.6, "include_zero": False})
    runs = analysis.slip_runs(tmp_path)
    table = runs.set_index(["slip_rate", "condition"])["final_success"].sort_index()
    assert table.to_dict() == {(0.02, "none"): 0.5, (0.02, "top_p"): 0.6, (0.2, "none"): 0.3, (0.2, "top_p"): 0.4}


def test_quartile_differences_are_top_minus_bottom_per_run_and_phase():
    rows = [{"run_id": r, "phase": "end", "quartile": q, "success": q / 10 + (r == "b") * 0.1, "mi": 0.0, "rv": 0.0}
            for r in ("a", "b") for q in (1, 2, 3, 4)]
    diffs = analysis.quartile_differences(pd.DataFrame(rows), "success")
    assert diffs.round(6).tolist() == [0.3, 0.3]
    with pytest.raises(ValueError, match="quartiles 1 and 4"):
        analysis.quartile_differences(pd.DataFrame(rows).query("quartile < 4"), "success")
