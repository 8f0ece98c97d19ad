"""A small deterministic text env for rollout tests, registered under the name ``fakeline``."""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Any, ClassVar

from ragen2 import envs
from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv

NAME = "fakeline"


class LineEnv(TextEnv):
    """A player on a row of 6 cells walks to a goal; Left/Right; reward 1 on the goal."""

    name: ClassVar[str] = NAME
    instruction: ClassVar[str] = "Walk to the goal G on the line. √ marks the player on the goal."
    action_names: ClassVar[tuple[str, ...]] = ("Left", "Right")
    agent_defaults: ClassVar[AgentDefaults] = AgentDefaults(max_turns=3, max_actions_per_turn=2,
                                                           max_actions_per_traj=4, max_tokens_hint=50)

    def _obs_text(self) -> str:
        cells = ["_"] * 6
        cells[self.goal] = "G"
        cells[self.player] = "√" if self.player == self.goal else "P"
        return f"Player: (0,{self.player})\nGoal: (0,{self.goal})\nGrid:\n{''.join(cells)}"

    def _reset(self, options: dict[str, Any]):
        self.player = int(self.np_random.integers(0, 6))
        self.goal = int((self.player + self.np_random.integers(2, 5)) % 6)
        return self._obs_text(), {}

    def _step(self, action: str) -> StepResult:
        delta = {"left": -1, "right": 1}.get(action.strip().lower())
        if delta is None:
            return StepResult(obs=self._obs_text(), action_is_valid=False, action_is_effective=False)
        old = self.player
        self.player = min(5, max(0, self.player + delta))
        on_goal = self.player == self.goal
        return StepResult(obs=self._obs_text(), reward=1.0 if on_goal else 0.0, terminated=on_goal,
                          success=on_goal, action_is_effective=self.player != old)

    def expert(self) -> ExpertMove:
        action = "Right" if self.goal > self.player else "Left"
        return ExpertMove(action, f"player (0,{self.player}) goal (0,{self.goal}). go {action.lower()}")


@contextlib.contextmanager
def registered():
    """Make ``envs.make("fakeline")`` work inside the block."""
    module = types.ModuleType("_ragen2_test_fakeline")
    module.LineEnv = LineEnv
    sys.modules[module.__name__] = module
    envs.REGISTRY[NAME] = envs.EnvSpec(NAME, "ragen2/FakeLine-v0", f"{module.__name__}:LineEnv")
    try:
        yield
    finally:
        envs.REGISTRY.pop(NAME, None)
        sys.modules.pop(module.__name__, None)
