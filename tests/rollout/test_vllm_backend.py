"""VLLMBackend: pure parts and error paths on CPU (no vLLM needed), the engine itself on a CUDA GPU.

The CPU tests drive :class:`VLLMBackend` through a stand-in engine object (``llm=``) and a stand-in
``SamplingParams``; the ``gpu`` tests need vLLM and CUDA and are skipped otherwise.
"""

import sys
import tempfile
import types
from pathlib import Path

import pytest
import torch
import yaml

from ragen2.rollout import vllm_backend
from ragen2.rollout.backends import HFBackend, make_backend
from ragen2.rollout.vllm_backend import (
    VLLMBackend,
    cut_at_stop,
    make_vllm_backend,
    request_seeds,
    sampling_kwargs,
    top_k_off,
    version_supported,
    vllm_param_name,
)

ROOT = Path(__file__).resolve().parents[2]
ACCELERATE_DIR = ROOT / "configs" / "accelerate"
IM_END, EOS = 5, 6


class StubTokenizer:
    """Only what the backends read: the vocabulary (stop tokens) and the EOS id."""

    eos_token_id = EOS
    pad_token_id = 0

    def get_vocab(self):
        return {"<|im_end|>": IM_END, "<|endoftext|>": EOS, "a": 7, "b": 8}


def tiny_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
    model = LlamaForCausalLM(cfg)
    model.name_or_path = "/models/tiny"
    return model


# ---------------------------------------------------------------------------------------------
# Pure mapping
# ---------------------------------------------------------------------------------------------
def test_sampling_kwargs_sampling_maps_every_field():
    reqs = sampling_kwargs(3, 400, 1.0, seed=11, stop_ids=[IM_END, EOS], greedy=False, top_k_disabled=0)
    assert len(reqs) == 3
    for req in reqs:
        assert {k: v for k, v in req.items() if k != "seed"} == {
            "n": 1, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "max_tokens": 400,
            "stop_token_ids": [IM_END, EOS]}
    seeds = [r["seed"] for r in reqs]
    assert seeds == request_seeds(11, 3)
    assert len(set(seeds)) == 3, "identical prompts of a group must not share a sampling seed"


def test_sampling_kwargs_greedy_is_temperature_zero_without_seed():
    reqs = sampling_kwargs(2, 5, 0.0, seed=3, stop_ids=[EOS], greedy=True, top_k_disabled=-1)
    assert [r["temperature"] for r in reqs] == [0.0, 0.0]
    assert [r["seed"] for r in reqs] == [None, None]
    assert reqs[0]["top_k"] == -1


@pytest.mark.parametrize("kwargs, message", [
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"temperature": 0.0}, "temperature"),
    ({"stop_ids": []}, "stop_ids"),
    ({"seed": -1}, "seed"),
])
def test_sampling_kwargs_rejects_bad_values(kwargs, message):
    args = {"max_new_tokens": 4, "temperature": 1.0, "seed": 0, "stop_ids": [EOS]} | kwargs
    with pytest.raises(ValueError, match=message):
        sampling_kwargs(2, greedy=False, **args)


def test_request_seeds_deterministic_distinct_and_in_31_bits():
    a, b = request_seeds(123, 64), request_seeds(123, 64)
    assert a == b
    assert len(set(a)) == 64
    assert request_seeds(124, 64) != a
    assert all(0 <= s < 2**31 for s in a)
    assert request_seeds(123, 8) == a[:8], "a row's seed must not depend on the batch size"


def test_version_helpers():
    assert version_supported("0.22.0") and version_supported("0.31.0") and version_supported("0.25.1+cu128")
    assert not version_supported("0.21.9") and not version_supported("0.33.0")
    assert top_k_off("0.25.0") == 0 and top_k_off("0.8.3") == -1


def test_cut_at_stop_and_param_names():
    assert cut_at_stop([7, 8, IM_END, 7], [IM_END, EOS]) == [7, 8]
    assert cut_at_stop([7, 8], [IM_END]) == [7, 8]
    assert cut_at_stop([EOS], [EOS]) == []
    assert vllm_param_name("module._orig_mod.model.layers.0.mlp.up_proj.weight") == "model.layers.0.mlp.up_proj.weight"


# ---------------------------------------------------------------------------------------------
# Error paths of make_backend("vllm")
# ---------------------------------------------------------------------------------------------
def test_require_vllm_without_vllm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, installed or not
    with pytest.raises(ImportError, match=r"\.\[vllm\]"):
        vllm_backend.require_vllm()


