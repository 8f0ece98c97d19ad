"""Re-score a run's policy on many validation seeds: did RL raise success, beyond the noise?

A run validates on ``rollout.val_groups`` env seeds (64 on the CPU profile), one sampled trajectory
each. At 65 % success that is a binomial standard error of about 6 points per validation, as large as
what a 100-step CPU run can gain, so "start vs end" read off ``metrics.jsonl`` cannot tell learning
from noise. This module scores any checkpoint of a run (or the policy it started from) on the
paper's validation size (512 env seeds, docs/method.md §3) times several sampling seeds, *paired*: every
policy sees the same env seeds and sampling seeds, so the difference of two evaluations is the
policies' difference plus far less noise. The expert's success on the same seeds is the ceiling.

:func:`learning_gains` turns one evaluation of the starting policy and the evaluations of the trained
policies (several seeds per algorithm) into the table "did each algorithm raise success by more than
the seed-to-seed spread".

Command line: ``python -m ragen2 evaluate RUN_DIR [--checkpoint latest|initial|STEP] [--episodes 512]
[--sampling-seeds 8] [--temperature T] [--out FILE]`` writes one evaluation; ``python -m ragen2 gains
START.json LABEL=END.json,END.json,... ...`` prints the table of several.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragen2.config import RunConfig

logger = logging.getLogger(__name__)

DEFAULT_EPISODES = 512
"""The paper's validation size (``val.env_groups`` x 1 trajectories)."""
DEFAULT_SAMPLING_SEEDS = 8
"""Trajectories per env seed. With 2, a 1,024-episode score's sampling error (0.7-0.9 points with the env
seeds fixed, FrozenLake and Sokoban) was as large as the seed-to-seed spread of 100-step gains."""


