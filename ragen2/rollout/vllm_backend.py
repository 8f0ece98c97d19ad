"""vLLM rollouts on a CUDA GPU: the :class:`~ragen2.rollout.backends.GenerationBackend` contract on vLLM.

Written against the vLLM versions TRL 1.16 accepts (``>=0.22.0,<=0.31.0``, the ``vllm`` extra of
``pyproject.toml``), V1 engine, offline ``LLM`` API. **Never run here**: vLLM cannot be installed on
the CPU machine this package was built on, so everything that touches vLLM itself is unverified;
the pure parts (sampling-parameter mapping, per-request seeds, stop-token cut, error messages) are
unit-tested without vLLM in ``tests/rollout/test_vllm_backend.py``.

Contract (the same as :class:`~ragen2.rollout.backends.HFBackend`): token-id prompts in, for each
prompt the new token ids out, cut before the first stop token (``<|im_end|>`` / EOS, not returned).
Sampling is plain temperature sampling (``top_p=1``, top-k off, ``n=1``); greedy is temperature 0.
Each prompt gets its own sampling seed derived from ``(seed, row)``, so the members of a group that
share a prompt still draw different samples, and the same seed gives the same requests. vLLM does
not promise batch-invariant numerics, so "same seed, same tokens" holds only up to that (and the
tokens are not the ones :class:`HFBackend` would draw).

Weight sync (the engine holds its own copy of the weights). The engine is built with
``distributed_executor_backend="external_launcher"``: its single worker lives in *this* process
(the colocated layout TRL 1.16 uses for these vLLM versions), so :meth:`VLLMBackend.sync_weights`
hands the training model's tensors straight to the vLLM model's ``load_weights`` (found at
``llm.llm_engine.model_executor.driver_worker[.worker].model_runner.model``; if neither path exists,
``LLM.apply_model``, which runs a function on the in-process model, is used). ``load_weights``
accepts Hugging Face parameter names and fuses q/k/v and gate/up itself, and converts dtype on copy.
Then the prefix cache is reset (it holds KV entries computed with the old weights).

>>> backend = make_vllm_backend(actor, tokenizer, gpu_memory_utilization=0.3)  # doctest: +SKIP
>>> new_ids = backend.generate(prompt_ids, 400, temperature=1.0, seed=7)     # doctest: +SKIP
>>> backend.sync_weights(actor)  # after every optimiser update                # doctest: +SKIP

The trainer builds it from ``rollout.vllm_*`` (:func:`ragen2.rollout.backends.backend_settings`): memory share,
longest sequence, eager mode, engine dtype and how often weights are pushed.
"""

from __future__ import annotations

import os
import socket
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ragen2.rollout.stops import stop_token_ids

SUPPORTED_VLLM = ("0.22.0", "0.31.0")
"""Inclusive vLLM version range this module was written against (TRL 1.16's range)."""
INSTALL_HINT = "install the GPU extra on a CUDA machine: pip install -e '.[vllm]' (ragen2[vllm])"
MAX_NUM_BATCHED_TOKENS = 4096
"""Tokens one engine step schedules at most. vLLM's default for offline use (tens of thousands) makes its start-up
memory profile run a dummy batch that large, which in a training process sharing the GPU overstates the
activation memory generation needs and leaves the KV cache too small or the start failing; colocated trainers
(TRL's vLLM colocate mode among them) set a few thousand. Chunked prefill splits longer prompts across steps."""


# ---------------------------------------------------------------------------------------------
# Pure helpers (no vLLM needed; unit-tested on CPU)
# ---------------------------------------------------------------------------------------------
def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def version_supported(version: str) -> bool:
    """Whether ``version`` lies in :data:`SUPPORTED_VLLM` (local suffixes like ``+cu128`` ignored)."""
    low, high = (_version_tuple(v) for v in SUPPORTED_VLLM)
    return low <= _version_tuple(version) <= high


def top_k_off(version: str) -> int:
    """The ``top_k`` value that disables top-k in ``version``: 0 in the supported range, -1 before.

    TRL 1.16 passes ``top_k=0`` to vLLM's ``SamplingParams`` for the versions it accepts; vLLM
    releases from before ``0.10`` documented ``-1`` as the only "disabled" value and rejected 0.
    """
    return -1 if _version_tuple(version) < (0, 10, 0) else 0


