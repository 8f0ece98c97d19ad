"""Experiment profiles: valid configs, run ids, the committed params.yaml and the time estimate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragen2.__main__ import main
from ragen2.config import RunConfig, from_dict, load_config, run_ids, to_dict
from ragen2.repro.profiles import (
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


def test_cpu_profile_is_the_screens_learning_regime(profiles):
    """docs/preregistrations.md §7.17-§7.18: FrozenLake single-turn GRPO from the screen's 300-step warm start, 8 x 16,
    100 steps, validation on 512 paired seeds; no filter and Top-p x 8 paired seeds, Top-k x 4, under the paper's
    mini-batch rule, with the gradient decomposition on 6 buckets; the filters under the reference's fixed mini-batch
    x 4 seeds (first warm start); the C7 points top-p 0.5 and entropy 0.01 on 2 seeds."""
    from ragen2.repro import learning_screen

    cpu = profiles["cpu"]
    parts = {rid: parse_run_id(rid) for rid in cpu.runs}
    assert {p["study"] for p in parts.values()} == {"main", "fixedmb", "ent", "toppsweep"}
    screen = learning_screen.build()
    cell = screen.config("frozenlake__grpo__none__screen1__s3")
    for rid in cpu.runs:
        cfg = cpu.config(rid)
        assert (cfg.env, cfg.warm_start) == (cell.env, cell.warm_start), rid
        assert (cfg.trainer.algo, cfg.trainer.steps, cfg.trainer.actor_lr, cfg.trainer.kl_coef) == ("grpo", 100, 1e-4, 0)
        assert (cfg.rollout.env_groups, cfg.rollout.group_size, cfg.rollout.max_turns) == (8, 16, 1)
        assert (cfg.rollout.val_groups, cfg.rollout.val_seed, cfg.rollout.val_temperature) == (512, 123, 0.5)
        rule = "none" if parts[rid]["study"] == "fixedmb" else "keep_rate"
        assert cfg.filter.loss_scaling == rule and cfg.collapse.enabled
    cells: dict[tuple, set] = {}
    for p in parts.values():
        value = None if p["study_value"] != p["study_value"] else p["study_value"]  # NaN: a study without a value
        cells.setdefault((p["study"], p["filter_tag"], value), set()).add(p["seed"])
    assert cells == {("main", "none", None): set(range(8)), ("main", "topp0p9", None): set(range(8)),
                     ("main", "topk0p25", None): {0, 1, 2, 3}, ("fixedmb", "topp0p9", None): {0, 1, 2, 3},
                     ("fixedmb", "topk0p25", None): {0, 1, 2, 3}, ("toppsweep", "topp0p5", None): {0, 1},
                     ("ent", "none", 0.01): {0, 1}}
    # the fixed-mini-batch runs differ from their main twins in the rule alone
    for rid, p in parts.items():
        if p["study"] == "fixedmb":
            twin = to_dict(cpu.config(rid.replace("__fixedmb__", "__main__")))
            twin["filter"]["loss_scaling"] = "none"
            assert to_dict(cpu.config(rid)) == twin, rid
    main = [cpu.config(r) for r, p in parts.items() if p["study"] == "main"]
    assert all(c.grad_analysis.enabled and c.grad_analysis.num_buckets == 6 and c.trainer.entropy_coef == 0.001
               for c in main)
    assert {c.filter.include_zero for c in main if c.filter.strategy == "top_p" and c.filter.value < 1} == {False}
    # both warm starts train the main study; the sweeps and the fixed mini-batch only the first (the budget)
    assert set(cpu.realization()["train"]) == {r for r, p in parts.items() if p["study"] == "main"}
    assert len(cpu.warm_starts()) == 1 and len(cpu.realization()["warm_starts"]) == 1


def test_smoke_main_runs_are_the_cpu_profiles_first_seed_cut_short(profiles):
    """make smoke shows collapse by training the CPU profile's seed-0 main runs for 40 steps: the same warm start,
    environment seeds, rollouts and updates (so the same first 40 steps), only the length and reading cadences
    differ; every other smoke run stays tiny (2 steps)."""
    smoke, cpu = profiles["smoke"], profiles["cpu"]
    main = [rid for rid in smoke.runs if parse_run_id(rid)["study"] == "main"]
    assert main == [f"frozenlake__grpo__{f}__main__s0" for f in ("none", "topp0p9", "topk0p25")]

    def flat(d, prefix=""):
        return {k: v for key, val in d.items()
                for k, v in (flat(val, f"{prefix}{key}.").items() if isinstance(val, dict) and key != "kwargs"
                             else [(f"{prefix}{key}", val)])}

    cadence = {"trainer.steps", "trainer.test_freq", "trainer.save_freq", "trainer.keep_every", "rollout.val_groups",
               "collapse.compute_freq", "grad_analysis.every"}
    for rid in main:
        a, b = flat(to_dict(smoke.config(rid))), flat(to_dict(cpu.config(rid)))
        assert {k for k in a if a[k] != b[k]} == cadence, rid
        assert smoke.config(rid).trainer.steps == 40 and smoke.warm_start_keys[rid] == cpu.warm_start_keys[rid]
    assert {smoke.config(rid).trainer.steps for rid in smoke.runs if rid not in main} == {2}


def test_testbed_curve_runs_are_left_out_of_the_realization_check(profiles):
    """The testbed's success-curve environments (DeepCoder) are drawn and decide no claim, so the realization check
    does not re-train them (docs/method.md §7.13); the smoke profile keeps the testbed's plumbing."""
    smoke = profiles["smoke"]
    curve = {rid for rid in smoke.runs if parse_run_id(rid)["env"] not in PAPER_MAIN_ENVS}
    assert curve and {parse_run_id(r)["study"] for r in curve} == {"testbed"}
    assert not any(in_realization_check(rid) for rid in curve)
    control = {rid for rid in smoke.runs if parse_run_id(rid)["study"] == "fixedmb"}  # first warm start only
    assert control and set(smoke.realization()["train"]) == set(smoke.runs) - curve - control
    assert "&id" not in profiles["cpu"].yaml()  # every run's overrides are its own (no YAML anchors)


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
    # every study but the testbed (its grid is in main here) and the update-count control (the paper's runs use the
    # reference's fixed mini-batch throughout, as its main table did)
    assert {p["study"] for p in parts} == ({s for studies in NOTEBOOK_STUDIES.values() for s in studies}
                                           - {"testbed", "fixedmb"})
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
    cpu = estimate(profiles["cpu"])  # at the measured rates; one warm start; the realization check re-trains the main
    # study's 20 runs (not the sweeps' 4 or the update-count control's 8) from its own warm start and runs seven
    # notebooks, then the claims stage
    assert cpu.warm_starts == 1 and cpu.realization_runs == cpu.runs - 12 == 20
    assert cpu.total_s == pytest.approx((cpu.train_s + cpu.warm_start_s + cpu.notebooks_s) / 2 + cpu.commit_s)
    assert cpu.realization_notebooks_s == pytest.approx(cpu.notebooks_s * 7 / 8)  # no notebook 01
    assert cpu.total_s < cpu.pipeline_s < 2 * cpu.total_s + cpu.claims_s + cpu.fixed_s
    with pytest.raises(ValueError, match="'grpo'"):
        estimate(profiles["cpu"], s_per_step={"frozenlake": {"ppo": 1.0}})


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


def test_gpu_check_measures_the_paper_profiles_micro_batches_and_vllm_share(profiles):
    from ragen2.bench.gpu_check import PROFILE_MICRO_BATCHES, PROFILE_VLLM_SHARE

    paper = profiles["paper"]
    for run in paper.runs:
        cfg = paper.config(run)
        family = "ppo" if cfg.trainer.algo == "ppo" else "grpo"
        assert (cfg.trainer.micro_batch_size, cfg.trainer.logprob_micro_batch_size) == PROFILE_MICRO_BATCHES[family]
        assert cfg.rollout.vllm_gpu_memory_utilization == PROFILE_VLLM_SHARE