@dataclass
class Evaluation:
    """Successes of one policy, shape ``(len(sampling_seeds), len(env_seeds))``."""

    policy: str
    temperature: float
    env_seeds: list[int]
    sampling_seeds: list[int]
    successes: np.ndarray
    turns: np.ndarray | None = None
    """Turns per episode, same shape as ``successes`` (``None`` in files written before it was recorded)."""
    invalid_turns: np.ndarray | None = None
    """Turns per episode whose reply held no valid action (cut off, unparsable or an unknown action)."""
    response_tokens: np.ndarray | None = None
    """Generated tokens per episode, all turns together."""

    @property
    def success(self) -> float:
        return float(self.successes.mean())

    @property
    def invalid_turn_rate(self) -> float:
        """Share of all turns without a valid action (NaN when not recorded)."""
        return self._per_turn(self.invalid_turns)

    @property
    def tokens_per_turn(self) -> float:
        """Mean generated tokens per turn (NaN when not recorded)."""
        return self._per_turn(self.response_tokens)

    def _per_turn(self, counts: np.ndarray | None) -> float:
        """``counts`` summed over all episodes, divided by all their turns."""
        if self.turns is None or counts is None:
            return float("nan")
        return float(counts.sum() / max(1.0, float(self.turns.sum())))

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`success` over env seeds (each seed's mean over sampling seeds)."""
        per_seed = self.successes.mean(axis=0)
        return float(per_seed.std(ddof=1) / np.sqrt(len(per_seed))) if len(per_seed) > 1 else float("nan")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        """Read back what :meth:`to_dict` wrote."""
        def optional(key: str) -> np.ndarray | None:
            return np.asarray(data[key], dtype=np.float64) if key in data else None

        return cls(str(data["policy"]), float(data["temperature"]), [int(s) for s in data["env_seeds"]],
                   [int(s) for s in data["sampling_seeds"]], np.asarray(data["successes"], dtype=np.float64),
                   optional("turns"), optional("invalid_turns"), optional("response_tokens"))

    def to_dict(self) -> dict[str, Any]:
        out = {"policy": self.policy, "temperature": self.temperature, "success": self.success,
               "stderr": self.stderr, "episodes": int(self.successes.size), "env_seeds": self.env_seeds,
               "sampling_seeds": self.sampling_seeds, "successes": self.successes.astype(int).tolist()}
        if self.turns is not None and self.invalid_turns is not None and self.response_tokens is not None:
            out.update({"invalid_turn_rate": self.invalid_turn_rate, "tokens_per_turn": self.tokens_per_turn,
                        "turns": self.turns.astype(int).tolist(), "invalid_turns": self.invalid_turns.astype(int).tolist(),
                        "response_tokens": self.response_tokens.astype(int).tolist()})
        return out


def evaluation_seeds(cfg: RunConfig, episodes: int = DEFAULT_EPISODES) -> list[int]:
    """``episodes`` env seeds from the run's ``val_seed`` on (its own validation set is the first ones)."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes!r}")
    return [cfg.rollout.val_seed + i for i in range(episodes)]


def load_run_policy(run_dir: str | Path, checkpoint: str = "latest", cache_dir: str | Path = "data/cache"):
    """``(cfg, actor, tokenizer)``: the run's actor at ``checkpoint``, in eval mode.

    ``checkpoint`` is ``"latest"``, ``"mid"``, ``"initial"`` (the policy the run started from: its warm start) or
    a step number whose checkpoint was kept (:func:`ragen2.rundir.checkpoint_path`). An unreadable checkpoint fails
    before any model is built.
    """
    from ragen2.policy import load_policy
    from ragen2.rundir import checkpoint_path, read_config
    from ragen2.trainer.checkpoint import load_checkpoint
    from ragen2.warmstart import initial_policy

    cfg = read_config(run_dir)
    path = checkpoint_path(run_dir, checkpoint)
    actor = None if path is None else load_checkpoint(path)["actor"]
    model, tokenizer = load_policy(initial_policy(cfg, Path(cache_dir)), dtype=cfg.policy.dtype,
                                   device=cfg.policy.device)
    if actor is not None:
        model.load_state_dict(actor)
    model.eval()
    return cfg, model, tokenizer


def evaluate_policy(actor, tokenizer, cfg: RunConfig, *, policy: str, episodes: int = DEFAULT_EPISODES,
                    sampling_seeds: Sequence[int] = tuple(range(DEFAULT_SAMPLING_SEEDS)),
                    temperature: float | None = None,
                    batch_size: int = 128) -> Evaluation:
    """One trajectory per env seed and sampling seed, at ``temperature`` (default: the run's validation one).

    Env seeds are rolled out in batches of ``batch_size``; batch ``b`` of sampling seed ``s`` samples with
    seed ``1000 * s + b``, so the result depends only on the policy and these arguments.
    """
    from ragen2.rollout.collect import collect_rollouts

    temperature = cfg.rollout.val_temperature if temperature is None else float(temperature)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    if len(sampling_seeds) == 0:
        raise ValueError("sampling_seeds is empty: at least one sampling seed is needed")
    env_seeds = evaluation_seeds(cfg, episodes)
    actor.eval()
    per_episode = []  # (success, turns, invalid turns, response tokens), sampling seed by env seed
    for s in sampling_seeds:
        for b, start in enumerate(range(0, len(env_seeds), batch_size)):
            batch = collect_rollouts(actor, tokenizer, cfg.env, cfg.rollout, env_seeds[start:start + batch_size],
                                     group_size=1, temperature=temperature, seed=1000 * int(s) + b,
                                     greedy=temperature == 0)
            per_episode.extend((t.success, len(t.turns), sum(not turn.valid for turn in t.turns), t.response_length)
                               for t in batch.trajectories)
        done = len(per_episode) // len(env_seeds)
        logger.info("evaluate %s: sampling seed %d/%d done (%d episodes)", policy, done, len(sampling_seeds),
                    len(per_episode))
    table = np.asarray(per_episode, dtype=np.float64).reshape(len(sampling_seeds), len(env_seeds), 4)
    return Evaluation(policy, temperature, env_seeds, [int(s) for s in sampling_seeds], table[..., 0],
                      table[..., 1], table[..., 2], table[..., 3])


def expert_success(cfg: RunConfig, episodes: int = DEFAULT_EPISODES) -> float:
    """The expert's success on the same env seeds, under the run's agent-loop limits (the ceiling)."""
    from ragen2 import envs
    from ragen2.rollout.expert import expert_episode
    from ragen2.rollout.prompt import resolve_limits

    env = envs.make(cfg.env.name, **cfg.env.kwargs)
    limits = resolve_limits(cfg.rollout, env)
    return float(np.mean([expert_episode(env, seed, limits).success for seed in evaluation_seeds(cfg, episodes)]))


def paired_gain(start: Evaluation, end: Evaluation) -> float:
    """``end.success - start.success``, checked to be over the same env seeds, sampling seeds and temperature."""
    same = (start.env_seeds == end.env_seeds and start.sampling_seeds == end.sampling_seeds
            and start.temperature == end.temperature)
    if not same:
        raise ValueError(f"{end.policy!r} and {start.policy!r} were not evaluated on the same seeds and temperature "
                         f"({len(end.env_seeds)} vs {len(start.env_seeds)} env seeds, sampling {end.sampling_seeds} vs "
                         f"{start.sampling_seeds}, T {end.temperature} vs {start.temperature})")
    return end.success - start.success


def learning_gains(start: Evaluation, ends: dict[str, list[Evaluation]]) -> pd.DataFrame:
    """One row per label (e.g. an algorithm) over its runs (seeds), all trained from ``start``.

    Columns (success in points): ``start``, ``end_mean``, ``end_std``, ``gain_mean``, ``gain_std`` (the
    seed-to-seed spread: sample std of the runs' gains), ``t_p`` (one-sample t-test of the gains; NaN for
    one run), ``min_gain``, ``runs``, and ``above_spread``: ``gain_mean > gain_std`` with every run
    gaining; then ``start_invalid`` and ``end_invalid`` (percent of turns without a valid action, the runs'
    mean; NaN where an evaluation did not record turns).
    """
    from scipy import stats

    rows = []
    for label, evals in ends.items():
        if not evals:
            raise ValueError(f"label {label!r} has no evaluations")
        gains = np.array([paired_gain(start, e) for e in evals]) * 100
        t_p = float(stats.ttest_1samp(gains, 0.0).pvalue) if gains.size > 1 and np.ptp(gains) > 0 else (
            float("nan") if gains.size < 2 else float(gains[0] == 0))  # equal gains: p 0, or 1 if all are 0
        end = np.array([e.success for e in evals]) * 100
        spread = float(gains.std(ddof=1)) if gains.size > 1 else float("nan")
        rows.append({"label": label, "runs": int(gains.size), "start": start.success * 100,
                     "end_mean": float(end.mean()), "end_std": float(end.std(ddof=1)) if end.size > 1 else float("nan"),
                     "gain_mean": float(gains.mean()), "gain_std": spread, "min_gain": float(gains.min()),
                     "t_p": t_p, "above_spread": bool(gains.size > 1 and gains.mean() > spread
                                                             and gains.min() > 0),
                     "start_invalid": start.invalid_turn_rate * 100,
                     "end_invalid": float(np.mean([e.invalid_turn_rate for e in evals])) * 100})
    return pd.DataFrame(rows)
