"""Countdown environment and data: generator, real-data loader, offline file, env behaviour (docs/method.md §1.3)."""

from __future__ import annotations

import copy
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragen2 import envs
from ragen2.envs.countdown import (
    CountdownEnv,
    generate_problems,
    load_countdown_parquet,
    write_offline_data,
)
from ragen2.envs.countdown_arithmetic import score_expression, solve

OBS = re.compile(r"Target: (\d+), nums: \[(\d+(?:, \d+)*)\]")
SMALL = 300  # problems in the generated sets most tests use


def parse_obs(obs: str) -> tuple[int, list[int]]:
    match = OBS.fullmatch(obs)
    assert match, obs
    return int(match[1]), [int(n) for n in match[2].split(", ")]


def write_countdown_parquet(path, rows: list[tuple[int, list[int]]]) -> None:
    """A file in the real set's schema: ``target`` int64, ``nums`` list<int64>."""
    table = pa.table(
        {
            "target": pa.array([t for t, _ in rows], pa.int64()),
            "nums": pa.array([n for _, n in rows], pa.list_(pa.int64())),
        }
    )
    pq.write_table(table, path)


# -- generated data -----------------------------------------------------------------------------
def test_generator_is_deterministic_and_seeded():
    assert generate_problems(50, 3) == generate_problems(50, 3)
    assert generate_problems(50, 3) != generate_problems(50, 4)
    assert generate_problems(20, 3) == generate_problems(50, 3)[:20]


def test_generated_problems_are_solvable_and_in_range():
    problems = generate_problems(1000, 0)
    sizes = {len(p["nums"]) for p in problems}
    assert sizes == {3, 4}
    for p in problems:
        assert 1 <= p["target"] <= 100
        assert all(1 <= n <= 99 for n in p["nums"])
        assert score_expression(p["solution"], p["target"], p["nums"]).reward == 1.0, p
    # Most problems are distinct.
    assert len({(p["target"], tuple(p["nums"])) for p in problems}) > 990


def test_number_count_is_configurable_and_the_default_set_is_unchanged_by_the_option():
    assert generate_problems(200, 0, 3, 4) == generate_problems(200, 0)
    pairs = generate_problems(300, 0, min_numbers=2, max_numbers=2)
    assert {len(p["nums"]) for p in pairs} == {2}
    for p in pairs:
        assert 1 <= p["target"] <= 100
        assert score_expression(p["solution"], p["target"], p["nums"]).reward == 1.0, p
    assert {len(p["nums"]) for p in generate_problems(300, 0, min_numbers=4, max_numbers=5)} == {4, 5}
    env = envs.make("countdown", min_numbers=2, max_numbers=2, num_problems=SMALL)
    obs, _ = env.reset(seed=7)
    assert len(parse_obs(obs)[1]) == 2
    _, reward, *_ = env.step(env.expert().action)
    assert reward == 1.0


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [({"min_numbers": 1}, "min_numbers must be an int in [2, 6], got 1"),
     ({"max_numbers": 7}, "max_numbers must be an int in [2, 6], got 7"),
     ({"min_numbers": True}, "got True"),
     ({"min_numbers": 4, "max_numbers": 3}, "min_numbers=4, max_numbers=3")],
)
def test_number_count_rejects_bad_values(kwargs, bad):
    with pytest.raises(ValueError, match=re.escape(bad)):
        generate_problems(10, 0, **kwargs)
    with pytest.raises(ValueError, match=re.escape(bad)):
        CountdownEnv(**kwargs)


def test_number_count_is_refused_with_a_data_file(tmp_path):
    path = tmp_path / "cd.parquet"
    write_countdown_parquet(path, ROWS[:3])
    with pytest.raises(ValueError, match="min_numbers / max_numbers shape the generated set only"):
        CountdownEnv(data_path=path, min_numbers=2, max_numbers=2)


@pytest.mark.parametrize(
    ("n", "seed", "bad"), [(0, 0, "0"), (-1, 0, "-1"), (2.0, 0, "2.0"), (5, -1, "-1"), (5, "0", "'0'")]
)
def test_generator_rejects_bad_arguments(n, seed, bad):
    with pytest.raises(ValueError, match=re.escape(f"got {bad}")):
        generate_problems(n, seed)


# -- real-data loader ---------------------------------------------------------------------------
ROWS = [
    (24, [2, 3, 4]),  # needs *: the reference's +/- filter would drop it, our full solver keeps it
    (100, [1, 1, 1]),  # unsolvable
    (9, [2, 3, 4]),
    (1000, [10, 100, 7]),  # solvable only without the 7
    (10, [1, 2, 3, 4]),
    (50, [25, 25, 1, 1]),  # beyond the rows read when num_problems=5
]


def test_real_loader_keeps_solvable_rows_of_the_first_n(tmp_path):
    path = tmp_path / "train.parquet"
    write_countdown_parquet(path, ROWS)
    problems = load_countdown_parquet(path, num_problems=5, cache_dir=tmp_path / "cache")
    assert [(p["target"], p["nums"]) for p in problems] == [ROWS[0], ROWS[2], ROWS[4]]
    for p in problems:
        assert score_expression(p["solution"], p["target"], p["nums"]).reward == 1.0
    subset = load_countdown_parquet(
        path, num_problems=5, require_all_numbers=False, cache_dir=tmp_path / "c2"
    )
    assert [(p["target"], p["nums"]) for p in subset] == [ROWS[0], ROWS[2], ROWS[3], ROWS[4]]


