"""``multiturn_step_over_single``: what a training step costs when FrozenLake is played over several turns.

The paper's FrozenLake gives the agent 5 turns of up to 2 actions with an observation between turns (so a slip can
be corrected, its stochasticity study); the CPU pipeline plays one turn of up to 10 actions. The figure trains the
same run both ways in this process, interleaved: the CPU profile's main run as PPO (the slip study's algorithm) from
its warm start, and the same run with :data:`MULTI_TURN` from the multi-turn warm start, each for a few steps of 8
prompts x 16 rollouts with the measurements off (no MI diagnostics, no gradient analysis, one validation group), and
reports seconds per step multi-turn over single-turn, with each side's rollout and update seconds and response
lengths. The batch has about the same number of response tokens either way, so a trainer that does not re-read each
conversation's history every turn could keep the ratio near 1; the target is 2.5.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from ragen2.config import RunConfig, deep_merge, from_dict, to_dict

MULTI_TURN: dict[str, Any] = {"rollout": {"max_turns": 5, "max_actions_per_turn": 2}, "warm_start": {"steps": 200}}
"""The paper's FrozenLake turns, from the multi-turn warm start the learning screen probed (200 SFT steps: greedy
success 0.25 on 32 seeds, docs/preregistrations.md §7.15)."""
MEASUREMENTS_OFF: dict[str, Any] = {"collapse": {"enabled": False}, "grad_analysis": {"enabled": False},
                                    "rollout": {"val_groups": 1}}
"""What the figure leaves out of both steps: it compares training, not the studies' measurements."""


def step_configs(base: RunConfig, steps: int) -> tuple[RunConfig, RunConfig]:
    """``(single turn, multi turn)``: ``base`` for ``steps`` steps with :data:`MEASUREMENTS_OFF` (no checkpoint before
    the end), and the same with :data:`MULTI_TURN` (its warm start only where ``base`` has one)."""
    common = deep_merge(to_dict(base), deep_merge(MEASUREMENTS_OFF, {
        "trainer": {"steps": steps, "test_freq": 0, "save_freq": steps}}))
    multi = deep_merge(common, MULTI_TURN if base.warm_start.steps > 0 else {"rollout": MULTI_TURN["rollout"]})
    return from_dict(RunConfig, common), from_dict(RunConfig, multi)


def _per_step(cfg: RunConfig, init: Path) -> dict[str, float]:
    import json

    from ragen2 import rundir
    from ragen2.trainer.loop import train

    with tempfile.TemporaryDirectory(prefix="ragen2-bench-multiturn-") as tmp:
        summary = train(cfg, Path(tmp) / "run", init, resume=False, progress=False)
        lines = (Path(tmp) / "run" / rundir.METRICS).read_text().splitlines()
        rows = [r for r in map(json.loads, lines) if r.get("step", 0) >= 1 and "rollout/response_length_mean" in r]
    steps = max(int(summary["steps_completed"]), 1)
    timings = summary["timings_s"]
    return {"step_s": timings["total_elapsed"] / steps, "rollout_s": timings["rollout_per_step"],
            "update_s": timings["update_per_step"],
            "response_tokens": statistics.mean(r.get("rollout/response_length_mean", float("nan")) for r in rows)}


def bench_multiturn_step(base: RunConfig, cache_dir: Path, *, steps: int, reps: int):
    """The figure: per repetition, seconds per step of the multi-turn run over the single-turn one (each a whole
    :func:`ragen2.trainer.loop.train` of ``steps`` steps, the order alternating); warm starts built first."""
    from ragen2.bench.floor import initial_policy_built
    from ragen2.bench.timing import Sample, interleave

    single, multi = step_configs(base, steps)
    inits = {}
    for name, cfg in (("single", single), ("multi", multi)):
        inits[name] = initial_policy_built(cfg, cache_dir) if cfg.warm_start.steps > 0 else None
    if inits["single"] is None:  # no warm start (quick sizes): both start from the random tiny policy
        from ragen2.warmstart import initial_policy

        inits = {"single": initial_policy(single, cache_dir), "multi": initial_policy(multi, cache_dir)}
    runs: dict[str, list[dict[str, float]]] = {"single": [], "multi": []}

    def side(name: str, cfg: RunConfig):
        def run() -> Sample:
            runs[name].append(_per_step(cfg, inits[name]))
            return Sample(runs[name][-1]["step_s"])
        return run

    comparison = interleave("time_fraction", side("single", single), side("multi", multi), reps=reps, warmup=0)
    comparison.extra.update(
        algo=base.trainer.algo, steps=steps, shape=f"{base.rollout.env_groups} x {base.rollout.group_size}",
        **{f"{name}_{key}": statistics.median(r[key] for r in rs) for name, rs in runs.items() for key in rs[0]},
        baseline_name="single turn of up to 10 actions, seconds per step",
        candidate_name="5 turns of up to 2 actions, seconds per step")
    return comparison
