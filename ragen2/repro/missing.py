"""A notebook whose studies have no runs: a note instead of a crash, placeholder outputs, an untested claim.

Each paper notebook reads the runs of some studies (:data:`~ragen2.repro.notebook_stages.NOTEBOOK_STUDIES`).
A profile that defines none of a study's runs, or a pipeline whose runs of it are not trained yet, leaves
the notebook nothing to load, and :func:`~ragen2.repro.studies.load_study` raises. Before its first cell
that reads runs, every notebook therefore calls :func:`skip_without_studies`. When every study it reads
it cannot do without has runs (:data:`~ragen2.repro.notebook_stages.REQUIRED_STUDIES`), that returns ``None`` and does nothing else (the notebook runs as written). Otherwise it

- returns a Markdown note naming the missing studies and what would produce them (the profiles that define
  them, or, when ``params.yaml`` defines them, that they are not trained yet), which the cell displays;
- writes the notebook's claim (:data:`~ragen2.repro.notebook_stages.NOTEBOOK_CLAIMS`) as ``untested``
  with that reason, so ``claims.csv`` says why the claim was not tested instead of giving no row for it, and its
  preconditions file: measured on the pipeline's other runs where the precondition is about the setting rather than
  the study (C5: whether an episode lets a slip be corrected at all), else one row, not measured;
- writes each figure and table the notebook would draw from runs
  (:data:`~ragen2.repro.notebook_stages.RUN_ARTIFACTS`) as a placeholder that carries the note, so every
  output its DVC stage declares exists and ``dvc repro`` goes on;
- makes the notebook's remaining cells do nothing (an IPython input transformer that replaces each later
  cell's code by ``pass``; a cell that calls :func:`skip_without_studies` itself still runs, and removes
  the transformer when the studies are there), so the notebook ends without an error under papermill and
  in JupyterLab alike.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ragen2.repro import study_catalog
from ragen2.repro.notebook_stages import (
    NOTEBOOK_CLAIMS,
    NOTEBOOK_STUDIES,
    REQUIRED_STUDIES,
    RUN_ARTIFACTS,
    parameters_key,
)

STUDY_LABELS = study_catalog.labels()
"""Study tag -> what it is, for the note."""
CHECK_CALL = "skip_without_studies("
UNFINISHED_CALL = "skip_unfinished("
"""A cell whose code contains this still runs after a skip (so re-running the check can lift it)."""


def missing_studies(runs_root: str | Path, studies: Sequence[str]) -> tuple[str, ...]:
    """The ``studies`` (in their order) without a run directory under ``runs_root`` (all of them when
    ``runs_root`` holds no run directory or does not exist)."""
    from ragen2.repro.run_ids import parse_run_id
    from ragen2.repro.studies import study_run_dirs

    try:
        present = {parse_run_id(d.name)["study"] for d in study_run_dirs(runs_root, studies)}
    except FileNotFoundError:
        present = set()
    return tuple(s for s in studies if s not in present)


def _defined_in(study: str, params: str | Path | None) -> tuple[str | None, int]:
    """``(profile name, runs of study)`` of a params.yaml, or ``(None, 0)`` when there is none to read."""
    import yaml

    from ragen2.repro.run_ids import parse_run_id

    if params is None or not Path(params).is_file():
        return None, 0
    data = yaml.safe_load(Path(params).read_text()) or {}
    runs = [rid for rid in data.get("runs") or {} if parse_run_id(rid)["study"] == study]
    return (data.get("pipeline") or {}).get("profile"), len(runs)


SMOKE_DIR = "/tmp/ragen2-smoke"
"""Where ``make smoke`` builds and runs its scratch copy (the Makefile's ``SMOKE_DIR``; a test keeps them equal)."""


def _profiles_with(study: str) -> list[str]:
    from ragen2.repro.profiles import PROFILE_NAMES, profile_run_ids
    from ragen2.repro.run_ids import parse_run_id

    return [name for name in PROFILE_NAMES if any(parse_run_id(r)["study"] == study for r in profile_run_ids(name))]


def study_note(notebook: str, missing: Sequence[str], runs_root: str | Path, params: str | Path | None = None) -> str:
    """One Markdown line: which studies have no runs, what would produce them, and what the notebook does instead."""
    parts = []
    for study in missing:
        profile, count = _defined_in(study, params)
        if count:
            source = (f"`params.yaml` (profile `{profile}`) defines {count} runs of it, not trained yet: "
                      "`make repro` trains them")
        else:
            where = f"profile `{profile}` does not define it" if profile else "no `params.yaml` defines it here"
            others = ", ".join(f"`{p}`" for p in _profiles_with(study)) or "no profile"
            source = (f"{where}; {others} do (`python -m ragen2 profile NAME --write params.yaml`, then "
                      "`make repro`)")
        parts.append(f"the `{study}` study ({STUDY_LABELS.get(study, study)}: run ids `*__{study}*__s*`): {source}")
    claim = NOTEBOOK_CLAIMS.get(notebook)
    outcome = (f"claim {claim} is written as untested" if claim else "no claim is affected")
    return (f"**Study missing.** No run under `{Path(runs_root).name}/` belongs to {'; '.join(parts)}. "
            f"The rest of this notebook is skipped: its figures and tables are placeholders and {outcome}. "
            f"To see it run on tiny runs in minutes: `make smoke`, then start JupyterLab in its scratch copy "
            f"with this checkout's environment (`cd {SMOKE_DIR} && <checkout>/.venv/bin/jupyter lab`; `make smoke` "
            f"prints it) and open this notebook there. The executed copies of the committed "
            f"results are in `docs/notebooks/`.")


def placeholder_figure(text: str):
    """A figure that shows ``text`` (wrapped) in place of a plot."""
    from ragen2.repro.figure_style import new_figure, styled

    @styled
    def draw():
        fig = new_figure(6.0, 2.0)
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, textwrap.fill(text.replace("**", "").replace("`", ""), 90), ha="center", va="center",
                fontsize=8, wrap=True, transform=ax.transAxes)
        return fig

    return draw()


