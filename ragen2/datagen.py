"""Write the offline data sets of the corpus-backed environments to ``data/`` (a DVC stage).

Sokoban, FrozenLake and Bandit are generated from the env seed and need no files. Countdown,
MetaMathQA, SearchQA, WebShop and DeepCoder each expose ``write_offline_data(root) -> list[Path]``,
which writes the seeded offline world that the environment would otherwise build in memory, so the
pipeline's inputs are inspectable files with hashes in ``dvc.lock``.

Usage: ``python -m ragen2.datagen [--root data] [--env countdown ...]``
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from ragen2.envs import REGISTRY

#: Environments whose offline world is a data set written by ``write_offline_data``.
CORPUS_ENVS = ("countdown", "metamathqa", "searchqa", "webshop", "deepcoder")


def write_all(root: Path, names: tuple[str, ...] = CORPUS_ENVS) -> list[Path]:
    """Write the offline data of each environment in ``names`` under ``root``; returns the files."""
    unknown = [n for n in names if n not in CORPUS_ENVS]
    if unknown:
        raise ValueError(f"no offline data set for {unknown}; choose from {list(CORPUS_ENVS)}")
    written: list[Path] = []
    for name in names:
        module = importlib.import_module(REGISTRY[name].entry_point.split(":")[0])
        written.extend(module.write_offline_data(Path(root)))
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ragen2.datagen", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data"), help="output folder (default: data)")
    parser.add_argument("--env", action="append", choices=CORPUS_ENVS, help="only these environments")
    args = parser.parse_args(argv)
    for path in write_all(args.root, tuple(args.env or CORPUS_ENVS)):
        print(path)


if __name__ == "__main__":
    main()
