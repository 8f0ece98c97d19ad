"""The realization check: a verdict stands only where both realizations give it; the pipeline declares the
second realization's runs, notebooks and claims."""

from __future__ import annotations

import csv
import dataclasses

import pytest

from ragen2.config import apply_overrides
from ragen2.errors import ConfigError
from ragen2.repro import realization
from ragen2.repro.claims import Claim, read_claims, write_claims
from ragen2.repro.notebook_stages import NOTEBOOK_STUDIES, parameters_key
from ragen2.repro.profiles import PAPER_MAIN_ENVS, SWEEP_STUDIES, build
from ragen2.repro.run_ids import parse_run_id
from tests.repro.dvcyaml import REPO, paths, resolved


def test_a_verdict_both_realizations_give_stands_and_one_that_flips_is_fragile():
    first = [Claim("C1", "agree", "gain +2.7"), Claim("C2", "disagree", "rho 0.1"), Claim("C3", "agree", "q4 best")]
    second = [Claim("C1", "agree", "gain +1.9"), Claim("C2", "agree", "rho 0.5"), Claim("C4", "disagree", "no gap")]
    claims, rows = realization.compare_claims(first, second, label="second warm start")
    by_id = {c.claim: c for c in claims}
    assert [c.claim for c in claims] == ["C1", "C2", "C3", "C4"]
    assert by_id["C1"].verdict == "agree" and by_id["C1"].evidence.startswith("gain +2.7")
    assert "holds in the second warm start" in by_id["C1"].evidence
    assert by_id["C2"].verdict == "inconclusive"
    assert by_id["C2"].evidence.startswith("fragile: disagree in the first realization, agree in the second warm start")
    assert "rho 0.1" in by_id["C2"].evidence and "rho 0.5" in by_id["C2"].evidence
    assert by_id["C3"].verdict == by_id["C4"].verdict == "inconclusive"  # decided once only: not checked
    assert by_id["C3"].evidence.startswith("unchecked: decided in the first realization only (agree)")
    assert by_id["C4"].evidence.startswith("unchecked: decided in the second realization only (disagree)")
    assert [(r["claim"], r["first"], r["second"], r["holds"]) for r in rows] == [
        ("C1", "agree", "agree", "true"), ("C2", "disagree", "agree", "false"),
        ("C3", "agree", "", "false"), ("C4", "", "disagree", "false")]


def test_with_pooled_claims_a_verdict_stands_only_where_all_three_give_it():
    first = [Claim("C1", "disagree", "a1"), Claim("C2", "disagree", "a2"), Claim("C3", "agree", "a3")]
    second = [Claim("C1", "disagree", "b1"), Claim("C2", "disagree", "b2"), Claim("C3", "inconclusive", "b3")]
    pooled = [Claim("C1", "disagree", "p1"), Claim("C2", "inconclusive", "p2"), Claim("C3", "agree", "p3")]
    claims, rows = realization.compare_claims(first, second, label="second warm start", pooled=pooled)
    by_id = {c.claim: c for c in claims}
    assert by_id["C1"].verdict == "disagree"
    assert by_id["C1"].evidence == ("pooled over both warm starts: p1 || holds in the first realization and in the "
                                    "second warm start")
    for claim, pooled_verdict in (("C2", "inconclusive"), ("C3", "agree")):  # the halves agree, the pool does not;
        assert by_id[claim].verdict == "inconclusive"                         # or the pool agrees with one half only
        assert by_id[claim].evidence.startswith("fragile: ") and f"{pooled_verdict} pooled over both" in by_id[claim].evidence
    assert [(r["claim"], r["pooled"], r["holds"]) for r in rows] == [("C1", "disagree", "true"),
                                                                     ("C2", "inconclusive", "false"),
                                                                     ("C3", "agree", "false")]
    assert rows[0]["first_evidence"] == "a1" and rows[0]["second_evidence"] == "b1"


