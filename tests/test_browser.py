"""A real browser on JupyterLab (``tests/browser_check.py``): a fresh clone's notebooks run, their figures and sliders
render, and no output shows an error; and on ``dvc plots show``'s page, opened with the network cut off: every plot
is drawn.

Slow, and skipped without selenium (the ``browser`` extra) or Debian's chromium and chromedriver;
``make test-browser`` installs them and runs this file. The notebooks under test are 01 and 07 (or
``$RAGEN2_BROWSER_NOTEBOOK``), opened as committed in a scratch copy of what a clone has, without runs: they read
the results bundle (``data/bundle``), and nothing in the checkout is written to.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tests" / "browser_check.py"
TARGETS = ([Path(os.environ["RAGEN2_BROWSER_NOTEBOOK"]).resolve()] if os.environ.get("RAGEN2_BROWSER_NOTEBOOK")
           else [REPO / "notebooks" / f"{nb}.ipynb" for nb in ("01_template_collapse", "07_training_dynamics")])


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
def fresh_clone(tool, tmp_path_factory):
    """What a clone has, without runs: dvc.yaml, params.yaml, pyproject.toml, the notebooks and the results bundle."""
    if not (REPO / "data" / "bundle" / "runs").is_dir():
        pytest.skip("no results bundle yet (make repro writes data/bundle)")
    from tests.repro.clones import clone_without_runs

    return clone_without_runs(tmp_path_factory.mktemp("clone"), bundle=True, notebooks=TARGETS)


@pytest.mark.parametrize("target", TARGETS, ids=[t.stem for t in TARGETS])
def test_a_fresh_clones_notebook_runs_and_shows_its_figures(tool, fresh_clone, target, tmp_path):
    """What a reader of a fresh clone gets: the notebook opened in JupyterLab as committed, its defaults untouched
    (its paths resolve against the repository root, it reads the bundle, its figures go to the scratch folder):
    every cell runs, every figure it displays renders (and its sliders), no output shows an error."""
    report = tool.check(fresh_clone / "notebooks" / target.name, root=fresh_clone, screenshot=tmp_path / "page.png")
    assert report.ok, report.failures()
    assert report.expected_images >= 2 and report.images >= report.expected_images


def test_the_dvc_plots_page_draws_every_image_in_chromium_cut_off_the_network(tool, tmp_path):
    """`dvc plots show`'s page as a reader opens it, offline: every plot (the three training curves and each
    committed figure) is decoded by the browser, and the page asked for nothing that is not a local file."""
    from tests.repro.dvcyaml import resolved
    from tests.repro.test_plot_data import plots_page

    (tmp_path / "clone").mkdir()
    index = plots_page(tmp_path / "clone")
    driver = tool.make_driver(tmp_path / "profile", tool.OFFLINE_FLAGS)
    try:
        driver.get(index.as_uri())
        tool._wait("the page's images", lambda: driver.execute_script(
            "return Array.from(document.images).every(i => i.complete)"), 60)
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth])")
        fetched = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
    finally:
        driver.quit()
    plots = [p for p in resolved()["plots"] if isinstance(p, str)]
    assert len(images) == len(plots) and len(plots) > 3
    assert all(width > 0 for _, width in images), [src for src, width in images if not width]  # decoded
    assert all(any(name in src for src, _ in images) for name in ("validation_success", "mi_proxy", "kept_ratio"))
    assert all(url.startswith("file:") for url in fetched), [u for u in fetched if not u.startswith("file:")]


def test_a_page_that_needs_the_network_fails_the_offline_check(tool, tmp_path):
    """The negative control: with the same flags an image from the network is not drawn (as the vega scripts from a
    CDN were not, before the page held images only)."""
    page = tmp_path / "index.html"
    page.write_text('<html><body><img src="https://cdn.jsdelivr.net/npm/vega@5/logo.png"></body></html>')
    driver = tool.make_driver(tmp_path / "profile", tool.OFFLINE_FLAGS)
    try:
        driver.get(page.as_uri())
        tool._wait("the image to settle", lambda: driver.execute_script("return document.images[0].complete"), 60)
        width = driver.execute_script("return document.images[0].naturalWidth")
    finally:
        driver.quit()
    assert width == 0
