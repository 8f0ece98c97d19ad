"""metrics.jsonl and the report_to loggers (dvclive, TensorBoard, wandb offline), and cutting them back on resume."""

import json
import sys
import types

import pytest

from ragen2.config import ConfigError, RunConfig, apply_overrides
from ragen2.trainer import runlog
from ragen2.trainer.runlog import RunLogger, read_metrics, resolve_report_to


def _tsv_steps(run, name):
    lines = (run / "dvclive" / "plots" / "metrics" / name).read_text().splitlines()
    header = lines[0].split("\t")
    return [int(float(line.split("\t")[header.index("step")])) for line in lines[1:] if line.strip()]


def test_resume_truncates_both_records(tmp_path):
    run = tmp_path / "run"
    log = RunLogger(run, params={"seed": 0})
    for step in range(4):
        log.log(step, {"loss/a": float(step), "val/x": 1.0, "note": "text is kept in jsonl only"})
    log.close()
    assert [r["step"] for r in read_metrics(run)] == [0, 1, 2, 3]
    assert _tsv_steps(run, "loss/a.tsv") == [0, 1, 2, 3]
    assert not (run / "dvclive" / "dvc.yaml").exists()

    history = read_metrics(run)[:2]  # a checkpoint taken at step 1
    log = RunLogger(run, history=history)
    log.log(2, {"loss/a": 20.0})
    log.close()
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2] and rows[-1]["loss/a"] == 20.0
    assert _tsv_steps(run, "loss/a.tsv") == [0, 1, 2]
    assert _tsv_steps(run, "val/x.tsv") == [0, 1]


def test_fresh_logger_clears_old_records(tmp_path):
    run = tmp_path / "run"
    log = RunLogger(run)
    log.log(0, {"m": 1.0})
    log.close()
    log = RunLogger(run)
    log.log(0, {"m": 2.0})
    log.close()
    assert read_metrics(run) == [{"step": 0, "m": 2.0}]
    assert _tsv_steps(run, "m.tsv") == [0]


def test_torn_last_line_is_skipped(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n" + '{"step": 1, "a"')
    assert read_metrics(tmp_path) == [{"step": 0}]


def test_a_step_without_studio_leaves_what_next_step_would(tmp_path, monkeypatch):
    """Without DVC Studio the logger skips dvclive's Studio payload (it re-reads every metric file) and writes the
    same files: the metric histories and a summary holding each metric's last value and the step."""
    from dvclive import Live

    run = tmp_path / "run"
    log = RunLogger(run, params={"seed": 0})
    assert log.loggers[0].studio is False
    monkeypatch.setattr(Live, "next_step", lambda self: (_ for _ in ()).throw(AssertionError("next_step ran")))
    for step in range(3):
        log.log(step, {"loss/a": float(step), "val/x": 2.0 * step})
    summary = json.loads((run / "dvclive" / "metrics.json").read_text())
    assert summary == {"loss": {"a": 2.0}, "val": {"x": 4.0}, "step": 2}
    assert _tsv_steps(run, "loss/a.tsv") == [0, 1, 2]
    monkeypatch.undo()
    log.close()


def test_a_step_with_studio_goes_through_next_step(tmp_path, monkeypatch):
    from dvclive import Live

    calls = []
    log = RunLogger(tmp_path / "run")
    log.loggers[0].studio = True
    monkeypatch.setattr(Live, "next_step", lambda self: calls.append(self.step))
    log.log(5, {"m": 1.0})
    assert calls == [5]
    monkeypatch.undo()
    log.close()


def _scalars(log_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_tensorboard_gets_every_numeric_metric_and_resume_purges_the_replayed_steps(tmp_path):
    run = tmp_path / "run"
    log = RunLogger(run, params={"seed": 0}, report_to="tensorboard")
    assert [type(x).__name__ for x in log.loggers] == ["TensorboardLogger"] and not (run / "dvclive").exists()
    for step in range(4):
        log.log(step, {"loss/a": float(step), "val/x": 1.0, "note": "text is kept in jsonl only", "flag": True})
    log.close()
    assert _scalars(run / "tensorboard", "loss/a") == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0)]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"loss/a", "val/x"}  # strings and booleans are not scalars

    log = RunLogger(run, history=read_metrics(run)[:2], report_to="tensorboard")  # resumed from step 1
    log.log(2, {"loss/a": 20.0})
    log.close()
    assert _scalars(run / "tensorboard", "loss/a") == [(0, 0.0), (1, 1.0), (2, 20.0)]


def test_several_loggers_at_once_and_none(tmp_path):
    log = RunLogger(tmp_path / "a", report_to="dvclive,tensorboard")
    log.log(0, {"m": 1.0})
    log.close()
    assert (tmp_path / "a" / "dvclive" / "metrics.json").exists() and (tmp_path / "a" / "tensorboard").is_dir()
    log = RunLogger(tmp_path / "b", report_to="none")
    log.log(0, {"m": 1.0})
    log.close()
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["metrics.jsonl"]


def test_wandb_runs_offline_in_the_run_directory(tmp_path, monkeypatch):
    """Against a stand-in module (wandb is not a test dependency): the calls the logger makes."""
    calls = []

    class Run:
        def log(self, metrics, step):
            calls.append(("log", step, metrics))

        def finish(self):
            calls.append(("finish",))

    fake = types.SimpleNamespace(init=lambda **kw: calls.append(("init", kw)) or Run())
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setattr(runlog.importlib.util, "find_spec", lambda name: object())
    log = RunLogger(tmp_path / "r7", params={"seed": 3}, report_to="wandb")
    log.log(1, {"m": 2.0, "s": "x"})
    log.close()
    init = calls[0][1]
    assert init["mode"] == "offline" and init["dir"] == str(tmp_path / "r7") and init["id"] == "r7"
    assert init["config"] == {"seed": 3} and init["resume"] == "allow"
    assert calls[1:] == [("log", 1, {"m": 2.0}), ("finish",)]


def test_report_to_is_checked_and_a_missing_package_names_its_extra(monkeypatch):
    assert apply_overrides(RunConfig(), ["trainer.report_to=tensorboard,dvclive"]).trainer.report_to
    with pytest.raises(ConfigError, match="trainer.report_to='mlflow': must be auto, none or a comma-separated"):
        apply_overrides(RunConfig(), ["trainer.report_to=mlflow"])
    assert resolve_report_to("none") == [] and resolve_report_to("tensorboard,dvclive") == ["dvclive", "tensorboard"]
    monkeypatch.setattr(runlog.importlib.util, "find_spec", lambda name: None)
    assert resolve_report_to("auto") == []  # dvclive absent: metrics.jsonl only
    with pytest.raises(ConfigError, match=r"tensorboard is not installed \(pip install 'ragen2\[tensorboard\]'\)"):
        resolve_report_to("tensorboard")
