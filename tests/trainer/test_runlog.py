"""metrics.jsonl + dvclive logging, and cutting both back on resume."""

import json

from ragen2.trainer.runlog import RunLogger, read_metrics


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
    assert log.studio is False
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
    log.studio = True
    monkeypatch.setattr(Live, "next_step", lambda self: calls.append(self.step))
    log.log(5, {"m": 1.0})
    assert calls == [5]
    monkeypatch.undo()
    log.close()
