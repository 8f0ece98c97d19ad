"""Tests for the multi-turn step figure (ragen2/bench/multiturn.py): the two runs differ only in the turns."""

from __future__ import annotations

from ragen2.bench.multiturn import MULTI_TURN, step_configs
from ragen2.config import RunConfig, apply_overrides, flatten, to_dict


def test_the_multi_turn_run_is_the_single_turn_run_with_the_papers_turns():
    base = apply_overrides(RunConfig(), ["trainer.algo=ppo", "warm_start.steps=300"])
    single, multi = step_configs(base, 4)
    diff = {k: v for k, v in flatten(to_dict(multi)).items() if flatten(to_dict(single))[k] != v}
    assert diff == {"rollout.max_turns": 5, "rollout.max_actions_per_turn": 2,
                    "warm_start.steps": MULTI_TURN["warm_start"]["steps"]}
    for cfg in (single, multi):  # training only: the studies' measurements are off, 4 steps, one checkpoint
        assert not cfg.collapse.enabled and not cfg.grad_analysis.enabled and cfg.rollout.val_groups == 1
        assert (cfg.trainer.steps, cfg.trainer.test_freq, cfg.trainer.save_freq) == (4, 0, 4)


def test_without_a_warm_start_both_start_from_the_random_policy():
    single, multi = step_configs(apply_overrides(RunConfig(), ["warm_start.steps=0"]), 2)
    assert single.warm_start.steps == multi.warm_start.steps == 0 and multi.rollout.max_turns == 5
