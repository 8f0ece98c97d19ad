"""The multi-turn success curves' pipeline: its runs, their pairing and variants, and its params file."""

from __future__ import annotations

from pathlib import Path

import yaml

from ragen2.repro import multiturn_curves as mc
from ragen2.repro.profiles import own_pipeline_base
from ragen2.repro.run_ids import parse_run_id

REPO = Path(__file__).resolve().parents[2]


def test_build_runs_every_environment_under_three_filters_with_its_seeds():
    profile = mc.build()
    parts = [parse_run_id(r) for r in profile.runs]
    assert {p["study"] for p in parts} == {mc.STUDY}
    for curve in mc.CURVE_ENVS:
        mine = [p for p in parts if p["env"] == curve.env]
        assert {p["algo"] for p in mine} == {curve.algo}
        assert sorted({p["filter_tag"] for p in mine}) == ["none", "topk0p25", "topp0p9"]
        for tag in ("none", "topp0p9", "topk0p25"):
            assert sorted(p["seed"] for p in mine if p["filter_tag"] == tag) == list(range(curve.seeds))
    assert len(profile.runs) == 3 * sum(c.seeds for c in mc.CURVE_ENVS)


def test_runs_are_multi_turn_variants_with_one_action_per_turn_and_no_diagnostics():
    profile = mc.build()
    cpu = own_pipeline_base()
    for rid in profile.runs:
        cfg = profile.config(rid)
        curve = next(c for c in mc.CURVE_ENVS if c.env == cfg.env.name)
        assert cfg.env.kwargs == curve.overrides["env"]["kwargs"]  # the base's FrozenLake kwargs are not inherited
        assert cfg.rollout.max_turns == curve.overrides["rollout"]["max_turns"] > 1
        assert cfg.rollout.max_actions_per_turn == 1
        assert cfg.trainer.steps == mc.STEPS and not cfg.collapse.enabled and not cfg.grad_analysis.enabled
        for key, value in curve.overrides["warm_start"].items():
            assert getattr(cfg.warm_start, key) == value
        # the CPU profile's geometry and filter settings otherwise
        assert (cfg.rollout.env_groups, cfg.rollout.group_size) == (cpu["rollout"]["env_groups"],
                                                                     cpu["rollout"]["group_size"])
        assert cfg.rollout.max_new_tokens == cpu["rollout"]["max_new_tokens"]


def test_pairs_differ_in_the_filter_only():
    profile = mc.build()
    for rid in profile.runs:
        if "__none__" not in rid:
            continue
        base = profile.config(rid)
        top_p = profile.config(rid.replace("__none__", "__topp0p9__"))
        top_k = profile.config(rid.replace("__none__", "__topk0p25__"))
        assert (top_p.filter.strategy, top_p.filter.value, top_p.filter.top_p_mode, top_p.filter.include_zero) == \
            ("top_p", 0.9, "linear", False)
        assert (top_k.filter.strategy, top_k.filter.value) == ("top_k", 0.25)
        assert base.filter.value == 1.0 and base.filter.include_zero
        for twin in (top_p, top_k):
            assert (twin.seed, twin.env, twin.rollout, twin.warm_start, twin.trainer) == \
                (base.seed, base.env, base.rollout, base.warm_start, base.trainer)
            assert profile.warm_start_keys[rid] == profile.warm_start_keys[rid.replace("__none__", "__topp0p9__")]


def test_one_warm_start_per_environment_under_the_pipelines_own_cache():
    profile = mc.build()
    assert len(profile.warm_starts()) == len(mc.CURVE_ENVS)
    assert all(w["path"].startswith(f"{mc.CACHE_DIR}/warm_start/") for w in profile.warm_starts().values())


def test_committed_params_file_is_what_the_profile_writes():
    assert (REPO / mc.PARAMS).read_text() == mc.params_yaml(mc.build())


def test_params_name_the_pipeline_paths_and_have_no_realization_check():
    pipeline = mc.params(mc.build())["pipeline"]
    assert (pipeline["runs_root"], pipeline["cache_dir"], pipeline["dvc_file"]) == (mc.RUNS_ROOT, mc.CACHE_DIR,
                                                                                    mc.DVC_FILE)
    assert "realization" not in pipeline and pipeline["notebooks"] == {"multiturn_curves": {"smoke": False}}


def test_dvc_file_reads_the_pipelines_params_and_paths():
    text = (REPO / mc.DVC_FILE).read_text()
    stages = yaml.safe_load(text)["stages"]
    assert set(stages) == {"warmstart", "train", "notebook", "bundle", "publish"}
    assert stages["publish"]["outs"] == [{"docs/notebooks/10_multiturn_curves.ipynb": {"cache": False}}]
    for name, stage in stages.items():  # the pipeline's own params file, never the paper pipeline's
        if name in ("publish", "bundle"):  # read the executed notebook, the runs
            continue
        params = stage.get("do", stage)["params"]
        assert [next(iter(p)) for p in params] == [mc.PARAMS]
        assert f"--params {mc.PARAMS}" in stage.get("do", stage)["cmd"]
    assert stages["train"]["do"]["outs"] == [f"{mc.RUNS_ROOT}/${{key}}"]
    assert f"--cache-dir {mc.CACHE_DIR}" in stages["train"]["do"]["cmd"]


def test_smoke_build_keeps_the_variants_with_smoke_sizes():
    profile = mc.build(smoke=True)
    assert len(profile.runs) == 3 * len(mc.CURVE_ENVS)
    smoke = own_pipeline_base(smoke=True)
    for rid in profile.runs:
        cfg = profile.config(rid)
        assert cfg.trainer.steps == 2 and cfg.warm_start.steps == smoke["warm_start"]["steps"]
        assert cfg.rollout.max_turns > 1
    assert profile.notebooks == {"multiturn_curves": {"smoke": True}}


def test_variants_table_names_every_environment_and_why():
    table = mc.variants_table()
    assert list(table["env"]) == [c.env for c in mc.CURVE_ENVS]
    assert table["why"].str.len().min() > 20


def test_gains_table_pairs_conditions_by_seed():
    import math

    import pandas as pd

    rows = []
    success = {"none": [0.50, 0.60, 0.70], "top_p": [0.55, 0.70, math.nan], "top_k": [0.40, 0.65, 0.70]}
    for condition, values in success.items():
        for seed, value in enumerate(values):
            rows.append({"env": "searchqa", "algo": "ppo", "condition": condition, "seed": seed, "final_success": value})
    rows.append({"env": "webshop", "algo": "grpo", "condition": "none", "seed": 0, "final_success": 0.25})
    table = mc.gains_table(pd.DataFrame(rows)).set_index("env")
    sqa = table.loc["SearchQA"]
    assert sqa["algorithm"] == "PPO" and sqa["n_none"] == 3
    assert math.isclose(sqa["none_mean"], 60.0) and math.isclose(sqa["none_std"], 10.0)
    # Top-p has no seed-2 run: its differences pair seeds 0 and 1 only
    assert sqa["top_p_minus_none_n"] == 2 and math.isclose(sqa["top_p_minus_none"], 7.5)
    assert sqa["top_k_minus_none_n"] == 3 and math.isclose(sqa["top_k_minus_none"], -5.0 / 3, rel_tol=1e-9)
    assert sqa["top_p_minus_top_k_n"] == 2 and math.isclose(sqa["top_p_minus_top_k"], 10.0)
    shop = table.loc["WebShop"]
    assert shop["n_none"] == 1 and shop["none_mean"] == 25.0 and shop["top_p_minus_none_n"] == 0
    assert math.isnan(shop["top_p_minus_none"])
