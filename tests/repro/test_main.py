"""``python -m ragen2.repro``: the pipeline's plumbing commands."""

import pytest

from ragen2.repro.__main__ import build_parser, main


def _params(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("base: {seed: 0}\nruns: {a: {}}\n")
    return str(params)


def test_bad_input_is_one_line_naming_the_key_and_exit_status_2(tmp_path, capsys):
    assert main(["train-runs", "a", "--realization", "--params", _params(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ragen2.repro train-runs: error: ")
    assert "pipeline.realization=None" in err


def test_training_commands_are_not_here():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "a"])


def test_stale_runs_are_the_train_stages_of_dvc_status():
    from ragen2.repro.__main__ import stale_train_stages

    status = {"data": [{"changed outs": {}}], "train@frozenlake__grpo__none__main__s1": [],
              "warmstart@abc": [], "train@frozenlake__ppo__none__main__s0": [], "nb_03_main_results": []}
    assert stale_train_stages(status) == ["frozenlake__grpo__none__main__s1", "frozenlake__ppo__none__main__s0"]
    assert stale_train_stages({}) == []
    status["train_realization@frozenlake__ppo__none__main__s3"] = []
    assert stale_train_stages(status, "train_realization") == ["frozenlake__ppo__none__main__s3"]
    assert stale_train_stages(status) == ["frozenlake__grpo__none__main__s1", "frozenlake__ppo__none__main__s0"]
    # the regime map's pipeline: its stages carry their file's name, and the paper's stale runs ignore them
    status["regime_map/dvc.yaml:train@frozenlake__grpo__none__map3__s0"] = []
    assert stale_train_stages(status, "regime_map/dvc.yaml:train") == ["frozenlake__grpo__none__map3__s0"]
    assert stale_train_stages(status) == ["frozenlake__grpo__none__main__s1", "frozenlake__ppo__none__main__s0"]


def test_a_pipeline_of_its_own_names_its_runs_root_and_train_stages(tmp_path, monkeypatch):
    from ragen2.cli_options import params_runs_root
    from ragen2.repro.__main__ import _overrides, _train_stage

    params = tmp_path / "params.yaml"
    params.write_text("pipeline:\n  runs_root: data/regime_map/runs\n")
    assert params_runs_root(str(params)) == "data/regime_map/runs"
    assert params_runs_root(str(tmp_path / "missing.yaml")) == "data/runs"
    args = build_parser().parse_args(["train-runs", "r1", "--params", str(params)])
    assert _overrides(args) == ([], "data/regime_map/runs")
    args = build_parser().parse_args(["commit-runs", "r1", "--dvc-file", "regime_map/dvc.yaml"])
    assert _train_stage(args) == "regime_map/dvc.yaml:train"
    assert _train_stage(build_parser().parse_args(["commit-runs", "r1"])) == "train"


def test_build_warm_starts_runs_each_stale_warm_start_stage_once_and_records_it(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from ragen2.repro.profiles import build

    dvc = str(Path(sys.executable).parent / "dvc")
    monkeypatch.chdir(tmp_path)
    subprocess.run([dvc, "init", "--no-scm", "-q"], check=True)
    (tmp_path / "params.yaml").write_text(build("smoke").yaml())
    stage = {"cmd": "mkdir -p ${item.path} && echo ${item.run} >> ${item.path}/built", "outs": ["${item.path}"]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "warmstart": {"foreach": "${pipeline.warm_starts}", "do": stage},
        "warmstart_realization": {"foreach": "${pipeline.realization.warm_starts}", "do": stage}}}))
    assert main(["build-warm-starts", "--workers", "2", "--dvc", dvc]) == 0
    pipeline = yaml.safe_load((tmp_path / "params.yaml").read_text())["pipeline"]
    specs = [*pipeline["warm_starts"].values(), *pipeline["realization"]["warm_starts"].values()]
    for spec in specs:  # the stage's own command ran once
        assert (tmp_path / spec["path"] / "built").read_text() == f"{spec['run']}\n"
    assert f"built and recorded {len(specs)} warm start(s)" in capsys.readouterr().out
    status = subprocess.run([dvc, "status"], capture_output=True, text=True, check=True).stdout
    assert "up to date" in status
    assert main(["build-warm-starts", "--dvc", dvc]) == 0  # nothing stale: nothing runs again
    assert "built and recorded 0 warm start(s)" in capsys.readouterr().out

    # another pipeline file's warm starts (the regime map's): only its stages, recorded in its own lock
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "params.yaml").write_text(build("smoke").yaml().replace("data/", "data/sub/"))
    (tmp_path / "sub" / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"warmstart": {
        "foreach": "${pipeline.warm_starts}", "do": {**stage, "wdir": ".."}}}}))
    assert main(["build-warm-starts", "--dvc", dvc, "--params", "sub/params.yaml", "--dvc-file", "sub/dvc.yaml"]) == 0
    sub = yaml.safe_load((tmp_path / "sub" / "params.yaml").read_text())["pipeline"]["warm_starts"].values()
    for spec in sub:
        assert spec["path"].startswith("data/sub/")
        assert (tmp_path / spec["path"] / "built").read_text() == f"{spec['run']}\n"
    assert f"built and recorded {len(sub)} warm start(s)" in capsys.readouterr().out
    assert set(yaml.safe_load((tmp_path / "sub" / "dvc.lock").read_text())["stages"]) == {
        f"warmstart@{key}" for key in yaml.safe_load((tmp_path / "sub" / "params.yaml").read_text())[
            "pipeline"]["warm_starts"]}


