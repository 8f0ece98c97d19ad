"""Sokoban as a text game (``ragen2/Sokoban-v0``, docs/method.md §1.1, tag ``CoordSokoban``).

## Description

The player walks on a small room and must push every box onto a target. A box moves only when the
player walks into it and the cell beyond the box is free; boxes are never pulled. Rooms are
generated so that every puzzle is solvable: a random walk carves the floor, targets and the player
are placed on it, and then the game is played backwards from the solved position (the player
*pulls* boxes off their targets). Of all the positions this reverse play reaches, the one with the
highest ``box_swaps x box_displacement`` score becomes the puzzle (``box_swaps`` counts how often
the pulled box changes, ``box_displacement`` is the summed Manhattan distance of every box from the
target it started on). Finally the player is moved one to three random steps with probability 0.8
when the displacement is 1 and 0.5 otherwise, as the paper's generator does. A generation attempt
that fails (too little floor, or no box could be pulled) is retried with a seed derived from the
reset seed, so the same seed gives the same room in every process.

## Actions

``"Up"``, ``"Down"``, ``"Left"``, ``"Right"``, matched case-insensitively after stripping
whitespace. A move into a wall, or into a box whose far side is blocked, is valid but changes
nothing (``action_is_effective=False``). Any other string is an invalid step: nothing changes, the
reward is 0, no step is counted and ``action_is_valid=False``.

## Observation

The ``grid_coord`` text::

    Coordinates:
    Board size: 6 rows x 6 cols (zero-indexed).
    Targets: (1,1)
    Boxes: (3,1)
    Player: (4,2)
    Grid Map:
    ######
    #O####
    #__###
    #X_###
    #_P_##
    ######

The coordinate lines appear only when non-empty, in the order Targets (empty targets), Boxes (off
target), Boxes on target, Player, Player on target. Symbols: ``#`` wall, ``_`` floor, ``O`` target,
``X`` box, ``√`` box on target, ``P`` player, ``S`` player on target.

## Rewards

-0.1 for every valid step; +1 when the number of boxes on targets rises, -1 when it falls; +10 more
when all boxes are on targets. Solving a one-box puzzle in ``n`` steps returns ``11 - 0.1 n``.

## Episode end

Terminated when all boxes are on targets (``success=True``); truncated after ``max_steps`` valid
steps.

## Arguments

- ``dim_x`` (int, 6): rows of the room, including the outer wall ring.
- ``dim_y`` (int, 6): columns of the room, including the outer wall ring.
- ``num_boxes`` (int, 1): boxes (and targets).
- ``max_steps`` (int, 100): valid steps before truncation.
- ``search_depth`` (int, 300): maximum length of a reverse-play line during generation.
- ``render_mode`` (None or ``"ansi"``).

## Version history

- v0: first version.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv

Pos = tuple[int, int]

#: Action names in id order, and the (row, col) change each one makes.
ACTIONS: tuple[str, ...] = ("Up", "Down", "Left", "Right")
DELTAS: tuple[Pos, ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))
_ACTION_INDEX = {name.lower(): i for i, name in enumerate(ACTIONS)}
#: Where the player must stand relative to a box to push it in direction i.
_STAND_SIDE = ("below", "above", "right of", "left of")

#: Generation constants (those of the paper's generator).
P_CHANGE_DIRECTION = 0.35
#: Shapes carved around each random-walk cell (offsets from it): a cell, a row of three, a column of
#: three, a 2x2 block. Carving shapes rather than single cells gives rooms with some open floor.
CARVE_SHAPES: tuple[tuple[Pos, ...], ...] = (
    ((0, 0),),
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, 0), (0, 1), (1, 0), (1, 1)),
)
MAX_REVERSE_STATES = 300_000
MAX_GENERATION_ATTEMPTS = 100
#: State cap of the expert's breadth-first planner.
MAX_PLAN_STATES = 1_000_000

SYMBOLS = {
    "#": "wall",
    "_": "empty floor",
    "O": "target",
    "X": "box",
    "√": "box on target",
    "P": "player",
    "S": "player on target",
}


def _add(a: Pos, b: Pos) -> Pos:
    return (a[0] + b[0], a[1] + b[1])


def _fmt(pos: Pos) -> str:
    return f"({pos[0]},{pos[1]})"


def _fmt_list(cells) -> str:
    return ", ".join(_fmt(p) for p in sorted(cells))


def _manhattan(a: Pos, b: Pos) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


# -- room generation ---------------------------------------------------------------------------
def carve_floor(rng: np.random.Generator, n_rows: int, n_cols: int) -> frozenset[Pos]:
    """Floor cells carved by a random walk inside the outer wall ring."""
    num_steps = int(1.7 * (n_rows + n_cols))
    pos = (int(rng.integers(1, n_rows - 1)), int(rng.integers(1, n_cols - 1)))
    direction = DELTAS[int(rng.integers(4))]
    floor = {pos}

    def inside(p: Pos) -> bool:
        return 1 <= p[0] <= n_rows - 2 and 1 <= p[1] <= n_cols - 2

    for _ in range(num_steps):
        if rng.random() < P_CHANGE_DIRECTION:
            direction = DELTAS[int(rng.integers(4))]
        nxt = _add(pos, direction)
        if inside(nxt):
            pos = nxt
        for offset in CARVE_SHAPES[int(rng.integers(len(CARVE_SHAPES)))]:
            cell = _add(pos, offset)
            if inside(cell):
                floor.add(cell)
    return frozenset(floor)


def reverse_play(
    floor: frozenset[Pos], targets: tuple[Pos, ...], player: Pos, search_depth: int
) -> tuple[Pos, tuple[Pos, ...], int]:
    """Depth-first reverse play (pulling boxes) from the solved position.

    Box ``i`` starts on ``targets[i]``. Every reachable (player, boxes) position is visited once, along
    lines of at most ``search_depth`` moves and at most :data:`MAX_REVERSE_STATES` positions.

    Returns:
        ``(player, boxes, score)`` of the first position with the highest ``box_swaps x
        box_displacement`` score (score 0 when no box could be pulled).
    """
    start = (player, targets)
    best = (player, targets, 0)
    seen = {start}
    # Stack entries: player, boxes, depth, box_swaps, index of the last pulled box (-1: none).
    stack = [(player, targets, 0, 0, -1)]
    while stack and len(seen) < MAX_REVERSE_STATES:
        pos, boxes, depth, swaps, last = stack.pop()
        displacement = sum(_manhattan(b, t) for b, t in zip(boxes, targets))
        if swaps * displacement > best[2]:
            best = (pos, boxes, swaps * displacement)
        if depth >= search_depth:
            continue
        for delta in reversed(DELTAS):  # reversed so that the stack pops in DELTAS order
            nxt = _add(pos, delta)
            if nxt not in floor or nxt in boxes:
                continue
            behind = (pos[0] - delta[0], pos[1] - delta[1])
            options = [(boxes, swaps, last)]
            if behind in boxes:
                k = boxes.index(behind)
                pulled = boxes[:k] + (pos,) + boxes[k + 1 :]
                options.append((pulled, swaps + (k != last), k))
            for new_boxes, new_swaps, new_last in options:
                key = (nxt, new_boxes)
                if key not in seen:
                    seen.add(key)
                    stack.append((nxt, new_boxes, depth + 1, new_swaps, new_last))
    return best


def jitter_player(
    rng: np.random.Generator, floor: frozenset[Pos], boxes: frozenset[Pos], player: Pos, displacement: int
) -> Pos:
    """Move the player 1-3 random steps (no backtracking), as the paper's generator does."""
    if rng.random() >= (0.8 if displacement == 1 else 0.5):
        return player
    previous = None
    for step in range(3):
        options = [q for d in DELTAS if (q := _add(player, d)) in floor and q not in boxes and q != previous]
        if not options:
            break
        previous, player = player, options[int(rng.integers(len(options)))]
        if step < 2 and rng.random() >= 0.5:
            break
    return player


