"""The paper pipeline's studies, one descriptor each: the runs it trains, what it is, the claims and notebooks that
read its runs, and the setting it sweeps.

A study is the ``<study>`` part of a run id (:mod:`ragen2.repro.run_ids`). Everything that names studies reads
:data:`CATALOG`: the profiles' run grid (:func:`grid` calls each study's ``runs``), the notebook stages' inputs and
required studies (:func:`notebook_studies`, :func:`required_studies`), the missing-runs note (``label``), the
verdicts (:func:`claim_studies`) and the sweep tables (:func:`swept_columns`). A new study is one :class:`Study` in
:data:`CATALOG` with its run builder beside it.

A run builder gets the profile's :class:`Sizes` and ``add(env, algo, filter, study_tag, seeds, extra)``, which
defines ``seeds`` paired runs of one cell (``extra``: overrides of the base config); ``study_tag`` is the study's
name, followed by the value it sweeps for the studies whose runs differ in one (``slip0p05``, ``ent0p01``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragen2.config import deep_merge
from ragen2.repro.run_ids import filter_tag, fmt_value, parse_run_id, run_id

NO_FILTER = {"strategy": "top_p", "value": 1.0, "include_zero": True}
TOP_P = {"strategy": "top_p", "value": 0.9}
TOP_K = {"strategy": "top_k", "value": 0.25, "include_zero": True}
FROZENLAKE_BASE_SUCCESS_RATE = 0.98
"""FrozenLake's base ``success_rate`` (2 % slip, the paper's text); the warm start is built on it for every slip."""


@dataclass(frozen=True)
class Sizes:
    """How big each study is in a profile (the study design itself is shared by all profiles)."""

    steps: int
    """RL steps of the main study (``base.trainer.steps``)."""
    main_envs: tuple[str, ...]
    main_algos: tuple[str, ...]
    main_seeds: int
    topk: bool
    """Add Top-k 0.25 PPO runs to the main study (the success-curves figure)."""
    mech_steps: int
    mech_seeds: int
    control_seeds: int
    """Seeds of the entropy-0 control of the mechanism study (0: the main study's ``aux_algo`` cells,
    which have the same warm start, seeds and steps and a near-zero entropy bonus, are the control)."""
    aux_steps: int
    """RL steps of the slip and sweep studies."""
    aux_algo: str
    """Algorithm of the slip and sweep studies."""
    mech_algo: str
    """Algorithm of the mechanism study (on FrozenLake)."""
    main_include_zero: bool
    """``filter.include_zero`` of the main study's Top-p runs (the paper's main table: True, softmax mode)."""
    reuse_main: bool
    """The main study's ``aux_algo`` cells double as the slip study's base slip rate and as the base point of
    every intervention sweep (one factor changed at a time), so those points are not trained twice
    (:func:`ragen2.repro.studies.slip_runs`, :func:`ragen2.repro.studies.sweep_table`)."""
    slips: tuple[float, ...]
    slip_seeds: int
    sweep_env: str
    ent_values: tuple[float, ...]
    kl_values: tuple[float, ...]
    topp_values: tuple[float, ...]
    sweep_seeds: int
    curve_envs: tuple[tuple[str, str], ...] = ()
    """``(env, algorithm)`` pairs added to the main study with no filter, Top-p and Top-k: the environments of
    the paper's success curves that are not in its main table (docs/preregistrations.md §7.4)."""
    mech_entropy: float = 0.02
    """The mechanism study's entropy bonus on the reasoning tokens."""
    mech_warm_start_steps: int = 0
    """SFT steps of the mechanism study's own warm start (0: the base's warm start, shared with the other studies)."""
    mech_topk: bool = False
    """Add Top-k 0.25 runs to the mechanism study (the filter variants inside the collapse regime)."""
    testbed_envs: tuple[str, ...] = ()
    """The main table's environments beyond ``main_envs``, trained in the ``testbed`` study (docs/preregistrations.md §7.13):
    PPO under no filter, Top-p and Top-k with ``testbed_seeds`` seeds, the other ``main_algos`` under no filter and
    Top-p with ``testbed_other_seeds``; the ``main_envs`` get their PPO Top-k runs there too (unless ``topk`` puts
    them in ``main``). No MI diagnostics or gradient decomposition: the study feeds C1 and the curves only."""
    testbed_seeds: int = 0
    testbed_other_seeds: int = 0
    testbed_curve_envs: tuple[tuple[str, str], ...] = ()
    """``(env, algorithm)`` pairs of the paper's success curves beyond its main table that the ``testbed`` study
    trains under no filter, Top-p and Top-k with ``testbed_curve_seeds`` paired seeds (docs/preregistrations.md §7.13): they
    are drawn and decide no claim, so the realization check does not re-train them
    (:func:`ragen2.repro.profiles.in_realization_check`)."""
    testbed_curve_seeds: int = 0
    topk_algos: tuple[str, ...] = ("ppo",)
    """The ``main_algos`` whose main-study cells get Top-k 0.25 runs when ``topk`` is set."""
    main_overrides: dict[str, Any] = field(default_factory=dict)
    """Run-config overrides of the main study's runs, merged after its own (the smoke profile's: the CPU profile's
    warm start and rollout sizes and enough steps for its runs to show collapse, the other studies staying tiny)."""
    realization_sweeps: bool = True
    """Whether the realization check re-trains the intervention sweeps' runs (``ent``, ``kl``, ``toppsweep``); when
    False their verdict rests on the first warm start only (:func:`ragen2.repro.profiles.in_realization_check`)."""
    topk_seeds: int | None = None
    """Seeds of the main study's Top-k cells (None: ``main_seeds``)."""
    fixedmb_seeds: int = 0
    """Seeds of the ``fixedmb`` study: the main study's filters under the reference code's fixed mini-batch
    (``filter.loss_scaling: none``), paired with the main study's first seeds, on the first warm start only."""


