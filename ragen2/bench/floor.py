"""The compute floor of a training step, and ``step_over_floor``: what a whole step costs over it.

The floor is the work no trainer of the same model can avoid on one step's batch, timed in the process that
trains:

- **update**: one forward + backward of every trained model (the actor; PPO also the critic) over the step's
  *distinct* tokens: each group's prompt once, then every row's response (all rows of one width, the batch's
  mean response length, so no padding is computed), the log-softmax of the actor's response logits included;
- **rollout**: one cached forward per generated token position: the distinct prompts prefilled once, then one
  forward per position of the rows still generating there (a row leaves after its last token), the model's own
  ``forward`` with its own KV cache.

No optimiser step, sampling, environment, tokenisation, old log-probs, values pass, diagnostics or validation
is in it. The batch is the run's step-1 rollout of its initial policy (its prompts and response lengths).

The step is a whole run of :func:`ragen2.trainer.loop.train` with the run's settings, timed by its own timer
(``summary.json``'s ``total_elapsed``: step-0 validation, the MI diagnostics at their ``compute_freq``,
validation at its ``test_freq``, gradient analysis, logging and checkpoints included) over its steps: what the
pipeline pays per step. ``step_over_floor`` = that / the floor, one ratio per repetition, runs and floors
interleaved.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen2.bench.profile_runs import profile_run_id
from ragen2.config import RunConfig, load_config
from ragen2.rollout.types import RolloutBatch


def profile_config(algo: str, params_path: Path, overrides: tuple[str, ...] = ()) -> RunConfig:
    """The run config of the CPU profile's main ``algo`` run from ``params_path`` (must hold the ``cpu`` profile), or,
    where the profile has no main run of ``algo``, its first main run (:data:`ragen2.bench.profile_runs.MAIN_RUN`) with ``trainer.algo=algo``
    (:func:`profile_run_id` says which).

    Raises:
        ConfigError: see :func:`ragen2.bench.profile_runs.profile_run_id`.
    """
    run_id, overrides = profile_run_id(algo, params_path, overrides)
    cfg = load_config(run_id, params_path=params_path, overrides=list(overrides))
    return dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, device="cpu"))


def initial_policy_built(cfg: RunConfig, cache_dir: Path, threads: int = 2) -> Path:
    """The run's initial policy (its warm start built on ``threads`` threads if missing, as the pipeline does)."""
    from ragen2.warmstart import initial_policy

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return initial_policy(cfg, Path(cache_dir))
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# The floor
# ---------------------------------------------------------------------------------------------
@dataclass
class FloorProblem:
    """One step's batch in the floor's layout."""

    prompts: list[list[int]]
    """The distinct prompts (one per group), each ending before the first trained token."""
    group_of_row: torch.Tensor
    """``[B]`` the prompt of each row."""
    responses: torch.Tensor
    """``[B, W]`` each row's trained tokens, cut (or cyclically extended) to the mean width ``W``."""
    generated: list[list[int]]
    """Each row's trained tokens as generated (the decode floor feeds them one position at a time)."""

    @property
    def distinct_tokens(self) -> int:
        return sum(len(p) for p in self.prompts) + int(self.responses.numel())


def floor_problem(rollout: RolloutBatch) -> FloorProblem:
    """The floor's layout of a rollout batch (see the module docstring)."""
    rows = rollout.trajectories
    start = [t.loss_mask.index(1) for t in rows]
    prompts: dict[tuple[int, ...], int] = {}
    group_of_row = [prompts.setdefault(tuple(t.input_ids[:s]), len(prompts)) for t, s in zip(rows, start)]
    generated = [[tok for tok, m in zip(t.input_ids[s:], t.loss_mask[s:]) if m] for t, s in zip(rows, start)]
    width = max(1, round(float(np.mean([len(g) for g in generated]))))
    responses = torch.tensor([[g[i % len(g)] for i in range(width)] for g in generated], dtype=torch.long)
    return FloorProblem([list(p) for p in prompts], torch.tensor(group_of_row), responses, generated)


