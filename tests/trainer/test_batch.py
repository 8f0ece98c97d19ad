"""Batch helpers: the group order of an update epoch."""

import numpy as np
import torch

from ragen2.trainer.batch import chunks, group_order


def test_group_order_keeps_groups_together_and_covers_every_row():
    ids = torch.tensor([0, 0, 0, 1, 1, 1, 4, 4, 4, 2, 2, 2])  # group ids need not be 0..G-1
    for seed in range(5):
        order = group_order(ids, np.random.default_rng(seed))
        assert sorted(order.tolist()) == list(range(12))
        runs = [ids[order[i:i + 3]].tolist() for i in range(0, 12, 3)]
        assert all(len(set(r)) == 1 for r in runs)  # each group's rows are consecutive
        assert all(np.all(np.diff(order[i:i + 3]) == 1) for i in range(0, 12, 3))  # in batch order
    a = group_order(ids, np.random.default_rng(1))
    assert np.array_equal(a, group_order(ids, np.random.default_rng(1)))
    assert any(not np.array_equal(a, group_order(ids, np.random.default_rng(s))) for s in range(2, 6))
    # a mini-batch of 6 rows = two whole groups
    assert all(len(set(ids[a[r.start:r.stop]].tolist())) == 2 for r in chunks(12, 6))
