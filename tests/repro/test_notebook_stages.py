"""The notebook stages of dvc.yaml: one definition, inputs per notebook from its studies, parameters, plots."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest

from ragen2.repro import notebook_stages, verdicts
from ragen2.repro.notebook_stages import (
    NOTEBOOK_STUDIES,
    OWN_PIPELINE_NOTEBOOKS,
    input_manifests,
    notebook_parameters,
    parameters_key,
)
from ragen2.repro.profiles import PROFILE_NAMES, build
from ragen2.repro.studies import MECHANISM_STUDIES
from tests.repro.dvcyaml import REPO, paths, resolved

LOADERS = {"load_study": 1, "load_study_grad_tables": 1}
"""Functions that load runs by study -> the position of their ``studies`` argument."""
ALL_RUNS_LOADERS = ("load_runs", "load_grad_tables", "find_run_dirs", "read_runs")
"""Functions that read every run under a root (a notebook using one would read runs its stage does not declare)."""


def studies_loaded(source: str) -> set[str]:
    """The studies a notebook's code loads (literal arguments of :data:`LOADERS`, or the constants of
    :mod:`ragen2.repro.verdicts` they name; ``slip_runs``: slip and main)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        name = node.func.id
        assert name not in ALL_RUNS_LOADERS, f"{name}() reads every run under runs_root"
        if name == "slip_runs":
            found |= {"slip", "main"}
        elif name in LOADERS:
            arg = node.args[LOADERS[name]]
            # a study list is a literal, one of the claims' constants (shared with ragen2.repro.pooled), or the
            # study mechanism_study() picks (one of MECHANISM_STUDIES)
            if isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "mechanism_study":
                value = MECHANISM_STUDIES
            else:
                value = getattr(verdicts, arg.id) if isinstance(arg, ast.Name) else ast.literal_eval(arg)
            found |= {value} if isinstance(value, str) else set(value)
    return found


@pytest.mark.parametrize("notebook", list(NOTEBOOK_STUDIES))
def test_declared_studies_are_the_ones_the_notebook_loads(notebook):
    book = nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", as_version=4)
    source = "\n".join(c.source for c in book.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", []))
    assert studies_loaded(source) == set(NOTEBOOK_STUDIES[notebook])


def test_every_notebook_has_its_parameters_in_every_profile(tmp_path):
    assert sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")) == sorted(
        [*NOTEBOOK_STUDIES, *OWN_PIPELINE_NOTEBOOKS])
    for name in PROFILE_NAMES:
        profile = build(name)
        assert {parameters_key(nb) for nb in NOTEBOOK_STUDIES} == set(profile.notebooks)
        (tmp_path / f"{name}.yaml").write_text(profile.yaml())
        assert notebook_parameters("04_rv_quartiles", tmp_path / f"{name}.yaml") == profile.notebooks["rv_quartiles"]
    with pytest.raises(ValueError, match="unknown notebook"):
        parameters_key("09_nothing")


def test_run_notebook_passes_the_runs_the_figures_and_the_profiles_parameters(tmp_path, monkeypatch):
    import papermill

    calls = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda src, out, **kw: calls.append((src, out, kw["parameters"])))
    params = tmp_path / "params.yaml"
    params.write_text(build("smoke").yaml())
    monkeypatch.chdir(tmp_path)
    out = notebook_stages.run_notebook("01_template_collapse", params=params, notebooks_dir=REPO / "notebooks")
    assert out == Path("data/executed/01_template_collapse.ipynb") and Path("paper_figures").is_dir()
    src, dest, parameters = calls[0]
    assert src == str(REPO / "notebooks" / "01_template_collapse.ipynb") and dest == str(out)
    assert parameters == {"runs_root": "data/runs", "fig_dir": "paper_figures", "smoke": True, "num_samples": 8}


