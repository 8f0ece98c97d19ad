"""GPU memory of a ragen2 training step, estimated by component from the architecture and the batch shape.

``python -m ragen2.bench.memory`` prints the tables of ``docs/paper_profile.md``; :func:`estimate_memory` is the
arithmetic. These are **estimates** (counts of the tensors each part of the step keeps alive, under stated
assumptions), not measurements; ``python -m ragen2.bench --gpu`` prints the measured peaks beside them.

What is counted (bytes; ``N`` parameters, ``H`` hidden size, ``I`` MLP width, ``V`` vocabulary, ``b`` bytes per
value of the compute dtype: 4 for fp32, 2 under bf16/fp16 autocast):

- trained model: float32 weights ``4N``, gradients ``4N`` (freed after each update), AdamW's two moments ``8N``;
  under autocast, the bf16 casts of the weights autograd keeps for the backward (``2N``);
- activations of one micro-batch, per token and decoder layer: the two RMSNorms' float32 input and normalised
  value (``2 x 8H``; the residual stream stays float32 under autocast) and, in fp32, their output (``2 x 4H``),
  under autocast the compute-dtype casts of the norm outputs for q, k, v, gate and up (``10H``), attention's q,
  k, v and output (``4H b``: with a padding mask SDPA gets K and V expanded to every query head), and the MLP's
  gate, SiLU, up and product (``4I b``); with activation checkpointing, only each layer's float32 input (``4H``)
  plus one layer recomputed with its gradients (``2 x`` the per-layer figure). On a tiny Qwen2 these counts
  match the tensors autograd saves to within a few percent (``tests/bench/test_memory.py``);
- logits: from the first trained column to the end of each row (``logits_to_keep``), ``V`` values per column in
  the compute dtype, plus the float32 log-softmax and probabilities saved for the backward (``8V``) and their
  gradient (``bV``); the passes without gradient keep the logits and one 4-row float32 chunk;
- the PPO critic: the body without the LM head, trained like the actor (its activations without logits);
- the KL reference (only with ``kl_coef > 0``): weights in ``policy.dtype``;
- generation: with the HF backend the KV cache of every row at its longest context (K float32: RoPE promotes it
  under autocast with float32 weights; V in the compute dtype) and the autocast weight casts; with vLLM, the
  engine's fixed share of the GPU (``rollout.vllm_gpu_memory_utilization``);
- 2 GB of CUDA context and allocator slack.

The peak is the largest of four phases: generation, the no-gradient log-prob/value passes, the critic update
and the actor update (between them the gradients are freed; the AdamW moments stay).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace

from ragen2.bench.arch import ARCHS, QWEN25_05B, QWEN25_3B, Arch

GB = 1e9
SLACK_BYTES = 2 * GB
"""CUDA context and allocator fragmentation, a round figure."""
LOGIT_CHUNK_ROWS = 4
"""Rows per float32 log-softmax chunk (:func:`ragen2.trainer.losses.logprobs_and_entropy`)."""


@dataclass(frozen=True)
class BatchShape:
    """The token layout of one training step: ``groups x group_size`` multi-turn rows.

    A row is the first prompt (untrained), then ``turns`` responses of ``response_tokens`` (trained), the later
    ones each after a user message of ``obs_tokens`` (reward and state, untrained). The default is the paper's:
    8 x 16 rollouts, 5 turns x 400 new tokens, the last turn's prompt at the 3,600-token context cap.
    """

    groups: int = 8
    group_size: int = 16
    prompt_tokens: int = 1600
    turns: int = 5
    response_tokens: int = 400
    obs_tokens: int = 100
    generate_turns: int = 5
    """Turns the rollout generates (a real run: all; the GPU check generates the first and reuses it)."""
    micro_batch: int = 4
    """Rows per forward/backward of the updates (``trainer.micro_batch_size``)."""
    logprob_micro_batch: int = 8
    """Rows per forward of the no-gradient passes (``trainer.logprob_micro_batch_size``)."""
    mini_batch: int = 32
    """Rows per optimiser step (``trainer.mini_batch_size``)."""

    @property
    def rows(self) -> int:
        return self.groups * self.group_size

    @property
    def seq_len(self) -> int:
        """Tokens per row."""
        return self.prompt_tokens + self.turns * self.response_tokens + (self.turns - 1) * self.obs_tokens

    @property
    def trained_tokens(self) -> int:
        return self.turns * self.response_tokens

    @property
    def logit_columns(self) -> int:
        """Columns from the first trained token to the end (where the head and the log-softmax run)."""
        return self.seq_len - self.prompt_tokens

    @property
    def context_tokens(self) -> int:
        """The last generated turn's prompt length (at most the context cap)."""
        return self.prompt_tokens + (self.generate_turns - 1) * (self.response_tokens + self.obs_tokens)

    @property
    def generation_tokens(self) -> int:
        """Longest sequence during generation: the last generated turn's prompt + its response."""
        return self.context_tokens + self.response_tokens


