"""RV-bucketed gradient decomposition (docs/method.md §6.5; the paper's claim C4).

For one training batch, the prompt groups are sorted by their reward std ``sigma_g`` (RV) and cut
into quantile buckets: with ``B = min(num_buckets, #groups)`` buckets, each gets ``floor(#groups/B)``
groups and the last also takes the remainder (``bucket 1`` = lowest RV). An ``all`` bucket holds the
whole batch. For every bucket and every loss component (coefficients included, exactly the terms the
actor update optimises, :func:`ragen2.trainer.actor.actor_terms`):

- ``task``: the clipped policy-gradient term (with the filter's loss scale);
- ``entropy``: ``-entropy_coef * agg(H)`` (0 when the coefficient is 0);
- ``kl``: ``kl_coef * agg(KL)`` (0 when the coefficient is 0);
- ``reg``: ``entropy + kl`` together (the regularisation the paper contrasts with the task term),

a separate backward pass over the bucket's mini-batches (accumulated over micro-batches) gives the
gradient; its global L2 norm is read and the gradient is thrown away. **No optimiser step is
taken.** Norms are averaged over the bucket's mini-batches (``mini_batch_size`` rows each; unlike
the reference, a short last mini-batch is not down-weighted). ``snr = task_norm / reg_norm``.

Output: a tidy :class:`pandas.DataFrame`, one row per bucket, columns :data:`COLUMNS`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ragen2.trainer.actor import LossSettings, actor_terms, term_denominators
from ragen2.trainer.batch import UpdateBatch, chunks

COLUMNS = ("step", "bucket", "num_groups", "num_rows", "num_tokens", "rv_mean", "rv_min", "rv_max",
           "task_norm", "kl_norm", "entropy_norm", "reg_norm", "snr")


def quantile_buckets(group_rv: dict[int, float], num_buckets: int) -> list[list[int]]:
    """Group ids in RV-quantile buckets, lowest RV first (ties broken by group id)."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be >= 1, got {num_buckets}")
    ordered = sorted(group_rv, key=lambda g: (group_rv[g], g))
    if not ordered:
        return []
    n_buckets = min(num_buckets, len(ordered))
    size = len(ordered) // n_buckets
    buckets = [ordered[i * size:(i + 1) * size] for i in range(n_buckets - 1)]
    buckets.append(ordered[(n_buckets - 1) * size:])
    return buckets


