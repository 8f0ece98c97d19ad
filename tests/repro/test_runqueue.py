"""The run queue on Ray: dearest-first order, input checks, a worker's run equal to a run trained alone by
``python -m ragen2 train``, and a run whose worker is killed resuming to the same end."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from ragen2.config import ConfigError, RunConfig, apply_overrides, to_dict
from ragen2.repro.profiles import build, run_seconds
from ragen2.repro.runqueue import by_cost, train_runs
from ragen2.trainer.loop import train
from ragen2.trainer.runlog import read_metrics
from ragen2.warmstart import initial_policy
from tests.trainer._tiny import TINY_RUN

TINY = [*TINY_RUN, "trainer.algo=grpo", "trainer.steps=2"]


def test_cpu_profile_runs_are_ordered_dearest_first():
    profile = build("cpu")
    configs = {rid: profile.config(rid) for rid in profile.runs}
    order = by_cost(configs)
    assert sorted(order) == sorted(configs)
    costs = [run_seconds(configs[rid]) for rid in order]
    assert costs == sorted(costs, reverse=True)
    smoke = build("smoke")  # mixed lengths and algorithms: PPO's dearer steps come first, ties keep params order
    configs = {rid: smoke.config(rid) for rid in smoke.runs}
    order = by_cost(configs)
    costs = [run_seconds(configs[rid]) for rid in order]
    assert costs == sorted(costs, reverse=True) and len(set(costs)) > 1


def test_unmeasured_env_counts_one_second_per_step_and_keeps_order():
    cfgs = {"a": apply_overrides(RunConfig(), ["env.name=sokoban", "trainer.steps=5"]),
            "b": apply_overrides(RunConfig(), ["env.name=sokoban", "trainer.steps=9"]),
            "c": apply_overrides(RunConfig(), ["env.name=sokoban", "trainer.steps=5"])}
    assert by_cost(cfgs) == ["b", "a", "c"]


def _params(tmp_path: Path, extra: tuple[str, ...] = ()) -> Path:
    base = to_dict(apply_overrides(RunConfig(), [*TINY, *extra]))
    runs = {"a": {"seed": 0}, "b": {"seed": 1},
            "bad": {"env": {"kwargs": {"no_such_option": 1}}},  # a valid config whose environment fails to build
            "invalid": {"trainer": {"entropy_scope": "thinking"}}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"base": base, "runs": runs}))
    return path


@pytest.mark.parametrize("ids,workers,error,match", [
    (["a", "nope"], 1, ConfigError, "nope"),
    (["a", "invalid"], 1, ConfigError, "trainer.entropy_scope='thinking'"),
    (["a", "a"], 1, ValueError, "repeat"),
    (["a"], 0, ValueError, "workers"),
    (["a"], -1, ValueError, "retries"),
])
def test_bad_input_is_named_before_anything_runs(tmp_path, ids, workers, error, match):
    retries, workers = (workers, 1) if match == "retries" else (2, workers)
    with pytest.raises(error, match=match):
        train_runs(ids, params=_params(tmp_path), workers=workers, retries=retries, runs_root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_worker_trains_runs_in_turn_like_separate_processes_and_reports_failures(tmp_path):
    params, cache, lines, recorded = _params(tmp_path), tmp_path / "cache", [], []
    failed = train_runs(["a", "bad", "b"], params=params, workers=1, cache_dir=cache, runs_root=tmp_path / "runs",
                        log=lines.append, on_done=recorded.append, every_s=0.0)
    assert failed == ["bad"] and len(lines) == 3
    assert recorded == [["a"], ["b"]]  # each finished run handed on as it came, the failed one never
    assert any("FAILED" in line and "no_such_option" in line for line in lines)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # "b" alone, in this process, after nothing else: the same metrics as "b" after "a" in the worker
        cfg = apply_overrides(RunConfig(), TINY + ["seed=1"])
        train(cfg, tmp_path / "alone", initial_policy(cfg, cache), progress=False)
    finally:
        torch.set_num_threads(threads)

    def comparable(run):
        return [{k: v for k, v in r.items() if not k.startswith("timing_s/")} for r in read_metrics(run)]

    assert comparable(tmp_path / "runs" / "b") == comparable(tmp_path / "alone")
    assert comparable(tmp_path / "runs" / "a") != comparable(tmp_path / "alone")


def test_finished_or_reconfigured_runs_start_over_interrupted_ones_resume(tmp_path, monkeypatch):
    import json

    import ragen2.trainer.loop as loop
    from ragen2.repro.runqueue import _train_one

    calls = []
    monkeypatch.setattr(loop, "train", lambda cfg, run_dir, init_policy, resume, **kw: calls.append((run_dir.name, resume)))
    cfg = apply_overrides(RunConfig(), TINY)
    runs = tmp_path / "runs"
    for name in ("fresh", "interrupted", "finished", "other_config"):
        if name != "fresh":
            (runs / name).mkdir(parents=True)
            other = apply_overrides(cfg, ["seed=5"]) if name == "other_config" else cfg
            (runs / name / "config.json").write_text(json.dumps(to_dict(other)))
        if name == "finished":
            (runs / name / "summary.json").write_text("{}")
        assert _train_one(name, cfg, str(tmp_path / "cache"), str(runs), None).error is None
    assert calls == [("fresh", True), ("interrupted", True), ("finished", False), ("other_config", False)]


def _comparable(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("timing_s/")} for r in read_metrics(run)]


def _final_weights(run: Path) -> dict[str, torch.Tensor]:
    from ragen2.rundir import latest_checkpoint

    return torch.load(latest_checkpoint(run), map_location="cpu", weights_only=False)["actor"]


def _worker_pid(title: str) -> int | None:
    """The process whose title Ray set to ``title`` (``ray::<task name>`` while it runs the task)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0")[0].decode() == title:
                    return int(entry.name)
            except OSError:
                continue
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the worker through /proc")
def test_ray_runs_equal_the_cli_and_a_killed_worker_resumes_to_the_same_end(tmp_path):
    params = _params(tmp_path, ("trainer.steps=4", "trainer.save_freq=1"))
    cache, runs, alone = tmp_path / "cache", tmp_path / "runs", tmp_path / "alone"
    for rid in ("a", "b"):  # the references: each run by the DVC stage's own command, in a process of its own
        subprocess.run([sys.executable, "-m", "ragen2", "train", rid, "--params", str(params), "--run-dir",
                        str(alone / rid), "--cache-dir", str(cache), "--threads", "1"], check=True,
                       capture_output=True, timeout=300)

    killed: list[int] = []

    def kill_a_after_its_first_step() -> None:
        pointer, deadline = runs / "a" / "checkpoints" / "latest.json", time.monotonic() + 240
        while time.monotonic() < deadline:
            if pointer.exists() and "000000" not in pointer.read_text():  # a checkpoint after step 0
                pid = _worker_pid("ray::train a")
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_a_after_its_first_step, daemon=True)
    killer.start()
    reports, lines = [], []
    failed = train_runs(["a", "b"], params=params, workers=2, cache_dir=cache, runs_root=runs, reports=reports,
                        log=lines.append)
    killer.join(timeout=5)
    assert failed == [] and len(killed) == 1, lines
    by_run = {r.run_id: r for r in reports}
    assert by_run["a"].resumed_from is not None and by_run["a"].pid != killed[0]  # a new worker went on from there
    assert by_run["b"].resumed_from is None
    assert any("a:" in line and "resumed from" in line for line in lines)
    for rid in ("a", "b"):
        assert _comparable(runs / rid) == _comparable(alone / rid)
        ours, theirs = _final_weights(runs / rid), _final_weights(alone / rid)
        assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_gpu_runs_ask_for_a_gpu_and_fail_fast_where_there_is_none(tmp_path):
    from ragen2.repro.runqueue import wants_gpu

    cuda, auto = (apply_overrides(RunConfig(), [f"policy.device={d}"]) for d in ("cuda", "auto"))
    assert wants_gpu(cuda, False) and wants_gpu(auto, True) and not wants_gpu(auto, False)
    assert not wants_gpu(apply_overrides(RunConfig(), ["policy.device=cpu"]), True)
    params = _params(tmp_path, ("policy.device=cuda",))
    with pytest.raises(ValueError, match=r"run a asks for 1 GPU\(s\) \(policy.device='cuda'\) but the Ray cluster "
                                         r"has 0"):
        train_runs(["a"], params=params, workers=1, runs_root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
