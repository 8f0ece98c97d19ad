"""One step's update data: batch preparation, old log-probs, mini-batch sizing, the loss normaliser."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ragen2.config import RunConfig, apply_overrides
from ragen2.rollout.types import RolloutBatch
from ragen2.trainer.algos import get_preset
from ragen2.trainer.critic import ValueModel
from ragen2.trainer.models import Models
from ragen2.trainer.update_data import mini_batch_rows, norm_constant, prepare_update_batch
from tests.trainer._tiny import tiny_lm, trajectories

SCORES = [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [2.0, 2.0, 0.0]]


def _models(critic: bool = False):
    return Models(actor=tiny_lm(), tokenizer=SimpleNamespace(pad_token_id=0), reference=None,
                  critic=ValueModel(tiny_lm(1)) if critic else None, init_path=Path("."))


def _rollout():
    return RolloutBatch(trajectories(SCORES), env_groups=3, group_size=3)


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
    cfg = apply_overrides(RunConfig(), ["trainer.mini_batch_size=32", "filter.loss_scaling=keep_rate"])
    assert mini_batch_rows(cfg, 48, 128) == 12
    assert mini_batch_rows(cfg, 128, 128) == 32
    none = apply_overrides(cfg, ["filter.loss_scaling=none"])
    assert mini_batch_rows(none, 48, 128) == 32


def test_norm_constant_uses_env_default_turns():
    cfg = apply_overrides(RunConfig(), ["rollout.max_new_tokens=100", "rollout.max_turns=0"])
    from ragen2.envs import env_class

    assert norm_constant(cfg) == 100 * env_class("frozenlake").agent_defaults.max_turns


def _with_behaviour(model, trajs, known_rows, temperature=1.0, shift=0.0):
    """Give ``known_rows`` sampling log-probs: the model's own (plus ``shift``), as a rollout records them."""
    from ragen2.trainer.actor import compute_logprobs
    from ragen2.trainer.batch import build_batch

    plain = build_batch(trajs, pad_id=0)
    logp, ent = compute_logprobs(model, plain, micro_batch_size=4, temperature=temperature)
    for i in known_rows:
        m = len(trajs[i].input_ids)
        trajs[i].behaviour_logprobs = [0.0] + (logp[i, :m - 1] + shift).tolist()
        trajs[i].behaviour_entropies = [0.0] + ent[i, :m - 1].tolist()
        trajs[i].behaviour_temperature = temperature
    return logp, ent


def test_old_logprobs_take_the_sampling_logprobs_and_recompute_the_other_rows():
    from ragen2.trainer.batch import build_batch
    from ragen2.trainer.update_data import old_logprobs

    model, trajs = tiny_lm(), trajectories(SCORES)
    logp, ent = _with_behaviour(model, trajs, known_rows=[0, 1, 4, 8], shift=0.5)
    batch = build_batch(trajs, pad_id=0, temperature=1.0)
    assert torch.isnan(batch.behaviour_logp[2]).all() and not torch.isnan(batch.behaviour_logp[0]).any()
    old, entropy = old_logprobs(model, batch, 4, 1.0, precision="fp32")
    mask = batch.loss_mask
    for i in range(len(trajs)):
        expected = logp[i] + (0.5 if i in (0, 1, 4, 8) else 0.0)  # the recorded ones are taken as they are
        assert torch.allclose(old[i] * mask[i], expected * mask[i], atol=1e-5)
        assert torch.allclose(entropy[i] * mask[i], ent[i] * mask[i], atol=1e-5)
    # under a lower precision every row is recomputed (the decode and the update forward round differently)
    bf16, _ = old_logprobs(model, batch, 4, 1.0, precision="bf16")
    assert (((bf16 - logp) * mask).abs().max() < 0.1) and ((bf16 - old)[0] * mask[0]).abs().max() > 0.4


def test_sampling_logprobs_of_another_temperature_are_not_used():
    from ragen2.trainer.batch import build_batch

    model, trajs = tiny_lm(), trajectories(SCORES)
    _with_behaviour(model, trajs, known_rows=range(len(trajs)), temperature=0.5)
    assert build_batch(trajs, pad_id=0, temperature=1.0).behaviour_logp is None
    assert build_batch(trajs, pad_id=0).behaviour_logp is None
    assert build_batch(trajs, pad_id=0, temperature=0.5).behaviour_logp is not None
