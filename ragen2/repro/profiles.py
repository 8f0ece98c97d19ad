"""Experiment profiles: the base :class:`~ragen2.config.RunConfig` and the study grid of a pipeline run.

A profile is plain Python data: ``base`` (a complete RunConfig as a dict, 1:1 with ``params.yaml``'s
``base`` section), ``runs`` (run id -> overrides of ``base``) and ``pipeline`` (metadata that is not
part of any RunConfig: the profile name, the warm starts the runs share, each run's warm-start path
for the DVC ``train`` stage, and the papermill parameters of every notebook).
``python -m ragen2 profile {cpu,smoke,paper} --write params.yaml`` writes it out. Run ids are built and
parsed by :mod:`ragen2.repro.run_ids`; ``<study>`` names the study a run belongs to (:data:`STUDIES`).

**The CPU default profile** (``cpu``): the paper's studies inside the one CPU setting where RL without a filter was
found to learn (the learning screen, :mod:`ragen2.repro.learning_screen`; design fixed in docs/preregistrations.md
§7.17 before its runs), with the seeds §7.18 fixed: about 94 minutes on 2 cores at the measured per-step cost
(:data:`S_PER_STEP`; ``python -m ragen2 profile cpu --estimate``), a little over the 90 the pipeline aims at:

- Setting: the tiny local Llama (0.4M parameters) on single-turn FrozenLake (2 % slip, up to 10 moves), warm-started by
  300 SFT steps on 4000 expert episodes of which 30 % carry a template reasoning (``warm_start.template_fraction``): a
  weak start with room to learn (the screen measured 23.6 % at temperature 0.5 on 512 seeds); GRPO, 8 prompts x 16
  rollouts, 100 steps, actor lr 1e-4, entropy 0.001, KL off, the paper's mini-batch rule (``loss_scaling: keep_rate``:
  a filtered step's mini-batch shrinks with its keep rate, so every step makes the same optimiser updates;
  docs/preregistrations.md §7.18); validation on 512 seeds at temperature 0.5 every 25 steps, the same seeds in every
  run (paired); MI diagnostics every 25 steps.
- Filter: Top-p 0.9 in *linear* mode without zero-RV groups. The paper's main table used softmax mode,
  but with 8 groups and rewards in [0, 1] the softmax weights of the group stds are almost uniform, so
  softmax top-p 0.9 keeps 7-8 of 8 groups and hardly filters (measured on binomial groups: 7.2-7.9 kept
  vs 6.2-7.6 in linear mode, which always drops zero-RV groups).
- ``main`` study (C1, C2, C3, C4, C6): no filter and Top-p with 8 paired seeds, Top-k 0.25 with 4 (every condition
  sees the same env seeds), the gradient decomposition at steps 1 and 50 with the paper's 6 RV buckets. The
  realization check trains it again from a second warm start. C6 reads these runs
  (:func:`ragen2.repro.studies.mechanism_study`): nothing forces collapse here.
- ``fixedmb`` study (the update count's own effect, and C2): Top-p and Top-k under the reference code's fixed
  mini-batch (``loss_scaling: none``), 4 seeds paired with the main study's, on the first warm start only.
- ``toppsweep`` and ``ent`` studies (C7): top-p 0.5 and entropy 0.01, one factor at a time around the main study's
  no-filter runs (their base points: ``reuse_main``), 2 seeds, on the first warm start only.
- **Not run, for the budget or because RL does not learn there** (docs/preregistrations.md §7.17): PPO (no learning
  regime in the screen), DAPO and Dr. GRPO; the testbed's other environments (Sokoban had no learning regime); the
  slip sweep (single-turn FrozenLake cannot correct a slip, multi-turn costs about ten times as much per step: C5
  reads ``untested``); the KL sweep; the forced-collapse mechanism study (kept in the regime map's pipeline). The
  ``paper`` profile has them all; the smoke profile keeps their plumbing.

Parallelism: DVC 3.67's ``dvc repro`` has no ``-j``; ``make repro`` trains the stale runs on two worker
processes (one torch thread each, dearest first: :mod:`ragen2.repro.runqueue`) and records them with
``python -m ragen2.repro commit-runs``; :func:`estimate` assumes that.

**smoke**: the same studies with tiny everything (2 training steps, 1-2 seeds, 4 x 3 rollouts of 48
tokens, a 100-step warm start on 128 episodes: the least after which the tiny policy closes its
``<think>`` tags, so the MI metrics exist), so every notebook executes. Its numbers mean nothing.

**paper**: ``Qwen/Qwen2.5-3B``, no warm start, 400 steps, 8 x 16, vLLM rollouts, the paper's
hyper-parameters (docs/method.md §6.4 and §7.1-§7.4), bf16 autocast over float32 master weights with
activation checkpointing: the main table's Sokoban, FrozenLake, MetaMathQA and Countdown x PPO/GRPO/DAPO/Dr. GRPO
x {no filter, Top-p} (+ Top-k with PPO), the success curves' SearchQA (PPO), WebShop and DeepCoder (GRPO) x
{no filter, Top-p, Top-k} on 16 x 8 with linear Top-p, all seven slip rates, the full entropy / KL / top-p
sweeps on Sokoban, 1 seed per cell; and the collapse-mechanism study of the other profiles (FrozenLake GRPO,
entropy bonus on reasoning tokens), which the paper does not have, with 4 paired seeds and a 4-seed
entropy-0 control, so that notebooks 01, 02, 06 and 07 have their runs (GPU only).
:mod:`ragen2.repro.dry_run` runs this grid's pipeline on a CPU with a tiny policy.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ragen2.config import RunConfig, deep_merge, from_dict, to_dict
from ragen2.repro import study_catalog
from ragen2.repro.run_ids import parse_run_id
from ragen2.repro.study_catalog import FROZENLAKE_BASE_SUCCESS_RATE, Sizes, grid

PROFILE_NAMES = ("cpu", "smoke", "paper")
ALGOS = ("ppo", "grpo", "dapo", "dr_grpo")
SLIPS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""Slip rates of the stochasticity sweep (C5); FrozenLake's ``success_rate`` is ``1 - slip``."""
PAPER_MAIN_ENVS = ("sokoban", "frozenlake", "metamathqa", "countdown")
"""The columns of the paper's main table (docs/preregistrations.md §7.1)."""
PAPER_CURVE_ENVS = (("searchqa", "ppo"), ("webshop", "grpo"), ("deepcoder", "grpo"))
"""The paper's success-curve environments beyond the main table, with their algorithm: GRPO for WebShop and
DeepCoder (docs/preregistrations.md §7.4); §7.4 names none for SearchQA, so it gets PPO, the main table's baseline."""
STUDIES = study_catalog.names()
"""Study tags in run ids (:data:`ragen2.repro.study_catalog.CATALOG`; ``slip``, ``ent``, ``kl`` carry their value:
``slip0p05``, ``ent0p01``)."""
SWEEP_STUDIES = tuple(study_catalog.swept_columns())
"""The intervention sweeps' studies (C7)."""
WARM_START_DIR = "data/cache/warm_start"
"""Where ``ragen2.warmstart.initial_policy`` caches warm starts (with ``--cache-dir data/cache``)."""
INITIAL_POLICY_DIR = WARM_START_DIR
"""Runs without a warm start (``warm_start.steps: 0``) get a marker dir here, so every train stage has one dep
and dvc.yaml is the same for every profile (``initial_policy`` never writes there when steps is 0)."""

