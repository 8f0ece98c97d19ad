"""A run's random streams and environment seeds."""

from ragen2.config import RunConfig, apply_overrides
from ragen2.trainer.seeds import stream_seed, train_seeds


def test_train_seeds_follow_the_spec():
    cfg = apply_overrides(RunConfig(), ["rollout.env_groups=4", "rollout.train_seed=100"])
    assert train_seeds(cfg, 1) == [100, 101, 102, 103]
    assert train_seeds(cfg, 3) == [108, 109, 110, 111]


def test_stream_seeds_differ_by_purpose_step_and_seed():
    seeds = {stream_seed(0, "rollout", 1), stream_seed(0, "rollout", 2), stream_seed(0, "collapse", 1),
             stream_seed(1, "rollout", 1)}
    assert len(seeds) == 4 and all(0 <= s < 2**63 for s in seeds)
    assert stream_seed(5, "x", 3) == stream_seed(5, "x", 3)
