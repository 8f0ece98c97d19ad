"""cross_logprobs (KV-cache reuse) against the one-pass-per-pair reference on a tiny random Llama."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from ragen2.metrics import cross_logprobs, naive_cross_logprobs
from ragen2.metrics.scoring import PairScorer

VOCAB = 100


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg).eval()


def _random_ids(rng, lengths):
    return [rng.integers(0, VOCAB, n).tolist() for n in lengths]


@pytest.fixture(scope="module")
def reference_case(tiny_model):
    """Prompts of different lengths, reasonings of different lengths, and the naive matrix (once)."""
    rng = np.random.default_rng(0)
    prompts = _random_ids(rng, [5, 17, 1, 40])
    reasonings = _random_ids(rng, [1, 3, 8, 12, 2, 20, 7])
    slow, slow_lengths = naive_cross_logprobs(tiny_model, None, prompts, reasonings)
    return prompts, reasonings, slow, slow_lengths


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_matches_naive_reference(tiny_model, reference_case, batch_size):
    prompts, reasonings, slow, slow_lengths = reference_case
    fast, lengths = cross_logprobs(tiny_model, None, prompts, reasonings, batch_size=batch_size)
    assert fast.shape == (7, 4) and fast.dtype == np.float64
    assert lengths.tolist() == [1, 3, 8, 12, 2, 20, 7] and slow_lengths.tolist() == lengths.tolist()
    assert np.all(fast < 0)
    np.testing.assert_allclose(fast, slow, atol=1e-4, rtol=0)


def test_single_pair_by_hand(tiny_model):
    x, z = [3, 14, 15, 92], [65, 35, 89]
    fast, _ = cross_logprobs(tiny_model, None, [x], [z])
    with torch.no_grad():
        logp = torch.log_softmax(tiny_model(torch.tensor([x + z])).logits[0].double(), dim=-1)
    by_hand = sum(float(logp[len(x) - 1 + t, z[t]]) for t in range(len(z)))
    assert fast[0, 0] == pytest.approx(by_hand, abs=1e-4)


def test_each_prompt_is_encoded_once(tiny_model):
    rng = np.random.default_rng(1)
    prompts = _random_ids(rng, [30, 31, 32])
    reasonings = _random_ids(rng, [4] * 10)
    widths = []
    hook = tiny_model.model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape), with_kwargs=True)
    try:
        cross_logprobs(tiny_model, None, prompts, reasonings, batch_size=4)
    finally:
        hook.remove()
    prompt_passes = [s for s in widths if s[1] >= 30]
    assert [s[1] for s in prompt_passes] == [30, 31, 32] and all(s[0] == 1 for s in prompt_passes)
    assert sorted(s[0] for s in widths if s[1] < 30) == [2] + [4] * 7  # 30 (prompt, reasoning) rows, 4 a pass


def test_a_shared_scorer_scores_each_pair_once_across_calls(tiny_model):
    rng = np.random.default_rng(4)
    a, b, c = _random_ids(rng, [20, 22, 21])
    z1, z2, z3 = _random_ids(rng, [5, 3, 7])
    scorer = PairScorer(tiny_model, batch_size=64)
    widths = []
    hook = tiny_model.model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        first, _ = scorer([a, b], [z1, z2, z1])
        second, _ = scorer([b, c, a], [z2, z3])
    finally:
        hook.remove()
    # prompts a, b, then c; reasoning rows: 2 x 2 pairs, then the 4 new ones of (b, c, a) x (z2, z3): the three
    # with z3 (7 tokens) in one pass, (c, z2) in another (3 tokens, under half as long)
    assert widths == [(1, 20), (1, 22), (4, 4), (1, 21), (3, 6), (1, 2)]
    np.testing.assert_array_equal(first[0], first[2])  # a repeated reasoning is one row of scores
    assert second[0, 0] == first[1, 1] and second[0, 2] == first[1, 0]  # (b, z2) and (a, z2) kept
    slow, _ = naive_cross_logprobs(tiny_model, None, [b, c, a], [z2, z3])
    np.testing.assert_allclose(second, slow, atol=1e-4, rtol=0)


def test_repeated_prompts_are_scored_once_with_identical_columns(tiny_model):
    rng = np.random.default_rng(2)
    a, b = _random_ids(rng, [30, 33])
    prompts = [a, b, a, a, b]
    reasonings = _random_ids(rng, [3, 6, 2, 9])
    widths = []
    hook = tiny_model.model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape), with_kwargs=True)
    try:
        fast, _ = cross_logprobs(tiny_model, None, prompts, reasonings, batch_size=4)
    finally:
        hook.remove()
    assert [s[1] for s in widths if s[1] >= 30] == [30, 33]  # one pass per distinct prompt
    for j, first in ((2, 0), (3, 0), (4, 1)):
        np.testing.assert_array_equal(fast[:, j], fast[:, first])
    slow, _ = naive_cross_logprobs(tiny_model, None, prompts, reasonings)
    np.testing.assert_allclose(fast, slow, atol=1e-4, rtol=0)


def test_string_inputs_use_the_tokenizer_without_special_tokens(tiny_model):
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<bos>", "<unk>"] + [f"w{i}" for i in range(VOCAB - 2)]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<bos>", unk_token="<unk>")
    prompts = ["w1 w2 w3", "w9 w8"]
    reasonings = ["w5 w6", "w7"]
    from_text, _ = cross_logprobs(tiny_model, tok, prompts, reasonings)
    from_ids, _ = cross_logprobs(tiny_model, None, [[3, 4, 5], [11, 10]], [[7, 8], [9]])
    np.testing.assert_array_equal(from_text, from_ids)


def test_model_mode_is_restored(tiny_model):
    tiny_model.train()
    cross_logprobs(tiny_model, None, [[1, 2]], [[3]])
    assert tiny_model.training
    tiny_model.eval()


@pytest.mark.parametrize("prompts,reasonings,kwargs,match", [
    ([[1, 2]], [[]], {}, "reasonings\\[0\\] is empty"),
    ([[]], [[1]], {}, "prompts\\[0\\] is empty"),
    (["text"], [[1]], {}, "no tokenizer"),
    ([[1]], [[1]], {"batch_size": 0}, "batch_size"),
    ([[1]], [[1]], {"temperature": 0.0}, "temperature"),
])
def test_bad_inputs(tiny_model, prompts, reasonings, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cross_logprobs(tiny_model, None, prompts, reasonings, **kwargs)


def test_the_reasoning_pass_writes_after_the_prompts_in_place():
    from ragen2.metrics.scoring import _PromptsThenReasonings

    keys, values = torch.zeros(3, 2, 7, 4), torch.zeros(3, 2, 7, 4)
    prompt_k, prompt_v = torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)
    keys[:, :, :4], values[:, :, :4] = prompt_k, prompt_v
    layer = _PromptsThenReasonings(keys, values, filled=4)
    assert layer.get_seq_length() == 4 and layer.get_mask_sizes(3) == (7, 0)
    new_k, new_v = torch.randn(3, 2, 3, 4), torch.randn(3, 2, 3, 4)
    k, v = layer.update(new_k, new_v)
    # What a concatenating cache would return, contiguous, and in the preallocated buffers (no copy made).
    assert torch.equal(k, torch.cat([prompt_k, new_k], dim=-2)) and torch.equal(v, torch.cat([prompt_v, new_v], dim=-2))
    assert k.is_contiguous() and k.data_ptr() == keys.data_ptr() and v.data_ptr() == values.data_ptr()
    with pytest.raises(ValueError, match="8 positions do not fit this cache's 7"):
        layer.update(new_k[:, :, :1], new_v[:, :, :1])
