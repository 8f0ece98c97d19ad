"""Tests for the decline study's design (ragen2/repro/decline_study.py, docs/preregistrations.md §7.19): its runs,
their configs beside the main pipeline's, and which runs a later session still has to train."""

from __future__ import annotations

import yaml

from ragen2.config import flatten, to_dict
from ragen2.fileio import write_json_atomic
from ragen2.repro import decline_study as ds
from ragen2.repro.profiles import build as build_profile
from ragen2.repro.run_ids import parse_run_id
from tests.repro.dvcyaml import REPO


def test_the_study_has_16_pairs_per_algorithm_over_two_warm_starts_in_training_order():
    ids = ds.run_ids()
    assert len(ids) == len(set(ids)) == 64
    cells = [ds.cell_of(rid) for rid in ids]
    assert [c[0] for c in cells] == ["grpo"] * 32 + ["ppo"] * 32  # GRPO's chunks first (§7.19's order)
    assert [c[1] for c in cells[:32]] == [0] * 16 + [1] * 16
    for first, second in zip(ids[::2], ids[1::2]):  # each seed's no-filter run beside its Top-p run
        a, b = parse_run_id(first), parse_run_id(second)
        assert (a["filter_tag"], b["filter_tag"]) == ("none", "topp0p9")
        assert (a["algo"], a["study_value"], a["seed"]) == (b["algo"], b["study_value"], b["seed"])
    assert {parse_run_id(r)["seed"] for r in ids} == set(range(8))


def test_each_run_is_the_main_pipelines_run_trained_for_200_steps():
    """The GRPO runs of the first warm start differ from the main pipeline's runs of the same seed and filter only in
    their length (so their first 100 steps are expected to match bit for bit); the others in the algorithm and the
    warm start's SFT seed (the realization check's) as their ids say."""
    study, main = ds.build(), build_profile("cpu")
    for rid in study.runs:
        algo, warm, tag = ds.cell_of(rid)
        seed = parse_run_id(rid)["seed"]
        twin = f"frozenlake__grpo__{tag}__main__s{seed}"
        got, want = flatten(to_dict(study.config(rid))), flatten(to_dict(main.config(twin)))
        diff = {k: got[k] for k in got if got[k] != want[k]}
        expected = {"trainer.steps": ds.STEPS}
        if algo != "grpo":
            expected["trainer.algo"] = algo
        if warm:
            expected["warm_start.seed"] = warm
        assert diff == expected, rid
    first = {key for key, ws in study.warm_starts().items() if ds.cell_of(ws["run"])[1] == 0}
    assert len(study.warm_starts()) == 2 and first == set(main.warm_starts())  # the main pipeline's warm start


def test_the_committed_params_file_is_the_one_the_module_writes():
    assert (REPO / ds.PARAMS).read_text() == ds.params_yaml(ds.build())
    params = yaml.safe_load((REPO / ds.PARAMS).read_text())
    assert list(params["runs"]) == ds.run_ids()
    assert params["pipeline"]["bundle_runs"] == ds.BUNDLE_RUNS


def test_a_run_is_finished_when_its_bundle_part_has_its_config_and_every_step(tmp_path):
    profile = ds.build(smoke=True)
    first, second = list(profile.runs)[:2]
    steps = profile.config(first).trainer.steps
    for rid, done in ((first, steps), (second, steps - 1)):
        write_json_atomic(tmp_path / rid / "config.json", to_dict(profile.config(rid)))
        write_json_atomic(tmp_path / rid / "summary.json", {"steps_completed": done, "steps_planned": steps})
    assert ds.bundled_runs(profile, tmp_path) == [first]  # the second stopped early: trained again
    write_json_atomic(tmp_path / first / "config.json", {**to_dict(profile.config(first)), "seed": 99})
    assert ds.bundled_runs(profile, tmp_path) == []  # a changed config is another run
    assert ds.bundled_runs(profile, tmp_path / "none") == []


def test_the_smoke_profile_is_the_same_design_cut_to_two_steps():
    smoke = ds.build(smoke=True)
    assert list(smoke.runs) == ds.run_ids(smoke=True)
    assert {ds.cell_of(r)[0] for r in smoke.runs} == {"grpo", "ppo"}
    assert all(smoke.config(r).trainer.steps == 2 for r in smoke.runs)
