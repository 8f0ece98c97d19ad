"""The RL training loop: ``train(cfg, run_dir, init_policy)``, readable top to bottom (CleanRL style).

One step (docs/method.md §0): rollout -> collapse diagnostics (unfiltered batch) -> filter (empty: no update)
-> [DAPO: constant groups replaced by fresh ones] -> old/ref log-probs, values, advantages -> critic
update -> [gradient analysis] -> actor update -> validation -> log -> checkpoint.

The run directory's layout is :mod:`ragen2.rundir`'s.

Metric names (one row per step in ``metrics.jsonl`` and the ``trainer.report_to`` loggers; step 0 holds the first
validation):

- ``rollout/score_mean|score_std|score_max|score_min|success|response_length_mean|
  response_length_max|num_actions_mean|pass_at_group``: the unfiltered training batch;
- ``filter/...``: :func:`ragen2.filter.apply_filter` (``kept_count``, ``kept_ratio``, ``empty``,
  ``reward_std_mean`` = the reference's in-group reward std, docs/method.md §4.9, ``zero_variance_count``, ``loss_scale``...);
  ``filter/dynamic_sampling_dropped|rounds|drawn|short`` (DAPO:
  :mod:`ragen2.trainer.dynamic_sampling`), ``filter/consecutive_empty``;
- ``train/batch_rows|task_rows|task_tokens|mini_batch_rows``;
- ``adv/mean|std|abs_max`` (over the task tokens);
- ``actor/entropy_old`` (current actor on the batch), ``actor/pg_loss|entropy_loss|kl_loss|entropy|kl|
  pg_clipfrac|dual_clipfrac|ppo_kl|grad_norm|skipped_steps|optimizer_steps``;
- ``critic/vf_loss|vf_clipfrac|grad_norm|values_mean`` (PPO);
- ``collapse/...``, ``collapse_<family>/...``: :func:`ragen2.metrics.collapse.collapse_metrics` at step 1
  and every ``compute_freq`` steps (on the unfiltered batch);
- ``grad_norm/<bucket>/task|kl|entropy|reg|rv_mean``: gradient analysis steps;
- ``val/success``, ``val/score``, ``val/response_length_mean``: validation steps (each episode's success also in
  ``val_episodes.jsonl``, :func:`ragen2.rundir.read_val_episodes`);
- ``early_stopped/<rule>`` = 1 on the step a rule fires;
- ``timing_s/rollout|update|diagnostics|grad_analysis|validation|step`` (``rollout`` includes DAPO's
  refill rollouts; ``update`` = filter, batch preparation, critic and actor updates; ``diagnostics`` =
  the collapse (MI) metrics; ``grad_analysis`` = the RV-bucketed gradient analysis).

Choices where the reference implementation (docs/method.md §9) is not followed to the letter:

- Rows trained: the kept groups' rows (``filter.regularize_kept_only = True``, the config default,
  as the reference does: its filter removes rows before the update). With ``False`` the dropped
  groups' rows stay in the update batch with ``task_weight = 0``: they get the KL and entropy terms
  but no policy-gradient or value loss (an ablation).
- No duplicate-row padding to a multiple of ``lcm(env_groups, mini_batch)`` (docs/method.md §4.6). Instead,
  when ``filter.loss_scaling != none`` the mini-batch shrinks with the share of rows kept (the
  paper's text), and the loss terms are multiplied by :func:`ragen2.filter.loss_scales`.
- Loss aggregation is exact over each mini-batch (denominators from the whole mini-batch), so it
  does not depend on ``micro_batch_size``; veRL aggregates per micro-batch.
- Mini-batches hold whole prompt groups, in a seeded random group order per epoch
  (:func:`ragen2.trainer.batch.group_order`), as veRL's consecutive split of the group-ordered batch
  gives; rows are not shuffled across groups, which lets each micro-batch run its one or two prompts
  once. The models stay in eval mode (dropout off).
- Mixed precision (``trainer.precision``): the trained models keep float32 master weights and AdamW state;
  rollouts, diagnostics, validation and the update's forward passes run under the precision's autocast
  (:mod:`ragen2.trainer.precision`; ``fp32``, the CPU default, has none), the reference's split of bf16
  compute and fp32 masters.
- Validation uses one fixed sampling seed per run, so successive validations differ only through
  the policy. A run that stops early is validated at its last step, even after empty filter steps.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ragen2.config import RunConfig, to_dict
from ragen2.fileio import write_json_atomic
from ragen2.filter import apply_filter, group_std, loss_scales
from ragen2.kernels import check_pinned
from ragen2.metrics.collapse import collapse_due, collapse_metrics
from ragen2.rundir import (
    CONFIG,
    ENV,
    GRAD_ANALYSIS,
    SUMMARY,
    cut_val_episodes,
    environment_info,
    write_val_episodes,
)
from ragen2.trainer.actor import update_actor
from ragen2.trainer.algos import get_preset
from ragen2.trainer.checkpoint import (
    load_checkpoint,
    resumable_checkpoint,
    save_checkpoint,
)
from ragen2.trainer.critic import update_critic
from ragen2.trainer.dynamic_sampling import dynamic_sampling
from ragen2.trainer.grad_analysis import append_table, grad_analysis, table_metrics
from ragen2.trainer.models import build_models, run_precision
from ragen2.trainer.precision import autocast, model_device
from ragen2.trainer.runlog import RunLogger, resolve_report_to
from ragen2.trainer.seeds import seed_everything, stream_seed, train_seeds, val_seeds
from ragen2.trainer.state import TrainingState
from ragen2.trainer.timing import PhaseTimer
from ragen2.trainer.update_data import loss_settings, mini_batch_rows, prepare_update_batch, rollout_metrics

TIMED_PHASES = ("rollout", "update", "diagnostics", "grad_analysis", "validation")
log = logging.getLogger(__name__)


def train(cfg: RunConfig, run_dir: Path, init_policy: Path, *, resume: bool = True,
          progress: bool | None = None) -> dict[str, Any]:
    """Train a policy with the run's algorithm, filter and diagnostics; returns ``summary.json``'s contents.

    ``init_policy`` is the loadable policy RL starts from (:func:`ragen2.warmstart.initial_policy` resolves
    it and builds a missing warm start). ``resume`` continues from ``run_dir``'s latest checkpoint, exactly
    as an uninterrupted run; ``False`` starts over. ``progress``: a tqdm bar (``None``: only on a terminal).
    """
    from ragen2.rollout.collect import collect_rollouts

    t_start = time.perf_counter()
    run_dir = Path(run_dir)
    tc, rc = cfg.trainer, cfg.rollout
    resolve_report_to(tc.report_to)  # a logger that is not installed is named before anything starts
    run_dir.mkdir(parents=True, exist_ok=True)

    # TRY NOT TO MODIFY: seeding, models, optimisers, resume from the latest checkpoint
    seed_everything(cfg.seed)
    models = build_models(cfg, init_policy)
    actor, tokenizer = models.actor, models.tokenizer
    precision, device = run_precision(cfg), model_device(actor)
    ts = TrainingState.create(cfg, models, precision, device)
    seed_everything(cfg.seed)  # again: building a cached vs a fresh policy must not shift the streams
    start_step, history, totals = 1, None, {"elapsed_s": 0.0}
    if (ckpt_path := resumable_checkpoint(cfg, run_dir, resume)) is not None:
        start_step, history, totals = ts.restore(load_checkpoint(ckpt_path, map_location=device))
        log.info("resuming %s from step %d of %d (%s)", run_dir, start_step - 1, tc.steps, ckpt_path.name)
    cut_val_episodes(run_dir, start_step - 1)  # what a crashed run validated after its checkpoint is redone
    elapsed_before = float(totals.get("elapsed_s", 0.0))
    write_json_atomic(run_dir / CONFIG, to_dict(cfg))
    env = environment_info(actor)
    write_json_atomic(run_dir / ENV, env)
    check_pinned(env, device=device.type)  # one line when the kernels are not the committed results'
    logger = RunLogger(run_dir, history, params=to_dict(cfg), report_to=tc.report_to)
    timer = PhaseTimer(always=("rollout", "update", "diagnostics"))

    def compute():  # the run's autocast region for forward passes outside the update (none for fp32)
        return autocast(precision, device)

    def validate(step: int) -> dict[str, float]:
        seeds = val_seeds(cfg)
        with timer.phase("validation"), compute():
            val = collect_rollouts(actor, tokenizer, cfg.env, rc, seeds, group_size=1,
                                   temperature=rc.val_temperature, seed=stream_seed(cfg.seed, "validation"))
        write_val_episodes(run_dir, step, val.successes.ravel(), first_seed=seeds[0])  # evaluation-noise intervals
        m = rollout_metrics(val, prefix="val")
        return {"val/success": m["val/success"], "val/score": m["val/score_mean"],
                "val/response_length_mean": m["val/response_length_mean"]}

    def checkpoint(step: int) -> None:
        totals["elapsed_s"] = elapsed_before + time.perf_counter() - t_start
        save_checkpoint(run_dir, step, ts.checkpoint(step, logger.history, totals), keep_every=tc.keep_every)

    if start_step == 1 and not logger.history:  # validation before training (step 0)
        timer.seconds = {}
        metrics = validate(0)
        ts.stopper.on_validation(metrics["val/success"])
        logger.log(0, {**metrics, "timing_s/validation": timer.seconds["validation"]})
        if tc.save_freq > 0:
            checkpoint(0)

    bar = tqdm(range(start_step, tc.steps + 1), initial=start_step - 1, total=tc.steps, desc=cfg.env.name,
               disable=(not progress) if progress is not None else None, dynamic_ncols=True)
    for step in bar:
        if ts.stopper.reason is not None:
            break
        t_step, metrics = time.perf_counter(), {}
        timer.reset()

        # ALGO LOGIC: rollout (fresh env seeds every step)
        with timer.phase("rollout"), compute():
            actor.eval()
            rollout = collect_rollouts(actor, tokenizer, cfg.env, rc, train_seeds(cfg, step), group_size=rc.group_size,
                                       temperature=rc.temperature, seed=stream_seed(cfg.seed, "rollout", step))
        metrics.update(rollout_metrics(rollout))

        # ALGO LOGIC: collapse diagnostics on the unfiltered batch
        if cfg.collapse.enabled and collapse_due(step, cfg.collapse):
            with timer.phase("diagnostics"), compute():
                metrics.update(collapse_metrics(actor, tokenizer, rollout, cfg.collapse,
                                                np.random.default_rng(stream_seed(cfg.seed, "collapse", step)),
                                                monitors=ts.monitors))

        # ALGO LOGIC: filter groups (an empty result skips the update); DAPO replaces its constant groups
        with timer.phase("update"):
            outcome = apply_filter(rollout.scores, cfg.filter, successes=rollout.successes,
                                   lengths=rollout.response_lengths)
            metrics.update(outcome.metrics)
        with timer.phase("rollout"), compute():
            refilled = dynamic_sampling(models, cfg, rollout, [int(g) for g in outcome.kept], step)
            metrics.update(refilled.metrics)
        kept = refilled.kept
        stop_now = ts.stopper.on_step(metrics["filter/reward_std_mean"]) if kept else ts.stopper.on_empty_step()
        metrics["filter/consecutive_empty"] = float(ts.stopper.consecutive_empty)

        # ALGO LOGIC: old/ref log-probs, values, advantages; critic and actor updates
        if kept:
            metrics.update(update_step(ts, cfg, refilled.rollout, kept, rollout.env_groups, step, timer,
                                       precision, grad_table=run_dir / GRAD_ANALYSIS))

        # validation every test_freq steps and at the end (empty steps validate only at the end)
        last = stop_now or step == tc.steps
        if last or (kept and tc.test_freq > 0 and step % tc.test_freq == 0):
            metrics.update(validate(step))
            last = ts.stopper.on_validation(metrics["val/success"]) or last
        if ts.stopper.reason is not None:
            metrics[f"early_stopped/{ts.stopper.reason}"] = 1.0
        metrics.update({f"timing_s/{name}": s for name, s in timer.seconds.items()})
        metrics["timing_s/step"] = time.perf_counter() - t_step
        _accumulate(totals, timer.seconds)
        logger.log(step, metrics)
        bar.set_postfix(score=f"{metrics['rollout/score_mean']:.3f}", kept=len(kept),
                        val=f"{metrics.get('val/success', math.nan):.3f}")

        # checkpoint every save_freq steps and at the end (not after an empty step)
        if (kept and tc.save_freq > 0 and step % tc.save_freq == 0) or last:
            t0 = time.perf_counter()
            checkpoint(step)
            totals["checkpoint_s"] = totals.get("checkpoint_s", 0.0) + time.perf_counter() - t0
        if last:
            break
    bar.close()
    logger.close()
    totals["elapsed_s"] = elapsed_before + time.perf_counter() - t_start
    summary = summarize(logger.history, ts.stopper.reason, totals, tc.steps)
    write_json_atomic(run_dir / SUMMARY, summary)
    return summary


def update_step(ts: TrainingState, cfg: RunConfig, rollout, kept: list[int], env_groups: int, step: int,
                timer: PhaseTimer, precision: str, grad_table: Path) -> dict[str, float]:
    """One update on the kept groups of ``rollout``: batch (old/ref log-probs, values, advantages), critic update
    (GAE only), the RV-bucketed gradient analysis when due (no optimiser step), actor update; returns metrics.

    ``env_groups`` counts the groups rolled out before filtering (the keep rate's denominator).
    """
    tc, models, metrics = cfg.trainer, ts.models, {}
    with timer.phase("update"):
        batch, batch_metrics = prepare_update_batch(models, rollout, kept, cfg, get_preset(tc.algo))
        metrics.update(batch_metrics)
        settings = loss_settings(cfg, loss_scales(len(kept), env_groups, cfg.filter))
        mini = mini_batch_rows(cfg, len(batch), env_groups * cfg.rollout.group_size)
        micro = min(tc.micro_batch_size, mini)
        metrics["train/mini_batch_rows"] = float(mini)
        if models.critic is not None:
            metrics.update(update_critic(models.critic, ts.critic_opt, batch, mini_batch_size=mini,
                                         micro_batch_size=micro, epochs=tc.ppo_epochs, grad_clip=tc.grad_clip,
                                         rng=ts.shuffle_rng, precision=precision, scaler=ts.critic_scaler))
    ga = cfg.grad_analysis
    if ga.enabled and (step - 1) % ga.every == 0:
        with timer.phase("grad_analysis"):
            rv = dict(enumerate(group_std(rollout.scores).tolist()))
            table = grad_analysis(models.actor, batch, rv, settings, num_buckets=ga.num_buckets,
                                  mini_batch_size=tc.mini_batch_size, micro_batch_size=tc.micro_batch_size, step=step)
            append_table(grad_table, table, keep_through_step=step - 1)
            metrics.update(table_metrics(table))
    with timer.phase("update"):
        metrics.update(update_actor(models.actor, ts.actor_opt, batch, settings, mini_batch_size=mini,
                                    micro_batch_size=micro, epochs=tc.ppo_epochs, grad_clip=tc.grad_clip,
                                    rng=ts.shuffle_rng, scaler=ts.actor_scaler))
    return metrics


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
def _accumulate(totals: dict[str, float], seconds: dict[str, float]) -> None:
    """Add one step's phase seconds to the run's totals (``summary.json``'s per-step means)."""
    for name in TIMED_PHASES:
        totals[f"{name}_s"] = totals.get(f"{name}_s", 0.0) + seconds.get(name, 0.0)
    totals["steps_timed"] = totals.get("steps_timed", 0) + 1


def summarize(history: list[dict[str, Any]], reason: str | None, timings: dict[str, float],
              planned_steps: int) -> dict[str, Any]:
    """``summary.json``: final and best validation, steps done, timings, early-stop reason."""
    vals = [(int(r["step"]), float(r["val/success"])) for r in history if "val/success" in r]
    scores = [float(r["val/score"]) for r in history if "val/score" in r]
    best_step, best = max(vals, key=lambda x: (x[1], -x[0])) if vals else (None, None)
    steps_done = max((int(r["step"]) for r in history), default=0)
    n = max(int(timings.get("steps_timed", 0)), 1)
    return {
        "final_val_success": vals[-1][1] if vals else None,
        "final_val_score": scores[-1] if scores else None,
        "best_val_success": best, "best_val_step": best_step,
        "initial_val_success": vals[0][1] if vals else None,
        "steps_completed": steps_done, "steps_planned": planned_steps,
        "early_stop_reason": reason,
        "timings_s": {
            "total_elapsed": timings.get("elapsed_s", 0.0),
            **{f"{k}_per_step": timings.get(f"{k}_s", 0.0) / n
               for k in TIMED_PHASES},
            "checkpoint_total": timings.get("checkpoint_s", 0.0),
        },
    }
