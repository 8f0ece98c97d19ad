"""The paper notebooks: committed clean (no outputs, a parameters cell, no def/class); the smoke pipeline runs."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
ALL_NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXPECTED = ["01_template_collapse", "02_snr_mechanism", "03_main_results", "04_rv_quartiles", "05_stochasticity",
            "06_diagnostics", "07_training_dynamics", "08_interventions"]
"""The paper's notebooks, executed by dvc.yaml; 09_regime_map, 10_multiturn_curves, 11_learning_screen and 12_decline
have pipelines of their own (regime_map/dvc.yaml, curves/dvc.yaml, screen/dvc.yaml, decline/dvc.yaml)."""
NOTEBOOKS = [p for p in ALL_NOTEBOOKS if p.stem in EXPECTED]
CACHE_READERS = {"01_template_collapse", "03_main_results", "04_rv_quartiles", "07_training_dynamics", "09_regime_map",
                 "10_multiturn_curves", "11_learning_screen"}
"""Notebooks that read the warm-start cache (they take a ``cache_dir`` parameter): 03, 10 and 11 tabulate the warm
starts, 01, 04, 07 and 09 roll policies out."""
NO_CLAIMS = {"01_template_collapse", "09_regime_map", "10_multiturn_curves", "11_learning_screen", "12_decline"}
"""Notebooks that write no claims file for claims.csv (09 and 11 are screens, 10 draws curves; 12's verdicts are a
second reading, a table of its own beside claims.csv)."""
OWN_PIPELINES = {"09_regime_map": "regime_map/dvc.yaml", "10_multiturn_curves": "curves/dvc.yaml",
                 "11_learning_screen": "screen/dvc.yaml", "12_decline": "decline/dvc.yaml"}


def test_the_paper_notebooks_and_the_own_pipelines_notebooks_exist():
    assert [p.stem for p in ALL_NOTEBOOKS] == [*EXPECTED, *OWN_PIPELINES]


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean(path):
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    assert book.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in book.cells if c.cell_type == "code"]
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: cell with outputs"
    assert book.cells[0].cell_type == "markdown", "narrative first"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0] is code[0], "the first code cell, and only it, is tagged `parameters`"
    for stmt in ast.parse(tagged[0].source).body:  # only literal assignments
        assert isinstance(stmt, ast.Assign), ast.dump(stmt)
        ast.literal_eval(stmt.value)
    names = {t.id for s in ast.parse(tagged[0].source).body for t in s.targets}
    assert {"runs_root", "fig_dir", "smoke"} <= names
    assert ("cache_dir" in names) == (path.stem in CACHE_READERS)
    for cell in code:
        for node in ast.walk(ast.parse(cell.source)):
            assert not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)), \
                f"{path.name}: define helpers in ragen2, not in the notebook"
    source = "\n".join(c.source for c in code)
    assert ("write_claims(" in source) == (path.stem not in NO_CLAIMS)
    assert "save_figure(" in source


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_imports_only_what_it_uses(path):
    tree = ast.parse("\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert imported <= used, f"{path.name} imports {sorted(imported - used)} without using them"


def test_dvc_yaml_declares_every_notebook_and_its_figures():
    import re

    from tests.repro.dvcyaml import paths, resolved

    stages = resolved()["stages"]
    for path in NOTEBOOKS:
        stage = stages[f"nb_{path.stem}"]
        assert f"notebooks/{path.stem}.ipynb" in stage["deps"]
        outs = paths(stage["outs"])
        assert f"data/executed/{path.stem}.ipynb" in outs
        source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        for name in set(re.findall(r'save_(?:figure|table)\([^"]*"([a-z0-9_]+)"', source)):
            assert any(o.startswith(f"paper_figures/{name}.") for o in outs), f"{path.stem}: {name} not an out"


@pytest.mark.parametrize("notebook", OWN_PIPELINES)
def test_own_pipeline_declares_its_notebook_and_its_figures(notebook):
    import re

    import yaml

    stage = yaml.safe_load((REPO / OWN_PIPELINES[notebook]).read_text())["stages"]["notebook"]
    assert f"notebooks/{notebook}.ipynb" in stage["deps"] and notebook in stage["cmd"]
    outs = [o if isinstance(o, str) else next(iter(o)) for o in stage["outs"]]
    source = "\n".join(c.source for c in nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", as_version=4).cells
                       if c.cell_type == "code")
    names = set(re.findall(r'save_(?:figure|table)\([^"]*"([a-z0-9_]+)"', source))
    assert names and {o.split("/")[1].rsplit(".", 1)[0] for o in outs if o.startswith("paper_figures/")} == names


def _train_runs(profile, runs_root: Path, cache: Path, keep=lambda rid: True) -> None:
    """Train ``profile``'s runs that ``keep`` selects into ``runs_root`` (warm starts cached in ``cache``), on one
    torch thread, from scratch."""
    import torch

    from ragen2.trainer.loop import train
    from ragen2.warmstart import initial_policy

    torch.set_num_threads(1)
    for rid in profile.runs:
        if keep(rid):
            cfg = profile.config(rid)
            train(cfg, runs_root / rid, initial_policy(cfg, cache), resume=False, progress=False)


@pytest.fixture(scope="module")
def smoke_repo(tmp_path_factory):
    """A scratch repository (dvc.yaml, notebooks/) whose data/runs and data/cache hold the smoke profile's runs."""
    import shutil

    from ragen2.repro.profiles import build

    root = tmp_path_factory.mktemp("smoke_repo")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    profile = build("smoke")
    t0 = time.perf_counter()
    _train_runs(profile, root / "data" / "runs", root / "data" / "cache")
    print(f"smoke: {len(profile.runs)} runs trained in {time.perf_counter() - t0:.0f} s")
    return root, profile


