"""Architecture sizes of the paper's policies, so that models of that shape can be built without their weights.

:data:`QWEN25_3B` and :data:`QWEN25_05B` hold the model cards' ``config.json`` values (``Qwen/Qwen2.5-3B`` and
``Qwen/Qwen2.5-0.5B`` on the Hugging Face Hub): the base models the paper trains. :func:`build_random_model` makes
a randomly initialised ``Qwen2ForCausalLM`` of that shape directly on a device (the GPU check needs the shape,
not the weights, and the machine it runs on has no network). :data:`TINY` is a small Qwen2 for CPU tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Arch:
    """The sizes of a Qwen2-family decoder (names as in its ``config.json``)."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    rope_theta: float
    max_position_embeddings: int
    rms_norm_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def kv_dim(self) -> int:
        """Width of the K (and of the V) projection: KV heads x head dim."""
        return self.num_key_value_heads * self.head_dim

    def layer_params(self) -> int:
        """Parameters of one decoder layer: q/k/v with biases, o without, SwiGLU MLP, two RMSNorm weights."""
        h, kv, i = self.hidden_size, self.kv_dim, self.intermediate_size
        attention = (h * h + h) + 2 * (h * kv + kv) + h * h
        return attention + 3 * h * i + 2 * h

    def num_params(self) -> int:
        """All parameters (the output head counted once when tied to the embedding)."""
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embed
        return embed + head + self.num_hidden_layers * self.layer_params() + self.hidden_size

    def body_params(self) -> int:
        """Parameters of the body without the output head (what the PPO critic keeps, plus its 1-wide head)."""
        return self.vocab_size * self.hidden_size + self.num_hidden_layers * self.layer_params() + self.hidden_size

    def hf_config(self, **overrides):
        """The ``transformers.Qwen2Config`` of this shape (RoPE given as ``rope_parameters``, transformers 5)."""
        from transformers import Qwen2Config

        kwargs = dict(hidden_size=self.hidden_size, num_hidden_layers=self.num_hidden_layers,
                      num_attention_heads=self.num_attention_heads, num_key_value_heads=self.num_key_value_heads,
                      intermediate_size=self.intermediate_size, vocab_size=self.vocab_size,
                      tie_word_embeddings=self.tie_word_embeddings, max_position_embeddings=self.max_position_embeddings,
                      rms_norm_eps=self.rms_norm_eps, use_sliding_window=False, attention_dropout=0.0,
                      rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta})
        kwargs.update(overrides)
        return Qwen2Config(**kwargs)


QWEN25_3B = Arch(name="qwen2.5-3b", hidden_size=2048, num_hidden_layers=36, num_attention_heads=16,
                 num_key_value_heads=2, intermediate_size=11008, vocab_size=151936, tie_word_embeddings=True,
                 rope_theta=1_000_000.0, max_position_embeddings=32768)
"""Qwen/Qwen2.5-3B, the model card's config.json values: 3.09 B parameters."""

QWEN25_05B = Arch(name="qwen2.5-0.5b", hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True,
                  rope_theta=1_000_000.0, max_position_embeddings=32768)
"""Qwen/Qwen2.5-0.5B, the model card's config.json values: 0.49 B parameters."""

TINY = Arch(name="tiny", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=512, tie_word_embeddings=True, rope_theta=10_000.0,
            max_position_embeddings=512)
"""A small Qwen2 (about 0.1 M parameters) for running the GPU check's code on a CPU."""

ARCHS = {a.name: a for a in (QWEN25_3B, QWEN25_05B, TINY)}


def build_random_model(arch: Arch, device: torch.device | str, *, seed: int = 0, dtype: torch.dtype = torch.float32):
    """A randomly initialised ``Qwen2ForCausalLM`` of ``arch``, created on ``device`` in ``dtype``, eval mode."""
    from transformers import Qwen2ForCausalLM

    config = arch.hf_config()
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(seed)
        if torch.device(device).type == "cuda":
            torch.cuda.manual_seed(seed)
        model = Qwen2ForCausalLM(config).to(dtype)
    model.eval()
    return model
