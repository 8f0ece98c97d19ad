"""Cross log-probabilities ``log p(z_i | x_j)`` of every reasoning under every prompt (docs/method.md §5.4).

The MI proxies need an ``[M, N]`` matrix: each of M reasonings teacher-forced after each of N
prompts. Prompts are long (a chat-templated game state) and reasonings short, so :class:`PairScorer`
runs each distinct prompt through the model **once** and keeps its KV cache, then scores the
distinct (prompt, reasoning) pairs in batches of ``batch_size`` rows on top of those caches (each
row a reasoning after its prompt's cache; rows sorted by reasoning length so that a batch holds
reasonings of similar length, the log-softmax only at real tokens). Repeated prompts and repeated reasonings are scored once: in a
single-turn batch the trajectory family's 32 columns come from 8 prompts and both families draw
their reasonings from the same 64 trajectories, so one scorer shared by both families
(:func:`ragen2.metrics.collapse.collapse_metrics`) scores each of those pairs once. Cost: one
prompt pass per distinct prompt plus ``ceil(pairs / batch_size)`` reasoning passes, instead of
``M * N`` passes over ``prompt + reasoning``. :func:`naive_cross_logprobs` is the obvious
one-pass-per-pair version, kept as the reference the tests compare against (equal within float
rounding: a batch pads its rows' prompts and reasonings to common widths, masked out).

Token alignment, for a prompt of length P and a reasoning of length T: the logits at the prompt's
last position predict ``z_0``; the reasoning pass at position ``P + t`` (``t < T - 1``) predicts
``z_{t+1}``. Prompt caches are left-padded to the batch's longest prompt and reasonings right-padded;
padding is masked out of attention and of the sum, and position ids continue from each row's own P,
so a padded row scores as it would alone. A batch's cache is allocated once at prompt + reasoning width
and the reasoning pass writes its keys and values in place (:class:`_PromptsThenReasonings`), the same
tensors a concatenating cache builds, without the copies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers.cache_utils import Cache, DynamicLayer

from ragen2.model.prefix import cache_kwarg, head_on_hidden
from ragen2.rollout.decode import cache_of

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
    """``log softmax(logits / T)`` at ``targets`` (float32 for accuracy; no division at T = 1)."""
    logits = logits.float()
    logp = torch.log_softmax(logits / temperature if temperature != 1.0 else logits, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


class _PromptsThenReasonings(DynamicLayer):
    """One model layer's keys and values for a batch of rows: the (left-padded) prompts' in the first ``filled``
    positions of preallocated ``[rows, heads, prompt + reasoning width, dim]`` buffers, the reasoning pass's keys and
    values written after them in place. The attention sees the same contiguous tensors a concatenating cache would
    build, without building them: copying caches was most of the MI pass's time."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, filled: int):
        super().__init__()
        self.buffers = (keys, values)
        self.keys, self.values = keys[:, :, :filled], values[:, :, :filled]
        self.device, self.is_initialized = keys.device, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        start = self.keys.shape[-2]  # the positions filled so far
        end = start + key_states.shape[-2]
        keys, values = self.buffers
        if end > keys.shape[-2]:
            raise ValueError(f"{end} positions do not fit this cache's {keys.shape[-2]}")
        keys[:, :, start:end] = key_states
        values[:, :, start:end] = value_states
        self.keys, self.values = keys[:, :, :end], values[:, :, :end]
        return self.keys, self.values


