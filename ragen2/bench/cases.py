"""The six benchmark figures and the sizes they run at.

Each ``bench_*`` function returns a :class:`ragen2.bench.timing.Comparison` whose per-repetition
ratio is the figure; :func:`run_benchmarks` runs the requested ones and assembles the report.
Everything uses the tiny CPU default policy (random init, default :class:`PolicyConfig`) on
FrozenLake, the CPU default environment.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragen2.bench.baseline import generate_loop
from ragen2.bench.steps import Ragen2Stepper, with_response_reasoning
from ragen2.bench.targets import BENCHMARKS, TARGETS
from ragen2.bench.timing import Comparison, Sample, interleave, load_average, machine_info, timed
from ragen2.config import CollapseConfig, EnvConfig, PolicyConfig, RolloutConfig, RunConfig, WarmStartConfig
from ragen2.filter import FilterConfig

ENV_NAME = "frozenlake"


@dataclass(frozen=True)
class Shape:
    """Rollout shape of one benchmark."""

    groups: int
    group_size: int
    max_turns: int
    """0 = the environment's default (5 for FrozenLake)."""
    max_new_tokens: int


@dataclass(frozen=True)
class BenchSizes:
    """How big each benchmark is and how often it repeats."""

    rollout: Shape
    mi: Shape
    """The MI pass and the CPU-default training step it is compared with."""
    mi_num_samples: int
    update: Shape
    scoring_prompts: int
    scoring_reasonings: int
    scoring_reasoning_tokens: int
    reps: int
    warmup: int
    step_reps: int
    """Repetitions of the benchmarks that run training steps or updates (the TRL comparison, update)."""
    step_warmup: int
    mi_reps: int
    """Repetitions of the MI benchmark (each one a CPU-default training step plus an MI pass)."""
    mi_warmup: int
    update_variants: bool
    """Also time the half-keep update with ``filter.regularize_kept_only=True`` (reported in details)."""
    prefix: Shape = Shape(8, 8, 1, 26)
    """The shared-prompt update benchmark: the CPU profile's rollout shape (single turn, 8 x 8) with responses
    of 26 tokens, the mean response length of its runs (the random policy always writes ``max_new_tokens``)."""
    profile_from_params: bool = True
    """``step_over_floor_*`` and ``grpo_step_speedup_vs_trl_native``: the CPU profile's main runs from the params
    file (warm start and all); False: a two-step run of the default config at :attr:`profile_shape` without a warm
    start (plumbing only)."""
    profile_shape: Shape = Shape(2, 4, 1, 16)
    floor_reps: int = 3
    """Whole runs per ``step_over_floor_*`` figure (each next to a floor)."""
    floor_repeats: int = 5
    """Floor timings per repetition (their median is the repetition's floor)."""
    pin_steps: int = 20
    """Steps of each run ``pinned_step_over_native`` trains (each in a fresh process, step-0 validation included)."""
    pin_reps: int = 3
    """Runs per kernel setting of ``pinned_step_over_native``, the order alternating."""
    multiturn_steps: int = 4
    """Steps of each run ``multiturn_step_over_single`` trains."""
    multiturn_reps: int = 2


QUICK = BenchSizes(
    rollout=Shape(2, 4, 2, 16), mi=Shape(2, 2, 2, 16),
    mi_num_samples=4, update=Shape(2, 2, 2, 16), scoring_prompts=2, scoring_reasonings=8,
    scoring_reasoning_tokens=16, reps=3, warmup=1, step_reps=3, step_warmup=1, mi_reps=3, mi_warmup=1,
    update_variants=False, prefix=Shape(2, 4, 1, 16), profile_from_params=False, floor_reps=2, floor_repeats=2,
    pin_steps=2, pin_reps=1, multiturn_steps=2, multiturn_reps=1)
"""About a minute in all on the shared 2-core machine; sizes far below the paper's."""

FULL = BenchSizes(
    rollout=Shape(4, 8, 3, 24), mi=Shape(8, 16, 0, 16),
    mi_num_samples=64, update=Shape(4, 4, 3, 24), scoring_prompts=8, scoring_reasonings=32,
    scoring_reasoning_tokens=24, reps=3, warmup=1, step_reps=3, step_warmup=1, mi_reps=2, mi_warmup=1,
    update_variants=True)
