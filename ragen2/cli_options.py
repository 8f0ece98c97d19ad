"""Command-line options and settings that ``python -m ragen2`` and ``python -m ragen2.repro`` share."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ragen2.errors import UserError

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "DVC_NO_ANALYTICS": "1", "DVC_STUDIO_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}


def _parents() -> dict[str, argparse.ArgumentParser]:
    """The options several commands share, declared once (argparse ``parents=``)."""
    def parent(*args, **kwargs) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(add_help=False)
        p.add_argument(*args, **kwargs)
        return p

    return {
        "params": parent("--params", default="params.yaml", help="the params file (default: params.yaml)"),
        "set": parent("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a config value, e.g. --set trainer.steps=5 (repeatable)"),
        "cache": parent("--cache-dir", default="data/cache", help="policy / warm-start cache (default: data/cache)"),
        "threads": parent("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"),
        "dvc_file": parent("--dvc-file", default="dvc.yaml",
                           help="the pipeline file of the stages (default: dvc.yaml; the regime map's: "
                                "regime_map/dvc.yaml)"),
        "realization": parent("--realization", action="store_true",
                              help="the realization check's second realization (params.yaml's "
                                   "pipeline.realization: its overrides and runs root; ragen2.repro.realization)"),
    }


PARENTS = _parents()


def with_options(*names: str) -> list[argparse.ArgumentParser]:
    """The shared option parsers called ``names`` (keys of :data:`PARENTS`), for a sub-parser's ``parents=``."""
    return [PARENTS[n] for n in names]


def set_threads(threads: int | None) -> None:
    """torch's CPU threads, where a command was given ``--threads``."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def run_overrides(args: argparse.Namespace, second=None) -> tuple[list[str], str]:
    """The ``--set`` overrides and the runs root of a command. ``second``: the realization check's second
    realization (``ragen2.repro.realization.read_realization``, read by the caller where ``--realization`` was
    given), whose overrides come first (``--set`` still wins) and whose runs root replaces the params file's."""
    if second is None:
        return list(args.set), params_runs_root(args.params)
    return [*second.overrides, *args.set], second.runs_root


def params_runs_root(params: str) -> str:
    """``pipeline.runs_root`` of a params file (a pipeline of its own, such as the regime map), else ``data/runs``."""
    from ragen2.config import read_params

    pipeline = (read_params(params).get("pipeline") or {}) if Path(params).is_file() else {}
    return str(pipeline.get("runs_root", "data/runs"))


def check_overrides(items: Sequence[str]) -> None:
    """Each ``--set KEY=VALUE`` has a key and a value that parses as YAML, or a :class:`UserError` naming it (before
    any heavy import; the config then checks keys and types strictly)."""
    import yaml

    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--set {item!r} is not of the form key.path=value")
        try:
            yaml.safe_load(raw)
        except yaml.YAMLError as e:
            problem = str(getattr(e, "problem", None) or e).splitlines()[0]
            raise UserError(f"--set {item!r}: the value {raw!r} of {key.strip()!r} is not valid YAML ({problem})") \
                from None


def pin_kernels() -> None:
    """Pin the math kernels (:mod:`ragen2.kernels`) before any command imports torch."""
    from ragen2 import kernels

    try:
        kernels.pin()
    except ValueError as e:
        raise UserError(str(e)) from None


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None, prog: str) -> int:
    """Parse ``argv`` and run the chosen command offline, with the kernels pinned and ragen2's progress lines on;
    a user error (bad key, value, run id or path) is one line on stderr, ``<prog> <command>: error: ...``, and exit
    status 2."""
    from ragen2.progress import show_progress

    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    args = parser.parse_args(argv)
    show_progress()  # warm-start steps, resume, evaluation: ragen2's INFO lines on stderr
    try:
        check_overrides(getattr(args, "set", None) or [])
        pin_kernels()
        return args.func(args)
    except UserError as e:
        print(f"{prog} {args.command}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
