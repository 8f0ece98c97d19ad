"""Run configuration: one dataclass per run, mapping 1:1 onto ``params.yaml``.

``params.yaml`` holds a ``base`` section (a complete :class:`RunConfig`) and a ``runs`` mapping from
run id to *overrides* of that base, written with the same nesting and key names as the dataclasses
below. Loading is strict: an unknown key, a missing required key or a value of the wrong type is an
error that names the key (nanoGPT's configurator check, done with dataclasses).

>>> cfg = load_config("frozenlake__grpo__topp__s0")          # doctest: +SKIP
>>> cfg = apply_overrides(cfg, ["trainer.actor_lr=1e-4"])   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ragen2.checks import at_least, between, one_of, validate
from ragen2.errors import ConfigError
from ragen2.filter import FilterConfig

ALGOS = ("ppo", "grpo", "dapo", "dr_grpo")
"""``trainer.algo`` values; ``ragen2.trainer.algos.PRESETS`` holds one preset per name."""
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
"""``trainer.loss_agg_mode`` values besides ``preset`` (``ragen2.trainer.losses.aggregate``)."""
KL_TYPES = ("k1", "k2", "k3")
"""``trainer.kl_type`` values (``ragen2.trainer.losses.kl_penalty``)."""
ENTROPY_SCOPES = ("all", "reasoning")
DTYPES = ("float32", "bfloat16", "float16")
BACKENDS = ("hf", "vllm")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
"""``trainer.precision`` values (:mod:`ragen2.trainer.precision`)."""
PRECISION_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
"""The ``policy.dtype`` each explicit precision computes in (``auto`` takes its precision from ``policy.dtype``)."""
VLLM_DTYPES = ("bfloat16", "float16", "float32")


# ---------------------------------------------------------------------------------------------
# The sections of a run
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EnvConfig:
    name: str = "frozenlake"
    """Registry name of the environment (``ragen2.envs.make``)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the environment's constructor (its docstring's Arguments section)."""

    def __post_init__(self) -> None:
        from ragen2.envs import REGISTRY

        validate("env", self, [("name", *one_of(tuple(REGISTRY)))])


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
"""A Hugging Face model id: ``name`` or ``owner/name``."""


def check_policy_source(name_or_path: str, key: str = "policy.name_or_path") -> None:
    """A policy is ``tiny``, a local model directory (holding a ``config.json``) or a hub id (``owner/name``, loaded
    from the local Hugging Face cache when offline); anything else is a ConfigError naming it, raised before any
    model library loads."""
    if name_or_path == "tiny":
        return
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"{key}={name_or_path!r}: the directory holds no config.json (not a saved model)")
    elif path.exists():
        raise ConfigError(f"{key}={name_or_path!r}: a file, not a model directory")
    elif not HUB_ID.fullmatch(name_or_path):
        raise ConfigError(f"{key}={name_or_path!r}: no such directory, and not a model id (owner/name)")


@dataclass(frozen=True)
class PolicyConfig:
    name_or_path: str = "tiny"
    """``tiny`` = the local tiny Llama built by ``ragen2.policy.make_tiny_policy``; otherwise a Hugging
    Face model id or a local directory (e.g. ``Qwen/Qwen2.5-3B``)."""
    hidden_size: int = 128
    """Tiny model: hidden size."""
    num_layers: int = 2
    """Tiny model: transformer layers."""
    num_heads: int = 4
    """Tiny model: attention heads."""
    intermediate_size: int = 384
    """Tiny model: MLP width."""
    max_positions: int = 2048
    """Tiny model: maximum sequence length."""
    tokenizer_vocab_size: int = 1024
    """Tiny model: target size of the tokenizer trained on the environments' text."""
    dtype: str = "float32"
    """``float32`` | ``bfloat16`` | ``float16``: the dtype of the copies of the policy that are *not* trained (the
    frozen KL reference; the policy that ``evaluate``, ``audit`` and the analyses load). Trained weights (actor,
    critic, warm start) are always float32 masters; ``trainer.precision`` sets the dtype they compute in. A
    float32 reference computes exactly as the actor does at the start (KL 0 at the first step); a bfloat16 one
    halves its memory and starts a bf16 rounding away from the actor."""
    device: str = "auto"
    """``auto`` (CUDA when present, else CPU) | ``cpu`` | ``cuda`` | ``cuda:N``."""

    def __post_init__(self) -> None:
        validate("policy", self, [
            ("name_or_path", lambda v: bool(v.strip()), "a model id, a local directory or 'tiny'"),
            *[(name, *at_least(1)) for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size",
                                                  "max_positions", "tokenizer_vocab_size")],
            ("hidden_size", lambda v: v % self.num_heads == 0, f"a multiple of policy.num_heads={self.num_heads}"),
            ("dtype", *one_of(DTYPES)),
            ("device", lambda v: v in ("auto", "cpu", "cuda") or (v.startswith("cuda:") and v[5:].isdigit()),
             "auto, cpu, cuda or cuda:N"),
        ])