def request_seeds(seed: int, num_prompts: int) -> list[int]:
    """One 31-bit sampling seed per prompt row, derived from ``(seed, row)``; distinct rows, same seed
    -> different draws; same ``seed`` -> the same list."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed!r}")
    state = np.random.SeedSequence(int(seed)).generate_state(num_prompts, dtype=np.uint32)
    return [int(s) & 0x7FFFFFFF for s in state]


def sampling_kwargs(num_prompts: int, max_new_tokens: int, temperature: float, seed: int, stop_ids: list[int],
                    *, greedy: bool, top_k_disabled: int = 0) -> list[dict[str, Any]]:
    """Keyword arguments of vLLM ``SamplingParams``, one dict per prompt.

    Args:
        num_prompts: Prompts in the batch.
        max_new_tokens: ``max_tokens`` of each request.
        temperature: Sampling temperature (> 0 unless ``greedy``).
        seed: Batch seed; each row gets its own seed from :func:`request_seeds`.
        stop_ids: Token ids that end a response (``stop_token_ids``).
        greedy: Greedy decoding (``temperature=0``, no seed).
        top_k_disabled: vLLM's "top-k off" value (:func:`top_k_off`).
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}")
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature!r}")
    if not stop_ids:
        raise ValueError("stop_ids is empty: a response needs at least one stop token")
    seeds = [None] * num_prompts if greedy else request_seeds(seed, num_prompts)
    return [{"n": 1, "temperature": 0.0 if greedy else float(temperature), "top_p": 1.0,
             "top_k": top_k_disabled, "min_p": 0.0, "max_tokens": int(max_new_tokens),
             "stop_token_ids": list(stop_ids), "seed": row_seed} for row_seed in seeds]


def cut_at_stop(tokens, stop_ids) -> list[int]:
    """``tokens`` (any int sequence) up to, not including, the first stop token."""
    stops = set(stop_ids)
    out = []
    for token in tokens:
        if int(token) in stops:
            break
        out.append(int(token))
    return out


def vllm_param_name(name: str) -> str:
    """A training-model parameter name as a Hugging Face checkpoint would spell it (wrapper prefixes of
    DDP ``module.``, ``torch.compile`` ``_orig_mod.`` and activation checkpointing removed)."""
    for prefix in ("module.", "_orig_mod.", "_checkpoint_wrapped_module."):
        name = name.replace(prefix, "")
    return name


def named_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(hf_name, tensor)`` for every entry of ``model.state_dict()``, detached (what ``load_weights``
    takes). PEFT models are refused: merge the adapters first."""
    if hasattr(model, "peft_config"):
        raise ValueError("sync_weights got a PEFT model: merge the adapters (merge_and_unload) before syncing")
    for name, tensor in model.state_dict().items():
        yield vllm_param_name(name), tensor.detach()


# ---------------------------------------------------------------------------------------------
# Availability
# ---------------------------------------------------------------------------------------------
def require_vllm():
    """Import vLLM and check that a CUDA device is present; clear errors otherwise.

    Raises:
        ImportError: vLLM is not installed (names the ``vllm`` extra).
        RuntimeError: no CUDA device is visible to torch.
    """
    try:
        import vllm
    except ImportError as err:
        raise ImportError(f"rollout.backend='vllm' needs vLLM, which is not installed; {INSTALL_HINT}. "
                          "On a CPU use rollout.backend='hf'.") from err
    if not torch.cuda.is_available():
        raise RuntimeError("rollout.backend='vllm' needs a CUDA GPU, but torch.cuda.is_available() is False "
                           f"(torch {torch.__version__}); use rollout.backend='hf' on a CPU.")
    version = getattr(vllm, "__version__", "0")
    if not version_supported(version):
        warnings.warn(f"vLLM {version} is outside the range this backend was written against "
                      f"({SUPPORTED_VLLM[0]}-{SUPPORTED_VLLM[1]}); generation or sync_weights may fail",
                      RuntimeWarning, stacklevel=2)
    return vllm


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("localhost", 0))
        return int(sock.getsockname()[1])


def _single_process_dist_env(tensor_parallel_size: int) -> None:
    """``external_launcher`` reads torch.distributed's variables; fill them in for a plain process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if tensor_parallel_size > 1 and world != tensor_parallel_size:
        raise ValueError(f"tensor_parallel_size={tensor_parallel_size} needs the process to be one of "
                         f"{tensor_parallel_size} ranks started by torchrun (external_launcher), but "
                         f"WORLD_SIZE={world}; the ragen2 trainer is one process: use tensor_parallel_size=1")
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "localhost")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(_free_port()))