S_PER_STEP: dict[str, float | dict[str, float]] = {
    "frozenlake": {"ppo": 0.75, "grpo": 1.91, "dapo": 0.63, "dr_grpo": 0.55},
    "sokoban": {"ppo": 0.85, "grpo": 0.72, "dapo": 0.73, "dr_grpo": 0.73},
    "countdown": {"ppo": 0.57, "grpo": 0.50, "dapo": 0.55, "dr_grpo": 0.47},
    "metamathqa": {"ppo": 0.52, "grpo": 0.45, "dapo": 0.50, "dr_grpo": 0.45},
    "deepcoder": {"grpo": 0.73},
}
"""Measured seconds per RL step, per environment and algorithm: each run's ``timings_s.total_elapsed`` (which includes
its validations, diagnostics and checkpoints) over its steps, on two worker processes of one torch thread each.
FrozenLake GRPO is the CPU profile's learning regime (8 x 16 rollouts, validation on 512 seeds every 25 steps, MI every
25, the gradient decomposition twice): the mean over the first realization's 32 runs of a fresh clone's ``make repro``
on 2026-12-05, a 2-core Intel Xeon (no filter 2.18, Top-p 0.9 2.06 and Top-k 0.25 1.23 s a step under the paper's
mini-batch rule, the fixed mini-batch runs 1.84). The other rates are from the earlier 8 x 8 profile (single
turn, rollouts of <= 64 tokens, validation on 64 seeds every 10 steps; 386 runs of a fresh clone's ``make repro`` on
2026-12-03) and serve the smoke and dry-run profiles' estimates. Re-measure them when the trainer's cost changes, or
:func:`estimate` drifts from the pipeline's real time."""
S_PER_COMMITTED_RUN = 0.1
"""Seconds per run to record it in ``dvc.lock`` (``commit-runs``: hashing its files, copying them into DVC's cache),
on one process, measured on 2026-12-03: 30 runs in 20 s, of which 17 s are reading and writing the lock file once
(in :data:`S_PIPELINE_FIXED`). Handing a run to a worker is inside :data:`S_PER_STEP` (the realizations' phases took
as long as their runs' summed timers over two workers); a process per run would cost 7.0 s more, mostly importing
torch and transformers, which is why :mod:`ragen2.repro.runqueue` keeps its workers."""
S_PIPELINE_FIXED = 270.0
"""Seconds of ``make repro`` outside training, warm starts, notebooks and the per-run commits, estimated from their
parts measured on 2026-12-03 on a ``dvc.lock`` of 380 runs (the grid has 314 now, so it errs high): four writes of
the lock (warm starts, each realization's runs, the notebooks; about 17 s each), the ``dvc status`` of the warm-start,
train and notebook stages before each phase (seconds while outputs are missing, about a minute for 190 existing
runs), ``dvc repro`` of the warm starts (a check) and ``dvc repro -s`` of the stages between training and the
notebooks (hashing every run for the input manifests) and of the claims."""
S_PER_WARM_START_STEP = 0.22
"""Measured: the CPU profile's eleven warm starts (both realizations of FrozenLake's 600- and 1500-step ones and of the
testbed's three 600-step ones, and DeepCoder's; corpus building, model loading and greedy evaluation included) took
15.4 minutes for their 8,400 SFT steps on two workers of one torch thread each (``make repro``'s
``build-warm-starts``), in a fresh clone on 2026-12-03: 0.22 s per SFT step and worker."""
S_PER_NOTEBOOK = 40.0
"""Seconds per executed notebook on one worker (kernel start, imports, the prompt-level rollouts of notebooks 04/07):
the eight notebooks, the realization check's seven and the claims stage took 10.1 minutes one after another in a
fresh clone's ``make repro`` on 2026-12-02, about 40 s a notebook (notebook 04 with its prompt tables: about a
minute). ``make repro`` runs the notebooks ``WORKERS`` at a time (``python -m ragen2.repro run-stages``), the claims
stage after them."""
WORKERS = 2
"""Parallel training processes (one per core)."""
NO_CLAIM_NOTEBOOKS = ("01_template_collapse",)
"""Notebooks that decide no claim: the realization check does not re-run them."""