class AddRuns(Protocol):
    def __call__(self, env: str, algo: str, filt: dict[str, Any], study_tag: str, seeds: int,
                 extra: dict[str, Any]) -> None: ...


def filter_label(filt: dict[str, Any]) -> str:
    """The run-id tag of a filter setting: ``none`` for top-p 1.0 keeping zero-variance groups, else
    :func:`ragen2.repro.run_ids.filter_tag`."""
    if filt["strategy"] == "top_p" and filt["value"] >= 1 and filt.get("include_zero", True):
        return "none"
    return filter_tag(filt["strategy"], filt["value"])


def _top_p_main(sizes: Sizes) -> dict[str, Any]:
    return {**TOP_P, "include_zero": sizes.main_include_zero}


def _grad(algo: str) -> dict[str, Any]:
    return {"grad_analysis": {"enabled": algo in ("ppo", "grpo")}}


# ---------------------------------------------------------------------------------------------
# Run builders, one per study
# ---------------------------------------------------------------------------------------------
def main_runs(sizes: Sizes, add: AddRuns) -> None:
    """No filter vs Top-p (and Top-k) on the main environments and algorithms, the gradient decomposition on PPO and
    GRPO; then the success curves' other environments under all three filters."""
    for env in sizes.main_envs:
        for algo in sizes.main_algos:
            for filt in (NO_FILTER, _top_p_main(sizes)):
                add(env, algo, filt, "main", sizes.main_seeds, deep_merge(_grad(algo), sizes.main_overrides))
        if sizes.topk:
            seeds = sizes.main_seeds if sizes.topk_seeds is None else sizes.topk_seeds
            for algo in (a for a in sizes.main_algos if a in sizes.topk_algos):
                add(env, algo, TOP_K, "main", seeds,
                    deep_merge({"grad_analysis": {"enabled": True}}, sizes.main_overrides))
    for env, algo in sizes.curve_envs:  # their filter mode: the profile's env settings
        for filt in (NO_FILTER, _top_p_main(sizes), TOP_K):
            add(env, algo, filt, "main", sizes.main_seeds, deep_merge(_grad(algo), sizes.main_overrides))


def fixedmb_runs(sizes: Sizes, add: AddRuns) -> None:
    """The update-count control: the main study's Top-p (and Top-k) cells under the reference code's fixed
    mini-batch and unscaled loss (``filter.loss_scaling: none``), where a step that keeps a share rho of the groups
    makes about rho times the optimiser updates; the main study's filtered cells follow the profile's rule (the CPU
    profile: the paper's, ``keep_rate``, the same updates every step). Paired with the main study's seeds."""
    if not sizes.fixedmb_seeds:
        return
    fixed = {"loss_scaling": "none"}
    for env in sizes.main_envs:
        for algo in sizes.main_algos:
            filters = [_top_p_main(sizes)] + ([TOP_K] if sizes.topk and algo in sizes.topk_algos else [])
            for filt in filters:
                add(env, algo, {**filt, **fixed}, "fixedmb", sizes.fixedmb_seeds,
                    {"grad_analysis": {"enabled": True}})


