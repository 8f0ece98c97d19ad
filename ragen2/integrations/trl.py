"""SNR-aware filtering and MI diagnostics as a drop-in subclass of TRL 1.16's ``GRPOTrainer``.

:class:`SNRFilterGRPOTrainer` is ``GRPOTrainer`` plus two things, both off by default:

1. **Group filtering** (docs/method.md §4). After TRL has generated, scored and normalised a generation batch,
   the prompt groups (``rewards.view(-1, num_generations)``) are scored on their **raw** rewards and
   selected with :func:`ragen2.filter.apply_filter`; every row of a dropped group leaves the batch,
   so it reaches neither the loss nor its normaliser. Advantages are TRL's, computed per group
   before the filter, so the kept groups' advantages do not change (except with
   ``scale_rewards="batch"``).
2. **MI diagnostics** (docs/method.md §5). Every ``mi_every`` steps, on the *unfiltered* batch, sampled
   (prompt, reasoning) pairs are cross-scored with :func:`ragen2.metrics.cross_logprobs` and turned
   into :func:`ragen2.metrics.mi_proxies` (plus a :class:`ragen2.metrics.CollapseMonitor` EMA).

Decisions (TRL constraints, see ``docs/trl.md``):

- *Raw rewards* are captured in :meth:`_calculate_rewards`: the gathered ``(B_global, n_funcs)``
  matrix, weighted by ``reward_weights`` and summed (NaN rows count 0), or one named function's
  column (``SNRFilterConfig.reward_func``).
- *Global decision*: the rewards are gathered across processes, so every rank runs the same
  deterministic selection; each rank then keeps the rows of the kept groups that fall in its own
  slice ``[process_index * B_local, (process_index + 1) * B_local)``.
- *Empty selection*: the single best group (by the filter score) is trained instead, and
  ``filter/fallback_best_group`` = 1 is logged. When every group has zero reward variance its
  advantages are all 0, so this step moves the policy only through KL/entropy terms, which is as
  close to "skip the step" as a ``transformers`` training loop allows without crashing.
- *Divisibility*: TRL splits a generation batch into ``steps_per_generation`` equal micro-batches
  and silently drops a remainder. Each rank's kept rows are padded up to a positive multiple of
  ``steps_per_generation`` by **duplicating kept rows**, best group first (the reference's
  ``batch_adjust_mode=copy``; duplicates are real samples in the loss). A rank that holds no kept
  row at all (only possible with several processes) gets *filler* rows: copies of its own rows with
  loss mask and advantage 0, which add nothing to the loss or ``num_items_in_batch``.
- ``num_items_in_batch`` is recomputed from the kept ``completion_mask * tool_mask``, gathered
  over processes, as TRL does before filtering.
- *Loss scaling* (:func:`ragen2.filter.loss_scales`, keep rate rho = kept groups / groups): ``keep_rate`` /
  ``sqrt_keep_rate`` multiply the whole loss (policy term and KL) by rho (or its square root), so a filtered
  step keeps its higher task-to-regulariser ratio; the variant ``keep_rate_task`` multiplies the kept
  advantages alone, which gives it back the ratio of an unfiltered step (docs/method.md §4.8).

Logged into ``self._metrics["train"]`` (averaged per logging step by TRL): every ``filter/...``
metric of :func:`ragen2.filter.apply_filter` that is finite (among them ``filter/kept_ratio``,
``filter/kept_count``, ``filter/zero_variance_count``, ``filter/reward_std_mean`` and
``filter/kept_reward_std_mean``), plus ``filter/fallback_best_group``, ``filter/trained_rows``
(global, padding included) and ``filter/pad_rows``; and ``mi/<name>`` for every MI proxy, EMA and
``mi/num_rows``, ``mi/num_columns``, ``mi/valid_rate``, ``mi/skipped``, ``mi/seconds``.

>>> cfg = SNRFilterConfig(filter=FilterConfig(strategy="top_p", value=1.0, include_zero=False), mi_every=5)
>>> trainer = SNRFilterGRPOTrainer(model, reward_funcs, args=grpo_args, snr_config=cfg, ...)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from ragen2.filter import FilterConfig, FilterOutcome, apply_filter, loss_scales
from ragen2.integrations.trl_env import env_reward_func, make_env_dataset, make_env_rollout_func
from ragen2.metrics import CollapseMonitor, cross_logprobs, mi_proxies
from ragen2.metrics.collapse import CollapsePairs
from ragen2.metrics.mi import WARN_MIN_PEAK, WARN_NOISE_SIGMAS
from ragen2.rollout.parse import TAG_STRINGS

__all__ = ["SNRFilterConfig", "SNRFilterGRPOTrainer", "FilterStep", "RowPlan", "plan_local_rows",
           "select_rows", "filter_generation_batch", "reasoning_text", "opening_length", "sample_mi_pairs",
           "make_env_rollout_func", "make_env_dataset", "env_reward_func"]

_NOT_ROW_ALIGNED = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "spatial_shapes", "image_sizes",
                    "num_tiles", "image_position_ids")
"""Multimodal keys whose first dimension is not the row; the filter refuses batches that hold them."""


@dataclass(frozen=True)
class SNRFilterConfig:
    """Settings of :class:`SNRFilterGRPOTrainer`; the defaults change nothing about ``GRPOTrainer``."""

    filter: FilterConfig = FilterConfig(strategy="none", loss_scaling="none")
    """Group scoring and selection (docs/method.md §4). ``strategy="none"`` (default) keeps every group. Its own
    ``loss_scaling`` is ignored: :attr:`loss_scaling` below is used instead."""
    loss_scaling: str = "none"
    """``none`` | ``keep_rate`` | ``sqrt_keep_rate``: the whole loss times rho or sqrt(rho) |
    ``keep_rate_task``: the kept advantages alone times rho (:func:`ragen2.filter.loss_scales`). TRL's loop makes the
    same optimiser updates per generation whatever is kept (the paper's mini-batch rule), so this picks the loss scale
    alone: ``keep_rate`` is the paper's rule whole, ``none`` TRL's own normalisation (docs/trl.md)."""
    reward_func: str | None = None
    """Filter on this reward function's raw column (a name in ``trainer.reward_func_names``);
    None = the ``reward_weights``-weighted sum of all functions (the reward GRPO normalises)."""
    mi_every: int = 0
    """Compute the MI diagnostics at step 1 and every ``mi_every`` steps (0 = never)."""
    mi_num_samples: int = 64
    """Rows (reasonings) sampled per MI computation."""
    mi_batch_size: int = 64
    """Reasonings per cross-scoring forward pass."""
    mi_std_eps: float = 1e-3
    """Epsilon of the MI z-scores."""
    mi_ema_decay: float = 0.9
    """Decay of the marginal-std EMA (``mi/marginal_std_ema``, ``mi/mi_zscore_ema``)."""
    mi_warn_drop: float = 0.5
    """Warn (:class:`ragen2.metrics.CollapseWarning`, ``mi/collapse_alarm``) when ``mi/mi_zscore_ema``
    falls this fraction below its running peak."""
    mi_warn_min_peak: float = WARN_MIN_PEAK
    """... but only once that peak has reached this z-score (below it the z-score is noise around 0)."""
    mi_warn_noise_sigmas: float = WARN_NOISE_SIGMAS
    """... and only when the peak clears 0, and the fall exceeds the estimator's noise, by this many
    standard errors (clustered by prompt; 0 = off)."""

    def __post_init__(self) -> None:
        if not isinstance(self.filter, FilterConfig):
            raise ValueError(f"SNRFilterConfig.filter must be a FilterConfig, got {type(self.filter).__name__}")
        self.filter_config  # validates loss_scaling through FilterConfig  # noqa: B018
        if self.mi_every < 0:
            raise ValueError(f"SNRFilterConfig.mi_every must be >= 0 (0 = off), got {self.mi_every!r}")
        for name in ("mi_num_samples", "mi_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"SNRFilterConfig.{name} must be >= 1, got {getattr(self, name)!r}")
        if not 0 <= self.mi_ema_decay < 1:
            raise ValueError(f"SNRFilterConfig.mi_ema_decay must be in [0, 1), got {self.mi_ema_decay!r}")
        if not 0 < self.mi_warn_drop <= 1:
            raise ValueError(f"SNRFilterConfig.mi_warn_drop must be in (0, 1], got {self.mi_warn_drop!r}")
        for name in ("mi_warn_min_peak", "mi_warn_noise_sigmas"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"SNRFilterConfig.{name} must be a finite number >= 0, got {value!r}")

    @property
    def filter_config(self) -> FilterConfig:
        """:attr:`filter` with :attr:`loss_scaling` in effect."""
        return dataclasses.replace(self.filter, loss_scaling=self.loss_scaling)

    def mi_due(self, step: int) -> bool:
        """Whether the MI diagnostics run at ``step`` (counted from 1)."""
        return self.mi_every > 0 and (step == 1 or step % self.mi_every == 0)


# ---------------------------------------------------------------------------------------------
# Row dropping (pure functions, unit-tested on synthetic dicts)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RowPlan:
    """Which local rows one process keeps after the global group selection."""

    index: list[int]
    """Local row indices to keep, in order (duplicates = padding copies)."""
    trained: list[bool]
    """Per kept entry: False for filler rows (loss mask and advantage set to 0)."""
    num_pad: int
    """Entries added beyond the kept rows (copies or fillers)."""


def plan_local_rows(ranked_groups: Sequence[int], group_size: int, process_index: int, local_rows: int,
                    multiple: int) -> RowPlan:
    """The local rows of the kept groups, padded to a positive multiple of ``multiple``.

    Args:
        ranked_groups: kept group ids, best first (global ids: group g = global rows g*K .. g*K+K-1).
        group_size: rows per group, K.
        process_index: this process's rank; it owns global rows ``[rank * local_rows, (rank+1) * local_rows)``.
        local_rows: rows per process before filtering.
        multiple: the kept count must be a positive multiple of it (``steps_per_generation``).

    Returns:
        A :class:`RowPlan`. Kept rows are listed in ascending order; padding repeats them cyclically
        in group-rank order (best group first). With no kept local row, the first ``multiple`` local
        rows are used as fillers.
    """
    if group_size < 1 or local_rows < 1 or multiple < 1 or process_index < 0:
        raise ValueError(f"group_size={group_size}, local_rows={local_rows}, multiple={multiple} must be >= 1 and "
                         f"process_index={process_index} >= 0")
    if multiple > local_rows:
        raise ValueError(f"multiple={multiple} exceeds the {local_rows} local rows")
    lo = process_index * local_rows
    ranked_rows = [g * group_size + k - lo for g in ranked_groups for k in range(group_size)
                   if 0 <= g * group_size + k - lo < local_rows]
    if not ranked_rows:
        return RowPlan(index=list(range(multiple)), trained=[False] * multiple, num_pad=multiple)
    kept = sorted(ranked_rows)
    num_pad = -len(kept) % multiple
    pad = [ranked_rows[i % len(ranked_rows)] for i in range(num_pad)]
    return RowPlan(index=kept + pad, trained=[True] * (len(kept) + num_pad), num_pad=num_pad)


def select_rows(batch: dict[str, Any], index: Sequence[int], num_rows: int) -> dict[str, Any]:
    """Index every per-row entry of a TRL generation batch (first dim / length ``num_rows``).

    0-d tensors (``num_items_in_batch``), None and other entries are copied unchanged.
    """
    bad = [k for k in _NOT_ROW_ALIGNED if batch.get(k) is not None]
    if bad:
        raise NotImplementedError(f"group filtering does not support multimodal batches (keys {bad})")
    rows = list(index)
    out: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == num_rows:
            out[key] = value[torch.as_tensor(rows, dtype=torch.long, device=value.device)]
        elif isinstance(value, list) and len(value) == num_rows:
            out[key] = [value[i] for i in rows]
        else:
            out[key] = value
    return out


def filter_generation_batch(batch: dict[str, Any], plan: RowPlan, *, advantage_scale: float = 1.0,
                            reduce_sum: Callable[[torch.Tensor], torch.Tensor] = lambda t: t) -> dict[str, Any]:
    """Apply a :class:`RowPlan` to one process's generation batch.

    Keeps the planned rows, zeroes the loss mask (``tool_mask``, created if absent) and the advantage
    of filler rows, multiplies the advantages by ``advantage_scale`` and recomputes
    ``num_items_in_batch = reduce_sum((completion_mask * tool_mask).sum())``.

    Args:
        batch: the dict returned by ``GRPOTrainer._generate_and_score_completions``.
        plan: from :func:`plan_local_rows`.
        advantage_scale: the keep-rate loss scale (1.0 = none).
        reduce_sum: sums a 0-d count over processes (the trainer passes ``gather(...).sum()``).
    """
    num_rows = batch["completion_ids"].shape[0]
    out = select_rows(batch, plan.index, num_rows)
    trained = torch.tensor(plan.trained, dtype=torch.bool, device=out["completion_mask"].device)
    if not bool(trained.all()):
        mask = out.get("tool_mask")
        mask = torch.ones_like(out["completion_mask"]) if mask is None else mask.clone()
        mask[~trained] = 0
        out["tool_mask"] = mask
        out["advantages"] = out["advantages"] * trained.to(out["advantages"].dtype).view(
            -1, *([1] * (out["advantages"].ndim - 1)))
    if advantage_scale != 1.0:
        out["advantages"] = out["advantages"] * advantage_scale
    loss_mask = out["completion_mask"] if out.get("tool_mask") is None else out["completion_mask"] * out["tool_mask"]
    out["num_items_in_batch"] = reduce_sum(loss_mask.sum())
    return out


# ---------------------------------------------------------------------------------------------
# MI pairs
# ---------------------------------------------------------------------------------------------
def reasoning_text(completion: str) -> str:
    """The reasoning of a completion: the text between ``<think>`` and ``</think>`` (the text before
    ``</think>`` when the prompt already opened the tag; everything after an unclosed ``<think>``),
    else the whole completion; tag strings removed, whitespace trimmed (docs/method.md §5.2)."""
    head, closed, _ = completion.partition("</think>")
    if "<think>" in head:
        text = head.split("<think>", 1)[1]
    else:
        text = head if closed else completion
    for tag in TAG_STRINGS:
        text = text.replace(tag, "")
    return text.strip()


def opening_length(tokenizer, segment: Sequence[int]) -> int:
    """How many leading tokens of a completion segment precede its reasoning: those through the opening
    ``<think>`` when the segment opens one before any ``</think>``, else 0 (the prompt opened the tag,
    or there is none)."""
    text = tokenizer.decode(list(segment), skip_special_tokens=True)
    if "<think>" not in text.partition("</think>")[0]:
        return 0
    for k in range(1, len(segment) + 1):
        if "<think>" in tokenizer.decode(list(segment[:k]), skip_special_tokens=True):
            return k
    return 0


def sample_mi_pairs(prompts: Sequence[Sequence[int]], reasonings: Sequence[Sequence[int]],
                    groups: Sequence[int], num_samples: int, rng: np.random.Generator) -> CollapsePairs:
    """Sample rows with a non-empty reasoning; columns = their distinct groups (docs/method.md §5.3, first turn).

    A column's prompt is its first sampled member's prompt; equal prompt ids give equal keys.
    """
    if not len(prompts) == len(reasonings) == len(groups):
        raise ValueError(f"{len(prompts)} prompts, {len(reasonings)} reasonings and {len(groups)} groups differ")
    valid = [i for i, z in enumerate(reasonings) if len(z) > 0]
    take = min(num_samples, len(valid))
    rows = [valid[i] for i in rng.choice(len(valid), size=take, replace=False)] if take else []
    column_of: dict[int, int] = {}
    columns: list[list[int]] = []
    for r in rows:
        if groups[r] not in column_of:
            column_of[groups[r]] = len(columns)
            columns.append(list(prompts[r]))
    return CollapsePairs(prompts=columns, reasonings=[list(reasonings[r]) for r in rows],
                         prompt_index=np.array([column_of[groups[r]] for r in rows], dtype=np.int64),
                         prompt_keys=[tuple(p) for p in columns])


@dataclass
class FilterStep:
    """What the filter did at one generation (kept on the trainer as ``last_filter``)."""

    rewards: np.ndarray
    """[groups, K] raw rewards the filter scored (all processes)."""
    outcome: FilterOutcome
    """The :func:`ragen2.filter.apply_filter` result (before the empty-batch fallback)."""
    trained_groups: list[int]
    """Groups trained on, best first (the fallback group when the selection was empty)."""
    local_rows: int
    """Rows this process kept, padding included."""
    advantage_scale: float
    """The kept advantages' multiplier (the policy term's share of the loss scaling)."""
    loss_scale: float = 1.0
    """The multiplier of the whole loss of this generation's micro-batches (:meth:`SNRFilterGRPOTrainer.compute_loss`)."""


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------
class SNRFilterGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with SNR-aware group filtering and MI diagnostics (module docstring).

    Args:
        *args, **kwargs: passed to ``trl.GRPOTrainer``.
        snr_config: the filter / diagnostics settings (default: :class:`SNRFilterConfig`, all off).
    """

    def __init__(self, *args: Any, snr_config: SNRFilterConfig | None = None, **kwargs: Any) -> None:
        self.snr_config = snr_config if snr_config is not None else SNRFilterConfig()
        if not isinstance(self.snr_config, SNRFilterConfig):
            raise ValueError(f"snr_config must be an SNRFilterConfig, got {type(self.snr_config).__name__}")
        self.rollout_rows: list[dict[str, Any]] | None = None
        """The dataset rows of the generation in progress (read by the env ``rollout_func``)."""
        self.last_filter: FilterStep | None = None
        self._raw_rewards: torch.Tensor | None = None
        snr = self.snr_config
        self._mi_monitor = CollapseMonitor(ema_decay=snr.mi_ema_decay, warn_drop=snr.mi_warn_drop,
                                           std_eps=snr.mi_std_eps, warn_min_peak=snr.mi_warn_min_peak,
                                           warn_noise_sigmas=snr.mi_warn_noise_sigmas)
        super().__init__(*args, **kwargs)
        name = self.snr_config.reward_func
        if name is not None and name not in self.reward_func_names:
            raise ValueError(f"SNRFilterConfig.reward_func={name!r} is not one of {self.reward_func_names}")

    # -- raw rewards ---------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        name = self.snr_config.reward_func
        if name is None:
            weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
            raw = (rewards_per_func * weights).nansum(dim=1)
        else:
            raw = torch.nan_to_num(rewards_per_func[:, self.reward_func_names.index(name)], nan=0.0)
        self._raw_rewards = raw.detach()
        return rewards_per_func

    # -- the hook ------------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        self.rollout_rows = inputs
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self.rollout_rows = None
        if not self.model.training:  # evaluation: neither filtering nor diagnostics
            return output
        step = int(self.state.global_step) + 1
        if self.snr_config.mi_due(step):
            self._log_mi(output, step)
        return self._filter(output, inputs)

    def _log(self, name: str, value: float) -> None:
        if math.isfinite(value):
            self._metrics["train"][name].append(float(value))

    def _filter(self, output: dict[str, Any], inputs: list[dict[str, Any]]) -> dict[str, Any]:
        cfg = self.snr_config.filter_config
        group_size = self.num_generations
        raw = self._raw_rewards.double().cpu().numpy()
        if raw.size % group_size:
            raise RuntimeError(f"{raw.size} rewards do not split into groups of num_generations={group_size}")
        rewards = raw.reshape(-1, group_size)
        successes = self._gathered_successes(inputs, rewards.shape) if cfg.metric == "success_std" else None
        lengths = self._gathered_lengths(output, rewards.shape) if cfg.metric == "length" else None
        outcome = apply_filter(rewards, cfg, successes=successes, lengths=lengths)
        num_groups = rewards.shape[0]
        sign = 1.0 if cfg.filter_type == "largest" else -1.0
        ranked = sorted(outcome.kept.tolist(), key=lambda g: (-sign * outcome.group_scores[g], g))
        fallback = not ranked
        if fallback:
            ranked = [int(np.argsort(-sign * outcome.group_scores, kind="stable")[0])]
        for name, value in outcome.metrics.items():
            if name not in ("filter/loss_scale", "filter/reg_scale"):
                self._log(name, value)
        task, whole = loss_scales(len(ranked), num_groups, cfg)
        scale = task / whole if whole > 0 else 0.0  # the advantages' share; the loss takes ``whole``
        self._log("filter/loss_scale", task)
        self._log("filter/reg_scale", whole)
        self._log("filter/fallback_best_group", float(fallback))

        local_rows = output["completion_ids"].shape[0]
        if cfg.is_noop and scale == 1.0:
            plan = RowPlan(index=list(range(local_rows)), trained=[True] * local_rows, num_pad=0)
            new = output
        else:
            plan = plan_local_rows(ranked, group_size, self.accelerator.process_index, local_rows,
                                   self.args.steps_per_generation)
            new = filter_generation_batch(output, plan, advantage_scale=scale,
                                          reduce_sum=lambda t: self.accelerator.gather(t).sum())
        counts = self.accelerator.gather(torch.tensor([len(plan.index), plan.num_pad],
                                                      device=self.accelerator.device)).view(-1, 2).sum(0)
        self._log("filter/trained_rows", float(counts[0]))
        self._log("filter/pad_rows", float(counts[1]))
        self.last_filter = FilterStep(rewards=rewards, outcome=outcome, trained_groups=ranked,
                                      local_rows=len(plan.index), advantage_scale=scale, loss_scale=whole)
        return new

    def compute_loss(self, model, inputs, *args, **kwargs):
        """GRPO's loss, times the filter's whole-loss scale of the generation these rows came from."""
        loss = super().compute_loss(model, inputs, *args, **kwargs)
        scale = self.last_filter.loss_scale if self.last_filter is not None and self.model.training else 1.0
        return loss * scale if scale != 1.0 and isinstance(loss, torch.Tensor) else loss

    def _gathered_successes(self, inputs: list[dict[str, Any]], shape: tuple[int, int]) -> np.ndarray:
        if any("success" not in row for row in inputs):
            raise ValueError("filter metric 'success_std' needs a per-row 'success' value (e.g. from the env "
                             "rollout_func); the rows have none")
        flags = gather_object([float(row["success"]) for row in inputs])
        return np.asarray(flags, dtype=np.float64).reshape(shape)

    def _gathered_lengths(self, output: dict[str, Any], shape: tuple[int, int]) -> np.ndarray:
        mask = output["completion_mask"] if output.get("tool_mask") is None else \
            output["completion_mask"] * output["tool_mask"]
        return self.accelerator.gather(mask.sum(dim=1)).double().cpu().numpy().reshape(shape)

    # -- MI diagnostics ------------------------------------------------------------------------
    def _log_mi(self, output: dict[str, Any], step: int) -> None:
        """MI proxies of this process's unfiltered rows (every rank computes on its own rows)."""
        start = time.perf_counter()
        tokenizer = self.processing_class
        prompt_ids, prompt_mask = output["prompt_ids"], output["prompt_mask"].bool()
        model_mask = output["completion_mask"] if output.get("tool_mask") is None else \
            output["completion_mask"] * output["tool_mask"]
        offset = self.accelerator.process_index * prompt_ids.shape[0]
        prompts, reasonings, groups = [], [], []
        for row in range(prompt_ids.shape[0]):
            segment = _first_segment(output["completion_ids"][row], model_mask[row])
            # X ends where the reasoning begins: the prompt plus the opening <think> the model wrote, the
            # context z was generated in (ragen2's own generation prompt ends with that tag).
            prompts.append(prompt_ids[row][prompt_mask[row]].tolist() + segment[:opening_length(tokenizer, segment)])
            text = reasoning_text(tokenizer.decode(segment, skip_special_tokens=True))
            reasonings.append(tokenizer(text, add_special_tokens=False)["input_ids"] if text else [])
            groups.append((offset + row) // self.num_generations)
        rng = np.random.default_rng([int(self.args.seed), step, int(self.accelerator.process_index)])
        pairs = sample_mi_pairs(prompts, reasonings, groups, self.snr_config.mi_num_samples, rng)
        self._log("mi/valid_rate", sum(1 for z in reasonings if z) / max(len(reasonings), 1))
        self._log("mi/num_rows", float(len(pairs.reasonings)))
        self._log("mi/num_columns", float(len(pairs.prompts)))
        if len(pairs.prompts) < 2:
            self._log("mi/skipped", 1.0)
            return
        model = self.accelerator.unwrap_model(self.model)
        logp_sum, lengths = cross_logprobs(model, tokenizer, pairs.prompts, pairs.reasonings,
                                           batch_size=self.snr_config.mi_batch_size,
                                           temperature=float(self.temperature))
        metrics, rows = mi_proxies(logp_sum, lengths, pairs.prompt_index, pairs.prompt_keys,
                                   std_eps=self.snr_config.mi_std_eps, return_rows=True)
        for name, value in self._mi_monitor.update(metrics, rows).items():
            self._log(f"mi/{name}", value)
        self._log("mi/skipped", 0.0)
        self._log("mi/seconds", time.perf_counter() - start)


def _first_segment(completion_ids: torch.Tensor, model_mask: torch.Tensor) -> list[int]:
    """The completion's leading model tokens (up to the first environment/padding token)."""
    off = (model_mask == 0).nonzero()
    stop = int(off[0, 0]) if off.numel() else completion_ids.shape[0]
    return completion_ids[:stop].tolist()