def test_run_stages_runs_only_the_stale_named_stages_and_records_them(tmp_path, monkeypatch, capsys):
    import logging
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    dvc = str(Path(sys.executable).parent / "dvc")
    # DVC's in-process logger keeps the handler an earlier test bound to that test's (now closed) captured stdout
    monkeypatch.setattr(logging.getLogger("dvc"), "handlers", [])
    monkeypatch.chdir(tmp_path)
    subprocess.run([dvc, "init", "--no-scm", "-q"], check=True)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"items": ["a", "b"]}))
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "one": {"cmd": "echo 1 >> one.txt", "outs": ["one.txt"]},
        "two": {"cmd": "echo 2 >> two.txt", "outs": ["two.txt"]},
        "each": {"foreach": "${items}", "do": {"cmd": "echo ${item} >> each_${item}.txt", "outs": ["each_${item}.txt"]}},
        "later": {"cmd": "echo 3 >> later.txt", "outs": ["later.txt"]}}}))
    assert main(["run-stages", "--workers", "2", "--dvc", dvc, "one", "each"]) == 0
    assert "ran and recorded 3 stage(s)" in capsys.readouterr().out
    assert (tmp_path / "one.txt").read_text() == "1\n"
    assert (tmp_path / "each_a.txt").read_text() == "a\n" and (tmp_path / "each_b.txt").read_text() == "b\n"
    assert not (tmp_path / "two.txt").exists() and not (tmp_path / "later.txt").exists()
    assert set(yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]) == {"one", "each@a", "each@b"}
    assert main(["run-stages", "--dvc", dvc, "one", "each", "two"]) == 0  # only `two` is stale now
    assert "ran and recorded 1 stage(s)" in capsys.readouterr().out
    assert (tmp_path / "one.txt").read_text() == "1\n" and (tmp_path / "two.txt").read_text() == "2\n"
    assert main(["run-stages", "--dvc", dvc, "nope"]) == 2
    assert "'nope'" in capsys.readouterr().err


def test_stale_runs_leave_out_the_runs_finished_in_a_bundle(tmp_path, capsys):
    """A study trained in chunks over several sessions: a run whose bundle part holds its config and every step is
    not stale for it, though its run folder (and so its DVC train stage) is gone in a later checkout."""
    import json

    from ragen2.config import to_dict
    from ragen2.fileio import write_json_atomic
    from ragen2.repro import decline_study as ds

    profile = ds.build(smoke=True)
    params = tmp_path / "params.yaml"
    params.write_text(ds.params_yaml(profile))
    first, *rest = list(profile.runs)
    dvc = tmp_path / "dvc"  # a stand-in that reports every train stage stale, in reverse order
    status = {f"train@{rid}": [] for rid in reversed(profile.runs)}
    dvc.write_text(f"#!/bin/sh\necho '{json.dumps(status)}'\n")
    dvc.chmod(0o755)
    steps = profile.config(first).trainer.steps
    write_json_atomic(tmp_path / "bundle" / first / "config.json", to_dict(profile.config(first)))
    write_json_atomic(tmp_path / "bundle" / first / "summary.json", {"steps_completed": steps, "steps_planned": steps})
    assert main(["stale-runs", "--params", str(params), "--dvc", str(dvc)]) == 0
    assert capsys.readouterr().out.split() == list(profile.runs)  # params order
    assert main(["stale-runs", "--params", str(params), "--dvc", str(dvc), "--skip-bundled",
                 str(tmp_path / "bundle")]) == 0
    assert capsys.readouterr().out.split() == rest