# ---------------------------------------------------------------------------------------------
# The backend
# ---------------------------------------------------------------------------------------------
class VLLMBackend:
    """Batched sampling with a colocated vLLM engine (one GPU, tensor parallel over torchrun ranks).

    Args:
        model_path: What vLLM loads at start (a local directory or a cached hub id); the weights are
            replaced by :meth:`sync_weights` anyway, so only the architecture and tokenizer must match.
        tokenizer: The policy's tokenizer (for the stop tokens).
        gpu_memory_utilization: Fraction of the GPU's memory vLLM may take (weights + KV cache);
            the paper uses 0.3 (0.5 in the sweeps).
        tensor_parallel_size: GPUs per engine; > 1 only inside a torchrun launch of that many ranks.
        enforce_eager: No CUDA graphs (the paper's setting; less memory, slower decoding).
        max_model_len: Longest prompt + response in tokens (paper: 3600 context + 400 new tokens).
        dtype: Engine dtype (``bfloat16``, ``float16``, ``auto``).
        seed: Engine seed (per-request seeds are set on every request anyway).
        max_num_seqs: Most sequences one engine step runs (None: vLLM's default); the trainer passes its largest
            rollout batch.
        max_num_batched_tokens: Most tokens one engine step schedules (:data:`MAX_NUM_BATCHED_TOKENS`).
        llm: An already-built ``vllm.LLM`` to use instead of building one (for sharing an engine).
        **llm_kwargs: Passed on to ``vllm.LLM``.
    """

    def __init__(self, model_path: str, tokenizer, *, gpu_memory_utilization: float = 0.3,
                 tensor_parallel_size: int = 1, enforce_eager: bool = True, max_model_len: int = 4096,
                 dtype: str = "bfloat16", seed: int = 0, max_num_seqs: int | None = None,
                 max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS, llm=None, **llm_kwargs):
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization!r}")
        if tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size must be >= 1, got {tensor_parallel_size!r}")
        if max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {max_model_len!r}")
        if max_num_seqs is not None and max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs!r}")
        if max_num_batched_tokens < 1:
            raise ValueError(f"max_num_batched_tokens must be >= 1, got {max_num_batched_tokens!r}")
        llm_kwargs["max_num_batched_tokens"] = int(max_num_batched_tokens)
        if max_num_seqs is not None:
            llm_kwargs["max_num_seqs"] = int(max_num_seqs)
        self.stop_ids = stop_token_ids(tokenizer)
        self.max_model_len = int(max_model_len)
        self.settings = {"model_path": str(model_path), "gpu_memory_utilization": float(gpu_memory_utilization),
                         "tensor_parallel_size": int(tensor_parallel_size), "enforce_eager": bool(enforce_eager),
                         "max_model_len": int(max_model_len), "dtype": dtype, "seed": int(seed), **llm_kwargs}
        if llm is not None:
            self.llm, self._top_k_off = llm, 0
            return
        vllm = require_vllm()
        self._top_k_off = top_k_off(getattr(vllm, "__version__", "0"))
        _single_process_dist_env(tensor_parallel_size)
        self.llm = vllm.LLM(model=str(model_path), tokenizer=str(model_path), dtype=dtype, seed=int(seed),
                            gpu_memory_utilization=float(gpu_memory_utilization),
                            tensor_parallel_size=int(tensor_parallel_size), enforce_eager=bool(enforce_eager),
                            max_model_len=int(max_model_len), distributed_executor_backend="external_launcher",
                            generation_config="vllm",  # never the checkpoint's top_k/top_p/penalty defaults
                            **llm_kwargs)

    def generate(self, prompts_ids: list[list[int]], max_new_tokens: int, temperature: float, seed: int,
                 *, greedy: bool = False) -> list[list[int]]:
        """New tokens for each prompt, cut before the first stop token (which is not returned)."""
        if any(len(p) == 0 for p in prompts_ids):
            raise ValueError("empty prompt in the generation batch")
        longest = max((len(p) for p in prompts_ids), default=0)
        if longest + max_new_tokens > self.max_model_len:
            raise ValueError(f"prompt of {longest} tokens + max_new_tokens={max_new_tokens} exceeds "
                             f"max_model_len={self.max_model_len}; raise max_model_len")
        requests = sampling_kwargs(len(prompts_ids), max_new_tokens, temperature, seed, self.stop_ids,
                                   greedy=greedy, top_k_disabled=self._top_k_off)
        if not requests:
            return []
        params = [_sampling_params(**kw) for kw in requests]
        prompts = [{"prompt_token_ids": [int(t) for t in p]} for p in prompts_ids]  # a TokensPrompt each
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        return [cut_at_stop(out.outputs[0].token_ids, self.stop_ids) for out in outputs]

    @torch.no_grad()
    def sync_weights(self, model: torch.nn.Module) -> int:
        """Copy ``model``'s current weights into the engine; returns the number of tensors sent.

        Call after every optimiser update (before the next rollout). ``model`` may be a DDP wrapper or
        a ``torch.compile`` module; under FSDP/ZeRO-3 gather the full parameters first.
        """
        weights = list(named_weights(model))
        target = _engine_model(self.llm)
        if target is not None:
            target.load_weights(iter(weights))
        elif hasattr(self.llm, "apply_model"):
            self.llm.apply_model(lambda engine_model: engine_model.load_weights(iter(weights)))
        else:
            raise RuntimeError("cannot reach the vLLM model to load weights (no driver_worker model_runner and "
                               f"no LLM.apply_model); written for vLLM {SUPPORTED_VLLM[0]}-{SUPPORTED_VLLM[1]}")
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()
        return len(weights)


