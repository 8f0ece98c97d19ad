"""One verdict per claim (ragen2.repro.verdicts) on synthetic tables: the decision, the context and the power."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragen2.repro import collapse_criteria as cc
from ragen2.repro import verdicts
from ragen2.repro.claim_tests import SMALLEST_EFFECTS, stochasticity_claim
from ragen2.repro.prompt_tables import quartile_differences, rv_quartile_table
from ragen2.repro.stats import pairs_needed, runs_needed_for_rho
from ragen2.repro.studies import filter_gain_units, sweep_table
from tests.repro.synthetic import c7_runs


def _main_runs(gain=0.06, algos=("ppo", "grpo"), seeds=4, conditions=("none", "top_p")):
    rng = np.random.default_rng(3)
    rows = []
    for algo in algos:
        for seed in range(seeds):
            base = 0.5 + rng.normal(0, 0.02)
            for cond in conditions:
                shift = {"none": 0.0, "top_p": gain + rng.normal(0, 0.005), "top_k": gain / 2}[cond]
                rows.append({"run_id": f"frozenlake__{algo}__{cond}__main__s{seed}", "env": "frozenlake", "algo": algo,
                             "seed": seed, "condition": cond, "final_success": base + shift})
    return pd.DataFrame(rows)


def test_c1_decides_on_all_pairs_against_the_papers_gain_and_reports_algorithms_as_context():
    verdict = verdicts.c1_filter_gain(_main_runs())
    assert verdict.claim.claim == "C1" and verdict.claim.verdict == "agree" and list(verdict.power) == ["success"]
    runs = _main_runs()
    diffs = (runs[runs["condition"] == "top_p"]["final_success"].to_numpy()
             - runs[runs["condition"] == "none"]["final_success"].to_numpy())
    power = verdict.power["success"]
    assert power.n == 8 and power.mean == pytest.approx(diffs.mean()) and power.std == pytest.approx(diffs.std(ddof=1))
    assert power.effect == verdicts.paper_filter_gain(runs) and power.kind == "paired"
    assert verdict.claim.evidence.startswith("all envs and algorithms: final_success top_p - none")
    assert f"paper's effect {verdicts.paper_filter_gain(_main_runs()) * 100:+.3g}" in verdict.claim.evidence
    assert "(context) grpo:" in verdict.claim.evidence and "(context) ppo:" in verdict.claim.evidence
    assert "ordering" not in verdict.claim.evidence and "(context) frozenlake" not in verdict.claim.evidence
    # decided in a learning regime read after seeing results: the evidence says so, with the pre-registered reading
    assert ("(deviation) the learning regime: the pre-registered reading (step 200, screened and confirming seeds) "
            "found no regime there") in verdict.claim.evidence
    assert verdicts.paper_filter_gain(_main_runs()) == pytest.approx((10.9 + 2.3) / 2 / 100)  # PPO and GRPO cells


def _table_runs(topk_shift, envs=("frozenlake", "sokoban"), seeds=6, gain=0.06):
    """PPO and GRPO on ``envs`` with paired noise; PPO also under Top-k at ``topk_shift`` above no filter."""
    rng = np.random.default_rng(5)
    rows = []
    for env in envs:
        for algo in ("ppo", "grpo"):
            for seed in range(seeds):
                base = 0.5 + rng.normal(0, 0.02)
                shifts = {"none": 0.0, "top_p": gain + rng.normal(0, 0.005)}
                if algo == "ppo":
                    shifts["top_k"] = topk_shift + rng.normal(0, 0.005)
                for cond, shift in shifts.items():
                    rows.append({"run_id": f"{env}__{algo}__{cond}__testbed__s{seed}", "env": env, "algo": algo,
                                 "seed": seed, "condition": cond, "final_success": base + shift})
    return pd.DataFrame(rows)


def test_c1_tests_the_ordering_top_p_over_top_k_over_none_on_ppo_and_combines_it_with_the_gain():
    ordered = verdicts.c1_filter_gain(_table_runs(topk_shift=0.03)).claim
    assert ordered.verdict == "agree"
    assert "ordering, PPO Top-p >= Top-k: final_success top_p - top_k" in ordered.evidence
    assert "ordering, PPO Top-k >= none: final_success top_k - none" in ordered.evidence
    assert "(context) frozenlake:" in ordered.evidence and "(context) sokoban:" in ordered.evidence
    # Top-k above Top-p: the ordering is reversed, so C1 disagrees although Top-p beats no filter everywhere
    reversed_ = verdicts.c1_filter_gain(_table_runs(topk_shift=0.12)).claim
    assert reversed_.verdict == "disagree" and "all envs and algorithms" in reversed_.evidence
    # Top-k between, but not distinguishable from Top-p: the ordering is undecided, and so is C1
    tied = verdicts.c1_filter_gain(_table_runs(topk_shift=0.06)).claim
    assert tied.verdict == "inconclusive"


def test_c1_is_decided_over_the_main_tables_environments_only():
    runs = _table_runs(topk_shift=0.03)
    curve = _table_runs(topk_shift=0.03, envs=("searchqa",), gain=-0.2)
    verdict = verdicts.c1_filter_gain(pd.concat([runs, curve], ignore_index=True))
    assert verdict.claim == verdicts.c1_filter_gain(runs).claim and "searchqa" not in verdict.claim.evidence
    assert verdict.power["success"].n == 24
    only_curves = verdicts.c1_filter_gain(curve).claim
    assert only_curves.verdict == "inconclusive" and "main table's environments" in only_curves.evidence


def test_c1_names_what_its_runs_cover_and_what_stays_untested():
    """A CPU profile with FrozenLake GRPO only says so: PPO, DAPO, Dr. GRPO and three environments have no runs."""
    runs = _table_runs(topk_shift=0.03, envs=("frozenlake",))
    grpo = verdicts.c1_filter_gain(runs[runs["algo"] == "grpo"]).claim
    assert ("(scope) tested on GRPO x FrozenLake; untested (no runs): algorithms PPO, DAPO, Dr. GRPO, environments "
            "Sokoban, MetaMathQA, Countdown of the paper's main table") in grpo.evidence
    assert grpo.evidence.index("(scope)") < grpo.evidence.index("(context) grpo:")
    both = verdicts.c1_filter_gain(_table_runs(topk_shift=0.03)).claim
    assert "(scope) tested on PPO, GRPO x Sokoban, FrozenLake; untested (no runs): algorithms DAPO, Dr. GRPO" in both.evidence


def test_c3_power_is_the_runs_top_minus_bottom_quartile_differences():
    rows = [{"run_id": run, "phase": "end", "prompt": p, "rollout": k, "rv": p / 10,
             "success": float(p >= 4) * (0.9 + 0.02 * i), "mi": p / 8 + 0.25 * i}
            for i, run in enumerate("abcde") for p in range(8) for k in range(2)]
    quartiles = rv_quartile_table(pd.DataFrame(rows))
    verdict = verdicts.c3_rv_quartiles(quartiles)
    assert verdict.claim.claim == "C3" and list(verdict.power) == ["success", "mi"]
    diffs = quartile_differences(quartiles, "success")
    power = verdict.power["success"]
    assert (power.n, power.mean, power.std) == (len(diffs), diffs.mean(), diffs.std(ddof=1))
    assert power.needed == pairs_needed(diffs.std(ddof=1), 0.05) and power.effect == SMALLEST_EFFECTS["C3_success"]
    assert math.isnan(verdict.power["mi"].needed)  # equal differences: no spread, no power calculation


def test_c4_and_c5_apply_their_claim_tests():
    rows = [{"bucket": str(b), "rv_mean": 0.05 * b + 0.001 * run, "task_norm": b + 0.1 * run,
             "reg_norm": 1.0 + 0.01 * ((b * 7 + run) % 5), "algo": algo}
            for algo in ("ppo", "grpo") for run in range(3) for b in range(1, 7)]
    c4 = verdicts.c4_gradient_snr(pd.DataFrame(rows)).claim
    assert c4.verdict == "agree" and c4.evidence.startswith("grpo:") and "; ppo:" in c4.evidence
    slips = pd.DataFrame([{"seed": s, "slip_rate": slip, "condition": c, "final_success": 0.4 + 0.01 * s
                           + (0.2 if c == "top_p" and 0.05 <= slip <= 0.5 else 0.0) + 0.001 * s * (c == "top_p")}
                          for s in range(5) for slip in (0.0, 0.2, 1.0) for c in ("none", "top_p")])
    c5 = verdicts.c5_stochasticity(slips)
    assert c5.claim == stochasticity_claim("C5", slips, paper_effect=0.02)
    assert c5.power["gain"].n == 5 and c5.power["gain"].mean == pytest.approx(0.2)  # the seed term cancels
    c4_power = verdicts.c4_gradient_snr(pd.DataFrame(rows)).power
    assert sorted(c4_power) == ["task_rho_grpo", "task_rho_ppo"] and c4_power["task_rho_ppo"].n == 18
    assert math.isnan(c4_power["task_rho_ppo"].for_interval)  # no effect size fixed for C4: nothing to size


def test_the_power_table_sizes_paired_tests_by_their_interval_and_rhos_by_their_power():
    table = verdicts.power_table({
        "C1": verdicts.Verdict(verdicts.Claim("C1", "disagree", "x"),
                               {"success": verdicts.Power(n=16, mean=0.01, std=0.045, needed=12, effect=0.04)}),
        "C2": verdicts.Verdict(verdicts.Claim("C2", "disagree", "x"),
                               {"rho": verdicts.Power(n=78, mean=0.2, std=math.nan, needed=50, effect=0.39,
                                                      kind="rho")}),
        "C4": verdicts.Verdict(verdicts.Claim("C4", "inconclusive", "x"),
                               {"task_rho_ppo": verdicts.Power(n=40, mean=math.nan, std=math.nan, needed=math.nan,
                                                               effect=math.nan, kind="rho")}),
    })
    assert list(table.columns) == list(verdicts.POWER_COLUMNS)
    c1, c2, c4 = (table.iloc[i] for i in range(3))
    assert c1["interval_width"] == pytest.approx(2 * 2.1314 * 0.045 / 4, rel=1e-3) and c1["interval_width"] > 0.04
    assert c1["units_for_interval"] == 22 and c1["sized"] == "no"  # 16 pairs: an interval wider than the effect
    assert c2["units_for_interval"] == 50 and c2["sized"] == "yes" and math.isnan(c2["interval_width"])
    assert c4["sized"] == "n/a"


C6_STEPS = np.arange(0, 160, 10)


def _c6_run(rid, cond, seed, collapse, study="mech", value=0.03, mi_end=0.9, warm_start_steps=1500):
    """One run of C6's synthetic studies: a template collapse (MI and retrieval fall from step 50, the entropy holds,
    a shared prefix appears, the zero-variance count climbs) or a stable run whose MI ends at ``mi_end``."""
    ramp = np.clip((C6_STEPS - 50) / 100, 0, 1)
    end_mi = 0.3 + 0.01 * seed if collapse else mi_end + 0.01 * seed
    metrics = {
        cc.MI: 0.8 + (end_mi - 0.8) * ramp,
        cc.RETRIEVAL: 0.9 - (0.4 if collapse else 0.0) * ramp,
        cc.ENTROPY: np.full(len(C6_STEPS), 0.4),
        cc.SHARED_PREFIX: 0.1 + (0.4 if collapse else 0.0) * ramp,
        cc.LENGTH: 28 - (8 if collapse else 0) * ramp,
        "val/success": np.full(len(C6_STEPS), 0.6),
        "filter/zero_variance_count": (2 + (3 + 0.1 * seed) * ramp) if cond == "none" else np.full(len(C6_STEPS), 2.0),
    }
    steps = [{"run_id": rid, "condition": cond, "seed": seed, "step": int(st), "metric": m, "value": float(v)}
             for m, values in metrics.items() for st, v in zip(C6_STEPS, values, strict=True)]
    run = {"run_id": rid, "study": study, "study_value": value, "algo": "grpo", "seed": seed, "condition": cond,
           "warm_start.steps": warm_start_steps, "warm_start.template_fraction": 0.3, "trainer.entropy_coef": value,
           "trainer.entropy_scope": "reasoning", "trainer.actor_lr": 1e-4, "trainer.steps": 150}
    return run, steps


def _c6_study(top_p_collapses=False, with_topk=True):
    runs, steps = [], []
    conds = ("none", "top_p", "top_k") if with_topk else ("none", "top_p")
    for seed in range(4):
        for cond in conds:
            collapse = cond == "none" or (cond == "top_p" and top_p_collapses) or (cond == "top_k" and seed < 2)
            run, rows = _c6_run(f"frozenlake__grpo__{cond}__mech0p03__s{seed}", cond, seed, collapse)
            runs.append(run)
            steps += rows
        for cond in ("none", "top_p"):  # the main study's cells: another warm start, so no control
            run, rows = _c6_run(f"frozenlake__grpo__{cond}__main__s{seed}", cond, seed, False, study="main",
                                value=np.nan, warm_start_steps=600)
            runs.append(run)
            steps += rows
    return pd.DataFrame(runs), pd.DataFrame(steps)


def test_c6_agrees_when_top_p_prevents_the_template_collapse_and_names_the_regime():
    runs, steps = _c6_study()
    verdict = verdicts.c6_collapse_dynamics(runs, steps)
    assert verdict.claim.verdict == "agree"
    evidence = verdict.claim.evidence
    assert evidence.startswith("mechanism study (grpo, warm start 1500 SFT steps with template share 0.3, "
                               "entropy 0.03 on reasoning tokens, actor lr 0.0001, 150 steps)")
    assert "template collapse in 4/4 no-filter and 0/4 Top-p runs" in evidence
    assert "(context) template collapse in 2/4 Top-k runs" in evidence and "zero-variance groups" in evidence
    assert "control without" not in evidence  # the main study's cells start from another warm start
    power = verdict.power["mi"]
    # smoothed final MI (mean of the last 3 readings): 0.89 with Top-p, 0.35 without
    assert power.n == 4 and power.mean == pytest.approx(0.54) and power.effect == SMALLEST_EFFECTS["C6_mi"]


def test_c6_disagrees_when_top_p_collapses_too_and_uses_a_same_warm_start_control():
    runs, steps = _c6_study(top_p_collapses=True, with_topk=False)
    verdict = verdicts.c6_collapse_dynamics(runs, steps)
    assert verdict.claim.verdict == "disagree" and "Top-k" not in verdict.claim.evidence
    runs.loc[runs["study"] == "main", "warm_start.steps"] = 1500  # now the main cells share the warm start
    verdict = verdicts.c6_collapse_dynamics(runs, steps)
    assert "(context) control without the reasoning entropy bonus:" in verdict.claim.evidence


def test_c6_is_inconclusive_without_a_collapse_to_prevent():
    runs, steps = _c6_study()
    stable = [_c6_run(rid, cond, seed, False) for rid, cond, seed in
              runs.loc[runs["study"] == "mech", ["run_id", "condition", "seed"]].itertuples(index=False)]
    steps = pd.DataFrame([row for _, rows in stable for row in rows])
    assert verdicts.c6_collapse_dynamics(runs, steps).claim.verdict == "inconclusive"


def test_c7_uses_c1s_paper_effect_discloses_the_change_and_reports_both_powers():
    wobble = {0: 0.004, 1: -0.003, 2: 0.002, 3: -0.001}
    studies = c7_runs(lambda a, s: 0.05 + wobble[s])
    sweeps = sweep_table(studies[studies["study"] != "main"], {"ent": "entropy coef", "kl": "KL coef",
                                                              "toppsweep": "top-p"}, base=studies[studies["study"] == "main"])
    verdict = verdicts.c7_interventions(studies, sweeps)
    need_rho = runs_needed_for_rho(-0.3)
    assert verdict.claim.verdict == "agree"
    assert verdict.claim.evidence.endswith(verdicts.C7_DISCLOSURE.format(runs=need_rho))
    assert f"needed about {need_rho} runs per sweep" in verdict.claim.evidence
    units = filter_gain_units(studies)
    primary, rho = verdict.power["primary"], verdict.power["rho"]
    effect = verdicts.paper_filter_gain(studies[studies["study"] == "main"])
    assert (primary.n, primary.std, primary.effect) == (len(units), units["diff"].std(ddof=1), effect)
    assert primary.needed == pairs_needed(units["diff"].std(ddof=1), effect)
    assert (rho.n, rho.needed, rho.effect) == (int((sweeps["sweep"] == "top-p").sum()), need_rho, -0.3)
    assert primary.kind == "paired" and rho.kind == "rho" and rho.for_interval == need_rho


def test_c2_holds_mi_zscore_against_the_entropies():
    rng = np.random.default_rng(1)
    success = rng.random(40)
    corr = pd.DataFrame([{"metric": verdicts.C2_MI_METRIC, "label": "MI-ZScore", "rho": 0.8, "ci_low": 0.6,
                          "ci_high": 0.9, "p": 1e-6, "n": 40, "paper_rho": 0.39}]
                        + [{"metric": m, "label": m, "rho": 0.1, "ci_low": -0.2, "ci_high": 0.4, "p": 0.5, "n": 40,
                            "paper_rho": float("nan")} for m in verdicts.C2_ENTROPY_METRICS])
    c2 = verdicts.c2_mi_predicts_success(corr)
    assert len(success) == 40 and c2.claim.verdict == "agree"
    power = c2.power["rho"]  # the runs a rank test needs to detect the paper's rho, against the 40 it has
    assert (power.kind, power.n, power.mean, power.effect) == ("rho", 40, 0.8, 0.39)
    assert power.needed == runs_needed_for_rho(0.39) and verdicts.power_table({"C2": c2})["sized"].tolist() == ["no"]
