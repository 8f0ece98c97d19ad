"""The TRL peer of a ragen2 GRPO step: ragen2's prompts, an environment-playing reward, and the figure's plumbing."""

from __future__ import annotations

import dataclasses

import pytest

from ragen2 import envs
from ragen2.bench.cases import QUICK, make_context, profile_run_config
from ragen2.bench.trl_native import EnvReward, bench_grpo_step_vs_trl_native, first_prompts, native_run_config
from ragen2.config import EnvConfig
from ragen2.rollout import collect_rollouts


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return make_context(tmp_path_factory.mktemp("trl-native-cache"))


def test_prompts_are_the_rollouts_first_generation_prompts(ctx):
    cfg = profile_run_config("grpo", QUICK, params=None)
    batch = collect_rollouts(ctx.model, ctx.tokenizer, cfg.env, cfg.rollout, [11, 12], group_size=1, temperature=1.0,
                             seed=0)
    assert first_prompts(cfg, ctx.tokenizer, [11, 12]) == [t.turns[0].prompt_text for t in batch.trajectories]


def test_the_reward_plays_the_completion_as_a_rollout_scores_it():
    cfg = profile_run_config("grpo", QUICK, params=None)
    cfg = dataclasses.replace(cfg, env=EnvConfig(name="frozenlake", kwargs={"success_rate": 1.0}))
    env = envs.make("frozenlake", success_rate=1.0)
    env.reset(seed=5)
    moves = []
    while not env.unwrapped.done:
        moves.append(envs.expert_action(env))
        env.step(moves[-1])
    reward = EnvReward(cfg)
    solved = f"a plan</think><answer>{' || '.join(moves)}</answer>"
    scores = reward(["p"] * 3, [solved, "no answer at all", "x</think><answer>Jump</answer>"], seed=[5, 5, 5])
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(cfg.rollout.format_penalty)  # nothing parsed: penalised, no move
    assert scores[2] == pytest.approx(cfg.rollout.format_penalty)
    assert reward.scores == scores


def test_ragen2_runs_one_optimiser_step_a_step_without_kl_or_diagnostics():
    cfg = native_run_config(profile_run_config("ppo", QUICK, params=None))
    assert cfg.trainer.algo == "grpo" and cfg.trainer.kl_coef == 0.0
    assert cfg.trainer.mini_batch_size == cfg.rollout.env_groups * cfg.rollout.group_size
    assert not cfg.collapse.enabled and not cfg.grad_analysis.enabled


def test_the_figure_times_both_trainers_on_the_same_task(ctx, one_torch_thread):
    cfg = profile_run_config("grpo", QUICK, params=None)
    summary = bench_grpo_step_vs_trl_native(cfg, ctx.policy_path, reps=1, warmup=1).summary()
    assert summary["reps"] == 1 and summary["median"] > 0
    assert summary["trl_step_s"] > 0 and summary["ragen2_step_s"] > 0
    assert summary["prompts"] == cfg.rollout.env_groups and summary["completions_per_prompt"] == cfg.rollout.group_size
    assert summary["trl_score_mean"] is not None
