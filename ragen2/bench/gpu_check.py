"""The prepared GPU check: ragen2's own PPO and GRPO steps on random-initialised Qwen2.5 models at the paper's shape.

``python -m ragen2.bench --gpu`` (or ``python -m ragen2.bench.gpu_check``) builds, for each architecture in
``--arch`` (default: Qwen2.5-3B, then Qwen2.5-0.5B; sizes in :mod:`ragen2.bench.arch`, no weights needed), a
float32-master actor with activation checkpointing and bf16 autocast, and runs one PPO step (actor + critic) and
then two GRPO steps (the same actor), each at the paper profile's micro-batches for its algorithm
(:data:`PROFILE_MICRO_BATCHES`) and with the paper profile's vLLM share of the GPU held by a placeholder block
(``--vllm-share``, :data:`PROFILE_VLLM_SHARE`: what a colocated engine would keep, so a step that fits only without
it shows as out of memory):

1. rollout: ragen2's HF backend (:class:`ragen2.rollout.backends.HFBackend`, shared prefill per group) samples
   ``response_tokens`` new tokens for every row from its group's synthetic prompt;
2. update batch: multi-turn rows (prompt, then ``turns`` responses with untrained observation tokens between;
   the later turns reuse the generated tokens), random group-varying scores,
   :func:`ragen2.trainer.batch.build_batch`, :func:`ragen2.trainer.update_data.attach_update_targets` (old
   log-probs, values, GAE or group advantages);
3. :func:`ragen2.trainer.critic.update_critic` (PPO) and :func:`ragen2.trainer.actor.update_actor`.

It prints, per step: peak GPU memory (allocated and reserved, the placeholder included) beside
:func:`ragen2.bench.memory.estimate_memory` plus the placeholder, seconds (rollout, update, step), generated tokens per second, and the fraction of the actor's weights that
changed (elements sampled at a fixed stride). It needs only PyTorch, transformers, numpy and PyYAML: no network,
vLLM, TRL, DVC or environments (nothing imports gymnasium). ``--budget-s`` (540 by default) skips the steps that
would not finish in time, so the whole check stays within 10 minutes on one H200; a step that runs out of memory is
reported and the check goes on. ``--shape tiny --arch tiny --device cpu`` runs the same code on a CPU in seconds
(the test suite does).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragen2.bench.arch import ARCHS, Arch, build_random_model
from ragen2.bench.memory import GB, BatchShape, estimate_memory
from ragen2.config import TrainerConfig
from ragen2.model import activation_checkpointing
from ragen2.model.optim import adamw
from ragen2.rollout.backends import HFBackend
from ragen2.rollout.types import Trajectory
from ragen2.trainer.actor import update_actor
from ragen2.trainer.algos import get_preset
from ragen2.trainer.batch import build_batch
from ragen2.trainer.critic import ValueModel, update_critic
from ragen2.trainer.models import Models
from ragen2.trainer.precision import autocast
from ragen2.trainer.update_data import attach_update_targets, trainer_loss_settings

SHAPES = {
    "paper": BatchShape(generate_turns=1),
    "tiny": BatchShape(groups=2, group_size=3, prompt_tokens=12, turns=2, response_tokens=6, obs_tokens=3,
                       generate_turns=1, micro_batch=2, logprob_micro_batch=3, mini_batch=3),
}
"""``--shape`` presets: the paper's (8 x 16 rows of 5 turns x 400 tokens, 4,000 tokens a row), and a tiny one for
CPU tests. Their micro-batch fields apply only with ``--micro-batches shape``."""
PROFILE_MICRO_BATCHES = {"ppo": (1, 2), "grpo": (2, 4)}
"""The paper profile's ``(trainer.micro_batch_size, trainer.logprob_micro_batch_size)`` per algorithm family (PPO
carries the critic, so it takes half the rows; a test keeps these equal to the profile's)."""
PROFILE_VLLM_SHARE = 0.2
"""The paper profile's ``rollout.vllm_gpu_memory_utilization``: the share of the GPU a colocated vLLM engine keeps."""
PRECISION = "bf16"
SAMPLE_ELEMENTS = 4_000_000
"""About this many weight elements are compared before and after a step (a fixed stride through every tensor)."""
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
               "TOKENIZERS_PARALLELISM": "false"}


