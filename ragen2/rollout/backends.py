"""Generation backends: token-id prompts in, new token ids out.

:class:`HFBackend` wraps ``model.generate`` (CPU or GPU). ``VLLMBackend`` (GPU only, in
:mod:`ragen2.rollout.vllm_backend`, imported lazily) implements the same :class:`GenerationBackend`
protocol; :func:`make_backend` names the ones available.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import GenerationConfig

from ragen2.model.prefix import head_on_hidden
from ragen2.rollout.decode import decode_step
from ragen2.rollout.stops import stop_token_ids

log = logging.getLogger(__name__)

class GenerationBackend(Protocol):
    def generate(self, prompts_ids: list[list[int]], max_new_tokens: int, temperature: float, seed: int,
                 *, greedy: bool = False) -> list[list[int]]:
        """New tokens for each prompt, cut before the first stop token (which is not returned)."""
        ...


@dataclass
class Generation:
    """One sampled response, with its sampling log-probs where the backend records them (:meth:`HFBackend.sample`)."""

    tokens: list[int]
    """The new tokens before the first stop token."""
    stop: int | None = None
    """The stop token that ended the response (None: ``max_new_tokens`` ran out first, or not recorded)."""
    logprobs: list[float] | None = None
    """``log softmax(logits / temperature)`` of the prompt's last token (given the tokens before it), then of each
    of ``tokens`` and of ``stop``: the trainer's log-probs of those tokens, from the sampling pass. None for greedy
    decoding (not the behaviour policy's distribution) or when not recorded."""
    entropies: list[float] | None = None
    """The full-vocabulary entropy of the same distributions, aligned with ``logprobs``."""
    temperature: float | None = None
    """The sampling temperature of ``logprobs``."""


class HFBackend:
    """Batched sampling on a Hugging Face causal LM, left padding, KV cache.

    Two decoding paths give the same kind of samples (temperature, no top-k/top-p, stop tokens):

    - ``share_prefill=True`` (default): a small decode loop of its own. Identical prompts (all members
      of a group on turn 1) are prefilled once and their KV cache is copied; rows that have stopped
      leave the batch. Sampling is :func:`sample_tokens`, its random draws from a ``torch.Generator``
      seeded with ``seed``. Each new token is one :func:`ragen2.rollout.decode.decode_step` (a lean
      step for the tiny Llama on CPU, with the same logits as the model's forward).
    - ``share_prefill=False``: ``model.generate`` with the torch RNG seeded from ``seed`` inside a
      forked RNG state (the caller's global RNG is untouched).

    Either way the same seed and prompts give the same tokens on CPU.

    Args:
        model: A causal LM in eval mode.
        tokenizer: Its tokenizer (``pad_token_id`` must be set).
        max_batch_size: Prompts per forward batch (0 = all at once).
        share_prefill: Use the own decode loop with shared prefill (see above).
    """

    def __init__(self, model, tokenizer, *, max_batch_size: int = 0, share_prefill: bool = True):
        if tokenizer.pad_token_id is None:
            raise ValueError("tokenizer.pad_token_id is None; load the policy with ragen2.policy.load_policy")
        if max_batch_size < 0:
            raise ValueError(f"max_batch_size must be >= 0, got {max_batch_size!r}")
        self.model = model
        self.pad_id = int(tokenizer.pad_token_id)
        self.stop_ids = stop_token_ids(tokenizer)
        self.max_batch_size = max_batch_size
        self.share_prefill = share_prefill

    def generate(self, prompts_ids: list[list[int]], max_new_tokens: int, temperature: float, seed: int,
                 *, greedy: bool = False) -> list[list[int]]:
        return [g.tokens for g in self.sample(prompts_ids, max_new_tokens, temperature, seed, greedy=greedy)]

    def sample(self, prompts_ids: list[list[int]], max_new_tokens: int, temperature: float, seed: int,
               *, greedy: bool = False) -> list[Generation]:
        """:meth:`generate`'s tokens as :class:`Generation` s: with the stop token, and, on the shared-prefill path
        (for a model whose logits are its head on its last hidden states), the sampling log-probs and entropies."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}")
        if not greedy and not temperature > 0:
            raise ValueError(f"temperature must be > 0 for sampling, got {temperature!r}")
        if any(len(p) == 0 for p in prompts_ids):
            raise ValueError("empty prompt in the generation batch")
        step = self.max_batch_size or len(prompts_ids) or 1
        decode = self._decode_shared if self.share_prefill else self._decode_hf
        out: list[Generation] = []
        for chunk_index, lo in enumerate(range(0, len(prompts_ids), step)):
            out.extend(decode(prompts_ids[lo:lo + step], max_new_tokens, temperature,
                              seed + 7919 * chunk_index, greedy))
        return out

    def _left_pad(self, prompts_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(p) for p in prompts_ids)
        input_ids = torch.full((len(prompts_ids), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts_ids), width), dtype=torch.long)
        for row, prompt in enumerate(prompts_ids):
            input_ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt):] = 1
        device = self.model.device
        return input_ids.to(device), attention_mask.to(device)

    def _cut_at_stop(self, tokens: list[int]) -> Generation:
        stops = set(self.stop_ids)
        cut = next((i for i, t in enumerate(tokens) if t in stops), len(tokens))
        return Generation(tokens[:cut], stop=tokens[cut] if cut < len(tokens) else None)

    def _decode_hf(self, prompts_ids, max_new_tokens, temperature, seed, greedy):
        input_ids, attention_mask = self._left_pad(prompts_ids)
        config = GenerationConfig(
            do_sample=not greedy, temperature=None if greedy else float(temperature), top_k=0, top_p=1.0,
            max_new_tokens=max_new_tokens, eos_token_id=self.stop_ids, pad_token_id=self.pad_id,
            use_cache=True)
        device = self.model.device
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(seed)
            sequences = self.model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                            generation_config=config)
        return [self._cut_at_stop(t) for t in sequences[:, input_ids.shape[1]:].tolist()]  # no log-probs

    def _decode_shared(self, prompts_ids, max_new_tokens, temperature, seed, greedy):
        device = self.model.device
        unique: dict[tuple[int, ...], int] = {}
        row_to_unique = [unique.setdefault(tuple(p), len(unique)) for p in prompts_ids]
        input_ids, attention_mask = self._left_pad([list(p) for p in unique])
        position_ids = (attention_mask.cumsum(-1) - 1).clamp_min(0)
        generator = torch.Generator(device=device).manual_seed(seed % (2**63))
        stop_ids = torch.tensor(self.stop_ids, device=device)
        scored = not greedy and head_on_hidden(self.model) and min(len(p) for p in prompts_ids) > 1
        rows_total = len(prompts_ids)
        # row r's token of step t in sampled[r, t] (-1 once it stopped); its scores in column t + 1 of scores
        sampled = torch.full((rows_total, max_new_tokens), -1, dtype=torch.long, device=device)
        scores = torch.zeros((2, rows_total, max_new_tokens + 1), dtype=torch.float32, device=device)
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             use_cache=True, logits_to_keep=1, output_hidden_states=scored)
            rows = torch.tensor(row_to_unique, device=device)
            step_logits = decode_step(self.model, out, rows, input_ids.shape[1], max_new_tokens)
            if scored:  # the prompt's last token, predicted by the position before it
                before_last = self.model.get_output_embeddings()(out.hidden_states[-1][:, -2])
                scores[:, :, 0] = _scores(before_last, input_ids[:, -1], temperature)[:, rows]
            logits = out.logits[rows, -1, :]
            attention_mask = attention_mask[rows]
            next_position = position_ids[rows, -1] + 1
            live = torch.arange(rows_total, device=device)  # original row of each batch row
            for step in range(max_new_tokens):
                if greedy:
                    tokens = logits.argmax(dim=-1)
                else:
                    tokens = sample_tokens(logits, temperature, generator)
                sampled[live, step] = tokens
                if scored:
                    scores[:, live, step + 1] = _scores(logits, tokens, temperature)
                going = ~torch.isin(tokens, stop_ids)
                if step == max_new_tokens - 1 or not bool(going.any()):
                    break
                if not bool(going.all()):
                    keep = going.nonzero().squeeze(1)
                    step_logits.keep(keep)
                    tokens, live = tokens[keep], live[keep]
                    attention_mask, next_position = attention_mask[keep], next_position[keep]
                attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(live), 1))], dim=1)
                logits = step_logits(tokens, attention_mask, next_position)
                next_position = next_position + 1
        generations = [self._cut_at_stop([t for t in row if t >= 0]) for row in sampled.tolist()]
        if scored:
            for g, lp, ent in zip(generations, *scores.tolist()):
                kept = 1 + len(g.tokens) + (g.stop is not None)  # the prompt's last token, the tokens, the stop
                g.logprobs, g.entropies, g.temperature = lp[:kept], ent[:kept], float(temperature)
        return generations


def _scores(logits: torch.Tensor, tokens: torch.Tensor, temperature: float) -> torch.Tensor:
    """``[2, B]``: the log-prob of ``tokens`` and the entropy under ``softmax(logits / temperature)``, row by row,
    computed as the trainer computes them (:func:`ragen2.trainer.losses.token_logprobs_and_entropy`)."""
    logits = logits.float()
    lsm = torch.log_softmax(logits / temperature if temperature != 1.0 else logits, dim=-1)
    logp = lsm.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return torch.stack([logp, -(lsm.exp() * lsm).sum(-1)])


def sample_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """One token per row of ``logits [B, V]``, drawn from ``softmax(logits / temperature)``.

    Inverse-CDF sampling: one uniform draw per row, located in the row's cumulative probabilities
    (float64). The same distribution as ``torch.multinomial``, which on CPU draws an exponential
    variate per vocabulary entry (about 0.1 s of a 0.85 s CPU default rollout at 8 x 16). A token of
    probability 0 is never drawn: its interval of the cumulative sum is empty.
    """
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand((len(probs), 1), generator=generator, device=probs.device, dtype=torch.float64)
    total = cdf[:, -1:]
    target = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))  # < total, even rounded
    return torch.searchsorted(cdf, target, right=True).squeeze(1)


def backend_settings(rollout_cfg) -> dict:
    """:func:`make_backend` keyword arguments from a :class:`ragen2.config.RolloutConfig`.

    None for ``hf``; for ``vllm`` the engine settings (``rollout.vllm_*``): memory share, longest sequence
    (``vllm_max_model_len``, 0 = ``max_context_tokens + max_new_tokens``), eager mode, dtype and weight-sync
    interval, and ``max_num_seqs``, the most rows one rollout sends at once (a training batch or the validation
    groups), so that vLLM's start-up memory profile sizes its scheduler for this run's batches, not its default.
    """
    if rollout_cfg.backend != "vllm":
        return {}
    r = rollout_cfg
    return {"gpu_memory_utilization": r.vllm_gpu_memory_utilization,
            "max_model_len": r.vllm_max_model_len or r.max_context_tokens + r.max_new_tokens,
            "enforce_eager": r.vllm_enforce_eager, "dtype": r.vllm_dtype, "sync_every": r.vllm_sync_every,
            "max_num_seqs": max(r.env_groups * r.group_size, r.val_groups)}


def make_backend(name: str, model, tokenizer, **kwargs) -> GenerationBackend:
    """The generation backend called ``name``: ``hf`` (:class:`HFBackend`) or ``vllm`` (GPU only).

    ``vllm`` returns the process's shared :class:`ragen2.rollout.vllm_backend.VLLMBackend` with
    ``model``'s current weights synced in (as ``sync_every`` allows). Where vLLM is not installed (a GPU box
    without network, a CPU) it falls back to :class:`HFBackend`, the same sampling contract at a lower speed, and
    logs one warning per process; with vLLM but no CUDA device it raises RuntimeError. :func:`backend_settings`
    gives a run's ``kwargs``.
    """
    if name == "vllm" and not _vllm_installed():
        _warn_vllm_missing()
        name, kwargs = "hf", {}
    if name == "hf":
        return HFBackend(model, tokenizer, **kwargs)
    if name == "vllm":
        from ragen2.rollout.vllm_backend import make_vllm_backend  # lazy: vLLM is an optional GPU extra

        return make_vllm_backend(model, tokenizer, **kwargs)
    raise ValueError(f"unknown rollout backend {name!r}; known: 'hf', 'vllm'")


_WARNED: set[str] = set()


def _vllm_installed() -> bool:
    """Whether ``import vllm`` can succeed, without importing it (an import takes seconds and touches CUDA)."""
    if "vllm" in sys.modules:
        return sys.modules["vllm"] is not None
    return importlib.util.find_spec("vllm") is not None


def _warn_vllm_missing() -> None:
    if "vllm" not in _WARNED:
        _WARNED.add("vllm")
        log.warning("rollout.backend='vllm' but vLLM is not installed: generating with the HF backend instead "
                    "(same sampling, slower); pip install 'ragen2[vllm]' on a CUDA machine for vLLM")
