"""Experiment profiles: valid configs, run ids, the committed params.yaml and the time estimate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragen2.__main__ import main
from ragen2.config import RunConfig, from_dict, load_config, run_ids, to_dict
from ragen2.repro import regime_map
from ragen2.repro.profiles import (
    ALGOS,
    PAPER_MAIN_ENVS,
    PROFILE_NAMES,
    S_PER_COMMITTED_RUN,
    SLIPS,
    build,
    estimate,
    in_realization_check,
)
from ragen2.repro.run_ids import filter_tag, fmt_value, parse_run_id, run_id

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


@pytest.fixture(scope="module")
def profiles():
    return {name: build(name) for name in PROFILE_NAMES}


def test_every_profile_builds_strict_configs(profiles):
    for name, profile in profiles.items():
        assert set(profile.base) == set(to_dict(RunConfig())), name
        from_dict(RunConfig, profile.base)
        for rid in profile.runs:
            cfg = profile.config(rid)
            parts = parse_run_id(rid)
            assert (parts["env"], parts["algo"], parts["seed"]) == (cfg.env.name, cfg.trainer.algo, cfg.seed), rid


def test_run_ids_round_trip_and_reject_bad_parts():
    rid = run_id("frozenlake", "dr_grpo", filter_tag("top_p", 0.9), f"slip{fmt_value(0.05)}", 3)
    assert rid == "frozenlake__dr_grpo__topp0p9__slip0p05__s3"
    assert parse_run_id(rid) == {"env": "frozenlake", "algo": "dr_grpo", "filter_tag": "topp0p9", "study": "slip",
                                 "study_value": 0.05, "seed": 3}
    with pytest.raises(ValueError, match="'a.b'"):
        run_id("a.b", "ppo", "none", "main", 0)
    with pytest.raises(ValueError, match="-1"):
        fmt_value(-1)
    with pytest.raises(ValueError, match="not of the form"):
        parse_run_id("nope")


def test_cpu_profile_has_the_designed_studies(profiles):
    cpu = profiles["cpu"]
    parts = [parse_run_id(r) for r in cpu.runs]
    studies = {p["study"] for p in parts}
    assert studies == {"main", "testbed", "mech", "slip", "ent", "kl", "toppsweep"}
    slips = sorted({p["study_value"] for p in parts if p["study"] == "slip"})
    assert len(slips) >= 2 and any(0.05 <= s <= 0.5 for s in slips) and set(slips) <= set(SLIPS)
    assert {0.0, 1.0} <= set(slips)
    for rid in cpu.runs:  # slip = 1 - success_rate, exactly
        p = parse_run_id(rid)
        if p["study"] == "slip":
            assert cpu.config(rid).env.kwargs["success_rate"] == pytest.approx(1 - p["study_value"])
    mech = [cpu.config(r) for r in cpu.runs if parse_run_id(r)["study"] == "mech"]
    assert all(c.trainer.entropy_scope == "reasoning" and c.trainer.kl_coef == 0 for c in mech)
    assert all(c.trainer.steps >= 150 for c in mech)
    assert {c.filter.strategy for c in mech} == {"top_p", "top_k"}
    # the mechanism study is the regime map's confirming cell (its own warm start), at its own length and seeds
    confirm = regime_map.build()
    cell = [confirm.config(r) for r in confirm.runs if parse_run_id(r)["study"] == regime_map.CONFIRM_STUDY]
    setting = {(c.warm_start.steps, c.warm_start.template_fraction, c.trainer.entropy_coef, c.trainer.actor_lr,
                c.trainer.algo) for c in cell}
    assert len(setting) == 1
    assert {(c.warm_start.steps, c.warm_start.template_fraction, c.trainer.entropy_coef, c.trainer.actor_lr,
             c.trainer.algo) for c in mech} == setting
    # every slip rate starts from the base warm start; the main study's cells are the 2 % point, not retrained
    slip_cfgs = [cpu.config(r) for r in cpu.runs if parse_run_id(r)["study"] == "slip"]
    assert all(c.warm_start.env_kwargs == {"success_rate": 0.98} for c in slip_cfgs)
    assert 0.02 not in slips
    # the base's, the mechanism study's, one per other environment of the main table and DeepCoder's (the testbed)
    assert sorted(cpu.config(w["run"]).env.name for w in cpu.warm_starts().values()) == [
        "countdown", "deepcoder", "frozenlake", "frozenlake", "metamathqa", "sokoban"]
    main_grpo = cpu.config("frozenlake__grpo__none__main__s0")
    slip_grpo = cpu.config("frozenlake__grpo__none__slip0p2__s0")
    assert (main_grpo.trainer, main_grpo.filter) == (slip_grpo.trainer, slip_grpo.filter)
    # every cell of the main comparison has >= 4 paired seeds, same env seeds in both conditions
    main = [p for p in parts if p["study"] in ("main", "mech") and p["study_value"] != 0]
    cells: dict[tuple, set] = {}
    for p in main:
        cells.setdefault((p["env"], p["algo"], p["filter_tag"], p["study"]), set()).add(p["seed"])
    assert all(len(seeds) >= 4 for seeds in cells.values())
    grad = [cpu.config(r).grad_analysis.enabled for r in cpu.runs if parse_run_id(r)["study"] == "main"
            and parse_run_id(r)["algo"] in ("ppo", "grpo")]
    assert grad and all(grad)


def test_cpu_testbed_completes_the_papers_main_table(profiles):
    """Sokoban, Countdown and MetaMathQA beside FrozenLake, four algorithms, Top-k beside Top-p for PPO on every
    environment, 4 paired seeds in every PPO cell and FrozenLake's, 2 in the other non-PPO cells (docs/method.md
    §7.13, third amendment: the budget's cut, never fewer environments); only C1 reads these runs."""
    cpu = profiles["cpu"]
    cells: dict[tuple, set] = {}
    for rid in cpu.runs:
        p = parse_run_id(rid)
        if p["study"] in ("main", "testbed") and p["env"] in PAPER_MAIN_ENVS:
            cells.setdefault((p["env"], p["algo"], p["filter_tag"]), set()).add(p["seed"])
    assert {env for env, _, _ in cells} == set(PAPER_MAIN_ENVS)
    for env in PAPER_MAIN_ENVS:
        assert {a for e, a, f in cells if e == env} == set(ALGOS)
        assert all(cells[(env, "ppo", f)] == {0, 1, 2, 3} for f in ("none", "topp0p9", "topk0p25"))
        for algo in ALGOS:  # paired: the same seeds under both conditions
            seeds = {0, 1, 2, 3} if algo == "ppo" or env == "frozenlake" else {0, 1}
            assert cells[(env, algo, "none")] == cells[(env, algo, "topp0p9")] == seeds
    assert not any(f == "topk0p25" and a != "ppo" for _, a, f in cells)
    testbed = [cpu.config(r) for r in cpu.runs if parse_run_id(r)["study"] == "testbed"]
    assert not any(c.collapse.enabled or c.grad_analysis.enabled for c in testbed)
    kwargs = {c.env.name: c.env.kwargs for c in testbed}
    assert kwargs["countdown"] == {"min_numbers": 2, "max_numbers": 2}
    assert kwargs["metamathqa"] == {"difficulty": 1, "max_attempts": 1} and kwargs["sokoban"] == {}
    tb_main = cpu.config("sokoban__grpo__none__testbed__s0")
    fl_main = cpu.config("frozenlake__grpo__none__main__s0")
    assert (tb_main.trainer, tb_main.rollout, tb_main.warm_start) == (fl_main.trainer, fl_main.rollout,
                                                                       fl_main.warm_start)
    assert "&id" not in cpu.yaml()  # every run's overrides are its own (no YAML anchors)