def test_merge_with_realization_reads_both_folders_and_writes_claims_and_the_check(tmp_path):
    first, second = tmp_path / "paper_figures", tmp_path / "realization"
    write_claims("main_results", [("C1", "agree", "a1")], first)
    write_claims("interventions", [("C7", "disagree", "a7")], first)
    write_claims("main_results", [("C1", "agree", "b1")], second / "03_main_results")
    write_claims("interventions", [("C7", "agree", "b7")], second / "08_interventions")
    claims_path, check_path, claims = realization.merge_with_realization(first, second)
    assert claims_path == first / "claims.csv" and check_path == first / "realization_check.csv"
    assert [(c.claim, c.verdict) for c in read_claims(claims_path)] == [("C1", "agree"), ("C7", "inconclusive")]
    with open(check_path) as f:
        rows = list(csv.DictReader(f))
    assert [r["holds"] for r in rows] == ["true", "false"] and rows[1]["second_evidence"] == "[interventions] b7"
    # a rerun reads the same section files (the check file is not a section)
    again = realization.merge_with_realization(first, second)[2]
    assert again == claims


def test_merge_with_realization_gates_the_final_claims_and_their_check_rows(tmp_path):
    """A precondition that failed turns the final verdict untested, in claims.csv and in the check's verdict column."""
    from ragen2.repro.claims import Claim

    first, second = tmp_path / "paper_figures", tmp_path / "realization"
    write_claims("main_results", [("C1", "disagree", "a1")], first)
    write_claims("main_results", [("C1", "disagree", "b1")], second / "03_main_results")

    def gate(claim):
        return Claim(claim.claim, "untested", f"precondition unmet || {claim.evidence}")

    claims_path, check_path, claims = realization.merge_with_realization(first, second, gate=gate)
    assert [(c.claim, c.verdict) for c in read_claims(claims_path)] == [("C1", "untested")]
    with open(check_path) as f:
        (row,) = list(csv.DictReader(f))
    assert (row["verdict"], row["first"], row["second"]) == ("untested", "disagree", "disagree")


def test_merge_with_realization_needs_both_realizations(tmp_path):
    write_claims("main_results", [("C1", "agree", "a1")], tmp_path / "first")
    with pytest.raises(FileNotFoundError, match="realization"):
        realization.merge_with_realization(tmp_path / "first", tmp_path / "realization")


def test_the_profiles_declare_a_second_warm_start_for_every_run_that_decides_a_claim():
    for name in ("cpu", "smoke"):
        profile = build(name)
        entry = profile.params()["pipeline"]["realization"]
        # every run but the testbed's success-curve environments (outside the main table: drawn, never tested), the
        # update-count control (first warm start only) and, in the CPU profile, the sweeps (first warm start only:
        # docs/preregistrations.md §7.17-§7.18)
        left_out = {rid for rid in profile.runs if parse_run_id(rid)["env"] not in PAPER_MAIN_ENVS
                    or parse_run_id(rid)["study"] == "fixedmb"
                    or (not profile.realization_sweeps and parse_run_id(rid)["study"] in SWEEP_STUDIES)}
        assert left_out
        assert entry["set"] == list(realization.OVERRIDES) and set(entry["train"]) == set(profile.runs) - left_out
        first_paths = {v["path"] for v in profile.warm_starts().values()}
        second_paths = {v["warm_start"] for v in entry["train"].values()}
        kept_paths = {profile.warm_start_keys[rid] for rid in entry["train"]}
        assert second_paths.isdisjoint(first_paths) and len(second_paths) == len(kept_paths)
        assert {v["path"] for v in entry["warm_starts"].values()} == second_paths
        rid = next(iter(profile.runs))
        second = apply_overrides(profile.config(rid), list(realization.OVERRIDES))
        assert second.warm_start.seed != profile.config(rid).warm_start.seed
        assert dataclasses.replace(second, warm_start=profile.config(rid).warm_start) == profile.config(rid)
        assert list(entry["notebooks"]) == [nb for nb in NOTEBOOK_STUDIES if nb != "01_template_collapse"]
        assert all(v == {"params": parameters_key(nb)} for nb, v in entry["notebooks"].items())
    assert build("smoke").realization_sweeps and not build("cpu").realization_sweeps