def test_make_backend_vllm_without_cuda_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.25.0"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(vllm_backend, "_SHARED", {})
    with pytest.raises(RuntimeError, match="CUDA"):
        make_backend("vllm", tiny_model(), StubTokenizer())


def test_require_vllm_warns_outside_the_written_range(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.33.0"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.warns(RuntimeWarning, match="0.33.0"):
        vllm_backend.require_vllm()


def test_tensor_parallel_needs_a_torchrun_launch(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.25.0"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ValueError, match="tensor_parallel_size=2"):
        VLLMBackend("/models/tiny", StubTokenizer(), tensor_parallel_size=2)


def test_unknown_backend_still_rejected():
    with pytest.raises(ValueError, match="'vlm'"):
        make_backend("vlm", tiny_model(), StubTokenizer())


# ---------------------------------------------------------------------------------------------
# VLLMBackend logic with a stand-in engine
# ---------------------------------------------------------------------------------------------
class FakeEngineModel:
    def __init__(self):
        self.loaded: dict[str, torch.Tensor] = {}

    def load_weights(self, weights):
        for name, tensor in weights:
            self.loaded[name] = tensor.clone()


class FakeLLM:
    """Mimics ``LLM.generate``: answers prompt i with ``scripts[i]``; records what it was given."""

    def __init__(self, scripts=(), nested_worker=True):
        self.scripts, self.calls, self.resets = list(scripts), [], 0
        self.engine_model = FakeEngineModel()
        runner = types.SimpleNamespace(model_runner=types.SimpleNamespace(model=self.engine_model))
        worker = types.SimpleNamespace(worker=runner) if nested_worker else runner
        self.llm_engine = types.SimpleNamespace(model_executor=types.SimpleNamespace(driver_worker=worker))

    def generate(self, prompts, sampling_params, use_tqdm):
        self.calls.append((prompts, sampling_params))
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=tuple(self.scripts[i]))])
                for i in range(len(prompts))]

    def reset_prefix_cache(self):
        self.resets += 1


@pytest.fixture
def stub_sampling_params(monkeypatch):
    monkeypatch.setattr(vllm_backend, "_sampling_params", lambda **kw: dict(kw))


def test_generate_sends_token_prompts_and_cuts_at_stop(stub_sampling_params):
    llm = FakeLLM(scripts=[[7, 8, IM_END, 7], [8, 8, 8], [EOS]])
    backend = VLLMBackend("/models/tiny", StubTokenizer(), llm=llm, max_model_len=32)
    out = backend.generate([[1, 2], [1, 2], [3]], 4, temperature=1.0, seed=5)
    assert out == [[7, 8], [8, 8, 8], []]
    (prompts, params), = llm.calls
    assert prompts == [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}]
    assert params == sampling_kwargs(3, 4, 1.0, 5, [IM_END, EOS], greedy=False, top_k_disabled=0)


def test_generate_rejects_too_long_and_empty_prompts(stub_sampling_params):
    backend = VLLMBackend("/models/tiny", StubTokenizer(), llm=FakeLLM(), max_model_len=8)
    with pytest.raises(ValueError, match="max_model_len=8"):
        backend.generate([[1] * 5], 4, temperature=1.0, seed=0)
    with pytest.raises(ValueError, match="empty prompt"):
        backend.generate([[1], []], 2, temperature=1.0, seed=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization"),
    ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
    ({"max_model_len": 1}, "max_model_len"),
])
def test_constructor_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        VLLMBackend("/models/tiny", StubTokenizer(), llm=FakeLLM(), **kwargs)


class Wrapper(torch.nn.Module):
    """Like DistributedDataParallel: the real model under ``.module``."""

    def __init__(self, module):
        super().__init__()
        self.module = module


@pytest.mark.parametrize("nested_worker", [True, False])
def test_sync_weights_sends_hf_names_and_values_and_resets_cache(nested_worker):
    model = tiny_model()
    llm = FakeLLM(nested_worker=nested_worker)
    backend = VLLMBackend("/models/tiny", StubTokenizer(), llm=llm)
    sent = backend.sync_weights(Wrapper(model))  # DDP-style "module." prefix is stripped
    state = model.state_dict()
    assert sent == len(state)
    assert set(llm.engine_model.loaded) == set(state)
    for name, tensor in state.items():
        assert torch.equal(llm.engine_model.loaded[name], tensor)
    assert llm.resets == 1


