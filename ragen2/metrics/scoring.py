"""Cross log-probabilities ``log p(z_i | x_j)`` of every reasoning under every prompt (docs/method.md §5.4).

The MI proxies need an ``[M, N]`` matrix: each of M reasonings teacher-forced after each of N
prompts. Prompts are long (a chat-templated game state, hundreds of tokens) and reasonings short,
so :func:`cross_logprobs` runs each prompt through the model **once**, keeps its KV cache, and
scores the reasonings in batches on top of a copy of that cache expanded over the batch. Cost:
N prompt passes plus ``N * ceil(M / batch_size)`` short reasoning passes, instead of ``M * N``
passes over ``prompt + reasoning``. Identical prompts are scored once and their column copied (the
trajectory family draws 32 columns from 8 prompt groups in a single-turn batch, so most columns
repeat). :func:`naive_cross_logprobs` is the obvious one-pass-per-pair version, kept as the
reference the tests compare against.

Token alignment, for a prompt of length P and a reasoning of length T: the logits at the prompt's
last position predict ``z_0``; the reasoning pass at position ``P + t`` (``t < T - 1``) predicts
``z_{t+1}``. Reasonings are right-padded; padding is masked out of attention and of the sum, and
position ids continue from P, so a padded row scores exactly as it would alone.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch

from ragen2.trainer.prefix import cache_kwarg

TokenSeq = Sequence[int] | str


def _to_ids(items: Sequence[TokenSeq], tokenizer, what: str) -> list[list[int]]:
    """Token-id lists; strings are tokenised without special tokens. Empty sequences are errors."""
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            if tokenizer is None:
                raise ValueError(f"{what}[{i}] is a string but no tokenizer was given")
            ids = list(tokenizer(item, add_special_tokens=False)["input_ids"])
        else:
            ids = [int(t) for t in item]
        if not ids:
            raise ValueError(f"{what}[{i}] is empty; every {what[:-1]} needs at least one token")
        out.append(ids)
    return out


def _device(model) -> torch.device:
    return next(model.parameters()).device


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log softmax(logits / T)`` at ``targets`` (float32 for accuracy)."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@torch.inference_mode()
def cross_logprobs(model, tokenizer, prompts: Sequence[TokenSeq], reasonings: Sequence[TokenSeq],
                   batch_size: int = 64, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``log p(z_i | x_j)`` summed over z_i's tokens, reusing each prompt's KV cache.

    Args:
        model: a causal LM (``transformers`` ``*ForCausalLM``); put in eval mode for the call.
        tokenizer: used only for string inputs (may be None when all inputs are token ids).
        prompts: N prompts X (token-id lists or strings), each non-empty.
        reasonings: M reasonings Z (token-id lists or strings), each non-empty.
        batch_size: reasonings per forward pass.
        temperature: logits are divided by it (the rollout temperature; 1.0 in the reference).

    Returns:
        ``(logp_sum [M, N] float64, lengths [M] int64)`` with ``lengths[i] = |z_i|``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    prompt_ids = _to_ids(prompts, tokenizer, "prompts")
    reasoning_ids = _to_ids(reasonings, tokenizer, "reasonings")
    device = _device(model)
    was_training = model.training
    model.eval()
    lengths = np.array([len(z) for z in reasoning_ids], dtype=np.int64)
    out = np.zeros((len(reasoning_ids), len(prompt_ids)), dtype=np.float64)
    first_column: dict[tuple[int, ...], int] = {}  # a repeated prompt's column is a copy of its first one
    try:
        for j, x in enumerate(prompt_ids):
            earlier = first_column.setdefault(tuple(x), j)
            if earlier != j:
                out[:, j] = out[:, earlier]
                continue
            prompt = torch.tensor([x], dtype=torch.long, device=device)
            prompt_out = model(input_ids=prompt, use_cache=True)
            prompt_cache = prompt_out.cache if hasattr(prompt_out, "cache") else prompt_out.past_key_values
            first_logits = prompt_out.logits[0, -1]  # predicts z_0
            plen = len(x)
            for start in range(0, len(reasoning_ids), batch_size):
                chunk = reasoning_ids[start:start + batch_size]
                out[start:start + len(chunk), j] = _score_chunk(
                    model, prompt_cache, first_logits, plen, chunk, device, temperature)
    finally:
        model.train(was_training)
    return out, lengths


def _score_chunk(model, prompt_cache, first_logits: torch.Tensor, plen: int, chunk: list[list[int]],
                 device: torch.device, temperature: float) -> np.ndarray:
    """Sum of log-probs of each reasoning in ``chunk`` after the cached prompt."""
    num, width = len(chunk), max(len(z) for z in chunk)
    tokens = torch.zeros((num, width), dtype=torch.long, device=device)
    real = torch.zeros((num, width), dtype=torch.bool, device=device)
    for r, z in enumerate(chunk):
        tokens[r, :len(z)] = torch.tensor(z, dtype=torch.long)
        real[r, :len(z)] = True
    # Token z_0 is predicted by the prompt's last logits, the same for every row.
    total = _token_logprobs(first_logits.expand(num, -1), tokens[:, 0], temperature)
    if width > 1:
        cache = copy.deepcopy(prompt_cache)  # the model appends to the cache it is given
        cache.batch_repeat_interleave(num)
        attention = torch.cat([torch.ones((num, plen), dtype=torch.long, device=device), real.long()], dim=1)
        positions = (plen + torch.arange(width - 1, device=device)).unsqueeze(0).expand(num, -1)
        logits = model(input_ids=tokens[:, :-1], attention_mask=attention[:, :-1], position_ids=positions,
                       use_cache=True, **{cache_kwarg(type(model)) or "cache": cache}).logits
        step = _token_logprobs(logits, tokens[:, 1:], temperature)  # [num, width - 1]: z_1 .. z_{T-1}
        total = total + (step * real[:, 1:]).sum(dim=1)
    return total.double().cpu().numpy()


@torch.inference_mode()
def naive_cross_logprobs(model, tokenizer, prompts: Sequence[TokenSeq], reasonings: Sequence[TokenSeq],
                         temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The reference for :func:`cross_logprobs`: one full forward of ``[x_j | z_i]`` per pair.

    Same arguments and return value as :func:`cross_logprobs` (without ``batch_size``); M * N
    forward passes, for tests and benchmarks only.
    """
    prompt_ids = _to_ids(prompts, tokenizer, "prompts")
    reasoning_ids = _to_ids(reasonings, tokenizer, "reasonings")
    device = _device(model)
    was_training = model.training
    model.eval()
    out = np.zeros((len(reasoning_ids), len(prompt_ids)), dtype=np.float64)
    try:
        for i, z in enumerate(reasoning_ids):
            for j, x in enumerate(prompt_ids):
                seq = torch.tensor([x + z], dtype=torch.long, device=device)
                logits = model(input_ids=seq).logits[0]
                # logits[t] predicts token t + 1: the reasoning tokens are predicted at P-1 .. P+T-2.
                pred = logits[len(x) - 1:len(x) + len(z) - 1]
                out[i, j] = float(_token_logprobs(pred, seq[0, len(x):], temperature).sum())
    finally:
        model.train(was_training)
    return out, np.array([len(z) for z in reasoning_ids], dtype=np.int64)
