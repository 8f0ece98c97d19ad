"""The pipelines of their own: one description of where each keeps its files, one params writer for all."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragen2.repro import learning_screen, multiturn_curves, regime_map

REPO = Path(__file__).resolve().parents[2]
MODULES = (regime_map, multiturn_curves, learning_screen)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_each_pipeline_keeps_its_files_in_its_folder_and_its_params_say_where(module):
    pipeline = module.PIPELINE
    assert (REPO / pipeline.dvc_file).is_file() and (REPO / pipeline.params_path).is_file()
    assert pipeline.runs_root == f"data/{pipeline.folder}/runs" and (REPO / pipeline.module).is_file()
    text = module.params_yaml(module.build())
    assert text.splitlines()[0].endswith(f"edit {pipeline.module}, not this file.")
    places = yaml.safe_load(text)["pipeline"]
    assert (places["runs_root"], places["cache_dir"], places["dvc_file"]) == (pipeline.runs_root, pipeline.cache_dir,
                                                                             pipeline.dvc_file)
    stages = yaml.safe_load((REPO / pipeline.dvc_file).read_text())["stages"]
    assert f"--params {pipeline.params_path}" in stages["train"]["do"]["cmd"]
