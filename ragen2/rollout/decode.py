"""One decoding step of :class:`ragen2.rollout.backends.HFBackend`: the next-token logits of the live rows.

After the prompts are prefilled (the model's own forward), every new token costs one cached forward of the rows
still generating. Two implementations of that step, with the same interface (``step(tokens, attention_mask,
positions) -> logits`` and ``step.keep(rows)`` when rows stop):

- :class:`ModelStep`: the model's own ``forward`` with its KV cache (any causal LM);
- :class:`LlamaStep`: the same arithmetic for a Llama-architecture model in float32 on the CPU (the tiny CPU
  policy), in fewer operations: a cache preallocated for every new token and written in place, the query, key
  and value projections (and the gate and up projections) as one matrix product each, torch's fused RMSNorm and
  the rotary tables of every position computed once (a CPU-profile training rollout: 0.29 to 0.25 s,
  docs/performance.md). On this CPU the two give the same logits bit for bit
  (tests/rollout/test_decode.py compares them step by step and through the backend), so the sampled tokens and
  everything downstream are unchanged.

:func:`decode_step` picks :class:`LlamaStep` where it applies and :class:`ModelStep` otherwise.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ragen2.model.prefix import cache_kwarg


def cache_of(output: Any) -> Any:
    """The KV cache a ``transformers`` forward returned (``cache`` in transformers 5, ``past_key_values`` before)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


class ModelStep:
    """The model's own cached forward (``cache``: the prefill's KV cache, already expanded to the rows)."""

    def __init__(self, model, cache):
        self.model = model
        self.cache = cache
        self.cache_name = cache_kwarg(type(model)) or "past_key_values"

    def keep(self, rows: torch.Tensor) -> None:
        self.cache.batch_select_indices(rows)

    def __call__(self, tokens: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=tokens[:, None], attention_mask=attention_mask, position_ids=positions[:, None],
                         use_cache=True, **{self.cache_name: self.cache})
        return out.logits[:, -1, :]


def lean_llama_applies(model) -> bool:
    """Whether :class:`LlamaStep` computes exactly what ``model``'s forward does: a ``LlamaForCausalLM`` in
    float32 on the CPU outside autocast, SDPA attention, default rotary embedding, no biases, SiLU, as many
    key/value heads as query heads."""
    config = getattr(model, "config", None)
    if type(model).__name__ != "LlamaForCausalLM" or config is None:
        return False
    rope = getattr(config, "rope_parameters", None) or {}
    return (model.device.type == "cpu" and model.dtype == torch.float32 and not torch.is_autocast_enabled("cpu")
            and config._attn_implementation == "sdpa" and rope.get("rope_type", "default") == "default"
            and not config.attention_bias and not config.mlp_bias and config.hidden_act == "silu"
            and config.num_key_value_heads == config.num_attention_heads
            and getattr(config, "pretraining_tp", 1) == 1)


