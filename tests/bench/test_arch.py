"""The paper's architectures: parameter counts as published, a model of that shape built without weights."""

import torch

from ragen2.bench.arch import QWEN25_05B, QWEN25_3B, TINY, build_random_model


def test_parameter_counts_match_the_published_sizes():
    assert QWEN25_3B.num_params() == 3_085_938_688       # "3.09B" on the model card
    assert QWEN25_05B.num_params() == 494_032_768       # "0.49B"
    assert (QWEN25_3B.head_dim, QWEN25_3B.kv_dim) == (128, 256)


def test_random_model_has_the_architecture_and_counts_as_computed():
    model = build_random_model(TINY, "cpu", seed=3)
    config = model.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_key_value_heads) == (64, 2, 2)
    assert config.tie_word_embeddings and not model.training
    assert sum(p.numel() for p in model.parameters()) == TINY.num_params()
    assert all(p.dtype == torch.float32 for p in model.parameters())
    again = build_random_model(TINY, "cpu", seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
