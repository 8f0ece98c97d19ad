"""FrozenLake-specific checks: slip dynamics, rewards, observation text, maps and expert (docs/method.md §1.2)."""

from __future__ import annotations

import copy
import re
from collections import Counter

import pytest

from ragen2 import envs
from ragen2.envs.frozenlake import FrozenLakeEnv, shortest_path

COORD = re.compile(r"\((\d+),(\d+)\)")


def parse(obs: str) -> dict:
    """Observation -> {label: list of cells} plus grid rows."""
    lines = obs.split("\n")
    assert lines[0] == "Coordinates:"
    assert re.fullmatch(r"Board size: (\d+) rows x \1 cols \(zero-indexed\)\.", lines[1]), lines[1]
    grid_at = lines.index("Grid Map:")
    entities = {}
    for line in lines[2:grid_at]:
        label, _, cells = line.partition(": ")
        entities[label] = [(int(r), int(c)) for r, c in COORD.findall(cells)]
    return {"entities": entities, "grid": lines[grid_at + 1 :]}


def open_lake(env: FrozenLakeEnv, player=(1, 1), goal=(3, 3), holes=()) -> None:
    """Put a reset env on a hand-made map."""
    env.holes, env.goal, env.start, env.player = frozenset(holes), goal, player, player
    env.num_steps = 0


def landing_counts(success_rate: float, action: str, seeds: range) -> Counter:
    """Where one ``action`` from (1,1) on an open lake lands, over many reset seeds."""
    env = FrozenLakeEnv(success_rate=success_rate)
    counts = Counter()
    for seed in seeds:
        env.reset(seed=seed)
        open_lake(env)
        env.step(action)
        counts[env.player] += 1
    return counts


# -- dynamics ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("success_rate", [0.8, 0.5])
def test_slip_probabilities(success_rate):
    n = 4000
    counts = landing_counts(success_rate, "Up", range(n))
    side = (1 - success_rate) / 2
    # Intended: up to (0,1); perpendicular: left (1,0) and right (1,2); never backwards (2,1).
    assert counts[(2, 1)] == 0
    assert counts[(0, 1)] / n == pytest.approx(success_rate, abs=0.03)
    assert counts[(1, 0)] / n == pytest.approx(side, abs=0.03)
    assert counts[(1, 2)] / n == pytest.approx(side, abs=0.03)
    assert sum(counts.values()) == n


def test_no_slip_at_success_rate_one_and_always_slip_at_zero():
    assert landing_counts(1.0, "Down", range(500)) == Counter({(2, 1): 500})
    counts = landing_counts(0.0, "Down", range(2000))
    assert set(counts) == {(1, 0), (1, 2)}  # only sideways
    assert counts[(1, 0)] / 2000 == pytest.approx(0.5, abs=0.05)


def test_default_success_rate_is_the_papers_two_percent_slip():
    assert FrozenLakeEnv().success_rate == 0.98


def test_off_board_move_stays_put():
    env = FrozenLakeEnv(success_rate=1.0)
    env.reset(seed=0)
    open_lake(env, player=(0, 0))
    obs, reward, terminated, truncated, info = env.step("Up")
    assert env.player == (0, 0) and reward == 0.0 and not (terminated or truncated)
    assert info["action_is_valid"] and not info["action_is_effective"]
    assert env.num_steps == 1


def test_group_members_share_map_and_slip_stream():
    a, b = FrozenLakeEnv(success_rate=0.5), FrozenLakeEnv(success_rate=0.5)
    for seed in range(20):
        assert a.reset(seed=seed)[0] == b.reset(seed=seed)[0]
        for action in ["Left", "Down", "Right", "Up"] * 3:
            assert a.step(action)[:4] == b.step(action)[:4]


def test_deepcopy_branch_shares_future_slips_but_not_state():
    env = FrozenLakeEnv(success_rate=0.5)
    env.reset(seed=4)
    open_lake(env)
    branch = copy.deepcopy(env)
    first = branch.step("Up")
    assert env.player == (1, 1) and env.num_steps == 0  # original untouched
    assert env.step("Up")[:4] == first[:4]  # same slip draw from the same generator state


# -- rewards and episode end -------------------------------------------------------------------------
def test_goal_gives_one_and_terminates():
    env = FrozenLakeEnv(success_rate=1.0)
    env.reset(seed=0)
    open_lake(env, player=(3, 2), goal=(3, 3))
    obs, reward, terminated, truncated, info = env.step("Right")
    assert reward == 1.0 and terminated and not truncated and info["success"]
    assert "Player on goal: (3,3)" in obs and parse(obs)["grid"][3] == "___√"
    assert env.step("Left")[4]["action_is_valid"] is False


def test_hole_terminates_without_reward():
    env = FrozenLakeEnv(success_rate=1.0)
    env.reset(seed=0)
    open_lake(env, player=(1, 1), holes=[(2, 1)])
    obs, reward, terminated, truncated, info = env.step("down")
    assert reward == 0.0 and terminated and not info["success"]
    assert "Player in hole: (2,1)" in obs and parse(obs)["grid"][2] == "_X__"


def test_truncated_after_max_steps():
    env = FrozenLakeEnv(success_rate=1.0, max_steps=4)
    env.reset(seed=0)
    open_lake(env, player=(0, 0))
    results = [env.step(a) for a in ["Up", "Left", "Up", "Left"]]
    assert [r[3] for r in results] == [False, False, False, True]
    assert not any(r[2] for r in results) and sum(r[1] for r in results) == 0.0


