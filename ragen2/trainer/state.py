"""What a run carries from step to step and checkpoints: models, optimisers, loss scalers, early stops, RNG.

:class:`TrainingState` builds it for a run (:meth:`TrainingState.create`), writes it into a checkpoint
(:meth:`TrainingState.checkpoint`) and restores it (:meth:`TrainingState.restore`) so that a resumed run
draws and computes exactly what an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ragen2.config import RunConfig
from ragen2.model.optim import adamw
from ragen2.trainer.checkpoint import rng_state, set_rng_state
from ragen2.trainer.early_stop import EarlyStopper
from ragen2.trainer.models import Models
from ragen2.trainer.precision import grad_scaler
from ragen2.trainer.seeds import stream_seed


@dataclass
class TrainingState:
    models: Models
    actor_opt: torch.optim.Optimizer
    critic_opt: torch.optim.Optimizer | None
    actor_scaler: torch.amp.GradScaler | None
    """fp16 only: the actor's dynamic loss scale."""
    critic_scaler: torch.amp.GradScaler | None
    stopper: EarlyStopper
    shuffle_rng: np.random.Generator
    """Mini-batch order of the updates (its own stream, checkpointed)."""
    monitors: dict = field(default_factory=dict)
    """Per-family CollapseMonitor (MI z-score EMA), filled by ``collapse_metrics``."""

    @classmethod
    def create(cls, cfg: RunConfig, models: Models, precision: str, device: torch.device) -> TrainingState:
        """AdamW for the actor (and the critic), loss scalers for fp16, the early stops and the shuffle stream."""
        tc = cfg.trainer
        critic = models.critic
        return cls(
            models=models,
            actor_opt=adamw(models.actor, tc.actor_lr, tc.weight_decay),
            critic_opt=adamw(critic, tc.critic_lr, tc.weight_decay) if critic is not None else None,
            actor_scaler=grad_scaler(precision, device), critic_scaler=grad_scaler(precision, device),
            stopper=EarlyStopper(empty_stop_steps=tc.empty_stop_steps, rv_collapse=tc.rv_collapse_stop,
                                 low_val_patience=tc.low_val_stop_patience),
            shuffle_rng=np.random.default_rng(stream_seed(cfg.seed, "shuffle")))

    def checkpoint(self, step: int, history: list[dict[str, Any]], totals: dict[str, float]) -> dict[str, Any]:
        """The checkpoint of ``step``: this state plus the logged history and the accumulated timings."""
        actor, critic = self.models.actor, self.models.critic
        state = {
            "step": step, "actor": actor.state_dict(), "actor_opt": self.actor_opt.state_dict(),
            "critic": critic.state_dict() if critic is not None else None,
            "critic_opt": self.critic_opt.state_dict() if self.critic_opt is not None else None,
            "early_stop": self.stopper.state_dict(), "monitors": self.monitors, "history": history,
            "timings": totals, "rng": rng_state(self.shuffle_rng)}
        if self.actor_scaler is not None:  # fp16: the loss scales, for an exact resume
            state["actor_scaler"] = self.actor_scaler.state_dict()
            state["critic_scaler"] = self.critic_scaler.state_dict() if critic is not None else None
        return state

    def restore(self, state: dict[str, Any]) -> tuple[int, list[dict[str, Any]], dict[str, float]]:
        """Load a checkpoint into this state; returns ``(first step to run, logged history, timings)``."""
        self.models.actor.load_state_dict(state["actor"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        if self.models.critic is not None:
            self.models.critic.load_state_dict(state["critic"])
            self.critic_opt.load_state_dict(state["critic_opt"])
        for scaler, key in ((self.actor_scaler, "actor_scaler"), (self.critic_scaler, "critic_scaler")):
            if scaler is not None and state.get(key) is not None:
                scaler.load_state_dict(state[key])
        self.stopper.load_state_dict(state["early_stop"])
        self.monitors = state["monitors"]
        set_rng_state(state["rng"], self.shuffle_rng)
        return int(state["step"]) + 1, state["history"], state["timings"]
