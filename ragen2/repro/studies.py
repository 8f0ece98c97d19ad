"""The studies of a pipeline run as tables: which runs a notebook loads, and how runs of two studies pair up.

A study is the ``<study>`` part of a run id (:mod:`ragen2.repro.run_ids`; the studies of a profile are
:data:`ragen2.repro.study_catalog.CATALOG`). :func:`load_study` reads only the run directories of the studies
asked for, so a notebook's outputs depend on exactly the runs its DVC stage declares
(:mod:`ragen2.repro.notebook_stages`).

- Loading: :func:`study_run_dirs`, :func:`load_study` (runs and steps with ``study``, ``study_value`` and
  ``filter_tag`` columns), :func:`load_study_grad_tables`, :func:`slip_runs` (C5),
  :func:`mechanism_arms` (C6's treated and control runs), :func:`curve_steps` (the runs the success curves
  show).
- Pairing runs across studies on equal settings (:data:`SETTING_COLUMNS`): :func:`borrowed_points` (a
  profile with ``reuse_main`` trains a shared point once, in the main study), :func:`sweep_table`,
  :func:`matched_differences`, :func:`filter_gain_units` and :func:`sweep_units` (C7's test units).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ragen2.repro import study_catalog
from ragen2.repro.run_ids import parse_run_id
from ragen2.repro.runs import (
    EPISODE_COLUMNS,
    MI_METRIC,
    final_values,
    find_run_dirs,
    read_grad_tables,
    read_runs,
)


def _wanted(studies: str | Sequence[str]) -> set[str]:
    return {studies} if isinstance(studies, str) else set(studies)


def study_run_dirs(runs_root: str | Path, studies: str | Sequence[str]) -> list[Path]:
    """The run directories under ``runs_root`` whose run id belongs to one of ``studies``, sorted by name.

    Raises:
        FileNotFoundError: ``runs_root`` holds no run directory.
        ValueError: a run directory's name is not a run id.
    """
    wanted = _wanted(studies)
    return [d for d in find_run_dirs(runs_root) if parse_run_id(d.name)["study"] in wanted]


def load_study(runs_root: str | Path, studies: str | Sequence[str],
               metrics: Sequence[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs (and their steps) of the given studies, with the run-id parts as columns.

    Only the directories of these studies are read (:func:`study_run_dirs`).

    Args:
        runs_root: folder of run directories.
        studies: study tag(s) without value (``main``, ``slip``, ``mech``, ``ent``, ...).
        metrics: per-step metrics whose final value is added to ``runs`` as columns.

    Raises:
        FileNotFoundError: no run of these studies.
    """
    wanted = _wanted(studies)
    dirs = study_run_dirs(runs_root, wanted)
    if not dirs:
        raise FileNotFoundError(f"no run of study {sorted(wanted)} under {str(runs_root)!r}")
    runs, steps = read_runs(dirs)
    parts = pd.DataFrame([parse_run_id(r) for r in runs["run_id"]])
    runs = runs.assign(study=parts["study"].to_numpy(), study_value=parts["study_value"].to_numpy(),
                       filter_tag=parts["filter_tag"].to_numpy())
    steps = steps.merge(runs[["run_id", "study", "study_value", "filter_tag"]], on="run_id")
    if metrics:
        runs = runs.merge(final_values(steps, list(metrics)), on="run_id", how="left")
    return runs, steps


def load_study_grad_tables(runs_root: str | Path, studies: str | Sequence[str]) -> pd.DataFrame:
    """The gradient-analysis tables (:func:`ragen2.repro.runs.read_grad_tables`) of the runs of ``studies``.

    Raises:
        FileNotFoundError: none of those runs has one.
    """
    return read_grad_tables(study_run_dirs(runs_root, studies))


ARM_COLUMNS = ("env", "algo", "condition", "filter.value", "filter.include_zero", "filter.loss_scaling",
               "trainer.entropy_coef", "trainer.entropy_scope", "trainer.kl_coef", "trainer.steps",
               "env.kwargs.success_rate")
"""The settings that make a run's arm (:func:`arms`): everything a study varies, but the seed and the warm start."""


