"""The paper's success curves on its multi-turn environments, SearchQA and WebShop, at CPU scale.

A pipeline of its own (``curves/dvc.yaml``, ``make curves``; docs/preregistrations.md §7.14) beside the paper's, because
``make repro`` has no minutes left for them: SearchQA (PPO) and WebShop (GRPO), each under no filter, Top-p 0.9 and
Top-k 0.25, in multi-turn variants with one action per turn (the policy reads what its search or click returns).
Notebook ``10_multiturn_curves`` draws the curves and tabulates the final success; no claim is tested on them.

``python -m ragen2 profile curves --write curves/params.yaml`` writes the params file from :func:`build`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragen2.config import RunConfig, deep_merge, from_dict
from ragen2.repro import own_pipelines
from ragen2.repro.own_pipelines import OwnPipeline
from ragen2.repro.profiles import Profile, _with_overrides_minimal, own_pipeline_base
from ragen2.repro.run_ids import run_id
from ragen2.repro.study_catalog import NO_FILTER, TOP_K, TOP_P, filter_label

STUDY = "curves"
"""The study tag of every run of this pipeline (``searchqa__ppo__none__curves__s0``)."""
PIPELINE = OwnPipeline(
    "curves", "multi-turn curves", "ragen2/repro/multiturn_curves.py",
    about="The paper's success curves on SearchQA and WebShop (ragen2/repro/multiturn_curves.py, "
          "docs/preregistrations.md §7.14).",
    make_target="curves", notebook="10_multiturn_curves", notebook_key="multiturn_curves",
    notebook_code=("ragen2/repro", "ragen2/config.py", "ragen2/rundir.py", "ragen2/fileio.py", "ragen2/markdown.py"),
    outputs=("table_multiturn_warm_starts", "table_multiturn_main", "table_multiturn_learning",
             "fig_success_curves_multiturn", "fig_output_length_multiturn"))
PARAMS, DVC_FILE, RUNS_ROOT, CACHE_DIR = PIPELINE.params_path, PIPELINE.dvc_file, PIPELINE.runs_root, PIPELINE.cache_dir
NOTEBOOK = "10_multiturn_curves"
STEPS = 30
"""RL steps per run: the CPU profile's table runs'."""
FILTERS = (NO_FILTER, {**TOP_P, "include_zero": False}, TOP_K)
"""No filter, Top-p 0.9 (linear, without zero-RV groups, as the CPU profile's table) and Top-k 0.25."""
ONLY_CURVES = {"collapse": {"enabled": False}, "grad_analysis": {"enabled": False}}
"""The runs feed curves and a table only: no MI diagnostics, no gradient decomposition."""


@dataclass(frozen=True)
class CurveEnv:
    """One environment of the curves: its algorithm, paired seeds, and overrides of the CPU base (the variant)."""

    env: str
    algo: str
    seeds: int
    overrides: dict[str, Any]
    why: str


def _turns(n: int) -> dict[str, Any]:
    return {"max_turns": n, "max_actions_per_turn": 1, "max_actions_per_traj": n}


CURVE_ENVS = (
    CurveEnv("searchqa", "ppo", 4,
             {"env": {"kwargs": {"hops": 1, "top_k": 2}}, "rollout": _turns(3), "warm_start": {"steps": 200}},
             "one hop, two passages per search, up to 3 turns; 200 SFT steps give a partial start (600 gave greedy "
             "success 1.0, 100 gave 0.0)"),
    CurveEnv("webshop", "grpo", 2,
             {"env": {"kwargs": {"num_products": 10}}, "rollout": _turns(6),
              "warm_start": {"steps": 200, "batch_size": 16}},
             "a 10-product catalog, up to 6 turns (search, open, options, buy); 200 SFT steps of 16 (FrozenLake's "
             "600 of 32 take about 25 minutes); a GRPO step costs about 30 s, so 2 seeds"),
)
"""docs/preregistrations.md §7.14: the variants and why (chosen from warm-start probes and step costs, before any RL run)."""


def build(smoke: bool = False) -> Profile:
    """The curves' profile: ``base`` = the CPU (``smoke``: smoke) base at :data:`STEPS` steps, runs = environments x
    :data:`FILTERS` x seeds. The smoke profile keeps its own tiny warm start and steps (numbers mean nothing).

    Warm starts live in :data:`CACHE_DIR`, runs in :data:`RUNS_ROOT` (``pipeline`` says so).
    """
    from ragen2.warmstart import warm_start_key

    base = own_pipeline_base(smoke)
    base = deep_merge(base, {"trainer": {"steps": 2, "save_freq": 1, "keep_every": 1}} if smoke
                      else {"trainer": {"steps": STEPS}})
    from_dict(RunConfig, base)
    runs: dict[str, dict[str, Any]] = {}
    for curve in CURVE_ENVS:
        variant = curve.overrides
        if smoke:  # the smoke warm start (its steps and batch), the environment's variant otherwise
            variant = {k: v for k, v in variant.items() if k != "warm_start"}
        for filt in FILTERS:
            for seed in range(1 if smoke else curve.seeds):
                rid = run_id(curve.env, curve.algo, filter_label(filt), STUDY, seed)
                runs[rid] = deep_merge({"seed": seed, "env": {"name": curve.env}, "trainer": {"algo": curve.algo},
                                        "filter": dict(filt), **ONLY_CURVES}, variant)
    runs = _with_overrides_minimal(base, runs)
    name = "curves_smoke" if smoke else "curves"
    probe = Profile(name=name, base=base, runs=runs, notebooks={})
    keys = {rid: f"{CACHE_DIR}/warm_start/{warm_start_key(probe.config(rid))}" for rid in runs}
    return Profile(name=name, base=base, runs=runs, notebooks={"multiturn_curves": {"smoke": smoke}},
                   warm_start_keys=keys, written_by=f"python -m ragen2 profile {name} --write {PARAMS}")


def params(profile: Profile) -> dict[str, Any]:
    """The curves pipeline's params file: ``base``, ``runs`` and ``pipeline`` (no realization check: no claim)."""
    return own_pipelines.params(PIPELINE, profile)


def params_yaml(profile: Profile) -> str:
    return own_pipelines.params_yaml(PIPELINE, profile)


def variants_table():
    """One row per environment: algorithm, paired seeds, the variant's settings and why (for notebook 10)."""
    import pandas as pd

    rows = []
    for c in CURVE_ENVS:
        rows.append({"env": c.env, "algo": c.algo, "paired seeds": c.seeds,
                     "env.kwargs": c.overrides.get("env", {}).get("kwargs", {}),
                     "max_turns": c.overrides["rollout"]["max_turns"],
                     "warm_start": c.overrides.get("warm_start", {}), "why": c.why})
    return pd.DataFrame(rows)


COMPARISONS = (("top_p", "none"), ("top_k", "none"), ("top_p", "top_k"))
"""The paired differences :func:`gains_table` reports: each filter against no filter, and C1's order between them."""


def gains_table(runs, *, scale: float = 100.0):
    """Final validation success per environment: no filter's, and the paired differences of :data:`COMPARISONS`.

    Args:
        runs: one row per run with ``env, algo, condition, seed, final_success`` (:func:`~ragen2.repro.studies.load_study`).
        scale: multiplies every success (100: percent).

    Returns:
        One row per (environment, algorithm): ``none_mean``, ``none_std``, ``n_none``, and per comparison ``a_minus_b``
        (mean over the seeds run in both conditions), ``a_minus_b_std`` and ``a_minus_b_n``. Descriptive: no test.
    """
    import pandas as pd

    from ragen2.repro.tables import ALGO_LABELS, ENV_LABELS

    rows = []
    for (env, algo), part in runs.dropna(subset=["final_success"]).groupby(["env", "algo"], sort=False):
        success = part.pivot_table(index="seed", columns="condition", values="final_success") * scale
        none = success["none"].dropna() if "none" in success else pd.Series(dtype=float)
        row = {"env": ENV_LABELS.get(env, env), "algorithm": ALGO_LABELS.get(algo, algo), "n_none": len(none),
               "none_mean": none.mean(), "none_std": none.std(ddof=1)}
        for a, b in COMPARISONS:
            diff = (success[a] - success[b]).dropna() if {a, b} <= set(success.columns) else pd.Series(dtype=float)
            name = f"{a}_minus_{b}"
            row.update({name: diff.mean(), f"{name}_std": diff.std(ddof=1), f"{name}_n": len(diff)})
        rows.append(row)
    return pd.DataFrame(rows)
