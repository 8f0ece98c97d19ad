"""The studies with a pipeline of their own, beside the paper's ``dvc.yaml``: where each keeps its files, and the one
way their params files are written.

A study that does not fit ``make repro``'s budget gets a folder (``regime_map/``, ``curves/``, ``screen/``) holding its
``dvc.yaml``, its generated ``params.yaml`` and its ``dvc.lock``; its warm starts and runs live under
``data/<folder>/``; the Makefile runs each the same way (its ``own_pipeline`` recipe). :class:`OwnPipeline` names
those places once; :func:`params_yaml` writes the params file of any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragen2.repro.profiles import Profile


@dataclass(frozen=True)
class OwnPipeline:
    """One pipeline of its own: its folder, a title for the params file's header, and the module that defines it."""

    folder: str
    title: str
    module: str
    """The module to edit instead of the params file (``ragen2/repro/learning_screen.py``)."""

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
