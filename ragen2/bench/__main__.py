"""``python -m ragen2.bench``: run the benchmarks (see :mod:`ragen2.bench`); ``--gpu``: the prepared GPU check
(:mod:`ragen2.bench.gpu_check`, its own options)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "TRL_EXPERIMENTAL_SILENCE": "1",
               "TOKENIZERS_PARALLELISM": "false"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ragen2.bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes, about a minute in all")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object on the last line")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: on a shared 2-core machine more threads "
                        "make small ops several times slower)")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these figures")
    p.add_argument("--cache-dir", type=Path, default=Path("data/cache/bench"),
                   help="where the tiny policy is built and cached")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON report to this file")
    p.add_argument("--record", type=Path, default=None, metavar="DIR",
                   help="also keep the run as a dated record in DIR (ragen2.bench.records; make bench: data/bench)")
    p.add_argument("--params", type=Path, default=Path("params.yaml"),
                   help="the CPU profile's params file, whose main runs step_over_floor_* train (full sizes)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--gpu" in argv:  # the prepared GPU check: its own options, and none of the CPU benchmarks' imports
        from ragen2.bench.gpu_check import main as gpu_check

        return gpu_check([a for a in argv if a != "--gpu"])
    args = parse_args(argv)
    if (problem := input_problem(args)) is not None:
        print(f"python -m ragen2.bench: error: {problem}", file=sys.stderr)
        return 2
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    from ragen2 import kernels

    kernels.pin()  # the pipeline's kernels (RAGEN2_KERNELS=native: each library's own choice)
    import logging

    import torch
    import transformers

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("accelerate").setLevel(logging.ERROR)

    from ragen2.bench.cases import FULL, QUICK, run_benchmarks
    from ragen2.bench.targets import BENCHMARKS
    from ragen2.fileio import json_ready, write_json_atomic

    mode = "quick" if args.quick else "full"

    def write(report: dict) -> None:  # after every figure: an interrupted bench keeps what it measured
        if args.out is not None:
            write_json_atomic(args.out, {**report, "mode": mode})

    only = tuple(args.only) if args.only else BENCHMARKS
    report = run_benchmarks(QUICK if args.quick else FULL, args.cache_dir, only=only, params=args.params,
                            log=lambda line: print(line, file=sys.stderr if args.json else sys.stdout, flush=True),
                            on_figure=write)
    report["mode"] = mode
    write(report)
    if args.record is not None:
        from ragen2.bench.records import make_record, write_record

        path = write_record(make_record(report, mode=mode, threads=args.threads), args.record)
        print(f"recorded {path}", file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        print(json.dumps(json_ready(report), sort_keys=False, allow_nan=False), flush=True)
    else:
        for name in only:
            value = report[name]
            print(f"{name} = {value:.3f}" if value is not None else f"{name} failed: {report['details'][name]['failed']}")
    return 0 if all(report[name] is not None for name in only) else 1


def input_problem(args: argparse.Namespace) -> str | None:
    """The first bad input as one line naming it, or None: checked before the heavy imports."""
    from ragen2.bench.targets import BENCHMARKS, PROFILE_ALGOS  # the names alone: no torch

    if args.threads < 1:
        return f"--threads={args.threads}: must be >= 1"
    unknown = [name for name in args.only or () if name not in BENCHMARKS]
    if unknown:
        return f"--only={' '.join(unknown)}: unknown benchmark(s); known: {' '.join(BENCHMARKS)}"
    algos = set() if args.quick else {PROFILE_ALGOS[name] for name in args.only or BENCHMARKS if name in PROFILE_ALGOS}
    if algos:
        from ragen2.bench.profile_runs import profile_run_id
        from ragen2.errors import ConfigError

        for algo in sorted(algos):
            try:
                profile_run_id(algo, args.params)
            except ConfigError as e:
                return f"--params={args.params}: {e}"
    return None


if __name__ == "__main__":
    raise SystemExit(main())
