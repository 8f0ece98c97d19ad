"""Prompt-level tables (ragen2.repro.prompt_tables): quartiles, the warm start once, workers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragen2.repro import prompt_tables


def test_quartile_differences_are_top_minus_bottom_per_run_at_the_end():
    rows = [{"run_id": r, "phase": "end", "quartile": q, "success": q / 10 + (r == "b") * 0.1, "mi": 0.0, "rv": 0.0}
            for r in ("a", "b") for q in (1, 2, 3, 4)]
    start = [{**row, "run_id": "warm start", "phase": "start", "success": 0.9 * (row["quartile"] == 4)}
             for row in rows if row["run_id"] == "a"]
    diffs = prompt_tables.quartile_differences(pd.DataFrame(rows + start), "success")
    assert diffs.index.tolist() == ["a", "b"] and diffs.round(6).tolist() == [0.3, 0.3]  # the start is not a unit
    assert prompt_tables.quartile_differences(pd.DataFrame(rows + start), "success", phase="start").round(6).tolist() == [0.9]
    with pytest.raises(ValueError, match="quartiles 1 and 4"):
        prompt_tables.quartile_differences(pd.DataFrame(rows).query("quartile < 4"), "success")


def test_prompt_tables_roll_the_warm_start_out_once_per_distinct_warm_start(tmp_path, monkeypatch):
    calls = []

    def fake(run_dir, *, phase="end", **kwargs):
        calls.append((run_dir.name, phase))
        return pd.DataFrame({"prompt": [0], "reward": [1.0], "phase": [phase], "run_id": [run_dir.name]})

    monkeypatch.setattr(prompt_tables, "prompt_level_table", fake)
    shared = {"env": {"name": "frozenlake"}, "policy": {"hidden_size": 8}, "warm_start": {"steps": 10}, "rollout": {}}
    configs = {"r1": shared, "r2": {**shared, "trainer": {"algo": "ppo"}}, "r3": shared,
               "s1": {**shared, "env": {"name": "sokoban"}}}
    for rid, cfg in configs.items():
        (tmp_path / rid / "checkpoints").mkdir(parents=True)
        (tmp_path / rid / "config.json").write_text(json.dumps(cfg))
    table = prompt_tables.prompt_tables(tmp_path, ["r1", "r2", "r3"], phases=("start", "end"))
    assert calls == [("r1", "start"), ("r1", "end"), ("r2", "end"), ("r3", "end")]
    assert table.query("phase == 'start'")["run_id"].tolist() == ["warm start"]
    calls.clear()
    table = prompt_tables.prompt_tables(tmp_path, ["r1", "s1", "r2"], phases=("start", "end"))
    assert calls.count(("r1", "start")) == 1 and calls.count(("s1", "start")) == 1 and ("r2", "start") not in calls
    assert sorted(table.query("phase == 'start'")["run_id"]) == ["warm start 1 (frozenlake)", "warm start 2 (sokoban)"]


def test_a_run_without_checkpoints_reads_the_tables_kept_when_it_had_them(tmp_path, monkeypatch):
    """The pipeline keeps each table it computes (write_products); a bundled run (no checkpoints) reads them back
    equal, and one whose tables were not kept names what is missing."""
    monkeypatch.setattr(prompt_tables, "prompt_level_table", lambda run_dir, *, phase="end", **kw: pd.DataFrame(
        {"prompt": [0, 1], "reward": [0.5, 1.0 / 3.0], "phase": [phase] * 2, "run_id": [run_dir.name] * 2}))
    for rid in ("r1", "r2"):
        (tmp_path / "runs" / rid / "checkpoints").mkdir(parents=True)
        (tmp_path / "runs" / rid / "config.json").write_text(json.dumps({"env": {"name": "frozenlake"}}))
    kept = tmp_path / "products"
    args = dict(phases=("start", "end"), num_prompts=2, group_size=4, products_dir=kept)
    computed = prompt_tables.prompt_tables(tmp_path / "runs", ["r1", "r2"], write_products=True, **args)
    assert len(list(kept.glob("prompt_table-*.parquet"))) == 3  # the warm start once, each run's end
    for rid in ("r1", "r2"):
        (tmp_path / "runs" / rid / "checkpoints").rmdir()
    monkeypatch.setattr(prompt_tables, "prompt_level_table", None)  # nothing may be computed now
    pd.testing.assert_frame_equal(prompt_tables.prompt_tables(tmp_path / "runs", ["r1", "r2"], **args), computed)
    with pytest.raises(FileNotFoundError, match="no checkpoints to compute the prompt_table"):
        prompt_tables.prompt_tables(tmp_path / "runs", ["r1"], **{**args, "num_prompts": 3})


def test_prompt_tables_reject_zero_workers(tmp_path):
    with pytest.raises(ValueError, match="workers"):
        prompt_tables.prompt_tables(tmp_path, ["r1"], workers=0)


@pytest.mark.slow
def test_prompt_tables_do_not_depend_on_the_number_of_workers(tmp_path):
    from ragen2.config import RunConfig, apply_overrides
    from ragen2.trainer.loop import train
    from ragen2.warmstart import initial_policy
    from tests.trainer._tiny import TINY_RUN

    tiny = [*TINY_RUN, "trainer.algo=grpo", "trainer.steps=1", "collapse.enabled=false"]
    for seed in (0, 1):
        cfg = apply_overrides(RunConfig(), tiny + [f"seed={seed}"])
        train(cfg, tmp_path / f"r{seed}", initial_policy(cfg, tmp_path / "cache"), progress=False)
    kwargs = dict(phases=("start", "end"), num_prompts=3, group_size=2, cache_dir=tmp_path / "cache")
    serial = prompt_tables.prompt_tables(tmp_path, ["r0", "r1"], workers=1, **kwargs)
    parallel = prompt_tables.prompt_tables(tmp_path, ["r0", "r1"], workers=2, **kwargs)
    assert serial["run_id"].tolist().count("warm start") == 6 and len(serial) == 18
    pd.testing.assert_frame_equal(serial, parallel)
