"""Prompt-level tables: a run's policy rolled out on fixed prompts, one row per (prompt, rollout) (C3, C6).

:func:`prompt_level_table` rolls one saved policy out and scores each prompt (reward, RV, a per-prompt MI
proxy); :func:`prompt_tables` does it for several runs and phases, the shared warm start once;
:func:`rv_quartile_table` cuts each run's prompts into RV quartiles and :func:`quartile_differences` gives
the per-run Q4 - Q1 differences C3 is tested on (:func:`ragen2.repro.claim_tests.quartile_claim`).
Policies are loaded through :func:`ragen2.evaluate.load_run_policy`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragen2.evaluate import load_run_policy
from ragen2.repro.products import computed_or_kept, has_checkpoints
from ragen2.rundir import read_config_dict

PHASE_CHECKPOINTS = {"start": "initial", "mid": "mid", "end": "latest"}
"""Phase of a prompt table -> the checkpoint of :func:`ragen2.rundir.checkpoint_path` it rolls out."""


def prompt_level_table(run_dir: str | Path, *, phase: str = "end", num_prompts: int = 32, group_size: int = 8,
                       cache_dir: str | Path = "data/cache", seed: int = 0, first_seed: int = 900_000
                       ) -> pd.DataFrame:
    """Roll a run's policy out on fixed prompts and score each prompt: reward, RV, a per-prompt MI proxy.

    Args:
        run_dir: a run directory (``config.json``, ``checkpoints/``).
        phase: ``start`` = the policy RL started from (the warm start), ``end`` = the latest checkpoint,
            ``mid`` = the kept checkpoint (``trainer.keep_every``) nearest half the latest step
            (:data:`PHASE_CHECKPOINTS`, loaded by :func:`ragen2.evaluate.load_run_policy`).
        num_prompts, group_size: prompts (env seeds ``first_seed + i``) x rollouts each.
        cache_dir: the warm-start cache.
        seed: sampling seed (the same for every run and phase, so prompts and noise are shared).

    Returns:
        One row per (prompt, rollout): ``prompt, rollout, reward, success, rv`` (population variance of
        the prompt's rewards), ``mi`` (mean over the prompt's first-turn reasonings of
        ``log p(z|x) - log mean_j p(z|x_j)`` per token: how much better the own prompt explains the
        reasoning than the average prompt) and ``phase``.
    """
    import torch

    from ragen2.metrics.scoring import cross_logprobs
    from ragen2.rollout.collect import collect_rollouts

    if phase not in PHASE_CHECKPOINTS:
        raise ValueError(f"phase must be 'start', 'mid' or 'end', got {phase!r}")
    if num_prompts < 2 or group_size < 1:
        raise ValueError(f"need num_prompts >= 2 and group_size >= 1, got {num_prompts}, {group_size}")
    run_dir = Path(run_dir)
    cfg, model, tokenizer = load_run_policy(run_dir, PHASE_CHECKPOINTS[phase], cache_dir)
    seeds = [first_seed + i for i in range(num_prompts)]
    with torch.no_grad():
        batch = collect_rollouts(model, tokenizer, cfg.env, cfg.rollout, seeds, group_size=group_size,
                                 temperature=cfg.rollout.temperature, seed=seed)
        trajs = batch.trajectories
        prompts = [trajs[g * group_size].first_prompt_ids for g in range(num_prompts)]
        rows = [(i, t) for i, t in enumerate(trajs) if t.first_reasoning_ids]
        gap = np.full(len(trajs), np.nan)
        if rows:
            logp, lengths = cross_logprobs(model, tokenizer, prompts, [t.first_reasoning_ids for _, t in rows])
            per_tok = logp / np.maximum(lengths, 1)[:, None]
            marginal = np.logaddexp.reduce(per_tok, axis=1) - math.log(num_prompts)
            for k, (i, _) in enumerate(rows):
                gap[i] = per_tok[k, i // group_size] - marginal[k]
    scores = batch.scores.reshape(num_prompts, group_size)
    out = pd.DataFrame({
        "prompt": np.repeat(np.arange(num_prompts), group_size),
        "rollout": np.tile(np.arange(group_size), num_prompts),
        "reward": scores.ravel(),
        "success": batch.successes.reshape(-1).astype(float),
        "rv": np.repeat(scores.var(axis=1), group_size),
        "mi_row": gap,
    })
    out["mi"] = out.groupby("prompt")["mi_row"].transform("mean")
    return out.drop(columns="mi_row").assign(phase=phase, run_id=run_dir.name)


WARM_START_SECTIONS = ("env", "policy", "warm_start", "rollout")
"""Config sections that fix a run's ``start`` prompt table (the warm-start policy, the prompts, the sampling)."""


