"""The side-by-side step benchmark of two trees (slow: four training processes of a smoke run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragen2.bench import ab

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_trees_are_timed_interleaved_from_one_warm_start(tmp_path):
    trees = []
    for name in ("old", "new"):
        tree = tmp_path / name
        shutil.copytree(REPO / "ragen2", tree / "ragen2", ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run([sys.executable, "-m", "ragen2", "profile", "smoke", "--write", str(tree / "params.yaml")],
                       cwd=tree, check=True, capture_output=True)
        trees.append(tree)
    report = ab.compare(trees[0], trees[1], "frozenlake__grpo__none__main__s0", steps=2, reps=2,
                        cache=tmp_path / "cache")
    assert len(list((tmp_path / "cache").rglob("config.json"))) >= 1  # one shared cache
    for name in ("old", "new"):
        runs = report["runs"][name]
        assert len(runs) == 2 and all(r["steps"] == 2 and r["per_step"] > 0 for r in runs)
        assert report["summary"][name]["per_step_min"] <= report["summary"][name]["per_step_median"]
    ratios = [o["per_step"] / n["per_step"] for o, n in zip(report["runs"]["old"], report["runs"]["new"])]
    assert report["speedup"]["min"] == min(ratios) and report["speedup"]["max"] == max(ratios)


def test_bad_sizes_are_refused():
    with pytest.raises(SystemExit, match="--steps=0"):
        ab.main(["a", "b", "--run", "r", "--steps", "0"])
