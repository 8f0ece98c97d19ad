"""Tests for the study descriptors (ragen2/repro/study_catalog.py): everything that names studies reads them."""

from __future__ import annotations

import dataclasses

import pytest

from ragen2.repro import missing, notebook_stages, profiles, studies, study_catalog, verdicts
from ragen2.repro.run_ids import parse_run_id
from ragen2.repro.study_catalog import CATALOG, NO_FILTER, Study


def _demo_runs(sizes, add):
    add("frozenlake", "grpo", NO_FILTER, "demo0p5", 2, {"trainer": {"steps": sizes.aux_steps}})


DEMO = Study("demo", "a demonstration sweep", _demo_runs, claims=("C7",), notebooks=("08_interventions",),
             required_by=("08_interventions",), swept_column="trainer.lr", swept_label="learning rate")


def test_a_study_is_added_by_one_descriptor():
    """One more Study in the catalog gives its runs in the grid (after the others, with the profile's settings), and
    the notebook, claim, missing-note and sweep lookups all name it."""
    catalog = (*CATALOG, DEMO)
    sizes = profiles.SIZES["cpu"]
    before = study_catalog.grid(sizes, *profiles.PROFILE_SETTINGS["cpu"])
    after = study_catalog.grid(sizes, *profiles.PROFILE_SETTINGS["cpu"], catalog=catalog)
    new = [rid for rid in after if rid not in before]
    assert list(after)[: len(before)] == list(before)
    assert new == ["frozenlake__grpo__none__demo0p5__s0", "frozenlake__grpo__none__demo0p5__s1"]
    assert after[new[1]]["seed"] == 1 and after[new[1]]["trainer"]["steps"] == sizes.aux_steps
    assert "demo" in study_catalog.notebook_studies(catalog)["08_interventions"]
    assert "demo" in study_catalog.required_studies(catalog)["08_interventions"]
    assert study_catalog.claim_studies("C7", catalog)[-1] == "demo"
    assert study_catalog.labels(catalog)["demo"] == "a demonstration sweep"
    assert study_catalog.swept_columns(catalog)["demo"] == "trainer.lr"
    assert study_catalog.sweep_labels(catalog)["demo"] == "learning rate"


def test_a_builder_cannot_tag_runs_with_another_study():
    wrong = dataclasses.replace(DEMO, name="other")
    with pytest.raises(ValueError, match="'other' defines run 'frozenlake__grpo__none__demo0p5__s0'"):
        study_catalog.grid(profiles.SIZES["cpu"], catalog=(wrong,))


def test_a_run_defined_twice_is_an_error():
    twice = dataclasses.replace(DEMO, runs=lambda sizes, add: [_demo_runs(sizes, add) for _ in range(2)])
    with pytest.raises(ValueError, match="defined twice"):
        study_catalog.grid(profiles.SIZES["cpu"], catalog=(twice,))


@pytest.mark.parametrize("name", profiles.PROFILE_NAMES)
def test_every_run_of_every_profile_belongs_to_a_catalogued_study(name):
    assert {parse_run_id(rid)["study"] for rid in profiles.profile_run_ids(name)} <= set(study_catalog.names())


def test_the_notebook_that_tests_a_claim_reads_exactly_the_claims_studies():
    """...and the studies it shows beside the claim as context (03: the update-count control)."""
    for notebook, claim in notebook_stages.NOTEBOOK_CLAIMS.items():
        context = set(study_catalog.context_studies(notebook, claim))
        assert set(notebook_stages.NOTEBOOK_STUDIES[notebook]) == set(study_catalog.claim_studies(claim)) | context, \
            notebook
    assert study_catalog.context_studies("03_main_results", "C1") == ("fixedmb",)


def test_descriptors_are_consistent():
    """Names unique; a study is required only by notebooks that read it; sweep columns come with their label; every
    paper notebook reads some study; the profile's derived tuples are the catalog's."""
    assert len(set(study_catalog.names())) == len(CATALOG)
    for study in CATALOG:
        assert set(study.required_by) <= set(study.notebooks), study.name
        assert set(study.notebooks) <= set(study_catalog.ALL_NOTEBOOKS), study.name
        assert (study.swept_column is None) == (study.swept_label is None), study.name
    assert tuple(notebook_stages.NOTEBOOK_STUDIES) == study_catalog.ALL_NOTEBOOKS
    assert profiles.STUDIES == study_catalog.names()
    assert set(profiles.SWEEP_STUDIES) == set(studies.SWEPT_COLUMNS) == set(verdicts.C7_SWEEPS)
    assert missing.STUDY_LABELS == study_catalog.labels()