# ---------------------------------------------------------------------------------------------
# The profile object
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """One profile: the base config, the runs, the notebooks' parameters and the warm start of each run."""

    name: str
    base: dict[str, Any]
    """A complete RunConfig as a dict."""
    runs: dict[str, dict[str, Any]]
    """Run id -> overrides of ``base``."""
    notebooks: dict[str, dict[str, Any]]
    """Notebook key -> papermill parameters (literals)."""
    warm_start_keys: dict[str, str] = field(default_factory=dict)
    """Run id -> the warm-start directory the run starts from (filled by :func:`build`)."""
    written_by: str | None = None
    """The command the params.yaml header names (None: ``python -m ragen2 profile <name> --write params.yaml``)."""
    realization_sweeps: bool = True
    """Whether the realization check re-trains the sweeps' runs (:attr:`Sizes.realization_sweeps`)."""

    def config(self, rid: str) -> RunConfig:
        """The strict RunConfig of one run (``base`` merged with its overrides)."""
        if rid not in self.runs:
            raise KeyError(f"run {rid!r} is not in profile {self.name!r}")
        return from_dict(RunConfig, deep_merge(self.base, self.runs[rid]))

    def warm_starts(self) -> dict[str, dict[str, str]]:
        """Warm-start key -> ``{run: the first run using it, path: its directory}``."""
        out: dict[str, dict[str, str]] = {}
        for rid, path in self.warm_start_keys.items():
            key = Path(path).name
            out.setdefault(key, {"run": rid, "path": path})
        return dict(sorted(out.items()))

    def realization(self) -> dict[str, Any]:
        """``pipeline.realization``: the second realization's warm starts and runs (:mod:`ragen2.repro.realization`)
        and the notebooks re-run on them (those that decide a claim)."""
        from ragen2.config import apply_overrides
        from ragen2.repro.notebook_stages import NOTEBOOK_STUDIES, parameters_key
        from ragen2.repro.realization import overrides_for, pipeline_entry

        overrides, label = overrides_for(from_dict(RunConfig, self.base).warm_start.steps)
        train = {rid: {"warm_start": _warm_start_path(apply_overrides(self.config(rid), list(overrides)))}
                 for rid in self.runs if in_realization_check(rid, sweeps=self.realization_sweeps)}
        warm_starts: dict[str, dict[str, str]] = {}
        first = self.warm_starts()
        for rid, entry in train.items():  # a warm start both realizations share is built once, by the first
            key = Path(entry["warm_start"]).name
            if key not in first:
                warm_starts.setdefault(key, {"run": rid, "path": entry["warm_start"]})
        notebooks = {nb: {"params": parameters_key(nb)} for nb in NOTEBOOK_STUDIES if nb not in NO_CLAIM_NOTEBOOKS}
        return pipeline_entry(overrides, label, dict(sorted(warm_starts.items())), train, notebooks)

    def params(self, realization: bool = True) -> dict[str, Any]:
        """The ``params.yaml`` content: ``base``, ``runs`` and ``pipeline`` (with ``pipeline.realization`` unless
        ``realization`` is False: a pipeline without the realization check, such as the regime map's)."""
        pipeline = {
            "profile": self.name,
            "warm_starts": self.warm_starts(),
            "train": {rid: {"warm_start": path} for rid, path in self.warm_start_keys.items()},
            "notebooks": copy.deepcopy(self.notebooks),
        }
        if realization:
            pipeline["realization"] = self.realization()
        return {"base": copy.deepcopy(self.base), "runs": copy.deepcopy(self.runs), "pipeline": pipeline}

    def yaml(self) -> str:
        command = self.written_by or f"python -m ragen2 profile {self.name} --write params.yaml"
        header = (f"# ragen2 parameters, written by `{command}`;"
                  " edit ragen2/repro/profiles.py, not this file.\n"
                  "# base: a complete ragen2.config.RunConfig (1:1); runs: run id -> overrides of base;\n"
                  "# pipeline: DVC/notebook metadata that is not part of any RunConfig.\n")
        return header + yaml.safe_dump(self.params(), sort_keys=False, default_flow_style=False, width=110)