def test_cpu_testbed_draws_deepcoder_success_curves_in_the_first_realization_only(profiles):
    """DeepCoder at difficulty 1 with GRPO under the three filters, 2 paired seeds (docs/method.md §7.13, second
    amendment); outside the main table, so the realization check does not re-train it."""
    cpu = profiles["cpu"]
    curve = {rid: parse_run_id(rid) for rid in cpu.runs if parse_run_id(rid)["env"] not in PAPER_MAIN_ENVS}
    assert {(p["env"], p["algo"], p["study"]) for p in curve.values()} == {("deepcoder", "grpo", "testbed")}
    assert {(p["filter_tag"], p["seed"]) for p in curve.values()} == {
        (f, s) for f in ("none", "topp0p9", "topk0p25") for s in (0, 1)}
    cfgs = [cpu.config(rid) for rid in curve]
    assert all(c.env.kwargs == {"difficulty": 1} and not c.collapse.enabled for c in cfgs)
    base = cpu.config("sokoban__grpo__none__testbed__s0")
    assert all((c.trainer, c.rollout) == (base.trainer, base.rollout) for c in cfgs if c.filter == base.filter)
    assert not any(in_realization_check(rid) for rid in curve)
    assert set(cpu.realization()["train"]) == set(cpu.runs) - set(curve)


