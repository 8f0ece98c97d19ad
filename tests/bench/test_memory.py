"""The memory estimate: activation counts checked against the tensors autograd saves, phases and the doc table."""

import pytest
import torch

from ragen2.bench.arch import QWEN25_05B, QWEN25_3B, TINY, build_random_model
from ragen2.bench.memory import GB, PAPER_SHAPE, activation_bytes, estimate_memory, main, memory_table


def _saved_bytes_per_token(precision: str) -> float:
    """Bytes autograd saves per token in a tiny Qwen2's body (the difference of two lengths: weights cancel)."""
    model = build_random_model(TINY, "cpu")

    def saved(tokens: int) -> int:
        storages: dict = {}

        def pack(t):
            if not (t.requires_grad and t.is_leaf):
                storages[(t.untyped_storage().data_ptr(), t.dtype)] = t.untyped_storage().nbytes()
            return t

        region = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                  else torch.autocast("cpu", enabled=False))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), region:
            model.model(input_ids=torch.randint(0, 500, (1, tokens)), use_cache=False)
        return sum(storages.values())

    return (saved(512) - saved(256)) / 256


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_activation_count_matches_what_autograd_saves(precision):
    measured = _saved_bytes_per_token(precision)
    estimate = activation_bytes(TINY, 1, precision, checkpointing=False, expanded_kv=False)  # no mask: GQA kernel
    assert estimate == pytest.approx(measured, rel=0.03)


def test_components_and_phases_move_the_right_way():
    base = estimate_memory(QWEN25_3B, precision="bf16", checkpointing=True, algo="grpo")
    no_ckpt = estimate_memory(QWEN25_3B, precision="bf16", checkpointing=False, algo="grpo")
    fp32 = estimate_memory(QWEN25_3B, precision="fp32", checkpointing=False, algo="grpo")
    ppo = estimate_memory(QWEN25_3B, precision="bf16", checkpointing=True, algo="ppo")
    kl = estimate_memory(QWEN25_3B, precision="bf16", checkpointing=True, reference=True)
    vllm = estimate_memory(QWEN25_3B, precision="bf16", checkpointing=True, rollout="vllm", vllm_share=0.3)
    c = base.components
    assert c["actor weights (fp32 masters)"] == 4 * QWEN25_3B.num_params()
    assert c["actor AdamW moments (fp32)"] == 2 * c["actor weights (fp32 masters)"]
    assert no_ckpt.components["activations, one micro-batch"] > 8 * c["activations, one micro-batch"]
    assert fp32.components["activations, one micro-batch"] > no_ckpt.components["activations, one micro-batch"]
    assert fp32.components["bf16 weight casts (autocast)"] == 0
    assert ppo.peak > base.peak and "critic update" in ppo.phases and "critic update" not in base.phases
    assert kl.components["KL reference"] == 2 * QWEN25_3B.num_params()
    assert vllm.components["vLLM engine"] == pytest.approx(0.3 * 141 * GB)
    assert vllm.components["KV cache, HF generation"] == 0
    assert base.peak == max(base.phases.values()) and base.peak_phase == "actor update"
    small = estimate_memory(QWEN25_05B, algo="ppo")
    assert small.peak < ppo.peak
    with pytest.raises(ValueError, match="precision"):
        estimate_memory(QWEN25_3B, precision="fp8")


def test_paper_shape_is_the_papers():
    s = PAPER_SHAPE
    assert (s.rows, s.turns, s.response_tokens) == (128, 5, 400)
    assert s.context_tokens == 3600 and s.seq_len == 4000 and s.trained_tokens == 2000


def test_doc_table_renders(capsys):
    table = memory_table("hf")
    assert table.startswith("| GB |") and "**peak**" in table and "PPO, bf16, ckpt" in table
    assert main(["--rollout", "vllm"]) == 0
    assert "vLLM engine" in capsys.readouterr().out
