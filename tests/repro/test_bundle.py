"""Tests for the results bundle (ragen2/repro/bundle.py): a bundled run reads as the run, and the committed bundle is
the one dvc.lock records."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragen2.fileio import write_json_atomic
from ragen2.repro import bundle
from ragen2.repro.dvc_files import PIPELINES
from ragen2.repro.runs import METRICS_TABLE, find_run_dirs, read_grad_tables, read_runs
from tests.repro.dvcyaml import REPO


def _trained_looking_run(root: Path, run_id: str, warm_start_steps: int) -> Path:
    """A run directory written with the trainer's own writers: config, metrics (with a NaN), summary, a gradient
    table, env.json and a checkpoint."""
    from ragen2.config import RunConfig, apply_overrides, to_dict
    from ragen2.rundir import write_val_episodes
    from ragen2.trainer.loop import summarize
    from ragen2.trainer.runlog import RunLogger

    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    cfg = apply_overrides(RunConfig(), ["seed=1", "trainer.algo=grpo", f"warm_start.steps={warm_start_steps}"])
    write_json_atomic(run_dir / "config.json", to_dict(cfg))
    logger = RunLogger(run_dir)
    logger.log(0, {"val/success": 0.25, "collapse_first_turn/mi_zscore": float("nan")})
    logger.log(1, {"filter/kept_ratio": 0.75, "actor/entropy": 1.0 / 3.0})
    logger.log(1, {"filter/kept_ratio": 0.5})  # a resumed step: the last value counts
    logger.log(2, {"val/success": 0.5, "rollout/response_length_mean": 12.25})
    logger.close()
    write_json_atomic(run_dir / "summary.json", summarize(logger.history, None, {}, 2))
    write_json_atomic(run_dir / "env.json", {"cpu_model": "test"})
    for step, flags in ((0, [1.0, 0.0, 0.0, 0.0]), (2, [1.0, 1.0, 0.0, 0.0])):
        write_val_episodes(run_dir, step, flags, first_seed=123)
    pd.DataFrame({"step": [1, 1], "bucket": ["1", "all"], "rv_mean": [0.0, 0.2], "task_norm": [0.0, 1.0],
                  "reg_norm": [0.1, 0.1]}).to_csv(run_dir / "grad_analysis.csv", index=False)
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "step_000002.pt").write_bytes(b"\0" * 1000)
    return run_dir


def test_a_bundled_run_reads_as_the_run_itself(tmp_path):
    runs_root = tmp_path / "runs"
    _trained_looking_run(runs_root, "frozenlake__grpo__none__main__s1", 0)
    _trained_looking_run(runs_root, "frozenlake__grpo__topp0p9__main__s1", 0)
    counts = bundle.write_bundle(runs_root, tmp_path / "cache", tmp_path / "bundle")
    assert counts == {"runs": 2, "warm_starts": 0, "data_files": 0}
    originals, bundled = find_run_dirs(runs_root), find_run_dirs(tmp_path / "bundle" / "runs")
    episodes = ["start_episodes", "final_episodes", "val_episodes"]  # arrays in cells: compared on their own
    (got_runs, got_steps), (want_runs, want_steps) = read_runs(bundled), read_runs(originals)
    pd.testing.assert_frame_equal(got_runs.drop(columns=episodes), want_runs.drop(columns=episodes), check_exact=True)
    pd.testing.assert_frame_equal(got_steps, want_steps, check_exact=True)
    for got, want in zip(got_runs["val_episodes"], want_runs["val_episodes"]):
        assert got.keys() == want.keys() and all((got[k] == want[k]).all() for k in got)
    pd.testing.assert_frame_equal(read_grad_tables(bundled), read_grad_tables(originals), check_exact=True)
    kept = sorted(p.name for p in bundled[0].iterdir())
    assert kept == sorted(["config.json", "summary.json", "env.json", "grad_analysis.csv", "val_episodes.jsonl",
                           METRICS_TABLE])
    assert read_runs(bundled)[0]["final_episodes"].iloc[0].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert (tmp_path / "bundle" / "warm_start").is_dir()  # empty without warm starts, but there: a declared output


def test_the_bundle_keeps_the_records_of_the_warm_starts_its_runs_start_from(tmp_path):
    from ragen2.repro.warm_starts import weights_sha256
    from ragen2.rundir import read_config
    from ragen2.warmstart import warm_start_key

    run = _trained_looking_run(tmp_path / "runs", "frozenlake__grpo__none__main__s1", 300)
    key = warm_start_key(read_config(run))
    for name in (key, "someotherkey"):
        write_json_atomic(tmp_path / "cache" / "warm_start" / name / "warm_start.json", {"greedy_success": 0.5})
        (tmp_path / "cache" / "warm_start" / name / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "bundle" / "runs" / "stale").mkdir(parents=True)
    (tmp_path / "bundle" / "products").mkdir()
    assert bundle.write_bundle(tmp_path / "runs", tmp_path / "cache", tmp_path / "bundle")["warm_starts"] == 1
    assert [p.name for p in (tmp_path / "bundle" / "warm_start").iterdir()] == [key]
    assert weights_sha256(tmp_path / "bundle" / "warm_start" / key) == weights_sha256(tmp_path / "cache" / "warm_start"
                                                                                        / key)
    assert not list((tmp_path / "bundle").rglob("*.safetensors"))
    assert not (tmp_path / "bundle" / "runs" / "stale").exists()  # its folders are rewritten whole
    assert (tmp_path / "bundle" / "products").is_dir()  # the notebooks' products are left alone


def test_a_bundle_written_run_by_run_adds_one_run_or_warm_start_and_leaves_the_rest(tmp_path, capsys):
    """A study trained in chunks bundles each run as it finishes (``--run``) and each warm start (``--warm-start``);
    what is already in the bundle stays; the result reads as the bundle written whole."""
    runs_root = tmp_path / "runs"
    one = _trained_looking_run(runs_root, "frozenlake__grpo__none__main__s1", 0)
    two = _trained_looking_run(runs_root, "frozenlake__grpo__topp0p9__main__s1", 0)
    packed, whole = tmp_path / "bundle", tmp_path / "whole"
    assert bundle.main(["--run", str(one), "--out-dir", str(packed)]) == 0
    assert bundle.main(["--run", str(two), "--out-dir", str(packed)]) == 0
    assert sorted(p.name for p in (packed / "runs").iterdir()) == [one.name, two.name]
    bundle.write_bundle(runs_root, tmp_path / "cache", whole)
    for name in (one.name, two.name):
        for file in (whole / "runs" / name).iterdir():
            assert (packed / "runs" / name / file.name).read_bytes() == file.read_bytes()
    warm = tmp_path / "cache" / "warm_start" / "abc"
    write_json_atomic(warm / "warm_start.json", {"greedy_success": 0.5})
    (warm / "model.safetensors").write_bytes(b"weights")
    assert bundle.main(["--warm-start", str(warm), "--out-dir", str(packed)]) == 0
    assert sorted(p.name for p in (packed / "warm_start" / "abc").iterdir()) == ["warm_start.json", "weights.sha256"]
    assert sorted(p.name for p in (packed / "runs").iterdir()) == [one.name, two.name]
    capsys.readouterr()
    with pytest.raises(SystemExit):
        bundle.main(["--warm-start", str(tmp_path / "runs"), "--out-dir", str(packed)])  # no record there
    with pytest.raises(SystemExit):
        bundle.main(["--run", str(tmp_path / "missing"), "--out-dir", str(packed)])
    err = capsys.readouterr().err
    assert "--run" in err and "no such folder" in err


def test_finished_runs_are_those_whose_bundle_part_has_their_config_and_every_step(tmp_path):
    from ragen2.config import apply_overrides
    from ragen2.rundir import read_config

    run = _trained_looking_run(tmp_path / "runs", "frozenlake__grpo__none__main__s1", 0)
    cfg = read_config(run)
    steps = cfg.trainer.steps
    part = bundle.bundle_run(run, tmp_path / "bundle")
    write_json_atomic(part / "summary.json", {"steps_completed": steps - 1, "steps_planned": steps})
    assert bundle.finished_runs(tmp_path / "bundle", {run.name: cfg}) == []  # stopped early: trained again
    write_json_atomic(part / "summary.json", {"steps_completed": steps, "steps_planned": steps})
    assert bundle.finished_runs(tmp_path / "bundle", {run.name: cfg}) == [run.name]
    assert bundle.finished_runs(tmp_path / "bundle", {run.name: apply_overrides(cfg, [f"trainer.steps={steps + 1}"])}) == []
    assert bundle.finished_runs(tmp_path / "bundle", {"other__grpo__none__main__s0": cfg}) == []


def test_notebooks_read_the_runs_else_the_bundle(tmp_path, capsys):
    runs, cache, packed = tmp_path / "runs", tmp_path / "cache", tmp_path / "bundle"
    assert bundle.runs_or_bundle(runs, cache, packed) == (runs, cache)  # neither: the notebook names what is missing
    _trained_looking_run(tmp_path / "elsewhere", "frozenlake__grpo__none__main__s1", 0)
    bundle.write_bundle(tmp_path / "elsewhere", cache, packed)
    assert bundle.runs_or_bundle(runs, cache, packed) == (packed / "runs", packed)
    assert bundle.runs_or_bundle(runs, None, packed) == (packed / "runs", None)
    assert "No runs under" in capsys.readouterr().out
    _trained_looking_run(runs, "frozenlake__grpo__none__main__s2", 0)
    assert bundle.runs_or_bundle(runs, cache, packed) == (runs, cache)  # runs of its own win


def test_a_pipeline_bundles_the_folders_its_notebook_reads_beside_the_runs(tmp_path, capsys):
    runs, evals, packed = tmp_path / "runs", tmp_path / "screen" / "evals", tmp_path / "bundle"
    _trained_looking_run(runs, "frozenlake__grpo__none__screen1__s0", 0)
    for name, body in (("frozenlake__grpo__none__screen1__s0/final.json", '{"successes": [[1, 0]]}'),
                       ("frozenlake__grpo__none__screen1__s0/initial.json", '{"successes": [[0, 0]]}')):
        (evals / name).parent.mkdir(parents=True, exist_ok=True)
        (evals / name).write_text(body)
    (evals / ".gitignore").write_text("/frozenlake__grpo__none__screen1__s0\n")  # DVC's, beside its outputs
    (packed / "evals" / "stale").mkdir(parents=True)
    assert bundle.main(["--runs-root", str(runs), "--cache-dir", str(tmp_path / "cache"), "--out-dir", str(packed),
                        "--data", str(evals)]) == 0
    assert "1 runs, 0 warm-start records and 2 data files" in capsys.readouterr().out
    copied = sorted(p.relative_to(packed / "evals") for p in (packed / "evals").rglob("*") if p.is_file())
    assert copied == sorted(p.relative_to(evals) for p in evals.rglob("*.json"))  # not the .gitignore
    assert all((packed / "evals" / rel).read_bytes() == (evals / rel).read_bytes() for rel in copied)
    assert not (packed / "evals" / "stale").exists()  # rewritten whole
    # a clone without runs reads the bundle's copy; one with runs its own folder
    fresh = tmp_path / "clone"
    got = bundle.runs_or_bundle(fresh / "runs", fresh / "cache", packed, fresh / "screen" / "evals")
    assert got == (packed / "runs", packed, packed / "evals")
    assert bundle.runs_or_bundle(runs, None, packed, evals) == (runs, None, evals)


def test_bundle_data_that_is_not_a_folder_or_clashes_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        bundle.main(["--runs-root", str(tmp_path), "--data", str(tmp_path / "nowhere")])
    assert stop.value.code == 2 and f"--data {tmp_path / 'nowhere'}: no such folder" in capsys.readouterr().err
    (tmp_path / "runs").mkdir()
    with pytest.raises(ValueError, match="'runs' is already a part of the bundle"):
        bundle.write_bundle(tmp_path / "none", tmp_path / "cache", tmp_path / "bundle", [tmp_path / "runs"])


def _dvc_dir_md5(folder: Path) -> str:
    """DVC's hash of a directory output: the md5 of the sorted (relative path, file md5) list as JSON, plus .dir."""
    entries = sorted(({"md5": hashlib.md5(p.read_bytes()).hexdigest(), "relpath": p.relative_to(folder).as_posix()}
                      for p in folder.rglob("*") if p.is_file()), key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + ".dir"


def test_the_committed_bundle_is_the_one_dvc_lock_records():
    """data/bundle is what the pipeline last wrote (the bundle stage's folders, the notebooks' products): rerun it
    (make repro) instead of editing the bundle."""
    lock = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]
    outs = {o["path"]: o["md5"] for stage in lock.values() for o in stage.get("outs", [])
            if o["path"].startswith("data/bundle/")}
    if "bundle" not in lock:
        pytest.skip("dvc.lock has no bundle stage yet (the pipeline has not run since the stage was added)")
    assert {"data/bundle/runs", "data/bundle/warm_start"} <= set(outs)
    own = {p.folder for p in PIPELINES}
    assert sorted(p.name for p in (REPO / "data" / "bundle").iterdir() if p.name not in own | {"products"}) == [
        "runs", "warm_start"]
    for pipeline in PIPELINES:  # a pipeline of its own records its part in its own lock, once it has run
        lock_file = REPO / pipeline.folder / "dvc.lock"
        stages = yaml.safe_load(lock_file.read_text())["stages"] if lock_file.is_file() else {}
        outs.update({o["path"]: o["md5"] for name, stage in stages.items()  # one stage, or one per run and warm start
                     if name.split("@")[0] in ("bundle", "bundle_warm_start") for o in stage.get("outs", [])})
    for path, md5 in outs.items():
        assert _dvc_dir_md5(REPO / path) == md5, f"{path} differs from dvc.lock: make repro"


def test_every_committed_result_was_made_with_the_pinned_kernels():
    """The committed runs and warm starts (their bundled env.json and warm_start.json) ran at the pinned instruction
    set, so a user's pinned rerun on another x86-64 CPU with AVX2 can take the same bits."""
    from ragen2 import kernels

    records = [*(REPO / "data" / "bundle").rglob("env.json"), *(REPO / "data" / "bundle").rglob("warm_start.json")]
    if not records:
        pytest.skip("no results bundle yet (make repro writes data/bundle)")
    for path in records:
        record = json.loads(path.read_text())
        where = path.relative_to(REPO)
        assert record["kernels"] == "avx2" and record["torch_capability"] == "AVX2", f"{where} was not made pinned"
        assert record["kernel_settings"] == kernels.PINNED, f"{where}: {record['kernel_settings']}"