def test_run_notebook_limits_each_cell_and_executes_once_more_after_a_timeout(tmp_path, monkeypatch, capsys):
    import papermill
    from nbclient.exceptions import DeadKernelError

    calls = []

    def stalls_once(src, out, **kw):
        calls.append(kw["execution_timeout"])
        if len(calls) == 1:
            raise TimeoutError("Cell execution timed out")

    monkeypatch.setattr(papermill, "execute_notebook", stalls_once)
    params = tmp_path / "params.yaml"
    params.write_text(build("smoke").yaml())
    monkeypatch.chdir(tmp_path)
    out = notebook_stages.run_notebook("01_template_collapse", params=params, notebooks_dir=REPO / "notebooks")
    assert out == Path("data/executed/01_template_collapse.ipynb")
    assert calls == [notebook_stages.CELL_TIMEOUT_S] * 2 and "executing it again" in capsys.readouterr().err

    def dies_once(src, out, **kw):
        calls.append(kw["execution_timeout"])
        if len(calls) == 1:
            raise DeadKernelError("Kernel died")

    monkeypatch.setattr(papermill, "execute_notebook", dies_once)
    calls.clear()
    assert notebook_stages.run_notebook("01_template_collapse", params=params, notebooks_dir=REPO / "notebooks") == out
    assert len(calls) == 2 and "DeadKernelError" in capsys.readouterr().err

    def always_stalls(src, out, **kw):
        calls.append(kw["execution_timeout"])
        raise TimeoutError("Cell execution timed out")

    monkeypatch.setattr(papermill, "execute_notebook", always_stalls)
    calls.clear()
    with pytest.raises(TimeoutError, match="timed out"):
        notebook_stages.run_notebook("01_template_collapse", params=params, notebooks_dir=REPO / "notebooks")
    assert len(calls) == notebook_stages.EXECUTION_ATTEMPTS


def test_parameter_cells_get_the_short_limit_and_every_other_cell_the_long_one(tmp_path, monkeypatch):
    import nbformat
    import papermill

    seen = {}
    monkeypatch.setattr(papermill, "execute_notebook", lambda src, out, **kw: seen.update(kw))
    params = tmp_path / "params.yaml"
    params.write_text(build("smoke").yaml())
    monkeypatch.chdir(tmp_path)
    notebook_stages.run_notebook("01_template_collapse", params=params, notebooks_dir=REPO / "notebooks")
    limit = seen["timeout_func"]
    nb = nbformat.read(REPO / "notebooks" / "01_template_collapse.ipynb", as_version=4)
    limits = [limit(cell) for cell in nb.cells if cell.cell_type == "code"]
    assert limits[0] == notebook_stages.PARAMETER_CELL_TIMEOUT_S < notebook_stages.CELL_TIMEOUT_S
    assert set(limits[1:]) == {notebook_stages.CELL_TIMEOUT_S}
    injected = nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["injected-parameters"]})
    assert limit(injected) == notebook_stages.PARAMETER_CELL_TIMEOUT_S


def _run(root: Path, run_id: str, content: str = "{}") -> Path:
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.json").write_text(content)
    return run


def test_input_manifests_change_only_for_the_notebooks_that_read_a_changed_run(tmp_path):
    assert all(m["runs"] == {} for m in input_manifests(tmp_path / "none").values())  # nothing trained yet
    _run(tmp_path, "frozenlake__grpo__none__main__s0")
    slip = _run(tmp_path, "frozenlake__grpo__none__slip0p2__s0")
    _run(tmp_path, "frozenlake__grpo__none__mech0p02__s0")
    before = input_manifests(tmp_path)
    assert before["05_stochasticity"]["studies"] == ["main", "slip"]
    assert set(before["05_stochasticity"]["runs"]) == {"frozenlake__grpo__none__main__s0",
                                                       "frozenlake__grpo__none__slip0p2__s0"}
    assert set(before["01_template_collapse"]["runs"]) == {"frozenlake__grpo__none__mech0p02__s0",
                                                           "frozenlake__grpo__none__main__s0"}
    (slip / "metrics.jsonl").write_text('{"step": 0}\n')  # the slip run is retrained
    after = input_manifests(tmp_path)
    changed = {nb for nb in NOTEBOOK_STUDIES if after[nb] != before[nb]}
    assert changed == {nb for nb, studies in NOTEBOOK_STUDIES.items() if "slip" in studies}
    assert changed == {"05_stochasticity", "06_diagnostics"}
    written = notebook_stages.write_input_manifests(tmp_path, tmp_path / "inputs")
    assert [p.stem for p in written] == list(NOTEBOOK_STUDIES)
    assert json.loads((tmp_path / "inputs" / "05_stochasticity.json").read_text()) == after["05_stochasticity"]