PAPER_SHAPE = BatchShape()
PHASES = ("generation", "log-prob and value passes", "critic update", "actor update")
"""The phases of a step, in order; the peak is the largest."""


def layer_activation_bytes(arch: Arch, precision: str, *, expanded_kv: bool = True) -> int:
    """Bytes one decoder layer keeps for the backward pass, per token, without checkpointing.

    ``expanded_kv``: attention saves K and V expanded to every query head, as the SDPA path with a padding mask
    does (rows of different lengths); without a mask, transformers' GQA-aware call saves them at KV width.
    """
    h, i = arch.hidden_size, arch.intermediate_size
    kv = h if expanded_kv else arch.kv_dim
    if precision == "fp32":
        norms = 2 * 12 * h        # both RMSNorms: input, normalised value, output (the next matmuls' input)
        attention = 4 * (2 * h + 2 * kv)  # q, k, v, SDPA output (o_proj's input is a view of it)
        mlp = 4 * 4 * i           # gate, SiLU(gate), up, their product
        return norms + attention + mlp
    norms = 2 * 8 * h             # the residual stream stays float32: input and normalised value of both norms
    casts = 5 * 2 * h             # compute-dtype casts of the norm outputs for q, k, v, gate and up
    attention = 2 * (2 * h + 2 * kv)
    mlp = 4 * 2 * i
    return norms + casts + attention + mlp


def activation_bytes(arch: Arch, tokens: int, precision: str, checkpointing: bool, *, expanded_kv: bool = True) -> int:
    """Saved activations of ``tokens`` tokens through the whole body and the final norm."""
    per_layer = layer_activation_bytes(arch, precision, expanded_kv=expanded_kv)
    outside = 12 * arch.hidden_size  # final norm's input and normalised value, the head's input
    if checkpointing:
        kept = arch.num_hidden_layers * 4 * arch.hidden_size  # each layer's float32 input
        return tokens * (kept + outside + 2 * per_layer)     # + one layer recomputed, with its gradients
    return tokens * (arch.num_hidden_layers * per_layer + outside)


def logit_bytes(arch: Arch, rows: int, columns: int, precision: str, *, with_grad: bool) -> int:
    """Logits and the float32 log-softmax of ``rows x columns`` positions over the vocabulary."""
    b = 4 if precision == "fp32" else 2
    v = arch.vocab_size
    chunk = min(rows, LOGIT_CHUNK_ROWS) * columns * v
    if with_grad:
        return rows * columns * v * (2 * b + 8) + chunk * 4
    return rows * columns * v * b + chunk * 12


def kv_cache_bytes(arch: Arch, sequences: int, tokens: int, precision: str) -> int:
    """HF-backend KV cache: K in float32 (RoPE promotes it; float32 weights), V in the compute dtype."""
    v_bytes = 4 if precision == "fp32" else 2
    return sequences * tokens * arch.num_hidden_layers * arch.kv_dim * (4 + v_bytes)


@dataclass(frozen=True)
class MemoryEstimate:
    """Components and phase totals of one training step, in bytes."""

    components: dict[str, float]
    phases: dict[str, float]
    settings: dict[str, object] = field(default_factory=dict)

    @property
    def peak(self) -> float:
        return max(self.phases.values())

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=self.phases.get)