@dataclass(frozen=True)
class Puzzle:
    """A generated room: floor cells, targets, boxes and the player."""

    n_rows: int
    n_cols: int
    floor: frozenset[Pos]
    targets: frozenset[Pos]
    boxes: frozenset[Pos]
    player: Pos
    score: int


def generate_puzzle(
    rng: np.random.Generator, n_rows: int, n_cols: int, num_boxes: int, search_depth: int
) -> Puzzle | None:
    """One generation attempt; ``None`` when it fails (too little floor or score 0)."""
    floor = carve_floor(rng, n_rows, n_cols)
    if len(floor) < num_boxes + 2:
        return None
    cells = sorted(floor)
    picks = rng.choice(len(cells), size=num_boxes + 1, replace=False)
    targets = tuple(cells[int(i)] for i in picks[:num_boxes])
    start_player = cells[int(picks[-1])]
    player, boxes, score = reverse_play(floor, targets, start_player, search_depth)
    if score == 0:
        return None
    displacement = sum(_manhattan(b, t) for b, t in zip(boxes, targets))
    box_set = frozenset(boxes)
    player = jitter_player(rng, floor, box_set, player, displacement)
    return Puzzle(n_rows, n_cols, floor, frozenset(targets), box_set, player, score)


# -- game rules and planning -------------------------------------------------------------------
def push(
    floor: frozenset[Pos], boxes: frozenset[Pos], player: Pos, action: int
) -> tuple[Pos, frozenset[Pos]]:
    """The position after one push-move ``action``; unchanged when blocked."""
    delta = DELTAS[action]
    nxt = _add(player, delta)
    if nxt not in floor:
        return player, boxes
    if nxt in boxes:
        beyond = _add(nxt, delta)
        if beyond not in floor or beyond in boxes:
            return player, boxes
        return nxt, (boxes - {nxt}) | {beyond}
    return nxt, boxes


