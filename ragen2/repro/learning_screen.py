"""The learning-regime screen: a CPU setting in which RL without a filter learns (docs/preregistrations.md §7.15).

The paper's filter gains sit where its base models start low and RL has room to learn; a claim about the filter is
tested only where no-filter RL does learn. This screen looks for such a setting before any filter run, with a pipeline
of its own (``screen/dvc.yaml``, ``make screen``): two settings (:data:`CELLS`: FrozenLake and Sokoban, one turn
each; the paper's multi-turn FrozenLake was cut for its cost, :data:`CUT_CELLS`), each from a warm start trained to
10-40 % success, times PPO and GRPO, no filter, group size 16, :data:`STEPS` steps. Every run's warm start,
step-:data:`MIDPOINT` and final policies are scored on the same :data:`EPISODES` validation env seeds, one sample
each at the validation temperature (the ``evaluate`` stage); :func:`screen_table` reads the gains and
:func:`regimes` holds them against the threshold (:data:`THRESHOLD`), committed before any run.

``python -m ragen2 profile screen --write screen/params.yaml`` writes the params file from :func:`build`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragen2.config import RunConfig, deep_merge, from_dict
from ragen2.evaluate import Evaluation
from ragen2.evaluate import paired_gain as success_gain
from ragen2.repro import own_pipelines
from ragen2.repro.own_pipelines import OwnPipeline
from ragen2.repro.profiles import Profile, _with_overrides_minimal, own_pipeline_base
from ragen2.repro.run_ids import parse_run_id, run_id
from ragen2.repro.study_catalog import NO_FILTER

STUDY = "screen"
"""Study tag of the screen's run ids, followed by the cell's turns (``frozenlake__ppo__none__screen5__s0``)."""
PIPELINE = OwnPipeline(
    "screen", "learning-screen", "ragen2/repro/learning_screen.py",
    about="The learning-regime screen (ragen2/repro/learning_screen.py, docs/preregistrations.md §7.15): does "
          "no-filter RL learn at CPU scale, and where?",
    make_target="screen", notebook="11_learning_screen", notebook_key="learning_screen",
    notebook_data=("data/screen/evals",),
    outputs=("table_learning_screen", "fig_learning_screen", "table_learning_regimes", "fig_learning_screen_curves"),
    extra_stages=lambda pipeline: {"evaluate": evaluate_stage(pipeline)})
PARAMS, DVC_FILE, RUNS_ROOT, CACHE_DIR = PIPELINE.params_path, PIPELINE.dvc_file, PIPELINE.runs_root, PIPELINE.cache_dir
EVALS_ROOT = f"data/{PIPELINE.folder}/evals"
NOTEBOOK = "11_learning_screen"

STEPS = 200
MIDPOINT = 100
"""Success is also read at this step, from a kept checkpoint."""
EPISODES = 512
"""Validation env seeds every policy is scored on (the run's ``val_seed`` on: 123-634), one sample each."""
THRESHOLD = 15.0
"""Points of success over the warm start that no-filter RL must gain for a setting to count as learning."""
CONFIRM_EACH = 10.0
"""On confirmation (three seeds), every seed's gain must also reach this many points."""
ALGOS = ("ppo", "grpo")
SCREEN_SEEDS = (0,)
CONFIRM_SEEDS: dict[tuple[str, int, str], tuple[int, ...]] = {("frozenlake", 1, "grpo"): (1, 2)}
"""Cells ``(env, turns, algo)`` that passed the screen -> the two further seeds that confirm them (set after the
screen, as pre-registered: FrozenLake single-turn GRPO gained +15.0 points on seed 0, the only cell that did)."""
FRESH_SEEDS: dict[tuple[str, int, str], tuple[int, ...]] = {("frozenlake", 1, "grpo"): (3, 4, 5)}
"""Cells whose step-:data:`MIDPOINT` reading is tested on fresh seeds: a reading chosen after the screen's results
(FrozenLake GRPO gained about +21 points at step 100 on seeds 0-2 and +14.7 at step 200), so it is decided on seeds
that did not suggest it (docs/preregistrations.md §7.15)."""

FIXED = {
    "filter": dict(NO_FILTER),
    "rollout": {"group_size": 16, "val_groups": 128},
    "trainer": {"steps": STEPS, "actor_lr": 1e-4, "save_freq": MIDPOINT, "keep_every": MIDPOINT, "test_freq": 25},
    "collapse": {"enabled": False},
    "grad_analysis": {"enabled": False},
}
"""Settings of every screen run on top of the CPU profile's base: no filter, 8 groups of 16, 200 steps (the step-100
checkpoint kept), validation on 128 episodes every 25 steps (the curves); no MI diagnostics or gradient decomposition
(the screen reads success only)."""


@dataclass(frozen=True)
class ScreenCell:
    """One environment setting of the screen and the warm start it starts from."""

    env: str
    turns: int
    sft_steps: int
    overrides: dict[str, Any]
    why: str


CELLS = (
    ScreenCell("frozenlake", 1, 300, {},
               "one turn of up to 10 moves, 2 % slip; 300 SFT steps: greedy success 0.22 on 32 seeds"),
    ScreenCell("sokoban", 1, 400, {"env": {"name": "sokoban", "kwargs": {}}},
               "6 x 6, one box, one turn of up to 10 moves; 400 SFT steps: 0.19"),
)
"""The screened settings and their warm starts, chosen from warm-start probes (no RL) before any screen run."""

CUT_CELLS = (
    ScreenCell("frozenlake", 5, 200, {"rollout": {"max_turns": 5, "max_actions_per_turn": 2}},
               "the paper's 5 turns of 2 actions (a slip can be corrected after the next observation); 200 SFT steps: "
               "0.25. Cut, as the pre-registration provides: a PPO step took about 50 s (single turn: about 4.5 s), so "
               "its two runs alone would take about 2.8 hours on the two workers, against the screen's 90 minutes"),
)
"""Settings pre-registered for the screen but not run, with the measured reason (docs/preregistrations.md §7.15)."""


@dataclass(frozen=True)
class ScreenOutcome:
    """What the screen found, in the form the main pipeline's C1 evidence cites (:data:`OUTCOME` records the committed
    screen's; a test checks it against ``paper_figures/table_learning_regimes.csv``)."""

    regimes: tuple[tuple[str, int, str, str], ...]
    """Learning regimes ``(env, turns, algo, reading)``."""
    best: tuple[str, int, str, str]
    """The cell and reading with the largest mean gain."""
    best_gain: float
    """Its mean gain, points."""
    best_seeds: int
    deviation: str = ""
    """Where a regime was found only by a reading chosen after seeing results: what the pre-registered reading found
    there (a disclosure every verdict decided in that regime carries; empty when there is none)."""

    def note(self) -> str:
        """One line for C1's evidence: what the screen found."""
        def name(cell: tuple[str, int, str, str]) -> str:
            env, turns, algo, reading = cell
            return f"{env} {turns}-turn {algo.upper()} ({reading})"

        found = (f"learning regime(s): {'; '.join(name(r) for r in self.regimes)}" if self.regimes
                 else f"no learning regime at CPU scale (+{THRESHOLD:g} points on 3 seeds, each >= {CONFIRM_EACH:g})")
        deviation = f"; deviation: {self.deviation}" if self.deviation else ""
        return (f"learning screen (make screen): {found}; largest mean gain {self.best_gain:+.1f} points, "
                f"{name(self.best)}, {self.best_seeds} seeds{deviation}")


PREREGISTERED_READING = f"step {STEPS}, screened and confirming seeds"
"""The screen's pre-registered reading (:func:`regimes`); any other was chosen after seeing results."""


def outcome(regime_table: pd.DataFrame) -> ScreenOutcome:
    """The :class:`ScreenOutcome` of a :func:`regimes` table, with the deviation a regime found only by a reading
    other than :data:`PREREGISTERED_READING` carries."""
    cells = [(r.env, int(r.turns), r.algo, r.reading) for r in regime_table.itertuples()]
    best = int(regime_table["gain_mean"].to_numpy().argmax())
    found = tuple(c for c, ok in zip(cells, regime_table["regime"]) if ok)
    notes = []
    for env, turns, algo, reading in found:
        if reading == PREREGISTERED_READING:
            continue
        pre = regime_table[(regime_table["env"] == env) & (regime_table["turns"] == turns)
                           & (regime_table["algo"] == algo) & (regime_table["reading"] == PREREGISTERED_READING)]
        said = (f"found no regime there (mean gain {float(pre['gain_mean'].iloc[0]):+.1f} points)"
                if len(pre) and not bool(pre["regime"].iloc[0]) else "was not read there")
        notes.append(f"the pre-registered reading ({PREREGISTERED_READING}) {said}; the {reading.split(',')[0]} reading "
                     f"was chosen after seeing the results and confirmed on fresh seeds (docs/preregistrations.md "
                     f"§7.15)")
    return ScreenOutcome(regimes=found, best=cells[best], best_gain=round(float(regime_table["gain_mean"].iloc[best]), 1),
                         best_seeds=int(regime_table["seeds"].iloc[best]), deviation="; ".join(notes))


OUTCOME: ScreenOutcome | None = ScreenOutcome(
    regimes=(("frozenlake", 1, "grpo", f"step {MIDPOINT}, fresh seeds"),),
    best=("frozenlake", 1, "grpo", f"step {MIDPOINT}, fresh seeds"), best_gain=18.4, best_seeds=3,
    deviation=(f"the pre-registered reading ({PREREGISTERED_READING}) found no regime there (mean gain +13.2 points); "
               f"the step {MIDPOINT} reading was chosen after seeing the results and confirmed on fresh seeds "
               "(docs/preregistrations.md §7.15)"))
"""The committed screen's outcome (``paper_figures/table_learning_regimes.csv``), which C1's precondition cites."""


def cell_of(rid: str) -> tuple[str, int, str]:
    """``(env, turns, algo)`` of a screen run id."""
    parts = parse_run_id(rid)
    return parts["env"], int(parts["study_value"]), parts["algo"]


def build(smoke: bool = False) -> Profile:
    """The screen's profile: ``base`` = the CPU (``smoke``: smoke) base with :data:`FIXED`; runs = cells x algorithms x
    seeds (:data:`SCREEN_SEEDS`, and :data:`CONFIRM_SEEDS` for the cells that passed). The smoke profile keeps its tiny
    warm start and 2 steps (its numbers mean nothing)."""
    from ragen2.warmstart import warm_start_key

    base = deep_merge(own_pipeline_base(smoke), FIXED)
    if smoke:
        base = deep_merge(base, {"trainer": {"steps": 2, "save_freq": 1, "keep_every": 1}})
    from_dict(RunConfig, base)
    runs: dict[str, dict[str, Any]] = {}
    for cell in CELLS:
        variant = cell.overrides if smoke else deep_merge(cell.overrides, {"warm_start": {"steps": cell.sft_steps}})
        for algo in ALGOS:
            key = (cell.env, cell.turns, algo)
            seeds = SCREEN_SEEDS + CONFIRM_SEEDS.get(key, ()) + FRESH_SEEDS.get(key, ())
            for seed in seeds[:1] if smoke else seeds:
                rid = run_id(cell.env, algo, "none", f"{STUDY}{cell.turns}", seed)
                runs[rid] = deep_merge({"seed": seed, "trainer": {"algo": algo}}, copy.deepcopy(variant))
    runs = _with_overrides_minimal(base, runs)
    name = "screen_smoke" if smoke else "screen"
    probe = Profile(name=name, base=base, runs=runs, notebooks={})
    keys = {rid: f"{CACHE_DIR}/warm_start/{warm_start_key(probe.config(rid))}" for rid in runs}
    midpoint = 1 if smoke else MIDPOINT
    return Profile(name=name, base=base, runs=runs,
                   notebooks={"learning_screen": {"smoke": smoke, "midpoint": midpoint}},
                   warm_start_keys=keys, written_by=f"python -m ragen2 profile {name} --write {PARAMS}")


def _evaluation(profile: Profile) -> dict[str, Any]:
    """The params file's evaluation settings (``pipeline.evals_root`` and ``pipeline.evaluate``)."""
    smoke = profile.name.endswith("smoke")
    return {"evals_root": EVALS_ROOT,
            "evaluate": {"episodes": 8 if smoke else EPISODES, "midpoint": 1 if smoke else MIDPOINT}}


def params(profile: Profile) -> dict[str, Any]:
    """The screen pipeline's params file: ``base``, ``runs`` and ``pipeline`` (with the evaluation's settings)."""
    return own_pipelines.params(PIPELINE, profile, _evaluation(profile))


def params_yaml(profile: Profile) -> str:
    return own_pipelines.params_yaml(PIPELINE, profile, _evaluation(profile))


def cells_table() -> pd.DataFrame:
    """One row per pre-registered setting: environment, turns, warm start, whether it was run, and why."""
    return pd.DataFrame([{"env": c.env, "turns": c.turns, "SFT steps": c.sft_steps, "run": c in CELLS, "why": c.why}
                         for c in (*CELLS, *CUT_CELLS)])


CHECKPOINTS = ("initial", "midpoint", "final")
"""The policies of a run the ``evaluate`` stage scores (``data/screen/evals/<run id>/<name>.json``)."""


def evaluate_stage(pipeline: OwnPipeline) -> dict[str, Any]:
    """The ``evaluate`` stage of the screen's dvc.yaml: each run's warm start, step-:data:`MIDPOINT` and final
    policies scored on the same :data:`EPISODES` validation env seeds, one sample each at the validation temperature
    (the paired gains the screen's threshold reads)."""
    evals = f"data/{pipeline.folder}/evals"
    points = {"initial": "initial", "midpoint": "${pipeline.evaluate.midpoint}", "final": "latest"}
    cmd = " && ".join(
        f"python -m ragen2 evaluate {pipeline.runs_root}/${{key}} --checkpoint {points[name]} "
        f"--episodes ${{pipeline.evaluate.episodes}} --sampling-seeds 1 --cache-dir {pipeline.cache_dir} --threads 1 "
        f"--out {evals}/${{key}}/{name}.json" for name in CHECKPOINTS)
    return {"foreach": "${pipeline.train}", "do": {
        "wdir": "..", "cmd": cmd,
        "deps": ["ragen2/evaluate.py", "ragen2/rollout", "ragen2/policy.py", "ragen2/model", "ragen2/kernels.py",
                 "ragen2/envs", f"{pipeline.runs_root}/${{key}}"],
        "params": [{pipeline.params_path: ["pipeline.evaluate"]}],
        "outs": [f"{evals}/${{key}}"]}}


def paired_gain(start: Evaluation, end: Evaluation) -> tuple[float, float]:
    """Gain of ``end`` over ``start`` in points and its standard error, paired over the env seeds
    (:func:`ragen2.evaluate.paired_gain` checks both were scored on the same seeds and temperature)."""
    diff = 100.0 * (end.successes.mean(axis=0) - start.successes.mean(axis=0))  # per env seed
    se = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else math.nan
    # success is a count over episodes: rounded, a gain exactly at the threshold reads as reaching it
    return round(100.0 * success_gain(start, end), 9), se


def screen_table(evals: dict[str, dict[str, Evaluation]], seconds: dict[str, float] | None = None) -> pd.DataFrame:
    """The screen: per run, success of its warm start, at :data:`MIDPOINT` and at the end, and the paired gain.

    Args:
        evals: run id -> ``{"initial": ..., "midpoint": ..., "final": ...}`` (:data:`CHECKPOINTS`), each scored on
            the same env seeds (:func:`load_evals`).
        seconds: run id -> training seconds (optional column).

    Returns:
        One row per run: ``env, turns, algo, seed, start, midpoint, final`` (success in %), ``gain`` and ``gain_se``
        (final minus start, points, paired over the env seeds), ``gain_mid`` and ``gain_mid_se`` (midpoint), and
        ``learns`` (``gain`` at least :data:`THRESHOLD`; confirmation across seeds is :func:`regimes`'s).
    """
    rows = []
    for rid, ev in sorted(evals.items()):
        env, turns, algo = cell_of(rid)
        gain, se = paired_gain(ev["initial"], ev["final"])
        gain_mid, mid_se = paired_gain(ev["initial"], ev["midpoint"])
        row = {"run": rid, "env": env, "turns": turns, "algo": algo, "seed": parse_run_id(rid)["seed"],
               "episodes": len(ev["initial"].env_seeds), **{k: 100.0 * ev[k].success for k in CHECKPOINTS},
               "gain_mid": gain_mid, "gain_mid_se": mid_se, "gain": gain, "gain_se": se, "learns": gain >= THRESHOLD}
        if seconds is not None:
            row["train_s"] = seconds.get(rid, math.nan)
        rows.append(row)
    return pd.DataFrame(rows).rename(columns={"initial": "start"})


def regimes(table: pd.DataFrame, confirm: dict | None = None, fresh: dict | None = None) -> pd.DataFrame:
    """Per cell (env, turns, algo) and reading: the seeds read, their mean and smallest gain, and whether the cell is a
    learning regime in that reading.

    Two readings: the pre-registered one, the gain at the end of training (step :data:`STEPS`) on the screening seed
    and the seeds that confirm it (``confirm``, default :data:`CONFIRM_SEEDS`); and, for the cells in ``fresh``
    (default :data:`FRESH_SEEDS`), the gain at step :data:`MIDPOINT` on fresh seeds. Either is a regime when at least
    three seeds were read, their mean gain is at least :data:`THRESHOLD` and each at least :data:`CONFIRM_EACH`.
    ``screen_passed``: the screening seed reached the threshold at the end (the condition for confirming it).
    """
    confirm = CONFIRM_SEEDS if confirm is None else confirm
    fresh = FRESH_SEEDS if fresh is None else fresh
    rows = []
    for (env, turns, algo), part in table.groupby(["env", "turns", "algo"], sort=True):
        key = (env, int(turns), algo)
        screen = part[part["seed"].isin(SCREEN_SEEDS)]
        passed = bool(len(screen) and (screen["gain"] >= THRESHOLD).all())
        readings = [(f"step {STEPS}, screened and confirming seeds", "gain", SCREEN_SEEDS + tuple(confirm.get(key, ())))]
        if key in fresh:
            readings.append((f"step {MIDPOINT}, fresh seeds", "gain_mid", tuple(fresh[key])))
        for reading, column, seeds in readings:
            sub = part[part["seed"].isin(seeds)]
            if sub.empty:
                continue
            gains = sub[column]
            rows.append({"env": env, "turns": int(turns), "algo": algo, "reading": reading, "seeds": len(sub),
                         "start": sub["start"].mean(), "gain_mean": gains.mean(), "gain_min": gains.min(),
                         "screen_passed": passed,
                         "regime": bool(len(sub) >= 3 and gains.mean() >= THRESHOLD and (gains >= CONFIRM_EACH).all())})
    return pd.DataFrame(rows)


def load_evals(evals_root) -> dict[str, dict[str, Evaluation]]:
    """Run id -> its :data:`CHECKPOINTS` evaluations, read from ``evals_root/<run id>/*.json`` (the ``evaluate``
    stage's outputs); a run missing one of them is left out."""
    from ragen2.rundir import read_json

    out = {}
    for run_dir in sorted(p for p in Path(evals_root).iterdir() if p.is_dir()):
        files = {k: run_dir / f"{k}.json" for k in CHECKPOINTS}
        if all(f.exists() for f in files.values()):
            out[run_dir.name] = {k: Evaluation.from_dict(read_json(f)) for k, f in files.items()}
    return out


def train_seconds(runs_root, run_ids) -> dict[str, float]:
    """Run id -> seconds its training took (the trainer's own ``total_elapsed`` in ``summary.json``)."""
    from ragen2.rundir import read_summary

    return {rid: float(read_summary(Path(runs_root) / rid)["timings_s"]["total_elapsed"]) for rid in run_ids}
