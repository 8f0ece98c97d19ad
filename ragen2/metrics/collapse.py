"""The per-step collapse diagnostics of a rollout batch (docs/method.md §5.2, §5.3): sampling pairs, then metrics.

Two families of (prompt X, reasoning Z) pairs are drawn from the *unfiltered* batch. A turn is
*valid* when its reasoning (the text inside ``<think>...</think>``, tags excluded) is non-empty.

- ``first_turn``: ``min(num_samples, #valid)`` valid first turns drawn uniformly **without**
  replacement. Columns are the distinct env groups among them (sorted by group id); a column's
  prompt is its group's shared first prompt. All sampled members of a group must have identical
  prompt ids, otherwise the family is invalid (``ValueError``; e.g. Bandit, whose in-group prompts
  differ).
- ``trajectory``: ``min(num_samples, #valid turns in the batch)`` draws; each picks a trajectory
  uniformly **with** replacement and then one of its valid turns uniformly (a trajectory with no
  valid turn yields nothing). **Every draw is its own column**, so N = M and identical prompts
  appear as separate columns (their keys make retrieval treat them as one answer).

A family needs at least 2 columns. :func:`collapse_metrics` scores each family with one
:class:`ragen2.metrics.scoring.PairScorer` (shared by the families: a prompt or a (prompt, reasoning)
pair they have in common is scored once), computes :func:`ragen2.metrics.mi_proxies` and returns them
under ``collapse_first_turn/...`` and ``collapse_trajectory/...``, together with

- ``collapse/valid_thinking_rate``: valid turns / turns with a non-empty response;
- ``collapse/first_turn_num_total``, ``collapse/first_turn_num_valid``,
  ``collapse/first_turn_valid_rate``;
- ``<family>/num_rows``, ``<family>/num_columns``; ``<family>/skipped`` = 1.0 when the family could
  not be computed (too few columns, inconsistent prompts), with a warning saying why.
"""

from __future__ import annotations

import warnings
from typing import Literal, NamedTuple

import numpy as np

from ragen2.config import CollapseConfig
from ragen2.metrics.mi import CollapseMonitor, mi_proxies
from ragen2.metrics.scoring import PairScorer
from ragen2.metrics.templates import first_turn_template_metrics
from ragen2.rollout.types import RolloutBatch

FAMILIES = ("first_turn", "trajectory")
Family = Literal["first_turn", "trajectory"]


class CollapsePairs(NamedTuple):
    """One family's scoring problem: M reasonings, N prompts, the true column of each reasoning."""

    prompts: list[list[int]]
    """N prompt token-id lists (columns)."""
    reasonings: list[list[int]]
    """M reasoning token-id lists (rows)."""
    prompt_index: np.ndarray
    """[M] true column of each row."""
    prompt_keys: list[tuple[int, ...]]
    """[N] each column's prompt ids as a tuple (equal keys = duplicate prompts)."""


def collapse_due(step: int, cfg: CollapseConfig) -> bool:
    """Whether the diagnostics run at ``step`` (steps count from 1): step 1 and every ``compute_freq``."""
    return cfg.enabled and (step == 1 or (cfg.compute_freq > 0 and step % cfg.compute_freq == 0))


def _first_turn_pairs(batch: RolloutBatch, num_samples: int, rng: np.random.Generator) -> CollapsePairs:
    valid = [r for r, t in enumerate(batch.trajectories) if t.first_reasoning_ids]
    take = min(num_samples, len(valid))
    rows = [valid[i] for i in rng.choice(len(valid), size=take, replace=False)] if take else []
    trajs = [batch.trajectories[r] for r in rows]
    groups = sorted({t.group for t in trajs})
    column_of = {g: c for c, g in enumerate(groups)}
    prompts: list[list[int] | None] = [None] * len(groups)
    for t in trajs:  # sampling order: a column's prompt comes from its first sampled member
        c = column_of[t.group]
        if prompts[c] is None:
            prompts[c] = list(t.first_prompt_ids)
        elif list(t.first_prompt_ids) != prompts[c]:
            raise ValueError(f"first-turn prompts differ inside group {t.group}; the first-turn family "
                             "needs identical prompts per group")
    return CollapsePairs(
        prompts=prompts,
        reasonings=[list(t.first_reasoning_ids) for t in trajs],
        prompt_index=np.array([column_of[t.group] for t in trajs], dtype=np.int64),
        prompt_keys=[tuple(p) for p in prompts],
    )


def _trajectory_pairs(batch: RolloutBatch, num_samples: int, rng: np.random.Generator) -> CollapsePairs:
    valid_turns = [[turn for turn in t.turns if turn.reasoning_ids] for t in batch.trajectories]
    draws = min(num_samples, sum(len(v) for v in valid_turns))
    prompts, reasonings = [], []
    for _ in range(draws):
        turns = valid_turns[int(rng.integers(len(batch.trajectories)))]
        if not turns:
            continue
        turn = turns[int(rng.integers(len(turns)))]
        prompts.append(list(turn.prompt_ids))
        reasonings.append(list(turn.reasoning_ids))
    return CollapsePairs(prompts=prompts, reasonings=reasonings,
                         prompt_index=np.arange(len(prompts), dtype=np.int64),
                         prompt_keys=[tuple(p) for p in prompts])


