"""ragen2 text environments inside TRL's ``GRPOTrainer``: a ``rollout_func``, a dataset, a reward.

TRL 1.16 lets a trainer delegate generation to ``rollout_func(prompts, trainer) -> dict``. The
function gets this process's prompt rows, each already repeated ``num_generations`` times, and
returns token ids plus any per-row extras, which TRL passes to the reward functions as keyword
arguments. :func:`make_env_rollout_func` builds such a function that plays whole multi-turn episodes
of a ragen2 environment with :func:`ragen2.rollout.collect_rollouts` (the same agent loop, prompts,
parsing, format penalty and context cap as the native trainer) and flattens each episode into TRL's
prompt/completion layout:

- ``prompt_ids``: the conversation up to the first assistant message (system + first user turn +
  the assistant header);
- ``completion_ids``: everything after it, i.e. every assistant reply (as stored: the rebuilt
  ``<think>...</think><answer>...</answer>``) interleaved with the later user turns (reward feedback
  and the next observation); trailing non-assistant tokens are cut;
- ``env_mask``: 1 on assistant tokens (trained), 0 on environment tokens, which TRL turns into its
  ``tool_mask`` so that observations stay out of the loss and out of the length metrics;
- ``logprobs``: None (no vLLM; the trainer recomputes the old log-probs itself);
- extras per row: ``env_reward`` (the trajectory score: summed env rewards plus format penalties,
  the score the paper's filter uses), ``success`` (0/1) and ``num_turns``.

Group members share the environment seed: :func:`make_env_dataset` stores one ``seed`` per prompt
row, TRL repeats the row ``num_generations`` times, and every repeat resets its own environment
with that seed. TRL hands ``rollout_func`` only the prompts, not the other columns, so the seeds are
read from ``trainer.rollout_rows``, which :class:`ragen2.integrations.trl.SNRFilterGRPOTrainer`
sets for the duration of each generation (its default configuration filters nothing, so it is a
drop-in replacement for ``GRPOTrainer`` here).

>>> rollout_func = make_env_rollout_func("frozenlake", {"success_rate": 1.0}, max_turns=3)  # doctest: +SKIP
>>> trainer = SNRFilterGRPOTrainer(model=model, reward_funcs=env_reward_func, rollout_func=rollout_func,
...                                train_dataset=make_env_dataset("frozenlake", range(64)), ...)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ragen2 import envs
from ragen2.config import EnvConfig, RolloutConfig
from ragen2.rollout.collect import collect_rollouts
from ragen2.rollout.prompt import resolve_limits, system_prompt, turn_block
from ragen2.rollout.types import Trajectory

SEED_COLUMN = "seed"
"""Dataset column holding each prompt's environment seed."""


@dataclass(frozen=True)
class EnvRolloutSettings:
    """Everything :func:`make_env_rollout_func` needs besides the trainer (0 = the env's default)."""

    env_name: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_turns: int = 0
    max_actions_per_turn: int = 0
    max_actions_per_traj: int = 0
    max_new_tokens: int = 64
    """New tokens per turn."""
    max_context_tokens: int = 2048
    """Context cap; the oldest turns are dropped to fit (docs/method.md §2.9)."""
    format_penalty: float = -0.1
    """Added to the trajectory score for every turn without a valid action."""

    def __post_init__(self) -> None:
        if self.env_name not in envs.REGISTRY:
            raise ValueError(f"unknown environment {self.env_name!r}; known: {sorted(envs.REGISTRY)}")
        for name in ("max_turns", "max_actions_per_turn", "max_actions_per_traj"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = env default), got {getattr(self, name)!r}")
        for name in ("max_new_tokens", "max_context_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")

    def env_config(self) -> EnvConfig:
        return EnvConfig(name=self.env_name, kwargs=dict(self.env_kwargs))

    def rollout_config(self) -> RolloutConfig:
        return RolloutConfig(max_turns=self.max_turns, max_actions_per_turn=self.max_actions_per_turn,
                             max_actions_per_traj=self.max_actions_per_traj, max_new_tokens=self.max_new_tokens,
                             max_context_tokens=self.max_context_tokens, format_penalty=self.format_penalty,
                             backend="hf")


def first_prompt_text(settings: EnvRolloutSettings, seed: int) -> str:
    """System prompt and first user turn of an episode started with ``seed``, as plain text."""
    env = envs.make(settings.env_name, **settings.env_kwargs)
    obs, _ = env.reset(seed=int(seed))
    limits = resolve_limits(settings.rollout_config(), env)
    user = turn_block(1, obs, limits.max_actions_per_traj, limits.max_tokens_hint)
    return system_prompt(env, limits.max_actions_per_traj) + "\n" + user


