"""Tests for ragen2.repro.tables: the main table from runs, the paper's numbers as package data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragen2.repro.tables import (
    NOT_RUN,
    STATS,
    TOPK_ROW,
    format_main_table,
    main_table,
    main_table_vs_paper,
    paper_main_table,
    paper_reference_values,
    with_topk_row,
)


def _runs() -> pd.DataFrame:
    """PPO and GRPO on two envs, 3 seeds, top-p = none + known per-seed gains; GRPO/countdown lacks seed 2."""
    rows = []
    base = {"sokoban": [0.10, 0.20, 0.30], "countdown": [0.50, 0.60, 0.70]}
    gain = {"sokoban": [0.10, 0.05, 0.15], "countdown": [0.00, 0.02, -0.02]}
    for algo in ("grpo", "ppo"):
        for env in base:
            for seed in range(3):
                if algo == "grpo" and env == "countdown" and seed == 2:
                    continue
                rows.append(
                    {
                        "algo": algo,
                        "env": env,
                        "seed": seed,
                        "condition": "none",
                        "final_success": base[env][seed],
                    }
                )
                rows.append(
                    {
                        "algo": algo,
                        "env": env,
                        "seed": seed,
                        "condition": "top_p",
                        "final_success": base[env][seed] + gain[env][seed],
                    }
                )
    rows.append({"algo": "ppo", "env": "sokoban", "seed": 9, "condition": "top_k", "final_success": 1.0})
    rows.append(
        {"algo": "ppo", "env": "sokoban", "seed": 7, "condition": "none", "final_success": float("nan")}
    )
    return pd.DataFrame(rows)


def test_main_table_shape_order_and_numbers():
    table = main_table(_runs())
    assert list(table.index) == ["PPO", "GRPO"]
    assert list(table.columns.get_level_values("env").unique()) == ["Sokoban", "Countdown", "Average"]
    assert list(table["Sokoban"].columns) == list(STATS)
    ppo = table.loc["PPO"]
    assert ppo[("Sokoban", "no_filter_mean")] == pytest.approx(20.0)
    assert ppo[("Sokoban", "no_filter_std")] == pytest.approx(10.0)
    assert ppo[("Sokoban", "gain_mean")] == pytest.approx(10.0)
    assert ppo[("Sokoban", "gain_std")] == pytest.approx(5.0)
    assert (
        ppo[("Sokoban", "n_no_filter")] == 3 and ppo[("Sokoban", "n_pairs")] == 3
    )  # NaN run and top_k ignored
    # Average = per-seed mean over envs, then mean +- std over seeds
    per_seed_gain = np.array([(0.10 + 0.0) / 2, (0.05 + 0.02) / 2, (0.15 - 0.02) / 2]) * 100
    assert ppo[("Average", "gain_mean")] == pytest.approx(per_seed_gain.mean())
    assert ppo[("Average", "gain_std")] == pytest.approx(per_seed_gain.std(ddof=1))
    grpo = table.loc["GRPO"]
    assert grpo[("Countdown", "n_pairs")] == 2 and grpo[("Average", "n_pairs")] == 2  # seed 2 lacks countdown
    assert grpo[("Countdown", "no_filter_mean")] == pytest.approx(55.0)


def test_main_table_single_seed_has_nan_std_and_bad_input():
    one = _runs().query("seed == 0")
    table = main_table(one, average=False)
    assert math.isnan(table.loc["PPO", ("Sokoban", "gain_std")])
    assert "Average" not in table.columns.get_level_values("env")
    with pytest.raises(ValueError, match="lacks column"):
        main_table(one.drop(columns="seed"))
    with pytest.raises(ValueError, match="no runs"):
        main_table(one, filtered="min_p", baseline="other")


def test_the_topk_row_is_ppos_no_filter_success_and_the_paired_topk_gain():
    runs = _runs()
    table = main_table(runs)
    topk_gain = {"sokoban": [0.05, 0.0, -0.05], "countdown": [0.01, 0.01, 0.04]}
    extra = [{"algo": "ppo", "env": env, "seed": seed, "condition": "top_k",
              "final_success": runs.query("algo == 'ppo' and env == @env and seed == @seed and condition == 'none'")
              ["final_success"].iloc[0] + g}
             for env, gains in topk_gain.items() for seed, g in enumerate(gains)]
    both = pd.concat([runs[runs["seed"] != 9], pd.DataFrame(extra)], ignore_index=True)
    shown = with_topk_row(table, both)
    assert list(shown.index) == ["PPO", "GRPO", TOPK_ROW] and list(shown.columns) == list(table.columns)
    row = shown.loc[TOPK_ROW]
    assert row[("Sokoban", "gain_mean")] == pytest.approx(0.0) and row[("Sokoban", "n_pairs")] == 3
    assert row[("Countdown", "gain_mean")] == pytest.approx(2.0)
    assert row[("Sokoban", "no_filter_mean")] == table.loc["PPO", ("Sokoban", "no_filter_mean")]
    per_seed = np.array([(0.05 + 0.01) / 2, (0.0 + 0.01) / 2, (-0.05 + 0.04) / 2]) * 100
    assert row[("Average", "gain_mean")] == pytest.approx(per_seed.mean())
    assert format_main_table(shown).loc[TOPK_ROW, "Countdown"].startswith("60.0 ± 10.0 (+2.0 ± 1.7) n=3/3")
    no_topk = runs[runs["condition"] != "top_k"]
    assert with_topk_row(table, no_topk) is table


def test_format_main_table_text():
    text = format_main_table(main_table(_runs()))
    assert text.loc["PPO", "Sokoban"] == "20.0 ± 10.0 (+10.0 ± 5.0) n=3/3"


def test_paper_data_files_hold_the_reference_numbers():
    paper = paper_main_table()
    row = paper[(paper.variant == "PPO Qwen2.5-3B") & (paper.env == "Sokoban")].iloc[0]
    assert (row.no_filter, row.gain) == (12.9, 16.0)
    assert len(paper) == 51 and set(paper.group) == {
        "baseline",
        "algorithm",
        "model_scale",
        "model_type",
        "modality",
    }
    ref = paper_reference_values().set_index("metric")["paper_rho"]
    assert ref.to_dict() == {
        "mi_zscore": 0.39,
        "mi_seq_estimate": 0.22,
        "mi_zscore_seq": 0.09,
        "conditional_entropy_est": -0.14,
        "reasoning_entropy_est": -0.11,
    }


def test_main_table_vs_paper_compares_only_the_cells_both_sides_have():
    vs = main_table_vs_paper(main_table(_runs()))
    assert vs.index.names == ["algorithm", "env"]
    assert vs.index[0] == ("PPO", "Sokoban")
    row = vs.loc[("PPO", "Sokoban")]
    assert row["paper_no_filter"] == 12.9 and row["paper_gain"] == 16.0
    assert row["delta_gain"] == pytest.approx(10.0 - 16.0)
    # an average over the two environments run here, against the paper's over the same two (not its four)
    average = vs.loc[("GRPO", "Average")]
    assert average["paper_gain"] == pytest.approx((9.0 + 2.2) / 2)
    assert average["delta_gain"] == pytest.approx(average["ours_gain_mean"] - (9.0 + 2.2) / 2)
    # the paper's cells without runs here: one last row that names them, nothing to compare
    (not_run,) = [env for algo, env in vs.index if algo == NOT_RUN]
    assert vs.index[-1][0] == NOT_RUN and "DAPO: Sokoban, FrozenLake, MetaMathQA, Countdown" in not_run
    assert "GRPO: FrozenLake, MetaMathQA" in not_run and vs.loc[vs.index[-1]].isna().all()
    assert ("DAPO", "Sokoban") not in vs.index and {"Qwen2.5-7B"}.isdisjoint(vs.index.get_level_values("algorithm"))
    one_env = main_table_vs_paper(main_table(_runs().query("env == 'sokoban'")))
    assert ("PPO", "Average") not in one_env.index  # one cell: its average would repeat it


def test_paper_main_table_rejects_wrong_columns(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("# header\nvariant,env,value\nPPO,Sokoban,1\n")
    with pytest.raises(ValueError, match="columns must be"):
        paper_main_table(bad)


def test_paper_gain_averages_the_papers_cells():
    from ragen2.repro.tables import paper_gain

    assert paper_gain(["frozenlake"], ["ppo"]) == pytest.approx(10.9)
    assert paper_gain(["frozenlake"], ["ppo", "grpo", "dapo", "dr_grpo"]) == pytest.approx((10.9 + 2.1 + 2.3 + 0.6) / 4)
    with pytest.raises(ValueError, match="bandit"):
        paper_gain(["bandit"], ["ppo"])


def test_learning_table_pairs_start_and_end_within_runs():
    from ragen2.repro.tables import learning_table

    runs = pd.DataFrame([{"run_id": f"r{s}", "env": "frozenlake", "algo": "grpo", "condition": "none", "seed": s}
                         for s in range(4)])
    steps = pd.DataFrame([{"run_id": f"r{s}", "step": step, "metric": "val/success", "value": v}
                          for s in range(4) for step, v in ((0, 0.5 + 0.01 * s), (10, 0.55), (30, 0.7 + 0.02 * s))])
    row = learning_table(runs, steps).iloc[0]
    assert (row["env"], row["algorithm"], row["n_seeds"]) == ("FrozenLake", "GRPO", 4)
    assert row["start_mean"] == pytest.approx(51.5) and row["end_mean"] == pytest.approx(73.0)
    assert row["gain_mean"] == pytest.approx(21.5) and row["learned"] and row["t_p"] < 0.05
    flat = steps.assign(value=lambda d: np.where(d["step"] == 30, d["value"] - 0.2 - 0.1 * (d["run_id"] == "r0"),
                                                 d["value"]))
    assert not learning_table(runs, flat).iloc[0]["learned"]
    four = pd.concat([steps, steps[steps["step"] == 30].assign(step=40, value=0.9)])
    windowed = learning_table(runs, four, window=2).iloc[0]  # mean of the first two vs of the last two values
    assert windowed["start_mean"] == pytest.approx(100 * np.mean([(0.5 + 0.01 * s + 0.55) / 2 for s in range(4)]))
    assert windowed["end_mean"] == pytest.approx(100 * np.mean([(0.7 + 0.02 * s + 0.9) / 2 for s in range(4)]))
    with pytest.raises(ValueError, match="6 or more"):  # 3 logged values cannot fill two windows of 3
        learning_table(runs, steps, window=3)