# ---------------------------------------------------------------------------------------------
# Base configs
# ---------------------------------------------------------------------------------------------
def _cpu_base() -> dict[str, Any]:
    """The learning regime the screen found (docs/preregistrations.md §7.15, §7.17): FrozenLake single turn, GRPO from
    a 300-step warm start, 8 x 16 rollouts, 100 steps, validation on 512 paired seeds."""
    overrides = {
        # 2 % slip, explicit: shared by the slip study's 0.02 point
        "env": {"name": "frozenlake", "kwargs": {"success_rate": FROZENLAKE_BASE_SUCCESS_RATE}},
        # a weak start with headroom: 300 SFT steps on 4000 episodes (the screen's: 23.6 % at T = 0.5 on 512 seeds)
        "warm_start": {"steps": 300, "lr": 3e-3, "batch_size": 32, "num_episodes": 4000,
                       "template_fraction": 0.3, "seed": 0},
        # single turn with up to 10 moves (the preliminary experiment's shape, docs/preregistrations.md §7.0): 5 turns cost ~10x
        # the time on 2 cores (the screen's multi-turn cell); 8 prompts x 16 rollouts, the paper's batch
        "rollout": {"env_groups": 8, "group_size": 16, "max_turns": 1, "max_actions_per_turn": 10,
                    "max_actions_per_traj": 10, "max_new_tokens": 64, "max_context_tokens": 1024,
                    "val_groups": 512},
        # the screen's regime: GRPO, 100 steps (its step-100 reading, confirmed on fresh seeds); checkpoints at the
        # middle and the end for the prompt-level heatmaps
        "trainer": {"algo": "grpo", "steps": 100, "actor_lr": 1e-4, "critic_lr": 1e-4, "mini_batch_size": 32,
                    "micro_batch_size": 16, "entropy_coef": 0.001, "test_freq": 25, "save_freq": 50,
                    "keep_every": 50, "empty_stop_steps": 0, "rv_collapse_stop": False, "low_val_stop_patience": 0},
        # linear mode: with 8 groups and rewards in [0, 1], softmax weights of the group stds are almost
        # uniform, so softmax top-p 0.9 keeps 7-8 of 8 groups and hardly filters (see the module docstring); the
        # paper's mini-batch rule (docs/preregistrations.md §7.18; the fixedmb study keeps the reference's)
        "filter": {"strategy": "top_p", "value": 1.0, "top_p_mode": "linear", "include_zero": True,
                   "loss_scaling": "keep_rate"},
        "collapse": {"compute_freq": 25, "num_samples": 32},
        # the paper's 6 RV buckets, at the first step and the middle one
        "grad_analysis": {"enabled": False, "every": 50, "num_buckets": 6},
    }
    return deep_merge(to_dict(RunConfig()), overrides)


def _own_pipelines_cpu_base() -> dict[str, Any]:
    """The base of the CPU pipelines of their own (the regime map, the multi-turn curves, the learning screen): the CPU
    profile's base before it moved into the learning regime (docs/preregistrations.md §7.17), kept as it was so that
    their committed runs stay what their params say; each pipeline overrides what it varies."""
    overrides = {
        "env": {"name": "frozenlake", "kwargs": {"success_rate": FROZENLAKE_BASE_SUCCESS_RATE}},
        # a partial start: greedy success about 0.7 (600 steps on 4000 episodes; 500 episodes overfit)
        "warm_start": {"steps": 600, "lr": 3e-3, "batch_size": 32, "num_episodes": 4000,
                       "template_fraction": 0.3, "seed": 0},
        "rollout": {"env_groups": 8, "group_size": 8, "max_turns": 1, "max_actions_per_turn": 10,
                    "max_actions_per_traj": 10, "max_new_tokens": 64, "max_context_tokens": 1024,
                    "val_groups": 64},
        "trainer": {"algo": "ppo", "steps": 30, "actor_lr": 1e-4, "critic_lr": 1e-4, "mini_batch_size": 32,
                    "micro_batch_size": 16, "entropy_coef": 0.001, "test_freq": 10, "save_freq": 30,
                    "empty_stop_steps": 0, "rv_collapse_stop": False, "low_val_stop_patience": 0},
        "filter": {"strategy": "top_p", "value": 1.0, "top_p_mode": "linear", "include_zero": True},
        "collapse": {"compute_freq": 10, "num_samples": 32},
        "grad_analysis": {"enabled": False, "every": 15, "num_buckets": 4},
    }
    return deep_merge(to_dict(RunConfig()), overrides)