def make_env_dataset(env_name: str, seeds: Iterable[int], env_kwargs: dict[str, Any] | None = None, *,
                     max_actions_per_traj: int = 0):
    """A ``datasets.Dataset`` with one row per environment seed: ``prompt`` (text) and ``seed``.

    The ``prompt`` column is the system prompt plus the first user turn as plain text. TRL logs it
    and requires it, but :func:`make_env_rollout_func` rebuilds the real chat-templated prompt from
    ``seed``, so pass the same ``env_kwargs`` (and ``max_actions_per_traj``) to both.

    Args:
        env_name: a ragen2 registry name (``ragen2.envs.REGISTRY``).
        seeds: environment seeds, one row each (non-negative integers, no duplicates).
        env_kwargs: constructor keyword arguments of the environment.
        max_actions_per_traj: action budget shown in the prompt (0 = the env's default).
    """
    from datasets import Dataset

    seed_list = [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("seeds is empty: the dataset needs at least one environment seed")
    if min(seed_list) < 0:
        raise ValueError(f"seeds must be >= 0, got {min(seed_list)}")
    if len(set(seed_list)) != len(seed_list):
        raise ValueError("seeds contains duplicates; each prompt row needs its own environment seed")
    settings = EnvRolloutSettings(env_name, dict(env_kwargs or {}), max_actions_per_traj=max_actions_per_traj)
    prompts = [first_prompt_text(settings, s) for s in seed_list]
    return Dataset.from_dict({"prompt": prompts, SEED_COLUMN: seed_list})


def env_reward_func(completions: Sequence[Any], env_reward: Sequence[float], **kwargs: Any) -> list[float]:
    """TRL reward function: the trajectory score that the rollout function computed for each row."""
    if len(env_reward) != len(completions):
        raise ValueError(f"{len(env_reward)} env rewards for {len(completions)} completions")
    return [float(r) for r in env_reward]


def trajectory_to_trl(traj: Trajectory) -> tuple[list[int], list[int], list[int]]:
    """Split a trajectory's token sequence into TRL's ``(prompt_ids, completion_ids, env_mask)``.

    The prompt ends right before the first trained (assistant) token; the completion keeps every
    token after it up to the last trained one, with ``env_mask`` equal to the trajectory's loss mask.
    """
    mask = traj.loss_mask
    trained = [i for i, m in enumerate(mask) if m]
    if not trained:
        raise ValueError(f"trajectory of group {traj.group} has no assistant token to train on")
    start, stop = trained[0], trained[-1] + 1
    return list(traj.input_ids[:start]), list(traj.input_ids[start:stop]), [int(m) for m in mask[start:stop]]


def _row_seeds(trainer, num_prompts: int) -> list[int]:
    rows = getattr(trainer, "rollout_rows", None)
    if rows is None:
        raise RuntimeError("the env rollout_func needs the dataset rows (their 'seed' column), which TRL does not "
                           "pass to rollout_func; use ragen2.integrations.trl.SNRFilterGRPOTrainer (its default "
                           "config filters nothing), which exposes them as trainer.rollout_rows")
    if len(rows) != num_prompts:
        raise RuntimeError(f"trainer.rollout_rows has {len(rows)} rows for {num_prompts} prompts")
    missing = [i for i, row in enumerate(rows) if SEED_COLUMN not in row]
    if missing:
        raise ValueError(f"dataset rows {missing[:5]} have no {SEED_COLUMN!r} column; build the dataset with "
                         "make_env_dataset")
    return [int(row[SEED_COLUMN]) for row in rows]


def make_env_rollout_func(env_name: str, env_kwargs: dict[str, Any] | None = None, *, max_turns: int = 0,
                          max_actions_per_turn: int = 0, max_actions_per_traj: int = 0, max_new_tokens: int = 64,
                          max_context_tokens: int = 2048, format_penalty: float = -0.1
                          ) -> Callable[[list, Any], dict[str, list]]:
    """A TRL ``rollout_func`` that plays multi-turn episodes of a ragen2 environment.

    Generation goes through ragen2's default :class:`ragen2.rollout.HFBackend` (the Hugging Face
    model with a KV cache; identical prompts, i.e. a group's first turn, are prefilled once) under
    ``torch.no_grad()`` with the model in eval mode, restoring its train mode afterwards; sampling
    uses ``trainer.temperature`` (TRL's ``top_p``/``top_k``/``min_p`` are not applied) and a seed
    derived from ``args.seed``, the global step and the process index, so a run is reproducible.

    Args:
        env_name: a ragen2 registry name.
        env_kwargs: constructor keyword arguments of the environment.
        max_turns, max_actions_per_turn, max_actions_per_traj: agent-loop limits (0 = env default).
        max_new_tokens: new tokens per turn.
        max_context_tokens: context cap per generation (oldest turns dropped, docs/method.md §2.9).
        format_penalty: added to the score for every turn without a valid action.

    Returns:
        ``rollout_func(prompts, trainer) -> dict`` with ``prompt_ids``, ``completion_ids``,
        ``logprobs`` (None), ``env_mask``, ``env_reward``, ``success`` and ``num_turns`` (module
        docstring).
    """
    settings = EnvRolloutSettings(env_name, dict(env_kwargs or {}), max_turns, max_actions_per_turn,
                                  max_actions_per_traj, max_new_tokens, max_context_tokens, format_penalty)

    def rollout_func(prompts: list, trainer) -> dict[str, list]:
        if getattr(trainer, "use_vllm", False):
            raise ValueError("make_env_rollout_func generates with the HF model itself, not vLLM; set use_vllm=False")
        seeds = _row_seeds(trainer, len(prompts))
        model = trainer.accelerator.unwrap_model(trainer.model)
        sample_seed = (int(trainer.args.seed) * 1_000_003 + int(trainer.state.global_step) * 7919
                       + int(trainer.accelerator.process_index)) % 2**62
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                # group_size=1: one "group" per row, each reset with its row's seed, so the members of
                # a TRL group (equal seeds) share the environment even if a group straddles processes.
                batch = collect_rollouts(model, trainer.processing_class, settings.env_config(),
                                         settings.rollout_config(), seeds, group_size=1,
                                         temperature=float(trainer.temperature), seed=sample_seed)
        finally:
            model.train(was_training)
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "env_mask": [], "logprobs": None}
        for traj in batch.trajectories:
            prompt_ids, completion_ids, env_mask = trajectory_to_trl(traj)
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion_ids)
            out["env_mask"].append(env_mask)
        out["env_reward"] = [float(t.score) for t in batch.trajectories]
        out["success"] = [float(t.success) for t in batch.trajectories]
        out["num_turns"] = [int(t.info["num_turns"]) for t in batch.trajectories]
        return out

    rollout_func.settings = settings  # for introspection and tests
    return rollout_func
