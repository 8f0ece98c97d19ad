"""The RL training loop: ``train(cfg, run_dir)``, readable top to bottom (CleanRL style).

One step (spec 0): rollout -> collapse diagnostics (unfiltered batch) -> filter (empty: no update)
-> [DAPO: constant groups replaced by fresh ones] -> old/ref log-probs, values, advantages -> critic
update -> [gradient analysis] -> actor update -> validation -> log -> checkpoint.

Run directory::

    config.json   env.json   summary.json   metrics.jsonl   grad_analysis.csv (if enabled)
    dvclive/      checkpoints/{step_NNNNNN.pt, latest.json}

Metric names (one row per step in ``metrics.jsonl`` and dvclive; step 0 holds the first validation):

- ``rollout/score_mean|score_std|score_max|score_min|success|response_length_mean|
  response_length_max|num_actions_mean|pass_at_group``: the unfiltered training batch;
- ``filter/...``: :func:`ragen2.filter.apply_filter` (``kept_count``, ``kept_ratio``, ``empty``,
  ``reward_std_mean`` = the spec's in-group reward std, ``zero_variance_count``, ``loss_scale``...);
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
- ``val/success``, ``val/score``, ``val/response_length_mean``: validation steps;
- ``early_stopped/<rule>`` = 1 on the step a rule fires;
- ``timing_s/rollout|update|diagnostics|validation|step`` (``rollout`` includes DAPO's refill
  rollouts; ``update`` = filter, batch preparation, critic and actor updates; ``diagnostics`` =
  collapse metrics and gradient analysis).

Choices where the reference (spec) is not followed to the letter:

- Rows trained: the kept groups' rows (``filter.regularize_kept_only = True``, the config default,
  as the reference does: its filter removes rows before the update). With ``False`` the dropped
  groups' rows stay in the update batch with ``task_weight = 0``: they get the KL and entropy terms
  but no policy-gradient or value loss (an ablation).
- No duplicate-row padding to a multiple of ``lcm(env_groups, mini_batch)`` (spec 4.6). Instead,
  when ``filter.loss_scaling != none`` the mini-batch shrinks with the share of rows kept (the
  paper's text), and the policy-gradient term is multiplied by :func:`ragen2.filter.keep_rate_scale`.
- Loss aggregation is exact over each mini-batch (denominators from the whole mini-batch), so it
  does not depend on ``micro_batch_size``; veRL aggregates per micro-batch.
- Mini-batches hold whole prompt groups, in a seeded random group order per epoch
  (:func:`ragen2.trainer.batch.group_order`), as veRL's consecutive split of the group-ordered batch
  gives; rows are not shuffled across groups, which lets each micro-batch run its one or two prompts
  once. The models stay in eval mode (dropout off).
- Validation uses one fixed sampling seed per run, so successive validations differ only through
  the policy. A run that stops early is validated at its last step, even after empty filter steps.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ragen2.config import RunConfig, to_dict
from ragen2.filter import apply_filter, group_std, keep_rate_scale
from ragen2.metrics.collapse import collapse_due, collapse_metrics
from ragen2.results_io import flatten
from ragen2.trainer.actor import update_actor
from ragen2.trainer.algos import get_preset, resolve_agg_mode
from ragen2.trainer.checkpoint import (
    atomic_write_json,
    latest_checkpoint,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from ragen2.trainer.critic import update_critic
from ragen2.trainer.dynamic_sampling import dynamic_sampling
from ragen2.trainer.early_stop import EarlyStopper
from ragen2.trainer.grad_analysis import append_table, grad_analysis, table_metrics
from ragen2.trainer.pipeline import (
    build_models,
    initial_policy_path,
    loss_settings,
    mini_batch_rows,
    prepare_update_batch,
    rollout_metrics,
    seed_everything,
    stream_seed,
    train_seeds,
    val_seeds,
)
from ragen2.trainer.runlog import RunLogger

ADAM_BETAS = (0.9, 0.999)


def train(cfg: RunConfig, run_dir: Path, *, resume: bool = True, cache_dir: Path = Path("data/cache"),
          progress: bool | None = None) -> dict[str, Any]:
    """Train a policy with the run's algorithm, filter and diagnostics; returns the summary.

    Args:
        cfg: the run configuration.
        run_dir: where everything of this run goes (created if missing).
        resume: continue from ``run_dir/checkpoints/latest.json`` if present (exactly: same metrics as
            an uninterrupted run); ``False`` starts over and overwrites the run's records.
        cache_dir: where the resolved policy and the warm start are cached (shared across runs).
        progress: show a tqdm bar (``None`` = only on a terminal).

    Returns:
        The contents of ``summary.json``.
    """
    from ragen2.rollout.collect import collect_rollouts

    t_start = time.perf_counter()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tc, rc = cfg.trainer, cfg.rollout
    preset = get_preset(tc.algo)
    validate_config(cfg)

    # TRY NOT TO MODIFY: seeding, models, optimisers
    seed_everything(cfg.seed)
    models = build_models(cfg, initial_policy_path(cfg, Path(cache_dir)))
    actor, tokenizer, critic = models.actor, models.tokenizer, models.critic
    actor_opt = torch.optim.AdamW([p for p in actor.parameters() if p.requires_grad], lr=tc.actor_lr,
                                  betas=ADAM_BETAS, weight_decay=tc.weight_decay)
    critic_opt = None
    if critic is not None:
        critic_opt = torch.optim.AdamW([p for p in critic.parameters() if p.requires_grad], lr=tc.critic_lr,
                                       betas=ADAM_BETAS, weight_decay=tc.weight_decay)
    shuffle_rng = np.random.default_rng(stream_seed(cfg.seed, "shuffle"))
    stopper = EarlyStopper(empty_stop_steps=tc.empty_stop_steps, rv_collapse=tc.rv_collapse_stop,
                           low_val_patience=tc.low_val_stop_patience)
    monitors: dict = {}  # per-family CollapseMonitor (MI z-score EMA), filled by collapse_metrics
    seed_everything(cfg.seed)  # again: building a cached vs a fresh policy must not shift the streams

    # TRY NOT TO MODIFY: resume from the latest checkpoint
    start_step, history, timings = 1, None, {"elapsed_s": 0.0}
    elapsed_before = 0.0
    if not resume:  # start over: nothing of an earlier run may be resumed or mixed in later
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        for name in ("summary.json", "grad_analysis.csv"):
            (run_dir / name).unlink(missing_ok=True)
    ckpt_path = latest_checkpoint(run_dir)
    if ckpt_path is not None:
        changed = config_changes(cfg, run_dir)
        if changed:
            raise ValueError(f"{run_dir} holds a run of another config ({', '.join(changed[:6])} differ): "
                             "resuming would mix the two; start over with resume=False (--no-resume)")
        state = load_checkpoint(ckpt_path, map_location=next(actor.parameters()).device)
        actor.load_state_dict(state["actor"])
        actor_opt.load_state_dict(state["actor_opt"])
        if critic is not None:
            critic.load_state_dict(state["critic"])
            critic_opt.load_state_dict(state["critic_opt"])
        stopper.load_state_dict(state["early_stop"])
        monitors = state["monitors"]
        history, timings = state["history"], state["timings"]
        set_rng_state(state["rng"], shuffle_rng)
        start_step = int(state["step"]) + 1
        elapsed_before = float(timings.get("elapsed_s", 0.0))
    atomic_write_json(run_dir / "config.json", to_dict(cfg))
    atomic_write_json(run_dir / "env.json", environment_info(actor))
    logger = RunLogger(run_dir, history, params=to_dict(cfg))
    last_logged = int(history[-1]["step"]) if history else -1

    def validate() -> dict[str, float]:
        val = collect_rollouts(actor, tokenizer, cfg.env, rc, val_seeds(cfg), group_size=1,
                               temperature=rc.val_temperature, seed=stream_seed(cfg.seed, "validation"))
        m = rollout_metrics(val, prefix="val")
        return {"val/success": m["val/success"], "val/score": m["val/score_mean"],
                "val/response_length_mean": m["val/response_length_mean"]}

    def checkpoint(step: int) -> None:
        timings["elapsed_s"] = elapsed_before + time.perf_counter() - t_start
        save_checkpoint(run_dir, step, {
            "step": step, "actor": actor.state_dict(), "actor_opt": actor_opt.state_dict(),
            "critic": critic.state_dict() if critic is not None else None,
            "critic_opt": critic_opt.state_dict() if critic_opt is not None else None,
            "early_stop": stopper.state_dict(), "monitors": monitors, "history": logger.history,
            "timings": timings, "rng": rng_state(shuffle_rng)}, keep_every=tc.keep_every)

    # validation before training (step 0)
    if start_step == 1 and last_logged < 0:
        t0 = time.perf_counter()
        metrics = validate()
        metrics["timing_s/validation"] = time.perf_counter() - t0
        stopper.on_validation(metrics["val/success"])
        logger.log(0, metrics)
        if tc.save_freq > 0:
            checkpoint(0)

    bar = tqdm(range(start_step, tc.steps + 1), initial=start_step - 1, total=tc.steps, desc=cfg.env.name,
               disable=(not progress) if progress is not None else None, dynamic_ncols=True)
    for step in bar:
        if stopper.reason is not None:
            break
        t_step = time.perf_counter()
        metrics: dict[str, float] = {}

        # ALGO LOGIC: rollout (fresh env seeds every step)
        t0 = time.perf_counter()
        actor.eval()
        rollout = collect_rollouts(actor, tokenizer, cfg.env, rc, train_seeds(cfg, step), group_size=rc.group_size,
                                   temperature=rc.temperature, seed=stream_seed(cfg.seed, "rollout", step))
        metrics.update(rollout_metrics(rollout))
        metrics["timing_s/rollout"] = time.perf_counter() - t0

        # ALGO LOGIC: collapse diagnostics on the unfiltered batch
        t_diag = t_grad = 0.0
        if cfg.collapse.enabled and collapse_due(step, cfg.collapse):
            t0 = time.perf_counter()
            metrics.update(collapse_metrics(actor, tokenizer, rollout, cfg.collapse,
                                            np.random.default_rng(stream_seed(cfg.seed, "collapse", step)),
                                            monitors=monitors))
            t_diag += time.perf_counter() - t0

        # ALGO LOGIC: filter groups; an empty result skips the update (spec 4.5)
        t0 = time.perf_counter()
        outcome = apply_filter(rollout.scores, cfg.filter, successes=rollout.successes,
                               lengths=_lengths(rollout))
        metrics.update(outcome.metrics)
        kept = [int(g) for g in outcome.kept]
        t_refill = time.perf_counter()  # DAPO: constant groups replaced by fresh ones (others: unchanged)
        refilled = dynamic_sampling(models, cfg, rollout, kept, step)
        train_rollout, kept = refilled.rollout, refilled.kept
        metrics.update(refilled.metrics)
        t_refill = time.perf_counter() - t_refill
        metrics["timing_s/rollout"] += t_refill
        stop_now = False
        if not kept:
            stop_now = stopper.on_empty_step()
        else:
            stop_now = stopper.on_step(metrics["filter/reward_std_mean"])
        metrics["filter/consecutive_empty"] = float(stopper.consecutive_empty)

        if kept:
            # ALGO LOGIC: old/ref log-probs, values, advantages
            batch, batch_metrics = prepare_update_batch(models, train_rollout, kept, cfg, preset)
            metrics.update(batch_metrics)
            scale = keep_rate_scale(len(kept), rollout.env_groups, cfg.filter)
            settings = loss_settings(cfg, task_scale=scale)
            mini = mini_batch_rows(cfg, len(batch), len(rollout))
            micro = min(tc.micro_batch_size, mini)
            metrics["train/mini_batch_rows"] = float(mini)

            # ALGO LOGIC: critic update (GAE only)
            if critic is not None:
                metrics.update(update_critic(critic, critic_opt, batch, mini_batch_size=mini, micro_batch_size=micro,
                                             epochs=tc.ppo_epochs, grad_clip=tc.grad_clip, rng=shuffle_rng))

            # diagnostics: RV-bucketed gradient norms, no optimiser step
            ga = cfg.grad_analysis
            if ga.enabled and (step - 1) % ga.every == 0:
                td = time.perf_counter()
                rv = dict(enumerate(group_std(train_rollout.scores).tolist()))
                table = grad_analysis(actor, batch, rv, settings, num_buckets=ga.num_buckets,
                                      mini_batch_size=tc.mini_batch_size, micro_batch_size=tc.micro_batch_size,
                                      step=step)
                append_table(run_dir / "grad_analysis.csv", table, keep_through_step=step - 1)
                metrics.update(table_metrics(table))
                t_grad = time.perf_counter() - td

            # ALGO LOGIC: actor update
            metrics.update(update_actor(actor, actor_opt, batch, settings, mini_batch_size=mini,
                                        micro_batch_size=micro, epochs=tc.ppo_epochs, grad_clip=tc.grad_clip,
                                        rng=shuffle_rng))
        metrics["timing_s/update"] = time.perf_counter() - t0 - t_grad - t_refill
        metrics["timing_s/diagnostics"] = t_diag + t_grad

        # validation every test_freq steps and at the end (empty steps validate only at the end)
        last = stop_now or step == tc.steps
        if last or (kept and tc.test_freq > 0 and step % tc.test_freq == 0):
            t0 = time.perf_counter()
            metrics.update(validate())
            metrics["timing_s/validation"] = time.perf_counter() - t0
            if stopper.on_validation(metrics["val/success"]):
                last = True
        if stopper.reason is not None:
            metrics[f"early_stopped/{stopper.reason}"] = 1.0
        metrics["timing_s/step"] = time.perf_counter() - t_step
        for key in ("rollout", "update", "diagnostics", "validation"):
            timings[f"{key}_s"] = timings.get(f"{key}_s", 0.0) + metrics.get(f"timing_s/{key}", 0.0)
        timings["steps_timed"] = timings.get("steps_timed", 0) + 1
        logger.log(step, metrics)
        bar.set_postfix(score=f"{metrics['rollout/score_mean']:.3f}", kept=len(kept),
                        val=f"{metrics.get('val/success', math.nan):.3f}")

        # checkpoint every save_freq steps and at the end (not after an empty step, spec 4.5)
        if (kept and tc.save_freq > 0 and step % tc.save_freq == 0) or last:
            t0 = time.perf_counter()
            checkpoint(step)
            timings["checkpoint_s"] = timings.get("checkpoint_s", 0.0) + time.perf_counter() - t0
        if last:
            break
    bar.close()
    logger.close()

    timings["elapsed_s"] = elapsed_before + time.perf_counter() - t_start
    summary = summarize(logger.history, stopper.reason, timings, tc.steps)
    atomic_write_json(run_dir / "summary.json", summary)
    return summary


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
def validate_config(cfg: RunConfig) -> None:
    """Cross-field checks of the trainer settings; raises ``ValueError`` naming the bad value."""
    tc = cfg.trainer
    resolve_agg_mode(tc.algo, tc.loss_agg_mode)
    checks = [
        ("trainer.steps", tc.steps, tc.steps >= 1),
        ("trainer.mini_batch_size", tc.mini_batch_size, tc.mini_batch_size >= 1),
        ("trainer.micro_batch_size", tc.micro_batch_size, tc.micro_batch_size >= 1),
        ("trainer.ppo_epochs", tc.ppo_epochs, tc.ppo_epochs >= 1),
        ("trainer.max_refill_rounds", tc.max_refill_rounds, tc.max_refill_rounds >= 0),
        ("trainer.keep_every", tc.keep_every, tc.keep_every >= 0),
        ("trainer.entropy_scope", tc.entropy_scope, tc.entropy_scope in ("all", "reasoning")),
        ("trainer.kl_type", tc.kl_type, tc.kl_type in ("k1", "k2", "k3")),
        ("trainer.dual_clip", tc.dual_clip, tc.dual_clip == 0 or tc.dual_clip > 1),
        ("trainer.clip_low", tc.clip_low, 0 <= tc.clip_low < 1),
        ("trainer.clip_high", tc.clip_high, tc.clip_high >= 0),
        ("rollout.group_size", cfg.rollout.group_size, cfg.rollout.group_size >= 2),
        ("collapse.compute_freq", cfg.collapse.compute_freq, cfg.collapse.compute_freq >= 1),
        ("grad_analysis.every", cfg.grad_analysis.every, cfg.grad_analysis.every >= 1),
    ]
    for name, value, ok in checks:
        if not ok:
            raise ValueError(f"invalid {name}: {value!r}")


def config_changes(cfg: RunConfig, run_dir: Path) -> list[str]:
    """Dotted keys whose value in ``run_dir/config.json`` differs from ``cfg`` (none when no config is recorded)."""
    path = Path(run_dir) / "config.json"
    if not path.exists():
        return []
    old, new = flatten(json.loads(path.read_text())), flatten(to_dict(cfg))
    return sorted(k for k in old.keys() | new.keys() if old.get(k, "<missing>") != new.get(k, "<missing>"))


def _lengths(rollout) -> np.ndarray:
    return np.array([t.response_length for t in rollout.trajectories], dtype=np.float64).reshape(
        rollout.env_groups, rollout.group_size)


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
               for k in ("rollout", "update", "diagnostics", "validation")},
            "checkpoint_total": timings.get("checkpoint_s", 0.0),
        },
    }


def environment_info(model: torch.nn.Module) -> dict[str, Any]:
    """``env.json``: package versions, git commit, device and thread count."""
    import importlib.metadata as md

    versions = {}
    for pkg in ("ragen2", "torch", "transformers", "numpy", "gymnasium", "dvclive", "trl"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                                cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    device = next(model.parameters()).device
    return {
        "python": sys.version.split()[0], "platform": platform.platform(), "versions": versions,
        "git_commit": commit, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "dtype": str(next(model.parameters()).dtype),
    }


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The ``summary.json`` of a finished run."""
    return json.loads((Path(run_dir) / "summary.json").read_text())