"""The MI pass at the paper's shape (8 prompts x 16 samples, 64 pairs per family)."""

@dataclass
class BenchContext:
    """Shared by the benchmarks of one process: the policy path and its loaded model."""

    policy_path: Path
    model: Any
    tokenizer: Any


def make_context(cache_dir: Path) -> BenchContext:
    """Build (or reuse) the tiny CPU default policy in ``cache_dir`` and load it on the CPU."""
    from ragen2.policy import load_policy, resolve_policy

    path = resolve_policy(PolicyConfig(), [ENV_NAME], Path(cache_dir))
    model, tokenizer = load_policy(path, device="cpu")
    return BenchContext(path, model, tokenizer)


def run_config(shape: Shape, **trainer: Any) -> RunConfig:
    """The CPU default :class:`RunConfig` on CPU, no warm start, with ``shape`` and trainer overrides."""
    base = RunConfig()
    rollout = dataclasses.replace(base.rollout, env_groups=shape.groups, group_size=shape.group_size,
                                  max_turns=shape.max_turns, max_new_tokens=shape.max_new_tokens)
    return dataclasses.replace(
        base, env=EnvConfig(name=ENV_NAME), policy=dataclasses.replace(base.policy, device="cpu"),
        warm_start=WarmStartConfig(steps=0), rollout=rollout,
        trainer=dataclasses.replace(base.trainer, **trainer), collapse=CollapseConfig(enabled=False))


def shape_dict(shape: Shape) -> dict[str, int]:
    return dataclasses.asdict(shape)


# ---------------------------------------------------------------------------------------------
# 1. rollout: collect_rollouts against a plain model.generate loop
# ---------------------------------------------------------------------------------------------
class _CountingBackend:
    """Wraps a generation backend and counts the new tokens it returns."""

    def __init__(self, inner):
        self.inner = inner
        self.tokens = 0

    def generate(self, prompts_ids, max_new_tokens, temperature, seed, *, greedy=False):
        out = self.inner.generate(prompts_ids, max_new_tokens, temperature, seed, greedy=greedy)
        self.tokens += sum(len(ids) for ids in out)
        return out


def bench_rollout(ctx: BenchContext, shape: Shape, *, reps: int, warmup: int) -> Comparison:
    """Tokens/s of :func:`ragen2.rollout.collect_rollouts` over tokens/s of :func:`generate_loop`."""
    from ragen2.rollout import collect_rollouts, make_backend

    rc = RolloutConfig(env_groups=shape.groups, group_size=shape.group_size, max_turns=shape.max_turns,
                       max_new_tokens=shape.max_new_tokens)
    seeds = list(range(10_000, 10_000 + shape.groups))
    calls = {"n": 0}

    def candidate() -> Sample:
        calls["n"] += 1
        backend = _CountingBackend(make_backend(rc.backend, ctx.model, ctx.tokenizer))

        def run() -> float:
            collect_rollouts(ctx.model, ctx.tokenizer, EnvConfig(name=ENV_NAME), rc, seeds,
                             group_size=shape.group_size, temperature=1.0, seed=calls["n"], backend=backend)
            return backend.tokens
        return timed(run)

    def baseline() -> Sample:
        calls["n"] += 1
        return timed(lambda: generate_loop(ctx.model, ctx.tokenizer, EnvConfig(name=ENV_NAME), rc, seeds,
                                           group_size=shape.group_size, temperature=1.0, seed=calls["n"]))

    comparison = interleave("throughput", baseline, candidate, reps=reps, warmup=warmup)
    comparison.extra.update(shape=shape_dict(shape), baseline_name="model.generate loop",
                            candidate_name="collect_rollouts (HFBackend, shared prefill)")
    return comparison