def _sampling_params(**kwargs):
    from vllm import SamplingParams

    return SamplingParams(**kwargs)


def _engine_model(llm):
    """The in-process vLLM ``nn.Module`` (``external_launcher`` layout), or ``None`` if not reachable."""
    worker = getattr(getattr(getattr(llm, "llm_engine", None), "model_executor", None), "driver_worker", None)
    for holder in (worker, getattr(worker, "worker", None)):
        model = getattr(getattr(holder, "model_runner", None), "model", None)
        if model is not None and hasattr(model, "load_weights"):
            return model
    return None


# ---------------------------------------------------------------------------------------------
# One engine per process
# ---------------------------------------------------------------------------------------------
_SHARED: dict[str, Any] = {}


def model_path_of(model) -> str:
    """Where ``model`` was loaded from (``name_or_path``), for vLLM to load the architecture."""
    base = getattr(model, "module", model)
    path = getattr(base, "name_or_path", None) or getattr(getattr(base, "config", None), "_name_or_path", None)
    if not path:
        raise ValueError("the model has no name_or_path; pass the checkpoint directory as model_path")
    return str(path)


def weights_version(model: torch.nn.Module) -> tuple[int, int]:
    """``(id(model), sum of its tensors' version counters)``: changes whenever a parameter or buffer of ``model``
    is written in place (an optimiser step, ``load_state_dict``), so an unchanged model need not be synced again."""
    tensors = [*model.parameters(), *model.buffers()]
    return id(model), sum(int(t._version) for t in tensors)


def make_vllm_backend(model, tokenizer, *, sync_every: int = 1, **kwargs) -> VLLMBackend:
    """The process's vLLM backend, built on first use, with ``model``'s current weights synced in.

    A GPU holds one engine per process, and callers such as the trainer loop ask for a backend before
    every rollout; so the first call builds the engine and later calls with the same settings reuse it.
    The calls are counted: on calls ``1, 1 + sync_every, 1 + 2 sync_every, ...`` ``model``'s weights are pushed
    (:meth:`VLLMBackend.sync_weights`) unless they are unchanged since the last push (:func:`weights_version`).
    With ``sync_every=1`` (``rollout.vllm_sync_every``'s default) every rollout after an update samples from the
    updated weights; ``0`` never pushes (the engine keeps the checkpoint it loaded). Other engine settings in the
    same process are an error.

    Args:
        model: The training policy (its ``name_or_path`` is what vLLM loads at start).
        tokenizer: Its tokenizer.
        sync_every: Push the weights on every N-th call (0 = never).
        **kwargs: :class:`VLLMBackend` arguments (``gpu_memory_utilization``, ``tensor_parallel_size``,
            ``enforce_eager``, ``max_model_len``, ``dtype``, ...).
    """
    if sync_every < 0:
        raise ValueError(f"sync_every must be >= 0, got {sync_every!r}")
    path = kwargs.pop("model_path", None) or model_path_of(model)
    backend = _SHARED.get("backend")
    if backend is None:
        backend = VLLMBackend(path, tokenizer, **kwargs)
        _SHARED.update(backend=backend, calls=0, synced=None)
    else:
        asked = {k: v for k, v in kwargs.items() if k != "llm"}  # an injected engine is not a setting
        wanted = {**backend.settings, "model_path": str(path), **asked}
        if wanted != backend.settings:
            changed = sorted(k for k in wanted if wanted[k] != backend.settings.get(k))
            raise RuntimeError(f"a vLLM engine with other settings already runs in this process (differs in "
                               f"{changed}); one engine per process")
    _SHARED["calls"] = _SHARED.get("calls", 0) + 1
    version = weights_version(model)
    if sync_every and (_SHARED["calls"] - 1) % sync_every == 0 and version != _SHARED.get("synced"):
        backend.sync_weights(model)
        _SHARED["synced"] = version
    return backend
