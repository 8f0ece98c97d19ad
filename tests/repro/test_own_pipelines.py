"""The pipelines of their own: one description of where each keeps its files, one params writer for all."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragen2.repro import (
    decline_study,
    dvc_files,
    learning_screen,
    multiturn_curves,
    own_pipelines,
    regime_map,
)
from ragen2.repro.notebook_stages import PRODUCT_NOTEBOOKS

REPO = Path(__file__).resolve().parents[2]
MODULES = (regime_map, multiturn_curves, learning_screen, decline_study)


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


@pytest.mark.parametrize("pipeline", dvc_files.PIPELINES, ids=lambda p: p.folder)
def test_each_dvc_file_is_the_one_its_descriptor_writes(pipeline):
    """The three pipelines' dvc.yaml files come from one function (python -m ragen2.repro.dvc_files rewrites them)."""
    assert (REPO / pipeline.dvc_file).read_text() == own_pipelines.dvc_yaml(pipeline), (
        f"{pipeline.dvc_file} differs from its descriptor in {pipeline.module}: python -m ragen2.repro.dvc_files")


def test_every_pipeline_publishes_its_notebook_and_declares_what_it_writes():
    for pipeline in dvc_files.PIPELINES:
        stages = own_pipelines.stages(pipeline)
        assert list(stages)[:2] == ["warmstart", "train"] and list(stages)[-1] == "publish"
        if pipeline.bundle_per_run:  # a bundle stage per run and per warm start; the notebook reads the bundle
            assert list(stages)[-4:-1] == ["notebook", "bundle", "bundle_warm_start"] and not pipeline.notebook_data
            assert stages["bundle"]["do"]["outs"] == [{f"data/bundle/{pipeline.folder}/runs/${{key}}": {"cache": False}}]
            assert stages["bundle_warm_start"]["do"]["outs"] == [
                {f"data/bundle/{pipeline.folder}/warm_start/${{key}}": {"cache": False}}]
            reads = [f"data/bundle/{pipeline.folder}/runs", f"data/bundle/{pipeline.folder}/warm_start"]
            assert stages["notebook"]["deps"][1:3] == reads and pipeline.runs_root not in stages["notebook"]["deps"]
            assert f"--runs-root {reads[0]} " in stages["notebook"]["cmd"]
        else:
            assert list(stages)[-3:] == ["notebook", "bundle", "publish"]
            data = [Path(d).name for d in pipeline.notebook_data]  # what the notebook reads beside the runs, bundled
            assert stages["bundle"]["outs"] == [{f"data/bundle/{pipeline.folder}/{part}": {"cache": False}}
                                                for part in ("runs", "warm_start", *data)]
            assert set(pipeline.notebook_data) <= set(stages["bundle"]["deps"]) & set(stages["notebook"]["deps"])
            assert stages["bundle"]["cmd"].count(" --data ") == len(data)
        outs = [next(iter(o)) if isinstance(o, dict) else o for o in stages["notebook"]["outs"]]
        products = [f"data/bundle/products/{pipeline.notebook}"] if pipeline.products else []
        assert [o for o in outs[1:] if not o.startswith("paper_figures/")] == products and len(outs) > 1
        assert ("--write-products" in stages["notebook"]["cmd"]) == pipeline.products
        assert pipeline.products == (pipeline.notebook in PRODUCT_NOTEBOOKS)  # the notebook takes write_products
        assert stages["publish"]["outs"] == [{f"docs/notebooks/{pipeline.notebook}.ipynb": {"cache": False}}]
