"""The paper profile's dry run: its whole pipeline on a CPU, with a tiny Qwen2 in place of Qwen2.5-3B.

``python -m ragen2.repro.dry_run run --copy-from REPO --root DIR`` (``make dry-run-paper``) copies the
repository's code, notebooks and ``dvc.yaml`` into ``DIR`` (as ``make smoke`` does), builds the tiny model
there, writes ``DIR/params.yaml`` and runs the DVC pipeline as ``make repro`` does: the warm-start stages,
training as Ray tasks, two at a time (both realizations of the realization check), ``commit-runs``, then
``dvc repro`` (data, notebook inputs, the eight notebooks and the realization check's seven through papermill,
claims). ``prepare --root DIR`` does only the model and ``params.yaml``.
Numbers mean nothing; what it checks is that the paper profile's run grid, environments (SearchQA's BM25
index, the WebShop simulator, DeepCoder's sandbox, the MetaMathQA and Countdown sets), studies, settings
and notebooks go through end to end before GPU time is spent on them.

**The policy.** :func:`make_tiny_qwen2` builds a randomly initialised ``Qwen2ForCausalLM`` (Qwen2's
architecture: grouped KV heads, biased QKV projections; 0.4M parameters) and its tokenizer, saved with
``save_pretrained`` and loaded by the runs with ``from_pretrained`` from the local path, no Hub. A random
model never closes its ``<think>`` tags, and then the MI diagnostics have no reasoning to score, so
:func:`teach_format` first trains it briefly (:data:`FORMAT_SFT`) on expert episodes of all seven
environments: it stands in for a base model that already writes the format, as Qwen2.5-3B does. One SFT
of the base model replaces the seven per-environment warm starts the smoke profile's settings would
build, and the runs keep the paper profile's ``warm_start.steps: 0`` (its warm-start stages write their
markers only, as on a GPU).

:func:`paper_dry_run` keeps the settings of ``build("paper")`` for each run it trains except:

- ``policy.name_or_path``: the tiny Qwen2 (:data:`MODEL_DIR`), ``policy.device: cpu``;
- ``rollout.backend: hf`` (vLLM needs CUDA), 4 groups x 3 rollouts (every environment), 4 validation
  episodes, 48 new tokens per turn, a 512-token context (:data:`ROLLOUT`);
- 2 RL steps in every study (the mechanism study keeps its mid-run checkpoint, at step 1);
- the smoke profile's MI and gradient-analysis frequency and sample sizes, and its notebook parameters
  (``smoke: True``: every caption says the numbers are meaningless).

Precision stays the paper's: bf16 autocast over float32 master weights (CPU autocast supports bf16), frozen
copies in bfloat16, activation checkpointing, the paper's micro-batches.

**Fewer runs** (:data:`DRY_SIZES`, :func:`dry_run_cell`), to keep the wall time near ten minutes on two
cores: every environment, algorithm, filter and study of the paper profile is trained, but not every
combination. The main study trains FrozenLake with all four algorithms, each other environment with
its own algorithm (PPO; GRPO for WebShop and DeepCoder), all with no filter and Top-p, and Top-k once
(FrozenLake PPO); the mechanism study 2 paired seeds and 1 control seed (the paper profile: 4 and 4);
the slip study 2 of its 7 slip rates; each intervention sweep 2 of its values. Every run has one seed
except the mechanism study's, as in the paper profile.

**The tokenizer.** transformers 5.24 loads the tokenizer of a local ``qwen2`` model as ``Qwen2Tokenizer``
whatever ``tokenizer_config.json`` names: it rebuilds the tokenizer from the saved vocabulary and merges
with Qwen2's own normaliser (NFC) and pre-tokeniser (Qwen2's split regex, then byte level). The tiny
Llama's tokenizer (:func:`ragen2.policy.train_tokenizer`) splits only digits, so its merges span spaces,
and the rebuilt tokenizer encodes differently from the one the merges were trained with. Here the BPE is
trained with Qwen2's normaliser and pre-tokeniser in the first place (:func:`train_qwen2_tokenizer`), so
the rebuilt ``Qwen2Tokenizer`` is the same tokenizer; :func:`make_tiny_qwen2` checks that by loading the
saved model through :func:`ragen2.policy.load_policy` and comparing token ids on the corpus.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragen2.config import PolicyConfig, RunConfig, deep_merge
from ragen2.repro.profiles import (
    ALGOS,
    PAPER_CURVE_ENVS,
    PAPER_MAIN_ENVS,
    PROFILE_SETTINGS,
    SIZES,
    Profile,
    assemble,
    base_config,
)
from ragen2.repro.run_ids import parse_run_id

MODEL_DIR = "data/dry_run/tiny-qwen2"
"""Where the dry run's policy lives, relative to the repository root (``policy.name_or_path``)."""
ENVS = (*PAPER_MAIN_ENVS, *(env for env, _ in PAPER_CURVE_ENVS))
"""The paper profile's environments: the tokenizer and the format SFT see their text."""
TINY_QWEN2 = dataclasses.replace(PolicyConfig(), max_positions=4096)
"""Sizes of the tiny Qwen2: the tiny Llama's (0.4M parameters), with 4096 positions (the paper's 3,600-token
context and 400 new tokens)."""
NUM_KV_HEADS = 2
"""Key/value heads of the tiny Qwen2 (Qwen2.5-3B has 16 query and 2 KV heads)."""
FORMAT_SFT = {"steps": 120, "episodes_per_env": 16, "batch_size": 16, "lr": 3e-3, "seed": 0}
""":func:`teach_format`'s SFT: AdamW steps over the expert episodes of every environment, 30 % of them with a
template reasoning (the smoke warm start's rate and share)."""
FORMAT_CHECK_EPISODES = 4
"""Sampled episodes per environment after :func:`teach_format`, to report how many close their reasoning."""
ROLLOUT = {"backend": "hf", "env_groups": 4, "group_size": 3, "val_groups": 4, "max_new_tokens": 48,
           "max_context_tokens": 512}