# ---------------------------------------------------------------------------------------------
# 2. GRPO step: ragen2 against TRL's GRPOTrainer with its own generation (ragen2.bench.trl_native)
# ---------------------------------------------------------------------------------------------
def bench_grpo_native(ctx: BenchContext, sizes: BenchSizes, params: Path, cache_dir: Path) -> Comparison:
    from ragen2.bench.floor import initial_policy_built
    from ragen2.bench.trl_native import bench_grpo_step_vs_trl_native

    cfg = profile_run_config("grpo", sizes, params)
    init = initial_policy_built(cfg, cache_dir) if cfg.warm_start.steps > 0 else ctx.policy_path
    return bench_grpo_step_vs_trl_native(cfg, init, reps=sizes.step_reps, warmup=sizes.step_warmup)


# ---------------------------------------------------------------------------------------------
# 3. MI pass as a fraction of a CPU-default training step
# ---------------------------------------------------------------------------------------------
def bench_mi_fraction(ctx: BenchContext, shape: Shape, num_samples: int, *, reps: int,
                      warmup: int) -> Comparison:
    """Seconds of one collapse-diagnostics pass (both families) over one CPU-default training step.

    The step is the CPU default config (PPO with a critic, mini-batch 32, micro-batch 8, top-p 1.0
    filter) at ``shape``. The MI pass is :func:`ragen2.metrics.collapse.collapse_metrics` on that
    step's own rollout batch, with every response standing in as its reasoning
    (:func:`with_response_reasoning`), as the loop computes it (``num_samples`` pairs per family).
    """
    from ragen2.metrics.collapse import collapse_metrics

    cfg = run_config(shape)
    stepper = Ragen2Stepper(cfg, ctx.policy_path)
    collapse_cfg = CollapseConfig(num_samples=num_samples)
    state: dict[str, Any] = {"batch": None, "step_phases": [], "mi_metrics": None}

    def step() -> Sample:
        times = stepper.step()
        state["batch"] = with_response_reasoning(times.rollout, ctx.tokenizer)
        state["step_phases"].append((times.rollout_s, times.update_s))
        return Sample(times.total_s)

    def mi_pass() -> Sample:
        if state["batch"] is None:
            step()
        rng = np.random.default_rng(stepper.steps_done)
        start = time.perf_counter()
        state["mi_metrics"] = collapse_metrics(stepper.models.actor, ctx.tokenizer, state["batch"], collapse_cfg,
                                               rng, monitors={})
        return Sample(time.perf_counter() - start)

    comparison = interleave("time_fraction", step, mi_pass, reps=reps, warmup=warmup)
    m = state["mi_metrics"] or {}
    phases = state["step_phases"][warmup:]
    comparison.extra.update(
        shape=shape_dict(shape), algo=cfg.trainer.algo, num_samples=num_samples,
        baseline_name="ragen2 training step, CPU default config (ppo) at this shape",
        candidate_name="collapse_metrics, first_turn + trajectory families",
        step_rollout_s=float(np.median([p[0] for p in phases])),
        step_update_s=float(np.median([p[1] for p in phases])),
        mi_rows={f: m.get(f"collapse_{f}/num_rows") for f in ("first_turn", "trajectory")},
        mi_columns={f: m.get(f"collapse_{f}/num_columns") for f in ("first_turn", "trajectory")},
        mi_skipped={f: m.get(f"collapse_{f}/skipped") for f in ("first_turn", "trajectory")})
    return comparison


