"""The filter's lever, measured on gradients: a filtered step's task-to-regulariser gradient ratio against an
unfiltered step's, under each loss scaling (docs/method.md §4.8).

The batch: four GRPO groups of three rows, two with varied rewards and two constant (zero advantage: no task
gradient, only the entropy pull), the filter keeping the two varied groups (rho = 1/2). The dropped groups hold
the same token sequences as the kept ones, so the entropy gradient of a mean over all rows equals that over the
kept rows and the expected ratios are exact: the filter raises the ratio by 1 / rho under ``none`` and whole-loss
``keep_rate``, and ``keep_rate_task`` (the policy term alone) takes the raise back.
"""

import pytest
import torch

from ragen2.filter import FilterConfig, loss_scales
from ragen2.rollout.types import Trajectory
from ragen2.trainer.actor import actor_terms, compute_logprobs, term_denominators
from ragen2.trainer.advantages import grpo_advantages
from ragen2.trainer.batch import build_batch
from tests.trainer._tiny import settings, tiny_lm

SCORES = [[1.0, 0.0, 0.5], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
KEPT = [0, 1]


def _tokens(group: int, row: int) -> list[int]:
    """A 4-token prompt, then 6 trained tokens; groups 2 and 3 repeat the sequences of groups 0 and 1."""
    g = torch.Generator().manual_seed(10 * (group % 2) + row)
    return [3, 5, 7, 9 + group % 2] + torch.randint(1, 40, (6,), generator=g).tolist()


def _batch(model, groups):
    trajectories = []
    for i, g in enumerate(groups):
        for row, score in enumerate(SCORES[g]):
            ids = _tokens(g, row)
            trajectories.append(Trajectory(
                group=i, env_seed=100 + g, turns=[], input_ids=ids, loss_mask=[0] * 4 + [1] * 6,
                reasoning_mask=[0] * 4 + [1] * 4 + [0, 0], score=score, success=score > 0, num_actions=1,
                first_prompt_ids=ids[:4], first_reasoning_ids=ids[4:8], response_length=6))
    batch = build_batch(trajectories, pad_id=0)
    batch.old_logp, _ = compute_logprobs(model, batch, micro_batch_size=16)
    batch.advantages = grpo_advantages(batch.scores, batch.group_ids)[:, None] * batch.loss_mask
    return batch


def _ratio(model, batch, scales) -> float:
    """||grad of the policy term|| / ||grad of the entropy term|| of one mini-batch."""
    s = settings(kl_coef=0.0, entropy_coef=0.01, task_scale=scales[0], reg_scale=scales[1])
    terms, _ = actor_terms(model, batch, s, term_denominators(batch, s))
    params = [p for p in model.parameters() if p.requires_grad]

    def norm(term):
        grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
        return torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None))

    return float(norm(terms["task"]) / norm(terms["entropy"]))


@pytest.mark.parametrize("scaling, gain", [("none", 2.0), ("keep_rate", 2.0), ("sqrt_keep_rate", 2.0),
                                           ("keep_rate_task", 1.0)])
def test_filtering_raises_the_task_to_regulariser_ratio_unless_only_the_task_is_scaled(scaling, gain):
    model = tiny_lm(seed=0)
    unfiltered = _ratio(model, _batch(model, range(len(SCORES))), (1.0, 1.0))
    scales = loss_scales(len(KEPT), len(SCORES), FilterConfig(strategy="top_p", value=0.9, loss_scaling=scaling))
    filtered = _ratio(model, _batch(model, KEPT), scales)
    assert filtered / unfiltered == pytest.approx(gain, rel=1e-4)


def test_the_scales_of_each_option():
    def scales(name, kept=2, total=8):
        return loss_scales(kept, total, FilterConfig(loss_scaling=name))

    assert scales("none") == (1.0, 1.0) and scales("keep_rate") == (0.25, 0.25)
    assert scales("sqrt_keep_rate") == (0.5, 0.5) and scales("keep_rate_task") == (0.25, 1.0)
    assert FilterConfig().loss_scaling == "none"  # the reference implementation's runs
    with pytest.raises(ValueError, match="kept=9, total=8"):
        scales("keep_rate", kept=9)
