"""The results bundle: the small part of every run that the analysis reads, committed so a clone has it without training.

A run directory is mostly checkpoints (megabytes per run); what the tables and most figures read is kilobytes: its
config, summary, per-step metrics and gradient-analysis tables, and the record of the warm start it started from. The
``bundle`` stage (``python -m ragen2.repro.bundle``) copies those into ``data/bundle/`` with the layout of a run
directory, the metrics as one Parquet table (``metrics.parquet``: the long table
:func:`ragen2.repro.runs.read_metrics_jsonl` reads, bit for bit), so :func:`ragen2.repro.runs.read_runs` reads a
bundled run as it reads the run itself. ``dvc.lock`` records the bundle's hash like any output (``cache: false``: git
holds it), and a test keeps the committed bundle in step with it.

A pipeline whose notebook reads files of its own beside the runs (the learning screen's evaluations on 512 seeds)
bundles those folders too, whole (``--data``), beside ``runs/``.

Not in it: checkpoints. What the notebooks compute by rolling a trained policy out (prompt tables, sampled
reasonings) is kept beside it by the notebook stages (``data/bundle/products/``, :mod:`ragen2.repro.products`).
Notebooks find the bundle with :func:`runs_or_bundle` where no run was trained.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragen2 import rundir
from ragen2.repro.runs import METRICS_TABLE

if TYPE_CHECKING:
    from ragen2.config import RunConfig

BUNDLE_DIR = Path("data/bundle")
RUN_FILES = (rundir.CONFIG, rundir.SUMMARY, rundir.ENV, rundir.VAL_EPISODES)
"""The small files a bundled run keeps as they are (its validation episodes: about 3 KB a run), beside its gradient
tables (``grad_analysis*.csv``)."""
WARM_START_RECORD = "warm_start.json"
BUNDLE_PARTS = ("runs", "warm_start")
"""The bundle stage's folders in the bundle; ``products/`` beside them is written by the notebooks
(:mod:`ragen2.repro.products`)."""


def bundle_run(run_dir: Path, out_dir: Path) -> Path:
    """Write ``run_dir``'s bundled copy to ``out_dir/<run id>/`` (replacing an older one); the folder written."""
    from ragen2.fileio import atomic_path, write_text_atomic
    from ragen2.repro.runs import read_metrics_jsonl

    target = out_dir / run_dir.name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in RUN_FILES:
        if (run_dir / name).is_file():
            write_text_atomic(target / name, (run_dir / name).read_text())
    for table in sorted(run_dir.glob("grad_analysis*.csv")):
        write_text_atomic(target / table.name, table.read_text())
    if (run_dir / rundir.METRICS).is_file():
        with atomic_path(target / METRICS_TABLE) as tmp:
            read_metrics_jsonl(run_dir / rundir.METRICS).to_parquet(tmp, index=False, compression="zstd")
    return target


def warm_start_of(run_dir: Path) -> str | None:
    """The warm-start folder name (its key) ``run_dir`` starts from; None for a run without a warm start."""
    from ragen2.rundir import read_config
    from ragen2.warmstart import warm_start_key

    cfg = read_config(run_dir)
    return warm_start_key(cfg) if cfg.warm_start.steps > 0 else None


def finished_runs(bundle_runs: Path, configs: Mapping[str, RunConfig]) -> list[str]:
    """The run ids of ``configs`` finished in the bundle ``bundle_runs``: their bundle part holds that config and a
    summary with every planned step done. A study trained in chunks over several sessions does not train them again:
    a later checkout has lost their run folders, and their committed bundle part is the record its notebook reads
    (:attr:`ragen2.repro.own_pipelines.OwnPipeline.bundle_per_run`)."""
    from ragen2.config import to_dict
    from ragen2.rundir import read_json

    done = []
    for rid, cfg in configs.items():
        folder = Path(bundle_runs) / rid
        if not ((folder / rundir.CONFIG).is_file() and (folder / rundir.SUMMARY).is_file()):
            continue
        summary = read_json(folder / rundir.SUMMARY)
        if (read_json(folder / rundir.CONFIG) == to_dict(cfg)
                and summary.get("steps_completed") == summary.get("steps_planned") == cfg.trainer.steps):
            done.append(rid)
    return done


def bundle_warm_start(folder: Path, out_dir: Path) -> Path | None:
    """Write the record of the warm start in ``folder`` (its ``warm_start.json`` and the hash of its weights) to
    ``out_dir/<its key>/``; the folder written, or None where ``folder`` holds no record."""
    from ragen2.fileio import write_text_atomic
    from ragen2.repro.warm_starts import WEIGHTS_HASH_FILE, weights_sha256

    record = folder / WARM_START_RECORD
    if not record.is_file():
        return None
    target = out_dir / folder.name
    write_text_atomic(target / WARM_START_RECORD, record.read_text())
    write_text_atomic(target / WEIGHTS_HASH_FILE, weights_sha256(folder) + "\n")
    return target