def test_real_loader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        load_countdown_parquet(tmp_path / "missing.parquet")
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"target": [1], "numbers": [[1]]}), bad)
    with pytest.raises(ValueError, match="nums"):
        load_countdown_parquet(bad, cache_dir=tmp_path / "cache")
    negative = tmp_path / "negative.parquet"
    write_countdown_parquet(negative, [(3, [-1, 4])])
    with pytest.raises(ValueError, match=r"\[-1, 4\]"):
        load_countdown_parquet(negative, cache_dir=tmp_path / "cache2")


def test_env_on_real_data(tmp_path):
    path = tmp_path / "train.parquet"
    write_countdown_parquet(path, ROWS)
    env = CountdownEnv(data_path=path, num_problems=5)
    assert env.num_problems == 3
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        assert parse_obs(obs) == ROWS[[0, 2, 4][seed % 3]]
        assert env.step(env.expert().action)[1] == 1.0
    empty = tmp_path / "unsolvable.parquet"
    write_countdown_parquet(empty, [(100, [1, 1, 1])])
    with pytest.raises(ValueError, match="unsolvable.parquet"):
        CountdownEnv(data_path=empty)


# -- offline file -------------------------------------------------------------------------------
def test_write_offline_data_round_trips(tmp_path):
    paths = write_offline_data(tmp_path, num_problems=SMALL)
    assert paths == [tmp_path / "countdown" / "train.parquet"]
    assert sorted(p.name for p in (tmp_path / "countdown").iterdir()) == ["train.parquet"]  # no temp left
    table = pq.read_table(paths[0])
    assert table.column_names == ["target", "nums", "solution"]
    assert table.to_pylist() == generate_problems(SMALL, 0)
    # Rewriting replaces the file, and the real loader reads it back (all rows solvable).
    write_offline_data(tmp_path, num_problems=SMALL)
    loaded = load_countdown_parquet(paths[0], num_problems=SMALL, cache_dir=tmp_path / "cache")
    assert [(p["target"], p["nums"]) for p in loaded] == [
        (p["target"], p["nums"]) for p in generate_problems(SMALL, 0)
    ]


# -- environment --------------------------------------------------------------------------------
def make_env(**kw) -> CountdownEnv:
    return CountdownEnv(num_problems=SMALL, **kw)


def test_observation_and_seed_to_problem():
    env = make_env()
    problems = generate_problems(SMALL, 0)
    for seed in (0, 1, 299, 300, 1234):
        obs, info = env.reset(seed=seed)
        expected = problems[seed % SMALL]
        assert parse_obs(obs) == (expected["target"], expected["nums"])
        assert info["problem_index"] == seed % SMALL
    assert obs == f"Target: {expected['target']}, nums: [{', '.join(map(str, expected['nums']))}]"


def test_reset_without_seed_is_reproducible_after_a_seeded_reset():
    a, b = make_env(), make_env()
    a.reset(seed=5)
    b.reset(seed=5)
    assert [a.reset()[0] for _ in range(5)] == [b.reset()[0] for _ in range(5)]


def test_step_tiers_through_the_env():
    env = make_env()
    obs, _ = env.reset(seed=0)
    target, nums = parse_obs(obs)
    solution = solve(nums, target)
    assert sum(nums) != target  # so the plain sum is a legal but wrong answer
    cases = [
        (solution, 1.0, True, True),
        (" + ".join(map(str, nums)), 0.1, False, True),
        ("1 + 1 + 1 + 1 + 1", 0.0, False, False),
        ("9**9**9", 0.0, False, False),
        ("", 0.0, False, False),
    ]
    for action, reward, success, valid in cases:
        env.reset(seed=0)
        obs2, r, terminated, truncated, info = env.step(action)
        assert (r, info["success"], info["action_is_valid"]) == (reward, success, valid), action
        assert terminated and not truncated
        assert obs2 == obs
        # After the single action the episode is over: further steps are invalid and change nothing.
        assert env.step(solution)[1:3] == (0.0, True)
        assert not env.step(solution)[4]["action_is_valid"]


def test_non_string_action_is_invalid():
    env = make_env()
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(None)
    assert (reward, terminated, info["action_is_valid"]) == (0.0, False, False)


def test_require_all_numbers_false():
    env = make_env(require_all_numbers=False)
    obs, _ = env.reset(seed=0)
    target, nums = parse_obs(obs)
    assert env.step(str(nums[0]))[1] == (1.0 if nums[0] == target else 0.1)


def test_expert_solves_every_problem_with_grounded_reasoning():
    env = make_env()
    solved = 0
    for seed in range(SMALL):
        obs, _ = env.reset(seed=seed)
        target, nums = parse_obs(obs)
        move = env.expert()
        assert move.think.startswith(f"target {target} nums {' '.join(map(str, nums))}. ")
        assert move.think.rstrip(".").endswith(f"= {target}")
        solved += env.step(move.action)[4]["success"]
    assert solved / SMALL >= 0.95
    assert solved == SMALL  # the stored solutions are exact


def test_deepcopy_is_independent_and_shares_the_problem_set():
    env = make_env()
    env.reset(seed=3)
    branch = copy.deepcopy(env)
    assert branch._problems is env._problems
    branch.step(branch.expert().action)
    assert branch.done and not env.done
    assert env.step(env.expert().action)[1] == 1.0


def test_missing_data_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        CountdownEnv(data_path=tmp_path / "nope.parquet")


def test_registry_and_defaults():
    env = envs.make("countdown", num_problems=SMALL)
    assert isinstance(env, CountdownEnv)
    defaults = CountdownEnv.agent_defaults
    assert (defaults.max_turns, defaults.max_actions_per_turn, defaults.max_actions_per_traj) == (1, 1, 1)
    assert defaults.max_tokens_hint == 100
    assert "<answer>" in CountdownEnv.instruction and "<think>" in CountdownEnv.instruction
    # The instruction's own example is correct.
    assert score_expression("2 * 3 + 4", 10, [2, 3, 4]).reward == 1.0