def test_sync_weights_falls_back_to_apply_model():
    model = tiny_model()
    engine_model = FakeEngineModel()
    llm = types.SimpleNamespace(apply_model=lambda fn: [fn(engine_model)])
    VLLMBackend("/models/tiny", StubTokenizer(), llm=llm).sync_weights(model)
    assert set(engine_model.loaded) == set(model.state_dict())


def test_sync_weights_refuses_peft_models():
    model = tiny_model()
    model.peft_config = {"default": object()}
    with pytest.raises(ValueError, match="merge"):
        VLLMBackend("/models/tiny", StubTokenizer(), llm=FakeLLM()).sync_weights(model)


def test_make_vllm_backend_shares_one_engine_and_syncs_every_call(monkeypatch):
    monkeypatch.setattr(vllm_backend, "_SHARED", {})
    llm = FakeLLM()
    model = tiny_model()
    first = make_vllm_backend(model, StubTokenizer(), llm=llm, gpu_memory_utilization=0.3)
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)  # an "optimiser update"
    second = make_vllm_backend(model, StubTokenizer(), llm=llm, gpu_memory_utilization=0.3)
    assert second is first
    assert llm.resets == 2
    assert torch.equal(llm.engine_model.loaded["lm_head.weight"], model.lm_head.weight)
    with pytest.raises(RuntimeError, match="gpu_memory_utilization"):
        make_vllm_backend(model, StubTokenizer(), llm=llm, gpu_memory_utilization=0.5)


def test_make_vllm_backend_needs_a_model_path(monkeypatch):
    monkeypatch.setattr(vllm_backend, "_SHARED", {})
    model = tiny_model()
    model.name_or_path = ""
    model.config._name_or_path = ""
    with pytest.raises(ValueError, match="name_or_path"):
        make_vllm_backend(model, StubTokenizer(), llm=FakeLLM())


# ---------------------------------------------------------------------------------------------
# accelerate configs
# ---------------------------------------------------------------------------------------------
EXPECTED_CONFIGS = {"single_gpu.yaml": ("NO", 1), "multi_gpu_ddp.yaml": ("MULTI_GPU", 8),
                    "deepspeed_zero3.yaml": ("DEEPSPEED", 8), "fsdp.yaml": ("FSDP", 8)}


@pytest.mark.parametrize("name", sorted(EXPECTED_CONFIGS))
def test_accelerate_config_parses_with_accelerate(name):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser

    path = ACCELERATE_DIR / name
    raw = yaml.safe_load(path.read_text())
    for key in ("compute_environment", "distributed_type", "num_processes", "mixed_precision"):
        assert key in raw, f"{name} lacks {key}"
    cfg = load_config_from_file(str(path))  # rejects unknown top-level keys
    distributed_type, processes = EXPECTED_CONFIGS[name]
    assert str(cfg.distributed_type.value) == distributed_type
    assert cfg.num_processes == processes and cfg.mixed_precision == "bf16"
    # Nested keys are copied onto `accelerate launch` arguments without a check: a typo would be
    # silently ignored, so each must be a real launch argument.
    launch_args = {action.dest for action in launch_command_parser()._actions}
    nested = dict(cfg.deepspeed_config or {}) | dict(cfg.fsdp_config or {})
    assert set(nested) <= launch_args, sorted(set(nested) - launch_args)
    if distributed_type == "DEEPSPEED":
        assert nested["zero_stage"] == 3
    if distributed_type == "FSDP":
        assert nested["fsdp_version"] == 2 and nested["fsdp_transformer_layer_cls_to_wrap"] == "Qwen2DecoderLayer"


# ---------------------------------------------------------------------------------------------
# The real engine (CUDA + vLLM only)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_engine():
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from ragen2.config import PolicyConfig
    from ragen2.policy import load_policy, make_tiny_policy

    cfg = PolicyConfig(hidden_size=128, num_layers=2, num_heads=2, intermediate_size=256, max_positions=512,
                       tokenizer_vocab_size=512)
    with tempfile.TemporaryDirectory() as tmp:
        path = make_tiny_policy(cfg, ["frozenlake"], Path(tmp), seed=0)
        model, tokenizer = load_policy(path, device="cuda")
        # head_dim 64: a size every vLLM attention backend supports
        backend = VLLMBackend(str(path), tokenizer, gpu_memory_utilization=0.2, max_model_len=512,
                              dtype="float32")
        yield backend, model, tokenizer