@pytest.mark.parametrize("action", ["", "jump", "Left || Up", "<answer>Up</answer>", "L", "upp"])
def test_invalid_actions_change_nothing_and_draw_no_slip(action):
    env, twin = FrozenLakeEnv(success_rate=0.5), FrozenLakeEnv(success_rate=0.5)
    obs0, _ = env.reset(seed=9)
    twin.reset(seed=9)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs == obs0 and reward == 0.0 and not (terminated or truncated)
    assert not info["action_is_valid"] and env.num_steps == 0
    assert env.step("Up")[:4] == twin.step("Up")[:4]


@pytest.mark.parametrize("action", ["LEFT", " down", "Right\n", "uP"])
def test_actions_are_case_and_space_insensitive(action):
    env = FrozenLakeEnv()
    env.reset(seed=0)
    assert env.step(action)[4]["action_is_valid"]


# -- observation and maps ----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(20))
def test_observation_coordinates_match_grid(seed):
    env = FrozenLakeEnv()
    obs, _ = env.reset(seed=seed)
    parsed = parse(obs)
    labels = list(parsed["entities"])
    assert labels[:3] == ["Start", "Goal", "Player"] and labels[3:] in ([], ["Holes"])
    grid = parsed["grid"]
    assert len(grid) == 4 and all(len(row) == 4 for row in grid)
    cells = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
    assert parsed["entities"]["Goal"] == [k for k, ch in cells.items() if ch == "G"]
    assert parsed["entities"]["Player"] == [k for k, ch in cells.items() if ch == "P"]
    assert parsed["entities"]["Start"] == parsed["entities"]["Player"]
    assert parsed["entities"].get("Holes", []) == [k for k, ch in cells.items() if ch == "O"]


def test_observation_example_text_and_start_kept_after_leaving():
    env = FrozenLakeEnv(success_rate=1.0)
    env.reset(seed=0)
    open_lake(env, player=(0, 1), goal=(3, 2), holes=[(1, 1), (2, 3)])
    assert env._observation() == (
        "Coordinates:\nBoard size: 4 rows x 4 cols (zero-indexed).\nStart: (0,1)\nGoal: (3,2)\n"
        "Player: (0,1)\nHoles: (1,1), (2,3)\nGrid Map:\n_P__\n_O__\n___O\n__G_"
    )
    obs, *_ = env.step("Right")
    assert "Start: (0,1)" in obs and "Player: (0,2)" in obs and parse(obs)["grid"][0] == "__P_"


def test_maps_are_solvable_with_distinct_start_and_goal():
    env = FrozenLakeEnv()
    holes = starts = 0
    for seed in range(300):
        env.reset(seed=seed)
        assert env.start != env.goal
        assert env.start not in env.holes and env.goal not in env.holes
        assert shortest_path(env.holes, 4, env.start, env.goal)
        holes += len(env.holes)
        starts += env.start == (0, 0)
    # About 1 - p = 10 % holes among the 14 tiles that are neither start nor goal.
    assert 0.06 < holes / (300 * 14) < 0.14
    assert starts < 60  # start is drawn uniformly, not pinned to a corner


def test_size_and_p_arguments():
    env = FrozenLakeEnv(size=6, p=1.0)
    obs, _ = env.reset(seed=1)
    assert "Board size: 6 rows x 6 cols" in obs and not env.holes and len(parse(obs)["grid"]) == 6


# -- expert -------------------------------------------------------------------------------------------
def test_expert_always_succeeds_on_a_deterministic_lake():
    for seed in range(100):
        env = FrozenLakeEnv(success_rate=1.0)
        env.reset(seed=seed)
        optimum = len(env.plan())
        steps = 0
        while not env.done:
            _, reward, _, _, info = env.step(env.expert().action)
            steps += 1
        assert info["success"] and reward == 1.0 and steps == optimum, seed


def test_expert_think_is_short_and_grounded():
    for seed in range(40):
        env = FrozenLakeEnv(success_rate=1.0)
        env.reset(seed=seed)
        while not env.done:
            move = env.expert()
            assert len(move.think.split()) <= 25, move.think
            head = f"player ({env.player[0]},{env.player[1]}) goal ({env.goal[0]},{env.goal[1]})."
            assert move.think.startswith(head)
            assert move.think.endswith(f"go {move.action.lower()}") or "around" in move.think
            for cell in COORD.findall(move.think)[2:]:  # any further tile named is a hole
                assert (int(cell[0]), int(cell[1])) in env.holes
            env.step(move.action)


def test_expert_names_the_hole_it_avoids():
    env = FrozenLakeEnv(success_rate=1.0)
    env.reset(seed=0)
    open_lake(env, player=(0, 1), goal=(3, 1), holes=[(1, 1)])
    move = env.expert()
    assert move.action in ("Left", "Right") and "hole (1,1) below" in move.think


# -- API details ------------------------------------------------------------------------------------
def test_class_attributes_and_registry():
    assert FrozenLakeEnv.action_names == ("Left", "Down", "Right", "Up")
    assert "<answer>Left || Up || Up</answer>" in FrozenLakeEnv.instruction
    assert "O: hole" in FrozenLakeEnv.instruction
    defaults = FrozenLakeEnv.agent_defaults
    assert (defaults.max_turns, defaults.max_actions_per_turn, defaults.max_actions_per_traj) == (5, 2, 10)
    env = envs.make("frozenlake", success_rate=1.0)
    assert isinstance(env, FrozenLakeEnv) and env.success_rate == 1.0