def _left_padded(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    return ids, mask


def _cache_of(out) -> Any:
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


def update_floor(body: torch.nn.Module, problem: FloorProblem, pad_id: int, head: torch.nn.Module | None) -> None:
    """One forward + backward of ``body`` over the distinct tokens: the prompts once (left-padded, a KV cache),
    gathered to their rows, then every row's response on top; ``head`` (the LM head: log-softmax and the
    response tokens' log-probs) or a sum of the last hidden states (a value head's cost is negligible)."""
    from ragen2.model.prefix import cache_kwarg

    ids, mask = _left_padded(problem.prompts, pad_id)
    prefix = body(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp_min(0),
                  use_cache=True)
    cache = _cache_of(prefix)
    cache.batch_select_indices(problem.group_of_row)
    rows, width = problem.responses.shape
    lengths = mask.sum(-1)[problem.group_of_row]
    positions = lengths[:, None] + torch.arange(width)[None, :]
    attention = torch.cat([mask[problem.group_of_row], torch.ones((rows, width), dtype=torch.long)], dim=1)
    hidden = body(input_ids=problem.responses, attention_mask=attention, position_ids=positions, use_cache=False,
                  **{cache_kwarg(type(body)) or "cache": cache}).last_hidden_state
    if head is None:
        loss = hidden.sum()
    else:
        logp = torch.log_softmax(head(hidden[:, :-1]).float(), dim=-1)
        loss = -logp.gather(-1, problem.responses[:, 1:, None]).sum()
    loss.backward()


@torch.inference_mode()
def decode_floor(model: torch.nn.Module, problem: FloorProblem, pad_id: int) -> int:
    """Prefill the distinct prompts once, then one cached forward per generated position of the rows still
    generating there (``model``'s own forward and cache); returns the number of forwards."""
    from ragen2.model.prefix import cache_kwarg

    ids, mask = _left_padded(problem.prompts, pad_id)
    out = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp_min(0),
                use_cache=True, logits_to_keep=1)
    cache, name = _cache_of(out), cache_kwarg(type(model)) or "cache"
    cache.batch_select_indices(problem.group_of_row)
    lengths = torch.tensor([len(g) for g in problem.generated])
    tokens = torch.zeros((len(lengths), int(lengths.max())), dtype=torch.long)
    for r, g in enumerate(problem.generated):
        tokens[r, :len(g)] = torch.tensor(g)
    live = torch.arange(len(lengths))
    attention = mask[problem.group_of_row]
    next_position = attention.sum(-1)
    calls = 1
    for pos in range(int(lengths.max()) - 1):  # the token at `pos` is fed to predict the one after it
        going = lengths[live] - 1 > pos
        if not bool(going.all()):
            keep = going.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            live, attention, next_position = live[keep], attention[keep], next_position[keep]
        attention = torch.cat([attention, attention.new_ones((len(live), 1))], dim=1)
        model(input_ids=tokens[live, pos, None], attention_mask=attention, position_ids=next_position[:, None],
              use_cache=True, **{name: cache})
        calls += 1
        next_position = next_position + 1
    return calls


@dataclass
class FloorTimes:
    update_s: float
    rollout_s: float

    @property
    def total_s(self) -> float:
        return self.update_s + self.rollout_s


class StepFloor:
    """The floor of one run's step: its models (from the run's initial policy) and its step-1 batch."""

    def __init__(self, cfg: RunConfig, init_policy: Path):
        from ragen2.rollout import collect_rollouts
        from ragen2.trainer.models import build_models
        from ragen2.trainer.seeds import stream_seed, train_seeds

        self.models = build_models(cfg, init_policy)
        rc = cfg.rollout
        self.rollout = collect_rollouts(self.models.actor, self.models.tokenizer, cfg.env, rc, train_seeds(cfg, 1),
                                        group_size=rc.group_size, temperature=rc.temperature,
                                        seed=stream_seed(cfg.seed, "rollout", 1))
        self.problem = floor_problem(self.rollout)
        self.pad_id = int(self.models.tokenizer.pad_token_id)

    def time(self) -> FloorTimes:
        actor = self.models.actor
        start = time.perf_counter()
        update_floor(actor.base_model, self.problem, self.pad_id, actor.get_output_embeddings())
        if self.models.critic is not None:
            update_floor(self.models.critic.backbone, self.problem, self.pad_id, None)
        middle = time.perf_counter()
        decode_floor(actor, self.problem, self.pad_id)
        end = time.perf_counter()
        for model in (actor, self.models.critic):
            if model is not None:
                model.zero_grad(set_to_none=True)
        return FloorTimes(middle - start, end - middle)

    def sizes(self) -> dict[str, Any]:
        p = self.problem
        return {"rows": len(p.generated), "distinct_prompts": len(p.prompts),
                "prompt_tokens_mean": float(np.mean([len(x) for x in p.prompts])),
                "response_tokens_mean": float(np.mean([len(g) for g in p.generated])),
                "response_tokens_max": max(len(g) for g in p.generated), "floor_width": int(p.responses.shape[1]),
                "distinct_tokens": p.distinct_tokens}


