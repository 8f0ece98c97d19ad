"""The trainer's early-stopping rules (docs/method.md §4.7), as a small state machine that checkpoints.

1. ``empty_filter``: ``empty_stop_steps`` consecutive steps whose filter kept nothing.
2. ``reward_variance_collapse``: the baseline ``V_base`` is the mean of ``rollout/in_group_reward_std``
   over the first 10 non-empty steps; afterwards, if the last 10 values (a sliding window of
   non-empty steps after the baseline) are all below ``0.1 * V_base``, stop.
3. ``low_validation_success``: ``low_val_patience`` consecutive validations with success < 0.01.

A rule with its setting at 0 / False is off.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EarlyStopper:
    empty_stop_steps: int = 5
    rv_collapse: bool = True
    low_val_patience: int = 5
    rv_window: int = 10
    rv_fraction: float = 0.1
    low_val_threshold: float = 0.01
    consecutive_empty: int = 0
    rv_baseline_values: list[float] = field(default_factory=list)
    rv_recent: deque = field(default_factory=deque)
    low_val_count: int = 0
    reason: str | None = None
    """Name of the rule that fired (``None`` while training may go on)."""

    @property
    def rv_baseline(self) -> float | None:
        if len(self.rv_baseline_values) < self.rv_window:
            return None
        return sum(self.rv_baseline_values) / len(self.rv_baseline_values)

    def on_empty_step(self) -> bool:
        """Record a step whose filter kept nothing; True if training must stop."""
        self.consecutive_empty += 1
        if self.empty_stop_steps and self.consecutive_empty >= self.empty_stop_steps:
            self.reason = "empty_filtered_steps"
        return self.reason is not None

    def on_step(self, in_group_reward_std: float) -> bool:
        """Record a non-empty step's mean in-group reward std; True if training must stop."""
        self.consecutive_empty = 0
        if not self.rv_collapse:
            return False
        if len(self.rv_baseline_values) < self.rv_window:
            self.rv_baseline_values.append(float(in_group_reward_std))
            return False
        self.rv_recent.append(float(in_group_reward_std))
        while len(self.rv_recent) > self.rv_window:
            self.rv_recent.popleft()
        base = self.rv_baseline
        if len(self.rv_recent) == self.rv_window and all(v < self.rv_fraction * base for v in self.rv_recent):
            self.reason = "reward_variance_collapse"
        return self.reason is not None

    def on_validation(self, success: float) -> bool:
        """Record a validation success rate; True if training must stop."""
        if not self.low_val_patience:
            return False
        self.low_val_count = self.low_val_count + 1 if success < self.low_val_threshold else 0
        if self.low_val_count >= self.low_val_patience:
            self.reason = "low_validation_success"
        return self.reason is not None

    def state_dict(self) -> dict[str, Any]:
        return {"consecutive_empty": self.consecutive_empty, "rv_baseline_values": list(self.rv_baseline_values),
                "rv_recent": list(self.rv_recent), "low_val_count": self.low_val_count, "reason": self.reason}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.consecutive_empty = int(state["consecutive_empty"])
        self.rv_baseline_values = [float(v) for v in state["rv_baseline_values"]]
        self.rv_recent = deque(float(v) for v in state["rv_recent"])
        self.low_val_count = int(state["low_val_count"])
        self.reason = state["reason"]
