"""A real browser on JupyterLab (``tests/browser_check.py``): a slider renders and no output shows an error.

Slow, and skipped without selenium (the ``browser`` extra) or Debian's chromium and chromedriver;
``make test-browser`` installs them and runs this file. The notebook under test is
``$RAGEN2_BROWSER_NOTEBOOK`` (default: notebook 01), opened from a scratch copy of the repository whose
``data/runs`` holds the smoke profile's runs, so that nothing in the checkout is written to.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tests" / "browser_check.py"
TARGET = Path(os.environ.get("RAGEN2_BROWSER_NOTEBOOK", REPO / "notebooks" / "01_template_collapse.ipynb")).resolve()
STUDIES = {"01_template_collapse": "__mech"}
"""The smoke runs a notebook reads (a run-id fragment); a notebook not listed gets every smoke run."""


def _load_tool():
    spec = importlib.util.spec_from_file_location("browser_check", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tool():
    pytest.importorskip("selenium")
    module = _load_tool()
    missing = [b for b in (module.CHROMIUM, module.CHROMEDRIVER) if not Path(b).exists()]
    if missing:
        pytest.skip(f"{missing} missing: apt-get install -y chromium chromium-driver (make test-browser does)")
    return module


def write_slider_notebook(path: Path, *, error: bool = False) -> Path:
    import nbformat

    book = nbformat.v4.new_notebook()
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ragen2)", "language": "python"}
    book.cells = [nbformat.v4.new_markdown_cell("# A slider"),
                  nbformat.v4.new_code_cell("import ipywidgets as widgets\nslider = widgets.IntSlider(value=3, max=9)"),
                  nbformat.v4.new_code_cell("slider")]
    if error:
        book.cells += [nbformat.v4.new_code_cell("1 / 0"), nbformat.v4.new_code_cell("print('never runs')")]
    nbformat.write(book, path)
    return path


def test_a_slider_renders_and_no_output_shows_an_error(tool, tmp_path):
    report = tool.check(write_slider_notebook(tmp_path / "slider.ipynb"), screenshot=tmp_path / "page.png")
    assert report.ok, report.failures()
    assert report.sliders == 1 and report.executed == report.code_cells == 2
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_an_error_fails_the_check(tool, tmp_path):
    """The negative control: the check sees a traceback and the cell that never ran."""
    report = tool.check(write_slider_notebook(tmp_path / "error.ipynb", error=True))
    assert not report.ok
    assert report.executed == 3 and report.code_cells == 4 and report.prompts[-1] == "[ ]:"
    assert len(report.errors) == 1 and "ZeroDivisionError" in report.errors[0]


def test_the_command_line_exits_1_on_a_failure(tool, tmp_path):
    proc = subprocess.run([sys.executable, str(TOOL), str(write_slider_notebook(tmp_path / "e.ipynb", error=True))],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert '"ok": false' in proc.stdout and "ZeroDivisionError" in proc.stdout


@pytest.fixture(scope="module")
def scratch_repo(tool, tmp_path_factory):
    """A scratch copy of the repository layout for the target notebook: the notebook in ``notebooks/``,
    the smoke profile's ``params.yaml`` and the runs the notebook reads, trained into ``data/runs``."""
    import torch
    import yaml

    from ragen2.config import load_config
    from ragen2.trainer.loop import train
    from ragen2.warmstart import initial_policy

    root = tmp_path_factory.mktemp("repo")
    (root / "notebooks").mkdir()
    shutil.copy(TARGET, root / "notebooks" / TARGET.name)
    for name in ("dvc.yaml", "pyproject.toml"):
        shutil.copy(REPO / name, root / name)
    subprocess.run([sys.executable, "-m", "ragen2", "profile", "smoke", "--write", str(root / "params.yaml")],
                   check=True, capture_output=True, cwd=root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    fragment = STUDIES.get(TARGET.stem, "")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for rid in params["runs"]:
            if fragment in rid:
                cfg = load_config(rid, root / "params.yaml")
                train(cfg, root / "data" / "runs" / rid, initial_policy(cfg, root / "data" / "cache"), resume=False,
                      progress=False)
    finally:
        torch.set_num_threads(threads)
    return root


def _parameter_names(notebook: Path) -> set[str]:
    import nbformat

    cell = next(c for c in nbformat.read(notebook, as_version=4).cells
                if "parameters" in c.metadata.get("tags", []))
    return {t.id for stmt in ast.parse(cell.source).body for t in stmt.targets}


def test_target_notebook_with_absolute_parameters(tool, scratch_repo, tmp_path):
    """The notebook's cells in a real JupyterLab, its paths pinned to the scratch copy (as papermill's
    parameters do in the pipeline): every cell runs, the sliders render, no output shows an error."""
    import yaml

    notebook = scratch_repo / "notebooks" / TARGET.name
    smoke = yaml.safe_load((scratch_repo / "params.yaml").read_text())["pipeline"]["notebooks"]
    params = {"runs_root": str(scratch_repo / "data" / "runs"), "fig_dir": str(tmp_path / "figures"),
              **smoke.get(TARGET.stem[3:], {})}
    if "cache_dir" in _parameter_names(notebook):
        params["cache_dir"] = str(scratch_repo / "data" / "cache")
    report = tool.check(notebook, root=scratch_repo, params=params, screenshot=tmp_path / "page.png")
    assert report.ok, report.failures()


def test_target_notebook_from_its_own_folder(tool, scratch_repo, tmp_path):
    """What a reader gets: the notebook opened in JupyterLab as committed, its defaults untouched (its paths
    resolve against the repository root, its figures go to the scratch folder)."""
    report = tool.check(scratch_repo / "notebooks" / TARGET.name, root=scratch_repo, screenshot=tmp_path / "page.png")
    assert report.ok, report.failures()