def test_paper_profile_uses_the_papers_setup(profiles):
    paper = profiles["paper"]
    parts = [parse_run_id(r) for r in paper.runs]
    assert sorted({p["study_value"] for p in parts if p["study"] == "slip"}) == sorted(SLIPS)
    assert {p["algo"] for p in parts if p["study"] == "main"} == {"ppo", "grpo", "dapo", "dr_grpo"}
    cfg = paper.config(next(iter(paper.runs)))
    assert cfg.policy.name_or_path == "Qwen/Qwen2.5-3B" and cfg.warm_start.steps == 0
    assert (cfg.trainer.steps, cfg.rollout.env_groups, cfg.rollout.group_size) == (400, 8, 16)
    assert cfg.rollout.backend == "vllm" and cfg.trainer.actor_lr == pytest.approx(1e-6)


def test_paper_profile_covers_the_papers_grid(profiles):
    """Main table: 4 envs x 4 algorithms x {none, Top-p} + Top-k PPO; success curves: SearchQA, WebShop, DeepCoder
    x {none, Top-p, Top-k}; every study the notebooks read; the turns and limits of each env's defaults."""
    from ragen2.repro.notebook_stages import NOTEBOOK_STUDIES
    from ragen2.repro.profiles import PAPER_CURVE_ENVS, PAPER_MAIN_ENVS

    paper = profiles["paper"]
    parts = [parse_run_id(r) for r in paper.runs]
    assert {p["study"] for p in parts} == {s for studies in NOTEBOOK_STUDIES.values() for s in studies} - {"testbed"}
    main = {(p["env"], p["algo"], p["filter_tag"]) for p in parts if p["study"] == "main"}
    expected = {(env, algo, tag) for env in PAPER_MAIN_ENVS for algo in ("ppo", "grpo", "dapo", "dr_grpo")
                for tag in ("none", "topp0p9")}
    expected |= {(env, "ppo", "topk0p25") for env in PAPER_MAIN_ENVS}
    expected |= {(env, algo, tag) for env, algo in PAPER_CURVE_ENVS for tag in ("none", "topp0p9", "topk0p25")}
    assert main == expected and len(paper.runs) == 93
    for rid in paper.runs:
        cfg = paper.config(rid)
        assert (cfg.rollout.max_turns, cfg.rollout.max_actions_per_turn, cfg.rollout.max_actions_per_traj) == (0, 0, 0)
        assert cfg.trainer.precision == "bf16" and cfg.trainer.gradient_checkpointing
        assert cfg.rollout.vllm_gpu_memory_utilization == pytest.approx(0.2)
        micro = (cfg.trainer.micro_batch_size, cfg.trainer.logprob_micro_batch_size)
        assert micro == ((1, 2) if cfg.trainer.algo == "ppo" else (2, 4)), rid
        curve = cfg.env.name in dict(PAPER_CURVE_ENVS)
        assert (cfg.rollout.env_groups, cfg.rollout.group_size) == ((16, 8) if curve else (8, 16)), rid
        assert cfg.filter.top_p_mode == ("linear" if curve else "softmax"), rid
    mech = [paper.config(r) for r in paper.runs if parse_run_id(r)["study"] == "mech"]
    assert len(mech) == 16 and {(c.env.name, c.trainer.algo) for c in mech} == {("frozenlake", "grpo")}
    assert {c.trainer.entropy_coef for c in mech} == {0.0, 0.02}
    assert all(c.trainer.entropy_scope == "reasoning" and c.trainer.kl_coef == 0 for c in mech)
    assert {(c.trainer.save_freq, c.trainer.keep_every) for c in mech} == {(200, 200)}  # the mid-run checkpoint