def setting_preconditions(claim: str, runs_root: str | Path | None) -> list:
    """The preconditions of ``claim`` that the pipeline's runs under ``runs_root`` measure even without the claim's
    own study (C5's "a slip can be corrected": the episodes' turns); ``[]`` for other claims or without runs."""
    from ragen2.repro.preconditions import c5_preconditions
    from ragen2.repro.runs import load_runs

    if claim != "C5" or runs_root is None:
        return []
    try:
        runs, _ = load_runs(runs_root)
    except FileNotFoundError:  # no run directory at all
        return []
    if runs.empty or "rollout.max_turns" not in runs:
        return []
    return c5_preconditions(runs, where="runs of this pipeline (no slip study)")


def write_placeholders(notebook: str, note: str, fig_dir: str | Path,
                       runs_root: str | Path | None = None) -> list[Path]:
    """The notebook's run-based figures and tables as placeholders carrying ``note``, its claim as untested with
    ``note`` as evidence and its preconditions (:func:`setting_preconditions` on ``runs_root``'s runs, else not
    measured); the paths written."""
    from ragen2.repro.artifacts import save_figure, save_table
    from ragen2.repro.claims import Claim, write_claims
    from ragen2.repro.preconditions import Precondition, gate, write_preconditions

    written: list[Path] = []
    for name in RUN_ARTIFACTS[notebook]:
        if name.startswith("fig_"):
            written += save_figure(placeholder_figure(note), name, fig_dir, caption=note).values()
        else:
            written += save_table(pd.DataFrame({"note": [note]}), name, fig_dir, caption=note).values()
    if notebook in NOTEBOOK_CLAIMS:
        claim, section = NOTEBOOK_CLAIMS[notebook], parameters_key(notebook)
        measured = setting_preconditions(claim, runs_root)
        preconditions = measured or [Precondition(claim, "its runs exist", "the studies that decide it have runs",
                                                  "not measured: a study is missing", float("nan"), None)]
        untested = gate(Claim(claim, "untested", f"not tested: {note}"), preconditions)
        written.append(write_claims(section, [untested], fig_dir))
        written.append(write_preconditions(section, preconditions, fig_dir))
    return written


def _skip_cell(lines: list[str]) -> list[str]:
    """IPython input transformer: a cell's code becomes ``pass`` unless it runs the study check."""
    return lines if any(CHECK_CALL in line or UNFINISHED_CALL in line for line in lines) else ["pass\n"]


def _set_skipping(on: bool) -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # not in IPython: nothing to skip
        return
    shell = get_ipython()
    if shell is None:
        return
    transformers = shell.input_transformers_post
    if _skip_cell in transformers:
        transformers.remove(_skip_cell)
    if on:
        transformers.append(_skip_cell)


def skip_without_studies(notebook: str, runs_root: str | Path, fig_dir: str | Path,
                         params: str | Path | None = None) -> Any:
    """``None`` when every study ``notebook`` needs (:data:`~ragen2.repro.notebook_stages.REQUIRED_STUDIES`) has runs
    under ``runs_root``; otherwise the note (IPython
    ``Markdown``), after writing the placeholders and the untested claim into ``fig_dir`` and turning the
    notebook's remaining cells off (see the module docstring).

    Args:
        notebook: the notebook's file stem (``03_main_results``).
        runs_root, fig_dir: the notebook's parameters (resolved).
        params: the params.yaml the note reads to say what would produce a missing study (default: the
            repository's, when there is one).
    """
    from IPython.display import Markdown

    if notebook not in NOTEBOOK_STUDIES:
        raise ValueError(f"unknown notebook {notebook!r}; known: {', '.join(NOTEBOOK_STUDIES)}")
    missing = missing_studies(runs_root, REQUIRED_STUDIES[notebook])
    if not missing:
        _set_skipping(False)
        return None
    if params is None:
        from ragen2.errors import MissingPathError
        from ragen2.repro.paths import repository_root

        try:
            params = repository_root() / "params.yaml"
        except MissingPathError:
            params = None
    note = study_note(notebook, missing, runs_root, params)
    write_placeholders(notebook, note, fig_dir, runs_root)
    _set_skipping(True)
    return Markdown(note)


def skip_unfinished(note: str | None, outputs: Sequence[str], fig_dir: str | Path) -> Any:
    """For a notebook whose study is trained in chunks (the decline study): ``None`` when ``note`` is None (every run
    is finished: the notebook runs as written); otherwise the note (IPython ``Markdown``), after writing each of
    ``outputs`` (``fig_*`` figures, ``table_*`` tables) into ``fig_dir`` as a placeholder carrying it and turning the
    notebook's remaining cells off, so no result is read from a study that is not finished."""
    from IPython.display import Markdown

    from ragen2.repro.artifacts import save_figure, save_table

    if note is None:
        _set_skipping(False)
        return None
    for name in outputs:
        if name.startswith("fig_"):
            save_figure(placeholder_figure(note), name, fig_dir, caption=note)
        else:
            save_table(pd.DataFrame({"note": [note]}), name, fig_dir, caption=note)
    _set_skipping(True)
    return Markdown(note)