def testbed_runs(sizes: Sizes, add: AddRuns) -> None:
    """The rest of the paper's main table (its other environments, and Top-k beside Top-p for PPO) and the success
    curves' other environments, without MI diagnostics or gradient decomposition (C1 and the curves only)."""
    if not sizes.testbed_envs:
        return
    only_c1 = {"collapse": {"enabled": False}, "grad_analysis": {"enabled": False}}
    if not sizes.topk:
        for env in sizes.main_envs:
            add(env, "ppo", TOP_K, "testbed", sizes.testbed_seeds, only_c1)
    for env in sizes.testbed_envs:
        for algo in sizes.main_algos:
            filters = (NO_FILTER, _top_p_main(sizes), TOP_K) if algo == "ppo" else (NO_FILTER, _top_p_main(sizes))
            seeds = sizes.testbed_seeds if algo == "ppo" else sizes.testbed_other_seeds
            for filt in filters:
                add(env, algo, filt, "testbed", seeds, only_c1)
    for env, algo in sizes.testbed_curve_envs:
        for filt in (NO_FILTER, _top_p_main(sizes), TOP_K):
            add(env, algo, filt, "testbed", sizes.testbed_curve_seeds, only_c1)


def mech_runs(sizes: Sizes, add: AddRuns) -> None:
    """The collapse mechanism: an entropy bonus on the reasoning tokens and its entropy-0 control, no KL, paired
    seeds, optionally its own warm start; the mid-run checkpoint is kept (notebook 07's early / mid / late
    heatmaps) and the gradient decomposition runs at the first step and the middle one."""
    filters = (NO_FILTER, _top_p_main(sizes), TOP_K) if sizes.mech_topk else (NO_FILTER, _top_p_main(sizes))
    half = max(sizes.mech_steps // 2, 1)
    for coef, seeds in ((sizes.mech_entropy, sizes.mech_seeds), (0.0, sizes.control_seeds)):
        extra = {"trainer": {"entropy_coef": coef, "entropy_scope": "reasoning", "kl_coef": 0.0,
                             "steps": sizes.mech_steps, "save_freq": half, "keep_every": half},
                 "grad_analysis": {"enabled": coef > 0, "every": half}}
        if sizes.mech_warm_start_steps:
            extra["warm_start"] = {"steps": sizes.mech_warm_start_steps}
        for filt in filters:
            add("frozenlake", sizes.mech_algo, filt, f"mech{fmt_value(coef)}", seeds, extra)


def slip_runs(sizes: Sizes, add: AddRuns) -> None:
    """FrozenLake's slip rates under no filter and Top-p, every rate from the same warm start; with ``reuse_main``
    the main study's cells are the base rate's point."""
    base_slip = None
    if sizes.reuse_main and "frozenlake" in sizes.main_envs and sizes.aux_algo in sizes.main_algos:
        base_slip = round(1.0 - FROZENLAKE_BASE_SUCCESS_RATE, 6)
    trainer = {} if sizes.reuse_main else {"entropy_coef": 0.0, "kl_coef": 0.0}
    top_p = {**TOP_P, "include_zero": sizes.main_include_zero if sizes.reuse_main else False}
    for slip in sizes.slips:
        if base_slip is not None and math.isclose(slip, base_slip):
            continue
        extra = {"env": {"kwargs": {"success_rate": round(1.0 - slip, 6)}},
                 "warm_start": {"env_kwargs": {"success_rate": FROZENLAKE_BASE_SUCCESS_RATE}},
                 "trainer": {**trainer, "steps": sizes.aux_steps}}
        for filt in (NO_FILTER, top_p):
            add("frozenlake", sizes.aux_algo, filt, f"slip{fmt_value(slip)}", sizes.slip_seeds, extra)


def _sweep_reuses_main(sizes: Sizes) -> bool:
    """Whether the sweeps change one factor at a time around the main study's ``aux_algo`` cells (their base
    points); otherwise each sweep holds the paper's other settings (docs/preregistrations.md §7.2)."""
    return sizes.reuse_main and sizes.sweep_env in sizes.main_envs and sizes.aux_algo in sizes.main_algos


def ent_runs(sizes: Sizes, add: AddRuns) -> None:
    """The entropy-coefficient sweep, without filter (KL off unless the sweep reuses the main study's cells)."""
    fixed = {} if _sweep_reuses_main(sizes) else {"kl_coef": 0.0}
    for coef in sizes.ent_values:
        add(sizes.sweep_env, sizes.aux_algo, NO_FILTER, f"ent{fmt_value(coef)}", sizes.sweep_seeds,
            {"trainer": {**fixed, "entropy_coef": coef, "steps": sizes.aux_steps}})


def kl_runs(sizes: Sizes, add: AddRuns) -> None:
    """The KL-coefficient sweep (k1), without filter (entropy off unless the sweep reuses the main study's cells)."""
    fixed = {} if _sweep_reuses_main(sizes) else {"entropy_coef": 0.0}
    for coef in sizes.kl_values:
        add(sizes.sweep_env, sizes.aux_algo, NO_FILTER, f"kl{fmt_value(coef)}", sizes.sweep_seeds,
            {"trainer": {**fixed, "kl_coef": coef, "kl_type": "k1", "steps": sizes.aux_steps}})


def toppsweep_runs(sizes: Sizes, add: AddRuns) -> None:
    """The top-p sweep in linear mode without zero-variance groups (top-p 1.0: no filter)."""
    fixed = {} if _sweep_reuses_main(sizes) else {"entropy_coef": 0.001, "kl_coef": 0.001, "kl_type": "k1"}
    for value in sizes.topp_values:
        filt = NO_FILTER if value >= 1 else {"strategy": "top_p", "value": value, "include_zero": False}
        add(sizes.sweep_env, sizes.aux_algo, filt, "toppsweep", sizes.sweep_seeds,
            {"trainer": {**fixed, "steps": sizes.aux_steps}})


# ---------------------------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Study:
    """One study: its name in run ids, what it is, how its runs are built, and who reads them."""

    name: str
    label: str
    """What the study is, in words (the missing-runs note)."""
    runs: Callable[[Sizes, AddRuns], None]
    """Defines the study's runs for a profile's :class:`Sizes` (a profile whose sizes give it none has no runs)."""
    claims: tuple[str, ...]
    """The claims whose verdicts read its runs."""
    notebooks: tuple[str, ...]
    """The paper notebooks (file stems) that load its runs."""
    required_by: tuple[str, ...] = ()
    """The notebooks that cannot run without its runs (they show the missing-runs note instead)."""
    swept_column: str | None = None
    """The config column an intervention sweep changes (C7), None for other studies."""
    swept_label: str | None = None
    """That column in words (the sweep tables and figures)."""
    realization: bool = True
    """Whether the realization check trains its runs again from the second warm start."""


ALL_NOTEBOOKS = ("01_template_collapse", "02_snr_mechanism", "03_main_results", "04_rv_quartiles",
                 "05_stochasticity", "06_diagnostics", "07_training_dynamics", "08_interventions")

CATALOG: tuple[Study, ...] = (
    Study("main", "the main comparison", main_runs, claims=("C1", "C2", "C3", "C4", "C5", "C6", "C7"),
          notebooks=ALL_NOTEBOOKS, required_by=ALL_NOTEBOOKS),
    Study("fixedmb", "the filters under the reference code's fixed mini-batch (update-count control)", fixedmb_runs,
          claims=("C2",), notebooks=("03_main_results", "06_diagnostics"), realization=False),
    Study("testbed", "the main table's other environments and Top-k", testbed_runs, claims=("C1",),
          notebooks=("03_main_results",)),
    Study("mech", "the collapse-mechanism study", mech_runs, claims=("C2", "C4", "C6"),
          notebooks=("01_template_collapse", "02_snr_mechanism", "06_diagnostics", "07_training_dynamics")),
    Study("slip", "the stochasticity sweep", slip_runs, claims=("C2", "C5"),
          notebooks=("05_stochasticity", "06_diagnostics"), required_by=("05_stochasticity",)),
    Study("ent", "the entropy sweep", ent_runs, claims=("C2", "C7"), notebooks=("06_diagnostics", "08_interventions"),
          swept_column="trainer.entropy_coef", swept_label="entropy coef"),
    Study("kl", "the KL sweep", kl_runs, claims=("C2", "C7"), notebooks=("06_diagnostics", "08_interventions"),
          swept_column="trainer.kl_coef", swept_label="KL coef"),
    Study("toppsweep", "the top-p sweep", toppsweep_runs, claims=("C2", "C7"),
          notebooks=("06_diagnostics", "08_interventions"), swept_column="filter.value", swept_label="top-p"),
)
"""The studies, in the order their runs are defined (``params.yaml``'s ``runs``)."""


def context_studies(notebook: str, claim: str | None, catalog: Sequence[Study] = CATALOG) -> tuple[str, ...]:
    """The studies ``notebook`` reads without deciding its ``claim`` on them (shown beside the claim as context)."""
    return tuple(study.name for study in catalog if notebook in study.notebooks and claim not in study.claims)


def first_warm_start_only(catalog: Sequence[Study] = CATALOG) -> tuple[str, ...]:
    """The studies the realization check does not train again."""
    return tuple(study.name for study in catalog if not study.realization)


def names(catalog: Sequence[Study] = CATALOG) -> tuple[str, ...]:
    """The study names (run-id tags without their value)."""
    return tuple(study.name for study in catalog)


def claim_studies(claim: str, catalog: Sequence[Study] = CATALOG) -> tuple[str, ...]:
    """The studies whose runs ``claim``'s verdict reads."""
    return tuple(study.name for study in catalog if claim in study.claims)


def notebook_studies(catalog: Sequence[Study] = CATALOG) -> dict[str, tuple[str, ...]]:
    """Notebook -> the studies whose runs it loads, for every notebook some study names (in file order)."""
    notebooks = sorted({nb for study in catalog for nb in study.notebooks})
    return {nb: tuple(study.name for study in catalog if nb in study.notebooks) for nb in notebooks}


def required_studies(catalog: Sequence[Study] = CATALOG) -> dict[str, tuple[str, ...]]:
    """Notebook -> the studies it cannot do without."""
    return {nb: tuple(study.name for study in catalog if nb in study.required_by) for nb in notebook_studies(catalog)}


def labels(catalog: Sequence[Study] = CATALOG) -> dict[str, str]:
    """Study -> what it is, in words."""
    return {study.name: study.label for study in catalog}


def swept_columns(catalog: Sequence[Study] = CATALOG) -> dict[str, str]:
    """Sweep study -> the config column it changes."""
    return {study.name: study.swept_column for study in catalog if study.swept_column}


def sweep_labels(catalog: Sequence[Study] = CATALOG) -> dict[str, str]:
    """Sweep study -> the changed setting in words."""
    return {study.name: study.swept_label or study.name for study in catalog if study.swept_column}


def grid(sizes: Sizes, algo_settings: dict[str, dict[str, Any]] | None = None,
         env_settings: dict[str, dict[str, Any]] | None = None,
         catalog: Sequence[Study] = CATALOG) -> dict[str, dict[str, Any]]:
    """Run id -> overrides of the base config, for every study of ``catalog`` in order. ``algo_settings`` /
    ``env_settings`` (a profile's per-algorithm / per-environment settings) are merged into every run of that
    algorithm / environment after the study's own overrides.

    Raises:
        ValueError: a run id is defined twice, or a builder tags its runs with another study's name.
    """
    runs: dict[str, dict[str, Any]] = {}
    algo_settings, env_settings = algo_settings or {}, env_settings or {}
    for study in catalog:

        def add(env: str, algo: str, filt: dict[str, Any], study_tag: str, seeds: int, extra: dict[str, Any],
                study: Study = study) -> None:
            env_part = {"name": env} if env == "frozenlake" else {"name": env, "kwargs": {}}
            for seed in range(seeds):
                rid = run_id(env, algo, filter_label(filt), study_tag, seed)
                if parse_run_id(rid)["study"] != study.name:
                    raise ValueError(f"study {study.name!r} defines run {rid!r}, tagged with another study")
                if rid in runs:
                    raise ValueError(f"run id {rid!r} is defined twice")
                over = deep_merge({"seed": seed, "env": env_part, "trainer": {"algo": algo}, "filter": dict(filt)},
                                  extra)
                over = deep_merge(deep_merge(over, algo_settings.get(algo, {})), env_settings.get(env, {}))
                runs[rid] = copy.deepcopy(over)  # no shared sub-dicts (YAML would write them as anchors)

        study.runs(sizes, add)
    return runs
