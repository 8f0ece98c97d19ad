"""commit_stages records stages run outside `dvc repro` as `dvc commit -f` does, in one lock write."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragen2.repro.dvcstages import commit_stages, prune_lock, run_stages, stage_commands

DVC = [sys.executable, "-m", "dvc"]


def dvc(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DVC, *args], cwd=root, capture_output=True, text=True, check=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.chdir(root)  # targets resolve from the current directory, as with `dvc commit`
    dvc(root, "init", "--no-scm", "-q")
    (root / "params.yaml").write_text(yaml.safe_dump({"runs": {"a": {"x": 1}, "b": {"x": 2}, "c": {"x": 3}}}))
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": {"foreach": "${runs}", "do": {
        "cmd": "mkdir -p out/${key} && echo ${item.x} > out/${key}/v.txt",
        "params": ["runs.${key}"], "outs": ["out/${key}"]}}}}))
    return root


def test_runs_trained_outside_dvc_are_recorded_and_then_up_to_date(repo):
    for key, x in (("a", 1), ("b", 2)):  # what `make repro`'s workers do: run the stage's command themselves
        (repo / "out" / key).mkdir(parents=True)
        (repo / "out" / key / "v.txt").write_text(f"{x}\n")
    done = commit_stages(["train@a", "train@b"], root=repo)
    assert done == ["train@a", "train@b"]
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"train@a", "train@b"}
    assert lock["stages"]["train@b"]["params"]["params.yaml"]["runs.b"] == {"x": 2}
    status = dvc(repo, "status", "train@a", "train@b").stdout
    assert "up to date" in status
    assert "train@c" in dvc(repo, "status").stdout  # untouched stages stay stale
    # the outputs are in the cache: a removed output comes back with `dvc checkout`
    (repo / "out" / "a" / "v.txt").unlink()
    dvc(repo, "checkout", "train@a", "-q")
    assert (repo / "out" / "a" / "v.txt").read_text() == "1\n"


def test_unknown_or_no_targets_are_errors(repo):
    with pytest.raises(ValueError, match="no stages"):
        commit_stages([], root=repo)
    with pytest.raises(ValueError, match="nope"):
        commit_stages(["train@nope"], root=repo)


def test_stages_run_outside_dvc_in_parallel_dearest_first_and_only_the_successful_are_recorded(repo, capfd):
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": {"foreach": "${runs}", "do": {
        "cmd": "test ${item.x} != 2 && mkdir -p out/${key} && echo ${item.x} > out/${key}/v.txt",
        "params": ["runs.${key}"], "outs": ["out/${key}"]}}}}))
    command, wdir = stage_commands(["train@c"], root=repo)["train@c"]
    assert command == "test 3 != 2 && mkdir -p out/c && echo 3 > out/c/v.txt" and Path(wdir) == repo
    done, failed = run_stages(["train@a", "train@b", "train@c"], workers=2, root=repo,
                              cost={"train@a": 1, "train@b": 2, "train@c": 3}.get)
    assert done == ["train@c", "train@a"] and failed == ["train@b"]
    assert "stage train@b failed" in capfd.readouterr().err
    assert (repo / "out" / "c" / "v.txt").read_text() == "3\n"
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"train@a", "train@c"}
    status = dvc(repo, "status").stdout
    assert "train@b" in status and "train@a" not in status and "train@c" not in status


def test_run_stages_checks_its_arguments(repo):
    with pytest.raises(ValueError, match="workers"):
        run_stages(["train@a"], workers=0, root=repo)
    with pytest.raises(ValueError, match="nope"):
        run_stages(["train@nope"], root=repo)
    assert run_stages([], root=repo) == ([], [])


def test_stages_of_another_pipeline_file_run_in_their_wdir_and_are_recorded_in_its_lock(repo):
    (repo / "sub").mkdir()
    (repo / "sub" / "params.yaml").write_text(yaml.safe_dump({"runs": {"d": {"x": 4}}}))
    (repo / "sub" / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": {"foreach": "${runs}", "do": {
        "wdir": "..", "cmd": "mkdir -p out/${key} && echo ${item.x} > out/${key}/v.txt",
        "params": [{"sub/params.yaml": ["runs.${key}"]}], "outs": ["out/${key}"]}}}}))
    command, wdir = stage_commands(["sub/dvc.yaml:train@d"], root=repo)["sub/dvc.yaml:train@d"]
    assert Path(wdir) == repo and command.endswith("echo 4 > out/d/v.txt")
    done, failed = run_stages(["sub/dvc.yaml:train@d"], root=repo)
    assert failed == [] and (repo / "out" / "d" / "v.txt").read_text() == "4\n"  # ran in the wdir, the root
    assert set(yaml.safe_load((repo / "sub" / "dvc.lock").read_text())["stages"]) == {"train@d"}
    assert not (repo / "dvc.lock").exists()
    with pytest.raises(ValueError, match="'nope' in sub/dvc.yaml"):
        stage_commands(["sub/dvc.yaml:nope"], root=repo)


def test_prune_lock_drops_the_entries_of_stages_no_longer_defined_and_their_gitignore_lines(repo):
    run_stages(["train@a", "train@b", "train@c"], root=repo)
    (repo / "out" / ".gitignore").write_text("/a\n/b\n/c\n/mine\n")  # DVC's lines, and one of the user's
    lock_before, stat_before = (repo / "dvc.lock").read_text(), (repo / "dvc.lock").stat()
    assert prune_lock(root=repo) == []  # nothing to drop: the lock is not even rewritten
    stat = (repo / "dvc.lock").stat()
    assert (stat.st_ino, stat.st_mtime_ns) == (stat_before.st_ino, stat_before.st_mtime_ns)
    assert (repo / "dvc.lock").read_text() == lock_before
    (repo / "params.yaml").write_text(yaml.safe_dump({"runs": {"a": {"x": 1}, "b": {"x": 2}}}))  # the grid shrank
    assert prune_lock(root=repo) == ["train@c"]
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"train@a", "train@b"}
    assert lock["stages"]["train@a"] == yaml.safe_load(lock_before)["stages"]["train@a"]
    kept_text = (repo / "dvc.lock").read_text()  # DVC's own YAML round trip: the kept entries' lines as they were
    assert set(kept_text.splitlines()) <= set(lock_before.splitlines()) and "train@c" not in kept_text
    assert (repo / "out" / ".gitignore").read_text() == "/a\n/b\n/mine\n"
    assert (repo / "out" / "c" / "v.txt").exists()  # nothing in the workspace is deleted
    assert "up to date" in dvc(repo, "status").stdout


def test_prune_lock_resolves_outputs_from_the_stage_wdir_in_another_pipeline_file(repo):
    (repo / "sub").mkdir()
    (repo / "sub" / "params.yaml").write_text(yaml.safe_dump({"runs": {"d": {"x": 4}, "e": {"x": 5}}}))
    (repo / "sub" / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": {"foreach": "${runs}", "do": {
        "wdir": "..", "cmd": "mkdir -p out/${key} && echo ${item.x} > out/${key}/v.txt",
        "params": [{"sub/params.yaml": ["runs.${key}"]}], "outs": ["out/${key}"]}}}}))
    run_stages(["sub/dvc.yaml:train@d", "sub/dvc.yaml:train@e"], root=repo)
    (repo / "out" / ".gitignore").write_text("/d\n/e\n")
    (repo / "sub" / "params.yaml").write_text(yaml.safe_dump({"runs": {"d": {"x": 4}}}))
    assert prune_lock("sub/dvc.yaml", root=repo) == ["train@e"]
    assert set(yaml.safe_load((repo / "sub" / "dvc.lock").read_text())["stages"]) == {"train@d"}
    assert (repo / "out" / ".gitignore").read_text() == "/d\n"
    assert prune_lock(root=repo) == []  # the main pipeline has no lock yet
