"""Tests for the decline study's figures (ragen2/repro/decline_figures.py): every panel drawn, read without captions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragen2.repro import decline_figures as F
from tests.repro.test_figures import _close, reader_texts


def _steps() -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    for algo in ("grpo", "ppo"):
        for condition in ("none", "top_p"):
            for seed in range(3):
                rid = f"frozenlake__{algo}__{condition}__decline0__s{seed}"
                for step in (0, 25, 50):
                    for metric in F.PATH_METRICS:
                        rows.append({"run_id": rid, "env": "frozenlake", "algo": algo, "condition": condition,
                                     "seed": seed, "step": step, "metric": metric, "value": rng.uniform()})
    return pd.DataFrame(rows)


def test_paths_draw_a_row_per_metric_and_a_column_per_algorithm():
    fig = F.fig_decline_paths(_steps())
    assert len(fig.axes) == 2 * len(F.PATH_METRICS)
    texts = reader_texts(fig)
    assert "FrozenLake, PPO\n(3 runs each)" in texts and "FrozenLake, GRPO\n(3 runs each)" in texts
    assert {"Top-p", "no filter", "band: ± 1 std over runs"} <= set(texts)
    assert sum(bool(ax.get_ylabel()) for ax in fig.axes) == len(F.PATH_METRICS)  # one y label per row, first panel
    _close(fig)


def test_drops_show_every_run_its_pair_the_means_and_the_noise_floor():
    table = pd.DataFrame({"algo": ["ppo"] * 4, "env": ["frozenlake"] * 4, "run_id": list("abcd"),
                          "condition": ["none", "top_p", "none", "top_p"], "pair": [0, 0, 1, 1],
                          "drop": [0.2, 0.05, 0.1, 0.0]})
    fig = F.fig_decline_drops(table, floors={"ppo": 0.03})
    ax = fig.axes[0]
    dots = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections])
    assert sorted(dots.tolist()) == [0.0, 5.0, 10.0, 20.0]  # points
    assert any(np.allclose(line.get_ydata(), [3.0, 3.0]) for line in ax.lines)  # the floor, in points
    assert "drop from reading noise alone" in reader_texts(fig)
    _close(fig)
