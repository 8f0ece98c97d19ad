"""``python -m ragen2.repro.dvc_files``: write the dvc.yaml of every pipeline of its own from its descriptor.

The regime map's, the multi-turn curves', the learning screen's and the decline study's ``dvc.yaml`` are generated
(:func:`ragen2.repro.own_pipelines.dvc_yaml` of each module's ``PIPELINE``); edit the descriptor, then run this.
"""

from __future__ import annotations

from ragen2.repro import decline_study, learning_screen, multiturn_curves, regime_map
from ragen2.repro.own_pipelines import OwnPipeline, dvc_yaml

PIPELINES: tuple[OwnPipeline, ...] = (regime_map.PIPELINE, multiturn_curves.PIPELINE, learning_screen.PIPELINE,
                                      decline_study.PIPELINE)
"""Every pipeline of its own, beside the paper's ``dvc.yaml``."""


def main() -> int:
    from ragen2.fileio import write_text_atomic

    for pipeline in PIPELINES:
        write_text_atomic(pipeline.dvc_file, dvc_yaml(pipeline))
        print(f"wrote {pipeline.dvc_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
