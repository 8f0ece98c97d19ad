"""The studies with a pipeline of their own, beside the paper's ``dvc.yaml``: where each keeps its files, and the one
way their params files are written.

A study that does not fit ``make repro``'s budget gets a folder (``regime_map/``, ``curves/``, ``screen/``) holding its
``dvc.yaml``, its generated ``params.yaml`` and its ``dvc.lock``; its warm starts and runs live under
``data/<folder>/``; the Makefile runs each the same way (its ``own_pipeline`` recipe). :class:`OwnPipeline` describes
one: its places, its notebook and what the notebook reads and writes. :func:`params_yaml` writes the params file of any
of them, :func:`dvc_yaml` its ``dvc.yaml`` (``python -m ragen2.repro.dvc_files`` rewrites the three; a test fails
when one differs from what its descriptor gives): warm starts, training, any stages of the pipeline's own, the
notebook, the runs' part of the results bundle (``data/bundle/<folder>/``) and the notebook's published copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragen2.repro.profiles import Profile


@dataclass(frozen=True)
class OwnPipeline:
    """One pipeline of its own: its folder, a title for the params file's header, and the module that defines it."""

    folder: str
    title: str
    module: str
    """The module to edit instead of the params file (``ragen2/repro/learning_screen.py``)."""
    about: str = ""
    """What the pipeline is, for its dvc.yaml's header."""
    make_target: str = ""
    notebook: str = ""
    """Its notebook's file stem (``11_learning_screen``); its parameters are ``pipeline.notebooks.<key>``."""
    notebook_key: str = ""
    notebook_data: tuple[str, ...] = ()
    """Folders the notebook reads beside the runs and warm starts (the screen's evaluations); bundled with the runs
    (``<bundle_dir>/<folder name>``), so the notebook runs in a clone that trained nothing."""
    notebook_code: tuple[str, ...] = ("ragen2/repro",)
    """Code the notebook's results depend on."""
    outputs: tuple[str, ...] = ()
    """The figures (``fig_*``: .png, .pdf, .md) and tables (``table_*``: .csv, .md) the notebook writes into
    ``paper_figures/`` (git-tracked)."""
    extra_stages: Callable[[OwnPipeline], dict[str, Any]] | None = field(default=None, compare=False)
    """Stages of its own between training and the notebook (the screen's evaluations)."""
    products: bool = False
    """Its notebook computes tables from checkpoints and keeps them in ``data/bundle/products/<notebook>/``
    (:data:`ragen2.repro.notebook_stages.PRODUCT_NOTEBOOKS`), a git-tracked output of its stage."""
    bundle_per_run: bool = False
    """Its bundle is written run by run (a ``bundle`` stage per run and a ``bundle_warm_start`` stage per warm start)
    and its notebook reads the bundle, not the run folders: a study trained in chunks over several sessions, each
    finished run's bundle part committed as it comes (:mod:`ragen2.repro.decline_study`)."""

    @property
    def params_path(self) -> str:
        return f"{self.folder}/params.yaml"

    @property
    def dvc_file(self) -> str:
        return f"{self.folder}/dvc.yaml"

    @property
    def runs_root(self) -> str:
        return f"data/{self.folder}/runs"

    @property
    def cache_dir(self) -> str:
        return f"data/{self.folder}/cache"

    @property
    def bundle_dir(self) -> str:
        """Its runs' part of the results bundle (:mod:`ragen2.repro.bundle`): what its notebook reads in a clone."""
        return f"data/bundle/{self.folder}"


