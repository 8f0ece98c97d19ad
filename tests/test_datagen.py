"""The data stage writes every offline world, reproducibly, in files the environments load back."""

from __future__ import annotations

import hashlib

import pytest

from ragen2 import envs
from ragen2.datagen import CORPUS_ENVS, main, write_all


def _digest(paths) -> dict[str, str]:
    return {p.name + str(p.parent.name): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_write_all_is_deterministic(tmp_path):
    first = write_all(tmp_path / "a")
    second = write_all(tmp_path / "b")
    assert {p.parent.name for p in first} == set(CORPUS_ENVS)
    assert _digest(first) == _digest(second)
    assert not list((tmp_path / "a").rglob("*.tmp*")), "no temporary files left behind"


def test_environments_load_the_written_files(tmp_path):
    write_all(tmp_path)
    kwargs = {
        "countdown": {"data_path": tmp_path / "countdown" / "train.parquet"},
        "metamathqa": {"data_path": tmp_path / "metamathqa" / "train.jsonl"},
        "searchqa": {"data_path": tmp_path / "searchqa" / "train.parquet",
                     "corpus_path": tmp_path / "searchqa" / "corpus.jsonl"},
        "webshop": {"data_path": tmp_path / "webshop"},
        "deepcoder": {"data_path": tmp_path / "deepcoder" / "problems.jsonl"},
    }
    for name, kw in kwargs.items():
        env = envs.make(name, **{k: str(v) for k, v in kw.items()})
        obs, _ = env.reset(seed=1)
        assert obs
        _, _, _, _, info = env.step(envs.expert_action(env))
        assert info["action_is_valid"], name


def test_cli_and_bad_names(tmp_path, capsys):
    main(["--root", str(tmp_path), "--env", "countdown"])
    assert "countdown" in capsys.readouterr().out
    with pytest.raises(ValueError, match="sokoban"):
        write_all(tmp_path, ("sokoban",))
