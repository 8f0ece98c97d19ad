"""The regime map: under which training conditions does template collapse emerge at CPU scale?

A screening study with a pipeline of its own (``regime_map/dvc.yaml``, ``make regime-map``; docs/preregistrations.md §7.11).
Four factors the paper's mechanism points at, each at two levels (:data:`FACTORS`), in a half fraction of the
2^4 design (:func:`design`: eight cells, the fourth factor's level the product of the other three's signs, so
every main effect is free of two-factor interactions). Each cell is one seed of FrozenLake GRPO with no filter
and with Top-p (the CPU main study's filter), paired, :data:`STEPS` steps, no KL and no early stop; run length
is read from the same runs at each of :data:`HORIZONS`. Every run is classified by the collapse definition of
:mod:`ragen2.repro.collapse_criteria`, fixed before these runs.

- :func:`build` writes the pipeline's params (``python -m ragen2 profile regime_map --write regime_map/params.yaml``).
- :func:`map_table` is the map: per cell and horizon the no-filter run's regime and MI change, and the Top-p minus
  none differences; :func:`cell_steps` the smoothed (H(Z|X), MI) trajectories; :mod:`ragen2.repro.reasoning_texts` the texts.
- The confirming study repeats one cell (:data:`CONFIRM_CELL`) on two disjoint sets of paired seeds
  (:data:`CONFIRM_SEED_SETS`); :func:`confirm_table` and :func:`confirm_verdicts` decide C6 in that regime.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragen2.config import RunConfig, deep_merge, from_dict
from ragen2.repro import collapse_criteria as cc
from ragen2.repro import own_pipelines
from ragen2.repro.own_pipelines import OwnPipeline
from ragen2.repro.profiles import Profile, own_pipeline_base
from ragen2.repro.run_ids import parse_run_id, run_id
from ragen2.repro.study_catalog import NO_FILTER, TOP_P, filter_label

STUDY = "map"
"""Study tag of the map's run ids (``frozenlake__grpo__none__map3__s0``: cell 3)."""
CONFIRM_STUDY = "confirm"
"""Study tag of the confirming runs (``frozenlake__grpo__none__confirm5__s1``: cell 5, seed 1)."""
CONFIRM_CELL = 5
"""The cell the confirming study repeats: the screen's largest template collapse (chosen after the screen)."""
CONFIRM_SEED_SETS = {"A": (1, 2, 3, 4), "B": (5, 6, 7, 8)}
"""Two disjoint sets of paired seeds (the screen used seed 0); a verdict must hold in both."""
STEPS = 200
HORIZONS = (100, 200)
"""Run lengths at which the map is read (the first from the same runs, cut)."""
PIPELINE = OwnPipeline(
    "regime_map", "regime-map", "ragen2/repro/regime_map.py",
    about="The regime map (ragen2/repro/regime_map.py, docs/preregistrations.md §7.11): a screening study of where template "
          "collapse emerges.",
    make_target="regime-map", notebook="09_regime_map", notebook_key="regime_map",
    notebook_code=("ragen2/repro", "ragen2/config.py", "ragen2/rundir.py", "ragen2/fileio.py", "ragen2/markdown.py",
                   "ragen2/metrics", "ragen2/rollout", "ragen2/policy.py", "ragen2/model", "ragen2/kernels.py",
                   "ragen2/evaluate.py", "ragen2/trainer", "ragen2/envs", "ragen2/warmstart.py"),
    outputs=("table_regime_map", "table_regime_map_effects", "table_regime_map_warm_starts", "fig_regime_map",
             "fig_regime_trajectories", "fig_regime_length", "table_regime_texts", "table_regime_confirm",
             "fig_regime_confirm"),
    products=True)
PARAMS, DVC_FILE, RUNS_ROOT, CACHE_DIR = PIPELINE.params_path, PIPELINE.dvc_file, PIPELINE.runs_root, PIPELINE.cache_dir
NOTEBOOK = "09_regime_map"


@dataclass(frozen=True)
class Factor:
    name: str
    path: str
    """The RunConfig key it sets."""
    levels: tuple[float, float]
    """(low, high)."""
    why: str
    label: str = ""
    """The factor in a few words, for figure labels (default: ``name``)."""