def collapse_pairs(batch: RolloutBatch, family: Family, num_samples: int,
                   rng: np.random.Generator) -> CollapsePairs:
    """Sample one family's (prompts, reasonings, prompt_index, prompt_keys) from a batch (docs/method.md §5.3).

    Args:
        batch: the unfiltered rollout batch.
        family: ``first_turn`` or ``trajectory`` (module docstring).
        num_samples: the most rows to draw (64 in the reference).
        rng: random generator (consumed in a fixed order, so a seed fixes the sample).

    Raises:
        ValueError: unknown family, ``num_samples < 1``, or (first_turn) differing prompts in a group.
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if family == "first_turn":
        return _first_turn_pairs(batch, num_samples, rng)
    if family == "trajectory":
        return _trajectory_pairs(batch, num_samples, rng)
    raise ValueError(f"unknown collapse family {family!r}; known: {FAMILIES}")


def validity_counts(batch: RolloutBatch) -> dict[str, float]:
    """The ``collapse/...`` counts of valid reasoning in a batch (docs/method.md §5.2)."""
    responded = [turn for t in batch.trajectories for turn in t.turns if turn.response_text]
    valid = [turn for turn in responded if turn.reasoning_ids]
    total = len(batch.trajectories)
    first_valid = sum(1 for t in batch.trajectories if t.first_reasoning_ids)
    return {
        "collapse/valid_thinking_rate": len(valid) / len(responded) if responded else 0.0,
        "collapse/first_turn_num_total": float(total),
        "collapse/first_turn_num_valid": float(first_valid),
        "collapse/first_turn_valid_rate": first_valid / total if total else 0.0,
    }


def collapse_metrics(model, tokenizer, batch: RolloutBatch, cfg: CollapseConfig, rng: np.random.Generator,
                     monitors: dict[str, CollapseMonitor] | None = None, batch_size: int = 256
                     ) -> dict[str, float]:
    """All collapse diagnostics of one (unfiltered) batch.

    Args:
        model: the current actor (a causal LM); scored at temperature 1.0.
        tokenizer: unused (the pairs are token ids already); kept for the callers.
        batch: the rollout batch.
        cfg: ``num_samples``, the two ``*_enabled`` switches, ``std_eps``; ``ema_decay``, ``warn_drop``,
            ``warn_min_peak`` and ``warn_noise_sigmas`` for monitors created here.
        rng: random generator for the samples.
        monitors: per-family :class:`CollapseMonitor` s, keyed by family name, kept by the caller
            across steps; missing entries are created. None: no EMA metrics.
        batch_size: (prompt, reasoning) rows per scoring forward pass.

    Returns:
        ``collapse/...`` counts and, per enabled family, ``collapse_<family>/<metric>``; with the first-turn
        family also its template signs (:func:`ragen2.metrics.templates.first_turn_template_metrics`: the
        ungrounded and shared-prefix shares and the mean reasoning length in words, over every first turn).
    """
    out = validity_counts(batch)
    scorer = PairScorer(model, batch_size=batch_size)
    enabled = [f for f, on in (("first_turn", cfg.first_turn_enabled), ("trajectory", cfg.multi_turn_enabled))
               if on]
    for family in enabled:
        prefix = f"collapse_{family}/"
        try:
            pairs = collapse_pairs(batch, family, cfg.num_samples, rng)
        except ValueError as err:
            warnings.warn(f"{prefix} skipped: {err}", stacklevel=2)
            out[prefix + "skipped"] = 1.0
            continue
        out[prefix + "num_rows"] = float(len(pairs.reasonings))
        out[prefix + "num_columns"] = float(len(pairs.prompts))
        if len(pairs.prompts) < 2:
            warnings.warn(f"{prefix} skipped: {len(pairs.prompts)} column(s), at least 2 are needed",
                          stacklevel=2)
            out[prefix + "skipped"] = 1.0
            continue
        logp_sum, lengths = scorer(pairs.prompts, pairs.reasonings)
        metrics, rows = mi_proxies(logp_sum, lengths, pairs.prompt_index, pairs.prompt_keys, std_eps=cfg.std_eps,
                                   return_rows=True)
        if monitors is not None:
            if family not in monitors:
                monitors[family] = CollapseMonitor(cfg.ema_decay, cfg.warn_drop, cfg.std_eps,
                                                   warn_min_peak=cfg.warn_min_peak,
                                                   warn_noise_sigmas=cfg.warn_noise_sigmas)
            metrics = monitors[family].update(metrics, rows)
        out[prefix + "skipped"] = 0.0
        out.update({prefix + k: v for k, v in metrics.items()})
    if cfg.first_turn_enabled:
        out.update({f"collapse_first_turn/{k}": v for k, v in first_turn_template_metrics(batch).items()})
    return out