@dataclass(frozen=True)
class WarmStartConfig:
    steps: int = 300
    """SFT optimiser steps on expert trajectories (0 = no warm start)."""
    lr: float = 2e-3
    """SFT learning rate (AdamW, cosine decay)."""
    batch_size: int = 64
    """SFT sequences per step."""
    num_episodes: int = 2000
    """Expert episodes generated for the SFT corpus."""
    template_fraction: float = 0.3
    """Share of trajectories whose <think> text is a generic template that ignores the state."""
    seed: int = 0
    """Seed of the expert corpus and of the SFT run."""
    env_kwargs: dict[str, Any] | None = None
    """Environment keyword arguments of the expert corpus and the greedy evaluation (``None`` = ``env.kwargs``).
    Lets runs on variants of one environment (e.g. FrozenLake slip rates) share one warm start, as the
    paper's runs share one base model."""

    def __post_init__(self) -> None:
        validate("warm_start", self, [
            ("steps", *at_least(0)), ("lr", lambda v: v > 0, "> 0"), ("batch_size", *at_least(1)),
            ("num_episodes", *at_least(1)), ("template_fraction", *between(0, 1)),
        ])


@dataclass(frozen=True)
class RolloutConfig:
    env_groups: int = 8
    """Prompt groups (env seeds) per step."""
    group_size: int = 16
    """Rollouts per group; members of a group share the env seed."""
    max_turns: int = 0
    """LLM turns per trajectory (0 = the environment's default)."""
    max_actions_per_turn: int = 0
    """Parsed actions kept per response (0 = the environment's default)."""
    max_actions_per_traj: int = 0
    """Environment actions per trajectory (0 = the environment's default)."""
    max_new_tokens: int = 400
    """New tokens per turn."""
    max_context_tokens: int = 3600
    """Context cap; the oldest turns are dropped to fit (docs/method.md §2.9)."""
    temperature: float = 1.0
    """Sampling temperature of training rollouts."""
    val_temperature: float = 0.5
    """Sampling temperature of validation rollouts."""
    val_groups: int = 512
    """Validation seeds (one rollout each)."""
    format_penalty: float = -0.1
    """Added to the trajectory score for every turn without a valid action."""
    train_seed: int = 10000
    """First training env seed; step t uses seeds train_seed + env_groups*(t-1) + g."""
    val_seed: int = 123
    """First validation env seed (the validation set is fixed)."""
    backend: str = "hf"
    """``hf`` (``model.generate``) | ``vllm`` (GPU only)."""
    vllm_gpu_memory_utilization: float = 0.3
    """vLLM: share of the GPU's memory the engine may take for its weights and KV cache (the paper: 0.3)."""
    vllm_max_model_len: int = 0
    """vLLM: longest prompt + response in tokens (0 = ``max_context_tokens + max_new_tokens``)."""
    vllm_enforce_eager: bool = True
    """vLLM: no CUDA graphs (the paper's setting: less memory, slower decoding)."""
    vllm_dtype: str = "bfloat16"
    """vLLM: dtype of the engine's copy of the weights (``bfloat16`` | ``float16`` | ``float32``)."""
    vllm_sync_every: int = 1
    """vLLM: push the actor's weights into the engine on every N-th rollout call, and only when they changed since
    the last push (1 = before every rollout that follows an update: on-policy; N > 1: a rollout may sample from
    weights up to N-1 calls old; 0 = never: the engine keeps the checkpoint it loaded, e.g. to time generation)."""

    def __post_init__(self) -> None:
        validate("rollout", self, [
            ("env_groups", *at_least(1)), ("group_size", *at_least(1)),
            *[(name, *at_least(0)) for name in ("max_turns", "max_actions_per_turn", "max_actions_per_traj")],
            ("max_new_tokens", *at_least(1)), ("max_context_tokens", *at_least(1)),
            ("temperature", lambda v: v > 0, "> 0 (training rollouts sample)"),
            ("val_temperature", *at_least(0)), ("val_groups", *at_least(1)),
            ("train_seed", *at_least(0)), ("val_seed", *at_least(0)), ("backend", *one_of(BACKENDS)),
            ("vllm_gpu_memory_utilization", *between(0, 1, open_low=True)),
            ("vllm_max_model_len", lambda v: v == 0 or v >= self.max_context_tokens + self.max_new_tokens,
             f"0 (auto) or >= max_context_tokens + max_new_tokens = {self.max_context_tokens + self.max_new_tokens}"),
            ("vllm_dtype", *one_of(VLLM_DTYPES)), ("vllm_sync_every", *at_least(0)),
        ])


