"""Sokoban-specific checks: rules, rewards, observation text, generator and expert (docs/method.md §1.1)."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import time

import pytest

from ragen2 import envs
from ragen2.envs.sokoban import ACTIONS, SokobanEnv, push, solve

COORD = re.compile(r"\((\d+),(\d+)\)")
LABELS = ("Targets", "Boxes", "Boxes on target", "Player", "Player on target")


def parse(obs: str) -> dict:
    """Coordinates block -> {label: set of cells}, plus board size and grid rows."""
    lines = obs.split("\n")
    assert lines[0] == "Coordinates:"
    size = re.fullmatch(r"Board size: (\d+) rows x (\d+) cols \(zero-indexed\)\.", lines[1])
    assert size, lines[1]
    grid_at = lines.index("Grid Map:")
    entities = {}
    for line in lines[2:grid_at]:
        label, _, cells = line.partition(": ")
        assert label in LABELS, line
        entities[label] = {(int(r), int(c)) for r, c in COORD.findall(cells)}
    order = [label for label in LABELS if label in entities]
    assert list(entities) == order, "coordinate lines out of order"
    return {"rows": int(size[1]), "cols": int(size[2]), "entities": entities, "grid": lines[grid_at + 1 :]}


def set_state(env: SokobanEnv, grid: list[str]) -> None:
    """Overwrite the room of a reset env with a hand-drawn grid (symbols as in the observation)."""
    cells = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
    env.dim_x, env.dim_y = len(grid), len(grid[0])
    env.floor = frozenset(p for p, ch in cells.items() if ch != "#")
    env.targets = frozenset(p for p, ch in cells.items() if ch in "O√S")
    env.boxes = frozenset(p for p, ch in cells.items() if ch in "X√")
    env.player = next(p for p, ch in cells.items() if ch in "PS")
    env.num_boxes = len(env.boxes)
    env.num_steps = 0


@pytest.fixture
def env() -> SokobanEnv:
    e = SokobanEnv()
    e.reset(seed=0)
    return e


# -- observation -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
def test_observation_coordinates_match_grid(seed):
    env = SokobanEnv()
    obs, _ = env.reset(seed=seed)
    parsed = parse(obs)
    assert (parsed["rows"], parsed["cols"]) == (6, 6)
    grid = parsed["grid"]
    assert len(grid) == 6 and all(len(row) == 6 for row in grid)
    symbol_of = {"Targets": "O", "Boxes": "X", "Boxes on target": "√", "Player": "P", "Player on target": "S"}
    for label, symbol in symbol_of.items():
        drawn = {(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == symbol}
        assert parsed["entities"].get(label, set()) == drawn, label
    assert set("".join(grid)) <= set("#_OX√PS")
    # The outer ring is wall.
    assert grid[0] == grid[-1] == "######" and all(row[0] == row[-1] == "#" for row in grid)


def test_observation_example_text():
    env = SokobanEnv()
    env.reset(seed=0)
    set_state(env, ["######", "#O####", "#__###", "#X_###", "#_P_##", "######"])
    expected = (
        "Coordinates:\nBoard size: 6 rows x 6 cols (zero-indexed).\nTargets: (1,1)\nBoxes: (3,1)\n"
        "Player: (4,2)\nGrid Map:\n######\n#O####\n#__###\n#X_###\n#_P_##\n######"
    )
    assert env._observation() == expected


def test_player_on_target_and_box_on_target_lines(env):
    set_state(env, ["######", "#S_X_#", "#√__O#", "######"])
    parsed = parse(env._observation())
    assert parsed["entities"] == {
        "Targets": {(2, 4)},
        "Boxes": {(1, 3)},
        "Boxes on target": {(2, 1)},
        "Player on target": {(1, 1)},
    }


# -- rules and rewards -----------------------------------------------------------------------
def test_plain_move_costs_a_tenth(env):
    set_state(env, ["######", "#P__O#", "#_X__#", "######"])
    obs, reward, terminated, truncated, info = env.step("Right")
    assert reward == pytest.approx(-0.1)
    assert env.player == (1, 2) and info["action_is_effective"] and info["action_is_valid"]
    assert not (terminated or truncated or info["success"])
    assert "Player: (1,2)" in obs


def test_push_onto_last_target_solves(env):
    set_state(env, ["######", "#PXO_#", "######"])
    _, reward, terminated, truncated, info = env.step("right")
    assert reward == pytest.approx(-0.1 + 1 + 10)
    assert terminated and not truncated and info["success"]
    assert env.boxes == {(1, 3)} and env.player == (1, 2)
    # After the end every action is a no-op.
    _, reward, *_rest, info = env.step("Left")
    assert reward == 0.0 and not info["action_is_valid"] and info["success"]


def test_box_on_target_count_up_and_down(env):
    set_state(env, ["#######", "#PXO__#", "#___XO#", "#######"])
    # Onto one of two targets: +1, not solved.
    _, reward, terminated, _, info = env.step("Right")
    assert env.boxes == {(1, 3), (2, 4)}
    assert reward == pytest.approx(0.9) and not terminated and not info["success"]
    # Pushing a box off its target: -1.
    set_state(env, ["#######", "#P√_OX#", "#######"])
    _, reward, terminated, _, info = env.step("Right")
    assert env.boxes == {(1, 3), (1, 5)}
    assert reward == pytest.approx(-1.1) and not terminated


def test_push_blocked_by_wall_or_box(env):
    set_state(env, ["######", "#PX#_#", "#_XXO#", "######"])
    _, reward, _, _, info = env.step("Right")  # box against a wall
    assert env.player == (1, 1) and env.boxes == {(1, 2), (2, 2), (2, 3)}
    assert reward == pytest.approx(-0.1) and info["action_is_valid"] and not info["action_is_effective"]
    env.player = (2, 1)
    env.step("Right")  # two boxes in a row: neither moves
    assert env.player == (2, 1) and env.boxes == {(1, 2), (2, 2), (2, 3)}
    env.step("Up")  # into a wall
    env.step("Down")
    assert env.player == (2, 1) and env.num_steps == 4


def test_push_function_is_pure():
    floor = frozenset({(1, 1), (1, 2), (1, 3)})
    boxes = frozenset({(1, 2)})
    assert push(floor, boxes, (1, 1), ACTIONS.index("Right")) == ((1, 2), frozenset({(1, 3)}))
    assert boxes == {(1, 2)}
    assert push(floor, boxes, (1, 1), ACTIONS.index("Left")) == ((1, 1), boxes)


@pytest.mark.parametrize("action", ["", "jump", "Up || Down", "up!", "<answer>Up</answer>", "U p", "north"])
def test_invalid_actions_change_nothing(env, action):
    obs0 = env._obs
    steps = env.num_steps
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs == obs0 and reward == 0.0 and not (terminated or truncated)
    assert not info["action_is_valid"] and not info["action_is_effective"]
    assert env.num_steps == steps


@pytest.mark.parametrize("action", ["UP", " down ", "\tLeft\n", "rIgHt"])
def test_actions_are_case_and_space_insensitive(env, action):
    _, reward, *_, info = env.step(action)
    assert info["action_is_valid"] and reward == pytest.approx(-0.1)


def test_truncated_after_max_steps():
    env = SokobanEnv(max_steps=3)
    env.reset(seed=0)
    set_state(env, ["######", "#P_XO#", "######"])
    results = [env.step("Up") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert not any(r[2] for r in results) and not results[-1][4]["success"]
    assert env.done


# -- generator ------------------------------------------------------------------------------------
def test_generated_puzzles_are_solvable_and_unsolved():
    env = SokobanEnv()
    for seed in range(100):
        env.reset(seed=seed)
        assert len(env.boxes) == len(env.targets) == 1
        assert env.boxes <= env.floor and env.player in env.floor and env.player not in env.boxes
        assert not env.solved
        plan = env.plan()
        assert plan, f"seed {seed}: no plan for a generated puzzle"


def test_two_box_rooms_are_solvable():
    env = SokobanEnv(dim_x=7, dim_y=7, num_boxes=2)
    for seed in range(5):
        env.reset(seed=seed)
        assert len(env.boxes) == len(env.targets) == 2
        assert env.plan() is not None


def test_same_seed_same_room_and_different_seeds_vary():
    a, b = SokobanEnv(), SokobanEnv()
    assert all(a.reset(seed=s)[0] == b.reset(seed=s)[0] for s in range(20))
    assert len({a.reset(seed=s)[0] for s in range(50)}) > 30


def test_rooms_do_not_depend_on_the_process_hash_seed():
    code = (
        "from ragen2.envs.sokoban import SokobanEnv\n"
        "e = SokobanEnv()\n"
        "print(repr([e.reset(seed=s)[0] for s in range(40)]))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": hash_seed, "PATH": ""},
        ).stdout
        for hash_seed in ("1", "2")
    }
    env = SokobanEnv()
    assert outputs == {repr([env.reset(seed=s)[0] for s in range(40)]) + "\n"}


def test_generation_retries_are_counted_and_bounded():
    env = SokobanEnv()
    attempts = [env.reset(seed=s)[1]["generation_attempts"] for s in range(100)]
    assert min(attempts) >= 1 and max(attempts) <= 100


def test_reset_is_fast():
    env = SokobanEnv()
    env.reset(seed=0)
    start = time.perf_counter()
    for seed in range(100):
        env.reset(seed=seed)
    mean_ms = (time.perf_counter() - start) * 10
    assert mean_ms < 50, f"mean reset {mean_ms:.1f} ms"


# -- expert ---------------------------------------------------------------------------------------
def test_expert_solves_within_max_steps_optimally():
    solved = 0
    for seed in range(100):
        env = SokobanEnv()
        env.reset(seed=seed)
        plan = env.plan()
        total, steps = 0.0, 0
        while not env.done:
            _, reward, _, _, info = env.step(env.expert().action)
            total += reward
            steps += 1
        solved += info["success"]
        if info["success"]:
            assert steps == len(plan)
            assert total == pytest.approx(11 - 0.1 * steps)
    assert solved >= 95


def test_plan_is_shortest_against_exhaustive_search():
    # Iterative deepening over all action sequences (independent of the BFS) on small puzzles.
    env = SokobanEnv()
    checked = 0
    for seed in range(40):
        env.reset(seed=seed)
        plan = env.plan()
        if len(plan) > 5:
            continue
        checked += 1
        frontier = {(env.player, env.boxes)}
        for depth in range(1, len(plan) + 1):
            frontier = {push(env.floor, b, p, a) for p, b in frontier for a in range(4)}
            hit = any(b <= env.targets for _, b in frontier)
            assert hit == (depth == len(plan)), (seed, depth, len(plan))
    assert checked >= 20


def test_expert_think_is_short_and_grounded():
    env = SokobanEnv()
    for seed in range(30):
        env.reset(seed=seed)
        while not env.done:
            move = env.expert()
            words = move.think.split()
            assert len(words) <= 25, move.think
            assert move.think.startswith(f"player ({env.player[0]},{env.player[1]}) box (")
            box = tuple(int(x) for x in COORD.findall(move.think)[1])
            assert box in env.boxes
            assert move.action.lower() in move.think  # the chosen direction is stated
            env.step(move.action)


def test_expert_when_box_is_stuck(env):
    set_state(env, ["#####", "#X_O#", "#P__#", "#####"])
    assert env.plan() is None and solve(env.floor, env.targets, env.boxes, env.player) is None
    move = env.expert()
    assert "stuck" in move.think
    assert env.step(move.action)[4]["action_is_effective"]


# -- API details ------------------------------------------------------------------------------------
def test_deepcopy_branch_is_independent(env):
    obs0 = env._obs
    branch = copy.deepcopy(env)
    for action in branch.plan():
        branch.step(action)
    assert branch.done and not env.done and env._obs == obs0
    assert env.plan() is not None


def test_class_attributes_and_registry():
    assert SokobanEnv.action_names == ("Up", "Down", "Left", "Right")
    assert "<answer>Right || Right || Up</answer>" in SokobanEnv.instruction
    assert "√: box on target" in SokobanEnv.instruction
    defaults = SokobanEnv.agent_defaults
    assert (defaults.max_turns, defaults.max_actions_per_turn, defaults.max_actions_per_traj) == (5, 2, 10)
    assert defaults.max_tokens_hint == 120
    assert isinstance(envs.make("sokoban", max_steps=7), SokobanEnv)
