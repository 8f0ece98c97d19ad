"""FrozenLake as a text game (``ragen2/FrozenLake-v0``, docs/method.md §1.2, tag ``CoordFrozenLake``).

## Description

The player crosses a frozen lake from a start tile to a goal tile without falling into a hole. Each
map is drawn from the reset seed: every tile is frozen with probability ``p`` (else a hole), start
and goal are two distinct tiles drawn uniformly (both frozen), and the map is drawn again until a
breadth-first search finds a hole-free path from start to goal. The ice may be slippery: a move goes
in the intended direction with probability ``success_rate`` and otherwise in one of the two
perpendicular directions, each with probability ``(1 - success_rate) / 2``; it never goes
backwards, and a move off the board leaves the player in place (the dynamics of Gymnasium's
FrozenLake with its ``success_rate`` option, written anew here). The slip draws come from the
same seeded generator as the map, so environments reset with the same seed share the map *and* the
slip stream.

## Actions

``"Left"``, ``"Down"``, ``"Right"``, ``"Up"``, matched case-insensitively after stripping
whitespace. Any other string is an invalid step: nothing changes, the reward is 0, no step is
counted, no slip is drawn and ``action_is_valid=False``. ``action_is_effective`` says whether the
player's tile changed.

## Observation

The ``grid_coord`` text::

    Coordinates:
    Board size: 4 rows x 4 cols (zero-indexed).
    Start: (0,1)
    Goal: (3,2)
    Player: (0,1)
    Holes: (1,1), (2,3)
    Grid Map:
    _P__
    _O__
    ___O
    __G_

The player line reads ``Player``, ``Player on goal`` or ``Player in hole``; the ``Holes`` line is
left out when the map has none. ``Start`` is still listed after the player has left it. Symbols:
``_`` frozen (the start tile too), ``O`` hole, ``G`` goal, ``P`` player, ``X`` player in a hole,
``√`` player on the goal.

## Rewards

1 for the step that enters the goal, 0 otherwise (no step cost).

## Episode end

Terminated when the player enters the goal (``success=True``) or a hole; truncated after
``max_steps`` valid steps.

## Arguments

- ``size`` (int, 4): the board is ``size x size``.
- ``p`` (float, 0.9): probability that a tile is frozen.
- ``success_rate`` (float, 0.98): probability that a move goes where intended (0.98 is the
  paper's "2 % random transitions"; the main-table runs use 1.0).
- ``max_steps`` (int, 100): valid steps before truncation.
- ``render_mode`` (None or ``"ansi"``).

## Version history

- v0: first version.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

import numpy as np

from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv

Pos = tuple[int, int]

#: Action names in Gymnasium's id order, and the (row, col) change each one makes. Turning an action
#: by +-1 (mod 4) gives its two perpendicular directions.
ACTIONS: tuple[str, ...] = ("Left", "Down", "Right", "Up")
DELTAS: tuple[Pos, ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))
_ACTION_INDEX = {name.lower(): i for i, name in enumerate(ACTIONS)}
#: How a neighbouring tile in direction i is named in the expert's reasoning.
_SIDE = ("left", "below", "right", "above")

#: Map draws before giving up (a 4x4 map with p=0.9 almost always succeeds within a few).
MAX_MAP_ATTEMPTS = 10_000

SYMBOLS = {
    "_": "frozen tile",
    "O": "hole",
    "G": "goal",
    "P": "player",
    "X": "player in hole",
    "√": "player on goal",
}


def _fmt(pos: Pos) -> str:
    return f"({pos[0]},{pos[1]})"


def _move(pos: Pos, action: int, size: int) -> Pos:
    """The tile one step from ``pos`` in direction ``action``; off-board means staying put."""
    r, c = pos[0] + DELTAS[action][0], pos[1] + DELTAS[action][1]
    return (r, c) if 0 <= r < size and 0 <= c < size else pos


def shortest_path(holes: frozenset[Pos], size: int, start: Pos, goal: Pos) -> list[int] | None:
    """Fewest-step action ids from ``start`` to ``goal`` avoiding holes (ties: Left, Down, Right, Up).

    Returns ``[]`` when ``start == goal`` and ``None`` when no hole-free path exists.
    """
    parent: dict[Pos, tuple[Pos, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        pos = queue.popleft()
        if pos == goal:
            path = []
            while parent[pos] is not None:
                pos, action = parent[pos]
                path.append(action)
            return path[::-1]
        for action in range(4):
            nxt = _move(pos, action, size)
            if nxt not in parent and nxt not in holes:
                parent[nxt] = (pos, action)
                queue.append(nxt)
    return None


def generate_map(rng: np.random.Generator, size: int, p: float) -> tuple[frozenset[Pos], Pos, Pos]:
    """Draw ``(holes, start, goal)`` until the goal is reachable from the start."""
    for _ in range(MAX_MAP_ATTEMPTS):
        frozen = rng.random((size, size)) < p
        start_index = int(rng.integers(size * size))
        goal_index = int(rng.integers(size * size - 1))
        goal_index += goal_index >= start_index  # uniform over the other tiles
        start, goal = divmod(start_index, size), divmod(goal_index, size)
        frozen[start] = frozen[goal] = True
        holes = frozenset((r, c) for r in range(size) for c in range(size) if not frozen[r, c])
        if shortest_path(holes, size, start, goal) is not None:
            return holes, start, goal
    raise RuntimeError(f"no solvable {size}x{size} map with p={p} in {MAX_MAP_ATTEMPTS} draws")


def render(size: int, holes: frozenset[Pos], start: Pos, goal: Pos, player: Pos) -> str:
    """The ``grid_coord`` observation text (see the module docstring)."""
    rows = []
    for r in range(size):
        row = []
        for c in range(size):
            cell = (r, c)
            if cell == player:
                row.append("X" if cell in holes else "√" if cell == goal else "P")
            else:
                row.append("O" if cell in holes else "G" if cell == goal else "_")
        rows.append("".join(row))
    if player == goal:
        player_line = f"Player on goal: {_fmt(player)}"
    elif player in holes:
        player_line = f"Player in hole: {_fmt(player)}"
    else:
        player_line = f"Player: {_fmt(player)}"
    lines = [
        "Coordinates:",
        f"Board size: {size} rows x {size} cols (zero-indexed).",
        f"Start: {_fmt(start)}",
        f"Goal: {_fmt(goal)}",
        player_line,
    ]
    if holes:
        lines.append("Holes: " + ", ".join(_fmt(h) for h in sorted(holes)))
    lines.append("Grid Map:")
    lines += rows
    return "\n".join(lines)


class FrozenLakeEnv(TextEnv):
    """FrozenLake with generated maps and optional slipping (see the module docstring)."""

    name: ClassVar[str] = "frozenlake"
    instruction: ClassVar[str] = (
        "You are walking on a frozen lake. Your goal is to reach the goal tile without falling into a "
        "hole. You see the lake as a symbol grid and as zero-indexed (row, col) coordinates, with (0,0) "
        "at the top-left corner. Move with Left, Down, Right or Up; a move off the edge keeps you in "
        "place. The ice is slippery: now and then you slide sideways instead of where you meant to go. "
        "Example answer: <answer>Left || Up || Up</answer>\n"
        "The meaning of each symbol in the state is:\n" + ", ".join(f"{s}: {m}" for s, m in SYMBOLS.items())
    )
    action_names: ClassVar[tuple[str, ...]] = ACTIONS
    agent_defaults: ClassVar[AgentDefaults] = AgentDefaults(
        max_turns=5, max_actions_per_turn=2, max_actions_per_traj=10, max_tokens_hint=120
    )

    def __init__(
        self,
        *,
        size: int = 4,
        p: float = 0.9,
        success_rate: float = 0.98,
        max_steps: int = 100,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        for arg, value, low in (("size", size, 2), ("max_steps", max_steps, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}")
        for arg, value, low_open in (("p", p, True), ("success_rate", success_rate, False)):
            ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
            if not ok or not (0.0 <= value <= 1.0) or (low_open and value == 0.0):
                interval = "(0, 1]" if low_open else "[0, 1]"
                raise ValueError(f"{arg} must be a number in {interval}, got {value!r}")
        self.size = int(size)
        self.p = float(p)
        self.success_rate = float(success_rate)
        self.max_steps = int(max_steps)
        self.holes: frozenset[Pos] = frozenset()
        self.start: Pos = (0, 0)
        self.goal: Pos = (0, 0)
        self.player: Pos = (0, 0)
        self.num_steps = 0

    def _observation(self) -> str:
        return render(self.size, self.holes, self.start, self.goal, self.player)

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.holes, self.start, self.goal = generate_map(self.np_random, self.size, self.p)
        self.player = self.start
        self.num_steps = 0
        return self._observation(), {"success": False}

    def _slip(self, action: int) -> int:
        """The direction actually taken: intended, or one of the two perpendicular ones."""
        u = float(self.np_random.random())
        if u < self.success_rate:
            return action
        side = (1.0 - self.success_rate) / 2.0
        return (action - 1) % 4 if u < self.success_rate + side else (action + 1) % 4

    def _step(self, action: str) -> StepResult:
        index = _ACTION_INDEX.get(action.strip().lower())
        if index is None:
            return StepResult(obs=self._observation(), action_is_valid=False, action_is_effective=False)
        taken = self._slip(index)
        old = self.player
        self.player = _move(old, taken, self.size)
        self.num_steps += 1
        on_goal = self.player == self.goal
        terminated = on_goal or self.player in self.holes
        return StepResult(
            obs=self._observation(),
            reward=1.0 if on_goal else 0.0,
            terminated=terminated,
            truncated=not terminated and self.num_steps >= self.max_steps,
            success=on_goal,
            action_is_valid=True,
            action_is_effective=self.player != old,
            info={"intended_action": ACTIONS[index], "taken_action": ACTIONS[taken]},
        )

    # -- expert ------------------------------------------------------------------------------------
    def plan(self) -> list[str] | None:
        """Shortest hole-free action list from the player to the goal; ``None`` if there is none."""
        ids = shortest_path(self.holes, self.size, self.player, self.goal)
        return None if ids is None else [ACTIONS[i] for i in ids]

    def expert(self) -> ExpertMove:
        """First move of a shortest hole-free path, with a short reason naming the tiles involved."""
        head = f"player {_fmt(self.player)} goal {_fmt(self.goal)}."
        if self.player == self.goal:
            return ExpertMove("Up", f"{head} player on goal, done")
        if self.player in self.holes:
            return ExpertMove("Up", f"{head} player fell in hole, game over")
        ids = shortest_path(self.holes, self.size, self.player, self.goal)
        if not ids:
            return ExpertMove("Up", f"{head} no safe path to goal")
        move = ids[0]
        name = ACTIONS[move].lower()
        dr, dc = self.goal[0] - self.player[0], self.goal[1] - self.player[1]
        toward = [a for a, (r, c) in enumerate(DELTAS) if (r and r * dr > 0) or (c and c * dc > 0)]
        blocked = [a for a in toward if a != move and _move(self.player, a, self.size) in self.holes]
        if move in toward:
            if blocked:
                hole = _move(self.player, blocked[0], self.size)
                return ExpertMove(ACTIONS[move], f"{head} hole {_fmt(hole)} {_SIDE[blocked[0]]}, go {name}")
            where = " and ".join(_SIDE[a] for a in toward)
            return ExpertMove(ACTIONS[move], f"{head} goal is {where}, go {name}")
        if blocked:
            hole = _move(self.player, blocked[0], self.size)
            think = f"{head} hole {_fmt(hole)} {_SIDE[blocked[0]]} blocks the way, go {name} around it"
        else:
            think = f"{head} direct way leads to holes, go {name} around them"
        return ExpertMove(ACTIONS[move], think)
