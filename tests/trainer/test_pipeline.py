"""Step building blocks: seeds, batch preparation, mini-batch sizing."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ragen2.config import RunConfig, apply_overrides
from ragen2.rollout.types import RolloutBatch
from ragen2.trainer.algos import get_preset
from ragen2.trainer.critic import ValueModel
from ragen2.trainer.pipeline import (
    Models,
    mini_batch_rows,
    norm_constant,
    prepare_update_batch,
    stream_seed,
    train_seeds,
)
from tests.trainer._tiny import tiny_lm, trajectories

SCORES = [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [2.0, 2.0, 0.0]]


def _models(critic: bool = False):
    return Models(actor=tiny_lm(), tokenizer=SimpleNamespace(pad_token_id=0), reference=None,
                  critic=ValueModel(tiny_lm(1)) if critic else None, init_path=Path("."))


def _rollout():
    return RolloutBatch(trajectories(SCORES), env_groups=3, group_size=3)


def test_train_seeds_follow_the_spec():
    cfg = apply_overrides(RunConfig(), ["rollout.env_groups=4", "rollout.train_seed=100"])
    assert train_seeds(cfg, 1) == [100, 101, 102, 103]
    assert train_seeds(cfg, 3) == [108, 109, 110, 111]


def test_stream_seeds_differ_by_purpose_step_and_seed():
    seeds = {stream_seed(0, "rollout", 1), stream_seed(0, "rollout", 2), stream_seed(0, "collapse", 1),
             stream_seed(1, "rollout", 1)}
    assert len(seeds) == 4 and all(0 <= s < 2**63 for s in seeds)
    assert stream_seed(5, "x", 3) == stream_seed(5, "x", 3)


@pytest.mark.parametrize("kept_only,rows,task_rows", [(False, 9, 6), (True, 6, 6)])
def test_dropped_groups_keep_only_regularisers_unless_kept_only(kept_only, rows, task_rows):
    cfg = apply_overrides(RunConfig(), [f"filter.regularize_kept_only={str(kept_only).lower()}",
                                        "trainer.algo=grpo", "trainer.micro_batch_size=4"])
    batch, metrics = prepare_update_batch(_models(), _rollout(), [0, 2], cfg, get_preset("grpo"))
    assert len(batch) == rows and metrics["train/task_rows"] == task_rows
    assert set(batch.group_ids[batch.task_weight == 1].tolist()) == {0, 2}
    assert batch.old_logp.shape == batch.loss_mask.shape
    # GRPO advantages: per group, broadcast over the trained tokens
    first = batch.advantages[0][batch.loss_mask[0] == 1]
    assert torch.allclose(first, first[0].expand_as(first)) and first[0] > 0


def test_ppo_batch_has_values_returns_and_whitened_advantages():
    cfg = apply_overrides(RunConfig(), ["trainer.algo=ppo", "trainer.micro_batch_size=4"])
    batch, metrics = prepare_update_batch(_models(critic=True), _rollout(), [0, 1, 2], cfg, get_preset("ppo"))
    assert batch.values is not None and batch.returns is not None
    assert metrics["adv/mean"] == pytest.approx(0.0, abs=1e-5)
    assert metrics["adv/std"] == pytest.approx(1.0, abs=0.05)


def test_mini_batch_shrinks_with_keep_rate_only_when_scaling():
    cfg = apply_overrides(RunConfig(), ["trainer.mini_batch_size=32"])
    assert mini_batch_rows(cfg, 48, 128) == 12
    assert mini_batch_rows(cfg, 128, 128) == 32
    none = apply_overrides(cfg, ["filter.loss_scaling=none"])
    assert mini_batch_rows(none, 48, 128) == 32


def test_norm_constant_uses_env_default_turns():
    cfg = apply_overrides(RunConfig(), ["rollout.max_new_tokens=100", "rollout.max_turns=0"])
    from ragen2.envs import env_class

    assert norm_constant(cfg) == 100 * env_class("frozenlake").agent_defaults.max_turns