def test_a_profile_without_warm_starts_realizes_on_another_set_of_training_prompts():
    profile = build("paper")
    entry = profile.params()["pipeline"]["realization"]
    assert profile.config(next(iter(profile.runs))).warm_start.steps == 0
    assert entry["set"] == list(realization.NO_WARM_START_OVERRIDES) and entry["label"] == realization.NO_WARM_START_LABEL
    assert entry["warm_starts"] == {}  # its runs start from the base model's markers, which the first stages build
    first = {v["path"] for v in profile.warm_starts().values()}
    assert {v["warm_start"] for v in entry["train"].values()} <= first
    rid = next(iter(profile.runs))
    second = apply_overrides(profile.config(rid), list(realization.NO_WARM_START_OVERRIDES))
    assert second.rollout.train_seed >= 20_000_000 > profile.config(rid).rollout.train_seed + 1_000_000


def test_read_realization_from_the_committed_params_and_a_file_without_it(tmp_path):
    second = realization.read_realization(REPO / "params.yaml")
    assert second.overrides == realization.OVERRIDES and second.runs_root == realization.RUNS_ROOT
    cfg = second.config("frozenlake__grpo__none__main__s0", REPO / "params.yaml")
    assert cfg.warm_start.seed == 1
    old = tmp_path / "params.yaml"
    old.write_text("base: {}\nruns: {}\npipeline: {profile: cpu}\n")
    with pytest.raises(ConfigError, match="pipeline.realization=None"):
        realization.read_realization(old)


def test_dvc_yaml_trains_the_second_realization_and_decides_the_claims_from_both():
    stages = resolved()["stages"]
    params = realization.read_realization(REPO / "params.yaml")
    rid = "frozenlake__grpo__none__main__s0"
    train, first_train = stages[f"{realization.TRAIN_STAGE}@{rid}"], stages[f"train@{rid}"]
    assert train["cmd"] == f"python -m ragen2 train {rid} --realization --cache-dir data/cache --threads 1"
    assert paths(train["outs"]) == [f"{params.runs_root}/{rid}"]
    assert train["deps"][:-1] == first_train["deps"][:-1] and train["deps"][-1] != first_train["deps"][-1]
    assert "pipeline.realization.set" in train["params"]
    assert any(name.startswith("warmstart_realization@") for name in stages)
    for nb in NOTEBOOK_STUDIES:
        name = f"nb_realization@{nb}"
        if nb == "01_template_collapse":
            assert name not in stages
            continue
        stage = stages[name]
        assert f"--fig-dir {realization.FIGURES_ROOT}/{nb}" in stage["cmd"]
        assert stage["deps"][2:] == stages["nb_01_template_collapse"]["deps"][2:]  # the same code deps
        assert f"{realization.FIGURES_ROOT}/{nb}" in paths(stage["outs"])
    claims = stages["claims"]
    assert f"--realization-dir {realization.FIGURES_ROOT} --runs-root data/runs" in claims["cmd"]
    # the pooled verdicts read both realizations' runs (through their input manifests) and notebook 04's tables
    assert {realization.FIGURES_ROOT, "data/inputs", "data/realization/inputs", "ragen2/repro",
            "paper_figures/table_rv_quartiles.csv"} <= set(claims["deps"])
    assert paths(claims["outs"]) == ["paper_figures/claims.csv", f"paper_figures/{realization.CHECK_FILE}",
                                     "paper_figures/table_power.csv", "paper_figures/table_power.md",
                                     "paper_figures/table_preconditions.csv", "paper_figures/table_preconditions.md"]