def median_floor(floor: StepFloor, repeats: int) -> FloorTimes:
    """The median floor over ``repeats`` timings (each part's median)."""
    times = [floor.time() for _ in range(repeats)]
    return FloorTimes(statistics.median(t.update_s for t in times), statistics.median(t.rollout_s for t in times))


# ---------------------------------------------------------------------------------------------
# The step
# ---------------------------------------------------------------------------------------------
def run_per_step(cfg: RunConfig, init_policy: Path) -> dict[str, float]:
    """Train the run from scratch in a temporary directory; seconds per step (its timer's ``total_elapsed`` over
    its steps) and the per-step means of its timed phases."""
    from ragen2.trainer.loop import TIMED_PHASES, train

    with tempfile.TemporaryDirectory(prefix="ragen2-bench-floor-") as tmp:
        summary = train(cfg, Path(tmp) / "run", init_policy, resume=False, progress=False)
    timings = summary["timings_s"]
    steps = max(int(summary["steps_completed"]), 1)
    out = {"step_s": timings["total_elapsed"] / steps}
    for phase in TIMED_PHASES:
        out[f"{phase}_s"] = timings[f"{phase}_per_step"]
    out["other_s"] = out["step_s"] - sum(out[f"{p}_s"] for p in TIMED_PHASES)
    return out


MEASUREMENT_PHASES = ("diagnostics", "grad_analysis", "validation")
"""Phases of a step that measure the policy rather than train it: the MI diagnostics, the gradient analysis and
validation (the work the pipeline's studies ask for at their frequencies; none of it is in the floor)."""


def training_s(phases: dict[str, float]) -> float:
    """Seconds per step spent training: the step less its :data:`MEASUREMENT_PHASES` (rollout, update, logging and
    checkpoints stay)."""
    return phases["step_s"] - sum(phases[f"{p}_s"] for p in MEASUREMENT_PHASES)


# ---------------------------------------------------------------------------------------------
# The figure
# ---------------------------------------------------------------------------------------------
def bench_step_over_floor(cfg: RunConfig, init_policy: Path, *, reps: int, floor_repeats: int):
    """``step_over_floor`` of one run: per repetition, the run's seconds per step over the median of
    ``floor_repeats`` floor timings, the two interleaved (a one-step run and two floors warm up first).

    Beside it in ``extra``: ``mi_diagnostics_share``, the MI diagnostics' share of a step (amortised over the run),
    and ``training_over_floor``, the step less its measurement phases (:func:`training_s`) over the floor, each the
    median over repetitions."""
    from ragen2.bench.timing import Sample, interleave

    floor = StepFloor(cfg, init_policy)
    median_floor(floor, 2)
    run_per_step(dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, steps=1)), init_policy)
    floors: list[FloorTimes] = []
    runs: list[dict[str, float]] = []

    def baseline() -> Sample:
        floors.append(median_floor(floor, floor_repeats))
        return Sample(floors[-1].total_s)

    def candidate() -> Sample:
        runs.append(run_per_step(cfg, init_policy))
        return Sample(runs[-1]["step_s"])

    comparison = interleave("time_fraction", baseline, candidate, reps=reps, warmup=0)
    t, c = cfg.trainer, cfg.collapse
    comparison.extra.update(
        algo=t.algo, steps=t.steps, mi_compute_freq=c.compute_freq if c.enabled else None, test_freq=t.test_freq,
        grad_analysis_every=cfg.grad_analysis.every if cfg.grad_analysis.enabled else None,
        floor_update_s=statistics.median(f.update_s for f in floors),
        floor_rollout_s=statistics.median(f.rollout_s for f in floors),
        step_phases_s={k: statistics.median(r[k] for r in runs) for k in runs[0]},
        mi_diagnostics_share=statistics.median(r["diagnostics_s"] / r["step_s"] for r in runs),
        training_over_floor=statistics.median(training_s(r) / f.total_s for r, f in zip(runs, floors)),
        floor_sizes=floor.sizes(), policy=str(init_policy),
        baseline_name="compute floor: one forward+backward per trained model over the distinct tokens, "
                      "one cached forward per generated position",
        candidate_name=f"ragen2 train() of the {t.algo} run, seconds per step (its total_elapsed / steps)")
    return comparison