def test_profile_run_ids_are_the_built_profiles_run_ids(profiles):
    from ragen2.repro.profiles import profile_run_ids

    for name, profile in profiles.items():
        assert profile_run_ids(name) == list(profile.runs)


def test_warm_starts_are_shared_and_every_run_has_one(profiles):
    for profile in profiles.values():
        params = profile.params()
        ws = params["pipeline"]["warm_starts"]
        assert set(params["pipeline"]["train"]) == set(params["runs"])
        paths = {v["path"] for v in ws.values()}
        assert {v["warm_start"] for v in params["pipeline"]["train"].values()} == paths
        assert len(ws) < len(params["runs"])  # shared, not one per run


def test_estimate_is_computed_from_the_grid(profiles):
    paper = profiles["paper"]
    rates = {"frozenlake": 1.0, "sokoban": 2.0, "metamathqa": 1.0, "countdown": 1.0, "searchqa": 1.0, "webshop": 1.0,
             "deepcoder": 1.0}
    est = estimate(paper, s_per_step=rates, s_per_warm_start_step=0.5, workers=2, s_per_notebook=10.0)
    steps = dict.fromkeys(rates, 0)
    for rid in paper.runs:
        cfg = paper.config(rid)
        steps[cfg.env.name] += cfg.trainer.steps
    assert est.train_s == pytest.approx(sum(steps.values()) + steps["sokoban"])
    assert est.warm_start_s == 0  # no warm start in the paper profile
    assert est.commit_s == pytest.approx(S_PER_COMMITTED_RUN * len(paper.runs))  # on one process
    assert est.total_s == pytest.approx((est.train_s + 10.0 * len(paper.notebooks)) / 2 + est.commit_s)
    with pytest.raises(ValueError, match="no measured s/step"):
        estimate(paper, s_per_step={"frozenlake": 1.0})
    cpu = estimate(profiles["cpu"])  # at the measured rates; six warm starts, the base's, the mechanism study's and
    # the testbed's four; the realization check re-trains every run but DeepCoder's with its own five warm starts and
    # runs seven notebooks, then the claims stage: with `make setup` (about 2.3 minutes) all must fit the 90 minutes
    assert cpu.warm_starts == 6 and cpu.realization_runs == cpu.runs - 6
    assert cpu.total_s == pytest.approx((cpu.train_s + cpu.warm_start_s + cpu.notebooks_s) / 2 + cpu.commit_s)
    assert cpu.realization_notebooks_s == pytest.approx(cpu.notebooks_s * 7 / 8)  # no notebook 01
    assert cpu.total_s < cpu.pipeline_s < 2 * cpu.total_s + cpu.claims_s + cpu.fixed_s
    assert cpu.pipeline_s + 2.3 * 60 <= 90 * 60
    with pytest.raises(ValueError, match="'dapo'"):
        estimate(profiles["cpu"], s_per_step={"frozenlake": {"ppo": 1.0, "grpo": 1.0}})


def test_committed_params_equal_profile_cpu(profiles):
    """No drift: params.yaml is exactly `python -m ragen2 profile cpu` output."""
    assert PARAMS.read_text() == profiles["cpu"].yaml()
    assert len(run_ids(PARAMS)) == len(profiles["cpu"].runs)


def test_cli_writes_a_loadable_params_file(tmp_path, capsys):
    out = tmp_path / "sub" / "params.yaml"
    assert main(["profile", "smoke", "--write", str(out), "--estimate"]) == 0
    assert "estimate (smoke)" in capsys.readouterr().out
    data = yaml.safe_load(out.read_text())
    assert data["pipeline"]["profile"] == "smoke"
    for rid in run_ids(out):
        load_config(rid, out)
