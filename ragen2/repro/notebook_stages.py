"""What the notebook stages of ``dvc.yaml`` run, and what they depend on.

``python -m ragen2.repro.notebook_stages run <notebook>`` executes one paper notebook with papermill:
``runs_root`` and ``fig_dir`` from the command line, every other parameter from ``params.yaml``'s
``pipeline.notebooks.<key>`` (:func:`notebook_parameters`; ``<key>`` is the notebook's name without its
number). One command for every notebook lets ``dvc.yaml`` define the eight stages once.

``python -m ragen2.repro.notebook_stages inputs`` writes ``<out-dir>/<notebook>.json`` for every notebook:
the content hash of each run directory of the studies it reads (:data:`NOTEBOOK_STUDIES`). A notebook stage
depends on its file instead of on all of ``data/runs``, so a retrained run re-runs only the notebooks that
read it. (DVC 3.67 interpolates only single values into a stage's ``deps``, so a stage cannot take its list
of run directories from ``params.yaml``, and the run ids differ between profiles.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ragen2.repro import study_catalog

NOTEBOOK_STUDIES = study_catalog.notebook_studies()
"""Notebook (file stem in ``notebooks/``) -> the studies whose runs it loads (the studies' descriptors,
:data:`ragen2.repro.study_catalog.CATALOG`; a test reads the notebooks' calls)."""
REQUIRED_STUDIES = study_catalog.required_studies()
"""Notebook -> the studies it cannot do without (:func:`ragen2.repro.missing.skip_without_studies` skips it when one has
no runs). It reads the others of :data:`NOTEBOOK_STUDIES` where a profile has them: the testbed (the paper profile puts
the whole main table in ``main``), the mechanism study (the CPU profile looks for collapse in its ``main`` runs:
:func:`ragen2.repro.studies.mechanism_study`), the slip study outside C5 and the sweeps (the CPU profile trains some of
them, on its first warm start only)."""
NOTEBOOK_CLAIMS = {
    "02_snr_mechanism": "C4",
    "03_main_results": "C1",
    "04_rv_quartiles": "C3",
    "05_stochasticity": "C5",
    "06_diagnostics": "C2",
    "07_training_dynamics": "C6",
    "08_interventions": "C7",
}
"""Notebook -> the claim it tests and writes to ``claims_<parameters key>.csv`` (notebook 01 tests none)."""
RUN_ARTIFACTS = {
    "01_template_collapse": ("fig_four_regimes_checkpoints", "table_collapse_texts"),
    "02_snr_mechanism": ("table_grad_buckets", "fig_grad_decomposition"),
    "03_main_results": ("table_main", "table_main_vs_paper", "table_learning",
                        "table_learning_train_batches", "table_update_control", "fig_success_curves",
                        "fig_output_length"),
    "04_rv_quartiles": ("table_rv_quartiles", "fig_rv_quartiles"),
    "05_stochasticity": ("table_stochasticity", "fig_stochasticity"),
    "06_diagnostics": ("table_correlations_within", "table_correlations", "fig_metric_correlations",
                       "fig_mi_vs_success", "fig_entropy_vs_success"),
    "07_training_dynamics": ("table_collapse_runs", "table_collapse_early_stops", "table_collapse_filters",
                             "fig_training_dynamics", "fig_mi_dynamics", "fig_collapse_trajectories",
                             "fig_reward_heatmaps"),
    "08_interventions": ("table_sweeps", "fig_intervention_sweeps"),
}
"""Notebook -> the figures (``fig_*``) and tables (``table_*``) it draws from runs, all after its study check
(:func:`ragen2.repro.missing.skip_without_studies`): where a study is missing they become placeholders, so
that every output its DVC stage declares exists (a test compares them with the notebooks' ``save_*`` calls)."""


PRODUCT_NOTEBOOKS = ("01_template_collapse", "04_rv_quartiles", "07_training_dynamics", "09_regime_map")
"""Notebooks that compute tables from checkpoints (sampled reasonings, prompt tables) and keep them in
``data/bundle/products/<notebook>/`` when told to (their ``write_products`` parameter; :mod:`ragen2.repro.products`),
so a clone without runs shows them."""


OWN_PIPELINE_NOTEBOOKS = {"09_regime_map": "regime_map/dvc.yaml", "10_multiturn_curves": "curves/dvc.yaml",
                          "11_learning_screen": "screen/dvc.yaml", "12_decline": "decline/dvc.yaml"}
"""Notebooks executed by a pipeline of their own (its ``dvc.yaml``), not by the paper's: the regime map, the
multi-turn success curves, the learning-regime screen and the decline study."""


def parameters_key(notebook: str) -> str:
    """The notebook's key in ``pipeline.notebooks`` of ``params.yaml``: its stem without the number
    (``03_main_results`` -> ``main_results``)."""
    if notebook not in NOTEBOOK_STUDIES and notebook not in OWN_PIPELINE_NOTEBOOKS:
        known = [*NOTEBOOK_STUDIES, *OWN_PIPELINE_NOTEBOOKS]
        raise ValueError(f"unknown notebook {notebook!r}; known: {', '.join(known)}")
    return notebook.split("_", 1)[1]


def notebook_parameters(notebook: str, params: str | Path = "params.yaml") -> dict[str, Any]:
    """The papermill parameters of ``notebook`` in ``params`` (``pipeline.notebooks.<key>``)."""
    import yaml

    data = yaml.safe_load(Path(params).read_text()) or {}
    key = parameters_key(notebook)
    try:
        return dict(data["pipeline"]["notebooks"][key])
    except (KeyError, TypeError):
        raise KeyError(f"{params} has no pipeline.notebooks.{key} (write it with `python -m ragen2 profile`)") from None


CELL_TIMEOUT_S = 1800
"""Longest a notebook cell may run (the slowest, notebook 04's prompt tables, takes a few minutes on the CPU
profile): a kernel that stops answering fails the cell instead of hanging the pipeline."""
PARAMETER_CELL_TIMEOUT_S = 120
"""Longest a parameters cell (the notebook's own, tagged ``parameters``, and papermill's ``injected-parameters``)
may run: it only assigns names, so a kernel that does not answer there costs two minutes, not :data:`CELL_TIMEOUT_S`
(the stalls seen before, kernel and papermill both idle, were missed wake-ups on the reply; the stages now read the
kernel through :mod:`ragen2.repro.kernel_client`, which rechecks every second)."""
EXECUTION_ATTEMPTS = 2
"""Executions of a notebook before a stall (a timeout, or a kernel that died) fails its stage (a notebook's
outputs depend only on its inputs, so a second execution from the start is the same computation)."""


def cell_timeout(cell) -> int:
    """Seconds a cell may run: :data:`PARAMETER_CELL_TIMEOUT_S` for a parameters cell, else :data:`CELL_TIMEOUT_S`."""
    tags = cell.get("metadata", {}).get("tags", [])
    return PARAMETER_CELL_TIMEOUT_S if {"parameters", "injected-parameters"} & set(tags) else CELL_TIMEOUT_S


def run_notebook(notebook: str, *, runs_root: str = "data/runs", fig_dir: str = "paper_figures",
                 executed_dir: str | Path = "data/executed", notebooks_dir: str | Path = "notebooks",
                 params: str | Path = "params.yaml", write_products: bool = False) -> Path:
    """Execute ``notebooks_dir/<notebook>.ipynb`` into ``executed_dir`` with its parameters; the executed copy.

    The kernel runs in the current directory, where ``runs_root`` and ``fig_dir`` are resolved. ``write_products``:
    a notebook of :data:`PRODUCT_NOTEBOOKS` keeps what it computes from checkpoints in the results bundle.
    """
    import papermill
    from nbclient.exceptions import DeadKernelError

    from ragen2.repro.kernel_client import SlicedPollKernelManager

    parameters = {"runs_root": runs_root, "fig_dir": fig_dir, **notebook_parameters(notebook, params)}
    if write_products and notebook in PRODUCT_NOTEBOOKS:
        import shutil

        from ragen2.repro.products import PRODUCTS_ROOT

        shutil.rmtree(PRODUCTS_ROOT / notebook, ignore_errors=True)  # only what this execution computes is kept
        parameters["write_products"] = True
    Path(fig_dir).mkdir(parents=True, exist_ok=True)
    out = Path(executed_dir) / f"{notebook}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, EXECUTION_ATTEMPTS + 1):
        try:
            papermill.execute_notebook(str(Path(notebooks_dir) / f"{notebook}.ipynb"), str(out), parameters=parameters,
                                       progress_bar=False, log_output=False, execution_timeout=CELL_TIMEOUT_S,
                                       timeout_func=cell_timeout, kernel_manager_class=SlicedPollKernelManager)
            return out
        except (TimeoutError, DeadKernelError) as exc:  # a stalled cell, kernel start or kernel: run it all once more
            if attempt == EXECUTION_ATTEMPTS:
                raise
            print(f"{notebook}: {type(exc).__name__} ({exc}); executing it again from the start", file=sys.stderr)
    return out


def run_dir_hash(run_dir: Path) -> str:
    """SHA-256 over every file of a run directory (relative paths and contents, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        digest.update(path.relative_to(run_dir).as_posix().encode() + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def input_manifests(runs_root: str | Path, notebooks: Iterable[str] = NOTEBOOK_STUDIES) -> dict[str, dict[str, Any]]:
    """Notebook -> ``{"studies": [...], "runs": {run id: run_dir_hash}}`` of the runs it reads.

    The runs of a study are the run directories under ``runs_root`` whose id names it
    (:func:`ragen2.repro.studies.study_run_dirs`, what the notebooks load); each directory is hashed once.
    """
    from ragen2.repro.studies import study_run_dirs

    root = Path(runs_root)
    hashes: dict[Path, str] = {}
    out = {}
    for notebook in notebooks:
        studies = NOTEBOOK_STUDIES[notebook]
        try:
            dirs = study_run_dirs(root, studies)
        except FileNotFoundError:  # no run trained yet: the notebook reads nothing
            dirs = []
        for d in dirs:
            if d not in hashes:
                hashes[d] = run_dir_hash(d)
        out[notebook] = {"studies": list(studies), "runs": {d.name: hashes[d] for d in dirs}}
    return out


def write_input_manifests(runs_root: str | Path, out_dir: str | Path) -> list[Path]:
    """Write ``out_dir/<notebook>.json`` (:func:`input_manifests`) for every notebook; the paths written."""
    from ragen2.fileio import write_text_atomic

    return [write_text_atomic(Path(out_dir) / f"{notebook}.json", json.dumps(manifest, indent=1) + "\n")
            for notebook, manifest in input_manifests(runs_root).items()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragen2.repro.notebook_stages", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute one notebook with its parameters from params.yaml")
    run.add_argument("notebook", choices=[*NOTEBOOK_STUDIES, *OWN_PIPELINE_NOTEBOOKS])
    run.add_argument("--runs-root", default="data/runs")
    run.add_argument("--fig-dir", default="paper_figures")
    run.add_argument("--executed-dir", default="data/executed")
    run.add_argument("--params", default="params.yaml")
    run.add_argument("--write-products", action="store_true",
                     help="keep what the notebook computes from checkpoints in data/bundle/products/ (the pipeline's)")
    inputs = sub.add_parser("inputs", help="write the run hashes each notebook depends on")
    inputs.add_argument("--runs-root", default="data/runs")
    inputs.add_argument("--out-dir", default="data/inputs")
    args = parser.parse_args(argv)
    if args.command == "run":
        out = run_notebook(args.notebook, runs_root=args.runs_root, fig_dir=args.fig_dir,
                           executed_dir=args.executed_dir, params=args.params, write_products=args.write_products)
        print(f"executed {out}")
    else:
        paths = write_input_manifests(args.runs_root, args.out_dir)
        print(f"wrote {len(paths)} input manifests to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