# ---------------------------------------------------------------------------------------------
# 4. update phase with half the groups kept
# ---------------------------------------------------------------------------------------------
def bench_update_half_keep(ctx: BenchContext, shape: Shape, *, reps: int, warmup: int,
                           regularize_kept_only: bool | None = None) -> Comparison:
    """Update-phase seconds keeping half the groups (``top_k`` 0.5) over keeping all (``none``).

    Both run on the same rollout batch with the CPU default trainer (PPO) and the default filter
    settings otherwise (``loss_scaling=none``; ``regularize_kept_only`` as configured unless
    given).
    """
    cfg = run_config(shape)
    base_filter = cfg.filter if regularize_kept_only is None else dataclasses.replace(
        cfg.filter, regularize_kept_only=regularize_kept_only)
    keep_all = dataclasses.replace(base_filter, strategy="none")
    keep_half = dataclasses.replace(base_filter, strategy="top_k", value=0.5)
    stepper = Ragen2Stepper(cfg, ctx.policy_path)
    rollout = stepper.rollout(1)
    rows: dict[str, float] = {}

    def run(name: str, filter_cfg: FilterConfig) -> Callable[[], Sample]:
        def once() -> Sample:
            start = time.perf_counter()
            metrics = stepper.update(rollout, filter_cfg)
            seconds = time.perf_counter() - start
            rows[name] = metrics.get("train/batch_rows", 0.0)
            rows[name + "_kept_groups"] = metrics.get("filter/kept_count", float("nan"))
            return Sample(seconds)
        return once

    comparison = interleave("time_fraction", run("all", keep_all), run("half", keep_half), reps=reps,
                            warmup=warmup)
    comparison.extra.update(
        shape=shape_dict(shape), algo=cfg.trainer.algo, regularize_kept_only=base_filter.regularize_kept_only,
        loss_scaling=base_filter.loss_scaling, baseline_name="update phase, filter keeps all groups",
        candidate_name="update phase, filter keeps half the groups (top_k 0.5)",
        update_rows_all=rows.get("all"), update_rows_half=rows.get("half"),
        kept_groups_all=rows.get("all_kept_groups"), kept_groups_half=rows.get("half_kept_groups"))
    return comparison