def prompt_tables(runs_root: str | Path, run_ids: Sequence[str], phases: Sequence[str] = ("start", "end"),
                  *, start_label: str = "warm start", workers: int = 1, products_dir: str | Path | None = None,
                  write_products: bool = False, **kwargs: Any) -> pd.DataFrame:
    """:func:`prompt_level_table` of several runs and phases, concatenated; the warm start once.

    The ``start`` phase is the policy RL started from, not something a run produced: runs whose configs
    agree in :data:`WARM_START_SECTIONS` roll the same policy out on the same prompts with the same
    sampling seed, so their start tables are identical. It is therefore computed once per distinct
    warm start (through the first such run's config) and labelled ``run_id = start_label``
    (``"<start_label> <k> (<env>)"`` when the runs have several warm starts), so that
    a test over runs cannot count one policy several times. Every other phase is computed per run.

    Each table is computed on one torch thread, so the result does not depend on ``workers``.

    Args:
        runs_root: folder of run directories.
        run_ids: the runs.
        phases: phases of :func:`prompt_level_table` (``start`` handled as above).
        start_label: ``run_id`` of the warm-start rows.
        workers: processes computing tables side by side (1: all in this process).
        products_dir: where the tables of runs without checkpoints (bundled runs) are read from, and, with
            ``write_products``, where computed ones are kept (:mod:`ragen2.repro.products`).
        write_products: keep every computed table in ``products_dir``.
        **kwargs: passed to :func:`prompt_level_table` (``num_prompts``, ``group_size``, ``cache_dir``, ...).
    """
    if not len(run_ids):
        raise ValueError("run_ids is empty")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    root = Path(runs_root)
    jobs: list[tuple[Path, str, str | None]] = []  # (run dir, phase, run_id label; None: the run's name)
    if "start" in phases:
        starts: dict[str, tuple[str, str]] = {}  # warm-start signature -> (first run id, env name)
        for rid in run_ids:
            cfg = read_config_dict(root / rid)
            key = json.dumps({k: cfg.get(k) for k in WARM_START_SECTIONS}, sort_keys=True, default=str)
            starts.setdefault(key, (rid, str((cfg.get("env") or {}).get("name", "?"))))
        for k, (rid, env) in enumerate(starts.values()):
            jobs.append((root / rid, "start", start_label if len(starts) == 1 else f"{start_label} {k + 1} ({env})"))
    jobs += [(root / rid, phase, None) for rid in run_ids for phase in phases if phase != "start"]
    todo = [i for i, job in enumerate(jobs) if has_checkpoints(job[0])]  # a bundled run has none: its tables were kept
    if workers == 1 or len(todo) <= 1:
        done = [_one_thread_table(jobs[i], kwargs) for i in todo]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, len(todo)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            done = list(pool.map(_one_thread_table, [jobs[i] for i in todo], [kwargs] * len(todo)))
    computed = dict(zip(todo, done))
    settings = {k: v for k, v in kwargs.items() if k != "cache_dir"}  # where the warm start is cached changes nothing
    parts = [computed_or_kept("prompt_table", {"run_id": run_dir.name, "phase": phase, "label": label, **settings},
                              lambda i=i: computed[i], can_compute=i in computed, products_dir=products_dir,
                              write=write_products)
             for i, (run_dir, phase, label) in enumerate(jobs)]
    return pd.concat(parts, ignore_index=True)


def _one_thread_table(job: tuple[Path, str, str | None], kwargs: dict[str, Any]) -> pd.DataFrame:
    """One :func:`prompt_tables` job on one torch thread (the caller's thread count is restored)."""
    import torch

    run_dir, phase, label = job
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        table = prompt_level_table(run_dir, phase=phase, **kwargs)
    finally:
        torch.set_num_threads(threads)
    return table if label is None else table.assign(run_id=label)


def rv_quartile_table(prompts: pd.DataFrame, by: Sequence[str] = ("run_id", "phase")) -> pd.DataFrame:
    """Prompts cut into RV quartiles within each ``by`` group (1 = lowest RV; ties broken by prompt id).

    Returns:
        One row per (``by``..., quartile): ``success`` and ``mi`` means over the quartile's prompts and
        ``rv`` mean. Groups with fewer than 4 prompts are skipped.
    """
    per_prompt = prompts.groupby([*by, "prompt"], as_index=False).agg(
        success=("success", "mean"), mi=("mi", "mean"), rv=("rv", "first"))
    parts = []
    for _, part in per_prompt.groupby(list(by)):
        if len(part) < 4:
            continue
        order = part.sort_values(["rv", "prompt"], kind="stable")
        order = order.assign(quartile=(np.arange(len(order)) * 4 // len(order)) + 1)
        parts.append(order)
    if not parts:
        raise ValueError("no group has 4 or more prompts")
    table = pd.concat(parts)
    return table.groupby([*by, "quartile"], as_index=False).agg(success=("success", "mean"), mi=("mi", "mean"),
                                                                 rv=("rv", "mean"))


def quartile_units(quartiles: pd.DataFrame, phase: str) -> tuple[pd.DataFrame, int]:
    """The test units of C3: one row per run at ``phase`` (columns ``(col, quartile)``), and how many runs
    were dropped because their whole quartile table repeats an earlier run's (one policy counted twice)."""
    part = quartiles[quartiles["phase"] == phase]
    values = [c for c in ("success", "mi", "rv") if c in part.columns]
    wide = part.pivot_table(index="run_id", columns="quartile", values=values)
    repeated = wide.round(12).duplicated()
    return wide[~repeated], int(repeated.sum())


def quartile_differences(quartiles: pd.DataFrame, col: str, phase: str = "end") -> pd.Series:
    """Per run at ``phase``: ``col`` in the top RV quartile minus the bottom one (the units C3 is tested on).

    Only ``phase`` rows count (the warm start, phase ``start``, is one policy shared by every run: context,
    not a unit); a run whose quartile table repeats another's is counted once.
    """
    wide, _ = quartile_units(quartiles, phase)
    if (col, 4) not in wide.columns or (col, 1) not in wide.columns:
        raise ValueError(f"quartiles 1 and 4 of {col!r} are not both present at phase {phase!r}")
    return (wide[(col, 4)] - wide[(col, 1)]).dropna().rename(f"{col}_q4_minus_q1")
