"""The policy: loading any causal LM, and building the tiny local Llama used on CPU.

>>> path = resolve_policy(PolicyConfig(), ["frozenlake"], Path("cache/policies"))  # doctest: +SKIP
>>> model, tokenizer = load_policy(path)                                            # doctest: +SKIP

The tiny policy's tokenizer is a byte-level BPE trained on the environments' own text (system
prompts, observations, expert and template reasoning, answers, turn blocks), so every string
round-trips exactly and the repeated prompt text costs few tokens. Its config is a ``llama`` one on
purpose: transformers 5.24 rebuilds a ``qwen2``-typed local tokenizer as ``Qwen2Tokenizer`` and
corrupts it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from ragen2 import envs
from ragen2.config import PolicyConfig, RolloutConfig, check_policy_source
from ragen2.errors import MissingPathError, first_line
from ragen2.quiet import quiet_unless_terminal
from ragen2.rollout.prompt import CHATML_TEMPLATE

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TAG_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")
CORPUS_EPISODES_PER_ENV = 200
"""Expert episodes per environment in the tokenizer corpus (half with template reasoning)."""
TINY_POLICY_VERSION = 1
"""Bump when the tiny-policy recipe changes, so cached builds are not reused."""

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    return torch.device(device)


def load_policy(name_or_path: str | Path, *, dtype: str = "float32", device: str = "auto"):
    """Load ``(model, tokenizer)``: model in eval mode on the device, tokenizer padding on the left.

    Progress bars and loading reports appear on a terminal only (:mod:`ragen2.quiet`).

    Args:
        name_or_path: A local directory or a Hugging Face model id (offline cache only).
        dtype: ``float32`` | ``bfloat16`` | ``float16``: the dtype the weights are stored in. The trainer loads
            the models it trains in float32 (master weights; ``trainer.precision`` sets their compute) and
            passes ``policy.dtype`` only for copies that are not trained (the KL reference, evaluation).
        device: ``auto`` (CUDA when present) | ``cpu`` | ``cuda``.
    """
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    try:
        with quiet_unless_terminal():  # no "Loading weights" bar in notebook outputs
            tokenizer = AutoTokenizer.from_pretrained(str(name_or_path), padding_side="left")
            model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=_DTYPES[dtype])
    except OSError as e:  # not there, not in the offline cache, unreadable: the user's to fix, in one line
        raise MissingPathError(f"policy {str(name_or_path)!r} cannot be loaded: {first_line(e)}") from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in vocab else tokenizer.eos_token
    model.to(_device(device))
    model.eval()
    return model, tokenizer


# ---------------------------------------------------------------------------------------------
# The tokenizer corpus
# ---------------------------------------------------------------------------------------------
def _split_on(text: str, separators: Iterable[str]) -> list[str]:
    pieces = [text]
    for sep in separators:
        pieces = [part for piece in pieces for part in piece.split(sep)]
    return [p for p in pieces if p]


def env_corpus(env_names: list[str], *, seed: int = 0,
               episodes_per_env: int = CORPUS_EPISODES_PER_ENV) -> list[str]:
    """Texts of the agent loop for ``env_names``: whole expert conversations, grounded and template.

    Each message is given as the chat template lays it out (``role\\ncontent``), cut at the special
    and tag strings (those become single tokens and are not learned by BPE).
    """
    from ragen2.rollout.expert import TEMPLATE_THINKS, expert_episode
    from ragen2.rollout.prompt import resolve_limits

    texts = ["\n", "system\n", "user\n", "assistant\n", *TEMPLATE_THINKS]
    for name in env_names:
        env = envs.make(name)
        limits = resolve_limits(RolloutConfig(), env)
        for i in range(episodes_per_env):
            template = TEMPLATE_THINKS[i % len(TEMPLATE_THINKS)] if i % 2 else None
            episode = expert_episode(env, seed * 1_000_003 + 7_000_000 + i, limits, template_think=template)
            for message in episode.messages:
                texts.append(f"{message['role']}\n{message['content']}")
    return [p for text in texts for p in _split_on(text, SPECIAL_TOKENS + TAG_TOKENS)]


def train_tokenizer(texts: list[str], vocab_size: int, *, split=None, normalizer=None) -> PreTrainedTokenizerFast:
    """A byte-level BPE of ``vocab_size`` tokens (if the corpus allows) with ChatML specials.

    ``split``: the pre-tokeniser that runs before the byte-level step (default: every digit on its own, so
    coordinates copied digit by digit from the state into the reasoning stay single tokens, while everything else
    may merge across spaces and newlines and fixed prompt text is cheap); ``normalizer``: none by default. A tiny
    Qwen2 passes Qwen2's own (``ragen2.repro.dry_run``), so that transformers' rebuild of its tokenizer keeps it.
    """
    base = 256 + len(SPECIAL_TOKENS) + len(TAG_TOKENS)
    if vocab_size < base:
        raise ValueError(f"tokenizer_vocab_size must be >= {base} (bytes + special tokens), got {vocab_size}")
    bpe = Tokenizer(models.BPE())
    if normalizer is not None:
        bpe.normalizer = normalizer
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        split if split is not None else pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(TAG_TOKENS), min_frequency=2,
                                  special_tokens=list(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(texts, trainer=trainer)
    bpe.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left",
        clean_up_tokenization_spaces=False, chat_template=CHATML_TEMPLATE, model_max_length=1 << 30)


def make_tiny_policy(cfg: PolicyConfig, env_names: list[str], out_dir: Path, *, seed: int = 0,
                     extra_texts: Iterable[str] = ()) -> Path:
    """Train a tokenizer on the environments' text and save a randomly initialised tiny Llama.

    Args:
        cfg: Sizes of the tiny model and its tokenizer.
        env_names: Environments whose text the tokenizer is trained on.
        out_dir: Where ``save_pretrained`` writes model and tokenizer (created if missing).
        seed: Seed of the corpus episodes and of the weight initialisation.
        extra_texts: More texts for the tokenizer corpus.

    Returns:
        ``out_dir``.
    """
    unknown = [n for n in env_names if n not in envs.REGISTRY]
    if unknown:
        raise ValueError(f"unknown environment(s) {unknown}; known: {sorted(envs.REGISTRY)}")
    if not env_names and not extra_texts:
        raise ValueError("make_tiny_policy needs env_names or extra_texts to train the tokenizer on")
    texts = env_corpus(list(env_names), seed=seed) + [p for t in extra_texts
                                                      for p in _split_on(t, SPECIAL_TOKENS + TAG_TOKENS)]
    tokenizer = train_tokenizer(texts, cfg.tokenizer_vocab_size)
    vocab = tokenizer.get_vocab()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
        intermediate_size=cfg.intermediate_size, max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<|endoftext|>"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = [vocab["<|im_end|>"], vocab["<|endoftext|>"]]
    model.generation_config.pad_token_id = vocab["<|endoftext|>"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with quiet_unless_terminal():
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    return out_dir


def tiny_policy_key(cfg: PolicyConfig, env_names: list[str], seed: int = 0) -> str:
    """A short hash of everything that shapes the tiny policy (cache key)."""
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("name_or_path", "dtype", "device")}
    blob = json.dumps({"cfg": fields, "envs": sorted(env_names), "seed": seed,
                       "version": TINY_POLICY_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resolve_policy(cfg: PolicyConfig, env_names: list[str], cache_dir: Path) -> Path:
    """A loadable policy path: ``name_or_path`` itself, or (for ``tiny``) a cached tiny build.

    The tiny build is written to a temporary directory and renamed into place, so concurrent callers
    never see a half-written policy.
    """
    if cfg.name_or_path != "tiny":
        check_policy_source(cfg.name_or_path)
        return Path(cfg.name_or_path)  # a hub id such as Qwen/Qwen2.5-3B loads from str(path) as well
    cache_dir = Path(cache_dir)
    target = cache_dir / f"tiny-{tiny_policy_key(cfg, env_names)}"
    if (target / "config.json").exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=cache_dir))
    try:
        make_tiny_policy(cfg, env_names, tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "config.json").exists():  # not a lost race: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