def component_grad_norms(model: torch.nn.Module, batch: UpdateBatch, s: LossSettings,
                         components: tuple[tuple[str, ...], ...], mini_batch_size: int, micro_batch_size: int
                         ) -> list[float]:
    """Per entry of ``components`` (each a tuple of loss components summed), the mean over mini-batches of the L2
    norm of its gradient.

    A mini-batch that is one micro-batch runs its forward once for all entries (a backward per entry, the graph
    kept in between); a longer one runs a forward per entry and micro-batch, so that only one micro-batch's
    activations are alive at a time, as in the update. Either way each entry's gradient is the same computation
    as on its own. The model's ``.grad`` fields are cleared before and after; no optimiser is involved.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    wanted = tuple(dict.fromkeys(c for entry in components for c in entry))
    norms: list[list[float]] = [[] for _ in components]

    def read_and_clear(k: int) -> None:
        grads = [p.grad.detach().float().norm() ** 2 for p in params if p.grad is not None]
        norms[k].append(math.sqrt(float(sum(grads))) if grads else 0.0)
        model.zero_grad(set_to_none=True)

    def backward(terms: dict[str, torch.Tensor], entry: tuple[str, ...], keep_graph: bool) -> None:
        parts = [terms[c] for c in entry if c in terms]
        loss = sum(parts) if parts else None
        if loss is not None and loss.requires_grad:
            loss.backward(retain_graph=keep_graph)

    model.zero_grad(set_to_none=True)
    for mini_rows in chunks(len(batch), mini_batch_size):
        mini = batch.select(list(mini_rows))
        denoms = term_denominators(mini, s)
        micro = chunks(len(mini), micro_batch_size)
        if len(micro) == 1:
            terms, _ = actor_terms(model, mini, s, denoms, components=wanted)
            for k, entry in enumerate(components):
                backward(terms, entry, keep_graph=k < len(components) - 1)
                read_and_clear(k)
            continue
        for k, entry in enumerate(components):
            for rows in micro:
                terms, _ = actor_terms(model, mini.select(list(rows)), s, denoms, components=entry)
                backward(terms, entry, keep_graph=False)
            read_and_clear(k)
    return [float(np.mean(v)) if v else 0.0 for v in norms]


def grad_analysis(model: torch.nn.Module, batch: UpdateBatch, group_rv: dict[int, float], s: LossSettings, *,
                  num_buckets: int = 6, mini_batch_size: int = 32, micro_batch_size: int = 8,
                  step: int = 0) -> pd.DataFrame:
    """The per-bucket gradient-norm table of one batch.

    Args:
        model: the actor (its gradients are cleared; its parameters are not changed).
        batch: an update batch with ``old_logp``, ``advantages`` (and ``ref_logp`` if ``kl_coef``).
        group_rv: ``sigma_g`` of every group id present in ``batch.group_ids``.
        s: the loss settings of the run.
        num_buckets: RV quantile buckets (6 as the reference; 4 = quartiles).
        mini_batch_size: rows per gradient measurement.
        micro_batch_size: rows per forward/backward.
        step: written to the ``step`` column.

    Returns:
        One row per bucket (``"1"`` .. ``"B"``, then ``"all"``), columns :data:`COLUMNS`.
    """
    present = sorted(set(int(g) for g in batch.group_ids.tolist()))
    missing = [g for g in present if g not in group_rv]
    if missing:
        raise ValueError(f"group_rv lacks the reward std of group(s) {missing}")
    rv = {g: float(group_rv[g]) for g in present}
    buckets = [(str(i + 1), groups) for i, groups in enumerate(quantile_buckets(rv, num_buckets))]
    buckets.append(("all", present))
    group_ids = batch.group_ids.tolist()
    rows_out = []
    for name, groups in buckets:
        members = set(groups)
        rows = [i for i, g in enumerate(group_ids) if g in members]
        sub = batch.select(rows)

        entries: list[tuple[str, ...]] = [("task",)]
        if s.entropy_coef != 0:
            entries.append(("entropy",))
        if s.kl_coef != 0:
            entries.append(("kl",))
        if s.entropy_coef != 0 and s.kl_coef != 0:
            entries.append(("entropy", "kl"))
        found = dict(zip(entries, component_grad_norms(model, sub, s, tuple(entries), mini_batch_size,
                                                        micro_batch_size)))
        task = found[("task",)]
        entropy = found.get(("entropy",), 0.0)
        kl = found.get(("kl",), 0.0)
        reg = found.get(("entropy", "kl"), entropy + kl)
        values = [rv[g] for g in groups]
        rows_out.append({
            "step": int(step), "bucket": name, "num_groups": len(groups), "num_rows": len(rows),
            "num_tokens": int(sub.loss_mask.sum()), "rv_mean": float(np.mean(values)),
            "rv_min": float(np.min(values)), "rv_max": float(np.max(values)), "task_norm": task,
            "kl_norm": kl, "entropy_norm": entropy, "reg_norm": reg,
            "snr": task / reg if reg > 0 else math.nan,
        })
    return pd.DataFrame(rows_out, columns=list(COLUMNS))


def table_metrics(table: pd.DataFrame) -> dict[str, float]:
    """Scalar log metrics of a table: ``grad_norm/<bucket>/<component>`` and ``grad_norm/<bucket>/rv_mean``."""
    out = {}
    for row in table.itertuples(index=False):
        for col in ("task_norm", "kl_norm", "entropy_norm", "reg_norm", "rv_mean"):
            out[f"grad_norm/{row.bucket}/{col.removesuffix('_norm')}"] = float(getattr(row, col))
    return out


def append_table(path: Path, table: pd.DataFrame, keep_through_step: int | None = None) -> None:
    """Append ``table`` to a CSV (``keep_through_step`` first drops rows of later steps, for resume)."""
    path = Path(path)
    old = pd.read_csv(path) if path.exists() else None
    if old is not None and keep_through_step is not None:
        old = old[old["step"] <= keep_through_step]
    new = table if old is None else pd.concat([old, table], ignore_index=True)
    tmp = path.with_name(f".{path.name}.tmp")
    new.to_csv(tmp, index=False)
    tmp.replace(path)


def analyze_checkpoint(run_dir: Path, *, env_groups: int | None = None, group_size: int | None = None,
                       num_buckets: int | None = None, cache_dir: Path = Path("data/cache"),
                       ) -> pd.DataFrame:
    """Run the decomposition on a saved run's latest checkpoint, on a fresh rollout.

    The rollout uses the training seeds of the step after the checkpoint (so it is data the
    checkpoint has not trained on), with ``env_groups x group_size`` (default: the run's), is
    filtered with the run's filter and prepared exactly like a training batch (DAPO: with its refill
    rounds). Nothing is written.
    """
    from ragen2.config import apply_overrides
    from ragen2.filter import apply_filter, group_std, loss_scales
    from ragen2.rollout.collect import collect_rollouts
    from ragen2.rundir import checkpoint_path, read_config
    from ragen2.trainer.algos import get_preset
    from ragen2.trainer.checkpoint import load_checkpoint
    from ragen2.trainer.dynamic_sampling import dynamic_sampling
    from ragen2.trainer.models import build_models
    from ragen2.trainer.seeds import stream_seed, train_seeds
    from ragen2.trainer.update_data import loss_settings, prepare_update_batch
    from ragen2.warmstart import initial_policy

    run_dir = Path(run_dir)
    cfg = read_config(run_dir)
    overrides = []
    if env_groups is not None:
        overrides.append(f"rollout.env_groups={env_groups}")
    if group_size is not None:
        overrides.append(f"rollout.group_size={group_size}")
    cfg = apply_overrides(cfg, overrides)
    state = load_checkpoint(checkpoint_path(run_dir, "latest"))
    step = int(state["step"])
    models = build_models(cfg, initial_policy(cfg, cache_dir))
    models.actor.load_state_dict(state["actor"])
    if models.critic is not None:
        models.critic.load_state_dict(state["critic"])
    preset = get_preset(cfg.trainer.algo)
    rollout = collect_rollouts(models.actor, models.tokenizer, cfg.env, cfg.rollout, train_seeds(cfg, step + 1),
                               group_size=cfg.rollout.group_size, temperature=cfg.rollout.temperature,
                               seed=stream_seed(cfg.seed, "grad_analysis", step))
    outcome = apply_filter(rollout.scores, cfg.filter, successes=rollout.successes)
    kept = [int(g) for g in outcome.kept]
    refilled = dynamic_sampling(models, cfg, rollout, kept, step + 1)  # DAPO only
    train_rollout, kept = refilled.rollout, refilled.kept
    if not kept:
        raise RuntimeError("the filter kept no group of the analysis rollout")
    batch, _ = prepare_update_batch(models, train_rollout, kept, cfg, preset)
    settings = loss_settings(cfg, loss_scales(len(kept), rollout.env_groups, cfg.filter))
    rv = dict(enumerate(group_std(train_rollout.scores).tolist()))
    return grad_analysis(models.actor, batch, rv, settings,
                         num_buckets=num_buckets or cfg.grad_analysis.num_buckets,
                         mini_batch_size=cfg.trainer.mini_batch_size,
                         micro_batch_size=cfg.trainer.micro_batch_size, step=step)