class StubTokenizer:
    """What the HF backend and the batch builder read from a tokenizer: pad, EOS and the stop-token ids."""

    def __init__(self, vocab_size: int):
        # Qwen2.5's <|endoftext|> and <|im_end|>; the tiny vocabulary's last two ids
        self.pad_token_id = self.eos_token_id = 151643 if vocab_size > 151645 else vocab_size - 2
        self.im_end = 151645 if vocab_size > 151645 else vocab_size - 1

    def get_vocab(self) -> dict[str, int]:
        return {"<|endoftext|>": self.eos_token_id, "<|im_end|>": self.im_end}


def trainer_config(algo: str, shape: BatchShape) -> TrainerConfig:
    """The paper's trainer settings (docs/method.md §6.4) with the memory switches of this check."""
    return TrainerConfig(algo=algo, actor_lr=1e-6, critic_lr=1e-5, mini_batch_size=shape.mini_batch,
                         micro_batch_size=shape.micro_batch, logprob_micro_batch_size=shape.logprob_micro_batch,
                         entropy_coef=0.001, kl_coef=0.0, precision=PRECISION, gradient_checkpointing=True)


def parse_micro_batches(text: str) -> dict[str, tuple[int, int]] | None:
    """``profile`` (:data:`PROFILE_MICRO_BATCHES`), ``shape`` (None: the shape's own fields, for every algorithm)
    or ``ALGO=MICRO/LOGPROB,...`` (``ppo=2/4,grpo=4/8``)."""
    if text == "profile":
        return dict(PROFILE_MICRO_BATCHES)
    if text == "shape":
        return None
    out = dict(PROFILE_MICRO_BATCHES)
    for pair in text.split(","):
        algo, _, sizes = pair.partition("=")
        micro, _, logprob = sizes.partition("/")
        if algo not in PROFILE_MICRO_BATCHES or not (micro.isdigit() and logprob.isdigit()) or "0" in (micro, logprob):
            raise ValueError(f"bad micro-batches {pair!r}: expected ALGO=MICRO/LOGPROB with ALGO in "
                             f"{sorted(PROFILE_MICRO_BATCHES)} and positive sizes, or 'profile' or 'shape'")
        out[algo] = (int(micro), int(logprob))
    return out


def shape_for(algo: str, shape: BatchShape, micro_batches: dict[str, tuple[int, int]] | None) -> BatchShape:
    """``shape`` with ``algo``'s micro-batches (the GRPO family shares GRPO's)."""
    if micro_batches is None:
        return shape
    micro, logprob = micro_batches["ppo" if algo == "ppo" else "grpo"]
    return replace(shape, micro_batch=micro, logprob_micro_batch=logprob)


def parse_shape(text: str) -> BatchShape:
    """``NAME[,key=value...]``: a preset of :data:`SHAPES` with some fields replaced (``paper,micro_batch=4``)."""
    name, *pairs = text.split(",")
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}; known: {sorted(SHAPES)}")
    fields = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key not in BatchShape.__dataclass_fields__ or not value.isdigit():
            raise ValueError(f"bad shape override {pair!r}: expected FIELD=INT with FIELD in "
                             f"{sorted(BatchShape.__dataclass_fields__)}")
        fields[key] = int(value)
    return replace(SHAPES[name], **fields)


# ---------------------------------------------------------------------------------------------
# One step
# ---------------------------------------------------------------------------------------------
def synthetic_prompts(shape: BatchShape, vocab: int, rng: np.random.Generator) -> list[list[int]]:
    """One random prompt per group (ids below the stop tokens)."""
    return [rng.integers(0, vocab - 2, shape.prompt_tokens).tolist() for _ in range(shape.groups)]


