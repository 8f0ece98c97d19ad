"""The lean Llama decode step against the model's own cached forward: the same logits, bit for bit."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from ragen2.rollout import decode
from ragen2.rollout.backends import HFBackend
from ragen2.rollout.decode import LlamaStep, ModelStep, cache_of, decode_step, lean_llama_applies

STOP = 3


def llama(hidden=32, layers=2, heads=4, vocab=64, **kw) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=256,
                         tie_word_embeddings=True, eos_token_id=STOP, pad_token_id=0, **kw)
    model = LlamaForCausalLM(config)
    model.eval()
    return model


class Tokenizer:
    """The two fields HFBackend reads."""

    pad_token_id = 0
    eos_token_id = STOP

    def get_vocab(self):
        return {"<|im_end|>": STOP}


def left_padded(prompts):
    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    return ids, mask


def steps_logits(model, prompts, rows, tokens_per_step, keeps, lean: bool):
    """Prefill ``prompts``, then feed ``tokens_per_step`` (one tensor per step), keeping ``keeps[i]`` before step
    ``i`` (None: all); returns every step's logits."""
    ids, mask = left_padded(prompts)
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        if lean:
            step = LlamaStep(model, cache_of(out), rows, ids.shape[1], len(tokens_per_step))
        else:
            cache = cache_of(out)
            cache.batch_select_indices(rows)
            step = ModelStep(model, cache)
        mask, nxt = mask[rows], positions[rows, -1] + 1
        logits = []
        for tokens, keep in zip(tokens_per_step, keeps):
            if keep is not None:
                step.keep(keep)
                mask, nxt = mask[keep], nxt[keep]
            mask = torch.cat([mask, mask.new_ones((len(mask), 1))], dim=1)
            logits.append(step(tokens, mask, nxt))
            nxt = nxt + 1
    return logits


@pytest.mark.parametrize("size", [dict(), dict(hidden=128, heads=4, vocab=1024)], ids=["tiny", "cpu_profile"])
@pytest.mark.parametrize("padded", [True, False])
def test_lean_llama_step_gives_the_models_logits_bit_for_bit(size, padded):
    model = llama(**size)
    assert lean_llama_applies(model)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    lengths = [7, 5, 9] if padded else [8, 8, 8]
    prompts = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in lengths]
    rows = torch.tensor([0, 0, 1, 1, 1, 2, 2, 0, 2, 1])
    # 10 rows for three steps, then rows stop (from the middle too): 7, 2 and 1 left
    keeps = [None, None, None, torch.tensor([0, 1, 2, 3, 5, 8, 9]), None, None, torch.tensor([1, 4]), None, None,
             torch.tensor([1]), None]
    live = [10, 10, 10, 7, 7, 7, 2, 2, 2, 1, 1]
    tokens = [torch.randint(4, vocab, (n,), generator=g) for n in live]
    plain = steps_logits(model, prompts, rows, tokens, keeps, lean=False)
    lean = steps_logits(model, prompts, rows, tokens, keeps, lean=True)
    for a, b in zip(plain, lean):
        assert torch.equal(a, b)


def test_the_lean_step_is_only_used_where_it_computes_the_same():
    assert lean_llama_applies(llama())
    assert not lean_llama_applies(llama(attn_implementation="eager"))
    assert not lean_llama_applies(llama(attention_bias=True))
    assert not lean_llama_applies(llama().to(torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not lean_llama_applies(llama())
    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=4, num_key_value_heads=2))
    assert not lean_llama_applies(qwen)
    ids = torch.tensor([[5, 6, 7]])
    with torch.inference_mode():
        out = qwen(input_ids=ids, use_cache=True, logits_to_keep=1)
    assert isinstance(decode_step(qwen, out, torch.tensor([0, 0]), 3, 4), ModelStep)


def test_backend_samples_the_same_tokens_with_either_step(monkeypatch):
    model = llama(hidden=64, vocab=128)
    backend = HFBackend(model, Tokenizer())
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(4, 128, (n,), generator=g).tolist() for n in (6, 9, 6, 4)]
    prompts = [prompts[0], prompts[1], prompts[0], prompts[2], prompts[3], prompts[1]]
    lean = [backend.generate(prompts, 20, 1.0, seed=s) for s in range(4)]
    monkeypatch.setattr(decode, "lean_llama_applies", lambda m: False)
    plain = [backend.generate(prompts, 20, 1.0, seed=s) for s in range(4)]
    assert lean == plain
    assert any(len(x) < 20 for out in plain for x in out)  # some rows stopped early: the cache was cut down


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_sampling_logprobs_are_the_models_logprobs_of_what_was_sampled(temperature):
    model = llama(hidden=64, vocab=16)  # a small vocabulary: the stop token comes up
    backend = HFBackend(model, Tokenizer())
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(4, 16, (n,), generator=g).tolist() for n in (6, 9, 6)]
    prompts = [prompts[0], prompts[1], prompts[0], prompts[2]] * 2
    samples = backend.sample(prompts, 25, temperature, seed=1)
    assert [s.tokens for s in samples] == backend.generate(prompts, 25, temperature, seed=1)
    assert any(s.stop == STOP for s in samples) and any(s.stop is None for s in samples)
    for prompt, s in zip(prompts, samples):
        sampled = s.tokens + ([s.stop] if s.stop is not None else [])
        assert len(s.logprobs) == len(s.entropies) == 1 + len(sampled) and s.temperature == temperature
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + sampled])).logits[0].float() / temperature
        lsm = torch.log_softmax(logits, dim=-1)
        positions = range(len(prompt) - 2, len(prompt) + len(sampled) - 1)
        expected = [float(lsm[p, t]) for p, t in zip(positions, [prompt[-1], *sampled])]
        entropy = [float(-(lsm[p].exp() * lsm[p]).sum()) for p in positions]
        assert s.logprobs == pytest.approx(expected, abs=1e-5)
        assert s.entropies == pytest.approx(entropy, abs=1e-5)
    assert all(s.logprobs is None for s in backend.sample(prompts, 10, 1.0, seed=1, greedy=True))
    assert all(s.logprobs is None for s in HFBackend(model, Tokenizer(), share_prefill=False).sample(
        prompts, 10, 1.0, seed=1))


def test_a_prefill_made_under_autocast_is_continued_by_the_models_own_forward():
    """Accelerate wraps a bf16 model's forward in an autocast of its own (TRL's ``bf16=True`` on a CPU): the prefill's
    cache is bf16 while no autocast is on outside the forward, so the lean float32 step must not take over."""
    model = llama()
    ids, mask = left_padded([[5, 6, 7], [8, 9]])
    rows = torch.tensor([0, 1])
    with torch.inference_mode():
        plain = model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
        assert isinstance(decode_step(model, plain, rows, ids.shape[1], 4), LlamaStep)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
        step = decode_step(model, mixed, rows, ids.shape[1], 4)
        assert isinstance(step, ModelStep)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = step(torch.tensor([11, 12]), torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], 1),
                          torch.tensor([3, 2]))
    assert logits.shape == (2, model.config.vocab_size) and torch.isfinite(logits.float()).all()