def _execute(path: Path, out: Path, cwd: Path, parameters: dict) -> None:
    import papermill

    from ragen2.repro.kernel_client import SlicedPollKernelManager

    papermill.execute_notebook(str(path), str(out), parameters=parameters, kernel_name="python3", cwd=str(cwd),
                               progress_bar=False, log_output=False, kernel_manager_class=SlicedPollKernelManager)


@pytest.mark.slow
def test_smoke_runs_execute_every_notebook(smoke_repo, tmp_path):
    """Every notebook as the pipeline runs it: papermill in the repository root, explicit paths; then the claims."""
    from ragen2.repro.claims import CLAIM_IDS, merge_claims

    root, profile = smoke_repo
    fig_dir = tmp_path / "figures"
    for path in NOTEBOOKS:
        params = {"runs_root": str(root / "data" / "runs"), "fig_dir": str(fig_dir), **profile.notebooks[path.stem[3:]]}
        if path.stem in CACHE_READERS:
            params["cache_dir"] = str(root / "data" / "cache")
        _execute(path, tmp_path / path.name, REPO, params)
    merged = merge_claims(fig_dir, require_all=True)
    assert [c.claim for c in merged.rows] == list(CLAIM_IDS)
    assert (fig_dir / "fig_four_regimes_toy.png").exists() and (fig_dir / "fig_reward_heatmaps.pdf").exists()
    # the claims stage's pooled verdicts load what the notebooks loaded: here the same runs as both realizations
    from ragen2.repro.pooled import pooled_verdicts
    from ragen2.repro.verdicts import Verdict, power_table

    runs = root / "data" / "runs"
    verdicts = pooled_verdicts((runs, runs), (fig_dir, fig_dir))
    assert all(isinstance(verdicts[c], Verdict) for c in CLAIM_IDS), verdicts
    assert set(power_table(verdicts)["claim"]) == {"C1", "C2", "C3", "C4", "C5", "C6", "C7"}


@pytest.mark.slow
def test_every_notebook_runs_from_its_own_folder_as_jupyterlab_starts_it(smoke_repo, tmp_path):
    """The kernel in notebooks/ with the notebook's own path defaults: the runs and the warm start are found from
    the repository root, and the figures go to the scratch folder, never to paper_figures/."""
    from ragen2.repro.paths import SCRATCH_FIGURES

    root, profile = smoke_repo
    for path in NOTEBOOKS:
        params = {k: v for k, v in profile.notebooks[path.stem[3:]].items() if k not in ("runs_root", "fig_dir", "cache_dir")}
        _execute(root / "notebooks" / path.name, tmp_path / path.name, root / "notebooks", params)
    scratch = root / SCRATCH_FIGURES
    assert (scratch / "fig_four_regimes_toy.png").exists() and (scratch / "claims_training_dynamics.csv").exists()
    assert not (root / "paper_figures").exists() and not (root / "notebooks" / "data").exists()


