"""``grpo_step_speedup_vs_trl_native``: TRL's ``GRPOTrainer`` with its own generation against a ragen2 GRPO step.

The task is the CPU profile's single-turn FrozenLake: each prompt is the environment's first observation as ragen2
renders it (the chat-templated system message and first user turn, then the assistant header and ``<think>``, the
generation prompt :func:`ragen2.rollout.collect_rollouts` gives the policy), and the reward plays the completion in
a fresh environment reset with the prompt's seed (ragen2's parsing, action budget and format penalty: the score a
ragen2 trajectory gets). TRL generates with the model's own ``generate`` (no vLLM, no ragen2 code inside its step);
ragen2 runs its rollout and update. Both sides: the same policy, prompts x completions per step, sampling
temperature, ``max_new_tokens``, learning rate, micro-batch, and one optimiser step per training step; no reference
model (KL off), no filtering, no diagnostics or validation. The steps are interleaved from TRL's step callbacks
(:func:`ragen2.bench.steps.run_trl_interleaved`); TRL's time is its trainer's wall time between step ends.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ragen2 import envs
from ragen2.config import RunConfig
from ragen2.rollout.collect import execute_actions
from ragen2.rollout.parse import parse_response
from ragen2.rollout.prompt import THINK_OPEN, conversation, render, resolve_limits, system_prompt, turn_block


def first_prompts(cfg: RunConfig, tokenizer, seeds: list[int]) -> list[str]:
    """The generation prompt of each seed's first turn, as ragen2's rollout renders it."""
    out = []
    for seed in seeds:
        env = envs.make(cfg.env.name, **cfg.env.kwargs)
        obs, _ = env.reset(seed=int(seed))
        limits = resolve_limits(cfg.rollout, env)
        messages = conversation(system_prompt(env, limits.max_actions_per_traj),
                                [turn_block(1, obs, limits.max_actions_per_traj, limits.max_tokens_hint)], [])
        out.append(render(tokenizer, messages, generation=True))
    return out


class EnvReward:
    """A TRL reward function that plays each completion in the environment (one turn) and returns its score:
    the environment reward plus ``format_penalty`` when the reply had no valid action or an invalid one.

    It also keeps the completions' scores and lengths in characters (the run's details)."""

    __name__ = "frozenlake_env_reward"

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.scores: list[float] = []

    def __call__(self, prompts, completions, seed, **kwargs) -> list[float]:
        out = []
        for completion, env_seed in zip(completions, seed):
            env = envs.make(self.cfg.env.name, **self.cfg.env.kwargs)
            env.reset(seed=int(env_seed))
            limits = resolve_limits(self.cfg.rollout, env)
            parsed = parse_response(THINK_OPEN + completion, limits.max_actions_per_turn)
            outcome = execute_actions(env, parsed.actions, limits.max_actions_per_traj)
            out.append(outcome.env_reward + self.cfg.rollout.format_penalty * int(outcome.penalised))
        self.scores.extend(out)
        return out


def make_native_trainer(policy_path: Path, cfg: RunConfig, max_steps: int, out_dir: Path, callbacks: list,
                        reward: EnvReward):
    """A plain ``trl.GRPOTrainer`` on ``cfg``'s task and shape (module docstring): ``env_groups`` prompts x
    ``group_size`` completions a step, micro-batches of ``trainer.micro_batch_size``, one optimiser step a step."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    rc, tc = cfg.rollout, cfg.trainer
    rows = rc.env_groups * rc.group_size
    micro = min(tc.micro_batch_size, rows)
    if rows % micro:
        raise ValueError(f"{rows} rows per step do not split into micro-batches of {micro}")
    args = GRPOConfig(
        output_dir=str(out_dir), per_device_train_batch_size=micro, gradient_accumulation_steps=rows // micro,
        num_generations=rc.group_size, max_completion_length=rc.max_new_tokens, temperature=rc.temperature,
        beta=0.0, loss_type="grpo", learning_rate=tc.actor_lr, weight_decay=tc.weight_decay,
        max_grad_norm=tc.grad_clip, max_steps=max_steps, logging_steps=max_steps + 1, report_to="none", bf16=False,
        use_cpu=True, gradient_checkpointing=False, seed=cfg.seed, save_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(policy_path))
    seeds = [rc.train_seed + i for i in range(rc.env_groups * (max_steps + 1))]
    dataset = Dataset.from_dict({"prompt": first_prompts(cfg, tokenizer, seeds), "seed": seeds})
    model = AutoModelForCausalLM.from_pretrained(str(policy_path), dtype=torch.float32)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward, args=args,
                          train_dataset=dataset, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # its end-of-training log line; nothing is timed there
    return trainer