FACTORS = (
    Factor("sft_steps", "warm_start.steps", (600, 1500),
           "warm-start strength: a stronger start leaves more groups with zero reward variance (low SNR)", "SFT steps"),
    Factor("template_fraction", "warm_start.template_fraction", (0.3, 0.6),
           "share of template reasoning in the SFT corpus: how easy the template is to fall back on",
           "template share"),
    Factor("entropy_coef", "trainer.entropy_coef", (0.01, 0.03),
           "the input-agnostic regulariser (entropy bonus on reasoning tokens; 0.05 blew up into noise)",
           "entropy coef"),
    Factor("actor_lr", "trainer.actor_lr", (1e-4, 3e-4), "how far a run can drift in its steps", "lr"),
)
"""The screened factors; the last one is set by the design generator."""

FIXED = {
    "trainer": {"algo": "grpo", "steps": STEPS, "entropy_scope": "reasoning", "kl_coef": 0.0,
                "save_freq": STEPS // 2, "keep_every": STEPS // 2},
    "grad_analysis": {"enabled": False},
}
"""Settings shared by every run of the map (on top of the CPU profile's base): the mechanism study's shape."""
FILTERS = {"none": NO_FILTER, "top_p": {**TOP_P, "include_zero": False}}
"""No filter, and the CPU main study's Top-p (0.9, linear mode, zero-variance groups dropped)."""


def design(factors: Sequence[Factor] = FACTORS) -> pd.DataFrame:
    """The half-fraction 2^(k-1) design: one row per cell (``cell`` and each factor's value and sign).

    The first k-1 factors run over all sign combinations (the first varying slowest); the last factor's sign is
    their product (defining relation I = ABCD for four factors: resolution IV).
    """
    rows = []
    for cell, signs in enumerate(itertools.product((-1, 1), repeat=len(factors) - 1)):
        signs = (*signs, int(np.prod(signs)))
        row: dict[str, Any] = {"cell": cell}
        for f, s in zip(factors, signs, strict=True):
            row[f.name] = f.levels[0] if s < 0 else f.levels[1]
            row[f"{f.name}_sign"] = s
        rows.append(row)
    return pd.DataFrame(rows)


def cell_label(row: pd.Series | dict, factors: Sequence[Factor] = FACTORS) -> str:
    """``SFT steps 600 · template share 0.3 · entropy coef 0.01 · lr 0.0001``: a cell's levels, each named."""
    return " · ".join(f"{f.label or f.name} {row[f.name]:g}" for f in factors)


def _cell_overrides(row: pd.Series, factors: Sequence[Factor]) -> dict[str, Any]:
    over: dict[str, Any] = {}
    for f in factors:
        section, key = f.path.split(".")
        value = row[f.name]
        over.setdefault(section, {})[key] = int(value) if f.path == "warm_start.steps" else float(value)
    return over


def build(smoke: bool = False, seeds: int = 1) -> Profile:
    """The map's profile: ``base`` = the CPU (``smoke``: smoke) base with :data:`FIXED`, runs = cells x filters x seeds.

    Warm starts live in :data:`CACHE_DIR`, runs in :data:`RUNS_ROOT` (``pipeline`` says so).
    """
    from ragen2.repro.profiles import _with_overrides_minimal
    from ragen2.warmstart import warm_start_key

    base = deep_merge(own_pipeline_base(smoke), FIXED)
    if smoke:
        base = deep_merge(base, {"trainer": {"steps": 2, "save_freq": 1, "keep_every": 1}})
    from_dict(RunConfig, base)
    cells = design()
    factors = FACTORS
    if smoke:  # the smoke warm starts: the smoke profile's SFT length at both "strength" levels (1x and 2x)
        smoke_steps = base["warm_start"]["steps"]
        factors = (Factor(FACTORS[0].name, FACTORS[0].path, (smoke_steps, 2 * smoke_steps), FACTORS[0].why),
                   *FACTORS[1:])
        cells = design(factors)
    runs: dict[str, dict[str, Any]] = {}
    confirm_seeds = [s for group in CONFIRM_SEED_SETS.values() for s in group]
    for _, row in cells.iterrows():
        blocks = [(STUDY, range(seeds))]
        if int(row["cell"]) == CONFIRM_CELL:
            blocks.append((CONFIRM_STUDY, [g[0] for g in CONFIRM_SEED_SETS.values()] if smoke else confirm_seeds))
        for study, study_seeds in blocks:
            for filt in FILTERS.values():
                for seed in study_seeds:
                    rid = run_id("frozenlake", "grpo", filter_label(filt), f"{study}{int(row['cell'])}", seed)
                    runs[rid] = deep_merge({"seed": seed, "filter": dict(filt)}, _cell_overrides(row, factors))
    runs = _with_overrides_minimal(base, runs)
    probe = Profile(name="regime_map", base=base, runs=runs, notebooks={})
    keys = {rid: f"{CACHE_DIR}/warm_start/{warm_start_key(probe.config(rid))}" for rid in runs}
    notebooks = {"regime_map": {"smoke": smoke, "boards": 2 if smoke else 3, "samples": 1 if smoke else 2}}
    return Profile(name="regime_map_smoke" if smoke else "regime_map", base=base, runs=runs, notebooks=notebooks,
                   warm_start_keys=keys,
                   written_by=f"python -m ragen2 profile {'regime_map_smoke' if smoke else 'regime_map'} "
                              f"--write {PARAMS}")


def params(profile: Profile) -> dict[str, Any]:
    """The map pipeline's params file: ``base``, ``runs`` and ``pipeline`` (no realization check: one screen)."""
    return own_pipelines.params(PIPELINE, profile)


def params_yaml(profile: Profile) -> str:
    return own_pipelines.params_yaml(PIPELINE, profile)


# ---------------------------------------------------------------------------------------------
# Reading the map
# ---------------------------------------------------------------------------------------------
def _cell(run_id: str) -> int:
    """The cell of a map or confirming run, from its run id (the study's value)."""
    return int(parse_run_id(run_id)["study_value"])


def _run_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """``run_id, cell, seed, condition`` of each run (condition and seed as :func:`ragen2.repro.runs.read_runs`
    labels them)."""
    return runs[["run_id", "seed", "condition"]].assign(cell=runs["run_id"].map(_cell))


def map_table(runs: pd.DataFrame, steps: pd.DataFrame, warm_starts: pd.DataFrame | None = None,
              horizons: Sequence[int] = HORIZONS, env_groups: int = 8) -> pd.DataFrame:
    """The regime map: one row per (cell, seed, horizon).

    Columns: the cell's factor levels; ``ws_greedy_success`` (the greedy success of the cell's warm start, when
    ``warm_starts``, a :func:`ragen2.repro.warm_starts.warm_start_table`, is given);
    ``regime_none`` / ``regime_top_p`` (:func:`ragen2.repro.collapse_criteria.classify_run` on the steps up to the
    horizon); for the no-filter run ``mi_change_none`` (smoothed end minus first reading), ``mi_drop_none`` (peak
    minus end), ``entropy_change_none`` (H(Z|X), end minus first), ``shared_prefix_rise_none``,
    ``length_ratio_none``, ``zero_variance_share_none`` (zero-variance groups over ``env_groups``, mean of the
    horizon's last 20 steps) and ``success_change_none`` (validation success, last minus first); and the paired
    Top-p minus none differences of the smoothed final MI (``mi_diff``) and final validation success
    (``success_diff``, mean of the last :data:`~ragen2.repro.collapse_criteria.SMOOTH_READINGS` validations).
    """
    runs = runs[runs["run_id"].map(lambda r: parse_run_id(r)["study"] == STUDY)]
    labels = _run_cells(runs).set_index("run_id")
    levels = runs.set_index("run_id")[[f.path for f in FACTORS]]
    wide = cc.wide_steps(steps)
    rows = []
    for horizon in horizons:
        cut = wide[wide["step"] <= horizon]
        per_run = {}
        for rid, frame in cut.groupby("run_id"):
            klass = cc.classify_run(frame)
            zero = frame[["step", "filter/zero_variance_count"]].dropna() if "filter/zero_variance_count" in frame \
                else pd.DataFrame(columns=["step", "filter/zero_variance_count"])
            success = frame[["step", "val/success"]].dropna().sort_values("step") if "val/success" in frame \
                else pd.DataFrame(columns=["step", "val/success"])
            per_run[rid] = {**klass, "final_mi_smoothed": klass["mi_end"],
                            "final_success": cc.last_smoothed(frame, "val/success"),
                            "success_change": (float(success["val/success"].iloc[-1] - success["val/success"].iloc[0])
                                               if len(success) else math.nan),
                            "zero_variance_share": (float(zero.sort_values("step").tail(20)[
                                "filter/zero_variance_count"].mean()) / env_groups if len(zero) else math.nan)}
        for (cell, seed), group in labels.groupby(["cell", "seed"]):  # the map's runs only (not the confirming ones)
            by_cond = {cond: per_run.get(rid) for rid, cond in zip(group.index, group["condition"], strict=True)}
            none, top = by_cond.get("none"), by_cond.get("top_p")
            values = {f.name: levels.loc[group.index[0], f.path] for f in FACTORS}  # the cell's levels, from its config
            row: dict[str, Any] = {"cell": cell, "label": cell_label(values), "seed": seed, "horizon": horizon,
                                   **values}
            if warm_starts is not None:
                match = warm_starts[(warm_starts["sft_steps"] == row["sft_steps"])
                                    & np.isclose(warm_starts["template_fraction"], row["template_fraction"])]
                row["ws_greedy_success"] = float(match["greedy_success"].iloc[0]) if len(match) else math.nan
            row["regime_none"] = none["regime"] if none else "missing"
            row["regime_top_p"] = top["regime"] if top else "missing"
            for key, col in (("mi_change", "mi_change_none"), ("mi_drop", "mi_drop_none"),
                             ("entropy_rise_from_start", "entropy_change_none"),
                             ("shared_prefix_rise", "shared_prefix_rise_none"), ("length_ratio", "length_ratio_none"),
                             ("zero_variance_share", "zero_variance_share_none"),
                             ("success_change", "success_change_none")):
                if key == "mi_change":
                    row[col] = none["mi_end"] - none["mi_start"] if none else math.nan
                else:
                    row[col] = none[key] if none else math.nan
            row["mi_diff"] = top["final_mi_smoothed"] - none["final_mi_smoothed"] if none and top else math.nan
            row["success_diff"] = top["final_success"] - none["final_success"] if none and top else math.nan
            rows.append(row)
    return pd.DataFrame(rows)


def factor_effects(table: pd.DataFrame, column: str = "mi_change_none") -> pd.DataFrame:
    """Main effect of each factor on ``column`` per horizon: mean at the high level minus mean at the low level."""
    rows = []
    for horizon, part in table.groupby("horizon"):
        for f in FACTORS:
            lo, hi = sorted(part[f.name].unique())[0], sorted(part[f.name].unique())[-1]
            high, low = part.loc[part[f.name] == hi, column], part.loc[part[f.name] == lo, column]
            rows.append({"horizon": horizon, "factor": f.name, "low": lo, "high": hi,
                         "effect": float(high.mean() - low.mean()), "cells": int(len(part))})
    return pd.DataFrame(rows)


def cell_steps(steps: pd.DataFrame, smooth: int = cc.SMOOTH_READINGS) -> pd.DataFrame:
    """:func:`ragen2.repro.collapse_criteria.plane_steps` with each run's ``cell``."""
    plane = cc.plane_steps(steps, smooth)
    plane.insert(1, "cell", plane["run_id"].map(_cell).astype(int) if len(plane) else pd.Series(dtype=int))
    return plane


def factors_table(factors: Sequence[Factor] = FACTORS) -> pd.DataFrame:
    """The screened factors: name, the config key it sets, its two levels and why it is on the map."""
    return pd.DataFrame([{"factor": f.name, "config key": f.path, "low": f.levels[0], "high": f.levels[1],
                          "why": f.why} for f in factors])


def with_cells(steps: pd.DataFrame) -> pd.DataFrame:
    """The map's tidy steps with each run's ``cell`` (from its run id)."""
    cells = {rid: _cell(rid) for rid in steps["run_id"].unique()}
    return steps.assign(cell=steps["run_id"].map(cells))


def example_pair(table: pd.DataFrame, runs: pd.DataFrame) -> tuple[str, str]:
    """A no-filter run in template collapse at the last horizon (the one whose smoothed MI fell furthest from its
    peak; without any, the largest fall of all) and its Top-p twin.

    Chosen after the runs, so that a reader sees the template if the map has one. (The rule first written, the
    largest fall of all, picked an entropy blow-up into noise in the committed map; it was changed after seeing it.)
    """
    last = table[table["horizon"] == table["horizon"].max()]
    collapsed = last[last["regime_none"] == "template_collapse"]
    row = (collapsed if len(collapsed) else last).sort_values(["mi_drop_none", "cell"], ascending=[False, True]).iloc[0]
    labels = _run_cells(runs)
    pick = labels[(labels["cell"] == row["cell"]) & (labels["seed"] == row["seed"])].set_index("condition")
    return str(pick.loc["none", "run_id"]), str(pick.loc["top_p", "run_id"])


def summary(table: pd.DataFrame) -> str:
    """One sentence per horizon: how many cells' no-filter runs fall in each regime, and where MI fell."""
    out = []
    for horizon, part in table.groupby("horizon"):
        counts = part["regime_none"].value_counts()
        regimes = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items())
        fell = part[part["mi_change_none"] < 0]
        out.append(f"After {horizon} steps the no-filter runs of the {len(part)} cells are: {regimes}; "
                   f"MI ended below its first reading in {len(fell)} of them"
                   + (f" (cells {', '.join(str(c) for c in sorted(fell['cell']))})." if len(fell) else "."))
    return " ".join(out)