class PairScorer:
    """``log p(z | x)`` summed over z's tokens, each distinct prompt prefilled once and each distinct (prompt,
    reasoning) pair scored once, over all calls (see the module docstring).

    Args:
        model: a causal LM (``transformers`` ``*ForCausalLM``), in eval mode while scoring; its weights must
            not change while the scorer is in use (the prompt caches and scores are kept).
        batch_size: (prompt, reasoning) rows per forward pass.
        temperature: logits are divided by it (the rollout temperature; 1.0 in the reference).
    """

    def __init__(self, model, batch_size: int = 256, temperature: float = 1.0):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.model, self.batch_size, self.temperature = model, batch_size, temperature
        self.device = _device(model)
        self.prompts: dict[tuple[int, ...], tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]] = {}
        """prompt -> (its per-layer keys and values ``[heads, P, dim]``, the log-softmax of its last logits)"""
        self.scores: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}

    @torch.inference_mode()
    def __call__(self, prompts: Sequence[TokenSeq], reasonings: Sequence[TokenSeq],
                 tokenizer=None) -> tuple[np.ndarray, np.ndarray]:
        """``(logp_sum [M, N] float64, lengths [M] int64)`` for N prompts X and M reasonings Z (token-id lists,
        or strings with a ``tokenizer``), each non-empty; ``lengths[i] = |z_i|``."""
        prompt_ids = [tuple(x) for x in _to_ids(prompts, tokenizer, "prompts")]
        reasoning_ids = [tuple(z) for z in _to_ids(reasonings, tokenizer, "reasonings")]
        was_training = self.model.training
        self.model.eval()
        try:
            for x in dict.fromkeys(prompt_ids):
                if x not in self.prompts:
                    self._prefill(x)
            todo = [(x, z) for x in dict.fromkeys(prompt_ids) for z in dict.fromkeys(reasoning_ids)
                    if (x, z) not in self.scores]
            for batch in self._batches(todo):
                self._score(batch)
        finally:
            self.model.train(was_training)
        out = np.array([[self.scores[(x, z)] for x in prompt_ids] for z in reasoning_ids], dtype=np.float64)
        return out.reshape(len(reasoning_ids), len(prompt_ids)), np.array([len(z) for z in reasoning_ids],
                                                                          dtype=np.int64)

    def _batches(self, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]):
        """The pairs, longest reasoning first, in batches of at most ``batch_size`` rows whose reasonings are at
        least half as long as the batch's longest (so padding at most doubles a batch's tokens)."""
        batch: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        for pair in sorted(pairs, key=lambda p: -len(p[1])):
            if batch and (len(batch) == self.batch_size or 2 * len(pair[1]) < len(batch[0][1])):
                yield batch
                batch = []
            batch.append(pair)
        if batch:
            yield batch

    def _prefill(self, x: tuple[int, ...]) -> None:
        out = self.model(input_ids=torch.tensor([x], dtype=torch.long, device=self.device), use_cache=True)
        layers = [(layer.keys[0], layer.values[0]) for layer in cache_of(out).layers]
        self.prompts[x] = (layers, torch.log_softmax(out.logits[0, -1].float() / self.temperature, dim=-1))

    def _score(self, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
        """Score a batch of pairs: the prompts' caches left-padded to a common width, the reasonings after them."""
        rows, device = len(pairs), self.device
        prompt_width = max(len(x) for x, _ in pairs)
        width = max(len(z) for _, z in pairs)
        tokens = torch.zeros((rows, width), dtype=torch.long, device=device)
        real = torch.zeros((rows, width), dtype=torch.bool, device=device)
        prompt_real = torch.zeros((rows, prompt_width), dtype=torch.bool, device=device)
        for r, (x, z) in enumerate(pairs):
            tokens[r, :len(z)] = torch.tensor(z, dtype=torch.long)
            real[r, :len(z)] = True
            prompt_real[r, prompt_width - len(x):] = True
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for r, (x, _) in enumerate(pairs):
            by_prompt.setdefault(x, []).append(r)
        # Token z_0 is predicted by the prompt's last logits.
        total = torch.stack([self.prompts[x][1][z[0]] for x, z in pairs]).double()
        if width > 1:
            layers = []
            for i, (keys, values) in enumerate(self.prompts[pairs[0][0]][0]):
                heads, dim = keys.shape[0], keys.shape[-1]
                k = keys.new_zeros((rows, heads, prompt_width + width - 1, dim))
                v = values.new_zeros((rows, heads, prompt_width + width - 1, dim))
                for x, members in by_prompt.items():
                    pk, pv = self.prompts[x][0][i]
                    index = torch.tensor(members, device=device)
                    k[index, :, prompt_width - pk.shape[1]:prompt_width] = pk
                    v[index, :, prompt_width - pv.shape[1]:prompt_width] = pv
                layers.append(_PromptsThenReasonings(k, v, prompt_width))
            cache = Cache(layers=layers)
            lengths = torch.tensor([len(x) for x, _ in pairs], device=device)
            positions = lengths[:, None] + torch.arange(width - 1, device=device)[None, :]
            attention = torch.cat([prompt_real, real[:, :-1]], dim=1).long()
            kwargs = dict(input_ids=tokens[:, :-1], attention_mask=attention, position_ids=positions, use_cache=True,
                          **{cache_kwarg(type(self.model)) or "cache": cache})
            wanted = real[:, 1:]  # z_1 .. z_{T-1}: the head and the log-softmax only where a reasoning has a token
            if head_on_hidden(self.model):
                hidden = self.model.base_model(**kwargs).last_hidden_state[wanted]
                logits = self.model.get_output_embeddings()(hidden)
            else:
                logits = self.model(**kwargs).logits[wanted]
            step = torch.zeros(wanted.shape, dtype=torch.float32, device=device)
            step[wanted] = _token_logprobs(logits, tokens[:, 1:][wanted], self.temperature)
            total = total + step.sum(dim=1).double()
        for pair, value in zip(pairs, total.cpu().tolist()):
            self.scores[pair] = value


def cross_logprobs(model, tokenizer, prompts: Sequence[TokenSeq], reasonings: Sequence[TokenSeq],
                   batch_size: int = 256, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``log p(z_i | x_j)`` summed over z_i's tokens (one :class:`PairScorer` call).

    Args:
        model: a causal LM (``transformers`` ``*ForCausalLM``); put in eval mode for the call.
        tokenizer: used only for string inputs (may be None when all inputs are token ids).
        prompts: N prompts X (token-id lists or strings), each non-empty.
        reasonings: M reasonings Z (token-id lists or strings), each non-empty.
        batch_size: (prompt, reasoning) rows per forward pass.
        temperature: logits are divided by it (the rollout temperature; 1.0 in the reference).

    Returns:
        ``(logp_sum [M, N] float64, lengths [M] int64)`` with ``lengths[i] = |z_i|``.
    """
    return PairScorer(model, batch_size=batch_size, temperature=temperature)(prompts, reasonings, tokenizer)


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