REPORT_TO = ("dvclive", "tensorboard", "wandb")
"""The metric loggers ``trainer.report_to`` can name (:mod:`ragen2.trainer.runlog`)."""


@dataclass(frozen=True)
class TrainerConfig:
    algo: str = "ppo"
    """``ppo`` (GAE + critic) | ``grpo`` | ``dapo`` | ``dr_grpo``."""
    steps: int = 200
    """Rollout-update iterations."""
    actor_lr: float = 1e-6
    """Actor learning rate (AdamW, constant)."""
    critic_lr: float = 1e-5
    """Critic learning rate (PPO only)."""
    mini_batch_size: int = 32
    """Rows per optimiser step."""
    micro_batch_size: int = 8
    """Rows per forward/backward (gradient accumulation inside a mini-batch)."""
    logprob_micro_batch_size: int = 0
    """Rows per forward of the passes without gradient (old and reference log-probs, values; 0 =
    ``micro_batch_size``). They keep no activations for a backward, so they fit more rows."""
    precision: str = "auto"
    """Compute precision of the trained models (:mod:`ragen2.trainer.precision`); their weights and AdamW state
    are always float32 masters. ``fp32``: no autocast. ``bf16``: forward passes (updates, log-prob and value
    passes, HF-backend generation, MI scoring) under bf16 autocast; log-softmax, entropies and losses stay
    float32. ``fp16``: the same in float16 with dynamic loss scaling (``torch.amp.GradScaler``). ``auto``: the
    precision ``policy.dtype`` names (float32 -> fp32, bfloat16 -> bf16, float16 -> fp16)."""
    gradient_checkpointing: bool = False
    """Activation checkpointing of the trained models: each decoder layer keeps only its input and is recomputed in
    the backward pass (about a third more compute, a fraction of the activation memory). The gradient passes then
    run every row's whole prompt (:mod:`ragen2.model.activation_checkpointing` says why)."""
    ppo_epochs: int = 1
    """Passes over the batch per step."""
    clip_low: float = 0.2
    """epsilon_low of the clipped ratio."""
    clip_high: float = 0.28
    """epsilon_high of the clipped ratio (decoupled clip)."""
    dual_clip: float = 3.0
    """Dual-clip constant c for negative advantages (0 = off)."""
    max_refill_rounds: int = 10
    """DAPO dynamic sampling: at most this many extra rollouts per step, each of the groups still
    missing, to replace the groups whose scores are all equal (0 = drop them without replacement)."""
    loss_agg_mode: str = "preset"
    """``preset`` (the algorithm's) | ``token-mean`` | ``seq-mean-token-sum`` | ``seq-mean-token-mean`` |
    ``seq-mean-token-sum-norm``."""
    gamma: float = 1.0
    """GAE discount."""
    lam: float = 1.0
    """GAE lambda."""
    entropy_coef: float = 0.001
    """Entropy bonus coefficient."""
    entropy_scope: str = "all"
    """Tokens the entropy bonus applies to: ``all`` trained tokens | ``reasoning`` (inside <think>)."""
    kl_coef: float = 0.0
    """KL-to-reference loss coefficient (0 = no reference model)."""
    kl_type: str = "k3"
    """``k1`` | ``k3`` (low-variance) estimator."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    test_freq: int = 10
    """Validate every N steps (and at step 0 and at the end)."""
    save_freq: int = 10
    """Checkpoint every N steps (0 = only at the end)."""
    keep_every: int = 0
    """Keep the checkpoints of steps that are multiples of N besides the latest (0 = only the latest);
    ``save_freq`` still decides which steps are saved. The prompt-level heatmaps load them ("mid")."""
    empty_stop_steps: int = 5
    """Stop after this many consecutive empty filter steps (0 = never)."""
    rv_collapse_stop: bool = True
    """Stop when in-group reward std stays below 10 % of its early baseline for 10 steps."""
    low_val_stop_patience: int = 5
    """Stop after this many consecutive validations with success < 0.01 (0 = never)."""
    report_to: str = "auto"
    """Where the per-step metrics go besides ``metrics.jsonl`` (always written): ``auto`` (dvclive when it is
    installed, as with the ``repro`` extra: the pipeline's ``dvc plots`` read it), ``none``, or a comma-separated
    list of ``dvclive`` (``<run_dir>/dvclive``), ``tensorboard`` (``<run_dir>/tensorboard``) and ``wandb`` (offline
    mode, ``<run_dir>/wandb``; ``wandb sync`` uploads it later)."""

    def __post_init__(self) -> None:
        validate("trainer", self, [
            ("algo", *one_of(ALGOS)), ("steps", *at_least(1)),
            ("actor_lr", *at_least(0)), ("critic_lr", *at_least(0)),
            ("mini_batch_size", *at_least(1)), ("micro_batch_size", *at_least(1)), ("ppo_epochs", *at_least(1)),
            ("logprob_micro_batch_size", *at_least(0)), ("precision", *one_of(PRECISIONS)),
            ("clip_low", *between(0, 1, open_high=True)), ("clip_high", *at_least(0)),
            ("dual_clip", lambda v: v == 0 or v > 1, "0 (off) or > 1"),
            ("max_refill_rounds", *at_least(0)), ("loss_agg_mode", *one_of(("preset", *LOSS_AGG_MODES))),
            ("gamma", *between(0, 1)), ("lam", *between(0, 1)),
            ("entropy_coef", *at_least(0)), ("entropy_scope", *one_of(ENTROPY_SCOPES)),
            ("kl_coef", *at_least(0)), ("kl_type", *one_of(KL_TYPES)),
            ("grad_clip", lambda v: v > 0, "> 0"), ("weight_decay", *at_least(0)),
            *[(name, *at_least(0)) for name in ("test_freq", "save_freq", "keep_every", "empty_stop_steps",
                                                  "low_val_stop_patience")],
            ("report_to", lambda v: v in ("auto", "none") or set(v.split(",")) <= set(REPORT_TO),
             f"auto, none or a comma-separated list of {', '.join(REPORT_TO)}"),
        ])


@dataclass(frozen=True)
class CollapseConfig:
    enabled: bool = True
    """Compute the MI / collapse diagnostics during training."""
    compute_freq: int = 5
    """At step 1 and every N steps."""
    num_samples: int = 64
    """Reasoning samples (rows) per family."""
    first_turn_enabled: bool = True
    """The first-turn family (columns = env groups)."""
    multi_turn_enabled: bool = True
    """The trajectory-uniform family (every draw its own column)."""
    std_eps: float = 1e-3
    """Epsilon of the MI z-score."""
    ema_decay: float = 0.9
    """Decay of the EMA variants."""
    warn_drop: float = 0.5
    """Warn when MI-ZScore-EMA falls this fraction below its running peak."""
    warn_min_peak: float = 0.1
    """... but only once that peak has reached this z-score: below it the z-score is the estimator's noise
    around 0 (a random-initialised policy), not MI that could collapse (``ragen2.metrics.mi.WARN_MIN_PEAK``)."""
    warn_noise_sigmas: float = 2.0
    """... and only when the peak clears 0, and the fall exceeds the estimator's noise, by this many
    standard errors (clustered by prompt; ``ragen2.metrics.CollapseMonitor``; 0 = off)."""

    def __post_init__(self) -> None:
        validate("collapse", self, [
            ("compute_freq", *at_least(1)), ("num_samples", *at_least(2)), ("std_eps", lambda v: v > 0, "> 0"),
            ("ema_decay", *between(0, 1, open_high=True)), ("warn_drop", *between(0, 1, open_low=True)),
            ("warn_min_peak", *at_least(0)), ("warn_noise_sigmas", *at_least(0)),
        ])


@dataclass(frozen=True)
class GradAnalysisConfig:
    enabled: bool = False
    """Run the RV-bucketed gradient decomposition during training."""
    every: int = 50
    """At steps 1, 1+N, 1+2N, ..."""
    num_buckets: int = 6
    """RV quantile buckets (4 = quartiles)."""

    def __post_init__(self) -> None:
        validate("grad_analysis", self, [("every", *at_least(1)), ("num_buckets", *at_least(1))])


@dataclass(frozen=True)
class RunConfig:
    seed: int = 0
    """Seed of the run (policy sampling, shuffling); env seeds come from ``rollout``."""
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    collapse: CollapseConfig = field(default_factory=CollapseConfig)
    grad_analysis: GradAnalysisConfig = field(default_factory=GradAnalysisConfig)

    def __post_init__(self) -> None:
        """Rules across sections."""
        if self.rollout.group_size < 2:
            raise ConfigError(f"rollout.group_size={self.rollout.group_size!r}: must be >= 2 (the filter and the "
                              "group-relative advantages need two rollouts of each prompt)")
        precision, dtype = self.trainer.precision, self.policy.dtype
        if precision != "auto" and dtype not in ("float32", PRECISION_DTYPES[precision]):
            allowed = "float32" if precision == "fp32" else f"float32 or {PRECISION_DTYPES[precision]}"
            raise ConfigError(f"trainer.precision={precision!r} with policy.dtype={dtype!r}: policy.dtype must be "
                              f"{allowed} (trained weights are float32 masters computing in trainer.precision; "
                              "policy.dtype is the frozen copies' dtype), e.g. trainer.precision=bf16 for bf16 training")


# ---------------------------------------------------------------------------------------------
# Strict conversion between dicts and dataclasses
# ---------------------------------------------------------------------------------------------
def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping for {_type_name(tp)}, got {value!r}")
        return from_dict(tp, value, where)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for arg in typing.get_args(tp):
            if arg is type(None):
                if value is None:
                    return None
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(f"{where}: {value!r} matches none of {tp}")
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        items = [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected a bool, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an int, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                raise ConfigError(f"{where}: expected a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r}")
    return value


def from_dict(cls: type, data: dict[str, Any], where: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``; unknown keys and wrong types raise :class:`ConfigError`."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        loc = f" in {where}" if where else ""
        raise ConfigError(f"unknown config key(s){loc}: {', '.join(repr(k) for k in unknown)}; "
                          f"known: {sorted(names)}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            key = f"{where}.{f.name}" if where else f.name
            kwargs[f.name] = _coerce(data[f.name], hints[f.name], key)
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field is missing
        raise ConfigError(f"{where or cls.__name__}: {e}") from None


def to_dict(cfg: Any) -> dict[str, Any]:
    """The dict (YAML) form of a config dataclass."""
    out = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            v = to_dict(v)
        elif isinstance(v, tuple):
            v = list(v)
        elif isinstance(v, dict):
            v = dict(v)
        out[f.name] = v
    return out


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level with dotted keys (``trainer.actor_lr``); lists become tuples (hashable)."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = tuple(value)
        else:
            out[name] = value
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated recursively by ``override`` (mappings merge, other values replace).

    ``env.kwargs`` is replaced as a whole when the override names a different environment.
    """
    out = dict(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "kwargs":
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r} is not of the form key.path=value")
    key, raw = item.split("=", 1)
    return key.strip().split("."), yaml.safe_load(raw)


def apply_overrides(cfg: RunConfig, overrides: list[str]) -> RunConfig:
    """Apply ``key.path=value`` overrides (values parsed as YAML) to a config, strictly."""
    data = to_dict(cfg)
    for item in overrides:
        path, value = _parse_override(item)
        node = data
        for i, part in enumerate(path[:-1]):
            if not isinstance(node.get(part), dict):
                raise ConfigError(f"override {item!r}: {'.'.join(path[: i + 1])!r} is not a config section")
            node = node[part]
        if path[-1] not in node and not (len(path) >= 2 and path[-2] == "kwargs"):
            raise ConfigError(f"override {item!r}: unknown key {'.'.join(path)!r}")
        node[path[-1]] = value
    return from_dict(type(cfg), data)


def read_params(params_path: str | Path = "params.yaml") -> dict[str, Any]:
    path = Path(params_path)
    if not path.exists():
        raise ConfigError(f"params file {str(path)!r} does not exist")
    try:
        with path.open() as fh:
            data = yaml.safe_load(fh) or {}
    except OSError as e:
        raise ConfigError(f"params file {str(path)!r} cannot be read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"params file {str(path)!r} is not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def run_ids(params_path: str | Path = "params.yaml") -> list[str]:
    """The run ids declared in ``params.yaml``."""
    return list((read_params(params_path).get("runs") or {}).keys())


def load_config(run_id: str | None = None, params_path: str | Path = "params.yaml",
                overrides: list[str] | None = None) -> RunConfig:
    """The :class:`RunConfig` of ``run_id`` (``base`` merged with ``runs[run_id]``), strictly checked.

    ``run_id=None`` returns the base config.
    """
    params = read_params(params_path)
    base = params.get("base") or {}
    data = base
    if run_id is not None:
        runs = params.get("runs") or {}
        if run_id not in runs:
            raise ConfigError(f"unknown run id {run_id!r} in {params_path}; "
                              f"{len(runs)} runs are declared")
        data = deep_merge(base, runs[run_id] or {})
    cfg = from_dict(RunConfig, data)
    return apply_overrides(cfg, overrides or [])