@pytest.mark.slow
def test_regime_map_notebook_runs_on_smoke_runs(tmp_path):
    """Notebook 09 as its pipeline runs it, on two opposite cells of the smoke regime map (every factor differs) and
    the confirming runs (three warm starts): the map's tables and figures are written."""
    import pandas as pd

    from ragen2.repro import regime_map as rm

    profile = rm.build(smoke=True)
    runs_root, cache = tmp_path / "runs", tmp_path / "cache"
    _train_runs(profile, runs_root, cache,
                keep=lambda rid: "__map0__" in rid or "__map7__" in rid or f"__{rm.CONFIRM_STUDY}" in rid)
    fig_dir = tmp_path / "figures"
    params = {**profile.notebooks["regime_map"], "runs_root": str(runs_root), "fig_dir": str(fig_dir),
              "cache_dir": str(cache)}
    _execute(REPO / "notebooks" / "09_regime_map.ipynb", tmp_path / "09.ipynb", REPO, params)
    table = pd.read_csv(fig_dir / "table_regime_map.csv")
    assert sorted(set(table["cell"])) == [0, 7] and sorted(set(table["horizon"])) == list(rm.HORIZONS)
    texts = pd.read_csv(fig_dir / "table_regime_texts.csv")
    assert set(texts["phase"]) == {"start", "mid", "end"} and texts["run_id"].nunique() == 2
    confirm = pd.read_csv(fig_dir / "table_regime_confirm.csv")
    assert set(confirm["seed_set"]) == set(rm.CONFIRM_SEED_SETS) and set(confirm["cell"]) == {rm.CONFIRM_CELL}
    for name in ("fig_regime_map", "fig_regime_trajectories", "fig_regime_length", "fig_regime_confirm"):
        assert (fig_dir / f"{name}.png").is_file() and (fig_dir / f"{name}.md").is_file()


@pytest.mark.slow
def test_multiturn_curves_notebook_runs_on_smoke_runs(tmp_path):
    """Notebook 10 as its pipeline runs it, on the smoke profile's SearchQA and WebShop runs (one seed per filter):
    its tables list both environments and its figures are written."""
    import pandas as pd

    from ragen2.repro import multiturn_curves as mc

    profile = mc.build(smoke=True)
    runs_root, cache = tmp_path / "runs", tmp_path / "cache"
    _train_runs(profile, runs_root, cache)
    fig_dir = tmp_path / "figures"
    params = {**profile.notebooks["multiturn_curves"], "runs_root": str(runs_root), "fig_dir": str(fig_dir),
              "cache_dir": str(cache)}
    _execute(REPO / "notebooks" / "10_multiturn_curves.ipynb", tmp_path / "10.ipynb", REPO, params)
    assert len(pd.read_csv(fig_dir / "table_multiturn_warm_starts.csv")) == len(mc.CURVE_ENVS)
    gains = pd.read_csv(fig_dir / "table_multiturn_main.csv")
    assert sorted(gains["env"]) == ["SearchQA", "WebShop"] and (gains["top_k_minus_none_n"] == 1).all()
    for name in ("fig_success_curves_multiturn", "fig_output_length_multiturn"):
        assert (fig_dir / f"{name}.png").is_file() and "SMOKE RUN" in (fig_dir / f"{name}.md").read_text()


