"""The training batch as padded tensors, built from a :class:`~ragen2.rollout.types.RolloutBatch`.

Sequences are right-padded. Per-token tensors other than ``input_ids``/``attention_mask`` are
*shifted*: column ``t`` describes token ``t + 1`` (predicted from tokens ``0..t``), so they have
``L - 1`` columns. The trajectory score sits on the last trained token of ``rewards`` (docs/method.md §2.6
puts it on the last token; with a trained final token the two agree, and GAE ignores rewards on
untrained tokens).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ragen2.rollout.types import Trajectory


@dataclass
class UpdateBatch:
    input_ids: torch.Tensor
    """``[B, L]`` token ids, right-padded."""
    attention_mask: torch.Tensor
    """``[B, L]`` 1 on real tokens."""
    loss_mask: torch.Tensor
    """``[B, L-1]`` float, 1 on trained (assistant) tokens."""
    reasoning_mask: torch.Tensor
    """``[B, L-1]`` float, 1 on trained tokens inside ``<think>``."""
    rewards: torch.Tensor
    """``[B, L-1]`` the score on the last trained token, 0 elsewhere."""
    scores: torch.Tensor
    """``[B]`` trajectory scores."""
    group_ids: torch.Tensor
    """``[B]`` prompt-group ids (the rollout batch's group index)."""
    task_weight: torch.Tensor
    """``[B]`` 1 for rows of kept groups (task loss + regularisers), 0 for rows that only carry the
    KL / entropy terms (``filter.regularize_kept_only = False``)."""
    behaviour_logp: torch.Tensor | None = None
    """``[B, L-1]`` the sampling log-prob of each token (:attr:`ragen2.rollout.types.Trajectory.behaviour_logprobs`),
    NaN on the rows without them; None when no row has them."""
    behaviour_entropy: torch.Tensor | None = None
    """``[B, L-1]`` the sampling distribution's entropy at each token, aligned with ``behaviour_logp``."""
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    values: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    returns: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def targets(self) -> torch.Tensor:
        """``[B, L-1]`` the token each shifted column predicts."""
        return self.input_ids[:, 1:]

    @property
    def task_mask(self) -> torch.Tensor:
        """``[B, L-1]`` trained tokens of kept rows: where the policy-gradient and value losses act."""
        return self.loss_mask * self.task_weight[:, None]

    def entropy_mask(self, scope: str) -> torch.Tensor:
        """Tokens of the entropy bonus: ``all`` trained tokens or only ``reasoning`` ones."""
        if scope == "all":
            return self.loss_mask
        if scope == "reasoning":
            return self.reasoning_mask
        raise ValueError(f"unknown trainer.entropy_scope {scope!r}; known: 'all', 'reasoning'")

    def select(self, rows: Sequence[int] | torch.Tensor) -> UpdateBatch:
        """The given rows, with padding columns that none of them uses trimmed off."""
        idx = torch.as_tensor(rows, dtype=torch.long, device=self.input_ids.device)
        length = max(int(self.attention_mask[idx].sum(-1).max().item()), 2) if len(idx) else 2
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                out[f.name] = None
            elif value.dim() == 1:
                out[f.name] = value[idx]
            elif f.name in ("input_ids", "attention_mask"):
                out[f.name] = value[idx, :length]
            else:
                out[f.name] = value[idx, :length - 1]
        return UpdateBatch(**out)

    def to(self, device: torch.device | str) -> UpdateBatch:
        return UpdateBatch(**{f.name: (None if getattr(self, f.name) is None else getattr(self, f.name).to(device))
                              for f in dataclasses.fields(self)})


def build_batch(trajectories: Sequence[Trajectory], pad_id: int, task_weight: Sequence[float] | None = None,
                device: torch.device | str = "cpu", temperature: float | None = None) -> UpdateBatch:
    """Pad trajectories into an :class:`UpdateBatch` (rows keep the given order).

    ``temperature``: the trainer's log-prob temperature; the sampling log-probs of the trajectories sampled at it
    become ``behaviour_logp`` / ``behaviour_entropy`` (None: not used).

    Raises:
        ValueError: if a trajectory's masks do not match its ``input_ids`` or it has < 2 tokens.
    """
    if not trajectories:
        raise ValueError("build_batch needs at least one trajectory")
    length = max(len(t.input_ids) for t in trajectories)
    n = len(trajectories)
    input_ids = torch.full((n, length), int(pad_id), dtype=torch.long)
    attention = torch.zeros((n, length), dtype=torch.long)
    loss_mask = torch.zeros((n, length), dtype=torch.float32)
    reasoning = torch.zeros((n, length), dtype=torch.float32)
    rewards = torch.zeros((n, length - 1), dtype=torch.float32)
    for i, traj in enumerate(trajectories):
        m = len(traj.input_ids)
        if m < 2 or len(traj.loss_mask) != m or len(traj.reasoning_mask) != m:
            raise ValueError(f"trajectory {i} (group {traj.group}): input_ids ({m}), loss_mask "
                             f"({len(traj.loss_mask)}) and reasoning_mask ({len(traj.reasoning_mask)}) "
                             "must have equal lengths >= 2")
        input_ids[i, :m] = torch.tensor(traj.input_ids, dtype=torch.long)
        attention[i, :m] = 1
        loss_mask[i, :m] = torch.tensor(traj.loss_mask, dtype=torch.float32)
        reasoning[i, :m] = torch.tensor(traj.reasoning_mask, dtype=torch.float32)
    loss_mask, reasoning = loss_mask[:, 1:], reasoning[:, 1:] * loss_mask[:, 1:]
    for i, traj in enumerate(trajectories):
        trained = torch.nonzero(loss_mask[i]).flatten()
        last = int(trained[-1]) if len(trained) else len(traj.input_ids) - 2
        rewards[i, last] = float(traj.score)
    weights = torch.ones(n) if task_weight is None else torch.as_tensor(task_weight, dtype=torch.float32)
    behaviour = _behaviour(trajectories, length, temperature)
    batch = UpdateBatch(
        input_ids=input_ids, attention_mask=attention, loss_mask=loss_mask, reasoning_mask=reasoning,
        rewards=rewards, scores=torch.tensor([float(t.score) for t in trajectories]),
        group_ids=torch.tensor([int(t.group) for t in trajectories], dtype=torch.long), task_weight=weights,
        behaviour_logp=behaviour[0], behaviour_entropy=behaviour[1])
    return batch.to(device)


def _behaviour(trajectories: Sequence[Trajectory], length: int, temperature: float | None
               ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The shifted ``[B, L-1]`` sampling log-probs and entropies of the rows sampled at ``temperature`` (NaN rows
    elsewhere), or ``(None, None)`` when no row has them."""
    rows = [i for i, t in enumerate(trajectories)
            if temperature is not None and t.behaviour_logprobs is not None and t.behaviour_temperature == temperature]
    if not rows:
        return None, None
    logp = torch.full((len(trajectories), length - 1), float("nan"))
    entropy = torch.full((len(trajectories), length - 1), float("nan"))
    for i in rows:
        t = trajectories[i]
        m = len(t.input_ids)
        logp[i, :m - 1] = torch.tensor(t.behaviour_logprobs[1:], dtype=torch.float32)
        entropy[i, :m - 1] = torch.tensor(t.behaviour_entropies[1:], dtype=torch.float32)
        logp[i, m - 1:] = entropy[i, m - 1:] = 0.0
    return logp, entropy


def chunks(n: int, size: int) -> list[range]:
    """``range(n)`` cut into consecutive pieces of at most ``size``."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def group_order(group_ids: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
    """Row order of one update epoch: the prompt groups in a random order, each group's rows together.

    Cutting this order into consecutive mini-batches gives mini-batches of whole groups (a group is
    split only where a mini-batch boundary falls inside it), as in the reference, whose veRL actor
    splits the group-contiguous batch into consecutive mini-batches without shuffling rows. A
    micro-batch then holds one or two prompts, which :func:`ragen2.model.prefix.shared_prefix_forward`
    runs once each; shuffled rows would put most of the batch's prompts in every micro-batch.
    """
    groups = group_ids.detach().cpu().numpy()
    unique = np.unique(groups)
    return np.concatenate([np.flatnonzero(groups == unique[i]) for i in rng.permutation(len(unique))])