def write_bundle(runs_root: Path, cache_dir: Path, out_dir: Path = BUNDLE_DIR,
                 data: Sequence[Path] = ()) -> dict[str, int]:
    """The bundle of every run under ``runs_root`` (``out_dir/runs/``) and of the warm starts they started from
    (their ``warm_start.json`` and the hash of their weights, from ``cache_dir/warm_start/`` to
    ``out_dir/warm_start/``: the cache's layout, so the bundle stands in for the cache in the warm-start table), and
    a copy of each folder in ``data`` (``out_dir/<its name>/``, every file as it is but hidden ones: DVC's
    ``.gitignore`` there would keep the copies out of git), replacing those folders
    (:data:`BUNDLE_PARTS` and ``data``'s; the notebooks' products beside them are theirs).

    Returns:
        how many runs, warm-start records and data files were written.
    """
    from ragen2.fileio import write_bytes_atomic
    from ragen2.repro.runs import find_run_dirs

    names = [Path(folder).name for folder in data]
    if clash := sorted({n for n in names if n in BUNDLE_PARTS or names.count(n) > 1}):
        raise ValueError(f"data folder name {clash[0]!r} is already a part of the bundle")
    for part in (*BUNDLE_PARTS, *names):
        shutil.rmtree(out_dir / part, ignore_errors=True)
    for part in BUNDLE_PARTS:  # each exists, if empty (runs without warm starts): the stage declares both
        (out_dir / part).mkdir(parents=True)
    runs = find_run_dirs(runs_root)
    for run_dir in runs:
        bundle_run(run_dir, out_dir / "runs")
    keys = sorted({key for key in map(warm_start_of, runs) if key})
    written = sum(bundle_warm_start(cache_dir / "warm_start" / key, out_dir / "warm_start") is not None
                  for key in keys)
    files = 0
    for folder in map(Path, data):
        for source in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
            write_bytes_atomic(out_dir / folder.name / source.relative_to(folder), source.read_bytes())
            files += 1
    return {"runs": len(runs), "warm_starts": written, "data_files": files}


def runs_or_bundle(runs_root: str | Path, cache_dir: str | Path | None = None,
                   bundle_dir: str | Path | None = None, *data: str | Path) -> tuple[Path | None, ...]:
    """Where a notebook reads its runs and warm-start records: ``runs_root`` and ``cache_dir`` where ``runs_root``
    holds run directories; else, where the committed bundle has runs (a clone that has not trained), the bundle's
    (announced in one line); else ``runs_root`` and ``cache_dir`` (the notebook then says which studies are missing).
    ``bundle_dir`` defaults to :data:`BUNDLE_DIR` in the repository. Each further folder in ``data`` (bundled with
    :func:`write_bundle`'s ``data``) follows the runs: itself, or the bundle's copy of it; one more item each in
    the tuple returned."""
    from ragen2.repro.paths import in_repository
    from ragen2.repro.runs import find_run_dirs

    def has_runs(root: Path) -> bool:
        try:
            return bool(find_run_dirs(root))
        except FileNotFoundError:
            return False

    runs_root = Path(runs_root)
    cache = Path(cache_dir) if cache_dir is not None else None
    (bundle_dir,) = in_repository(bundle_dir if bundle_dir is not None else BUNDLE_DIR)
    if has_runs(runs_root) or not has_runs(bundle_dir / "runs"):
        return runs_root, cache, *map(Path, data)
    print(f"No runs under {runs_root}: reading the results bundle ({bundle_dir}: the small files of the runs the "
          "committed results come from, without checkpoints).")
    return bundle_dir / "runs", bundle_dir if cache is not None else None, *(bundle_dir / Path(d).name for d in data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragen2.repro.bundle", description=__doc__.split("\n")[0])
    parser.add_argument("--runs-root", type=Path, default=Path("data/runs"))
    parser.add_argument("--cache-dir", type=Path, default=Path("data/cache"))
    parser.add_argument("--out-dir", type=Path, default=BUNDLE_DIR)
    parser.add_argument("--data", type=Path, action="append", default=[], metavar="FOLDER",
                        help="a folder the notebook reads beside the runs, bundled whole as <out-dir>/<its name>")
    one = parser.add_mutually_exclusive_group()
    one.add_argument("--run", type=Path, default=None, metavar="RUN_DIR",
                     help="bundle this one run into <out-dir>/runs/ and nothing else (a bundle written run by run)")
    one.add_argument("--warm-start", type=Path, default=None, metavar="FOLDER",
                     help="bundle this one warm start's record into <out-dir>/warm_start/ and nothing else")
    args = parser.parse_args(argv)
    if args.run is not None or args.warm_start is not None:
        folder = args.run if args.run is not None else args.warm_start
        if not folder.is_dir():
            parser.error(f"{'--run' if args.run is not None else '--warm-start'} {folder}: no such folder")
        if args.run is not None:
            print(f"bundled run {folder.name} into {bundle_run(folder, args.out_dir / 'runs')}")
        elif (target := bundle_warm_start(folder, args.out_dir / "warm_start")) is None:
            parser.error(f"--warm-start {folder}: no {WARM_START_RECORD} there")
        else:
            print(f"bundled warm start {folder.name} into {target}")
        return 0
    for folder in args.data:
        if not folder.is_dir():
            parser.error(f"--data {folder}: no such folder")
    counts = write_bundle(args.runs_root, args.cache_dir, args.out_dir, args.data)
    print(f"bundled {counts['runs']} runs, {counts['warm_starts']} warm-start records and {counts['data_files']} "
          f"data files into {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