"""The dry run's rollouts, in every run: the smoke profile's sizes, and a 512-token context (Qwen2's
pre-tokeniser gives about 4 times the tiny Llama's tokens for the same text, WebShop's conversations run to
2,300 tokens, and the SFT costs about linearly in the cap, its attention quadratically)."""
DRY_SIZES = dataclasses.replace(SIZES["paper"], steps=2, mech_steps=2, aux_steps=2, mech_seeds=2, control_seeds=1,
                                slips=(0.02, 0.5), ent_values=(0.0, 0.01), kl_values=(0.001, 0.01),
                                topp_values=(1.0, 0.6))
"""The paper profile's study sizes, cut: 2 steps, the mechanism study's seeds (2 treated, 1 control), 2 slip
rates (the paper's 2 % and 50 %), 2 values per sweep (each sweep's first paper value and a second one)."""
MAIN_ALGOS = {"frozenlake": ALGOS, **{env: ("ppo",) for env in PAPER_MAIN_ENVS if env != "frozenlake"},
              **{env: (algo,) for env, algo in PAPER_CURVE_ENVS}}
"""Environment -> the algorithms its main-study runs use in the dry run."""
TOP_K_ENV = "frozenlake"
"""The one environment whose main study trains Top-k (with PPO) in the dry run."""
COMMAND = "python -m ragen2.repro.dry_run prepare --root ."
"""What the dry run's params.yaml header names."""
COPIED = ("ragen2", "notebooks", "dvc.yaml", "pyproject.toml")
"""What the scratch copy takes from the repository (``make smoke``'s list)."""


def train_qwen2_tokenizer(texts: list[str], vocab_size: int):
    """:func:`ragen2.policy.train_tokenizer` split as ``Qwen2Tokenizer`` splits (its NFC normaliser and split
    regex), so that transformers' rebuild of a ``qwen2`` model's tokenizer keeps it."""
    from tokenizers import Regex, normalizers, pre_tokenizers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    from ragen2.policy import train_tokenizer

    split = pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False)
    return train_tokenizer(texts, vocab_size, split=split, normalizer=normalizers.NFC())


