"""Training steps to time: ragen2's own (the loop's ALGO LOGIC, no logging) and TRL's GRPOTrainer.

:class:`Ragen2Stepper` runs what one step of :func:`ragen2.trainer.loop.train` runs between the
rollout and the validation: rollout, filter, old log-probs / values / advantages, critic update (PPO)
and actor update; collapse diagnostics, validation, logging and checkpoints are left out (the MI
benchmark times the diagnostics on their own).

:func:`run_trl_interleaved` trains a TRL trainer (:mod:`ragen2.bench.trl_native` builds TRL's own
``GRPOTrainer``) and runs a ragen2 step between TRL's steps from a callback, alternating before/after,
so both see the same machine load.
"""

from __future__ import annotations

import copy
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen2.config import RunConfig
from ragen2.filter import FilterConfig, apply_filter, loss_scales
from ragen2.rollout import collect_rollouts
from ragen2.rollout.prompt import THINK_OPEN
from ragen2.rollout.types import RolloutBatch
from ragen2.trainer.actor import update_actor
from ragen2.trainer.algos import get_preset
from ragen2.trainer.critic import update_critic
from ragen2.trainer.dynamic_sampling import dynamic_sampling
from ragen2.trainer.models import build_models
from ragen2.trainer.seeds import stream_seed, train_seeds
from ragen2.trainer.update_data import loss_settings, mini_batch_rows, prepare_update_batch


@dataclass
class StepTimes:
    rollout_s: float
    update_s: float
    """Filter, batch preparation, critic and actor updates (the loop's ``timing_s/update``)."""
    rollout: RolloutBatch

    @property
    def total_s(self) -> float:
        return self.rollout_s + self.update_s


class Ragen2Stepper:
    """Models, optimisers and RNG of a ragen2 run, stepped without the loop's logging.

    Args:
        cfg: the run configuration (its ``collapse`` section is ignored here).
        policy_path: the policy to load (e.g. from :func:`ragen2.policy.resolve_policy`).
    """

    def __init__(self, cfg: RunConfig, policy_path: Path):
        self.cfg = cfg
        self.preset = get_preset(cfg.trainer.algo)
        self.models = build_models(cfg, Path(policy_path))
        tc = cfg.trainer
        self.actor_opt = torch.optim.AdamW(self.models.actor.parameters(), lr=tc.actor_lr,
                                           weight_decay=tc.weight_decay)
        self.critic_opt = None
        if self.models.critic is not None:
            self.critic_opt = torch.optim.AdamW(self.models.critic.parameters(), lr=tc.critic_lr,
                                                weight_decay=tc.weight_decay)
        self.shuffle_rng = np.random.default_rng(stream_seed(cfg.seed, "shuffle"))
        self.steps_done = 0

    def rollout(self, step: int) -> RolloutBatch:
        """The training rollout of ``step`` (1-based), as the loop collects it."""
        rc = self.cfg.rollout
        self.models.actor.eval()
        return collect_rollouts(self.models.actor, self.models.tokenizer, self.cfg.env, rc,
                                train_seeds(self.cfg, step), group_size=rc.group_size,
                                temperature=rc.temperature, seed=stream_seed(self.cfg.seed, "rollout", step))

    def update(self, rollout: RolloutBatch, filter_cfg: FilterConfig | None = None) -> dict[str, float]:
        """Filter, prepare and update on ``rollout`` (the loop's update phase); returns its metrics."""
        cfg = self.cfg if filter_cfg is None else _with_filter(self.cfg, filter_cfg)
        tc = cfg.trainer
        lengths = np.array([t.response_length for t in rollout.trajectories], dtype=np.float64).reshape(
            rollout.env_groups, rollout.group_size)
        outcome = apply_filter(rollout.scores, cfg.filter, successes=rollout.successes, lengths=lengths)
        kept = [int(g) for g in outcome.kept]
        metrics = dict(outcome.metrics)
        refilled = dynamic_sampling(self.models, cfg, rollout, kept, max(self.steps_done, 1))  # DAPO only
        train_rollout, kept = refilled.rollout, refilled.kept
        metrics.update(refilled.metrics)
        if not kept:
            return metrics
        batch, batch_metrics = prepare_update_batch(self.models, train_rollout, kept, cfg, self.preset)
        metrics.update(batch_metrics)
        settings = loss_settings(cfg, loss_scales(len(kept), rollout.env_groups, cfg.filter))
        mini = mini_batch_rows(cfg, len(batch), len(rollout))
        micro = min(tc.micro_batch_size, mini)
        if self.models.critic is not None:
            metrics.update(update_critic(self.models.critic, self.critic_opt, batch, mini_batch_size=mini,
                                         micro_batch_size=micro, epochs=tc.ppo_epochs, grad_clip=tc.grad_clip,
                                         rng=self.shuffle_rng))
        metrics.update(update_actor(self.models.actor, self.actor_opt, batch, settings, mini_batch_size=mini,
                                    micro_batch_size=micro, epochs=tc.ppo_epochs, grad_clip=tc.grad_clip,
                                    rng=self.shuffle_rng))
        return metrics

    def step(self) -> StepTimes:
        """One training step (fresh env seeds each call)."""
        self.steps_done += 1
        t0 = time.perf_counter()
        rollout = self.rollout(self.steps_done)
        t1 = time.perf_counter()
        self.update(rollout)
        return StepTimes(t1 - t0, time.perf_counter() - t1, rollout)