class LlamaStep:
    """A Llama decode step on a preallocated KV cache (see the module docstring).

    Args:
        model: a ``LlamaForCausalLM`` for which :func:`lean_llama_applies`.
        cache: the prefill's KV cache of the distinct prompts.
        rows: ``[B]`` the prompt of each generating row (an index into the cache's batch).
        width: the prefill's width (its columns are the first ``width`` of the cache).
        max_new_tokens: the most tokens each row will be fed.
    """

    def __init__(self, model, cache, rows: torch.Tensor, width: int, max_new_tokens: int):
        body, config = model.model, model.config
        self.heads = config.num_attention_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.embed = body.embed_tokens.weight
        self.norm = (body.norm.weight, body.norm.variance_epsilon)
        self.head = model.lm_head.weight
        self.scaling = body.layers[0].self_attn.scaling
        self.layers = []
        for layer in body.layers:
            attn, mlp = layer.self_attn, layer.mlp
            self.layers.append((
                (layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon),
                torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]), attn.o_proj.weight,
                (layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon),
                torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), mlp.down_proj.weight))
        total = width + max_new_tokens
        self.keys, self.values = [], []
        for layer in cache.layers:
            shape = (len(rows), self.heads, total, self.head_dim)
            keys, values = layer.keys.new_empty(shape), layer.values.new_empty(shape)
            keys[:, :, :width] = layer.keys[rows]
            values[:, :, :width] = layer.values[rows]
            self.keys.append(keys)
            self.values.append(values)
        rotary = body.rotary_emb
        freqs = torch.arange(total, dtype=torch.float32)[:, None] * rotary.inv_freq.to(torch.float32)
        angles = torch.cat((freqs, freqs), dim=-1)
        self.cos = angles.cos() * rotary.attention_scaling
        self.sin = angles.sin() * rotary.attention_scaling
        self.length = width

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` of the cache (the rows still generating); only its filled columns are copied."""
        self.keys = [self._rows_of(k, rows) for k in self.keys]
        self.values = [self._rows_of(v, rows) for v in self.values]

    def _rows_of(self, cache: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        out = cache.new_empty((len(rows), *cache.shape[1:]))
        out[:, :, :self.length] = cache[rows, :, :self.length]
        return out

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return (x * cos) + (torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin)

    def __call__(self, tokens: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        rows, heads, dim, column = len(tokens), self.heads, self.head_dim, self.length
        hidden = F.embedding(tokens[:, None], self.embed)
        cos, sin = self.cos[positions][:, None, None, :], self.sin[positions][:, None, None, :]
        mask = None if bool(attention_mask.all()) else attention_mask.bool()[:, None, None, :]
        for layer, keys, values in zip(self.layers, self.keys, self.values):
            (norm1, eps1), qkv_weight, o_weight, (norm2, eps2), gate_up_weight, down_weight = layer
            qkv = F.linear(F.rms_norm(hidden, (hidden.shape[-1],), norm1, eps1), qkv_weight).view(rows, 1, 3, heads, dim)
            query = self._rotate(qkv[:, :, 0].transpose(1, 2), cos, sin)
            keys[:, :, column] = self._rotate(qkv[:, :, 1].transpose(1, 2), cos, sin)[:, :, 0]
            values[:, :, column] = qkv[:, 0, 2]
            attended = F.scaled_dot_product_attention(query, keys[:, :, :column + 1], values[:, :, :column + 1],
                                                      attn_mask=mask, scale=self.scaling)
            hidden = hidden + F.linear(attended.transpose(1, 2).reshape(rows, 1, -1), o_weight)
            gate, up = F.linear(F.rms_norm(hidden, (hidden.shape[-1],), norm2, eps2), gate_up_weight).chunk(2, dim=-1)
            hidden = hidden + F.linear(F.silu(gate) * up, down_weight)
        self.length += 1
        hidden = F.rms_norm(hidden, (hidden.shape[-1],), *self.norm)
        return F.linear(hidden, self.head)[:, -1, :]


def decode_step(model, prefill: Any, rows: torch.Tensor, width: int, max_new_tokens: int):
    """The decode step for ``model`` after a prefill (its output ``prefill``; ``rows`` maps each generating row to
    its prompt in the prefill batch, ``width`` is the prefill's width).

    The lean step also needs a float32 cache: a prefill that ran under an autocast of its own (Accelerate wraps a
    mixed-precision model's ``forward`` in one, as TRL's ``bf16=True`` on a CPU does) leaves bf16 keys and values,
    which the model's own forward, wrapped the same way, continues from."""
    cache = cache_of(prefill)
    float32_cache = all(layer.keys.dtype == layer.values.dtype == torch.float32 for layer in cache.layers)
    if float32_cache and lean_llama_applies(model):
        return LlamaStep(model, cache, rows, width, max_new_tokens)
    if len(rows) != len(prefill.logits):  # repeated prompts were prefilled once
        cache.batch_select_indices(rows)
    return ModelStep(model, cache)