def rollout_rows(model, tokenizer, prompts: list[list[int]], shape: BatchShape, seed: int,
                 precision: str) -> tuple[list[list[int]], int]:
    """Every row's first response, sampled by ragen2's HF backend under autocast; ``(responses, tokens generated)``.

    A response that stopped early is filled up with its own tokens, so every row has the shape's length.
    """
    prompt_rows = [p for p in prompts for _ in range(shape.group_size)]
    backend = HFBackend(model, tokenizer)
    with autocast(precision, model.device):
        new = backend.generate(prompt_rows, shape.response_tokens, temperature=1.0, seed=seed)
    generated = sum(len(t) for t in new)
    filled = [(t * (shape.response_tokens // max(len(t), 1) + 1))[:shape.response_tokens] if t
              else [0] * shape.response_tokens for t in new]
    return filled, generated


def trajectories(prompts: list[list[int]], responses: list[list[int]], shape: BatchShape, vocab: int,
                 rng: np.random.Generator) -> list[Trajectory]:
    """Multi-turn training rows: prompt | response | (observation | response) x (turns - 1), scores per group."""
    out = []
    for row, response in enumerate(responses):
        group = row // shape.group_size
        ids, mask = list(prompts[group]), [0] * shape.prompt_tokens
        for turn in range(shape.turns):
            if turn:
                ids += rng.integers(0, vocab - 2, shape.obs_tokens).tolist()
                mask += [0] * shape.obs_tokens
            ids += list(np.roll(response, turn))
            mask += [1] * shape.response_tokens
        score = float(rng.normal(loc=group % 3, scale=1.0))
        out.append(Trajectory(group=group, env_seed=group, turns=[], input_ids=ids, loss_mask=mask,
                              reasoning_mask=mask, score=score, success=score > 1.0, num_actions=1,
                              first_prompt_ids=list(prompts[group]), first_reasoning_ids=[],
                              response_length=shape.trained_tokens))
    return out


class WeightProbe:
    """Elements of every actor tensor at a fixed stride, to tell how many a step changed."""

    def __init__(self, model: torch.nn.Module, sample: int = SAMPLE_ELEMENTS):
        total = sum(p.numel() for p in model.parameters())
        self.stride = max(1, total // sample)
        self.params = list(model.parameters())
        self.before = [p.detach().reshape(-1)[::self.stride].clone() for p in self.params]

    def changed_fraction(self) -> float:
        changed = sum(int((p.detach().reshape(-1)[::self.stride] != b).sum()) for p, b in zip(self.params, self.before))
        return changed / max(sum(b.numel() for b in self.before), 1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peaks(device: torch.device) -> dict[str, float | None]:
    if device.type != "cuda":
        return {"peak_allocated_gb": None, "peak_reserved_gb": None}
    return {"peak_allocated_gb": torch.cuda.max_memory_allocated(device) / GB,
            "peak_reserved_gb": torch.cuda.max_memory_reserved(device) / GB}


@dataclass
class Setup:
    """The models and optimisers of one architecture's steps."""

    arch: Arch
    actor: torch.nn.Module
    actor_opt: torch.optim.Optimizer
    critic: ValueModel | None = None
    critic_opt: torch.optim.Optimizer | None = None


def run_step(setup: Setup, algo: str, shape: BatchShape, step: int, device: torch.device,
             reserved_bytes: float = 0.0) -> dict[str, Any]:
    """One rollout + update of ``algo`` with ragen2's update code; returns the measurements (``reserved_bytes``: the
    placeholder for the vLLM engine, held meanwhile, added to the estimate)."""
    tc = trainer_config(algo, shape)
    preset = get_preset(algo)
    vocab = setup.arch.vocab_size
    tokenizer = StubTokenizer(vocab)
    rng = np.random.default_rng(1000 * step + (algo == "ppo"))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _sync(device)
    t0 = time.perf_counter()
    setup.actor.eval()
    prompts = synthetic_prompts(shape, vocab, rng)
    responses, generated = rollout_rows(setup.actor, tokenizer, prompts, shape, seed=step, precision=PRECISION)
    _sync(device)
    t1 = time.perf_counter()
    batch = build_batch(trajectories(prompts, responses, shape, vocab, rng), tokenizer.pad_token_id, device=device)
    models = Models(actor=setup.actor, tokenizer=tokenizer, reference=None, critic=setup.critic, init_path=Path("."))
    attach_update_targets(batch, models, preset, tc, temperature=1.0, precision=PRECISION)
    probe = WeightProbe(setup.actor)
    settings = trainer_loss_settings(tc, norm_const=float(shape.turns * shape.response_tokens), temperature=1.0,
                                     precision=PRECISION)
    update_rng = np.random.default_rng(step)
    metrics: dict[str, float] = {}
    if setup.critic is not None:
        metrics.update(update_critic(setup.critic, setup.critic_opt, batch, mini_batch_size=tc.mini_batch_size,
                                     micro_batch_size=tc.micro_batch_size, epochs=1, grad_clip=tc.grad_clip,
                                     rng=update_rng, precision=PRECISION))
    metrics.update(update_actor(setup.actor, setup.actor_opt, batch, settings, mini_batch_size=tc.mini_batch_size,
                                micro_batch_size=tc.micro_batch_size, epochs=1, grad_clip=tc.grad_clip,
                                rng=update_rng))
    _sync(device)
    t2 = time.perf_counter()
    estimate = estimate_memory(setup.arch, shape, PRECISION, True, algo=algo, rollout="hf",
                               gpu_bytes=_gpu_bytes(device))
    return {
        "arch": setup.arch.name, "algo": algo, "step": step, "status": "ok",
        "micro_batch": shape.micro_batch, "logprob_micro_batch": shape.logprob_micro_batch,
        "vllm_reserved_gb": reserved_bytes / GB, "estimated_peak_phase": estimate.peak_phase,
        "rollout_s": t1 - t0, "update_s": t2 - t1, "step_s": t2 - t0,
        "generated_tokens": generated, "gen_tokens_per_s": generated / max(t1 - t0, 1e-9),
        "trained_tokens": int(batch.loss_mask.sum()), "rows": len(batch), "seq_len": int(batch.input_ids.shape[1]),
        **_peaks(device), "estimated_peak_gb": (estimate.peak + reserved_bytes) / GB,
        "weights_changed_fraction": probe.changed_fraction(), "weights_sample_stride": probe.stride,
        "metrics": {k: metrics[k] for k in ("actor/pg_loss", "actor/grad_norm", "actor/optimizer_steps",
                                             "actor/skipped_steps", "critic/vf_loss", "critic/grad_norm")
                    if k in metrics},
    }


def _gpu_bytes(device: torch.device) -> float:
    return float(torch.cuda.get_device_properties(device).total_memory) if device.type == "cuda" else 141 * GB


# ---------------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------------
STEPS = (("ppo", 1), ("grpo", 1), ("grpo", 2))
"""The steps run per architecture: one PPO step (actor + critic), then two GRPO steps of the same actor."""
MIN_ARCH_S = 60
"""An architecture is not started with less of the time budget left (building it takes tens of seconds)."""


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def predicted_seconds(algo: str, params: int, history: dict[str, tuple[float, int]]) -> float:
    """A step's expected duration from the last measured step of the same algorithm (GRPO: else from PPO's), scaled
    by the parameter ratio but by no less than 0.4 (small models use the GPU less well; decoding is launch-bound)."""
    seconds, of_params = history.get(algo) or (
        (history["ppo"][0] * 0.6, history["ppo"][1]) if algo == "grpo" and "ppo" in history else (0.0, params))
    return seconds * max(params / of_params, 0.4)


def reserve(device: torch.device, share: float) -> torch.Tensor | None:
    """A placeholder block of ``share`` of the GPU's memory (the colocated vLLM engine's), or None (CPU, share 0)."""
    if device.type != "cuda" or share <= 0:
        return None
    return torch.empty(int(share * _gpu_bytes(device)), dtype=torch.uint8, device=device)


def check_arch(arch: Arch, shape: BatchShape, device: torch.device, deadline: float, log,
               history: dict[str, tuple[float, int]] | None = None,
               micro_batches: dict[str, tuple[int, int]] | None = None,
               vllm_share: float = 0.0) -> list[dict[str, Any]]:
    """The steps of :data:`STEPS` on ``arch``; a step expected to end after ``deadline`` is skipped (``history``:
    the last measured ``(seconds, parameters)`` per algorithm, updated), an out-of-memory step is reported.
    ``micro_batches``: per algorithm (:func:`parse_micro_batches`); ``vllm_share``: the placeholder's share."""
    history = {} if history is None else history
    results: list[dict[str, Any]] = []
    if time.perf_counter() + MIN_ARCH_S > deadline:
        log(f"{arch.name}: skipped, less than {MIN_ARCH_S} s of the time budget left")
        return [{"arch": arch.name, "algo": algo, "step": step, "status": "skipped (time budget)"}
                for algo, step in STEPS]
    tc = trainer_config("ppo", shape)
    placeholder = reserve(device, vllm_share)
    reserved = 0.0 if placeholder is None else float(placeholder.numel())
    t0 = time.perf_counter()
    actor = build_random_model(arch, device, seed=0)
    activation_checkpointing.enable(actor)
    setup = Setup(arch, actor, adamw(actor, tc.actor_lr, tc.weight_decay))
    n = arch.num_params()
    size = f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.2f} M"
    log(f"{arch.name}: {size} parameters, built in {time.perf_counter() - t0:.1f} s")
    for algo, step in STEPS:
        if time.perf_counter() + predicted_seconds(algo, arch.num_params(), history) > deadline:
            results.append({"arch": arch.name, "algo": algo, "step": step, "status": "skipped (time budget)"})
            log(f"  {algo} step {step}: skipped, the time budget would be exceeded")
            continue
        try:
            if algo == "ppo":
                backbone = build_random_model(arch, device, seed=0)  # the critic starts from the actor's checkpoint
                activation_checkpointing.enable(backbone)
                setup.critic = ValueModel(backbone).to(device)
                setup.critic.eval()
                setup.critic_opt = adamw(setup.critic, tc.critic_lr, tc.weight_decay)
                del backbone
            result = run_step(setup, algo, shape_for(algo, shape, micro_batches), step, device, reserved)
            history[algo] = (result["step_s"], arch.num_params())
        except torch.cuda.OutOfMemoryError as err:
            result = {"arch": arch.name, "algo": algo, "step": step, "status": "out of memory",
                      "error": str(err).splitlines()[0], **_peaks(device)}
            setup.actor_opt.zero_grad(set_to_none=True)
        if algo == "ppo" or result["status"] != "ok":  # the GRPO steps run without the critic
            setup.critic = setup.critic_opt = None
            _free(device)
        results.append(result)
        log(format_result(result))
    del setup, actor, placeholder
    _free(device)
    return results


def format_result(r: dict[str, Any]) -> str:
    """One line per step."""
    head = f"  {r['algo']} step {r['step']}:"
    if r["status"] != "ok":
        return f"{head} {r['status']}" + (f" ({r['error']})" if "error" in r else "")
    mem = ("peak memory n/a (CPU)" if r["peak_allocated_gb"] is None else
           f"peak {r['peak_allocated_gb']:.1f} GB allocated / {r['peak_reserved_gb']:.1f} GB reserved")
    return (f"{head} micro-batch {r['micro_batch']}/{r['logprob_micro_batch']}: "
            f"{r['step_s']:.1f} s (rollout {r['rollout_s']:.1f} s, update {r['update_s']:.1f} s), "
            f"{r['gen_tokens_per_s']:.0f} generated tokens/s, {mem} (estimate {r['estimated_peak_gb']:.1f} GB), "
            f"weights changed: {100 * r['weights_changed_fraction']:.2f} %")


def environment(device: torch.device) -> dict[str, Any]:
    import transformers

    info = {"torch": torch.__version__, "transformers": transformers.__version__, "device": str(device),
            "python": sys.version.split()[0]}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, gpu_memory_gb=props.total_memory / GB)
    return info


def run_check(archs: list[Arch], shape: BatchShape, device: torch.device, budget_s: float, log=print,
              micro_batches: dict[str, tuple[int, int]] | None = None, vllm_share: float = 0.0) -> dict:
    """The whole check; returns the report (``environment``, ``shape``, ``micro_batches``, ``vllm_share``,
    ``results``, ``seconds``)."""
    start = time.perf_counter()
    env = environment(device)
    log(f"GPU check on {env.get('gpu', env['device'])} (torch {env['torch']}, transformers {env['transformers']}); "
        f"shape: {shape.rows} rows x {shape.seq_len} tokens, {shape.trained_tokens} trained, "
        f"{shape.response_tokens} generated per row; {PRECISION} autocast, fp32 masters, activation checkpointing; "
        + ("micro-batch/no-gradient micro-batch " + ", ".join(f"{a} {m}/{lp}" for a, (m, lp) in micro_batches.items())
           if micro_batches else f"micro-batch {shape.micro_batch}, no-gradient micro-batch {shape.logprob_micro_batch}")
        + (f"; {vllm_share:.0%} of the GPU held for a vLLM engine" if device.type == "cuda" and vllm_share > 0 else ""))
    results, history = [], {}
    for arch in archs:
        results += check_arch(arch, shape, device, start + budget_s, log, history, micro_batches, vllm_share)
    seconds = time.perf_counter() - start
    log(f"done in {seconds:.0f} s")
    return {"environment": env, "shape": asdict(shape), "precision": PRECISION,
            "micro_batches": {a: list(v) for a, v in micro_batches.items()} if micro_batches else None,
            "vllm_share": vllm_share if device.type == "cuda" else 0.0, "results": results, "seconds": seconds}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ragen2.bench --gpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="qwen2.5-3b,qwen2.5-0.5b",
                   help=f"comma-separated architectures, in order (known: {', '.join(ARCHS)})")
    p.add_argument("--shape", default="paper", help="NAME[,FIELD=INT...], NAME in " + ", ".join(SHAPES))
    p.add_argument("--micro-batches", default="profile",
                   help="'profile' (the paper profile's: ppo=1/2, grpo=2/4), 'shape' (the shape's fields) or "
                        "ALGO=MICRO/LOGPROB,... (update micro-batch / no-gradient micro-batch, in rows)")
    p.add_argument("--vllm-share", type=float, default=PROFILE_VLLM_SHARE,
                   help="share of the GPU held by a placeholder for the colocated vLLM engine (0: none)")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--budget-s", type=float, default=540.0, help="skip the steps that would end after this")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON line at the end")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON report to this file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    try:
        archs = [ARCHS[name] for name in args.arch.split(",")]
        shape = parse_shape(args.shape)
        micro_batches = parse_micro_batches(args.micro_batches)
        if not 0.0 <= args.vllm_share < 0.9:
            raise ValueError(f"--vllm-share must be in [0, 0.9), got {args.vllm_share!r}")
    except (KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device (torch.cuda.is_available() is False); use --device cpu with --shape tiny "
              "--arch tiny to run the check's code on a CPU", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    transformers.logging.set_verbosity_error()
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    report = run_check(archs, shape, device, args.budget_s, log, micro_batches, args.vllm_share)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report), flush=True)
    return 0 if all(r["status"] != "out of memory" for r in report["results"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
