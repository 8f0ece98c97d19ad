"""Claim tests (ragen2.repro.claim_tests) on synthetic data with known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragen2.repro import claim_tests, prompt_tables, studies
from ragen2.repro.claims import Claim
from ragen2.repro.stats import paired_test
from tests.repro.synthetic import c7_runs as _c7_runs


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
    up = claim_tests.paired_claim("C1", _runs([0.1, 0.12, 0.08]), "final_success", "top_p", "none")
    down = claim_tests.paired_claim("C1", _runs([-0.1, -0.12, -0.08]), "final_success", "top_p", "none")
    mixed = claim_tests.paired_claim("C1", _runs([0.1, -0.1]), "final_success", "top_p", "none")
    few = claim_tests.paired_claim("C1", _runs([0.1], seeds=1), "final_success", "top_p", "none")
    assert (up.verdict, down.verdict, mixed.verdict, few.verdict) == ("agree", "disagree", "inconclusive",
                                                                     "inconclusive")
    assert "wins 6/6" in up.evidence and "too few" in few.evidence


def test_trend_claim_and_combine():
    rows = [{"run_id": f"r{i}", "step": s, "metric": "zv", "value": s * (1 + 0.1 * i)} for i in range(6)
            for s in (1, 5, 10)]
    rising = claim_tests.trend_claim("C6", pd.DataFrame(rows), "zv", direction="greater")
    assert rising.verdict == "agree"
    assert claim_tests.trend_claim("C6", pd.DataFrame(rows), "zv", direction="less").verdict == "disagree"
    # windows: mean of the first two vs the last two of four values per run
    wide = [{"run_id": f"r{i}", "step": s, "metric": "zv", "value": v + 0.01 * i}
            for i in range(3) for s, v in ((1, 1.0), (2, 3.0), (3, 3.0), (4, 5.0))]
    windowed = claim_tests.trend_claim("C6", pd.DataFrame(wide), "zv", direction="greater", window=2)
    assert "mean of the last 2 - first 2 steps" in windowed.evidence and "diff +2 " in windowed.evidence
    flat = [{**r, "value": 1.0 + 0.01 * (r["step"] % 2) * int(r["run_id"][1])} for r in wide]
    assert claim_tests.trend_claim("C6", pd.DataFrame(flat), "zv", direction="greater", window=2,
                                paper_effect=0.5).verdict == "disagree"  # the interval rules out a rise of 0.5
    a, i, d = Claim("C6", "agree", "x"), Claim("C6", "inconclusive", "y"), Claim("C6", "disagree", "z")
    assert claim_tests.combine("C6", [a, a]).verdict == "agree"
    assert claim_tests.combine("C6", [a, i]).verdict == "inconclusive"
    assert claim_tests.combine("C6", [a, i, d]).verdict == "disagree"
    ctx = claim_tests.with_context(a, d)
    assert ctx.verdict == "agree" and "(context) z" in ctx.evidence


def test_correlation_table_and_claim():
    rng = np.random.default_rng(1)
    success = rng.random(30)
    runs = pd.DataFrame({"final_success": success, "mi": success + rng.normal(0, 0.05, 30),
                         "ent": rng.random(30), "missing_some": np.where(np.arange(30) < 28, np.nan, 1.0)})
    corr = claim_tests.correlation_table(runs, {"mi": "MI", "ent": "entropy", "missing_some": "few", "absent": "no"},
                                      paper=pd.DataFrame({"metric": ["mi"], "paper_rho": [0.39]}))
    table = corr.set_index("metric")
    assert table.loc["mi", "rho"] > 0.9 and table.loc["mi", "paper_rho"] == 0.39
    assert math.isnan(table.loc["missing_some", "rho"]) and table.loc["absent", "n"] == 0
    assert claim_tests.correlation_claim("C2", corr, "mi", ["ent"]).verdict == "agree"
    flipped = runs.assign(mi=-runs["mi"])
    corr2 = claim_tests.correlation_table(flipped, {"mi": "MI", "ent": "entropy"})
    assert claim_tests.correlation_claim("C2", corr2, "mi", ["ent"]).verdict == "disagree"
    # no correlation at all: not significant, but the CI rules out the paper's +0.39 once n is large
    big = pd.DataFrame({"final_success": rng.random(200), "mi": rng.random(200), "ent": rng.random(200)})
    paper = pd.DataFrame({"metric": ["mi"], "paper_rho": [0.39]})
    corr3 = claim_tests.correlation_table(big, {"mi": "MI", "ent": "entropy"}, paper=paper)
    assert corr3.set_index("metric").loc["mi", "ci_high"] < 0.39
    assert claim_tests.correlation_claim("C2", corr3, "mi", ["ent"]).verdict == "disagree"


def test_grad_claim_task_grows_reg_flat():
    rows = []
    for run in range(3):
        for b in range(1, 7):
            rows.append({"bucket": str(b), "rv_mean": 0.05 * b + 0.001 * run, "task_norm": b + 0.1 * run,
                         "reg_norm": 1.0 + 0.01 * ((b * 7 + run) % 5), "algo": "ppo"})
        rows.append({"bucket": "all", "rv_mean": 0.2, "task_norm": 100.0, "reg_norm": 1.0, "algo": "ppo"})
    claim = claim_tests.grad_claim("C4", pd.DataFrame(rows))
    assert claim.verdict == "agree" and claim.evidence.startswith("ppo:")
    both_grow = pd.DataFrame(rows).assign(reg_norm=lambda d: d["task_norm"] * 2)
    assert claim_tests.grad_claim("C4", both_grow).verdict == "inconclusive"


def test_intervention_claim_agree_disagree_inconclusive():
    paper = 0.04
    wobble = {0: 0.004, 1: -0.003, 2: 0.002, 3: -0.001}  # seed-to-seed noise of a difference

    def verdict(runs, **kw):
        return claim_tests.intervention_claim("C7", runs, paper_effect=paper, **kw)

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
    table = studies.sweep_table(_c7_runs(lambda a, s: 0.05 + wobble[s]).query("study != 'main'"),
                                 {"ent": "entropy coef", "toppsweep": "top-p"})
    ctx = verdict(_c7_runs(lambda a, s: 0.05 + wobble[s]), sweeps=table, paper_rho=-0.3, note="changed after run 1")
    assert "Spearman of swept value" in ctx.evidence and "bar for top-p: rho -0.30" in ctx.evidence
    assert ctx.evidence.endswith("; changed after run 1")


def test_stochasticity_gain_and_claim():
    rows = []
    for seed in range(6):
        for slip in (0.0, 0.05, 0.2, 0.5, 1.0):
            gain = 0.2 if 0.05 <= slip <= 0.5 else 0.0
            rows += [{"seed": seed, "slip_rate": slip, "condition": "none", "final_success": 0.4 + 0.01 * seed},
                     {"seed": seed, "slip_rate": slip, "condition": "top_p",
                      "final_success": 0.4 + 0.01 * seed + gain + 0.001 * seed}]
    runs = pd.DataFrame(rows)
    gains = claim_tests.gain_by_value(runs, "slip_rate").set_index("slip_rate")
    assert gains.loc[0.2, "gain_mean"] == pytest.approx(0.2 + 0.0025) and gains.loc[0.0, "n_pairs"] == 6
    assert claim_tests.stochasticity_claim("C5", runs).verdict == "agree"
    assert claim_tests.stochasticity_claim("C5", runs[runs["seed"] == 0]).verdict == "inconclusive"


def test_rv_quartiles_and_claim():
    rows = []
    for run in ("a", "b", "c", "d", "e", "f"):
        for prompt in range(8):
            rv = prompt / 10
            for k in range(2):
                rows.append({"run_id": run, "phase": "end", "prompt": prompt, "rollout": k, "success": float(prompt >= 4),
                             "rv": rv, "mi": rv + 0.01 * ord(run[0])})
    table = prompt_tables.rv_quartile_table(pd.DataFrame(rows))
    assert sorted(table["quartile"].unique()) == [1, 2, 3, 4]
    q = table[table["run_id"] == "a"].set_index("quartile")
    assert q.loc[1, "rv"] == pytest.approx(0.05) and q.loc[4, "success"] == 1.0 and q.loc[1, "success"] == 0.0
    assert claim_tests.quartile_claim("C3", table).verdict == "agree"


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
    table = prompt_tables.rv_quartile_table(pd.DataFrame([row for part in ends + copies for row in part]))
    claim = claim_tests.quartile_claim("C3", table)
    assert claim.verdict == "inconclusive"
    assert "n=4 runs (final checkpoints; the warm start is context only)" in claim.evidence
    # the (run, phase) design counted 8 pairs, 4 of them one policy, and found a "significant" effect
    old = table.pivot_table(index=["run_id", "phase"], columns="quartile", values="success")
    assert len(old) == 8 and old.xs("start", level="phase").round(12).drop_duplicates().shape[0] == 1
    assert paired_test(old[4].to_numpy(), old[1].to_numpy()).t_p < 0.05
    # the same start table once, as prompt_tables computes it: still 3 units, same verdict
    once = prompt_tables.rv_quartile_table(pd.DataFrame([row for part in ends for row in part]
                                                   + _prompt_rows("warm start", "start", 0.0, slope=0.1)))
    assert claim_tests.quartile_claim("C3", once).evidence == claim.evidence
    # identical final tables (one policy under two names) count once, and the evidence says so
    twin = prompt_tables.rv_quartile_table(pd.DataFrame([row for part in ends for row in part]
                                                   + [{**row, "run_id": "a2"} for row in ends[0]]))
    assert "n=4 runs (final checkpoints; the warm start is context only; 1 repeated table(s) counted once)" in \
        claim_tests.quartile_claim("C3", twin).evidence


def test_c2_within_arms_reads_every_reading_and_keeps_the_arms_means_out():
    """Two arms: a filter that keeps more MI and learns less, and no filter. Within each arm MI and success rise
    together at every reading; pooled over the arms' final readings they fall together. The within-arm table says
    the former, and the verdict carries the pooled rho as labelled context."""
    from ragen2.repro.claim_tests import checkpoint_readings, correlation_table, within_correlation_table
    from ragen2.repro.verdicts import C2_MI_METRIC, c2_mi_predicts_success

    rng = np.random.default_rng(3)
    runs, steps = [], []
    for cond, mi_level, success_level in (("none", 0.1, 0.6), ("top_k", 0.6, 0.2)):
        for seed in range(4):
            rid = f"{cond}_{seed}"
            runs.append({"run_id": rid, "env": "frozenlake", "algo": "grpo", "condition": cond, "seed": seed,
                         "filter.value": 1.0 if cond == "none" else 0.25})
            steps.append({"run_id": rid, "step": 0, "metric": "val/success", "value": success_level})
            for step in (25, 50, 75, 100):
                z = rng.normal()
                steps += [{"run_id": rid, "step": step, "metric": C2_MI_METRIC, "value": mi_level + 0.05 * z},
                          {"run_id": rid, "step": step, "metric": "val/success",
                           "value": success_level + 0.05 * z + 0.01 * rng.normal()}]
    runs, steps = pd.DataFrame(runs), pd.DataFrame(steps)
    readings = checkpoint_readings(runs, steps, [C2_MI_METRIC])
    assert len(readings) == 32 and readings["arm"].nunique() == 2 and (readings["step"] > 0).all()
    within = within_correlation_table(readings, {C2_MI_METRIC: "MI-ZScore"})
    row = within.iloc[0]
    assert row["rho"] > 0.8 and row["ci_low"] > 0 and (row["n"], row["runs"], row["arms"]) == (32, 8, 2)
    final = runs.assign(**{C2_MI_METRIC: [0.1] * 4 + [0.6] * 4, "final_success": [0.6] * 4 + [0.2] * 4})
    pooled = correlation_table(final.assign(**{C2_MI_METRIC: final[C2_MI_METRIC] + np.arange(8) * 1e-3}),
                               {C2_MI_METRIC: "MI-ZScore"})
    assert pooled.iloc[0]["rho"] < 0
    verdict = c2_mi_predicts_success(within, pooled=pooled, pooled_untested="filter condition explains it")
    assert verdict.claim.evidence.startswith("Spearman within arms")
    assert "(pooled over conditions, untested: filter condition explains it) MI-ZScore rho -" in verdict.claim.evidence
