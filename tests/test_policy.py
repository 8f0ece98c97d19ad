import json

import pytest
import torch

from ragen2 import envs
from ragen2.config import PolicyConfig
from ragen2.policy import TAG_TOKENS, load_policy, make_tiny_policy, resolve_policy, tiny_policy_key
from ragen2.rollout.prompt import render
from tests.rollout._fake_env import NAME, LineEnv, registered

SMALL = PolicyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=512,
                     tokenizer_vocab_size=600)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("tiny")
    with registered():
        make_tiny_policy(SMALL, [NAME], out, seed=0, extra_texts=["an extra text √ with (1,2)"])
    return out


def test_saved_as_llama_with_tied_embeddings(tiny):
    config = json.loads((tiny / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["tie_word_embeddings"] is True
    assert config["hidden_size"] == SMALL.hidden_size and config["num_hidden_layers"] == SMALL.num_layers
    model, tokenizer = load_policy(tiny, device="cpu")
    assert len(tokenizer) == config["vocab_size"] <= SMALL.tokenizer_vocab_size
    assert model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()
    assert not model.training and model.device.type == "cpu"
    assert tokenizer.padding_side == "left" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.eos_token == "<|im_end|>"


def test_special_and_tag_tokens_are_single_tokens(tiny):
    _, tokenizer = load_policy(tiny, device="cpu")
    for token in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", *TAG_TOKENS):
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token
    # tags survive decoding with special tokens skipped (the rollout decodes that way)
    ids = tokenizer("<think>a</think><answer>Up</answer><|im_end|>", add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<think>a</think><answer>Up</answer>"


def test_round_trip_of_env_text(tiny):
    _, tokenizer = load_policy(tiny, device="cpu")
    texts = []
    env = LineEnv()
    for seed in range(20):
        obs, _ = env.reset(seed=seed)
        texts.append(obs)
        while not env.done:
            obs = env.step(envs.expert_action(env))[0]
            texts.append(obs)
    assert any("√" in t for t in texts)
    texts += ["  two  spaces\n\n\ttab (3,4) √ → é 中 never seen", "", "Reward:\n-0.1\n"]
    for text in texts:
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    messages = [{"role": "system", "content": "sys √"}, {"role": "user", "content": texts[0]}]
    rendered = render(tokenizer, messages, generation=True)
    assert tokenizer.decode(tokenizer(rendered, add_special_tokens=False)["input_ids"]) == rendered


def test_env_text_compresses(tiny):
    """Fixed prompt text merges into few tokens; digits stay single tokens."""
    _, tokenizer = load_policy(tiny, device="cpu")
    instruction = LineEnv.instruction
    assert len(tokenizer(instruction, add_special_tokens=False)["input_ids"]) < len(instruction) / 4
    assert [tokenizer.decode([i]) for i in tokenizer("(0,3)", add_special_tokens=False)["input_ids"]
            if tokenizer.decode([i]).isdigit()] == ["0", "3"]


def test_same_seed_same_weights(tmp_path):
    with registered():
        a = make_tiny_policy(SMALL, [NAME], tmp_path / "a", seed=3)
        b = make_tiny_policy(SMALL, [NAME], tmp_path / "b", seed=3)
    ma, ta = load_policy(a, device="cpu")
    mb, tb = load_policy(b, device="cpu")
    assert ta.get_vocab() == tb.get_vocab()
    for pa, pb in zip(ma.parameters(), mb.parameters()):
        assert torch.equal(pa, pb)


def test_resolve_policy_caches_tiny_builds(tmp_path):
    with registered():
        first = resolve_policy(SMALL, [NAME], tmp_path)
        stamp = (first / "config.json").stat().st_mtime_ns
        again = resolve_policy(SMALL, [NAME], tmp_path)
    assert first == again and (again / "config.json").stat().st_mtime_ns == stamp
    assert first.name == f"tiny-{tiny_policy_key(SMALL, [NAME])}"
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temp dirs left behind
    other = PolicyConfig(name_or_path="Qwen/Qwen2.5-3B")
    assert str(resolve_policy(other, [NAME], tmp_path)) == "Qwen/Qwen2.5-3B"


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="dtype"):
        load_policy(tmp_path, dtype="float8")
    with pytest.raises(ValueError, match="unknown environment"):
        make_tiny_policy(SMALL, ["nope"], tmp_path)
    with pytest.raises(ValueError, match="tokenizer_vocab_size"):
        with registered():
            make_tiny_policy(PolicyConfig(tokenizer_vocab_size=100), [NAME], tmp_path)
