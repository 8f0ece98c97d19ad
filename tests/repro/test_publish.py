"""Published notebooks: volatile metadata dropped, failed notebooks refused, the committed copies in step with dvc.lock."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from ragen2.repro.notebook_stages import NOTEBOOK_STUDIES
from ragen2.repro.publish import WIDGET_NOTE, WIDGET_VIEW, main, publish_notebooks, published

ROOT = Path(__file__).resolve().parents[2]


def _executed(root: Path, *, when: str, error: bool = False) -> dict:
    """An executed notebook as papermill leaves it; ``when`` stands for everything that differs between executions."""
    output = ({"output_type": "error", "ename": "KeyError", "evalue": "x", "traceback": []} if error else
              {"output_type": "execute_result", "execution_count": 1, "metadata": {},
               "data": {"text/plain": [f"PosixPath('{root}/paper_figures/claims.csv')"]}})
    widget = {"output_type": "display_data", "metadata": {},
              "data": {"text/plain": ["interactive(...)"], WIDGET_VIEW: {"model_id": f"id-{when}", "version_major": 2}}}
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3"}, "papermill": {"end_time": when, "duration": 1.5},
                         "widgets": {WIDGET_VIEW: {"state": {f"id-{when}": {"model_name": "IntSliderModel"}}}}},
            "cells": [{"cell_type": "code", "execution_count": 1, "source": ["x = 1"], "outputs": [output, widget],
                       "id": f"random-{when}"[:40],
                       "metadata": {"tags": ["injected-parameters"], "papermill": {"start_time": when},
                                    "execution": {"iopub.status.busy": when}}}]}


def test_two_executions_of_the_same_results_publish_the_same_bytes(tmp_path):
    root = tmp_path / "repo"
    for i, when in enumerate(("2026-12-04T03:18:12Z", "2026-12-05T09:00:00Z")):
        src = tmp_path / f"run{i}" / "03_main_results.ipynb"
        src.parent.mkdir()
        src.write_text(json.dumps(_executed(root, when=when)))
        publish_notebooks([src], tmp_path / f"out{i}", root=root)
    first, second = ((tmp_path / f"out{i}" / "03_main_results.ipynb").read_bytes() for i in (0, 1))
    assert first == second
    copy = json.loads(first)
    assert copy["metadata"] == {"kernelspec": {"name": "python3"}}
    cell = copy["cells"][0]
    assert cell["metadata"] == {"tags": ["injected-parameters"]} and cell["id"] == "injected-parameters"
    assert cell["outputs"][0]["data"]["text/plain"] == ["PosixPath('paper_figures/claims.csv')"]
    assert cell["outputs"][1]["data"] == {"text/plain": [WIDGET_NOTE]}
    assert published(_executed(root, when="t"), root)["cells"][0]["source"] == ["x = 1"]


def test_a_notebook_with_a_failed_cell_or_missing_is_not_published(tmp_path):
    bad = tmp_path / "01_template_collapse.ipynb"
    bad.write_text(json.dumps(_executed(tmp_path, when="t", error=True)))
    with pytest.raises(ValueError, match="01_template_collapse.ipynb: 1 cell.*KeyError.*not published"):
        publish_notebooks([bad], tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="nowhere.ipynb"):
        main([str(tmp_path / "nowhere.ipynb"), "--out-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("lock_file", "notebooks"), [
    ("dvc.lock", sorted(f"{nb}.ipynb" for nb in NOTEBOOK_STUDIES)),  # the main pipeline's paper notebooks
    ("screen/dvc.lock", ["11_learning_screen.ipynb"]),
    ("curves/dvc.lock", ["10_multiturn_curves.ipynb"]),
    ("regime_map/dvc.lock", ["09_regime_map.ipynb"]),
])
def test_the_committed_copies_are_the_ones_dvc_lock_records(lock_file, notebooks):
    """docs/notebooks/ is what the pipelines last published: each file's md5 is the publish stage's in its dvc.lock."""
    lock = yaml.safe_load((ROOT / lock_file).read_text())["stages"]["publish"]
    recorded = {Path(o["path"]).name: o["md5"] for o in lock["outs"]}
    assert sorted(recorded) == notebooks
    for name, md5 in recorded.items():
        data = (ROOT / "docs" / "notebooks" / name).read_bytes()
        assert hashlib.md5(data).hexdigest() == md5, f"docs/notebooks/{name} differs from dvc.lock: rerun the pipeline"
        copy = json.loads(data)
        outputs = [o for c in copy["cells"] for o in c.get("outputs", [])]
        assert outputs and not any(o["output_type"] == "error" for o in outputs), name
        assert "papermill" not in copy["metadata"] and str(ROOT) not in data.decode()


OBJECT_REPR = ("PosixPath(", "WindowsPath(", "<Figure ", "<matplotlib", "<ragen2.")
"""What a cell's displayed value starts with when it is an object nobody meant to show."""


def test_no_notebook_cell_ends_by_showing_an_object_nobody_meant_to_show():
    """A reader sees tables, figures and verdicts at the ends of cells, never a bare ``PosixPath(...)``: no paper
    notebook ends a cell with a bare writer call, and no published notebook shows such a value."""
    import re

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            last = "".join(cell["source"]).rstrip().rsplit("\n", 1)[-1]
            if cell["cell_type"] == "code":
                assert not re.match(r"^(write_\w+|save_table|save_figure)\(", last), (path.name, last)
    for path in sorted((ROOT / "docs" / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                text = "".join(output.get("data", {}).get("text/plain", []))
                if output.get("output_type") == "execute_result":
                    assert not text.startswith(OBJECT_REPR), (path.name, text[:80])