def arms(runs: pd.DataFrame) -> pd.Series:
    """Each run's arm: its setting but its seed and warm start (:data:`ARM_COLUMNS` present in ``runs``), as one
    label. A no-filter run's arm ignores the filter's value and mini-batch rule (every rule trains it alike)."""
    columns = [c for c in ARM_COLUMNS if c in runs.columns]
    filtered = runs["condition"] != "none"

    def label(row) -> str:
        return " ".join(f"{c}={row[c]}" for c in columns
                        if filtered[row.name] or not c.startswith("filter."))

    return runs.apply(label, axis=1).rename("arm")


WARM_START_COLUMNS = ("warm_start.steps", "warm_start.template_fraction")
"""The config columns that tell two warm-start recipes apart in :func:`mechanism_arms`."""


MECHANISM_STUDIES = study_catalog.claim_studies("C6")
"""The studies C6 and the collapse notebooks read (:func:`mechanism_study`)."""


def mechanism_study(runs_root: str | Path) -> str:
    """The study whose runs show collapse dynamics (C6, notebooks 01 and 07): ``mech``, the collapse-mechanism
    study, where the pipeline has its runs (the paper profile, the regime map's forced cell), else ``main`` (the CPU
    profile looks for collapse in its learning regime at the paper's entropy, docs/preregistrations.md §7.17).

    Raises:
        FileNotFoundError: ``runs_root`` holds no run directory.
    """
    return "mech" if study_run_dirs(runs_root, "mech") else "main"


