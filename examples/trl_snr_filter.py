"""Add SNR-aware filtering and MI diagnostics to a TRL GRPO run on a ragen2 environment.

The filter needs a policy whose rewards vary inside a prompt group: a randomly initialised model
fails every episode alike, every group has zero variance and nothing is left to train on. So the
default run starts from a *warm start* (a tiny Llama fine-tuned on expert episodes, as the
pipeline's RL runs do), found or built by :func:`ragen2.warmstart.initial_policy` for the config of
the checkout's ``params.yaml`` (its ``base`` section; without one, :data:`FALLBACK_CONFIG`):

1. the pipeline's own warm start, ``data/cache/warm_start/<hash>``, when ``make repro`` (or
   ``dvc repro warmstart``) has built it;
2. otherwise a quick one, built once with a small SFT budget (``--quick-sft-steps``, about 1.5
   minutes on a busy 2-core CPU) and cached in ``--cache-dir``.

It then plays FrozenLake (the config's 2 % slip) for a few GRPO steps through
:func:`ragen2.integrations.trl.make_env_rollout_func`: groups whose rewards do not vary are dropped
before the loss, and the MI proxies are logged every ``--mi-every`` steps. One line per step sums it
up (kept and dropped groups, loss, gradient norm, the MI z-score and the collapse alarm).

    python examples/trl_snr_filter.py
    python examples/trl_snr_filter.py --steps 5 --filter-value 0.9
    # on a GPU, with a real model (from the local Hugging Face cache; runs are offline):
    python examples/trl_snr_filter.py --model Qwen/Qwen2.5-0.5B-Instruct --bf16 --num-prompts 8 \\
        --group-size 8 --max-new-tokens 256 --steps 200 --mi-every 5 --lr 1e-6 --dvclive runs/trl

Per-step metrics go to ``<output-dir>/log_history.json`` (and to dvclive with ``--dvclive``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
             "TRL_EXPERIMENTAL_SILENCE", "DVC_NO_ANALYTICS", "DVC_STUDIO_OFFLINE", "TOKENIZERS_PARALLELISM"):
    os.environ.setdefault(_var, "false" if _var == "TOKENIZERS_PARALLELISM" else "1")

import torch  # noqa: E402

from ragen2.config import EnvConfig, RolloutConfig, RunConfig, WarmStartConfig, load_config  # noqa: E402
from ragen2.filter import FilterConfig  # noqa: E402
from ragen2.progress import show_progress  # noqa: E402
from ragen2.warmstart import corpus_env, initial_policy, warm_start_key  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PARAMS = REPO / "params.yaml"
"""The checkout's pipeline parameters: their ``base`` config decides which warm start is the pipeline's."""
PIPELINE_CACHE = REPO / "data" / "cache"
"""Where the pipeline keeps its warm starts (``dvc.yaml``'s ``--cache-dir``)."""
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragen2" / "examples"
"""Where the quick warm start is built and kept."""
FALLBACK_CONFIG = RunConfig(
    env=EnvConfig("frozenlake", {"success_rate": 0.98}),
    warm_start=WarmStartConfig(lr=3e-3, batch_size=32),
    rollout=RolloutConfig(max_turns=1, max_actions_per_turn=10, max_actions_per_traj=10, max_new_tokens=64,
                          max_context_tokens=1024))
"""The config without a ``params.yaml`` (an installed package): the CPU profile's FrozenLake setting."""
QUICK_EPISODES = 1000
"""Expert episodes of the quick warm start's corpus (the pipeline's has 4,000)."""

SUMMARY_KEYS = ("reward", "reward_std", "frac_reward_zero_std", "filter/kept_count", "filter/dropped_count",
                "filter/trained_rows", "loss", "grad_norm", "mi/mi_zscore_ema", "mi/collapse_alarm", "step_time")


class HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in the help, except where the help already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        return action.help if "(default:" in (action.help or "") else super()._get_help_string(action)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpWithDefaults)
    p.add_argument("--model", default="tiny",
                   help="'tiny' (the warm-started tiny Llama, see above) or a model id / directory")
    p.add_argument("--params", type=Path, default=PARAMS, help="params.yaml whose base config to follow")
    p.add_argument("--pipeline-cache", type=Path, default=PIPELINE_CACHE, help="the pipeline's --cache-dir")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where the quick warm start is kept")
    p.add_argument("--quick-sft-steps", type=int, default=200,
                   help="SFT steps of the quick warm start (0 = start from the random-initialised tiny policy)")
    p.add_argument("--env", default=None, help="ragen2 environment name (default: the config's)")
    p.add_argument("--env-kwargs", default=None, help="JSON constructor kwargs of the env (default: the config's)")
    p.add_argument("--num-prompts", type=int, default=8,
                   help="prompt groups (env seeds) per step; with fewer the MI estimate is noisy (few columns)")
    p.add_argument("--group-size", type=int, default=4, help="rollouts per prompt (num_generations)")
    p.add_argument("--steps", type=int, default=3, help="GRPO optimiser steps")
    p.add_argument("--max-turns", type=int, default=None, help="LLM turns per episode (default: the config's)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="new tokens per turn (default: the config's)")
    p.add_argument("--filter-strategy", default="top_p", help="none | top_p | top_k | top_k_abs | min_p")
    p.add_argument("--filter-value", type=float, default=1.0, help="the strategy's parameter")
    p.add_argument("--include-zero", action=argparse.BooleanOptionalAction, default=False,
                   help="keep zero-variance groups as candidates (top_p 1.0 without them drops exactly those)")
    p.add_argument("--loss-scaling", default="none", help="none | keep_rate | sqrt_keep_rate")
    p.add_argument("--mi-every", type=int, default=1, help="MI diagnostics at step 1 and every N steps (0 = off)")
    p.add_argument("--mi-num-samples", type=int, default=64, help="reasonings sampled per MI computation")
    p.add_argument("--loss-type", default="dapo", help="TRL loss_type (grpo, dr_grpo, dapo, bnpo, ...)")
    p.add_argument("--lr", type=float, default=1e-4, help="learning rate (the CPU profile's; ~1e-6 for real models)")
    p.add_argument("--bf16", action="store_true", help="bf16 (GPU, or CPU autocast)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (0 = torch's default); one is fastest for the tiny model on a busy CPU")
    p.add_argument("--seed", type=int, default=0, help="seed of the run (env seeds, sampling, init)")
    p.add_argument("--output-dir", default=None, help="where logs go (default: a temporary directory)")
    p.add_argument("--report-to", default="none", choices=("none", "tensorboard", "wandb"),
                   help="TRL's logger besides the printed lines: tensorboard (in OUTPUT_DIR/trainer/runs) or wandb "
                        "(offline mode: WANDB_MODE=offline unless set)")
    p.add_argument("--dvclive", default=None, help="also log to dvclive in this directory")
    return p.parse_args(argv)


def example_config(args: argparse.Namespace) -> RunConfig:
    """The run config whose policy, warm start and rollout limits the example uses.

    ``--env`` / ``--env-kwargs`` change the environment played. Other kwargs of the same environment keep
    the config's warm start (its corpus environment is pinned); another environment gets its own
    warm start and its default turn and action limits.
    """
    cfg = load_config(None, args.params) if Path(args.params).exists() else FALLBACK_CONFIG
    if args.env is not None and args.env != cfg.env.name:
        kwargs = json.loads(args.env_kwargs) if args.env_kwargs else {}
        cfg = replace(cfg, env=EnvConfig(args.env, kwargs), warm_start=replace(cfg.warm_start, env_kwargs=None),
                      rollout=replace(cfg.rollout, max_turns=0, max_actions_per_turn=0, max_actions_per_traj=0))
    elif args.env_kwargs is not None:
        corpus = dict(corpus_env(cfg).kwargs)
        cfg = replace(cfg, env=replace(cfg.env, kwargs=json.loads(args.env_kwargs)),
                      warm_start=replace(cfg.warm_start, env_kwargs=corpus))
    limits = {k: v for k, v in (("max_turns", args.max_turns), ("max_new_tokens", args.max_new_tokens))
              if v is not None}
    return replace(cfg, seed=args.seed, rollout=replace(cfg.rollout, **limits))


def quick_config(cfg: RunConfig, steps: int) -> RunConfig:
    """``cfg`` with the quick warm start's SFT budget: ``steps`` steps on :data:`QUICK_EPISODES` episodes."""
    return replace(cfg, warm_start=replace(cfg.warm_start, steps=steps,
                                           num_episodes=min(QUICK_EPISODES, cfg.warm_start.num_episodes)))


def starting_policy(cfg: RunConfig, *, pipeline_cache: Path, cache_dir: Path, quick_steps: int) -> tuple[Path, str]:
    """The policy the example trains and where it came from: ``pipeline`` or ``quick``.

    The pipeline's warm start for ``cfg`` is used when ``pipeline_cache`` holds it; otherwise a quick one is
    built (or found, from an earlier run) in ``cache_dir`` with ``quick_steps`` SFT steps.
    """
    pipeline = Path(pipeline_cache) / "warm_start" / warm_start_key(cfg)
    if cfg.warm_start.steps > 0 and (pipeline / "warm_start.json").exists():
        return initial_policy(cfg, Path(pipeline_cache)), "pipeline"
    return initial_policy(quick_config(cfg, quick_steps), Path(cache_dir)), "quick"


def describe_policy(path: Path, source: str, seconds: float) -> str:
    """One line on the starting policy: where it came from and its greedy success (``warm_start.json``)."""
    report = path / "warm_start.json"
    if not report.exists():
        return f"policy: random-initialised tiny Llama {path} (no warm start: expect constant rewards)"
    info = json.loads(report.read_text())
    what = "the pipeline's warm start" if source == "pipeline" else f"a quick warm start ({info['steps']} SFT steps)"
    return (f"policy: {what} {path} ({seconds:.0f} s to get; greedy success {info['greedy_success']:.2f} "
            f"on {info['eval_seeds']} seeds)")


def load_model_and_tokenizer(args: argparse.Namespace, cfg: RunConfig):
    """``(model, tokenizer, description)`` of the policy to train."""
    from ragen2.policy import load_policy

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.model == "tiny":
        start = time.perf_counter()
        path, source = starting_policy(cfg, pipeline_cache=args.pipeline_cache, cache_dir=args.cache_dir,
                                       quick_steps=args.quick_sft_steps)
        model, tokenizer = load_policy(path, device=device)
        return model, tokenizer, describe_policy(path, source, time.perf_counter() - start)
    model, tokenizer = load_policy(args.model, dtype="bfloat16" if args.bf16 else "float32", device=device)
    return model, tokenizer, f"policy: {args.model}"


def summary_line(step: int, log: dict) -> str:
    """The per-step line: the :data:`SUMMARY_KEYS` the log holds."""
    return f"step {step}: " + ", ".join(f"{k}={log[k]:.4g}" for k in SUMMARY_KEYS if k in log)


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    show_progress()  # the quick warm start's SFT steps and evaluation, as they go
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    from trl import GRPOConfig

    from ragen2.integrations.trl import (
        SNRFilterConfig,
        SNRFilterGRPOTrainer,
        env_reward_func,
        make_env_dataset,
        make_env_rollout_func,
    )

    if args.report_to == "wandb":
        os.environ.setdefault("WANDB_MODE", "offline")
    cfg = example_config(args)
    rc = cfg.rollout
    output_dir = Path(args.output_dir or tempfile.mkdtemp(prefix="trl-snr-"))
    output_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer, description = load_model_and_tokenizer(args, cfg)
    print(description, flush=True)
    on_gpu = torch.cuda.is_available()
    # activation checkpointing off (a tiny model), under the name the installed transformers knows (5.24 renamed it)
    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    grpo_args = GRPOConfig(
        output_dir=str(output_dir / "trainer"), per_device_train_batch_size=args.num_prompts * args.group_size,
        num_generations=args.group_size, max_steps=args.steps, learning_rate=args.lr, loss_type=args.loss_type,
        logging_steps=1, save_strategy="no", report_to=args.report_to, seed=args.seed, bf16=args.bf16,
        use_cpu=not on_gpu, **{checkpointing: False}, max_completion_length=rc.max_new_tokens,
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
    env_kwargs = dict(cfg.env.kwargs)
    trainer = SNRFilterGRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=env_reward_func, args=grpo_args,
        train_dataset=make_env_dataset(cfg.env.name, seeds, env_kwargs, max_actions_per_traj=rc.max_actions_per_traj),
        rollout_func=make_env_rollout_func(
            cfg.env.name, env_kwargs, max_turns=rc.max_turns, max_actions_per_turn=rc.max_actions_per_turn,
            max_actions_per_traj=rc.max_actions_per_traj, max_new_tokens=rc.max_new_tokens,
            max_context_tokens=rc.max_context_tokens, format_penalty=rc.format_penalty),
        snr_config=snr, callbacks=callbacks)
    trainer.train()
    history = [h for h in trainer.state.log_history if "reward" in h]
    (output_dir / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    for step, log in enumerate(history, start=1):
        print(summary_line(step, log))
    print(f"logs: {output_dir / 'log_history.json'}")
    return history


if __name__ == "__main__":
    main()
