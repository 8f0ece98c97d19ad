"""The decline study: the filter through the peak and the decline of no-filter RL (docs/preregistrations.md §7.19).

The paper places the filter's gain where unfiltered runs rise, peak and then fall (its C6); the main pipeline stops
at step 100, while success is still rising, and has no PPO. This study trains the main pipeline's setting (FrozenLake
single turn from the 300-step warm start, 8 x 16, entropy 0.001, the paper's mini-batch rule) for :data:`STEPS`
steps, under PPO and GRPO, no filter against Top-p 0.9, 8 paired training seeds on each of two warm starts: 64 runs,
about five hours on two cores. A pipeline of its own (``decline/dvc.yaml``, ``make decline``), trained in chunks
that resume across sessions: each finished run's part of the results bundle (``data/bundle/decline/runs/<run id>``)
is committed as it comes, and a run with one is not trained again (:func:`bundled_runs`); the notebook reads the
bundle, so it needs no run folder.

``python -m ragen2 profile decline --write decline/params.yaml`` writes the params file from :func:`build`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ragen2.config import RunConfig, deep_merge, from_dict, to_dict
from ragen2.repro import own_pipelines
from ragen2.repro.own_pipelines import OwnPipeline
from ragen2.repro.profiles import Profile, _with_overrides_minimal
from ragen2.repro.run_ids import parse_run_id, run_id
from ragen2.repro.study_catalog import NO_FILTER

STUDY = "decline"
"""Study tag of the run ids, followed by the warm start's SFT seed (``frozenlake__ppo__topp0p9__decline1__s3``)."""
PIPELINE = OwnPipeline(
    "decline", "decline-study", "ragen2/repro/decline_study.py",
    about="The decline study (ragen2/repro/decline_study.py, docs/preregistrations.md §7.19): the filter through "
          "the peak and the decline of no-filter RL, PPO and GRPO, 16 pairs each.",
    make_target="decline", notebook="12_decline", notebook_key="decline",
    outputs=("table_decline_runs", "table_decline_contrasts", "table_decline_snr", "table_decline_claims",
             "fig_decline_paths", "fig_decline_drops"),
    bundle_per_run=True)
PARAMS, DVC_FILE, RUNS_ROOT, CACHE_DIR = PIPELINE.params_path, PIPELINE.dvc_file, PIPELINE.runs_root, PIPELINE.cache_dir
BUNDLE_RUNS = f"{PIPELINE.bundle_dir}/runs"

STEPS = 200
"""Long enough that the screen's no-filter runs rose, peaked (steps 100-175) and fell (§7.19)."""
ALGOS = ("grpo", "ppo")
"""In training order: GRPO's chunks first, then PPO's."""
WARM_STARTS = (0, 1)
"""The warm starts' SFT seeds: the main pipeline's and its realization check's."""
SEEDS = tuple(range(8))
"""Training seeds, paired across the filters on each warm start: 16 pairs per algorithm."""
FILTERS: dict[str, dict[str, Any]] = {
    "none": dict(NO_FILTER),
    "topp0p9": {"strategy": "top_p", "value": 0.9, "include_zero": False},
}
"""No filter and Top-p 0.9 (linear, zero-variance groups dropped: the main pipeline's filter)."""
FIXED = {
    "trainer": {"steps": STEPS, "save_freq": 50, "keep_every": 50, "test_freq": 25},
    "collapse": {"enabled": True, "compute_freq": 25},
    "grad_analysis": {"enabled": True, "every": 50},
}
"""On top of the main pipeline's run config: 200 steps, checkpoints every 50 steps (all kept), validation on the 512
seeds and MI diagnostics every 25 steps, the gradient decomposition every 50 steps."""
PAPER_GAIN = {"grpo": 2.3, "ppo": 10.9}
"""The paper's FrozenLake filter gain per algorithm, points (its main table: GRPO and PPO with Qwen2.5-3B)."""
PEAK_GAIN_THRESHOLD = 15.0
"""Points the no-filter runs' mean peak gain over the warm start must reach (C1's and C6's precondition here)."""