def estimate_memory(arch: Arch, shape: BatchShape = PAPER_SHAPE, precision: str = "bf16",
                    checkpointing: bool = True, *, algo: str = "grpo", reference: bool = False,
                    reference_dtype: str = "bfloat16", rollout: str = "hf", vllm_share: float = 0.3,
                    gpu_bytes: float = 141 * GB) -> MemoryEstimate:
    """The memory of one step of ``algo`` on ``arch`` at ``shape`` (see the module docstring for the counts).

    Args:
        arch: the policy's architecture (:mod:`ragen2.bench.arch`).
        shape: the batch shape.
        precision: ``fp32`` | ``bf16`` | ``fp16`` (``trainer.precision``, resolved); weights are float32 masters.
        checkpointing: ``trainer.gradient_checkpointing``.
        algo: ``grpo`` (the GRPO family: no critic) or ``ppo`` (adds the critic).
        reference: a frozen KL reference is loaded (``kl_coef > 0``), in ``reference_dtype``.
        rollout: ``hf`` (generation with the actor itself) or ``vllm`` (an engine holding ``vllm_share`` of
            ``gpu_bytes``).
    """
    if precision not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"precision must be fp32, bf16 or fp16, got {precision!r}")
    if algo not in ("grpo", "ppo") or rollout not in ("hf", "vllm"):
        raise ValueError(f"algo must be grpo or ppo and rollout hf or vllm, got {algo!r}, {rollout!r}")
    n, nb = arch.num_params(), arch.body_params() + arch.hidden_size + 1
    autocast = precision != "fp32"
    critic = algo == "ppo"
    tokens_update = shape.micro_batch * shape.seq_len
    c = {
        "actor weights (fp32 masters)": 4 * n,
        "actor gradients (fp32)": 4 * n,
        "actor AdamW moments (fp32)": 8 * n,
        "bf16 weight casts (autocast)": 2 * n if autocast else 0,
        "activations, one micro-batch": activation_bytes(arch, tokens_update, precision, checkpointing),
        "logits, one micro-batch": logit_bytes(arch, shape.micro_batch, shape.logit_columns, precision,
                                               with_grad=True),
        "logits, no-gradient pass": logit_bytes(arch, shape.logprob_micro_batch, shape.logit_columns, precision,
                                                with_grad=False),
        "critic weights + grads + AdamW": 16 * nb if critic else 0,
        "critic activations, one micro-batch": (activation_bytes(arch, tokens_update, precision, checkpointing)
                                                if critic else 0),
        "KL reference": n * (4 if reference_dtype == "float32" else 2) if reference else 0,
        "KV cache, HF generation": (kv_cache_bytes(arch, shape.rows, shape.generation_tokens, precision)
                                    if rollout == "hf" else 0),
        "vLLM engine": vllm_share * gpu_bytes if rollout == "vllm" else 0,
        "CUDA context + slack": SLACK_BYTES,
    }
    resident_actor = c["actor weights (fp32 masters)"] + c["actor AdamW moments (fp32)"]
    resident_critic = 12 * nb if critic else 0
    fixed = c["KL reference"] + c["vLLM engine"] + c["CUDA context + slack"]
    one_layer = shape.logprob_micro_batch * shape.seq_len * layer_activation_bytes(arch, precision)
    phases = {
        "generation": resident_actor + resident_critic + fixed + c["KV cache, HF generation"]
        + (c["bf16 weight casts (autocast)"] if rollout == "hf" else 0),
        "log-prob and value passes": resident_actor + resident_critic + fixed + c["bf16 weight casts (autocast)"]
        + c["logits, no-gradient pass"] + one_layer,
        "actor update": resident_actor + c["actor gradients (fp32)"] + resident_critic + fixed
        + c["bf16 weight casts (autocast)"] + c["activations, one micro-batch"] + c["logits, one micro-batch"],
    }
    if critic:
        phases["critic update"] = (resident_actor + 16 * nb + fixed + (2 * nb if autocast else 0)
                                   + c["critic activations, one micro-batch"])
    settings = {"arch": arch.name, "precision": precision, "checkpointing": checkpointing, "algo": algo,
                "reference": reference, "rollout": rollout, "rows": shape.rows, "seq_len": shape.seq_len,
                "micro_batch": shape.micro_batch}
    return MemoryEstimate(components={k: float(v) for k, v in c.items()},
                          phases={k: float(v) for k, v in phases.items()}, settings=settings)