SMOKE_OVERRIDES: dict[str, Any] = {
    # the least warm start after which the tiny policy closes its <think> tags (so MI metrics exist)
    "warm_start": {"steps": 100, "batch_size": 16, "num_episodes": 128},
    "rollout": {"env_groups": 4, "group_size": 3, "max_new_tokens": 48, "val_groups": 4},
    "trainer": {"steps": 2, "mini_batch_size": 6, "micro_batch_size": 6, "test_freq": 1, "save_freq": 1},
    "collapse": {"compute_freq": 1, "num_samples": 8},
    "grad_analysis": {"every": 1, "num_buckets": 4},
}
"""What the smoke profile changes in a CPU base: tiny everything, so every notebook executes in minutes."""


def _smoke_base() -> dict[str, Any]:
    return deep_merge(_cpu_base(), SMOKE_OVERRIDES)


SMOKE_MAIN_STEPS = 40
"""RL steps of the smoke profile's main runs (the rest of its runs take 2)."""


def _smoke_main_overrides() -> dict[str, Any]:
    """The smoke profile's main study at the CPU profile's sizes (its warm start, rollouts and updates: everything
    :data:`SMOKE_OVERRIDES` shrinks), cut to :data:`SMOKE_MAIN_STEPS` steps with MI readings every 5: the CPU profile's
    first seed of no filter, Top-p and Top-k, long enough to watch the no-filter run's MI fall beside Top-k's (in the
    CPU profile's committed runs the no-filter seed-0 MI fell from 0.32 to 0.10 nats by step 25, Top-k's, under the
    paper's mini-batch rule, to 0.23, and to 0.05 by step 50). Validation on 64 boards every 10 steps and gradient
    tables every 20 keep it quick."""
    cpu = _cpu_base()
    sized = {part: {key: cpu[part][key] for key in keys} for part, keys in SMOKE_OVERRIDES.items()}
    half = SMOKE_MAIN_STEPS // 2
    return deep_merge(sized, {
        "rollout": {"val_groups": 64},
        "trainer": {"steps": SMOKE_MAIN_STEPS, "test_freq": 10, "save_freq": half, "keep_every": half},
        "collapse": {"compute_freq": 5},
        "grad_analysis": {"every": half},
    })


def own_pipeline_base(smoke: bool = False) -> dict[str, Any]:
    """The base config of a CPU pipeline of its own (:func:`_own_pipelines_cpu_base`; ``smoke``: with
    :data:`SMOKE_OVERRIDES`)."""
    base = _own_pipelines_cpu_base()
    return deep_merge(base, SMOKE_OVERRIDES) if smoke else base


def _paper_base() -> dict[str, Any]:
    """The defaults of docs/method.md §6.4 with the main-table overrides of §7.1 (Qwen2.5-3B base model, 400 steps).

    Memory (docs/paper_profile.md, "What fits one 141 GB GPU"): bf16 autocast over float32 master weights,
    activation checkpointing, the vLLM engine at 0.2 of the GPU, and PPO's micro-batches (1 row per update
    forward, 2 per no-gradient forward: the actor and critic do not fit at 2 / 4); the GRPO family gets 2 / 4
    per run (:data:`PAPER_ALGO_SETTINGS`).
    """
    overrides = {
        "env": {"name": "frozenlake", "kwargs": {"success_rate": 0.98}},
        "policy": {"name_or_path": "Qwen/Qwen2.5-3B", "dtype": "bfloat16", "device": "cuda"},
        "warm_start": {"steps": 0},
        "rollout": {"env_groups": 8, "group_size": 16, "max_new_tokens": 400, "max_context_tokens": 3600,
                    "val_groups": 512, "val_temperature": 0.5, "backend": "vllm",
                    "vllm_gpu_memory_utilization": 0.2},
        "trainer": {"algo": "ppo", "steps": 400, "actor_lr": 1e-6, "critic_lr": 1e-5, "mini_batch_size": 32,
                    "micro_batch_size": 1, "logprob_micro_batch_size": 2, "precision": "bf16",
                    "gradient_checkpointing": True, "entropy_coef": 0.001, "kl_coef": 0.0, "kl_type": "k1",
                    "test_freq": 10, "save_freq": 100},
        "filter": {"strategy": "top_p", "value": 1.0, "top_p_mode": "softmax", "include_zero": True,
                   "loss_scaling": "none"},
        "collapse": {"compute_freq": 10, "num_samples": 64},
        "grad_analysis": {"enabled": False, "every": 50, "num_buckets": 6},
    }
    return deep_merge(to_dict(RunConfig()), overrides)


