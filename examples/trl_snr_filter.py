"""Add SNR-aware filtering and MI diagnostics to a TRL GRPO run on a ragen2 environment.

The defaults run on a CPU in about a minute: a tiny randomly initialised Llama (built into a
temporary directory with ``ragen2.policy.make_tiny_policy``) plays FrozenLake (no slipping) for a
few GRPO steps through :func:`ragen2.integrations.trl.make_env_rollout_func`; groups whose rewards
do not vary are dropped before the loss, and the MI proxies are logged every ``--mi-every`` steps.

    python examples/trl_snr_filter.py
    python examples/trl_snr_filter.py --env bandit --steps 5 --filter-value 0.9
    # on a GPU, with a real model (from the local Hugging Face cache; runs are offline):
    python examples/trl_snr_filter.py --model Qwen/Qwen2.5-0.5B-Instruct --bf16 --num-prompts 8 \\
        --group-size 8 --max-new-tokens 256 --steps 200 --mi-every 5 --lr 1e-6 --dvclive runs/trl

Per-step metrics go to ``<output-dir>/log_history.json`` (and to dvclive with ``--dvclive``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
             "TRL_EXPERIMENTAL_SILENCE", "DVC_NO_ANALYTICS", "DVC_STUDIO_OFFLINE"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402

from ragen2.config import PolicyConfig  # noqa: E402
from ragen2.filter import FilterConfig  # noqa: E402

SUMMARY_KEYS = ("reward", "frac_reward_zero_std", "filter/kept_ratio", "filter/zero_variance_count",
                "filter/trained_rows", "mi/mi_estimate", "mi/retrieval_accuracy", "step_time")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="tiny", help="'tiny' (local random Llama) or a model id / directory")
    p.add_argument("--env", default="frozenlake", help="ragen2 environment name")
    p.add_argument("--env-kwargs", default='{"success_rate": 1.0}', help="JSON constructor kwargs of the env")
    p.add_argument("--num-prompts", type=int, default=4, help="prompt groups (env seeds) per step")
    p.add_argument("--group-size", type=int, default=4, help="rollouts per prompt (num_generations)")
    p.add_argument("--steps", type=int, default=3, help="GRPO optimiser steps")
    p.add_argument("--max-turns", type=int, default=2, help="LLM turns per episode (0 = env default)")
    p.add_argument("--max-new-tokens", type=int, default=16, help="new tokens per turn")
    p.add_argument("--filter-strategy", default="top_p", help="none | top_p | top_k | top_k_abs | min_p")
    p.add_argument("--filter-value", type=float, default=1.0, help="the strategy's parameter")
    p.add_argument("--include-zero", action=argparse.BooleanOptionalAction, default=False,
                   help="keep zero-variance groups as candidates (top_p 1.0 without them drops exactly those)")
    p.add_argument("--loss-scaling", default="none", help="none | keep_rate | sqrt_keep_rate")
    p.add_argument("--mi-every", type=int, default=1, help="MI diagnostics at step 1 and every N steps (0 = off)")
    p.add_argument("--mi-num-samples", type=int, default=64, help="reasonings sampled per MI computation")
    p.add_argument("--loss-type", default="dapo", help="TRL loss_type (grpo, dr_grpo, dapo, bnpo, ...)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (use ~1e-6 for real models)")
    p.add_argument("--bf16", action="store_true", help="bf16 (GPU, or CPU autocast)")
    p.add_argument("--seed", type=int, default=0, help="seed of the run (env seeds, sampling, init)")
    p.add_argument("--output-dir", default=None, help="where logs go (default: a temporary directory)")
    p.add_argument("--dvclive", default=None, help="also log to dvclive in this directory")
    return p.parse_args(argv)


def load_model_and_tokenizer(args: argparse.Namespace, work_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    from ragen2.policy import make_tiny_policy

    if args.model == "tiny":
        cfg = PolicyConfig(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                           tokenizer_vocab_size=512)
        path = make_tiny_policy(cfg, [args.env], work_dir / "tiny-policy", seed=args.seed)
        # PreTrainedTokenizerFast, not AutoTokenizer: avoids the qwen2 tokenizer trap (docs/trl.md).
        return AutoModelForCausalLM.from_pretrained(path), PreTrainedTokenizerFast.from_pretrained(path)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype), tokenizer


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    from trl import GRPOConfig

    from ragen2.integrations.trl import (
        SNRFilterConfig,
        SNRFilterGRPOTrainer,
        env_reward_func,
        make_env_dataset,
        make_env_rollout_func,
    )

    env_kwargs = json.loads(args.env_kwargs)
    output_dir = Path(args.output_dir or tempfile.mkdtemp(prefix="trl-snr-"))
    output_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_model_and_tokenizer(args, output_dir)
    on_gpu = torch.cuda.is_available()
    grpo_args = GRPOConfig(
        output_dir=str(output_dir / "trainer"), per_device_train_batch_size=args.num_prompts * args.group_size,
        num_generations=args.group_size, max_steps=args.steps, learning_rate=args.lr, loss_type=args.loss_type,
        logging_steps=1, save_strategy="no", report_to="none", seed=args.seed, bf16=args.bf16,
        use_cpu=not on_gpu, gradient_checkpointing=False, max_completion_length=args.max_new_tokens,
        disable_tqdm=True)
    snr = SNRFilterConfig(
        filter=FilterConfig(strategy=args.filter_strategy, value=args.filter_value,
                            include_zero=args.include_zero),
        loss_scaling=args.loss_scaling, mi_every=args.mi_every, mi_num_samples=args.mi_num_samples)
    callbacks = []
    if args.dvclive:
        from dvclive import Live
        from transformers.integrations import DVCLiveCallback

        callbacks.append(DVCLiveCallback(live=Live(dir=args.dvclive, dvcyaml=None, save_dvc_exp=False, report=None)))
    # Enough distinct env seeds for every step to see new prompts.
    seeds = range(args.seed * 100_000, args.seed * 100_000 + args.num_prompts * args.steps)
    trainer = SNRFilterGRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=env_reward_func, args=grpo_args,
        train_dataset=make_env_dataset(args.env, seeds, env_kwargs),
        rollout_func=make_env_rollout_func(args.env, env_kwargs, max_turns=args.max_turns,
                                           max_new_tokens=args.max_new_tokens),
        snr_config=snr, callbacks=callbacks)
    trainer.train()
    history = [h for h in trainer.state.log_history if "reward" in h]
    (output_dir / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    for step, log in enumerate(history, start=1):
        shown = ", ".join(f"{k}={log[k]:.4g}" for k in SUMMARY_KEYS if k in log)
        print(f"step {step}: {shown}")
    print(f"logs: {output_dir / 'log_history.json'}")
    return history


if __name__ == "__main__":
    main()
