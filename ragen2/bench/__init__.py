"""Speed benchmarks of ragen2, each a ratio against a baseline timed in the same process.

``python -m ragen2.bench [--quick] [--json] [--threads N] [--only NAME ...] [--cache-dir DIR] [--out FILE]
[--record DIR]``; ``--record`` keeps the run as a dated record (:mod:`ragen2.bench.records`, which makes
docs/performance.md's tables from them).

``python -m ragen2.bench --gpu [...]`` runs the prepared GPU check instead (:mod:`ragen2.bench.gpu_check`:
PPO and GRPO steps of random-initialised Qwen2.5-3B and 0.5B models at the paper's shape; peak memory, seconds
per step, generation speed, whether the weights moved), and :mod:`ragen2.bench.memory` estimates the memory of
those runs by component.

Figures (each the median over repetitions of a per-repetition ratio; candidate and baseline
repetitions alternate so that machine noise hits both):

- ``rollout_speedup_vs_generate``: tokens/s of :func:`ragen2.rollout.collect_rollouts` over tokens/s
  of a plain per-turn ``model.generate`` loop (:func:`ragen2.bench.baseline.generate_loop`) on the
  same model, batch, environment, prompts and number of turns (1.0 = no overhead);
- ``grpo_step_speedup_vs_trl_native``: seconds of a step of TRL's own ``GRPOTrainer`` (its own generation, a
  reward function that plays each completion in FrozenLake) over seconds of a ragen2 GRPO step (rollout +
  update), on the CPU profile's single-turn task, shape, policy and one optimiser step a step
  (:mod:`ragen2.bench.trl_native`);
- ``mi_cost_fraction_of_step``: seconds of one collapse-diagnostics pass (both families) over one
  training step of the CPU default config (PPO);
- ``update_time_ratio_at_half_keep``: update-phase seconds when the filter keeps half the groups
  over keeping all of them, same batch;
- ``scoring_speedup_vs_naive``: seconds of ``naive_cross_logprobs`` over ``cross_logprobs``;
- ``update_speedup_shared_prefix``: seconds of the critic + actor updates with the plain padded forward
  over those with the ragged forward (each distinct prompt once per micro-batch, each row up to its last
  trained token: :mod:`ragen2.model.prefix`), same batch, the CPU profile's PPO trainer and rollout shape;
- ``step_over_floor_grpo``, ``step_over_floor_ppo``: seconds per step of a whole CPU-profile run (the main
  study's run of that algorithm from ``--params``, or where the profile has none its first main run trained with
  that algorithm (``details`` name the run and the override), its warm start built if missing; MI diagnostics, gradient
  analysis, validation, logging and checkpoints at their frequencies) over the step's compute floor, one
  forward+backward per trained model over the distinct tokens plus one cached forward per generated position
  (:mod:`ragen2.bench.floor`);
- ``pinned_step_over_native``: seconds per step of the GRPO run above (20 steps, each run in a fresh process)
  under the pinned kernels (the same bits on Intel and AMD, :mod:`ragen2.kernels`) over the same under
  ``RAGEN2_KERNELS=native``, interleaved (:mod:`ragen2.bench.ab`); ``details`` hold each side's phases;
- ``multiturn_step_over_single``: seconds per step of that run as PPO on the paper's multi-turn FrozenLake (5 turns of
  up to 2 actions, its own warm start) over the same on one turn of up to 10, measurements off
  (:mod:`ragen2.bench.multiturn`).

With ``--json`` the last line of output is one JSON object: every figure under its name, and
``details`` (per figure: ``median``, ``min``, ``max``, ``baseline_s``, ``candidate_s``, the runs and
the sizes), ``targets`` (the issue's target per figure and whether it was met), ``machine`` (CPU
model, cores, torch threads, load average, versions), ``sizes`` and ``seconds_total``. A figure that fails is
``None`` with its one-line reason in ``details[name]["failed"]``, the others still run, and the exit status is 1;
``--out`` is rewritten after every figure. Bad input (an unknown figure, a params file without the profile's runs)
is one line on stderr and exit status 2, before torch is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    **dict.fromkeys(("BENCHMARKS", "TARGETS"), "targets"),
    **dict.fromkeys(("FULL", "QUICK", "BenchSizes", "Shape", "bench_grpo_native",
                     "bench_mi_fraction", "bench_rollout", "bench_scoring", "bench_update_half_keep",
                     "bench_update_shared_prefix", "make_context", "run_benchmarks"), "cases"),
    **dict.fromkeys(("Comparison", "Sample", "interleave", "machine_info"), "timing"),
}
"""Each public name and its submodule, loaded on first use: the CPU benchmarks import the environments, which
``--gpu`` (made for a machine without them) must not."""

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