# ---------------------------------------------------------------------------------------------
# The documentation's tables
# ---------------------------------------------------------------------------------------------
DOC_COLUMNS = {
    "GRPO, fp32, no ckpt": dict(arch=QWEN25_3B, precision="fp32", checkpointing=False, algo="grpo"),
    "GRPO, bf16, no ckpt": dict(arch=QWEN25_3B, precision="bf16", checkpointing=False, algo="grpo"),
    "GRPO, bf16, ckpt": dict(arch=QWEN25_3B, precision="bf16", checkpointing=True, algo="grpo"),
    "PPO, bf16, ckpt": dict(arch=QWEN25_3B, precision="bf16", checkpointing=True, algo="ppo"),
    "PPO, bf16, ckpt, 0.5B": dict(arch=QWEN25_05B, precision="bf16", checkpointing=True, algo="ppo"),
}
"""The configurations of the documentation's table (Qwen2.5-3B unless named)."""


def _gb(x: float) -> str:
    return f"{x / GB:.1f}"


def memory_table(rollout: str = "hf", shape: BatchShape = PAPER_SHAPE, columns: dict | None = None,
                 vllm_share: float = 0.3) -> str:
    """A Markdown table: one column per configuration, one row per component and per phase total (GB)."""
    import pandas as pd

    from ragen2.markdown import to_markdown

    columns = columns or DOC_COLUMNS
    estimates = {name: estimate_memory(shape=shape, rollout=rollout, vllm_share=vllm_share, **kw)
                 for name, kw in columns.items()}
    first = next(iter(estimates.values()))
    phases = [p for p in PHASES if any(p in e.phases for e in estimates.values())]
    rows = {}
    for part in first.components:
        if rollout == "hf" and part == "vLLM engine" or rollout == "vllm" and part == "KV cache, HF generation":
            continue
        rows[part] = [_gb(e.components[part]) for e in estimates.values()]
    for phase in phases:
        rows[f"**{phase}**"] = [_gb(e.phases[phase]) if phase in e.phases else "-" for e in estimates.values()]
    rows["**peak**"] = [f"**{_gb(e.peak)}**" for e in estimates.values()]
    table = pd.DataFrame(rows, index=list(estimates)).T
    table.index.name = "GB"
    return to_markdown(table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragen2.bench.memory", description=__doc__.split("\n\n")[0])
    p.add_argument("--rollout", choices=("hf", "vllm", "both"), default="both")
    p.add_argument("--arch", choices=sorted(ARCHS), default=None,
                   help="one architecture's GRPO/PPO x precision x checkpointing grid instead of the doc's columns")
    p.add_argument("--micro-batch", type=int, default=PAPER_SHAPE.micro_batch, help="trainer.micro_batch_size")
    p.add_argument("--logprob-micro-batch", type=int, default=PAPER_SHAPE.logprob_micro_batch,
                   help="trainer.logprob_micro_batch_size")
    p.add_argument("--vllm-share", type=float, default=0.3, help="rollout.vllm_gpu_memory_utilization (of 141 GB)")
    args = p.parse_args(argv)
    columns = None
    if args.arch is not None:
        arch = ARCHS[args.arch]
        columns = {f"{algo.upper()}, {prec}, {'ckpt' if ckpt else 'no ckpt'}": dict(
            arch=arch, precision=prec, checkpointing=ckpt, algo=algo)
            for algo in ("grpo", "ppo") for prec in ("fp32", "bf16") for ckpt in (False, True)}
    shape = replace(PAPER_SHAPE, micro_batch=args.micro_batch, logprob_micro_batch=args.logprob_micro_batch)
    print(f"shape: {shape.rows} rows of {shape.seq_len} tokens ({shape.trained_tokens} trained, "
          f"{shape.logit_columns} logit columns), micro-batch {shape.micro_batch}, no-gradient micro-batch "
          f"{shape.logprob_micro_batch}")
    for rollout in (("hf", "vllm") if args.rollout == "both" else (args.rollout,)):
        label = (f"HF-backend generation (KV cache of {shape.rows} rows at {shape.generation_tokens} tokens)"
                 if rollout == "hf" else f"vLLM rollouts (engine at {args.vllm_share:g} of 141 GB)")
        print(f"\n{label}\n")
        print(memory_table(rollout, shape, columns, vllm_share=args.vllm_share))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