def _with_filter(cfg: RunConfig, filter_cfg: FilterConfig) -> RunConfig:
    import dataclasses

    return dataclasses.replace(cfg, filter=filter_cfg)


def with_response_reasoning(batch: RolloutBatch, tokenizer) -> RolloutBatch:
    """A copy of ``batch`` in which every turn without a parsed reasoning gets its whole response.

    A random-init policy never closes ``</think>``, so its batches hold no valid reasoning and the
    MI diagnostics would skip both families. Using each turn's whole sampled response as its
    reasoning (``<think>`` removed) gives the diagnostics pairs of the longest length a reasoning
    can have (``max_new_tokens``), so the measured MI cost is an upper end for that batch.
    """
    out = copy.deepcopy(batch)
    missing = [turn for t in out.trajectories for turn in t.turns if not turn.reasoning_ids]
    texts = [turn.response_text.removeprefix(THINK_OPEN).strip() or THINK_OPEN for turn in missing]
    if texts:
        for turn, ids in zip(missing, tokenizer(texts, add_special_tokens=False)["input_ids"]):
            turn.reasoning_ids = list(ids)
    for t in out.trajectories:
        t.first_reasoning_ids = list(t.turns[0].reasoning_ids)
    return out


# ---------------------------------------------------------------------------------------------
# TRL
# ---------------------------------------------------------------------------------------------
def run_trl_interleaved(make_trainer: Callable[[int, Path, list], Any], other_step: Callable[[], float], *,
                        reps: int, warmup: int) -> tuple[list[float], list[float]]:
    """Train TRL for ``warmup + reps`` steps, running ``other_step`` once per TRL step.

    ``make_trainer(max_steps, out_dir, callbacks)`` builds the TRL trainer (one optimiser step per training step).

    ``other_step`` (it returns its own seconds) runs from the step callbacks: after TRL's step on
    even steps, before it on odd ones. TRL's time for a step is the wall time between consecutive
    ``on_step_end`` events (so it includes TRL's batch fetch and loop overhead), minus the time spent
    in ``other_step`` in between. The first TRL step is measured from ``on_train_begin``.

    Returns:
        ``(trl_seconds, other_seconds)`` of the ``reps`` timed steps (warm-up steps dropped).
    """
    from transformers import TrainerCallback

    trl_times: list[float] = []
    other_times: list[float] = []

    class Interleave(TrainerCallback):
        def __init__(self):
            self.mark = 0.0
            self.inside = 0.0
            self.index = 0

        def _other(self) -> None:
            start = time.perf_counter()
            other_times.append(other_step())
            self.inside += time.perf_counter() - start

        def on_train_begin(self, args, state, control, **kwargs):
            self.mark = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):
            if self.index % 2 == 1:
                self._other()

        def on_step_end(self, args, state, control, **kwargs):
            if self.index % 2 == 0:
                self._other()
            now = time.perf_counter()
            trl_times.append(now - self.mark - self.inside)
            self.mark, self.inside = now, 0.0
            self.index += 1

    with tempfile.TemporaryDirectory(prefix="ragen2-bench-trl-") as tmp:
        trainer = make_trainer(warmup + reps, Path(tmp), [Interleave()])
        trainer.train()
    if len(trl_times) != warmup + reps:
        raise RuntimeError(f"TRL ran {len(trl_times)} steps, expected {warmup + reps}")
    return trl_times[warmup:], other_times[warmup:]