@pytest.mark.slow
def test_learning_screen_notebook_runs_on_smoke_runs(tmp_path):
    """Notebook 11 as its pipeline runs it, on the smoke profile's screen runs scored by the evaluate command (8 seeds):
    its tables hold one row per run and per cell, and its figures are written."""
    import pandas as pd

    from ragen2.__main__ import main
    from ragen2.repro import learning_screen as ls

    profile = ls.build(smoke=True)
    runs_root, cache, evals = tmp_path / "runs", tmp_path / "cache", tmp_path / "evals"
    _train_runs(profile, runs_root, cache)
    for rid in profile.runs:
        for name, checkpoint in (("initial", "initial"), ("midpoint", "1"), ("final", "latest")):
            assert main(["evaluate", str(runs_root / rid), "--checkpoint", checkpoint, "--episodes", "8",
                         "--sampling-seeds", "1", "--cache-dir", str(cache), "--threads", "1",
                         "--out", str(evals / rid / f"{name}.json")]) == 0
    fig_dir = tmp_path / "figures"
    params = {**profile.notebooks["learning_screen"], "runs_root": str(runs_root), "fig_dir": str(fig_dir),
              "cache_dir": str(cache), "evals_root": str(evals)}
    _execute(REPO / "notebooks" / "11_learning_screen.ipynb", tmp_path / "11.ipynb", REPO, params)
    table = pd.read_csv(fig_dir / "table_learning_screen.csv")
    assert sorted(table["run"]) == sorted(profile.runs) and (table["episodes"] == 8).all()
    assert len(pd.read_csv(fig_dir / "table_learning_regimes.csv")) == len(ls.CELLS) * len(ls.ALGOS)
    for name in ("fig_learning_screen", "fig_learning_screen_curves"):
        assert (fig_dir / f"{name}.png").is_file() and "SMOKE RUN" in (fig_dir / f"{name}.md").read_text()


def test_the_decline_notebook_reads_nothing_before_its_study_is_finished(tmp_path):
    """Notebook 12 on a bundle that holds only some of the study's runs (here none): one note saying how many are in,
    every output a placeholder carrying it, no table computed (docs/preregistrations.md §7.19)."""
    from ragen2.repro import decline_study as ds

    fig_dir = tmp_path / "figures"
    (tmp_path / "runs").mkdir()
    _execute(REPO / "notebooks" / "12_decline.ipynb", tmp_path / "12.ipynb", REPO,
             {"runs_root": str(tmp_path / "runs"), "fig_dir": str(fig_dir)})
    executed = nbformat.read(tmp_path / "12.ipynb", as_version=4)
    shown = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert len(shown) == 1 and "0 of its 64 runs" in shown[0]["data"]["text/markdown"]
    assert "GRPO 0/32, PPO 0/32" in shown[0]["data"]["text/markdown"]
    for name in ds.PIPELINE.outputs:
        suffix = ".png" if name.startswith("fig_") else ".csv"
        assert (fig_dir / f"{name}{suffix}").is_file()
        assert "not finished" in (fig_dir / f"{name}.md").read_text()


@pytest.mark.slow
def test_decline_notebook_runs_on_smoke_runs(tmp_path):
    """Notebook 12 as its pipeline runs it, on the smoke profile's four runs bundled one by one: its tables hold every
    run, contrast and claim, its figures are written."""
    import pandas as pd

    from ragen2.repro import bundle
    from ragen2.repro import decline_study as ds

    profile = ds.build(smoke=True)
    runs_root, cache, packed = tmp_path / "runs", tmp_path / "cache", tmp_path / "bundle"
    _train_runs(profile, runs_root, cache)
    for rid in profile.runs:
        assert bundle.main(["--run", str(runs_root / rid), "--out-dir", str(packed)]) == 0
    assert ds.unfinished_note(packed / "runs", smoke=True) is None
    fig_dir = tmp_path / "figures"
    _execute(REPO / "notebooks" / "12_decline.ipynb", tmp_path / "12.ipynb", REPO,
             {**profile.notebooks["decline"], "runs_root": str(packed / "runs"), "fig_dir": str(fig_dir)})
    assert sorted(pd.read_csv(fig_dir / "table_decline_runs.csv")["run_id"]) == sorted(profile.runs)
    claims = pd.read_csv(fig_dir / "table_decline_claims.csv")
    assert set(claims["claim"]) == {"C1", "C4", "C6", "C7"}
    assert set(pd.read_csv(fig_dir / "table_decline_contrasts.csv")["value"]) <= {"final", "peak", "drop"}
    for name in ("fig_decline_paths", "fig_decline_drops"):
        assert (fig_dir / f"{name}.png").is_file() and "SMOKE RUN" in (fig_dir / f"{name}.md").read_text()