def mechanism_arms(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """C6's treated and control runs among ``runs`` (:func:`load_study` of the ``mech`` and ``main`` studies).

    Treated: the mechanism study's runs with the reasoning entropy bonus (``study_value > 0``). Control:
    the mechanism study's runs without it; profiles with ``reuse_main`` have none, and there the main
    study's cells of the same algorithm are the control when they start from the same warm start (same SFT
    steps and template share; seeds and filter are the same); else there is no control. Without any ``mech`` run
    (:func:`mechanism_study`) the main study's runs are the treated ones and there is no control.
    """
    mech = runs[runs["study"] == "mech"]
    if mech.empty:
        return runs[runs["study"] == "main"], runs.iloc[0:0]
    treated = mech[mech["study_value"] > 0]
    control = mech[mech["study_value"] == 0]
    if control.empty:
        control = runs[(runs["study"] == "main") & runs["algo"].isin(set(treated["algo"]))]
        for column in WARM_START_COLUMNS:
            if column in runs and not set(control[column]) <= set(treated[column]):
                control = control.iloc[0:0]
    return treated, control



def curve_steps(steps: pd.DataFrame, panel: str, algo: str = "ppo") -> pd.DataFrame:
    """The steps a success-curve figure of the main study shows.

    With one panel per algorithm (one environment: the CPU profile) every step; with one panel per
    environment, each environment's ``algo`` runs, or all of its runs where it has none (the paper profile's
    WebShop and DeepCoder, trained with GRPO only).
    """
    if panel == "algo":
        return steps
    has_algo = set(steps.loc[steps["algo"] == algo, "env"])
    return steps[(steps["algo"] == algo) | ~steps["env"].isin(has_algo)]


SWEPT_COLUMNS = study_catalog.swept_columns()
"""The config column each intervention sweep changes (its study's descriptor)."""
SETTING_COLUMNS = ("env", "algo", "trainer.steps", "trainer.entropy_coef", "trainer.entropy_scope", "trainer.kl_coef",
                   "filter.strategy", "filter.value", "filter.top_p_mode", "filter.include_zero", "env.kwargs.success_rate")
"""Config columns that must agree for a run of another study to stand in as a sweep or slip point."""


def _setting_keys(frame: pd.DataFrame, ignore: Sequence[str]) -> list[tuple]:
    cols = [c for c in SETTING_COLUMNS if c not in ignore]
    for col in cols:
        if col not in frame.columns:
            frame = frame.assign(**{col: math.nan})
    return [tuple(map(str, row)) for row in frame[cols].to_numpy()]


def borrowed_points(study_runs: pd.DataFrame, candidates: pd.DataFrame, ignore: Sequence[str]) -> pd.DataFrame:
    """Rows of ``candidates`` whose settings equal those of some run in ``study_runs`` except the ``ignore``
    columns (the swept ones): a profile with ``reuse_main`` trains such points once, in the main study.

    Both tables come from :func:`load_study`; seeds are not compared.
    """
    wanted = set(_setting_keys(study_runs, ignore))
    mask = [k in wanted for k in _setting_keys(candidates, ignore)]
    return candidates[mask]


def slip_runs(runs_root: str | Path, metrics: Sequence[str] = ()) -> pd.DataFrame:
    """C5's runs with ``slip_rate`` = 1 - FrozenLake's ``success_rate``.

    The main study's runs with the same algorithm, filter and trainer settings as some slip run (at
    any slip rate) are added as their own slip rate (FrozenLake's base 2 %), unless the slip study
    has runs at that rate and seed itself.
    """
    slip, _ = load_study(runs_root, "slip", metrics=metrics)
    try:
        main, _ = load_study(runs_root, "main", metrics=metrics)
    except FileNotFoundError:
        main = slip.iloc[0:0]
    borrowed = borrowed_points(slip, main, ignore=("env.kwargs.success_rate",))
    out = pd.concat([slip, borrowed], ignore_index=True)
    out["slip_rate"] = (1.0 - out["env.kwargs.success_rate"].astype(float)).round(6)
    return out.drop_duplicates(subset=["slip_rate", "condition", "seed", "algo"], keep="first").reset_index(drop=True)


SWEEP_TABLE_COLUMNS = ("sweep", "value", "seed", "run_id", "final_success", "final_mi")


def sweep_table(runs: pd.DataFrame, sweeps: dict[str, str], mi_metric: str = MI_METRIC,
                base: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run of the intervention sweeps: ``sweep, value, seed, run_id, final_success, final_mi`` (no rows
    when none of the sweeps has runs).

    Args:
        runs: from :func:`load_study` with the final ``mi_metric`` column.
        sweeps: study tag -> sweep label (``{"ent": "entropy coef", "kl": "KL coef", "toppsweep": "top-p"}``).
            The value is read from the config column the sweep changes (:data:`SWEPT_COLUMNS`; top-p 1.0
            = no filter).
        base: optional runs of another study (the main one) that are points of a sweep: those whose
            settings equal a sweep run's except the swept column (and, for top-p, ``include_zero``).
    """
    rows = []
    for study, label in sweeps.items():
        column = SWEPT_COLUMNS[study]
        part = runs[runs["study"] == study]
        if base is not None and len(part):
            ignore = (column, "filter.include_zero") if study == "toppsweep" else (column,)
            part = pd.concat([part, borrowed_points(part, base, ignore)], ignore_index=True)
        for d in part.to_dict("records"):
            rows.append({"sweep": label, "value": float(d[column]), "seed": d["seed"], "run_id": d["run_id"],
                         "final_success": d["final_success"], "final_mi": d.get(mi_metric, math.nan)})
    if not rows:  # a realization that trains only the main study (the CPU profile's second warm start)
        return pd.DataFrame(columns=list(SWEEP_TABLE_COLUMNS))
    return pd.DataFrame(rows).drop_duplicates(subset=["sweep", "run_id"]).reset_index(drop=True)


def unit_boards(units: pd.DataFrame) -> np.ndarray | None:
    """The ``[units, boards]`` matrix of :func:`matched_differences`' per-board differences (None unless every unit has
    one): what :func:`ragen2.repro.stats.paired_test` takes to put the evaluation's noise in its interval."""
    if units.empty or "boards" not in units or any(b is None for b in units["boards"]):
        return None
    return np.stack(units["boards"].to_list())


def matched_differences(treated: pd.DataFrame, bases: pd.DataFrame, ignore: Sequence[str],
                        value: str = "final_success") -> pd.DataFrame:
    """Paired differences ``treated - base`` with one row per base run, the unit of the test.

    A treated run is matched to the base run with the same ``seed`` and the same settings
    (:data:`SETTING_COLUMNS`, which include env and algorithm) except the ``ignore`` columns (the
    changed factor); when several bases match, the one of its own ``study`` wins, else the first.
    A base with several treated partners (e.g. top-p 0.9 and 0.6 at the same seed) gets the mean of
    its partners' values, so no run enters a test twice (pairs sharing a base are not independent).
    Runs with a NaN ``value`` and treated runs without a base are left out.

    Returns:
        ``base_run_id, env, algo, seed, n_partners, partners`` (run ids, comma-separated), ``base``,
        ``treated`` (partner mean), ``diff`` (``treated - base``), ``boards`` (the per-board ``diff``, partners'
        mean minus the base's, where ``value`` has per-board outcomes in both tables:
        :data:`ragen2.repro.runs.EPISODE_COLUMNS`; else None); empty (same columns) when nothing matches.
    """
    columns = ["base_run_id", "env", "algo", "seed", "n_partners", "partners", "base", "treated", "diff", "boards"]
    episodes = EPISODE_COLUMNS.get(value)
    has_boards = episodes is not None and episodes in treated.columns and episodes in bases.columns
    treated, bases = treated.dropna(subset=[value]), bases.dropna(subset=[value])
    def column(frame: pd.DataFrame, name: str) -> list:
        return frame[name].tolist() if name in frame.columns else [None] * len(frame)

    base_study, treated_study, treated_id = column(bases, "study"), column(treated, "study"), column(treated, "run_id")
    index: dict[tuple, list[int]] = {}
    for i, (key, seed) in enumerate(zip(_setting_keys(bases, ignore), bases["seed"])):
        index.setdefault((key, int(seed)), []).append(i)
    partners: dict[int, list[int]] = {}
    for j, (key, seed) in enumerate(zip(_setting_keys(treated, ignore), treated["seed"])):
        found = index.get((key, int(seed)), [])
        own = [i for i in found if treated_study[j] is not None and base_study[i] == treated_study[j]]
        if found:
            partners.setdefault((own or found)[0], []).append(j)
    rows = []
    for i, js in sorted(partners.items()):
        base = bases.iloc[i]
        mean = float(treated[value].iloc[js].mean())
        boards = None
        if has_boards:
            arrays = [treated[episodes].iloc[j] for j in js]
            if base[episodes] is not None and all(a is not None for a in arrays):
                boards = np.mean(arrays, axis=0) - base[episodes]
        rows.append({"base_run_id": base.get("run_id"), "env": base.get("env"), "algo": base.get("algo"),
                     "seed": int(base["seed"]), "n_partners": len(js), "partners": ",".join(str(treated_id[j]) for j in js),
                     "base": float(base[value]), "treated": mean, "diff": mean - float(base[value]), "boards": boards})
    return pd.DataFrame(rows, columns=columns)


def filter_gain_units(runs: pd.DataFrame, value: str = "final_success",
                      studies: Sequence[str] = ("main", "toppsweep")) -> pd.DataFrame:
    """C7's primary pairs: runs with Top-p < 1 vs the no-filter run with the same algorithm, seed and settings.

    Among the runs of ``studies`` (from :func:`load_study`), the treated runs are those with
    ``filter.strategy == "top_p"`` and ``filter.value < 1`` (main-study Top-p 0.9 of every algorithm,
    the top-p sweep's points), the bases those with ``condition == "none"``; matched by
    :func:`matched_differences` ignoring ``filter.value`` and ``filter.include_zero``, so a no-filter run
    with two filtered partners (CPU profile: GRPO at 0.9 and 0.6) is one unit with their mean gain.
    """
    data = runs[runs["study"].isin(list(studies))]
    top_p = (data["filter.strategy"] == "top_p") & (data["filter.value"].astype(float) < 1)
    return matched_differences(data[top_p], data[data["condition"] == "none"],
                               ("filter.value", "filter.include_zero"), value)


def sweep_units(runs: pd.DataFrame, study: str, main: pd.DataFrame | None = None,
                value: str = "final_success") -> tuple[pd.DataFrame, list[float]]:
    """A sweep's runs vs its base point, one row per base run (its swept values averaged, paired by seed).

    The base point is the ``main`` runs whose settings equal the sweep's except the swept column
    (:data:`SWEPT_COLUMNS`; the CPU profile's base is the main study's GRPO no-filter cells); when
    ``main`` has none, the sweep's own runs at its smallest value (coefficient 0). Sweep runs at a
    base value are not treated.

    Returns:
        :func:`matched_differences`'s table and the base value(s).
    """
    column = SWEPT_COLUMNS[study]
    part = runs[runs["study"] == study]
    bases = borrowed_points(part, main, (column,)) if main is not None and len(part) else part.iloc[0:0]
    if bases.empty and len(part):
        low = part[column].astype(float).min()
        bases = part[part[column].astype(float) == low]
    base_values = sorted(set(bases[column].astype(float)))
    treated = part[~part[column].astype(float).isin(base_values)]
    return matched_differences(treated, bases, (column,), value), base_values