def _base(smoke: bool) -> dict[str, Any]:
    """The main pipeline's no-filter run config (CPU or smoke profile) with :data:`FIXED` (smoke: 2 steps)."""
    from ragen2.repro.profiles import build as build_profile

    profile = build_profile("smoke" if smoke else "cpu")
    main = next(rid for rid in profile.runs if parse_run_id(rid)["study"] == "main")
    base = deep_merge(to_dict(profile.config(main)), FIXED)
    base["seed"] = 0
    if smoke:
        base = deep_merge(base, {"trainer": {"steps": 2, "save_freq": 1, "keep_every": 1, "test_freq": 1},
                                 "collapse": {"compute_freq": 1}, "grad_analysis": {"every": 1}})
    from_dict(RunConfig, base)
    return base


def run_ids(smoke: bool = False) -> list[str]:
    """Every run id in training order: per algorithm (:data:`ALGOS`), per warm start, per seed, no filter then Top-p
    (the smoke profile: seed 0 of the first warm start only)."""
    seeds, warm = (SEEDS[:1], WARM_STARTS[:1]) if smoke else (SEEDS, WARM_STARTS)
    return [run_id("frozenlake", algo, tag, f"{STUDY}{ws}", seed)
            for algo in ALGOS for ws in warm for seed in seeds for tag in FILTERS]


def build(smoke: bool = False) -> Profile:
    """The study's profile: ``base`` = the main pipeline's run config with :data:`FIXED`; runs = algorithms x warm
    starts x seeds x filters (:func:`run_ids`), in training order."""
    from ragen2.warmstart import warm_start_key

    base = _base(smoke)
    runs: dict[str, dict[str, Any]] = {}
    for rid in run_ids(smoke):
        parts = parse_run_id(rid)
        runs[rid] = {"seed": parts["seed"], "trainer": {"algo": parts["algo"]},
                     "filter": copy.deepcopy(FILTERS[parts["filter_tag"]]),
                     "warm_start": {"seed": int(parts["study_value"])}}
    runs = _with_overrides_minimal(base, runs)
    name = "decline_smoke" if smoke else "decline"
    probe = Profile(name=name, base=base, runs=runs, notebooks={})
    keys = {rid: f"{CACHE_DIR}/warm_start/{warm_start_key(probe.config(rid))}" for rid in runs}
    notebooks = {"decline": {"smoke": smoke}}
    return Profile(name=name, base=base, runs=runs, notebooks=notebooks, warm_start_keys=keys,
                   written_by=f"python -m ragen2 profile {name} --write {PARAMS}")


def params(profile: Profile) -> dict[str, Any]:
    """The params file's content: ``base``, ``runs`` and ``pipeline`` (with the bundle's place)."""
    return own_pipelines.params(PIPELINE, profile, {"bundle_runs": BUNDLE_RUNS})


def params_yaml(profile: Profile) -> str:
    return own_pipelines.params_yaml(PIPELINE, profile, {"bundle_runs": BUNDLE_RUNS})


def bundled_runs(profile: Profile, bundle_runs: str | Path = BUNDLE_RUNS) -> list[str]:
    """The runs of ``profile`` finished in the committed bundle (:func:`ragen2.repro.bundle.finished_runs`): ``make
    decline`` does not train them again."""
    from ragen2.repro.bundle import finished_runs

    return finished_runs(Path(bundle_runs), {rid: profile.config(rid) for rid in profile.runs})


def cell_of(rid: str) -> tuple[str, int, str]:
    """``(algo, warm start SFT seed, filter tag)`` of a decline run id."""
    parts = parse_run_id(rid)
    return parts["algo"], int(parts["study_value"]), parts["filter_tag"]


def unfinished_note(runs_root: str | Path, smoke: bool = False) -> str | None:
    """None when every run of the study (:func:`build`) is finished under ``runs_root`` (a bundle's runs folder:
    :func:`bundled_runs`); else a line saying how many are, per algorithm, and that no result is read before all are
    (docs/preregistrations.md §7.19)."""
    profile = build(smoke)
    done = set(bundled_runs(profile, runs_root))
    if done == set(profile.runs):
        return None
    counts = ", ".join(f"{algo.upper()} {sum(r in done for r in profile.runs if cell_of(r)[0] == algo)}/"
                       f"{sum(cell_of(r)[0] == algo for r in profile.runs)}" for algo in ALGOS)
    return (f"The decline study is not finished: {len(done)} of its {len(profile.runs)} runs are ({counts}; "
            f"`make decline` trains the rest, in chunks that resume). As pre-registered (docs/preregistrations.md "
            "§7.19), no table, figure or verdict is read before every run is in.")