PAPER_ALGO_SETTINGS: dict[str, dict[str, Any]] = {
    algo: {"trainer": {"micro_batch_size": 2, "logprob_micro_batch_size": 4}} for algo in ("grpo", "dapo", "dr_grpo")
}
"""Per-algorithm overrides of the paper profile's runs: the GRPO family (no critic) fits micro-batches of 2 / 4
(about 103 GB with vLLM at 0.2 of a 141 GB GPU; docs/paper_profile.md)."""
PAPER_ENV_SETTINGS: dict[str, dict[str, Any]] = {
    env: {"rollout": {"env_groups": 16, "group_size": 8}, "filter": {"top_p_mode": "linear"}}
    for env in ("searchqa", "webshop", "deepcoder")
}
"""Per-environment overrides of the paper profile's runs: the reference trains SearchQA, WebShop and DeepCoder
on 16 groups x 8 rollouts with linear top-p (docs/preregistrations.md §7.4)."""
CPU_ENV_SETTINGS: dict[str, dict[str, Any]] = {
    "countdown": {"env": {"kwargs": {"min_numbers": 2, "max_numbers": 2}}},
    "metamathqa": {"env": {"kwargs": {"difficulty": 1, "max_attempts": 1}}},
    "deepcoder": {"env": {"kwargs": {"difficulty": 1}}},
}
"""Per-environment overrides of the CPU and smoke profiles' runs: the single-turn variants a 0.4M-parameter policy
can partly learn (docs/preregistrations.md §7.13): Countdown with two numbers (one operation; with the paper's 3-4 numbers
600 SFT steps left greedy success 0 and no legal answer), MetaMathQA at difficulty 1 with one attempt (mixed
difficulties: greedy success 0.03). Sokoban needs none (6 x 6, one box, one turn of up to 10 moves, as FrozenLake).
DeepCoder, a success-curve environment, at difficulty 1 (one-line programs; single turn as the table's)."""
PROFILE_SETTINGS: dict[str, tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]] = {
    "cpu": ({}, CPU_ENV_SETTINGS), "smoke": ({}, CPU_ENV_SETTINGS), "paper": (PAPER_ALGO_SETTINGS, PAPER_ENV_SETTINGS)}
"""Profile -> (per-algorithm, per-environment) overrides merged into each of its runs (after the study's own)."""


SIZES = {
    # CPU: the learning regime (docs/preregistrations.md §7.17): FrozenLake GRPO under no filter, Top-p and Top-k
    # with 4 paired seeds on each of two warm starts (the realization check's), and the C7 sweeps' two new points
    # with 2 seeds on the first warm start; see the module docstring for what was cut
    "cpu": Sizes(steps=100, main_envs=("frozenlake",), main_algos=("grpo",), main_seeds=8, topk=True,
                 topk_algos=("grpo",), mech_steps=100, mech_seeds=0, control_seeds=0, aux_steps=100,
                 aux_algo="grpo", mech_algo="grpo", main_include_zero=False, reuse_main=True, slips=(),
                 slip_seeds=0, sweep_env="frozenlake", ent_values=(0.01,), kl_values=(), topp_values=(0.5,),
                 sweep_seeds=2, realization_sweeps=False, topk_seeds=4, fixedmb_seeds=4),
    # smoke: the CPU profile's shape with one seed; its main runs at the CPU sizes for 40 steps (they can collapse),
    # every other study tiny and 2 steps long (the plumbing); no mechanism study, as in the CPU profile (the paper
    # profile's dry run, `make dry-run-paper`, runs that one and PPO)
    "smoke": Sizes(steps=2, main_envs=("frozenlake",), main_algos=("grpo",), main_seeds=1, topk=True,
                   topk_algos=("grpo",), mech_steps=2, mech_seeds=0, control_seeds=0, aux_steps=2, aux_algo="grpo",
                   mech_algo="grpo", main_include_zero=False, reuse_main=True, slips=(0.02, 0.5), slip_seeds=1,
                   sweep_env="frozenlake", ent_values=(0.0,), kl_values=(0.01,), topp_values=(0.6,), sweep_seeds=1,
                   testbed_envs=("countdown",), testbed_seeds=1, testbed_other_seeds=1,
                   testbed_curve_envs=(("deepcoder", "grpo"),), testbed_curve_seeds=1,
                   main_overrides=_smoke_main_overrides(), fixedmb_seeds=1),
    # paper: the reference's grid, one seed per cell (docs/preregistrations.md §7.1-§7.4); the mechanism study is ours
    # (the paper has none): 4 paired seeds with the reasoning entropy bonus and 4 without, as its control
    "paper": Sizes(steps=400, main_envs=PAPER_MAIN_ENVS, main_algos=ALGOS, main_seeds=1, topk=True,
                   mech_steps=400, mech_seeds=4, control_seeds=4, aux_steps=400, aux_algo="ppo", mech_algo="grpo",
                   main_include_zero=True, reuse_main=False, slips=SLIPS, slip_seeds=1,
                   sweep_env="sokoban", ent_values=(0.0, 0.001, 0.003, 0.01, 0.03, 0.1),
                   kl_values=(0.001, 0.003, 0.01, 0.03, 0.1), topp_values=(1.0, 0.98, 0.95, 0.9, 0.8, 0.6, 0.4),
                   sweep_seeds=1, curve_envs=PAPER_CURVE_ENVS),
}


