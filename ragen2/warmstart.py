"""SFT warm start on expert episodes, in exactly the conversation format of the rollouts.

A share ``template_fraction`` of the episodes carries a generic reasoning text that ignores the state
(:data:`ragen2.rollout.expert.TEMPLATE_THINKS`); the rest carry the expert's grounded reasoning. How
strong and how faithful the warm start is decides whether template collapse can appear later
(docs/method.md §7.0), so ``warm_start.json`` records the greedy success and template share.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ragen2 import envs
from ragen2.config import EnvConfig, RunConfig, to_dict
from ragen2.kernels import check_pinned, machine_record
from ragen2.model.optim import adamw
from ragen2.model.prefix import head_on_hidden, ragged_forward
from ragen2.policy import load_policy, resolve_policy
from ragen2.quiet import quiet_unless_terminal
from ragen2.rollout.collect import collect_rollouts
from ragen2.rollout.expert import TEMPLATE_THINKS, ExpertEpisode, expert_episode, is_template
from ragen2.rollout.prompt import resolve_limits
from ragen2.rollout.sequence import TokenizedConversation, fit_context, tokenize_conversations

logger = logging.getLogger(__name__)

EVAL_SEEDS = 32
"""Greedy evaluation episodes (seeds ``rollout.val_seed ...``)."""
MICRO_BATCH = 16
"""Rows per forward/backward inside one SFT step (gradients are accumulated)."""
LOG_EVERY = 50
"""Log the SFT loss every this many steps (logger ``ragen2.warmstart``, level INFO)."""
CORPUS_SEED_BASE = 50_000_000
"""Expert corpus seeds start here (far from the training seeds 10000+ and validation seeds 123+)."""


def corpus_env(cfg: RunConfig) -> EnvConfig:
    """The environment the warm start learns and is evaluated on (``warm_start.env_kwargs`` if set)."""
    if cfg.warm_start.env_kwargs is None:
        return cfg.env
    return replace(cfg.env, kwargs=dict(cfg.warm_start.env_kwargs))


def build_corpus(cfg: RunConfig) -> list[ExpertEpisode]:
    """``warm_start.num_episodes`` expert episodes; exactly ``round(template_fraction * n)`` of them
    (chosen at random) use a template reasoning text."""
    ws = cfg.warm_start
    if ws.num_episodes < 1:
        raise ValueError(f"warm_start.num_episodes must be >= 1, got {ws.num_episodes!r}")
    if not 0.0 <= ws.template_fraction <= 1.0:
        raise ValueError(f"warm_start.template_fraction must be in [0, 1], got {ws.template_fraction!r}")
    rng = np.random.default_rng(ws.seed)
    num_template = round(ws.template_fraction * ws.num_episodes)
    template_rows = set(rng.permutation(ws.num_episodes)[:num_template].tolist())
    env = envs.make(cfg.env.name, **corpus_env(cfg).kwargs)
    limits = resolve_limits(cfg.rollout, env)
    base = CORPUS_SEED_BASE + 1_000_003 * ws.seed
    episodes = []
    for i in range(ws.num_episodes):
        template = TEMPLATE_THINKS[int(rng.integers(len(TEMPLATE_THINKS)))] if i in template_rows else None
        episodes.append(expert_episode(env, base + i, limits, template_think=template))
    return episodes


def tokenize_corpus(tokenizer, episodes: list[ExpertEpisode], max_tokens: int) -> list[TokenizedConversation]:
    """Token sequences and loss masks of the episodes (oldest turns dropped beyond ``max_tokens``)."""
    conversations = [fit_context(tokenizer, ep.messages, max_tokens, generation=False)[0] for ep in episodes]
    return tokenize_conversations(tokenizer, conversations)


def _batch(sequences: list[TokenizedConversation], rows: list[int], pad_id: int, device):
    """Right-padded ``input_ids``, ``attention_mask`` and the target mask (loss on assistant tokens)."""
    width = max(len(sequences[r].input_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    targets = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        seq = sequences[r]
        n = len(seq.input_ids)
        ids[i, :n] = torch.tensor(seq.input_ids)
        attention[i, :n] = 1
        targets[i, :n] = torch.tensor(seq.loss_mask, dtype=torch.float32)
    return ids.to(device), attention.to(device), targets.to(device)


def sft_nll_sum(model, ids: torch.Tensor, attention: torch.Tensor, targets: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed next-token NLL over the positions where ``targets`` is 1, and their count.

    The LM head runs only on those positions (assistant tokens are a minority of each sequence), and the body runs
    as a ragged forward (:func:`ragen2.model.prefix.ragged_forward`): the prefix every row shares (the system
    message) once, then each row up to its last assistant token; where it cannot (a model whose logits are not its
    head on its hidden states, or that takes no cache), the plain forward.
    """
    wanted = F.pad(targets[:, 1:] > 0, (0, 1))  # position t predicts token t + 1
    ragged = ragged_forward(model.base_model, ids, attention, wanted) if head_on_hidden(model) else None
    if ragged is None:
        hidden = model.base_model(input_ids=ids, attention_mask=attention).last_hidden_state[:, :-1]
        selected = targets[:, 1:] > 0
        hidden, labels = hidden[selected], ids[:, 1:][selected]
    else:
        hidden, labels = ragged.hidden, ids[ragged.rows, ragged.cols + 1]
    logits = model.get_output_embeddings()(hidden).float()
    nll = F.cross_entropy(logits, labels, reduction="sum")
    return nll, torch.tensor(len(labels), device=ids.device)


