"""``python -m ragen2.repro <command> ...``: the pipeline's plumbing, which ``make repro`` and its kin call.

Commands:

- ``train-runs RUN_ID ... [--workers 2] [--threads 1] [--params params.yaml] [--cache-dir DIR] [--address ADDR]
  [--gpus-per-run N] [--retries 2] [--commit]``: train several runs as Ray tasks, dearest first, on a local Ray or a
  cluster (:mod:`ragen2.repro.runqueue`, docs/cluster.md); exits 1 if any failed.
- ``stale-runs``: print the run ids whose DVC ``train`` stage is not up to date (``dvc status``), one per
  line; ``make repro`` trains those with ``train-runs`` and records them with ``commit-runs``.
- ``commit-runs RUN_ID ...``: record trained runs' ``train`` stages in ``dvc.lock`` (``dvc commit --force``
  with one write of the lock file; :mod:`ragen2.repro.dvcstages`).
- ``build-warm-starts [--workers 2] [--no-realization]``: run the stale ``warmstart`` and ``warmstart_realization``
  stages' own commands on parallel workers (longest SFT first), then record them in ``dvc.lock``
  (``--no-realization``: the first realization's alone, as ``make smoke``).
- ``run-stages STAGE ... [--workers 2]``: the same for the stale ones of any named stages that do not depend on each
  other (``make repro``: the notebooks of both realizations, two at a time).
- ``prune-lock``: drop ``dvc.lock`` entries of stages the pipeline no longer defines (a grid that shrank) and the
  ``.gitignore`` lines of their outputs (:func:`ragen2.repro.dvcstages.prune_lock`).
- ``--realization`` (``train-runs``, ``stale-runs``, ``commit-runs``): the realization check's second realization of
  the same runs; ``--dvc-file`` (all): a pipeline of its own (``regime_map/dvc.yaml``).

Training one run, evaluating and the user tools stay under ``python -m ragen2``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ragen2.cli_options import run_command, run_overrides, with_options
from ragen2.errors import UserError
from ragen2.repro.realization import read_realization


def _overrides(args: argparse.Namespace) -> tuple[list[str], str]:
    """:func:`ragen2.cli_options.run_overrides` with the second realization where ``--realization`` was given."""
    return run_overrides(args, read_realization(args.params) if args.realization else None)


def _cmd_train_runs(args: argparse.Namespace) -> int:
    from ragen2.repro.runqueue import train_runs

    overrides, runs_root = _overrides(args)
    on_done = None
    if args.commit:
        from ragen2.repro.dvcstages import commit_stages

        stage = _train_stage(args)

        def on_done(run_ids: list[str]) -> None:
            commit_stages([f"{stage}@{rid}" for rid in run_ids])
            print(f"recorded {len(run_ids)} finished run(s) in {args.dvc_file}'s lock")

    failed = train_runs(args.run_ids, params=args.params, workers=args.workers, threads=args.threads,
                        cache_dir=args.cache_dir, runs_root=runs_root, overrides=overrides, on_done=on_done,
                        address=args.address, gpus_per_run=args.gpus_per_run, retries=args.retries)
    if failed:
        print(f"{len(failed)} run(s) failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _add_train_runs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train-runs", help="train several runs of params.yaml as Ray tasks, dearest first",
                       parents=with_options("params", "set", "cache", "realization", "dvc_file"))
    p.add_argument("run_ids", nargs="+", help="keys of params.yaml's `runs` mapping (into data/runs/<RUN_ID>)")
    p.add_argument("--workers", type=int, default=2,
                   help="runs at a time on the local Ray the command starts (default: 2; ignored with --address)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (and Ray CPUs) per run (default: 1)")
    p.add_argument("--address", default=None,
                   help="join this Ray cluster (auto, HOST:PORT) instead of starting a local Ray (docs/cluster.md)")
    p.add_argument("--gpus-per-run", type=float, default=None,
                   help="GPUs per run (default: 1 where the run's policy.device is cuda, or auto on a cluster "
                        "with GPUs; else 0)")
    p.add_argument("--retries", type=int, default=2,
                   help="restarts of a run whose worker died; it resumes from its last checkpoint (default: 2)")
    p.add_argument("--commit", action="store_true",
                   help="record finished runs in the dvc file's lock as they come (every 10 minutes and at the end), "
                        "so an interrupted make keeps them")
    p.set_defaults(func=_cmd_train_runs)


def stale_train_stages(status: dict, stage: str = "train") -> list[str]:
    """Run ids of the ``<stage>@<run id>`` entries of ``dvc status --json`` output, in its order (``stage`` may
    name its file: ``regime_map/dvc.yaml:train``)."""
    return [name.split("@", 1)[1] for name in status if name.startswith(f"{stage}@")]


def _addressed(dvc_file: str, stage: str) -> str:
    """A stage's name as DVC addresses it from the repository root (``dvc status --json``, ``dvc commit``): bare in
    ``dvc.yaml``, ``<file>:<stage>`` in another pipeline file."""
    return stage if dvc_file == "dvc.yaml" else f"{dvc_file}:{stage}"


def _train_stage(args: argparse.Namespace) -> str:
    from ragen2.repro.realization import TRAIN_STAGE

    return _addressed(args.dvc_file, TRAIN_STAGE if args.realization else "train")


def _dvc_status(dvc: str, targets: list[str] | None = None) -> dict | int:
    """``dvc status --json`` of ``targets`` (stage names; a ``foreach`` group's name covers its items) as a dict, or
    dvc's exit code (its stderr printed) when it fails. A status of named stages checks only those, not their
    upstream: for the 380 runs of the CPU profile about a minute instead of two for the whole pipeline."""
    import subprocess

    proc = subprocess.run([dvc, "status", "--json", *(targets or [])], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    return json.loads(proc.stdout or "{}")


def _cmd_stale_runs(args: argparse.Namespace) -> int:
    status = _dvc_status(args.dvc, [_train_stage(args)])
    if isinstance(status, int):
        return status
    order = {rid: i for i, rid in enumerate(_params_run_ids(args.params))}
    stale = sorted(stale_train_stages(status, _train_stage(args)), key=lambda r: order.get(r, len(order)))
    if args.skip_bundled is not None:
        from ragen2.config import load_config
        from ragen2.repro.bundle import finished_runs

        done = set(finished_runs(args.skip_bundled, {rid: load_config(rid, args.params) for rid in stale}))
        stale = [rid for rid in stale if rid not in done]
    for rid in stale:
        print(rid)
    return 0


def _params_run_ids(params: str) -> list[str]:
    from ragen2.config import run_ids

    return run_ids(params) if Path(params).exists() else []


def _add_stale_runs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stale-runs", help="run ids whose DVC train stage is not up to date (params.yaml order)",
                       parents=with_options("params", "realization", "dvc_file"))
    p.add_argument("--dvc", default="dvc", help="the dvc executable (default: dvc on PATH)")
    p.add_argument("--skip-bundled", type=Path, default=None, metavar="BUNDLE_RUNS",
                   help="leave out the runs finished in this bundle folder (their bundle part holds their config and "
                        "every planned step): a study trained in chunks over several sessions")
    p.set_defaults(func=_cmd_stale_runs)


WARM_START_STAGES = ("warmstart", "warmstart_realization")
"""The ``foreach`` stages of ``dvc.yaml`` that build warm starts, keyed by warm-start key."""


def _cmd_build_warm_starts(args: argparse.Namespace) -> int:
    from ragen2.config import load_config, read_params
    from ragen2.repro.dvcstages import declared_stages, run_stages
    from ragen2.repro.realization import read_realization

    prefix = _addressed(args.dvc_file, "")
    groups = WARM_START_STAGES[:1] if args.no_realization else WARM_START_STAGES
    names = [n for n in declared_stages(args.dvc_file) if n in groups]
    stale = _stale_stages(args.dvc, args.dvc_file, names)
    if isinstance(stale, int):
        return stale
    pipeline = read_params(args.params).get("pipeline") or {}

    def sft_steps(stage: str) -> float:
        group, _, key = stage.removeprefix(prefix).partition("@")
        second = group == "warmstart_realization"
        entry = (pipeline.get("realization") or {}) if second else pipeline
        run = ((entry.get("warm_starts") or {}).get(key) or {}).get("run")
        if run is None:
            return 0.0
        overrides = list(read_realization(args.params).overrides) if second else []
        return float(load_config(run, params_path=args.params, overrides=overrides).warm_start.steps)

    done, failed = run_stages(stale, workers=args.workers, cost=sft_steps)
    print(f"built and recorded {len(done)} warm start(s)" + (f"; failed: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _add_build_warm_starts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build-warm-starts", help="build the stale warm-start stages on parallel workers, then "
                       "record them in dvc.lock", parents=with_options("params", "dvc_file"))
    p.add_argument("--workers", type=int, default=2, help="stages built at once (default: 2)")
    p.add_argument("--dvc", default="dvc", help="the dvc executable (default: dvc on PATH)")
    p.add_argument("--no-realization", action="store_true",
                   help="only the first realization's warm starts, not the realization check's (make smoke)")
    p.set_defaults(func=_cmd_build_warm_starts)


def _stale_stages(dvc: str, dvc_file: str, names: list[str]) -> list[str] | int:
    """The stale items of the named stages of ``dvc_file`` as DVC addresses them (``dvc status`` of those stages
    only), or dvc's exit code when it fails."""
    prefix = _addressed(dvc_file, "")
    status = _dvc_status(dvc, [prefix + name for name in names])
    return status if isinstance(status, int) else [name for name in status if name.startswith(prefix)]


def _cmd_run_stages(args: argparse.Namespace) -> int:
    from ragen2.repro.dvcstages import declared_stages, run_stages

    known = list(declared_stages(args.dvc_file))
    for name in args.stages:
        if name not in known:
            raise UserError(f"stages: {name!r} is not a stage of {args.dvc_file} (have {', '.join(known)})")
    stale = _stale_stages(args.dvc, args.dvc_file, args.stages)
    if isinstance(stale, int):
        return stale
    done, failed = run_stages(stale, workers=args.workers)
    print(f"ran and recorded {len(done)} stage(s)" + (f"; failed: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _add_run_stages(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run-stages", help="run the stale ones of the named stages on parallel workers, then record "
                       "them in dvc.lock", parents=with_options("dvc_file"))
    p.add_argument("stages", nargs="+", help="stage names of the pipeline file (a foreach group covers its items); "
                   "none may depend on another's outputs")
    p.add_argument("--workers", type=int, default=2, help="stages run at once (default: 2)")
    p.add_argument("--dvc", default="dvc", help="the dvc executable (default: dvc on PATH)")
    p.set_defaults(func=_cmd_run_stages)


def _cmd_prune_lock(args: argparse.Namespace) -> int:
    from ragen2.repro.dvcstages import prune_lock

    dropped = prune_lock(args.dvc_file)
    print(f"dropped {len(dropped)} lock entr{'y' if len(dropped) == 1 else 'ies'} of stages {args.dvc_file} no longer "
          "defines")
    return 0


def _add_prune_lock(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prune-lock", help="drop dvc.lock entries (and their .gitignore lines) of stages the pipeline "
                       "no longer defines", parents=with_options("dvc_file"))
    p.set_defaults(func=_cmd_prune_lock)


def _cmd_commit_runs(args: argparse.Namespace) -> int:
    from ragen2.repro.dvcstages import commit_stages

    stage = _train_stage(args)
    done = commit_stages([f"{stage}@{rid}" for rid in args.run_ids])
    print(f"recorded {len(done)} {stage} stage(s) in its dvc.lock")
    return 0


def _add_commit_runs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("commit-runs", help="record trained runs in dvc.lock (dvc commit -f, one lock write)",
                       parents=with_options("realization", "dvc_file"))
    p.add_argument("run_ids", nargs="+", help="run ids of params.yaml whose train stage to record")
    p.set_defaults(func=_cmd_commit_runs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ragen2.repro", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_train_runs, _add_stale_runs, _add_commit_runs, _add_build_warm_starts, _add_run_stages,
                _add_prune_lock):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command; a user error is one line on stderr and exit status 2."""
    return run_command(build_parser(), argv, "ragen2.repro")


if __name__ == "__main__":
    sys.exit(main())
