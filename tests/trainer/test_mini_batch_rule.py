"""The mini-batch rule of a filtered step, counted in optimiser updates (``filter.loss_scaling``).

Eight groups of four rollouts, a mini-batch of eight rows: an unfiltered step makes four updates. Under the paper's
rule (``keep_rate``) the mini-batch shrinks with the keep rate, so a step that keeps 8, 6, 4 or 2 groups makes four
updates whatever it keeps; under the reference code's fixed mini-batch (``none``) it makes as many as its rows fill,
in proportion to the keep rate (4, 3, 2, 1).
"""

import numpy as np
import pytest
import torch

from ragen2.config import RunConfig, apply_overrides
from ragen2.trainer.actor import update_actor
from ragen2.trainer.update_data import mini_batch_rows
from tests.trainer._tiny import grpo_batch, settings, tiny_lm

GROUPS, K, MINI = 8, 4, 8
SCORES = [[1.0, 0.0, float(g % 2), 0.0] for g in range(GROUPS)]


def _updates(rule: str, kept: int) -> int:
    cfg = apply_overrides(RunConfig(), [f"trainer.mini_batch_size={MINI}", f"filter.loss_scaling={rule}"])
    model = tiny_lm()
    batch = grpo_batch(model, SCORES[:kept])
    mini = mini_batch_rows(cfg, len(batch), GROUPS * K)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = update_actor(model, opt, batch, settings(), mini_batch_size=mini, micro_batch_size=4, epochs=1,
                       grad_clip=1.0, rng=np.random.default_rng(0))
    return int(out["actor/optimizer_steps"])


@pytest.mark.parametrize("kept", [8, 6, 4, 2])
def test_the_papers_rule_makes_the_same_updates_at_every_keep_rate(kept):
    assert _updates("keep_rate", kept) == GROUPS * K // MINI


@pytest.mark.parametrize("kept", [8, 6, 4, 2])
def test_the_reference_rule_makes_updates_in_proportion_to_the_keep_rate(kept):
    assert _updates("none", kept) == kept * K // MINI