def make_tiny_qwen2(out_dir: str | Path, env_names: Sequence[str] = ENVS, *, cfg: PolicyConfig | None = None,
                    seed: int = 0) -> Path:
    """Save a randomly initialised tiny ``Qwen2ForCausalLM`` and its tokenizer to ``out_dir``.

    Sizes from ``cfg`` (default :data:`TINY_QWEN2`) with :data:`NUM_KV_HEADS` key/value heads; the tokenizer is
    trained on the environments' agent-loop text (:func:`ragen2.policy.env_corpus`).

    Raises:
        RuntimeError: the saved model's tokenizer, as transformers loads it, encodes the corpus differently.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ragen2.policy import env_corpus, load_policy
    from ragen2.quiet import quiet_unless_terminal

    cfg = cfg or TINY_QWEN2
    texts = env_corpus(list(env_names), seed=seed)
    tokenizer = train_qwen2_tokenizer(texts, cfg.tokenizer_vocab_size)
    vocab = tokenizer.get_vocab()
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads, num_key_value_heads=NUM_KV_HEADS, intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_positions, tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|endoftext|>"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = [vocab["<|im_end|>"], vocab["<|endoftext|>"]]
    model.generation_config.pad_token_id = vocab["<|endoftext|>"]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with quiet_unless_terminal():
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    _, loaded = load_policy(out, device="cpu")
    sample = texts[:: max(1, len(texts) // 500)]
    if [loaded(t)["input_ids"] for t in sample] != [tokenizer(t)["input_ids"] for t in sample]:
        raise RuntimeError(f"{out}: the tokenizer transformers loads ({type(loaded).__name__}) is not the one trained")
    return out


def teach_format(model_dir: str | Path, configs: Sequence[RunConfig], *, settings: dict[str, Any] | None = None) -> dict:
    """Train the policy in ``model_dir`` in place on expert episodes of each config's environment; a report.

    ``settings`` (default :data:`FORMAT_SFT`): ``episodes_per_env`` expert episodes of each config (its
    ``warm_start`` corpus settings, tokenised under its ``rollout.max_context_tokens``), then ``steps`` SFT
    steps of ``batch_size`` episodes at ``lr`` (:func:`ragen2.warmstart.train_sft`). The report (also written
    to ``model_dir/format_sft.json``) gives the settings, the first and last loss and the share of sampled
    first turns, per environment, that close their reasoning (:data:`FORMAT_CHECK_EPISODES` each): what the
    MI diagnostics need.
    """
    import json

    import torch

    from ragen2.policy import load_policy
    from ragen2.quiet import quiet_unless_terminal
    from ragen2.rollout.collect import collect_rollouts
    from ragen2.warmstart import build_corpus, tokenize_corpus, train_sft

    settings = {**FORMAT_SFT, **(settings or {})}
    model_dir = Path(model_dir)
    model, tokenizer = load_policy(model_dir, dtype="float32", device="cpu")
    sequences = []
    for cfg in configs:
        corpus = dataclasses.replace(cfg, warm_start=dataclasses.replace(
            cfg.warm_start, num_episodes=settings["episodes_per_env"], seed=settings["seed"]))
        sequences += tokenize_corpus(tokenizer, build_corpus(corpus), cfg.rollout.max_context_tokens)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings["seed"])
        losses = train_sft(model, sequences, steps=settings["steps"], lr=settings["lr"],
                           batch_size=settings["batch_size"], seed=settings["seed"], pad_id=int(tokenizer.pad_token_id))
    closed = {}
    for cfg in configs:
        seeds = [cfg.rollout.val_seed + i for i in range(FORMAT_CHECK_EPISODES)]
        batch = collect_rollouts(model, tokenizer, cfg.env, cfg.rollout, seeds, group_size=1, temperature=1.0,
                                 seed=settings["seed"])
        closed[cfg.env.name] = sum(bool(t.first_reasoning_ids) for t in batch.trajectories) / len(batch.trajectories)
    report = {"settings": settings, "episodes": len(sequences), "first_loss": losses[0] if losses else None,
              "final_loss": losses[-1] if losses else None, "first_turn_reasoning_closed": closed}
    with quiet_unless_terminal():
        model.save_pretrained(model_dir)
    (model_dir / "format_sft.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def dry_run_cell(rid: str) -> bool:
    """Whether the dry run trains run ``rid`` of the (cut) paper grid: every run outside the main study; in
    it, the environment's :data:`MAIN_ALGOS` with no filter and Top-p, and Top-k with PPO on :data:`TOP_K_ENV`."""
    parts = parse_run_id(rid)
    if parts["study"] != "main":
        return True
    if parts["filter_tag"].startswith("topk"):
        return parts["env"] == TOP_K_ENV and parts["algo"] == "ppo"
    return parts["algo"] in MAIN_ALGOS[parts["env"]]


def paper_dry_run(model_dir: str = MODEL_DIR) -> Profile:
    """The paper profile cut to a CPU dry run (see the module docstring for what changes)."""
    smoke = base_config("smoke")
    overrides: dict[str, Any] = {
        "policy": {"name_or_path": model_dir, "device": "cpu"},
        "rollout": ROLLOUT,
        "collapse": {key: smoke["collapse"][key] for key in ("compute_freq", "num_samples")},
        "grad_analysis": {key: smoke["grad_analysis"][key] for key in ("every", "num_buckets")},
    }
    base = deep_merge(base_config("paper"), overrides)
    profile = assemble("paper_dry_run", base, DRY_SIZES, *PROFILE_SETTINGS["paper"], smoke=True,
                       run_overrides={"rollout": {k: ROLLOUT[k] for k in ("env_groups", "group_size")}},
                       written_by=COMMAND)
    keep = [rid for rid in profile.runs if dry_run_cell(rid)]
    return dataclasses.replace(profile, runs={rid: profile.runs[rid] for rid in keep},
                               warm_start_keys={rid: profile.warm_start_keys[rid] for rid in keep})


