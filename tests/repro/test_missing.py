"""A notebook whose studies have no runs: the note, the placeholder outputs, the untested claim, the skip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ragen2.repro.claims import read_claims
from ragen2.repro.missing import (
    _skip_cell,
    missing_studies,
    skip_without_studies,
    study_note,
    write_placeholders,
)
from ragen2.repro.notebook_stages import NOTEBOOK_CLAIMS, NOTEBOOK_STUDIES, RUN_ARTIFACTS, parameters_key
from ragen2.repro.preconditions import read_preconditions


def _runs(root, *run_ids):
    for rid in run_ids:
        (root / rid).mkdir(parents=True)
        (root / rid / "config.json").write_text("{}")
    return root


def test_missing_studies_names_the_studies_without_a_run_dir(tmp_path):
    runs = _runs(tmp_path / "runs", "frozenlake__grpo__none__main__s0", "frozenlake__grpo__none__ent0__s0")
    assert missing_studies(runs, ("main", "mech", "ent", "kl")) == ("mech", "kl")
    assert missing_studies(runs, ("main",)) == ()
    assert missing_studies(tmp_path / "nowhere", ("main", "slip")) == ("main", "slip")


def test_the_note_says_what_would_produce_the_study(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"runs": {"frozenlake__grpo__none__main__s0": {},
                                               "frozenlake__grpo__none__mech0p02__s0": {}},
                                      "pipeline": {"profile": "custom"}}))
    untrained = study_note("07_training_dynamics", ("mech",), tmp_path / "runs", params)
    assert "`mech` study" in untrained and "profile `custom`) defines 1 runs of it, not trained yet" in untrained
    assert "claim C6 is written as untested" in untrained and "\n" not in untrained
    undefined = study_note("08_interventions", ("kl",), tmp_path / "runs", params)
    assert "profile `custom` does not define it; `smoke`, `paper` do" in undefined
    no_params = study_note("01_template_collapse", ("mech",), tmp_path / "runs", None)
    assert "no `params.yaml` defines it here" in no_params and "no claim is affected" in no_params
    # where a learner goes next: the smoke copy (the Makefile's own folder) or the published notebooks
    from ragen2.repro.missing import SMOKE_DIR

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert f"SMOKE_DIR ?= {SMOKE_DIR}\n" in makefile
    # the checkout's own JupyterLab (the scratch copy has no environment), named without a machine's paths
    assert f"`cd {SMOKE_DIR} && <checkout>/.venv/bin/jupyter lab`" in no_params and "`docs/notebooks/`" in no_params


@pytest.mark.parametrize("notebook", list(NOTEBOOK_STUDIES))
def test_placeholders_are_every_run_based_output_and_an_untested_claim(notebook, tmp_path):
    note = study_note(notebook, ("main",), tmp_path / "runs")
    written = {p.name for p in write_placeholders(notebook, note, tmp_path / "figs")}
    expected = set()
    for name in RUN_ARTIFACTS[notebook]:
        expected |= {f"{name}.png", f"{name}.pdf", f"{name}.md"} if name.startswith("fig_") else {f"{name}.csv",
                                                                                                   f"{name}.md"}
    if notebook in NOTEBOOK_CLAIMS:
        expected |= {f"claims_{parameters_key(notebook)}.csv", f"preconditions_{parameters_key(notebook)}.csv"}
        (pre,) = read_preconditions(tmp_path / "figs" / f"preconditions_{parameters_key(notebook)}.csv")
        assert pre.claim == NOTEBOOK_CLAIMS[notebook] and pre.held is None
        (claim,) = read_claims(tmp_path / "figs" / f"claims_{parameters_key(notebook)}.csv")
        assert (claim.claim, claim.verdict) == (NOTEBOOK_CLAIMS[notebook], "untested")
        assert claim.evidence == f"not tested: {note}"
    assert written == expected
    captions = [p for p in (tmp_path / "figs").glob("*.md")]
    assert captions and all("Study missing" in p.read_text() for p in captions)


def test_the_skip_turns_later_cells_into_pass_but_not_the_check():
    assert _skip_cell(["x = 1\n", "x\n"]) == ["pass\n"]
    check = ['skip_without_studies("03_main_results", runs_root, fig_dir)\n']
    assert _skip_cell(check) == check


def test_only_the_studies_a_notebook_cannot_do_without_make_it_skip(tmp_path):
    """The CPU profile has no mech, slip or KL runs: notebooks 01 and 07 read the main study's runs instead, 06 and 08
    correlate and sweep what there is; only C5's notebook needs its slip study."""
    runs = _runs(tmp_path / "runs", "frozenlake__grpo__none__main__s0")
    for notebook in ("01_template_collapse", "06_diagnostics", "07_training_dynamics", "08_interventions"):
        assert skip_without_studies(notebook, runs, tmp_path / "figs") is None, notebook
    assert skip_without_studies("05_stochasticity", runs, tmp_path / "figs") is not None
    assert (tmp_path / "figs" / "claims_stochasticity.csv").is_file()


def test_nothing_happens_when_every_study_has_runs(tmp_path):
    runs = _runs(tmp_path / "runs", "frozenlake__grpo__none__main__s0", "frozenlake__grpo__none__slip0__s0")
    assert skip_without_studies("05_stochasticity", runs, tmp_path / "figs") is None
    assert not (tmp_path / "figs").exists()
    with pytest.raises(ValueError, match="unknown notebook"):
        skip_without_studies("09_nothing", runs, tmp_path / "figs")


