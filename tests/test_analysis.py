"""Notebook helpers: study loading, verdict functions on synthetic data with known answers, toy regimes."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ragen2 import analysis
from ragen2.claims import Claim
from ragen2.stats import paired_test


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


def _c7_runs(gain, *, ent_shift=lambda seed: 0.0, kl_shift=lambda seed: 0.0, algos=("ppo", "dapo", "grpo", "dr_grpo"),
             seeds=4, sweep_seeds=4):
    """Runs of the main and sweep studies (the CPU profile's layout): ``gain(algo, seed)`` = Top-p 0.9 (and, for
    GRPO, the top-p sweep's 0.6) minus no filter; ``ent_shift(seed)`` / ``kl_shift(seed)`` = a sweep run minus its
    base (main GRPO no filter, entropy 0.001, KL 0) at the same seed."""
    def run(study, algo, seed, success, *, value=1.0, ent=0.001, kl=0.0, swept=""):
        tag = "none" if value >= 1 else f"topp{value:g}".replace(".", "p")
        rid = f"frozenlake__{algo}__{tag}__{study}{swept:g}__s{seed}".replace(".", "p") if swept != "" else \
            f"frozenlake__{algo}__{tag}__{study}__s{seed}"
        return {"run_id": rid, "study": study, "env": "frozenlake",
                "algo": algo, "seed": seed, "condition": "none" if value >= 1 else "top_p", "trainer.steps": 30,
                "trainer.entropy_coef": ent, "trainer.entropy_scope": "all", "trainer.kl_coef": kl,
                "filter.strategy": "top_p", "filter.value": value, "filter.top_p_mode": "linear",
                "filter.include_zero": value >= 1, "env.kwargs.success_rate": 0.98, "final_success": success}

    rows = []
    for algo in algos:
        for seed in range(seeds):
            base = 0.6 + 0.02 * seed + 0.01 * len(algo)
            rows += [run("main", algo, seed, base), run("main", algo, seed, base + gain(algo, seed), value=0.9)]
            if algo == "grpo" and seed < sweep_seeds:
                rows.append(run("toppsweep", algo, seed, base + gain(algo, seed), value=0.6))
                rows += [run("ent", algo, seed, base + ent_shift(seed), ent=e, swept=e) for e in (0.0, 0.05)]
                rows += [run("kl", algo, seed, base + kl_shift(seed), kl=k, swept=k) for k in (0.01, 0.1)]
    return pd.DataFrame(rows)


def test_filter_gain_units_pair_on_settings_and_count_each_no_filter_run_once():
    runs = _c7_runs(lambda algo, seed: 0.05, sweep_seeds=2)
    units = analysis.filter_gain_units(runs)
    assert len(units) == 16 and units["diff"].round(9).eq(0.05).all()  # 16 Top-p 0.9 pairs, 2 x 0.6 folded in
    grpo = units.set_index(["algo", "seed"]).loc[("grpo", 0)]
    assert grpo["n_partners"] == 2 and "toppsweep" in grpo["partners"] and grpo["base_run_id"].endswith("none__main__s0")
    # a filtered run whose other settings differ from every no-filter run has no partner
    odd = runs.assign(**{"trainer.kl_coef": np.where(runs["study"] == "toppsweep", 0.5, runs["trainer.kl_coef"])})
    assert analysis.filter_gain_units(odd)["n_partners"].max() == 1
    ent, base = analysis.sweep_units(runs, "ent", runs[runs["study"] == "main"])
    assert base == [0.001] and len(ent) == 2 and ent["n_partners"].tolist() == [2, 2]  # one unit per base run (seed)
    # without a borrowed base point, the sweep's smallest value is its base
    own, base = analysis.sweep_units(runs, "kl")
    assert base == [0.01] and len(own) == 2 and own["partners"].str.contains("kl0p1").all()


def test_intervention_claim_agree_disagree_inconclusive():
    paper = 0.04
    wobble = {0: 0.004, 1: -0.003, 2: 0.002, 3: -0.001}  # seed-to-seed noise of a difference

    def verdict(runs, **kw):
        return analysis.intervention_claim("C7", runs, paper_effect=paper, **kw)

    up = verdict(_c7_runs(lambda a, s: 0.05 + wobble[s]))  # consistent gain, entropy / KL flat (noise only)
    assert up.verdict == "agree" and "n=16 runs" in up.evidence and "shares its 16 main-study Top-p pairs with C1" in up.evidence
    # the same gain, but the entropy sweep moves success consistently too: not the paper's contrast
    moved = verdict(_c7_runs(lambda a, s: 0.05 + wobble[s], ent_shift=lambda s: 0.1 + wobble[s]))
    assert moved.verdict == "inconclusive" and "downgraded from agree: entropy coef" in moved.evidence
    # no gain, tight interval: rules out the paper's +4 points
    null = verdict(_c7_runs(lambda a, s: wobble[s]))
    assert null.verdict == "disagree" and "paper's effect +4" in null.evidence
    # a significant loss
    assert verdict(_c7_runs(lambda a, s: -0.05 + wobble[s])).verdict == "disagree"
    # noisy differences whose interval holds both 0 and the paper's gain
    noisy = verdict(_c7_runs(lambda a, s: (0.12, -0.08, 0.1, -0.06)[s]))
    assert noisy.verdict == "inconclusive"
    # too few units, and the note and the context rho are reported
    few = _c7_runs(lambda a, s: 0.05, algos=("grpo",), seeds=1, sweep_seeds=1)
    assert verdict(few).verdict == "inconclusive"
    table = analysis.sweep_table(_c7_runs(lambda a, s: 0.05 + wobble[s]).query("study != 'main'"),
                                 {"ent": "entropy coef", "toppsweep": "top-p"})
    ctx = verdict(_c7_runs(lambda a, s: 0.05 + wobble[s]), sweeps=table, paper_rho=-0.3, note="changed after run 1")
    assert "Spearman of swept value" in ctx.evidence and "bar for top-p: rho -0.30" in ctx.evidence
    assert ctx.evidence.endswith("; changed after run 1")


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


def test_quartile_differences_are_top_minus_bottom_per_run_at_the_end():
    rows = [{"run_id": r, "phase": "end", "quartile": q, "success": q / 10 + (r == "b") * 0.1, "mi": 0.0, "rv": 0.0}
            for r in ("a", "b") for q in (1, 2, 3, 4)]
    start = [{**row, "run_id": "warm start", "phase": "start", "success": 0.9 * (row["quartile"] == 4)}
             for row in rows if row["run_id"] == "a"]
    diffs = analysis.quartile_differences(pd.DataFrame(rows + start), "success")
    assert diffs.index.tolist() == ["a", "b"] and diffs.round(6).tolist() == [0.3, 0.3]  # the start is not a unit
    assert analysis.quartile_differences(pd.DataFrame(rows + start), "success", phase="start").round(6).tolist() == [0.9]
    with pytest.raises(ValueError, match="quartiles 1 and 4"):
        analysis.quartile_differences(pd.DataFrame(rows).query("quartile < 4"), "success")


def _prompt_rows(run_id, phase, shift, *, prompts=8, slope=0.1):
    """A prompt table of one policy: success and MI rise with the prompt's RV by ``slope`` per prompt + ``shift``."""
    return [{"run_id": run_id, "phase": phase, "prompt": p, "rollout": k, "rv": p / 10,
             "success": min(1.0, max(0.0, 0.3 + slope * (p - 3.5) + shift)), "mi": 0.5 + slope * (p - 3.5) + shift}
            for p in range(prompts) for k in range(2)]


def test_c3_does_not_count_a_start_table_repeated_across_runs():
    # four final checkpoints without a consistent RV gradient of success or MI (Q4 - Q1 = noise around 0) ...
    slopes = {"a": 0.02, "b": -0.01, "c": 0.0, "d": 0.01}
    ends = [_prompt_rows(r, "end", 0.0, slope=s) for r, s in slopes.items()]
    # ... and the warm start, a steep gradient, copied into every run as the first CPU run's design did
    copies = [_prompt_rows(r, "start", 0.0, slope=0.1) for r in slopes]
    table = analysis.rv_quartile_table(pd.DataFrame([row for part in ends + copies for row in part]))
    claim = analysis.quartile_claim("C3", table)
    assert claim.verdict == "inconclusive"
    assert "n=4 runs (final checkpoints; the warm start is context only)" in claim.evidence
    # the (run, phase) design counted 8 pairs, 4 of them one policy, and found a "significant" effect
    old = table.pivot_table(index=["run_id", "phase"], columns="quartile", values="success")
    assert len(old) == 8 and old.xs("start", level="phase").round(12).drop_duplicates().shape[0] == 1
    assert paired_test(old[4].to_numpy(), old[1].to_numpy()).t_p < 0.05
    # the same start table once, as prompt_tables computes it: still 3 units, same verdict
    once = analysis.rv_quartile_table(pd.DataFrame([row for part in ends for row in part]
                                                   + _prompt_rows("warm start", "start", 0.0, slope=0.1)))
    assert analysis.quartile_claim("C3", once).evidence == claim.evidence
    # identical final tables (one policy under two names) count once, and the evidence says so
    twin = analysis.rv_quartile_table(pd.DataFrame([row for part in ends for row in part]
                                                   + [{**row, "run_id": "a2"} for row in ends[0]]))
    assert "n=4 runs (final checkpoints; the warm start is context only; 1 repeated table(s) counted once)" in \
        analysis.quartile_claim("C3", twin).evidence


def test_prompt_tables_roll_the_warm_start_out_once_per_distinct_warm_start(tmp_path, monkeypatch):
    calls = []

    def fake(run_dir, *, phase="end", **kwargs):
        calls.append((run_dir.name, phase))
        return pd.DataFrame({"prompt": [0], "reward": [1.0], "phase": [phase], "run_id": [run_dir.name]})

    monkeypatch.setattr(analysis, "prompt_level_table", fake)
    shared = {"env": {"name": "frozenlake"}, "policy": {"hidden_size": 8}, "warm_start": {"steps": 10}, "rollout": {}}
    configs = {"r1": shared, "r2": {**shared, "trainer": {"algo": "ppo"}}, "r3": shared,
               "s1": {**shared, "env": {"name": "sokoban"}}}
    for rid, cfg in configs.items():
        (tmp_path / rid).mkdir()
        (tmp_path / rid / "config.json").write_text(json.dumps(cfg))
    table = analysis.prompt_tables(tmp_path, ["r1", "r2", "r3"], phases=("start", "end"))
    assert calls == [("r1", "start"), ("r1", "end"), ("r2", "end"), ("r3", "end")]
    assert table.query("phase == 'start'")["run_id"].tolist() == ["warm start"]
    calls.clear()
    table = analysis.prompt_tables(tmp_path, ["r1", "s1", "r2"], phases=("start", "end"))
    assert calls.count(("r1", "start")) == 1 and calls.count(("s1", "start")) == 1 and ("r2", "start") not in calls
    assert sorted(table.query("phase == 'start'")["run_id"]) == ["warm start 1 (frozenlake)", "warm start 2 (sokoban)"]


def test_prompt_tables_reject_zero_workers(tmp_path):
    with pytest.raises(ValueError, match="workers"):
        analysis.prompt_tables(tmp_path, ["r1"], workers=0)


@pytest.mark.slow
def test_prompt_tables_do_not_depend_on_the_number_of_workers(tmp_path):
    from ragen2.config import RunConfig, apply_overrides
    from ragen2.trainer.loop import train
    from ragen2.warmstart import initial_policy
    from tests.trainer._tiny import TINY_RUN

    tiny = [*TINY_RUN, "trainer.algo=grpo", "trainer.steps=1", "collapse.enabled=false"]
    for seed in (0, 1):
        cfg = apply_overrides(RunConfig(), tiny + [f"seed={seed}"])
        train(cfg, tmp_path / f"r{seed}", initial_policy(cfg, tmp_path / "cache"), progress=False)
    kwargs = dict(phases=("start", "end"), num_prompts=3, group_size=2, cache_dir=tmp_path / "cache")
    serial = analysis.prompt_tables(tmp_path, ["r0", "r1"], workers=1, **kwargs)
    parallel = analysis.prompt_tables(tmp_path, ["r0", "r1"], workers=2, **kwargs)
    assert serial["run_id"].tolist().count("warm start") == 6 and len(serial) == 18
    pd.testing.assert_frame_equal(serial, parallel)
