"""The data of ``dvc plots show``'s curves, copied out of two runs into the repository (the ``plot_data`` stage).

``dvc.yaml``'s ``plots`` draw a few training curves of the main study's GRPO seed-0 pair (no filter vs Top-p 0.9)
from the runs' dvclive files. Runs are not in git, so a fresh clone would have nothing to draw: this stage copies
those few files (:data:`CURVES`, a few kilobytes) to ``paper_figures/plots/<condition>/``, which is committed with
the figures, and the plots read them there. ``dvc plots show`` also shows every committed figure as an image, which
needs no network (the curves' interactive view loads its JavaScript from the web).

``python -m ragen2.repro.plot_data --out-dir paper_figures/plots none=<run metrics dir> top_p=<run metrics dir>``
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

CURVES = ("val/success.tsv", "collapse_first_turn/mi_estimate.tsv", "filter/kept_ratio.tsv")
"""The dvclive files the plots draw (relative to a run's ``dvclive/plots/metrics``)."""


def copy_curves(sources: dict[str, Path], out_dir: Path) -> list[Path]:
    """Copy :data:`CURVES` of each ``condition -> run metrics dir`` to ``out_dir/<condition>/``; the files written.

    Raises:
        FileNotFoundError: a run lacks one of the files.
    """
    from ragen2.fileio import write_text_atomic

    written = []
    for condition, metrics_dir in sources.items():
        for name in CURVES:
            source = Path(metrics_dir) / name
            if not source.is_file():
                raise FileNotFoundError(f"{source} is missing (has the run logged {name.removesuffix('.tsv')}?)")
            written.append(write_text_atomic(out_dir / condition / name, source.read_text()))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragen2.repro.plot_data", description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("paper_figures/plots"))
    parser.add_argument("sources", nargs="+", metavar="CONDITION=DIR", help="a run's dvclive/plots/metrics folder")
    args = parser.parse_args(argv)
    sources = {}
    for item in args.sources:
        condition, sep, path = item.partition("=")
        if not sep or not condition or not path:
            parser.error(f"source {item!r} is not CONDITION=DIR")
        sources[condition] = Path(path)
    print(f"wrote {len(copy_curves(sources, args.out_dir))} files to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
