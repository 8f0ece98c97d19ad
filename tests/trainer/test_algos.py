"""Algorithm presets."""

import pytest

from ragen2.trainer.algos import dynamic_sampling_keep, get_preset, resolve_agg_mode


def test_presets():
    assert get_preset("ppo").uses_critic and get_preset("ppo").loss_agg_mode == "token-mean"
    assert get_preset("grpo").norm_by_std and get_preset("grpo").loss_agg_mode == "seq-mean-token-mean"
    dapo = get_preset("dapo")
    assert not dapo.uses_critic and dapo.dynamic_sampling and dapo.loss_agg_mode == "token-mean"
    dr = get_preset("dr_grpo")
    assert not dr.norm_by_std and dr.loss_agg_mode == "seq-mean-token-sum-norm"
    with pytest.raises(ValueError, match="'reinforce'"):
        get_preset("reinforce")


def test_loss_agg_mode_resolution():
    assert resolve_agg_mode("dr_grpo", "preset") == "seq-mean-token-sum-norm"
    assert resolve_agg_mode("grpo", "token-mean") == "token-mean"
    with pytest.raises(ValueError, match="'mean'"):
        resolve_agg_mode("grpo", "mean")


def test_dynamic_sampling_drops_constant_groups():
    scores = [[1, 1, 1], [0, 1, 0], [-0.1, -0.1, -0.1], [0, 0, 0.5]]
    assert dynamic_sampling_keep(scores) == [1, 3]