def sft_loss(model, ids: torch.Tensor, attention: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the tokens where ``targets`` is 1 (never the first token)."""
    nll, count = sft_nll_sum(model, ids, attention, targets)
    return nll / count.clamp_min(1)


def _cosine_lr(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def train_sft(model, sequences: list[TokenizedConversation], *, steps: int, lr: float, batch_size: int,
              seed: int, pad_id: int) -> list[float]:
    """Plain SFT loop; returns the loss (mean NLL per assistant token) of every step.

    AdamW without weight decay, linear warm-up then cosine decay to 0, gradient-norm clip 1.0. Each step
    draws ``batch_size`` sequences (epochs of a seeded permutation) and accumulates gradients over
    length-sorted micro-batches of :data:`MICRO_BATCH` rows, normalised by the step's token count.
    """
    if batch_size < 1:
        raise ValueError(f"warm_start.batch_size must be >= 1, got {batch_size!r}")
    rng = np.random.default_rng(seed + 1)
    optimizer = adamw(model, lr=lr, weight_decay=0.0)
    warmup = max(1, min(20, steps // 10))
    order, cursor, losses = rng.permutation(len(sequences)), 0, []
    started = time.perf_counter()
    model.train()
    for step in range(steps):
        if cursor + batch_size > len(order):
            order, cursor = rng.permutation(len(sequences)), 0
        rows = order[cursor:cursor + batch_size]
        cursor += batch_size
        for group in optimizer.param_groups:
            group["lr"] = _cosine_lr(step, steps, lr, warmup)
        # Rows sorted by length and cut into micro-batches: little padding; one optimiser step.
        rows = sorted(rows.tolist(), key=lambda r: len(sequences[r].input_ids))
        total = sum(sum(sequences[r].loss_mask[1:]) for r in rows)
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for lo in range(0, len(rows), MICRO_BATCH):
            nll, _ = sft_nll_sum(model, *_batch(sequences, rows[lo:lo + MICRO_BATCH], pad_id, model.device))
            (nll / max(total, 1)).backward()
            loss_sum += float(nll.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss_sum / max(total, 1))
        if (step + 1) % LOG_EVERY == 0 or step + 1 == steps:
            logger.info("warm start step %d/%d: loss %.4f (%.0f s)", step + 1, steps, losses[-1],
                        time.perf_counter() - started)
    model.eval()
    return losses


def evaluate_greedy(model, tokenizer, cfg: RunConfig, num_seeds: int = EVAL_SEEDS) -> dict[str, float]:
    """Greedy success and template share (over all parsed turns and over first turns)."""
    seeds = [cfg.rollout.val_seed + i for i in range(num_seeds)]
    batch = collect_rollouts(model, tokenizer, corpus_env(cfg), cfg.rollout, seeds, group_size=1, temperature=1.0,
                             seed=cfg.warm_start.seed, greedy=True)
    turns = [t for traj in batch.trajectories for t in traj.turns]
    parsed = [t for t in turns if t.think]
    firsts = [traj.turns[0] for traj in batch.trajectories]
    return {
        "greedy_success": float(batch.successes.mean()),
        "greedy_score": float(batch.scores.mean()),
        "greedy_valid_turn_rate": float(np.mean([t.valid for t in turns])),
        "greedy_template_share": float(np.mean([is_template(t.think) for t in parsed])) if parsed else 0.0,
        "greedy_first_turn_template_share": float(np.mean([is_template(t.think) for t in firsts])),
        "greedy_mean_response_tokens": float(np.mean([traj.response_length for traj in batch.trajectories])),
    }


def warm_start(cfg: RunConfig, out_dir: Path, *, base_policy: Path) -> Path:
    """Fine-tune ``base_policy`` on expert conversations and save it (with ``warm_start.json``).

    The model trains in float32 (master weights, no autocast) whatever ``policy.dtype`` says. The result is
    written to a temporary sibling directory and renamed to ``out_dir`` at the end.

    Returns:
        ``out_dir``.
    """
    ws = cfg.warm_start
    if ws.steps < 0:
        raise ValueError(f"warm_start.steps must be >= 0, got {ws.steps!r}")
    start = time.perf_counter()
    model, tokenizer = load_policy(base_policy, dtype="float32", device=cfg.policy.device)
    machine = machine_record()
    check_pinned(machine, device=next(model.parameters()).device.type)
    logger.info("warm start %s: %d expert episodes of %s, then %d SFT steps", Path(out_dir).name, ws.num_episodes,
                cfg.env.name, ws.steps)
    episodes = build_corpus(cfg)
    sequences = tokenize_corpus(tokenizer, episodes, cfg.rollout.max_context_tokens)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ws.seed)
        losses = train_sft(model, sequences, steps=ws.steps, lr=ws.lr, batch_size=ws.batch_size,
                           seed=ws.seed, pad_id=int(tokenizer.pad_token_id))
    train_seconds = time.perf_counter() - start
    logger.info("warm start %s: greedy evaluation on %d seeds", Path(out_dir).name, EVAL_SEEDS)
    report = {
        "steps": ws.steps,
        "final_loss": losses[-1] if losses else None,
        "final_loss_mean10": float(np.mean(losses[-10:])) if losses else None,
        "first_loss": losses[0] if losses else None,
        "corpus_episodes": len(episodes),
        "corpus_template_share": float(np.mean([ep.template for ep in episodes])),
        "corpus_expert_success": float(np.mean([ep.success for ep in episodes])),
        "corpus_mean_tokens": float(np.mean([len(s.input_ids) for s in sequences])),
        "train_seconds": round(train_seconds, 2),
        **evaluate_greedy(model, tokenizer, cfg),
        "eval_seeds": EVAL_SEEDS,
        "torch_threads": torch.get_num_threads(),
        **machine,
        "base_policy": str(base_policy),
        "config": to_dict(cfg),
        "losses": [round(x, 5) for x in losses],
    }
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        with quiet_unless_terminal():
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        (tmp / "warm_start.json").write_text(json.dumps(report, indent=2) + "\n")
        logger.info("warm start %s: greedy success %.3f, built in %.0f s", out_dir.name, report["greedy_success"],
                    time.perf_counter() - start)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


WARM_START_IGNORED_ROLLOUT = ("env_groups", "group_size", "temperature", "val_temperature", "val_groups",
                              "train_seed", "vllm_gpu_memory_utilization", "vllm_max_model_len", "vllm_enforce_eager",
                              "vllm_dtype", "vllm_sync_every")
"""Rollout fields the warm start does not read or that do not change what it learns (the vLLM engine's memory,
length, eager-mode, dtype and weight-sync settings); changing them must not rebuild it."""


def warm_start_key(cfg: RunConfig) -> str:
    rollout = {k: v for k, v in to_dict(cfg.rollout).items() if k not in WARM_START_IGNORED_ROLLOUT}
    policy = {k: v for k, v in to_dict(cfg.policy).items() if k != "device"}
    warm = {k: v for k, v in to_dict(cfg.warm_start).items() if k != "env_kwargs"}  # in corpus_env already
    blob = json.dumps({"env": to_dict(corpus_env(cfg)), "policy": policy, "warm_start": warm,
                       "rollout": rollout}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def initial_policy(cfg: RunConfig, cache_dir: Path) -> Path:
    """The checkpoint RL starts from: the resolved policy, warm-started if ``warm_start.steps > 0``.

    The warm start is cached in ``cache_dir/warm_start/<hash>`` (outside the run dir), keyed by the
    env, policy, warm-start and rollout settings it depends on, and built once, under a file lock,
    however many runs share it. The tiny base policy is cached in ``cache_dir/policies``.
    """
    cache_dir = Path(cache_dir)
    base = resolve_policy(cfg.policy, [cfg.env.name], cache_dir / "policies")
    if cfg.warm_start.steps == 0:
        return base
    out_dir = cache_dir / "warm_start" / warm_start_key(cfg)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir.parent / f"{out_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out_dir / "warm_start.json").exists():  # written last, by an atomic rename of the whole dir
            return out_dir
        return Path(warm_start(cfg, out_dir, base_policy=base))