def native_run_config(cfg: RunConfig) -> RunConfig:
    """``cfg`` as the comparison runs it on ragen2's side: one optimiser step a step (the whole batch is one
    mini-batch), no KL, no diagnostics."""
    rows = cfg.rollout.env_groups * cfg.rollout.group_size
    return dataclasses.replace(
        cfg, trainer=dataclasses.replace(cfg.trainer, algo="grpo", mini_batch_size=rows, kl_coef=0.0),
        collapse=dataclasses.replace(cfg.collapse, enabled=False),
        grad_analysis=dataclasses.replace(cfg.grad_analysis, enabled=False))


def bench_grpo_step_vs_trl_native(cfg: RunConfig, policy_path: Path, *, reps: int, warmup: int):
    """TRL's GRPO step seconds over ragen2's (rollout + update), per repetition, interleaved."""
    from ragen2.bench.steps import Ragen2Stepper, run_trl_interleaved
    from ragen2.bench.timing import Comparison, Sample
    from ragen2.trainer.update_data import rollout_metrics

    cfg = native_run_config(cfg)
    stepper = Ragen2Stepper(cfg, policy_path)
    ragen2: list[dict[str, float]] = []

    def ragen2_step() -> float:
        times = stepper.step()
        m = rollout_metrics(times.rollout)
        ragen2.append({"rollout_s": times.rollout_s, "update_s": times.update_s, "score": m["rollout/score_mean"],
                       "response_tokens": m["rollout/response_length_mean"]})
        return times.total_s

    reward = EnvReward(cfg)
    trl_s, ragen2_s = run_trl_interleaved(
        lambda steps, out_dir, callbacks: make_native_trainer(policy_path, cfg, steps, out_dir, callbacks, reward),
        ragen2_step, reps=reps, warmup=warmup)
    comparison = Comparison("speedup")
    for base, cand in zip(trl_s, ragen2_s):
        comparison.add(Sample(base), Sample(cand))
    timed = ragen2[warmup:]
    rc = cfg.rollout
    comparison.extra.update(
        prompts=rc.env_groups, completions_per_prompt=rc.group_size, max_new_tokens=rc.max_new_tokens,
        micro_batch_size=min(cfg.trainer.micro_batch_size, rc.env_groups * rc.group_size), policy=str(policy_path),
        trl_step_s=float(np.median(trl_s)), ragen2_step_s=float(np.median(ragen2_s)),
        ragen2_rollout_s=float(np.median([r["rollout_s"] for r in timed])),
        ragen2_update_s=float(np.median([r["update_s"] for r in timed])),
        trl_score_mean=float(np.mean(reward.scores)) if reward.scores else None,
        ragen2_score_mean=float(np.mean([r["score"] for r in ragen2])),
        ragen2_response_tokens_mean=float(np.mean([r["response_tokens"] for r in ragen2])),
        baseline_name="trl GRPOTrainer with its own generation (model.generate), env-playing reward function",
        candidate_name="ragen2 GRPO step (collect_rollouts + prepare_update_batch + update_actor)")
    return comparison
