"""The compute floor of ``step_over_floor``: its layout of a batch, its passes, and the figure's plumbing."""

from __future__ import annotations

import pytest
import torch

from ragen2.bench.cases import QUICK, make_context, profile_run_config
from ragen2.bench.floor import (
    StepFloor,
    bench_step_over_floor,
    decode_floor,
    floor_problem,
    profile_config,
    training_s,
    update_floor,
)
from ragen2.bench.profile_runs import profile_run_id
from ragen2.rollout.types import RolloutBatch
from tests.trainer._tiny import tiny_lm, trajectories


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return make_context(tmp_path_factory.mktemp("floor-cache"))


def grouped(scores_by_group: list[list[float]], seed: int) -> RolloutBatch:
    """Synthetic trajectories whose rows share their group's 4-token prompt, as a rollout's do."""
    rows = trajectories(scores_by_group, seed)
    for traj in rows:
        traj.input_ids[:4] = [1 + traj.group, 2, 3, 4]
    return RolloutBatch(rows, env_groups=len(scores_by_group), group_size=len(scores_by_group[0]))


def test_floor_problem_keeps_each_prompt_once_and_no_padding():
    batch = grouped([[1.0, 0.0, 1.0], [0.0, 0.5, 1.0]], seed=3)
    problem = floor_problem(batch)
    assert len(problem.prompts) == 2 and problem.group_of_row.tolist() == [0, 0, 0, 1, 1, 1]
    lengths = [t.response_length for t in batch.trajectories]
    assert [len(g) for g in problem.generated] == lengths
    assert problem.responses.shape == (6, round(sum(lengths) / 6))
    assert problem.distinct_tokens == 4 * 2 + problem.responses.numel()
    for row, traj in zip(problem.generated, batch.trajectories):
        assert row == traj.input_ids[4:]  # the trained tokens after the 4-token prompt


def test_floor_passes_run_the_model_once_per_position_and_reach_every_weight():
    model = tiny_lm()
    batch = grouped([[1.0, 0.0], [0.0, 0.5]], seed=4)
    problem = floor_problem(batch)
    assert decode_floor(model, problem, pad_id=0) == max(len(g) for g in problem.generated)
    update_floor(model.base_model, problem, 0, model.get_output_embeddings())
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_training_seconds_leave_out_the_measurement_phases_only():
    phases = {"step_s": 1.0, "rollout_s": 0.3, "update_s": 0.4, "diagnostics_s": 0.05, "grad_analysis_s": 0.1,
              "validation_s": 0.05, "other_s": 0.1}
    assert training_s(phases) == pytest.approx(0.8)  # rollout + update + other


def test_profile_config_refuses_another_profile(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("base: {}\nruns: {frozenlake__grpo__none__main__s0: {}}\npipeline: {profile: smoke}\n")
    with pytest.raises(ValueError, match="smoke"):
        profile_config("grpo", params)


def test_an_algorithm_without_a_main_run_trains_the_first_main_runs_config(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("base: {trainer: {algo: grpo}}\nruns: {frozenlake__grpo__none__main__s0: {}}\n"
                      "pipeline: {profile: cpu}\n")
    assert profile_run_id("grpo", params) == ("frozenlake__grpo__none__main__s0", ())
    assert profile_run_id("ppo", params) == ("frozenlake__grpo__none__main__s0", ("trainer.algo=ppo",))
    assert profile_config("ppo", params).trainer.algo == "ppo"
    params.write_text("base: {}\nruns: {other: {}}\npipeline: {profile: cpu}\n")
    with pytest.raises(ValueError, match="declares neither"):
        profile_config("ppo", params)
    with pytest.raises(ValueError, match="does not exist"):
        profile_config("grpo", tmp_path / "missing.yaml")


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_step_over_floor_times_a_whole_run_against_its_floor(ctx, algo, one_torch_thread):
    cfg = profile_run_config(algo, QUICK, params=None)
    floor = StepFloor(cfg, ctx.policy_path)
    assert (floor.models.critic is not None) == (algo == "ppo")
    times = floor.time()
    assert times.update_s > 0 and times.rollout_s > 0
    summary = bench_step_over_floor(cfg, ctx.policy_path, reps=1, floor_repeats=1).summary()
    assert summary["median"] > 0 and summary["algo"] == algo and summary["steps"] == 2
    assert set(summary["step_phases_s"]) == {"step_s", "rollout_s", "update_s", "diagnostics_s", "grad_analysis_s",
                                             "validation_s", "other_s"}
    assert 0 < summary["mi_diagnostics_share"] < 1
    assert 0 < summary["training_over_floor"] < summary["median"]  # one repetition: the same run over the same floor
    assert summary["floor_sizes"]["rows"] == cfg.rollout.env_groups * cfg.rollout.group_size
