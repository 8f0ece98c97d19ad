"""Atomic writes leave the old file or the new one, and no temporary file."""

import json
import os

import numpy as np
import pytest

from ragen2.fileio import atomic_path, write_bytes_atomic, write_json_atomic, write_text_atomic


def test_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "a.txt"
    write_text_atomic(target, "one")
    write_bytes_atomic(target, b"two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["a.txt"]
    assert target.stat().st_mode & 0o777 == 0o644


def test_failure_keeps_the_old_file(tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer failed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    with pytest.raises(TypeError, match="bytes"):
        write_text_atomic(target, b"bytes")


def test_atomic_writers_replace_and_leave_no_temp(tmp_path):
    target = tmp_path / "sub" / "x.json"
    write_json_atomic(target, {"b": np.float64(1.5), "a": [np.int64(2), float("nan")]})
    assert json.loads(target.read_text()) == {"a": [2, None], "b": 1.5}
    assert target.read_text().index('"a"') < target.read_text().index('"b"')  # sorted keys
    write_text_atomic(target, "replaced")
    assert target.read_text() == "replaced"
    assert os.listdir(target.parent) == ["x.json"]
    with pytest.raises(TypeError):
        write_text_atomic(target, b"bytes")