@pytest.mark.gpu
def test_real_engine_generates_within_contract(real_engine):
    backend, model, tokenizer = real_engine
    prompt = tokenizer("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
                       add_special_tokens=False)["input_ids"]
    out = backend.generate([prompt] * 4, 16, temperature=1.0, seed=3)
    assert len(out) == 4 and all(len(o) <= 16 for o in out)
    assert not any(t in backend.stop_ids for o in out for t in o)
    assert backend.generate([prompt] * 4, 16, temperature=1.0, seed=3) == out
    greedy = backend.generate([prompt] * 2, 16, temperature=0.0, seed=0, greedy=True)
    assert greedy[0] == greedy[1]


@pytest.mark.gpu
def test_real_engine_sync_weights_reaches_the_engine(real_engine):
    backend, model, _ = real_engine
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(0.5)
    backend.sync_weights(model)
    engine_model = vllm_backend._engine_model(backend.llm)
    assert engine_model is not None
    engine_embed = dict(engine_model.named_parameters())["model.embed_tokens.weight"]
    vocab = model.model.embed_tokens.weight.shape[0]
    assert torch.allclose(engine_embed[:vocab].float().cpu(), model.model.embed_tokens.weight.float().cpu())


def test_trl_paper_args_are_grpo_config_fields():
    import dataclasses

    from trl import GRPOConfig

    args = yaml.safe_load((ROOT / "configs" / "trl_grpo_paper.yaml").read_text())
    unknown = set(args) - {f.name for f in dataclasses.fields(GRPOConfig)}
    assert not unknown, sorted(unknown)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = GRPOConfig(**(args | {"bf16": False}), output_dir=tmp, use_cpu=True)  # bf16 needs a GPU
    # one group of 16 per GPU per step: 8 GPUs x 16 = the paper's 8 x 16 batch
    assert cfg.generation_batch_size == cfg.num_generations == 16
    assert (cfg.learning_rate, cfg.epsilon, cfg.epsilon_high, cfg.beta) == (1e-6, 0.2, 0.28, 0.0)


# ---------------------------------------------------------------------------------------------
# Engine settings from the config, weight-sync interval
# ---------------------------------------------------------------------------------------------
def test_backend_settings_pass_the_rollout_keys_to_the_engine(monkeypatch):
    from ragen2.config import RolloutConfig
    from ragen2.rollout.backends import backend_settings

    assert backend_settings(RolloutConfig()) == {}  # hf: nothing to pass
    cfg = RolloutConfig(backend="vllm", vllm_gpu_memory_utilization=0.2, vllm_enforce_eager=False,
                        vllm_dtype="float16", vllm_sync_every=3, max_context_tokens=100, max_new_tokens=20)
    settings = backend_settings(cfg)
    assert settings == {"gpu_memory_utilization": 0.2, "max_model_len": 120, "enforce_eager": False,
                        "dtype": "float16", "sync_every": 3,
                        "max_num_seqs": max(cfg.env_groups * cfg.group_size, cfg.val_groups)}
    assert backend_settings(RolloutConfig(backend="vllm", vllm_max_model_len=8192))["max_model_len"] == 8192
    monkeypatch.setattr(vllm_backend, "_SHARED", {})
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.25.0"))  # "installed"
    backend = make_backend("vllm", tiny_model(), StubTokenizer(), llm=FakeLLM(), **settings)
    assert {k: backend.settings[k] for k in ("gpu_memory_utilization", "max_model_len", "enforce_eager", "dtype")} == \
        {"gpu_memory_utilization": 0.2, "max_model_len": 120, "enforce_eager": False, "dtype": "float16"}


def test_collect_rollouts_builds_its_backend_from_the_config(monkeypatch):
    from ragen2.config import EnvConfig, RolloutConfig
    from ragen2.rollout import collect

    seen = {}

    class Stop(Exception):
        pass

    def fake_make_backend(name, model, tokenizer, **kwargs):
        seen.update(name=name, **kwargs)
        raise Stop

    monkeypatch.setattr(collect, "make_backend", fake_make_backend)
    cfg = RolloutConfig(backend="vllm", vllm_gpu_memory_utilization=0.5, vllm_sync_every=0)
    with pytest.raises(Stop):
        collect.collect_rollouts(tiny_model(), StubTokenizer(), EnvConfig(), cfg, [0], group_size=2,
                                 temperature=1.0, seed=0)
    assert seen["name"] == "vllm" and seen["gpu_memory_utilization"] == 0.5 and seen["sync_every"] == 0
    assert seen["max_model_len"] == cfg.max_context_tokens + cfg.max_new_tokens


