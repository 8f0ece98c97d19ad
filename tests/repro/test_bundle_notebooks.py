"""A clone that has trained nothing: notebooks 01-08 (and 09-11, the regime map, the multi-turn curves and the learning
screen), opened as committed, run on the results bundle alone and draw the committed figures and tables byte for byte.

Slow (the eleven notebooks, about five minutes on 2 cores): ``make test-slow``. Skipped until the pipeline has written
the bundle (``data/bundle/runs``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen2.repro.kernel_client import SlicedPollKernelManager
from ragen2.repro.notebook_stages import NOTEBOOK_STUDIES
from tests.repro.clones import clone_without_runs
from tests.repro.dvcyaml import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    """The files a clone has, without runs, caches or outputs: code is the installed package."""
    if not (REPO / "data" / "bundle" / "runs").is_dir():
        pytest.skip("no results bundle yet (make repro writes data/bundle)")
    return clone_without_runs(tmp_path_factory.mktemp("clone"), bundle=True)


OWN = {"09_regime_map": "regime_map", "10_multiturn_curves": "curves", "11_learning_screen": "screen",
       "12_decline": "decline"}
"""Notebooks of pipelines of their own that read the bundle -> their folder in it."""
READS_ONLY_THE_BUNDLE = {"12_decline"}
"""Notebooks whose runs are their bundle part, always (a study trained in chunks): nothing to announce."""


@pytest.mark.parametrize("notebook", [*NOTEBOOK_STUDIES, *OWN])
def test_a_notebook_draws_the_committed_results_from_the_bundle(fresh_clone, notebook):
    import papermill

    if notebook in OWN and not (fresh_clone / "data" / "bundle" / OWN[notebook] / "runs").is_dir():
        pytest.skip(f"the {OWN[notebook]} pipeline has not written its part of the bundle yet")
    if notebook == "12_decline":
        from ragen2.repro.decline_study import unfinished_note

        if unfinished_note(fresh_clone / "data" / "bundle" / "decline" / "runs") is not None:
            pytest.skip("the decline study is not finished: its notebook writes placeholders only")

    out, figures = fresh_clone / "executed" / f"{notebook}.ipynb", fresh_clone / "figures" / notebook
    out.parent.mkdir(exist_ok=True)
    papermill.execute_notebook(str(fresh_clone / "notebooks" / f"{notebook}.ipynb"), str(out), progress_bar=False,
                               parameters={"fig_dir": str(figures)}, cwd=str(fresh_clone / "notebooks"),
                               kernel_name="python3",  # from its own folder, as JupyterLab runs it
                               kernel_manager_class=SlicedPollKernelManager)
    assert notebook in READS_ONLY_THE_BUNDLE or "reading the results bundle" in out.read_text()
    written = sorted(figures.glob("*"))
    assert written, "the notebook wrote no figure or table"
    for path in written:
        committed = REPO / "paper_figures" / path.name
        assert committed.is_file(), f"{path.name} is not a committed result"
        assert path.read_bytes() == committed.read_bytes(), f"{notebook}: {path.name} differs from the committed one"
