"""The reference's early stops replayed on logged runs: the trainer's own rules, in the loop's order."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ragen2.repro import early_stops as es


def _tidy(run_id, condition, seed, per_step):
    """Tidy steps of one run from ``{step: {metric: value}}``."""
    return [{"run_id": run_id, "condition": condition, "seed": seed, "step": step, "metric": m, "value": v}
            for step, metrics in per_step.items() for m, v in metrics.items()]


def _run(run_id, condition, seed, stds, successes, empty_from=None):
    """A run whose step s has reward std ``stds[s-1]`` (empty from ``empty_from`` on) and validations ``successes``
    (step -> success)."""
    per_step = {0: {es.SUCCESS: successes[0]}}
    consecutive = 0
    for step, std in enumerate(stds, start=1):
        empty = empty_from is not None and step >= empty_from
        consecutive = consecutive + 1 if empty else 0
        per_step[step] = {es.STD: std, es.EMPTY: float(consecutive)}
        if step in successes:
            per_step[step][es.SUCCESS] = successes[step]
    return {"run_id": run_id, "condition": condition, "seed": seed}, _tidy(run_id, condition, seed, per_step)


def _frame(rows):
    wide = pd.DataFrame(rows).pivot_table(index="step", columns="metric", values="value", aggfunc="last")
    return wide.reset_index()


def test_replay_finds_each_rule_where_the_trainer_would_stop():
    _, rows = _run("rv", "none", 0, [1.0] * 10 + [0.05] * 12, {0: 0.5, 10: 0.6, 20: 0.4})
    assert es.replay_stop(_frame(rows)) == (20, "reward_variance_collapse")  # 10 baseline steps, then 10 low ones
    _, rows = _run("empty", "top_p", 0, [0.5] * 12, {0: 0.5, 10: 0.5}, empty_from=4)
    assert es.replay_stop(_frame(rows)) == (8, "empty_filtered_steps")
    _, rows = _run("low", "none", 0, [0.5] * 40, {0: 0.0, 10: 0.0, 20: 0.005, 30: 0.0, 40: 0.0})
    assert es.replay_stop(_frame(rows)) == (40, "low_validation_success")  # step 0's validation counts
    _, rows = _run("fine", "none", 0, [0.5] * 30, {0: 0.5, 10: 0.6, 20: 0.7, 30: 0.8})
    assert es.replay_stop(_frame(rows)) == (None, "")


def test_stop_table_scores_a_stopped_run_by_its_last_validation_up_to_the_stop():
    runs, steps = [], []
    for seed in range(3):
        for cond in ("none", "top_p"):
            collapsing = cond == "none"
            stds = [1.0] * 10 + ([0.05] * 20 if collapsing else [0.8] * 20)
            run, rows = _run(f"{cond}{seed}", cond, seed, stds, {0: 0.5, 10: 0.6 + 0.01 * seed, 20: 0.7, 30: 0.9})
            runs.append(run)
            steps += rows
    table = es.stop_table(pd.DataFrame(runs), pd.DataFrame(steps))
    none = table[table["condition"] == "none"].iloc[0]
    assert (none["stop_step"], none["stop_reason"], none["scored_step"]) == (20, "reward_variance_collapse", 20)
    assert (none["success_off"], none["success_on"]) == (0.9, 0.7)
    top = table[table["condition"] == "top_p"].iloc[0]
    assert math.isnan(top["stop_step"]) and top["success_on"] == top["success_off"] == 0.9
    comparison = es.stops_comparison(table).set_index(["condition", "stops"])
    assert comparison.loc[("top_p", "off"), "diff_vs_none"] == pytest.approx(0.0)
    assert comparison.loc[("top_p", "on"), "diff_vs_none"] == pytest.approx(0.2)
    assert comparison.loc[("none", "on"), "stopped"] == 3 and comparison.loc[("top_p", "on"), "stopped"] == 0


@pytest.mark.slow
def test_replay_on_a_run_trained_without_stops_matches_the_run_trained_with_them(tmp_path):
    """The claim the replay rests on: with the stops on, a run is the stops-off run cut where the rules fire."""
    import torch

    from ragen2.config import RunConfig, apply_overrides
    from ragen2.repro.runs import read_runs
    from ragen2.trainer.loop import train
    from ragen2.trainer.runlog import read_metrics
    from ragen2.warmstart import initial_policy
    from tests.trainer._tiny import TINY_RUN

    torch.set_num_threads(1)
    base = TINY_RUN + ["trainer.algo=grpo", "trainer.steps=8", "filter.value=0.9", "filter.include_zero=false",
                       "trainer.save_freq=0"]
    reference = ["trainer.empty_stop_steps=5", "trainer.rv_collapse_stop=true", "trainer.low_val_stop_patience=5"]
    off_switches = ["trainer.empty_stop_steps=0", "trainer.rv_collapse_stop=false", "trainer.low_val_stop_patience=0"]
    summaries = {}
    for name, extra in (("on", reference), ("off", off_switches)):
        cfg = apply_overrides(RunConfig(), base + extra)
        summaries[name] = train(cfg, tmp_path / name, initial_policy(cfg, tmp_path / "cache"), progress=False)
    assert summaries["on"]["early_stop_reason"] is not None and summaries["off"]["early_stop_reason"] is None
    runs, steps = read_runs([tmp_path / "off"])
    table = es.stop_table(runs, steps)
    assert table.loc[0, "stop_step"] == summaries["on"]["steps_completed"]
    assert table.loc[0, "stop_reason"] == summaries["on"]["early_stop_reason"]

    def training_rows(run):  # the training metrics of each step (validation and timing differ at the stop)
        return [{k: v for k, v in r.items() if not k.startswith(("timing_s/", "val/", "early_stopped/"))}
                for r in read_metrics(tmp_path / run)]

    on, off = training_rows("on"), training_rows("off")
    assert on == off[:len(on)]