def test_unchanged_weights_are_not_synced_again(monkeypatch):
    monkeypatch.setattr(vllm_backend, "_SHARED", {})
    llm, model = FakeLLM(), tiny_model()
    for _ in range(3):  # e.g. the step-0 validation, the first rollout, DAPO refills: the same weights
        make_vllm_backend(model, StubTokenizer(), llm=llm)
    assert llm.resets == 1
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)
    make_vllm_backend(model, StubTokenizer(), llm=llm)
    assert llm.resets == 2 and torch.equal(llm.engine_model.loaded["lm_head.weight"], model.lm_head.weight)


@pytest.mark.parametrize("sync_every, synced_on_calls", [(0, []), (1, [1, 2, 3, 4, 5]), (2, [1, 3, 5]),
                                                         (3, [1, 4])])
def test_sync_every_pushes_on_every_nth_call(monkeypatch, sync_every, synced_on_calls):
    monkeypatch.setattr(vllm_backend, "_SHARED", {})
    llm, model = FakeLLM(), tiny_model()
    synced = []
    for call in range(1, 6):
        with torch.no_grad():
            model.lm_head.weight.add_(1.0)  # an update before every rollout
        resets = llm.resets
        make_vllm_backend(model, StubTokenizer(), llm=llm, sync_every=sync_every)
        if llm.resets > resets:
            synced.append(call)
    assert synced == synced_on_calls


@pytest.mark.parametrize("override, message", [
    ({"vllm_gpu_memory_utilization": 0.0}, r"rollout.vllm_gpu_memory_utilization=0.0: must be in \(0, 1\]"),
    ({"vllm_max_model_len": 1000}, r"rollout.vllm_max_model_len=1000: must be 0 \(auto\) or >= "
                                   r"max_context_tokens \+ max_new_tokens = 4000"),
    ({"vllm_dtype": "fp8"}, "rollout.vllm_dtype='fp8': must be one of bfloat16, float16, float32"),
    ({"vllm_sync_every": -1}, "rollout.vllm_sync_every=-1: must be >= 0"),
])
def test_vllm_keys_are_validated(override, message):
    from ragen2.config import ConfigError, RolloutConfig

    with pytest.raises(ConfigError, match=message):
        RolloutConfig(**override)


# ---------------------------------------------------------------------------------------------
# Without vLLM: the HF backend, with one warning; the engine arguments a colocated trainer needs
# ---------------------------------------------------------------------------------------------
def test_make_backend_vllm_without_vllm_falls_back_to_hf_with_one_warning(monkeypatch, caplog):
    from ragen2.rollout import backends

    monkeypatch.setitem(sys.modules, "vllm", None)  # find_spec says absent, installed or not
    monkeypatch.setattr(backends, "_WARNED", set())
    with caplog.at_level("WARNING", logger="ragen2.rollout.backends"):
        first = make_backend("vllm", tiny_model(), StubTokenizer(), gpu_memory_utilization=0.2, sync_every=1)
        second = make_backend("vllm", tiny_model(), StubTokenizer(), gpu_memory_utilization=0.2, sync_every=1)
    assert isinstance(first, HFBackend) and isinstance(second, HFBackend)
    warnings_seen = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings_seen) == 1 and "HF backend" in warnings_seen[0] and "\n" not in warnings_seen[0]


def test_engine_gets_the_batch_limits_a_colocated_trainer_sets(monkeypatch):
    from ragen2.config import RolloutConfig
    from ragen2.rollout.backends import backend_settings

    seen = {}

    class RecordingLLM:
        def __init__(self, **kwargs):
            seen.update(kwargs)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.25.0", LLM=RecordingLLM))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "localhost"),
                       ("MASTER_PORT", "29500")):
        monkeypatch.setenv(key, value)  # restored afterwards: the engine's start fills them in otherwise
    settings = backend_settings(RolloutConfig(backend="vllm", env_groups=8, group_size=16, val_groups=512))
    assert settings["max_num_seqs"] == 512  # the validation batch is the larger one
    settings.pop("sync_every")
    VLLMBackend("/models/tiny", StubTokenizer(), **settings)
    assert seen["max_num_batched_tokens"] == vllm_backend.MAX_NUM_BATCHED_TOKENS == 4096
    assert seen["max_num_seqs"] == 512 and seen["distributed_executor_backend"] == "external_launcher"
    with pytest.raises(ValueError, match="max_num_seqs"):
        VLLMBackend("/models/tiny", StubTokenizer(), max_num_seqs=0, llm=object())