def test_an_optional_study_missing_is_no_reason_to_skip(tmp_path):
    """The paper profile has no ``testbed`` study (its main table is all in ``main``): notebook 03 still runs."""
    runs = _runs(tmp_path / "runs", "sokoban__ppo__none__main__s0")
    assert "testbed" in NOTEBOOK_STUDIES["03_main_results"]
    assert skip_without_studies("03_main_results", runs, tmp_path / "figs") is None
    only_testbed = _runs(tmp_path / "other", "sokoban__ppo__none__testbed__s0")
    note = skip_without_studies("03_main_results", only_testbed, tmp_path / "figs", params=tmp_path / "absent.yaml")
    assert note is not None and "`main` study" in note.data and "testbed" not in note.data


def test_a_missing_study_returns_the_note_and_writes_the_outputs(tmp_path):
    runs = _runs(tmp_path / "runs", "frozenlake__grpo__none__main__s0")
    note = skip_without_studies("05_stochasticity", runs, tmp_path / "figs", params=tmp_path / "absent.yaml")
    assert note is not None and "`slip` study" in note.data
    assert json.loads(json.dumps(note.data))  # a plain string
    assert (tmp_path / "figs" / "fig_stochasticity.png").exists()
    assert read_claims(tmp_path / "figs" / "claims_stochasticity.csv")[0].verdict == "untested"


SAVED = r'save_(?:figure|table)\([^"]*"([a-z0-9_]+)"'
"""A ``save_figure`` / ``save_table`` call's literal output name."""


@pytest.mark.parametrize("notebook", list(NOTEBOOK_STUDIES))
def test_every_notebook_checks_its_studies_before_it_reads_a_run(notebook):
    """The check names the notebook itself, precedes every loader call, and every output written after it is in
    RUN_ARTIFACTS (so the placeholders are exactly what the skipped cells would have written)."""
    import re

    import nbformat

    from tests.repro.dvcyaml import REPO
    from tests.repro.test_notebook_stages import studies_loaded

    book = nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", as_version=4)
    code = [c.source for c in book.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    checks = [i for i, source in enumerate(code) if f'skip_without_studies("{notebook}", runs_root, fig_dir)' in source]
    assert len(checks) == 1, f"{notebook}: one study check, with the notebook's own name"
    before, after = "\n".join(code[:checks[0]]), "\n".join(code[checks[0]:])
    assert studies_loaded(before) == set()
    assert set(re.findall(SAVED, after)) == set(RUN_ARTIFACTS[notebook])
    assert not set(re.findall(SAVED, before)) & set(RUN_ARTIFACTS[notebook])


@pytest.mark.slow
def test_every_notebook_runs_without_runs_and_writes_its_declared_outputs(tmp_path):
    """Papermill on an empty ``runs_root`` in a copy of the repository without the results bundle: each notebook shows
    the note, writes every output its DVC stage declares (placeholders) and ends without an error; the merged claims
    are all untested."""
    import papermill

    from ragen2.repro.claims import CLAIM_IDS, merge_claims
    from ragen2.repro.kernel_client import SlicedPollKernelManager
    from ragen2.repro.profiles import build
    from tests.repro.clones import clone_without_runs
    from tests.repro.dvcyaml import paths, resolved

    stages, smoke = resolved()["stages"], build("smoke")
    # neither runs nor bundle (the repository's own bundle would be read instead)
    clone = clone_without_runs(tmp_path / "clone", bundle=False)
    (tmp_path / "runs").mkdir()
    for notebook in NOTEBOOK_STUDIES:
        params = {"runs_root": str(tmp_path / "runs"), "fig_dir": str(tmp_path / "paper_figures"),
                  **smoke.notebooks[parameters_key(notebook)]}
        out = tmp_path / f"{notebook}.ipynb"
        papermill.execute_notebook(str(clone / "notebooks" / f"{notebook}.ipynb"), str(out), parameters=params,
                                   kernel_name="python3", cwd=str(clone), progress_bar=False, log_output=False,
                                   kernel_manager_class=SlicedPollKernelManager)
        assert "Study missing." in out.read_text(), notebook
        for path in paths(stages[f"nb_{notebook}"]["outs"]):
            if path.startswith("paper_figures/"):
                assert (tmp_path / path).is_file(), path
    merged = merge_claims(tmp_path / "paper_figures", require_all=True)
    assert [c.claim for c in merged.rows] == list(CLAIM_IDS)
    assert {c.verdict for c in merged.rows} == {"untested"}


def test_without_a_slip_study_c5_reads_whether_the_pipelines_episodes_let_a_slip_be_corrected(tmp_path):
    """The CPU profile cut the slip study and runs one-turn FrozenLake: C5's precondition is measured on its runs
    (unmet), so C5's evidence names it rather than only the missing study."""
    runs = _runs(tmp_path / "runs", "frozenlake__grpo__none__main__s0", "frozenlake__grpo__topp0p9__main__s0")
    for rid in ("frozenlake__grpo__none__main__s0", "frozenlake__grpo__topp0p9__main__s0"):
        (runs / rid / "config.json").write_text(json.dumps({"env": {"name": "frozenlake"}, "rollout": {"max_turns": 1},
                                                            "trainer": {"algo": "grpo"}}))
    note = skip_without_studies("05_stochasticity", runs, tmp_path / "figs")
    assert note is not None
    (pre,) = read_preconditions(tmp_path / "figs" / "preconditions_stochasticity.csv")
    assert (pre.precondition, pre.held, pre.value) == ("a slip can be corrected", False, 1.0)
    assert pre.measured == "1 turn(s) per episode over 2 runs of this pipeline (no slip study)"
    (claim,) = read_claims(tmp_path / "figs" / "claims_stochasticity.csv")
    assert claim.verdict == "untested"
    assert claim.evidence.startswith("precondition unmet: a slip can be corrected (1 turn(s) per episode")
    assert "|| the test alone: untested: not tested: **Study missing.**" in claim.evidence