# ---------------------------------------------------------------------------------------------
# 5. cross-scoring with KV reuse against one pass per pair
# ---------------------------------------------------------------------------------------------
def scoring_problem(ctx: BenchContext, num_prompts: int, num_reasonings: int, reasoning_tokens: int,
                    seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """First-turn FrozenLake prompts (distinct seeds) and random reasonings of 1/2..1x the given length."""
    from ragen2 import envs
    from ragen2.rollout import conversation, render, resolve_limits, system_prompt, turn_block

    prompts = []
    for s in range(num_prompts):
        env = envs.make(ENV_NAME)
        obs, _ = env.reset(seed=10_000 + s)
        limits = resolve_limits(RolloutConfig(), env)
        messages = conversation(system_prompt(env, limits.max_actions_per_traj),
                                [turn_block(1, obs, limits.max_actions_per_traj, limits.max_tokens_hint)], [])
        text = render(ctx.tokenizer, messages, generation=True)
        prompts.append(ctx.tokenizer(text, add_special_tokens=False)["input_ids"])
    rng = np.random.default_rng(seed)
    special = set(ctx.tokenizer.all_special_ids)
    vocab = [i for i in range(len(ctx.tokenizer)) if i not in special]
    low = max(1, reasoning_tokens // 2)
    reasonings = [rng.choice(vocab, size=int(rng.integers(low, reasoning_tokens + 1))).tolist()
                  for _ in range(num_reasonings)]
    return prompts, reasonings


def bench_scoring(ctx: BenchContext, num_prompts: int, num_reasonings: int, reasoning_tokens: int, *,
                  reps: int, warmup: int) -> Comparison:
    """Seconds of ``naive_cross_logprobs`` over seconds of the KV-reuse ``cross_logprobs``."""
    from ragen2.metrics import cross_logprobs, naive_cross_logprobs

    prompts, reasonings = scoring_problem(ctx, num_prompts, num_reasonings, reasoning_tokens)
    results: dict[str, np.ndarray] = {}

    def candidate() -> Sample:
        start = time.perf_counter()
        results["fast"], _ = cross_logprobs(ctx.model, None, prompts, reasonings)
        return Sample(time.perf_counter() - start)

    def baseline() -> Sample:
        start = time.perf_counter()
        results["naive"], _ = naive_cross_logprobs(ctx.model, None, prompts, reasonings)
        return Sample(time.perf_counter() - start)

    comparison = interleave("speedup", baseline, candidate, reps=reps, warmup=warmup)
    comparison.extra.update(
        prompts=num_prompts, reasonings=num_reasonings, reasoning_tokens_max=reasoning_tokens,
        prompt_tokens_mean=float(np.mean([len(p) for p in prompts])),
        max_abs_diff=float(np.max(np.abs(results["fast"] - results["naive"]))),
        baseline_name="naive_cross_logprobs (one forward per pair)",
        candidate_name="cross_logprobs (prompt KV cache reused, batch 64)")
    return comparison


# ---------------------------------------------------------------------------------------------
# 6. critic and actor updates: each prompt once per micro-batch against once per row
# ---------------------------------------------------------------------------------------------
def bench_update_shared_prefix(ctx: BenchContext, shape: Shape, *, reps: int, warmup: int) -> Comparison:
    """Seconds of the critic + actor updates with the plain forward over those with the shared-prompt forward.

    One rollout batch of the CPU profile's trainer (PPO, critic, mini-batch 32, micro-batch 16), every group
    kept, prepared once; both variants update from the same state in turn (each repetition moves the
    models, as a training step does). ``max_abs_diff`` in the details is the largest difference of the
    log-probs the two forwards give at the trained tokens of the first micro-batch (they must agree).
    """
    from ragen2.trainer.actor import forward_logprobs, update_actor
    from ragen2.trainer.critic import update_critic
    from ragen2.trainer.update_data import loss_settings, mini_batch_rows, prepare_update_batch

    cfg = run_config(shape, micro_batch_size=16)
    stepper = Ragen2Stepper(cfg, ctx.policy_path)
    rollout = stepper.rollout(1)
    batch, _ = prepare_update_batch(stepper.models, rollout, list(range(rollout.env_groups)), cfg, stepper.preset)
    tc = cfg.trainer
    mini = mini_batch_rows(cfg, len(batch), len(rollout))
    micro = min(tc.micro_batch_size, mini)
    settings = loss_settings(cfg)
    first = batch.select(range(min(micro, len(batch))))
    plain, _ = forward_logprobs(stepper.models.actor, first, with_entropy=False, share_prefix=False)
    shared, _ = forward_logprobs(stepper.models.actor, first, with_entropy=False, share_prefix=True)

    def run(share: bool) -> Callable[[], Sample]:
        def once() -> Sample:
            start = time.perf_counter()
            if stepper.models.critic is not None:
                update_critic(stepper.models.critic, stepper.critic_opt, batch, mini_batch_size=mini,
                              micro_batch_size=micro, epochs=tc.ppo_epochs, grad_clip=tc.grad_clip,
                              rng=stepper.shuffle_rng, share_prefix=share)
            update_actor(stepper.models.actor, stepper.actor_opt, batch,
                         dataclasses.replace(settings, share_prefix=share), mini_batch_size=mini,
                         micro_batch_size=micro, epochs=tc.ppo_epochs, grad_clip=tc.grad_clip, rng=stepper.shuffle_rng)
            return Sample(time.perf_counter() - start)
        return once

    comparison = interleave("speedup", run(False), run(True), reps=reps, warmup=warmup)
    prompt_tokens = [len(t.first_prompt_ids) for t in rollout.trajectories]
    comparison.extra.update(
        shape=shape_dict(shape), algo=tc.algo, rows=len(batch), micro_batch_size=micro,
        prompt_tokens_mean=float(np.mean(prompt_tokens)), row_tokens_mean=float(batch.attention_mask.sum(1).float().mean()),
        max_abs_diff=float(((plain - shared) * first.loss_mask).abs().max().detach()),
        baseline_name="update_critic + update_actor, every row's prompt run per row",
        candidate_name="update_critic + update_actor, the ragged forward: each distinct prompt once per micro-batch, "
                       "each row up to its last trained token (ragen2.model.prefix)")
    return comparison


def _update_with_variants(ctx: BenchContext, s: BenchSizes) -> Comparison:
    comparison = bench_update_half_keep(ctx, s.update, reps=s.step_reps, warmup=s.step_warmup)
    if s.update_variants:
        flipped = not comparison.extra["regularize_kept_only"]
        variant = bench_update_half_keep(ctx, s.update, reps=s.step_reps, warmup=s.step_warmup,
                                         regularize_kept_only=flipped)
        comparison.extra[f"variant_regularize_kept_only_{flipped}"] = variant.summary()
    return comparison


# ---------------------------------------------------------------------------------------------
# 7. a whole training step over its compute floor (ragen2.bench.floor)
# ---------------------------------------------------------------------------------------------
def profile_run_config(algo: str, sizes: BenchSizes, params: Path) -> RunConfig:
    """The CPU profile's main ``algo`` run (``step_over_floor_<algo>`` trains it), or (``profile_from_params`` off)
    a two-step run of the default config at ``profile_shape`` with every diagnostic due at least once."""
    from ragen2.bench.floor import profile_config
    from ragen2.config import GradAnalysisConfig

    if sizes.profile_from_params:
        return profile_config(algo, params)
    cfg = run_config(sizes.profile_shape, algo=algo, steps=2, test_freq=2, save_freq=2)
    return dataclasses.replace(cfg, rollout=dataclasses.replace(cfg.rollout, val_groups=2),
                               collapse=CollapseConfig(compute_freq=2, num_samples=4),
                               grad_analysis=GradAnalysisConfig(enabled=True, every=1, num_buckets=2))


def bench_floor(ctx: BenchContext, algo: str, sizes: BenchSizes, params: Path, cache_dir: Path) -> Comparison:
    from ragen2.bench.floor import bench_step_over_floor, initial_policy_built
    from ragen2.bench.profile_runs import profile_run_id

    cfg = profile_run_config(algo, sizes, params)
    init = initial_policy_built(cfg, cache_dir) if cfg.warm_start.steps > 0 else ctx.policy_path
    comparison = bench_step_over_floor(cfg, init, reps=sizes.floor_reps, floor_repeats=sizes.floor_repeats)
    if sizes.profile_from_params:  # which of the profile's runs it trained, and with which override
        run_id, overrides = profile_run_id(algo, params)
        comparison.extra.update(run=run_id, overrides=list(overrides))
    return comparison


def bench_pin_price(sizes: BenchSizes, params: Path, cache_dir: Path, log: Callable[[str], None]) -> Comparison:
    """The pinned kernels' price: the GRPO main run's step (:func:`profile_run_config`) trained in fresh processes
    under ``RAGEN2_KERNELS=native`` (the baseline) and under the pin (the candidate), interleaved
    (:func:`ragen2.bench.ab.compare`, the whole step as the pipeline pays it); the ratio is pinned over native. Its
    details give each side's phases (rollout, update, diagnostics, gradient analysis, validation), where the
    difference goes."""
    import tempfile

    import yaml

    import ragen2
    from ragen2.bench.ab import KERNEL_ENVS, compare
    from ragen2.config import to_dict

    cfg = profile_run_config("grpo", sizes, params)
    run_id = "frozenlake__grpo__none__bench__s0"
    tree = Path(ragen2.__file__).resolve().parents[1]  # this package's checkout, on both sides
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "params.yaml").write_text(yaml.safe_dump({"base": to_dict(cfg), "runs": {run_id: {}}}))
        result = compare(tree, tree, run_id, sizes.pin_steps, sizes.pin_reps, cache_dir.resolve(),
                         envs=(KERNEL_ENVS["native"], KERNEL_ENVS["pinned"]), cwd=Path(tmp), log=log)
    comparison = Comparison("time_fraction")
    for native, pinned in zip(result["runs"]["old"], result["runs"]["new"]):
        comparison.add(Sample(native["per_step"]), Sample(pinned["per_step"]))
    comparison.extra.update(steps=sizes.pin_steps, phases_native_s=_phases(result["summary"]["old"]),
                            phases_pinned_s=_phases(result["summary"]["new"]))
    return comparison


def bench_multiturn(sizes: BenchSizes, params: Path, cache_dir: Path) -> Comparison:
    """A PPO step on the paper's multi-turn FrozenLake over the single-turn step of the same batch
    (:mod:`ragen2.bench.multiturn`), from the CPU profile's main run (quick: the two-step default run)."""
    from ragen2.bench.multiturn import bench_multiturn_step

    return bench_multiturn_step(profile_run_config("ppo", sizes, params), cache_dir, steps=sizes.multiturn_steps,
                                reps=sizes.multiturn_reps)


def _phases(summary: dict[str, Any]) -> dict[str, float]:
    from ragen2.bench.ab import PHASES

    return {phase: summary[phase] for phase in PHASES}


# ---------------------------------------------------------------------------------------------
# All of them
# ---------------------------------------------------------------------------------------------
def run_benchmarks(sizes: BenchSizes, cache_dir: Path, *, only: tuple[str, ...] = BENCHMARKS,
                   log: Callable[[str], None] = print, params: Path = Path("params.yaml"),
                   on_figure: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the benchmarks named in ``only`` and return the report (see :mod:`ragen2.bench`); ``params`` holds the
    CPU profile the ``step_over_floor_*`` figures train (full sizes only).

    A figure that raises is reported as failed (its value ``None``, ``details[name]["failed"]`` its one-line
    reason) and the rest still run; ``on_figure`` gets the report as it stands after every figure, so a caller can
    write it and an interrupted bench keeps what it measured.
    """
    unknown = [name for name in only if name not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {list(BENCHMARKS)}")
    started = time.perf_counter()
    report: dict[str, Any] = {}
    details: dict[str, Any] = {}
    targets: dict[str, Any] = {}
    machine = machine_info() | {"load_average_before": load_average()}

    def assembled() -> dict[str, Any]:
        return {**report, "details": details, "targets": targets, "machine": machine,
                "sizes": dataclasses.asdict(sizes), "seconds_total": time.perf_counter() - started}

    ctx = make_context(cache_dir)
    s = sizes
    runners: dict[str, Callable[[], Comparison]] = {
        "rollout_speedup_vs_generate": lambda: bench_rollout(ctx, s.rollout, reps=s.reps, warmup=s.warmup),
        "grpo_step_speedup_vs_trl_native": lambda: bench_grpo_native(ctx, s, params, cache_dir),
        "mi_cost_fraction_of_step": lambda: bench_mi_fraction(ctx, s.mi, s.mi_num_samples, reps=s.mi_reps,
                                                              warmup=s.mi_warmup),
        "update_time_ratio_at_half_keep": lambda: _update_with_variants(ctx, s),
        "scoring_speedup_vs_naive": lambda: bench_scoring(ctx, s.scoring_prompts, s.scoring_reasonings,
                                                          s.scoring_reasoning_tokens, reps=s.reps,
                                                          warmup=s.warmup),
        "update_speedup_shared_prefix": lambda: bench_update_shared_prefix(ctx, s.prefix, reps=s.step_reps,
                                                                           warmup=s.step_warmup),
        "step_over_floor_grpo": lambda: bench_floor(ctx, "grpo", s, params, cache_dir),
        "step_over_floor_ppo": lambda: bench_floor(ctx, "ppo", s, params, cache_dir),
        "pinned_step_over_native": lambda: bench_pin_price(s, params, cache_dir, log),
        "multiturn_step_over_single": lambda: bench_multiturn(s, params, cache_dir),
    }
    for name in BENCHMARKS:
        if name not in only:
            continue
        t0 = time.perf_counter()
        op, value = TARGETS[name]
        try:
            summary = runners[name]().summary()
        except Exception as e:  # noqa: BLE001 - one figure's failure is reported, the others still run
            reason = f"{type(e).__name__}: {' '.join(str(e).split())}"
            report[name] = None
            details[name] = {"failed": reason, "wall_s": time.perf_counter() - t0}
            targets[name] = {"op": op, "value": value, "met": None}
            log(f"{name}: failed ({reason}) [{details[name]['wall_s']:.1f} s]")
        else:
            summary["load_average_after"] = load_average()
            summary["wall_s"] = time.perf_counter() - t0
            report[name] = summary["median"]
            details[name] = summary
            met = summary["median"] >= value if op == ">=" else summary["median"] <= value
            targets[name] = {"op": op, "value": value, "met": bool(met)}
            log(f"{name}: {summary['median']:.3f} (min {summary['min']:.3f}, max {summary['max']:.3f}; "
                f"baseline {summary['baseline_s']:.3f} s, candidate {summary['candidate_s']:.3f} s; "
                f"target {op} {value}: {'met' if met else 'missed'}) [{summary['wall_s']:.1f} s]")
        if on_figure is not None:
            on_figure(assembled())
    return assembled()