def test_dvc_yaml_defines_the_notebook_stages_once_and_each_depends_on_its_own_inputs():
    stages = resolved()["stages"]
    inputs = stages["inputs"]
    assert "data/runs" in inputs["deps"]
    assert paths(inputs["outs"]) == [f"data/inputs/{nb}.json" for nb in NOTEBOOK_STUDIES]
    for nb in NOTEBOOK_STUDIES:
        stage = stages[f"nb_{nb}"]
        assert stage["cmd"] == (f"python -m ragen2.repro.notebook_stages run {nb} --runs-root data/runs "
                                "--fig-dir paper_figures --write-products")
        products = [o for o in paths(stage["outs"]) if o.startswith("data/bundle/")]
        assert products == ([f"data/bundle/products/{nb}"] if nb in notebook_stages.PRODUCT_NOTEBOOKS else []), nb
        assert f"data/inputs/{nb}.json" in stage["deps"] and "data/runs" not in stage["deps"]
        assert stage["params"] == [f"pipeline.notebooks.{parameters_key(nb)}"]
        assert all(o == f"data/executed/{nb}.ipynb" or o[next(iter(o))] == {"cache": False} for o in stage["outs"])
    first = stages["nb_01_template_collapse"]
    assert all(stages[f"nb_{nb}"]["deps"][2:] == first["deps"][2:] for nb in NOTEBOOK_STUDIES)  # shared code deps
    text = (REPO / "dvc.yaml").read_text()
    # one definition for the eight notebook stages, one for the realization check's re-runs (nb_realization@)
    assert text.count("python -m ragen2.repro.notebook_stages run") == 2 and text.count("    <<: *notebook\n") == 7


def test_plots_draw_metrics_the_trainer_logs_for_runs_every_profile_trains():
    """The curves are the plot_data stage's images, drawn from its copies of two runs' dvclive files (committed, so a
    clone without runs shows them, offline); the stage copies exactly those files, of runs every profile trains."""
    from ragen2.repro.plot_data import CURVES, PLOTS

    stages, plots = resolved()["stages"], resolved()["plots"]
    curves = [p for p in plots if isinstance(p, str) and p.startswith("paper_figures/plots/")]
    assert curves == [f"paper_figures/plots/{name}.png" for name in PLOTS]
    assert all(isinstance(p, str) for p in plots)  # images only: no plot that needs JavaScript from the web
    assert sorted(curve for curve, _, _ in PLOTS.values()) == sorted(CURVES)
    copy = stages["plot_data"]
    assert copy["outs"] == [{"paper_figures/plots": {"cache": False}}]
    sources = dict(item.split("=", 1) for item in copy["cmd"].split()[-2:])
    run_ids = set()
    for metrics_dir in sources.values():
        for curve in CURVES:
            assert f"{metrics_dir}/{curve}" in copy["deps"]
        run_id, rest = metrics_dir.removeprefix("data/runs/").split("/", 1)
        assert rest == "dvclive/plots/metrics"
        run_ids.add(run_id)
    assert run_ids == {"frozenlake__grpo__none__main__s0", "frozenlake__grpo__topp0p9__main__s0"}
    for name in PROFILE_NAMES:
        assert run_ids <= set(build(name).runs), name


def test_the_product_notebooks_are_those_with_the_parameters_to_keep_their_tables():
    """--write-products reaches exactly the notebooks that declare write_products and products_dir (papermill would
    inject it into any other as an unknown name)."""
    declaring = set()
    for nb in sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        book = nbformat.read(REPO / "notebooks" / f"{nb}.ipynb", as_version=4)
        params = next(c for c in book.cells if "parameters" in c.metadata.get("tags", []))
        if "write_products = False" in params.source:
            assert f'products_dir = "data/bundle/products/{nb}"' in params.source, nb
            declaring.add(nb)
    assert declaring == set(notebook_stages.PRODUCT_NOTEBOOKS)


def test_plots_show_every_committed_figure_as_an_image():
    """`dvc plots show` lists each committed figure (its PNG: no network needed to show it) after the curves, and no
    other."""
    images = [p for p in resolved()["plots"] if isinstance(p, str) and not p.startswith("paper_figures/plots/")]
    assert images == sorted(p.relative_to(REPO).as_posix() for p in (REPO / "paper_figures").glob("fig_*.png"))