# ---------------------------------------------------------------------------------------------
# The confirming study: one cell, two disjoint sets of paired seeds
# ---------------------------------------------------------------------------------------------
def confirm_table(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per confirming run: :func:`ragen2.repro.collapse_criteria.run_regimes` with its ``cell`` and
    ``seed_set``."""
    set_of = {seed: name for name, group in CONFIRM_SEED_SETS.items() for seed in group}
    confirm = runs[[parse_run_id(rid)["study"] == CONFIRM_STUDY for rid in runs["run_id"]]]
    table = cc.run_regimes(confirm, steps)
    if table.empty:
        return table
    table = table.assign(cell=table["run_id"].map(_cell), seed_set=table["seed"].map(lambda s: set_of.get(s, "?")))
    first = ["run_id", "cell", "seed", "seed_set"]
    return table[first + [c for c in table.columns if c not in first]]


def confirm_verdicts(table: pd.DataFrame) -> dict[str, Any]:
    """C6 in the collapse regime, decided per seed set and then across both (docs/preregistrations.md §7.11).

    Per seed set: the no-filter condition *collapses* when at least half its runs are in template collapse
    (:func:`ragen2.repro.collapse_criteria.condition_collapses`); the MI part is the paired test of final MI, Top-p
    minus none (:func:`ragen2.repro.claim_tests.paired_claim`, against C6's smallest effect). The set's verdict:
    ``agree`` when no filter collapses, Top-p does not and the MI part agrees; ``disagree`` when no filter collapses
    and Top-p collapses too or the MI part disagrees; else ``inconclusive`` (no collapse to prevent, or an
    undecided MI part). Across sets: a verdict stands when both sets give it, else ``inconclusive`` (fragile).

    Returns:
        ``sets`` (set name -> dict of ``collapses_none``, ``collapses_top_p``, ``mi`` (the paired Claim) and
        ``verdict``) and ``claim``, the C6 :class:`~ragen2.repro.claims.Claim` in this regime.
    """
    from ragen2.repro.claims import Claim
    from ragen2.repro.verdicts import collapse_regime_verdict

    sets: dict[str, dict[str, Any]] = {}
    lines = []
    for name, part in table.groupby("seed_set", sort=True):
        sets[str(name)] = collapse_regime_verdict(part, what=f"seed set {name}")
        lines.append(f"set {name}: {sets[str(name)]['summary']}")
    verdicts = {v["verdict"] for v in sets.values()}
    final = verdicts.pop() if len(sets) >= 2 and len(verdicts) == 1 else "inconclusive"
    counts = "; ".join(lines)
    cell = int(table["cell"].iloc[0]) if len(table) else CONFIRM_CELL
    fragile = " (the seed sets disagree: fragile)" if final == "inconclusive" and len(
        {v["verdict"] for v in sets.values()}) > 1 else ""
    claim = Claim("C6", final, f"regime-map cell {cell}, {STEPS} steps: {counts}{fragile}")
    return {"sets": sets, "claim": claim}