def _notebooks(smoke: bool) -> dict[str, dict[str, Any]]:
    """Papermill parameters per notebook (all literals; ``runs_root``/``fig_dir`` set by dvc.yaml)."""
    prompts = 4 if smoke else 32
    samples = 3 if smoke else 8
    return {
        "template_collapse": {"smoke": smoke, "num_samples": 8 if smoke else 64},
        "snr_mechanism": {"smoke": smoke},
        "main_results": {"smoke": smoke},
        "rv_quartiles": {"smoke": smoke, "num_prompts": prompts, "group_size": samples},
        "stochasticity": {"smoke": smoke},
        "diagnostics": {"smoke": smoke},
        "training_dynamics": {"smoke": smoke, "num_prompts": prompts, "group_size": samples},
        "interventions": {"smoke": smoke},
    }


def _with_overrides_minimal(base: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Drop override entries equal to the base value (so params.yaml says only what differs)."""

    def prune(over: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in over.items():
            if isinstance(v, dict) and isinstance(ref.get(k), dict) and k != "kwargs":
                sub = prune(v, ref[k])
                if sub:
                    out[k] = sub
            elif ref.get(k, object()) != v:
                out[k] = v
        return out

    pruned = {rid: prune(over, base) for rid, over in runs.items()}
    for rid, over in pruned.items():  # env.kwargs is replaced as a whole when present: keep it explicit
        if "kwargs" in runs[rid].get("env", {}) and runs[rid]["env"]["kwargs"] != base["env"]["kwargs"]:
            over.setdefault("env", {})["kwargs"] = runs[rid]["env"]["kwargs"]
    return pruned


def in_realization_check(rid: str, sweeps: bool = True) -> bool:
    """Whether the realization check (:meth:`Profile.realization`) re-trains run ``rid``: every run but the
    testbed's on environments outside the paper's main table (its success-curve environments), which are drawn and
    decide no claim (docs/preregistrations.md §7.13), and, unless ``sweeps``, the intervention sweeps' runs."""
    parts = parse_run_id(rid)
    if not sweeps and parts["study"] in SWEEP_STUDIES:
        return False
    if parts["study"] in study_catalog.first_warm_start_only():
        return False
    return not (parts["study"] == "testbed" and parts["env"] not in PAPER_MAIN_ENVS)


def _warm_start_path(cfg: RunConfig) -> str:
    from ragen2.warmstart import warm_start_key

    root = WARM_START_DIR if cfg.warm_start.steps > 0 else INITIAL_POLICY_DIR
    return f"{root}/{warm_start_key(cfg)}"


def base_config(name: str) -> dict[str, Any]:
    """The base config of profile ``name`` as a dict (its ``trainer.steps`` before :func:`build` sets it)."""
    if name not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILE_NAMES)}")
    return {"cpu": _cpu_base, "smoke": _smoke_base, "paper": _paper_base}[name]()


def profile_run_ids(name: str) -> list[str]:
    """The run ids of profile ``name``, without building their configs (what :func:`build` would define)."""
    if name not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILE_NAMES)}")
    return list(grid(SIZES[name], *PROFILE_SETTINGS[name]))


def build(name: str) -> Profile:
    """The profile ``cpu``, ``smoke`` or ``paper`` (every run's config is checked strictly)."""
    return assemble(name, base_config(name), SIZES[name], *PROFILE_SETTINGS[name], smoke=name == "smoke")


def assemble(name: str, base: dict[str, Any], sizes: Sizes, algo_settings: dict[str, dict[str, Any]] | None = None,
             env_settings: dict[str, dict[str, Any]] | None = None, *, smoke: bool = False,
             run_overrides: dict[str, Any] | None = None, written_by: str | None = None) -> Profile:
    """A profile from its base config, study sizes and per-algorithm / per-environment settings (:func:`ragen2.repro.study_catalog.grid`).

    ``run_overrides`` are merged into every run last (a derived profile that must win over the per-run settings,
    such as :mod:`ragen2.repro.dry_run`'s tiny rollouts); ``smoke`` sets the notebooks' smoke parameters;
    ``written_by`` replaces the command named in the params.yaml header.
    """
    from_dict(RunConfig, base)  # strict check of the base
    base = copy.deepcopy(base)
    base["trainer"]["steps"] = sizes.steps
    overrides = grid(sizes, algo_settings, env_settings)
    if run_overrides:
        overrides = {rid: deep_merge(over, run_overrides) for rid, over in overrides.items()}
    runs = _with_overrides_minimal(base, overrides)
    profile = Profile(name=name, base=base, runs=runs, notebooks=_notebooks(smoke), written_by=written_by)
    keys = {rid: _warm_start_path(profile.config(rid)) for rid in runs}
    return Profile(name=name, base=base, runs=runs, notebooks=profile.notebooks, warm_start_keys=keys,
                   written_by=written_by, realization_sweeps=sizes.realization_sweeps)


