"""DAPO's dynamic sampling: train on groups whose scores vary, drawing fresh groups for the others.

A group whose trajectories all score the same has zero group-relative advantage, so it adds nothing
but noise and regularisation to a GRPO-style update. DAPO drops such groups and keeps sampling
prompts until the batch is full again. Here, after the SNR filter has chosen its groups, the
constant ones among them are dropped and replaced: each round rolls out only as many fresh groups
as are still missing (fresh env seeds, :func:`refill_seeds`) and keeps those that vary, for at most
``trainer.max_refill_rounds`` rounds. The SNR filter decides how many groups a step trains on;
dynamic sampling makes each of them informative.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ragen2.config import RunConfig
from ragen2.rollout.types import RolloutBatch
from ragen2.trainer.algos import dynamic_sampling_keep, get_preset
from ragen2.trainer.seeds import stream_seed

REFILL_SEED_OFFSET = 1_000_000
"""Refill env seeds start at ``rollout.train_seed + REFILL_SEED_OFFSET``, away from the training seeds."""


@dataclass
class Refilled:
    rollout: RolloutBatch
    """The step's batch with the accepted fresh groups appended (numbered after its own groups)."""
    kept: list[int]
    """Groups to train on, in ``rollout``'s numbering."""
    metrics: dict[str, float] = field(default_factory=dict)
    """``filter/dynamic_sampling_dropped|rounds|drawn|short``."""


def refill_groups(rollout: RolloutBatch, kept: list[int], draw: Callable[[int, int], RolloutBatch],
                  max_rounds: int) -> Refilled:
    """Replace the constant-score groups among ``kept`` by fresh groups whose scores vary.

    Args:
        rollout: the step's batch.
        kept: the groups the filter kept; their number is the target.
        draw: ``draw(n, round)`` rolls out ``n`` fresh groups (``round`` = 1, 2, ...).
        max_rounds: at most this many calls of ``draw`` (0 = only drop).

    Returns:
        The merged batch, the groups to train on and the metrics: ``dropped`` (constant groups among
        ``kept``), ``rounds`` and ``drawn`` (refill rollouts and their groups), ``short`` (groups still
        missing after the last round: that step trains on fewer groups).
    """
    if max_rounds < 0:
        raise ValueError(f"max_refill_rounds must be >= 0, got {max_rounds!r}")
    varied = set(dynamic_sampling_keep(rollout.scores))
    target = len(kept)
    train = [int(g) for g in kept if g in varied]
    dropped = target - len(train)
    rounds = drawn = 0
    while len(train) < target and rounds < max_rounds:
        rounds += 1
        missing = target - len(train)
        extra = draw(missing, rounds)
        if extra.env_groups != missing:
            raise ValueError(f"draw({missing}, {rounds}) returned {extra.env_groups} groups")
        drawn += missing
        accepted = dynamic_sampling_keep(extra.scores)
        train += range(rollout.env_groups, rollout.env_groups + len(accepted))
        rollout = rollout.append_groups(extra, accepted)
    metrics = {"filter/dynamic_sampling_dropped": float(dropped),
               "filter/dynamic_sampling_rounds": float(rounds),
               "filter/dynamic_sampling_drawn": float(drawn),
               "filter/dynamic_sampling_short": float(target - len(train))}
    return Refilled(rollout, train, metrics)


def refill_seeds(cfg: RunConfig, step: int, round_: int, n: int) -> list[int]:
    """Env seeds of refill round ``round_`` (1-based) of step ``step``: a block of ``env_groups`` seeds
    per (step, round) above ``train_seed + REFILL_SEED_OFFSET``, the first ``n`` of it."""
    r, rounds = cfg.rollout, max(cfg.trainer.max_refill_rounds, 1)
    if not 1 <= n <= r.env_groups:
        raise ValueError(f"a refill round draws 1..{r.env_groups} groups, got {n!r}")
    base = r.train_seed + REFILL_SEED_OFFSET + r.env_groups * ((step - 1) * rounds + round_ - 1)
    return [base + g for g in range(n)]


def dynamic_sampling(models, cfg: RunConfig, rollout: RolloutBatch, kept: list[int], step: int) -> Refilled:
    """:func:`refill_groups` with fresh rollouts of the current actor (training temperature and group size,
    a sampling seed per step and round), as the training loop runs it. For algorithms without dynamic
    sampling (all but DAPO) the batch and ``kept`` come back unchanged, with no metrics."""
    from ragen2.rollout.collect import collect_rollouts

    if not get_preset(cfg.trainer.algo).dynamic_sampling:
        return Refilled(rollout, list(kept))

    def draw(n: int, round_: int) -> RolloutBatch:
        return collect_rollouts(models.actor, models.tokenizer, cfg.env, cfg.rollout, refill_seeds(cfg, step, round_, n),
                                group_size=cfg.rollout.group_size, temperature=cfg.rollout.temperature,
                                seed=stream_seed(cfg.seed, f"refill{round_}", step))

    return refill_groups(rollout, kept, draw, cfg.trainer.max_refill_rounds)
