"""``dvc plots show``'s training curves, drawn from two runs into the repository (the ``plot_data`` stage).

``dvc.yaml``'s ``plots`` show a few training curves of the main study's GRPO seed-0 pair (no filter vs Top-p 0.9)
and every committed figure. Runs are not in git, so a fresh clone would have nothing to draw: this stage copies the
curves' dvclive files (:data:`CURVES`, a few kilobytes) to ``paper_figures/plots/<condition>/`` and draws each curve
as a PNG beside them (:data:`PLOTS`), all committed with the figures. ``dvc plots show`` shows the PNGs as images: a
page that needs no network (DVC's interactive curves load their JavaScript from the web, and offline they vanish
without a word).

``python -m ragen2.repro.plot_data --out-dir paper_figures/plots none=<run metrics dir> top_p=<run metrics dir>``
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

CURVES = ("val/success.tsv", "collapse_first_turn/mi_estimate.tsv", "filter/kept_ratio.tsv")
"""The dvclive files the plots draw (relative to a run's ``dvclive/plots/metrics``)."""
PLOTS = {
    "validation_success": ("val/success.tsv", "validation success (share of episodes)",
                           "Validation success, FrozenLake GRPO seed 0"),
    "mi_proxy": ("collapse_first_turn/mi_estimate.tsv", "MI proxy (nats per token)",
                 "MI proxy of the reasoning, FrozenLake GRPO seed 0"),
    "kept_ratio": ("filter/kept_ratio.tsv", "kept ratio (share of prompt groups)",
                   "Share of prompt groups the filter keeps, FrozenLake GRPO seed 0"),
}
"""Plot name -> (the curve it draws, its y label with unit, its title); drawn to ``<out dir>/<name>.png``."""


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


def draw_plots(conditions: Sequence[str], out_dir: Path) -> list[Path]:
    """Draw each of :data:`PLOTS` from the copies in ``out_dir/<condition>/`` to ``out_dir/<name>.png``."""
    import pandas as pd

    from ragen2.fileio import write_bytes_atomic
    from ragen2.repro.artifacts import figure_bytes
    from ragen2.repro.figures import fig_curve_pair

    written = []
    for name, (curve, ylabel, title) in PLOTS.items():
        tables = {c: pd.read_csv(out_dir / c / curve, sep="\t") for c in conditions}
        figure = fig_curve_pair(tables, ylabel=ylabel, title=title)
        written.append(write_bytes_atomic(out_dir / f"{name}.png", figure_bytes(figure, "png")))
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
    copied = copy_curves(sources, args.out_dir)
    drawn = draw_plots(list(sources), args.out_dir)
    print(f"wrote {len(copied)} curve files and {len(drawn)} plots to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
