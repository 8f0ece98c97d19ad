"""DAPO dynamic sampling: constant groups replaced by fresh varied ones, seeds of the refill rounds."""

import pytest

from ragen2.config import RunConfig, apply_overrides
from ragen2.rollout.types import RolloutBatch, Trajectory
from ragen2.trainer.dynamic_sampling import REFILL_SEED_OFFSET, dynamic_sampling, refill_groups, refill_seeds
from ragen2.trainer.seeds import train_seeds


def _batch(rows: list[list[float]], seed0: int = 0) -> RolloutBatch:
    trajs = [Trajectory(group=g, env_seed=seed0 + g, turns=[], input_ids=[1, 2], loss_mask=[0, 1],
                        reasoning_mask=[0, 0], score=float(s), success=s > 0, num_actions=1,
                        first_prompt_ids=[1], first_reasoning_ids=[])
             for g, row in enumerate(rows) for s in row]
    return RolloutBatch(trajs, env_groups=len(rows), group_size=len(rows[0]))


class Drawer:
    """Hands out scripted fresh batches and records what was asked."""

    def __init__(self, *batches: list[list[float]]):
        self.batches = list(batches)
        self.calls: list[tuple[int, int]] = []

    def __call__(self, n: int, round_: int) -> RolloutBatch:
        self.calls.append((n, round_))
        rows = self.batches.pop(0)
        assert len(rows) == n
        return _batch(rows, seed0=100 * round_)


def test_constant_groups_are_replaced_by_varied_fresh_ones():
    step = _batch([[1, 1], [0, 1], [0, 0], [1, 0]])  # groups 0 and 2 constant
    draw = Drawer([[1, 1], [0, 1]], [[1, 0]])  # round 1 yields one varied group, round 2 the other
    out = refill_groups(step, [0, 1, 2, 3], draw, max_rounds=10)
    assert draw.calls == [(2, 1), (1, 2)]  # only the missing groups are drawn
    assert out.kept == [1, 3, 4, 5]
    assert out.rollout.env_groups == 6 and len(out.rollout) == 12
    assert [t.group for t in out.rollout.trajectories] == [g for g in range(6) for _ in range(2)]
    assert [t.env_seed for t in out.rollout.trajectories[8:]] == [101, 101, 200, 200]
    assert out.rollout.scores[4].tolist() == [0, 1] and out.rollout.scores[5].tolist() == [1, 0]
    assert out.metrics == {"filter/dynamic_sampling_dropped": 2.0, "filter/dynamic_sampling_rounds": 2.0,
                           "filter/dynamic_sampling_drawn": 3.0, "filter/dynamic_sampling_short": 0.0}


def test_the_filters_choice_sets_the_target_and_rounds_are_capped():
    step = _batch([[1, 1], [0, 1], [0, 0], [1, 0]])
    # the filter kept groups 0 and 1: one constant, so one group is wanted; every draw stays constant
    draw = Drawer([[0, 0]], [[1, 1]], [[0, 0]])
    out = refill_groups(step, [0, 1], draw, max_rounds=3)
    assert draw.calls == [(1, 1), (1, 2), (1, 3)]
    assert out.kept == [1] and out.rollout.env_groups == 4  # nothing accepted, nothing appended
    assert out.metrics["filter/dynamic_sampling_short"] == 1.0
    assert out.metrics["filter/dynamic_sampling_drawn"] == 3.0


def test_no_rounds_only_drops_and_nothing_to_do_draws_nothing():
    step = _batch([[1, 1], [0, 1]])
    out = refill_groups(step, [0, 1], Drawer(), max_rounds=0)
    assert out.kept == [1] and out.rollout is step and out.metrics["filter/dynamic_sampling_short"] == 1.0
    varied = refill_groups(step, [1], Drawer(), max_rounds=5)
    assert varied.kept == [1] and varied.metrics["filter/dynamic_sampling_rounds"] == 0.0
    assert refill_groups(step, [], Drawer(), max_rounds=5).kept == []  # empty filter result: no refill
    with pytest.raises(ValueError, match="-1"):
        refill_groups(step, [0], Drawer(), max_rounds=-1)


@pytest.mark.parametrize("algo", ["ppo", "grpo", "dr_grpo"])
def test_algorithms_without_dynamic_sampling_get_the_batch_back_unchanged(algo):
    cfg = apply_overrides(RunConfig(), [f"trainer.algo={algo}"])
    step = _batch([[1, 1], [0, 1], [0, 0]])
    out = dynamic_sampling(None, cfg, step, [0, 2], step=1)  # no models: nothing may be drawn
    assert out.rollout is step and out.kept == [0, 2] and out.metrics == {}


def test_a_draw_of_the_wrong_size_is_named():
    step = _batch([[1, 1], [1, 1]])
    with pytest.raises(ValueError, match=r"draw\(2, 1\) returned 1 groups"):
        refill_groups(step, [0, 1], lambda n, r: _batch([[0, 1]]), max_rounds=1)


def test_refill_seeds_are_fresh_per_step_and_round_and_apart_from_training():
    cfg = apply_overrides(RunConfig(), ["rollout.env_groups=8", "trainer.max_refill_rounds=3"])
    blocks = [refill_seeds(cfg, step, r, 8) for step in range(1, 201) for r in (1, 2, 3)]
    flat = [s for b in blocks for s in b]
    assert len(set(flat)) == len(flat) == 200 * 3 * 8
    training = {s for step in range(1, 201) for s in train_seeds(cfg, step)}
    assert training.isdisjoint(flat) and min(flat) == cfg.rollout.train_seed + REFILL_SEED_OFFSET
    assert refill_seeds(cfg, 5, 2, 3) == refill_seeds(cfg, 5, 2, 8)[:3]
    with pytest.raises(ValueError, match="9"):
        refill_seeds(cfg, 1, 1, 9)


def test_append_groups_renumbers_and_checks_the_group_size():
    a, b = _batch([[0, 1]]), _batch([[1, 1], [0, 0], [1, 0]], seed0=50)
    merged = a.append_groups(b, [2, 0])
    assert merged.env_groups == 3 and [t.env_seed for t in merged.trajectories] == [0, 0, 52, 52, 50, 50]
    assert merged.scores.tolist() == [[0, 1], [1, 0], [1, 1]]
    assert [t.group for t in b.trajectories] == [0, 0, 1, 1, 2, 2]  # the source is untouched
    with pytest.raises(ValueError, match="group_size 3"):
        a.append_groups(_batch([[0, 1, 1]]), [0])
