"""Which run of the CPU profile's params file a ``step_over_floor_<algo>`` figure trains: light (no torch), so
``python -m ragen2.bench`` checks ``--params`` before its heavy imports."""

from __future__ import annotations

from pathlib import Path

from ragen2.config import read_params
from ragen2.errors import ConfigError

PROFILE_RUNS = {"grpo": "frozenlake__grpo__none__main__s0", "ppo": "frozenlake__ppo__none__main__s0"}
"""The CPU profile's main-study run of each algorithm, whose settings the figures use where the profile declares it."""
MAIN_RUN = PROFILE_RUNS["grpo"]
"""The CPU profile's first main run: an algorithm without a main run of its own trains its config with that
algorithm (``trainer.algo`` overridden)."""


def profile_run_id(algo: str, params_path: Path, overrides: tuple[str, ...] = ()) -> tuple[str, tuple[str, ...]]:
    """The params file's run ``step_over_floor_<algo>`` trains and the overrides it takes: the profile's main run of
    ``algo``, or its first main run (:data:`MAIN_RUN`) with ``trainer.algo=algo`` where it has none.

    Raises:
        ConfigError: an unknown algorithm; the params file is missing or not YAML, holds another profile (its shapes
            would be measured instead), or declares neither run.
    """
    if algo not in PROFILE_RUNS:
        raise ConfigError(f"algo={algo!r}: step_over_floor measures one of {sorted(PROFILE_RUNS)}")
    params = read_params(params_path)
    profile = (params.get("pipeline") or {}).get("profile")
    if profile != "cpu":
        raise ConfigError(f"{params_path} holds the {profile!r} profile; step_over_floor measures the cpu profile "
                          "(python -m ragen2 profile cpu --write params.yaml)")
    declared = params.get("runs") or {}
    if PROFILE_RUNS[algo] in declared:
        return PROFILE_RUNS[algo], tuple(overrides)
    if MAIN_RUN not in declared:
        raise ConfigError(f"{params_path} declares neither {PROFILE_RUNS[algo]!r} nor {MAIN_RUN!r}")
    return MAIN_RUN, (f"trainer.algo={algo}", *overrides)