def _is_dead(floor: frozenset[Pos], targets: frozenset[Pos], box: Pos) -> bool:
    """A box off target in a corner can never move again."""
    if box in targets:
        return False
    up, down, left, right = (_add(box, d) not in floor for d in DELTAS)
    return (up or down) and (left or right)


def solve(
    floor: frozenset[Pos], targets: frozenset[Pos], boxes: frozenset[Pos], player: Pos
) -> list[int] | None:
    """Shortest action-id sequence that puts every box on a target (breadth-first search).

    Returns ``[]`` when already solved and ``None`` when no solution exists (or the search exceeds
    :data:`MAX_PLAN_STATES` positions). Ties are broken by the action order Up, Down, Left, Right.
    """
    if boxes <= targets:
        return []
    start = (player, boxes)
    parent: dict[tuple[Pos, frozenset[Pos]], tuple[Any, int]] = {start: (None, -1)}
    queue = deque([start])
    while queue and len(parent) < MAX_PLAN_STATES:
        state = queue.popleft()
        pos, bxs = state
        for action in range(4):
            new_pos, new_boxes = push(floor, bxs, pos, action)
            if new_pos == pos:
                continue
            nxt = (new_pos, new_boxes)
            if nxt in parent:
                continue
            if new_boxes is not bxs and any(_is_dead(floor, targets, b) for b in new_boxes - bxs):
                continue
            parent[nxt] = (state, action)
            if new_boxes <= targets:
                plan = []
                while nxt != start:
                    nxt, act = parent[nxt]
                    plan.append(act)
                return plan[::-1]
            queue.append(nxt)
    return None


