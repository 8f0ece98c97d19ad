"""Tests for ragen2.repro.runs: run directories as the runs table, the per-step table and gradient tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ragen2.fileio import write_json_atomic
from ragen2.repro.runs import (
    filter_condition,
    final_values,
    load_grad_tables,
    load_runs,
    read_metrics_jsonl,
)


def make_run(
    root: Path,
    run_id: str,
    *,
    env: str = "frozenlake",
    algo: str = "grpo",
    strategy: str = "top_p",
    value: float = 0.9,
    include_zero: bool = True,
    seed: int = 0,
    success: list[float] | None = None,
    summary: dict | None = None,
    extra_rows: list[dict] | None = None,
) -> Path:
    run = root / run_id
    run.mkdir(parents=True)
    config = {
        "seed": seed,
        "env": {"name": env, "kwargs": {"slip_rate": 0.02}},
        "trainer": {"algo": algo, "entropy_coef": 0.001, "kl_coef": 0.0},
        "filter": {
            "strategy": strategy,
            "value": value,
            "include_zero": include_zero,
            "top_p_mode": "linear",
        },
    }
    (run / "config.json").write_text(json.dumps(config))
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    if success is not None or extra_rows:
        rows = [
            {"step": 10 * i, "val/success": s, "rollout/response_length_mean": 50.0 - i}
            for i, s in enumerate(success or [])
        ]
        rows += extra_rows or []
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_filter_condition_mirrors_is_noop():
    assert filter_condition({"strategy": "top_p", "value": 1.0, "include_zero": True}) == "none"
    assert filter_condition({"strategy": "top_p", "value": 1.0, "include_zero": False}) == "top_p"
    assert filter_condition({"strategy": "top_p", "value": 0.9, "include_zero": True}) == "top_p"
    assert filter_condition({"strategy": "top_k", "value": 0.25}) == "top_k"
    assert filter_condition({"strategy": "none"}) == "none"
    assert filter_condition({}) == "none"


def test_load_runs_rows_labels_and_final_success(tmp_path):
    make_run(
        tmp_path, "fl__grpo__topp__s0", success=[0.1, 0.5, 0.4], summary={"early_stop": None, "steps": 20}
    )
    make_run(tmp_path, "fl__grpo__none__s0", value=1.0, success=[0.1, 0.2, 0.3])
    make_run(
        tmp_path,
        "fl__ppo__none__s1",
        algo="ppo",
        value=1.0,
        seed=1,
        summary={"final_val_success": 0.0, "best_val_success": 0.25},
    )
    (tmp_path / "not_a_run").mkdir()
    runs, steps = load_runs(tmp_path)
    assert list(runs["run_id"]) == ["fl__grpo__none__s0", "fl__grpo__topp__s0", "fl__ppo__none__s1"]
    row = runs.set_index("run_id").loc["fl__grpo__topp__s0"]
    assert row["condition"] == "top_p" and row["algo"] == "grpo" and row["env"] == "frozenlake"
    assert row["final_success"] == pytest.approx(0.4) and row["best_success"] == pytest.approx(0.5)
    assert row["last_step"] == 20 and row["summary.steps"] == 20
    assert row["env.kwargs.slip_rate"] == pytest.approx(0.02) and row["filter.top_p_mode"] == "linear"
    # no metrics: falls back to the summary, and a 0.0 success stays 0.0 (not NaN)
    ppo = runs.set_index("run_id").loc["fl__ppo__none__s1"]
    assert ppo["final_success"] == 0.0 and ppo["best_success"] == 0.25 and ppo["last_step"] == -1
    assert list(steps.columns) == ["run_id", "env", "algo", "condition", "seed", "step", "metric", "value"]
    assert len(steps) == 2 * 3 * 2  # two runs with metrics, 3 steps, 2 metrics


def test_load_runs_pattern_and_errors(tmp_path):
    make_run(tmp_path, "sokoban__ppo__s0", env="sokoban", success=[0.2])
    make_run(tmp_path, "frozenlake__ppo__s0", success=[0.3])
    runs, _ = load_runs(tmp_path, "sokoban__*")
    assert list(runs["env"]) == ["sokoban"]
    with pytest.raises(FileNotFoundError, match="countdown"):
        load_runs(tmp_path, "countdown__*")
    with pytest.raises(FileNotFoundError, match="missing_root"):
        load_runs(tmp_path / "missing_root")


def test_metrics_jsonl_non_finite_resume_duplicates_and_bad_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 0, "a": 1.0, "b": "nan", "note": "text"}\n\n'
        '{"step": 1, "a": "inf"}\n{"step": 1, "a": 2.0, "flag": true}\n'
    )
    df = read_metrics_jsonl(path)
    a = df[df.metric == "a"].set_index("step")["value"]
    assert a.to_dict() == {0: 1.0, 1: 2.0}  # the later duplicate wins
    assert math.isnan(df[df.metric == "b"]["value"].iloc[0])
    assert "note" not in set(df.metric) and df[df.metric == "flag"]["value"].iloc[0] == 1.0
    path.write_text('{"step": 0, "a": 1}\n{"a": 2}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2"):
        read_metrics_jsonl(path)
    path.write_text('{"step": 0, "a": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: not valid JSON"):
        read_metrics_jsonl(path)


def test_final_success_ignores_trailing_nan(tmp_path):
    make_run(tmp_path, "r", success=[0.2, 0.6], extra_rows=[{"step": 30, "val/success": "nan"}])
    runs, steps = load_runs(tmp_path)
    assert runs["final_success"].iloc[0] == pytest.approx(0.6)
    finals = final_values(steps, ["val/success", "rollout/response_length_mean"])
    assert finals.loc[0, "val/success"] == pytest.approx(0.6)
    assert finals.loc[0, "rollout/response_length_mean"] == pytest.approx(49.0)
    means = final_values(steps, ["val/success"], how="mean")
    assert means.loc[0, "val/success"] == pytest.approx(0.4)


def test_load_grad_tables(tmp_path):
    run = make_run(tmp_path, "r0", success=[0.1])
    make_run(tmp_path, "r1", success=[0.1])
    pd.DataFrame(
        {
            "step": [1, 1],
            "bucket": ["1", "all"],
            "rv_mean": [0.0, 0.2],
            "task_norm": [0.0, 1.0],
            "kl_norm": [0, 0],
            "entropy_norm": [0.1, 0.1],
            "reg_norm": [0.1, 0.1],
            "snr": [0, 10],
        }
    ).to_csv(run / "grad_analysis.csv", index=False)
    grad = load_grad_tables(tmp_path)
    assert (
        list(grad["bucket"]) == ["1", "all"]
        and set(grad["run_id"]) == {"r0"}
        and grad["algo"].iloc[0] == "grpo"
    )
    pd.DataFrame({"step": [1]}).to_csv(run / "grad_analysis.csv", index=False)
    with pytest.raises(ValueError, match="missing column"):
        load_grad_tables(tmp_path)


def test_load_runs_reads_the_trainers_own_files(tmp_path):
    """A run dir written with the trainer's writers (config via to_dict, RunLogger, summarize)."""
    from ragen2.config import RunConfig, apply_overrides, to_dict
    from ragen2.trainer.loop import summarize
    from ragen2.trainer.runlog import RunLogger

    run_dir = tmp_path / "sokoban__grpo__topp__s3"
    run_dir.mkdir()
    cfg = apply_overrides(
        RunConfig(), ["seed=3", "env.name=sokoban", "trainer.algo=grpo", "filter.value=0.9"]
    )
    write_json_atomic(run_dir / "config.json", to_dict(cfg))
    logger = RunLogger(run_dir)
    logger.log(0, {"val/success": 0.25, "val/score": 0.1})
    logger.log(1, {"filter/kept_ratio": 0.75, "collapse_first_turn/mi_zscore": float("nan")})
    logger.log(2, {"filter/kept_ratio": 0.5, "val/success": 0.5, "val/score": 0.3})
    logger.close()
    write_json_atomic(run_dir / "summary.json", summarize(logger.history, None, {}, 2))
    runs, steps = load_runs(tmp_path)
    row = runs.iloc[0]
    assert (row["env"], row["algo"], row["condition"], row["seed"]) == ("sokoban", "grpo", "top_p", 3)
    assert row["final_success"] == 0.5 and row["summary.final_val_success"] == 0.5
    assert row["summary.best_val_step"] == 2 and row["trainer.algo"] == "grpo"
    mi = steps[steps.metric == "collapse_first_turn/mi_zscore"]["value"]
    assert len(mi) == 1 and math.isnan(mi.iloc[0])
    kept = steps[steps.metric == "filter/kept_ratio"].sort_values("step")["value"].tolist()
    assert kept == [0.75, 0.5]


def test_start_end_values_average_windows_and_need_two_of_them():
    from ragen2.repro.runs import start_end_values

    steps = pd.DataFrame([{"run_id": r, "step": s, "metric": "m", "value": float(s)}
                          for r, n in (("a", 4), ("b", 3)) for s in range(n)]
                         + [{"run_id": "a", "step": 9, "metric": "other", "value": 1.0}])
    ends = start_end_values(steps.sample(frac=1.0, random_state=0), "m", window=2)  # order does not matter
    assert list(ends.index) == ["a"] and (ends.loc["a", "first"], ends.loc["a", "last"]) == (0.5, 2.5)
    assert start_end_values(steps, "m").loc["b", "last"] == 2.0
    with pytest.raises(ValueError, match="window"):
        start_end_values(steps, "m", window=0)