def params(pipeline: OwnPipeline, profile: Profile, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The params file's content: ``base``, ``runs`` and ``pipeline`` (no realization check), with the pipeline's
    places and ``extra`` in ``pipeline``."""
    out = profile.params(realization=False)
    out["pipeline"].update({"runs_root": pipeline.runs_root, "cache_dir": pipeline.cache_dir,
                            "dvc_file": pipeline.dvc_file, **(extra or {})})
    return out


def params_yaml(pipeline: OwnPipeline, profile: Profile, extra: dict[str, Any] | None = None) -> str:
    """:func:`params` as YAML under a header that says how it was written and where to edit it."""
    import yaml

    header = (f"# ragen2 {pipeline.title} parameters, written by `{profile.written_by}`;"
              f" edit {pipeline.module}, not this file.\n"
              "# base: a complete ragen2.config.RunConfig (1:1); runs: run id -> overrides of base;\n"
              "# pipeline: DVC/notebook metadata that is not part of any RunConfig.\n")
    return header + yaml.safe_dump(params(pipeline, profile, extra), sort_keys=False, default_flow_style=False,
                                   width=110)


WARM_START_CODE = ("ragen2/warmstart.py", "ragen2/policy.py", "ragen2/model", "ragen2/kernels.py", "ragen2/rollout",
                   "ragen2/envs")
"""What a warm start's weights depend on."""
TRAIN_CODE = ("ragen2/trainer", "ragen2/rollout", "ragen2/policy.py", "ragen2/model", "ragen2/kernels.py",
              "ragen2/warmstart.py", "ragen2/filter.py", "ragen2/metrics", "ragen2/envs", "ragen2/config.py")
"""What a trained run depends on."""
TRACKED = {"cache": False}
"""A git-tracked output (figures, tables, the published notebook)."""


def stages(pipeline: OwnPipeline) -> dict[str, Any]:
    """The ``stages`` of ``pipeline``'s ``dvc.yaml``; every stage runs from the repository root (``wdir: ..``)."""
    params, cache = pipeline.params_path, pipeline.cache_dir
    executed = f"data/{pipeline.folder}/executed/{pipeline.notebook}.ipynb"
    out: dict[str, Any] = {
        "warmstart": {"foreach": "${pipeline.warm_starts}", "do": {
            "wdir": "..",
            "cmd": f"python -m ragen2 warmstart ${{item.run}} --params {params} --cache-dir {cache} "
                   "--expect ${item.path} --threads 1",
            "deps": list(WARM_START_CODE),
            "params": [{params: ["base", "runs.${item.run}"]}],
            "outs": ["${item.path}"]}},
        "train": {"foreach": "${pipeline.train}", "do": {
            "wdir": "..",
            "cmd": f"python -m ragen2 train ${{key}} --params {params} --cache-dir {cache} --threads 1",
            "deps": [*TRAIN_CODE, "${item.warm_start}"],
            "params": [{params: ["base", "runs.${key}"]}],
            "outs": [f"{pipeline.runs_root}/${{key}}"]}},
    }
    if pipeline.extra_stages is not None:
        out.update(pipeline.extra_stages(pipeline))
    products = [{f"data/bundle/products/{pipeline.notebook}": dict(TRACKED)}] if pipeline.products else []
    bundle_runs, bundle_warm = f"{pipeline.bundle_dir}/runs", f"{pipeline.bundle_dir}/warm_start"
    reads = ([bundle_runs, bundle_warm] if pipeline.bundle_per_run
             else [pipeline.runs_root, *pipeline.notebook_data, f"{cache}/warm_start"])
    out["notebook"] = {
        "wdir": "..",
        "cmd": f"python -m ragen2.repro.notebook_stages run {pipeline.notebook} --params {params} "
               f"--runs-root {reads[0]} --fig-dir paper_figures --executed-dir data/{pipeline.folder}/executed"
               + (" --write-products" if pipeline.products else ""),
        "deps": [f"notebooks/{pipeline.notebook}.ipynb", *reads, *pipeline.notebook_code],
        "params": [{params: [f"pipeline.notebooks.{pipeline.notebook_key}"]}],
        "outs": [executed, *({f"paper_figures/{name}{suffix}": dict(TRACKED)} for name in pipeline.outputs
                             for suffix in ((".png", ".pdf", ".md") if name.startswith("fig_") else (".csv", ".md"))),
                 *products]}
    bundle_code = ["ragen2/repro/bundle.py", "ragen2/repro/runs.py", "ragen2/repro/warm_starts.py"]
    if pipeline.bundle_per_run:
        out["bundle"] = {"foreach": "${pipeline.train}", "do": {
            "wdir": "..",
            "cmd": f"python -m ragen2.repro.bundle --run {pipeline.runs_root}/${{key}} --out-dir {pipeline.bundle_dir}",
            "deps": [*bundle_code, f"{pipeline.runs_root}/${{key}}"],
            "outs": [{f"{bundle_runs}/${{key}}": dict(TRACKED)}]}}
        out["bundle_warm_start"] = {"foreach": "${pipeline.warm_starts}", "do": {
            "wdir": "..",
            "cmd": f"python -m ragen2.repro.bundle --warm-start ${{item.path}} --out-dir {pipeline.bundle_dir}",
            "deps": [*bundle_code, "${item.path}"],
            "outs": [{f"{bundle_warm}/${{key}}": dict(TRACKED)}]}}
    else:
        out["bundle"] = {
            "wdir": "..",
            "cmd": f"python -m ragen2.repro.bundle --runs-root {pipeline.runs_root} --cache-dir {cache} "
                   f"--out-dir {pipeline.bundle_dir}" + "".join(f" --data {d}" for d in pipeline.notebook_data),
            "deps": [*bundle_code, pipeline.runs_root, f"{cache}/warm_start", *pipeline.notebook_data],
            "outs": [{f"{pipeline.bundle_dir}/{part}": dict(TRACKED)}
                     for part in ("runs", "warm_start", *(d.rsplit("/", 1)[-1] for d in pipeline.notebook_data))]}
    out["publish"] = {
        "wdir": "..",
        "cmd": f"python -m ragen2.repro.publish --out-dir docs/notebooks {executed}",
        "deps": ["ragen2/repro/publish.py", executed],
        "outs": [{f"docs/notebooks/{pipeline.notebook}.ipynb": dict(TRACKED)}]}
    return out


def dvc_yaml(pipeline: OwnPipeline) -> str:
    """``pipeline``'s ``dvc.yaml``: a header saying what it is and where it comes from, then :func:`stages`."""
    import textwrap

    import yaml

    about = (f"{pipeline.about} A pipeline of its own beside the paper's (../dvc.yaml), so that `make repro` stays "
             f"within its budget: `make {pipeline.make_target}` runs it (the warm starts and the runs two at a time, "
             f"one torch thread each, as the thread count is part of a result's float realization; then the stages "
             f"after them). This file is written by `python -m ragen2.repro.dvc_files` from {pipeline.module} "
             f"(edit that, not this file); params.yaml here by `python -m ragen2 profile {pipeline.folder} --write "
             f"{pipeline.params_path}`. Every stage runs from the repository root.")
    header = "".join(f"# {line}\n" for line in textwrap.wrap(about, 116))
    body = yaml.safe_dump({"stages": stages(pipeline)}, sort_keys=False, default_flow_style=False, width=116)
    return header + body