# ---------------------------------------------------------------------------------------------
# Time budget
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """The first realization's cost (``runs`` ... ``notebooks_s``) and the second's (``realization_*``: the
    realization check's runs, its own warm starts, its notebooks and the claims stage). ``*_train_s``,
    ``*_warm_start_s`` and ``*_notebooks_s`` are work shared over the workers; ``*_commit_s`` (recording the runs
    in ``dvc.lock``) and ``fixed_s`` run on one process."""

    runs: int
    train_steps: int
    warm_starts: int
    train_s: float
    warm_start_s: float
    notebooks_s: float
    workers: int
    commit_s: float = 0.0
    realization_runs: int = 0
    realization_train_s: float = 0.0
    realization_warm_start_s: float = 0.0
    realization_notebooks_s: float = 0.0
    realization_commit_s: float = 0.0
    claims_s: float = 0.0
    fixed_s: float = 0.0

    @property
    def total_s(self) -> float:
        """Wall-clock estimate of the first realization: the warm starts (before any run), then training, both shared
        over the workers (one torch thread each), recording the runs, and the notebooks, also shared."""
        return (self.train_s + self.warm_start_s + self.notebooks_s) / self.workers + self.commit_s

    @property
    def pipeline_s(self) -> float:
        """Wall-clock estimate of the whole pipeline (``make repro`` after ``make setup``): both realizations, the
        claims stage and the fixed DVC bookkeeping."""
        second = self.realization_train_s + self.realization_warm_start_s + self.realization_notebooks_s
        return self.total_s + second / self.workers + self.realization_commit_s + self.claims_s + self.fixed_s

    def summary(self) -> str:
        return (f"{self.runs} runs, {self.train_steps} RL steps ({self.train_s / 60:.1f} CPU-min), "
                f"{self.warm_starts} warm starts ({self.warm_start_s / 60:.1f} CPU-min), notebooks "
                f"{self.notebooks_s / 60:.1f} CPU-min, recording the runs {self.commit_s / 60:.1f} min; on "
                f"{self.workers} workers about {self.total_s / 60:.0f} min wall; "
                f"with the realization check ({self.realization_runs} runs again) about "
                f"{self.pipeline_s / 60:.0f} min")


def run_seconds(cfg: RunConfig, s_per_step: dict[str, float | dict[str, float]] | None = None) -> float:
    """Estimated seconds of one run: ``trainer.steps`` times the measured s/step of its env (and algorithm).

    Raises:
        ValueError: no measured s/step for the run's env or algorithm.
    """
    rates = S_PER_STEP if s_per_step is None else s_per_step
    if cfg.env.name not in rates:
        raise ValueError(f"no measured s/step for env {cfg.env.name!r} (have {sorted(rates)})")
    rate = rates[cfg.env.name]
    if isinstance(rate, dict):
        if cfg.trainer.algo not in rate:
            raise ValueError(f"no measured s/step for {cfg.env.name!r} with {cfg.trainer.algo!r} (have {sorted(rate)})")
        rate = rate[cfg.trainer.algo]
    return cfg.trainer.steps * float(rate)


def estimate(profile: Profile, s_per_step: dict[str, float] | None = None,
             s_per_warm_start_step: float = S_PER_WARM_START_STEP, workers: int = WORKERS,
             s_per_notebook: float = S_PER_NOTEBOOK) -> Estimate:
    """Estimated wall time of the profile's pipeline from measured per-step costs.

    Each run costs ``steps * s_per_step[env]`` (or ``s_per_step[env][algo]``) on a worker and
    :data:`S_PER_COMMITTED_RUN` to record; each distinct warm start ``warm_start.steps * s_per_warm_start_step``.
    The notebooks run on the workers after training, the claims stage after them. The second realization
    re-trains the runs :func:`in_realization_check` keeps (at the first's rates), builds its own warm starts and runs
    the claim notebooks. :data:`S_PIPELINE_FIXED` covers DVC's checks.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    train_s, steps, second_s = 0.0, 0, 0.0
    second = profile.realization()
    for rid in profile.runs:
        cfg = profile.config(rid)
        steps += cfg.trainer.steps
        train_s += run_seconds(cfg, s_per_step)
        if rid in second["train"]:
            second_s += run_seconds(cfg, s_per_step)
    ws = profile.warm_starts()
    ws_s = sum(profile.config(w["run"]).warm_start.steps * s_per_warm_start_step for w in ws.values())
    second_ws_s = sum(profile.config(w["run"]).warm_start.steps * s_per_warm_start_step
                      for w in second["warm_starts"].values())
    return Estimate(runs=len(profile.runs), train_steps=steps, warm_starts=len(ws), train_s=train_s,
                    warm_start_s=ws_s, notebooks_s=s_per_notebook * len(profile.notebooks), workers=workers,
                    commit_s=S_PER_COMMITTED_RUN * len(profile.runs),
                    realization_runs=len(second["train"]), realization_train_s=second_s,
                    realization_warm_start_s=second_ws_s,
                    realization_notebooks_s=s_per_notebook * len(second["notebooks"]),
                    realization_commit_s=S_PER_COMMITTED_RUN * len(second["train"]), claims_s=s_per_notebook,
                    fixed_s=S_PIPELINE_FIXED)