def prepare(root: str | Path, model_dir: str = MODEL_DIR, log=print) -> Profile:
    """Build the tiny Qwen2 under ``root`` and teach it the format (unless it is there), write
    ``root/params.yaml``; the profile."""
    root = Path(root)
    profile = paper_dry_run(model_dir)
    if not (root / model_dir / "format_sft.json").exists():
        make_tiny_qwen2(root / model_dir)
        first = {}
        for rid in profile.runs:
            first.setdefault(parse_run_id(rid)["env"], rid)
        report = teach_format(root / model_dir, [profile.config(rid) for rid in first.values()])
        log(f"format SFT: loss {report['first_loss']:.2f} -> {report['final_loss']:.2f}; first turns closing their "
            "reasoning: " + ", ".join(f"{env} {share:.0%}" for env, share in report["first_turn_reasoning_closed"].items()))
    (root / "params.yaml").write_text(profile.yaml())
    return profile


def scratch_copy(repo: str | Path, root: str | Path) -> Path:
    """Copy :data:`COPIED` from ``repo`` into ``root`` (which must not exist or be empty), without caches."""
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"--root {root} is not empty; the dry run needs a fresh folder")
    root.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        src = Path(repo) / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / name)
    return root


OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "DVC_NO_ANALYTICS": "1", "DVC_STUDIO_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "MPLBACKEND": "Agg"}
"""The Makefile's environment: offline, no telemetry."""


def run_pipeline(root: str | Path, *, workers: int = 2, log=print) -> dict[str, float]:
    """Run the prepared dry run's DVC pipeline in ``root`` the way ``make repro`` does; seconds per phase.

    ``dvc init --no-scm``, then the warm starts of both realizations (``dvc repro warmstart
    warmstart_realization``), the stale runs of each on ``workers`` processes of one torch thread (``python -m
    ragen2.repro train-runs [--realization]``) recorded with ``commit-runs``, then ``dvc repro`` (the data stage, the
    notebook inputs, the eight notebooks and the realization check's seven, the claims). ``dvc`` and the
    Python that runs this are taken from this interpreter's environment.

    Raises:
        subprocess.CalledProcessError: a step failed (its output went to this process's stdout/stderr).
    """
    import os
    import subprocess
    import sys
    import time

    root = Path(root)
    env = {**os.environ, **OFFLINE_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    python = [sys.executable, "-m", "ragen2.repro"]

    def step(cmd: list[str], capture: bool = False) -> str:
        done = subprocess.run(cmd, cwd=root, env=env, check=True, text=True,
                              stdout=subprocess.PIPE if capture else None)
        return done.stdout or ""

    seconds: dict[str, float] = {}
    for phase, commands in (("warm starts", [["dvc", "init", "--no-scm", "-q", "-f"],
                                             ["dvc", "repro", "warmstart", "warmstart_realization"]]),
                            ("training", None), ("notebooks", [["dvc", "repro"]])):
        start = time.perf_counter()
        if commands is None:
            for which in ([], ["--realization"]):  # both realizations of the realization check, as make repro
                stale = step([*python, "stale-runs", *which], capture=True).split()
                if stale:
                    step([*python, "train-runs", *which, "--workers", str(workers), "--threads", "1",
                          "--cache-dir", "data/cache", *stale])
                    step([*python, "commit-runs", *which, *stale])
        else:
            for cmd in commands:
                step(cmd)
        seconds[phase] = time.perf_counter() - start
        log(f"dry run: {phase} done in {seconds[phase] / 60:.1f} min")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    import time

    parser = argparse.ArgumentParser(prog="python -m ragen2.repro.dry_run", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("prepare", "build the tiny Qwen2 and write params.yaml of the dry run"),
                       ("run", "prepare, then run the DVC pipeline there as `make repro` does")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--root", default=".", help="the repository copy (default: .)")
        if name == "run":
            cmd.add_argument("--copy-from", metavar="REPO", help="first copy REPO's code, notebooks and dvc.yaml "
                             "into --root (a new or empty folder)")
            cmd.add_argument("--workers", type=int, default=2, help="training processes (default: 2)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if getattr(args, "copy_from", None):
        scratch_copy(args.copy_from, args.root)
    profile = prepare(args.root)
    print(f"wrote {Path(args.root) / 'params.yaml'}: profile {profile.name}, {len(profile.runs)} runs; "
          f"policy {Path(args.root) / MODEL_DIR} ({(time.perf_counter() - start) / 60:.1f} min)")
    if args.command == "run":
        seconds = run_pipeline(args.root, workers=args.workers)
        print(f"dry run done in {(time.perf_counter() - start) / 60:.1f} min: "
              + ", ".join(f"{k} {v / 60:.1f} min" for k, v in seconds.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