def render(puzzle_shape: tuple[int, int], floor, targets, boxes, player: Pos) -> str:
    """The ``grid_coord`` observation text (see the module docstring)."""
    n_rows, n_cols = puzzle_shape
    rows = []
    for r in range(n_rows):
        row = []
        for c in range(n_cols):
            cell = (r, c)
            if cell not in floor:
                row.append("#")
            elif cell == player:
                row.append("S" if cell in targets else "P")
            elif cell in boxes:
                row.append("√" if cell in targets else "X")
            else:
                row.append("O" if cell in targets else "_")
        rows.append("".join(row))
    lines = ["Coordinates:", f"Board size: {n_rows} rows x {n_cols} cols (zero-indexed)."]
    entities = [
        ("Targets", [t for t in targets if t not in boxes and t != player]),
        ("Boxes", [b for b in boxes if b not in targets]),
        ("Boxes on target", [b for b in boxes if b in targets]),
        ("Player", [player] if player not in targets else []),
        ("Player on target", [player] if player in targets else []),
    ]
    lines += [f"{label}: {_fmt_list(cells)}" for label, cells in entities if cells]
    lines.append("Grid Map:")
    lines += rows
    return "\n".join(lines)


# -- the environment ---------------------------------------------------------------------------
class SokobanEnv(TextEnv):
    """Sokoban with push-only moves and generated, always-solvable rooms (see the module docstring)."""

    name: ClassVar[str] = "sokoban"
    instruction: ClassVar[str] = (
        "You are playing Sokoban. Your goal is to push every box onto a target. You see the board as "
        "a symbol grid and as zero-indexed (row, col) coordinates, with (0,0) at the top-left corner. "
        "Move with Up, Down, Left or Right. Walking into a box pushes it one cell in the same "
        "direction, but only if the cell behind the box is free: you cannot push a box into a wall "
        "or into another box, you cannot push two boxes at once, and you can never pull a box. "
        "Example answer: <answer>Right || Right || Up</answer>\n"
        "The meaning of each symbol in the state is:\n" + ", ".join(f"{s}: {m}" for s, m in SYMBOLS.items())
    )
    action_names: ClassVar[tuple[str, ...]] = ACTIONS
    agent_defaults: ClassVar[AgentDefaults] = AgentDefaults(
        max_turns=5, max_actions_per_turn=2, max_actions_per_traj=10, max_tokens_hint=120
    )

    def __init__(
        self,
        *,
        dim_x: int = 6,
        dim_y: int = 6,
        num_boxes: int = 1,
        max_steps: int = 100,
        search_depth: int = 300,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        for arg, value, low in (
            ("dim_x", dim_x, 3),
            ("dim_y", dim_y, 3),
            ("num_boxes", num_boxes, 1),
            ("max_steps", max_steps, 1),
            ("search_depth", search_depth, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}")
        interior = (dim_x - 2) * (dim_y - 2)
        if num_boxes + 2 > interior:
            raise ValueError(
                f"num_boxes={num_boxes} does not fit a {dim_x}x{dim_y} room "
                f"({interior} inner cells, need at least num_boxes + 2)"
            )
        self.dim_x, self.dim_y = int(dim_x), int(dim_y)
        self.num_boxes = int(num_boxes)
        self.max_steps = int(max_steps)
        self.search_depth = int(search_depth)
        self.floor: frozenset[Pos] = frozenset()
        self.targets: frozenset[Pos] = frozenset()
        self.boxes: frozenset[Pos] = frozenset()
        self.player: Pos = (0, 0)
        self.num_steps = 0

    # -- state helpers -------------------------------------------------------------------------
    def _observation(self) -> str:
        return render((self.dim_x, self.dim_y), self.floor, self.targets, self.boxes, self.player)

    @property
    def boxes_on_target(self) -> int:
        return len(self.boxes & self.targets)

    @property
    def solved(self) -> bool:
        return self.boxes_on_target == self.num_boxes

    # -- TextEnv hooks ---------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        base_seed = int(self.np_random.integers(2**63))
        for attempt in range(MAX_GENERATION_ATTEMPTS):
            rng = np.random.default_rng([base_seed, attempt])
            puzzle = generate_puzzle(rng, self.dim_x, self.dim_y, self.num_boxes, self.search_depth)
            if puzzle is not None:
                break
        else:
            raise RuntimeError(
                f"could not generate a {self.dim_x}x{self.dim_y} room with {self.num_boxes} boxes "
                f"in {MAX_GENERATION_ATTEMPTS} attempts"
            )
        self.floor, self.targets = puzzle.floor, puzzle.targets
        self.boxes, self.player = puzzle.boxes, puzzle.player
        self.num_steps = 0
        info = {"success": self.solved, "generation_attempts": attempt + 1, "room_score": puzzle.score}
        return self._observation(), info

    def _step(self, action: str) -> StepResult:
        index = _ACTION_INDEX.get(action.strip().lower())
        if index is None:
            return StepResult(
                obs=self._observation(), reward=0.0, action_is_valid=False, action_is_effective=False
            )
        before_on_target = self.boxes_on_target
        old_player = self.player
        self.player, self.boxes = push(self.floor, self.boxes, self.player, index)
        self.num_steps += 1
        reward = -0.1
        after_on_target = self.boxes_on_target
        if after_on_target > before_on_target:
            reward += 1.0
        elif after_on_target < before_on_target:
            reward -= 1.0
        solved = self.solved
        if solved:
            reward += 10.0
        return StepResult(
            obs=self._observation(),
            reward=reward,
            terminated=solved,
            truncated=not solved and self.num_steps >= self.max_steps,
            success=solved,
            action_is_valid=True,
            action_is_effective=self.player != old_player,
        )

    # -- expert ------------------------------------------------------------------------------------
    def plan(self) -> list[str] | None:
        """The optimal (fewest moves) action list from the current state; ``None`` if unsolvable."""
        ids = solve(self.floor, self.targets, self.boxes, self.player)
        return None if ids is None else [ACTIONS[i] for i in ids]

    def expert(self) -> ExpertMove:
        """Next move of the optimal plan, with a short reason that names the positions involved."""
        here = f"player {_fmt(self.player)}"
        if self.solved:
            return ExpertMove("Up", f"{here}. all boxes on targets, done")
        ids = solve(self.floor, self.targets, self.boxes, self.player)
        if not ids:
            return self._stuck_move(here)
        # The first push of the plan and the box it moves; follow that box to where it ends.
        first_push, player, boxes = None, self.player, self.boxes
        box = final = None
        for k, action in enumerate(ids):
            new_player, new_boxes = push(self.floor, boxes, player, action)
            if new_boxes != boxes:
                moved_from = new_player
                moved_to = _add(new_player, DELTAS[action])
                if first_push is None:
                    first_push, box, final = k, moved_from, moved_to
                elif moved_from == final:
                    final = moved_to
            player, boxes = new_player, new_boxes
        push_dir = ACTIONS[ids[first_push]].lower()
        head = f"{here} box {_fmt(box)} target {_fmt(final)}."
        action = ACTIONS[ids[0]]
        if first_push == 0:
            landing = _add(box, DELTAS[ids[0]])
            tail = ", box reaches target" if landing in self.targets else ""
            side = _STAND_SIDE[ids[0]]
            return ExpertMove(action, f"{head} player is {side} box, push {push_dir}{tail}")
        stand = (box[0] - DELTAS[ids[first_push]][0], box[1] - DELTAS[ids[first_push]][1])
        side = _STAND_SIDE[ids[first_push]]
        think = f"{head} box must go {push_dir}, so stand {side} it at {_fmt(stand)}. go {action.lower()}"
        return ExpertMove(action, think)

    def _stuck_move(self, here: str) -> ExpertMove:
        """No plan exists (a box is stuck): say so and make any move that changes the position."""
        loose = sorted(self.boxes - self.targets)
        free = sorted(self.targets - self.boxes)
        head = f"{here} box {_fmt(loose[0])} target {_fmt(free[0])}."
        for i, name in enumerate(ACTIONS):
            if push(self.floor, self.boxes, self.player, i)[0] != self.player:
                return ExpertMove(name, f"{head} box is stuck, puzzle cannot be solved. go {name.lower()}")
        return ExpertMove("Up", f"{head} box is stuck and player cannot move")
