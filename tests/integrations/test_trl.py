"""Tests of the TRL integration: row dropping, MI pairs, the env rollout adapter, a short CPU run."""

from __future__ import annotations

import math
import time
from unittest.mock import patch

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

from ragen2.config import PolicyConfig  # noqa: E402
from ragen2.filter import FilterConfig  # noqa: E402
from ragen2.integrations.trl import (  # noqa: E402
    RowPlan,
    SNRFilterConfig,
    SNRFilterGRPOTrainer,
    filter_generation_batch,
    opening_length,
    plan_local_rows,
    reasoning_text,
    sample_mi_pairs,
    select_rows,
)
from ragen2.integrations.trl_env import (  # noqa: E402
    env_reward_func,
    make_env_dataset,
    make_env_rollout_func,
    trajectory_to_trl,
)
from ragen2.rollout.types import Trajectory  # noqa: E402

GROUP_SIZE = 4
NUM_PROMPTS = 4


# ---------------------------------------------------------------------------------------------
# Row dropping on synthetic batches
# ---------------------------------------------------------------------------------------------
def synthetic_batch(num_rows: int, width: int = 6, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (num_rows,), generator=gen)
    completion_mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    return {
        "prompt_ids": torch.arange(num_rows * 3).view(num_rows, 3),
        "prompt_mask": torch.ones(num_rows, 3, dtype=torch.long),
        "completion_ids": torch.arange(num_rows * width).view(num_rows, width),
        "completion_mask": completion_mask,
        "tool_mask": torch.randint(0, 2, (num_rows, width), generator=gen),
        "advantages": torch.randn(num_rows, generator=gen),
        "num_items_in_batch": torch.tensor(12345),
        "num_images": list(range(num_rows)),
        "not_per_row": torch.zeros(num_rows + 1),
        "old_per_token_logps": None,
    }


def test_plan_keeps_whole_groups_in_ascending_order():
    plan = plan_local_rows([2, 0], group_size=4, process_index=0, local_rows=16, multiple=1)
    assert plan.index == [0, 1, 2, 3, 8, 9, 10, 11]
    assert all(plan.trained) and plan.num_pad == 0


def test_plan_pads_by_copying_the_best_group_first():
    plan = plan_local_rows([2, 0], group_size=4, process_index=0, local_rows=16, multiple=3)
    assert len(plan.index) == 9 and plan.num_pad == 1
    assert plan.index[:8] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert plan.index[8] == 8  # first row of group 2, the best-ranked kept group
    assert all(plan.trained)


@pytest.mark.parametrize("kept", [[0, 1, 2, 3], [2, 0, 3], [1, 0], [3]])
def test_a_filtered_generation_makes_as_many_updates_as_an_unfiltered_one(kept):
    """The paper's mini-batch rule in TRL's loop: the kept rows fill all ``steps_per_generation`` micro-steps (a
    positive multiple of them), so the updates per generation do not depend on how many groups were kept."""
    steps_per_generation = 4
    plan = plan_local_rows(kept, group_size=4, process_index=0, local_rows=16, multiple=steps_per_generation)
    per_step = len(plan.index) // steps_per_generation
    assert len(plan.index) % steps_per_generation == 0 and per_step >= 1
    assert len(plan.index) - plan.num_pad == 4 * len(kept)


def test_plan_takes_only_this_process_slice():
    # 2 processes x 8 rows, groups of 4: process 1 owns global rows 8..15 = groups 2 and 3.
    plan = plan_local_rows([0, 3], group_size=4, process_index=1, local_rows=8, multiple=1)
    assert plan.index == [4, 5, 6, 7]


def test_plan_without_local_rows_uses_masked_fillers():
    plan = plan_local_rows([0], group_size=4, process_index=1, local_rows=8, multiple=2)
    assert plan.index == [0, 1] and plan.trained == [False, False] and plan.num_pad == 2


@pytest.mark.parametrize("multiple", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("kept", [[0], [1, 3], [0, 1, 2], [3, 2, 1, 0]])
def test_plan_is_always_a_positive_multiple(kept, multiple):
    plan = plan_local_rows(kept, group_size=4, process_index=0, local_rows=16, multiple=multiple)
    assert len(plan.index) > 0 and len(plan.index) % multiple == 0
    assert set(plan.index) == {g * 4 + k for g in kept for k in range(4)}


def test_plan_rejects_bad_sizes():
    with pytest.raises(ValueError, match="multiple=5"):
        plan_local_rows([0], group_size=2, process_index=0, local_rows=4, multiple=5)
    with pytest.raises(ValueError, match="group_size=0"):
        plan_local_rows([0], group_size=0, process_index=0, local_rows=4, multiple=1)


def test_select_rows_indexes_per_row_entries_only():
    batch = synthetic_batch(8)
    out = select_rows(batch, [6, 1], 8)
    assert torch.equal(out["completion_ids"], batch["completion_ids"][[6, 1]])
    assert torch.equal(out["advantages"], batch["advantages"][[6, 1]])
    assert out["num_images"] == [6, 1]
    assert out["not_per_row"] is batch["not_per_row"]
    assert out["num_items_in_batch"] is batch["num_items_in_batch"]
    assert out["old_per_token_logps"] is None


def test_select_rows_refuses_multimodal_batches():
    batch = synthetic_batch(4)
    batch["pixel_values"] = torch.zeros(4, 3)
    with pytest.raises(NotImplementedError, match="pixel_values"):
        select_rows(batch, [0], 4)


def test_filter_batch_recomputes_num_items_from_kept_rows():
    batch = synthetic_batch(8, seed=3)
    plan = plan_local_rows([1], group_size=4, process_index=0, local_rows=8, multiple=1)
    out = filter_generation_batch(batch, plan)
    kept = slice(4, 8)
    expected = int((batch["completion_mask"][kept] * batch["tool_mask"][kept]).sum())
    assert int(out["num_items_in_batch"]) == expected
    assert out["completion_ids"].shape[0] == 4
    assert torch.equal(out["advantages"], batch["advantages"][kept])


def test_filter_batch_without_tool_mask_counts_completion_tokens():
    batch = synthetic_batch(8, seed=4)
    del batch["tool_mask"]
    plan = plan_local_rows([0], group_size=4, process_index=0, local_rows=8, multiple=1)
    out = filter_generation_batch(batch, plan, reduce_sum=lambda t: t * 2)  # as if two equal processes
    assert int(out["num_items_in_batch"]) == 2 * int(batch["completion_mask"][:4].sum())
    assert "tool_mask" not in out


def test_filter_batch_scales_advantages_and_masks_fillers():
    batch = synthetic_batch(8, seed=5)
    scaled = filter_generation_batch(batch, RowPlan(index=[0, 1], trained=[True, True], num_pad=0),
                                     advantage_scale=0.25)
    assert torch.allclose(scaled["advantages"], 0.25 * batch["advantages"][:2])
    fillers = filter_generation_batch(batch, RowPlan(index=[2, 3], trained=[False, False], num_pad=2))
    assert int(fillers["num_items_in_batch"]) == 0
    assert torch.count_nonzero(fillers["tool_mask"]) == 0
    assert torch.count_nonzero(fillers["advantages"]) == 0


# ---------------------------------------------------------------------------------------------
# Config and MI helpers
# ---------------------------------------------------------------------------------------------
def test_config_defaults_are_a_no_op_and_validation_names_values():
    cfg = SNRFilterConfig()
    assert cfg.filter_config.is_noop and cfg.loss_scaling == "none" and not cfg.mi_due(1)
    assert SNRFilterConfig(mi_every=5).mi_due(1) and SNRFilterConfig(mi_every=5).mi_due(10)
    assert not SNRFilterConfig(mi_every=5).mi_due(7)
    with pytest.raises(ValueError, match="'half'"):
        SNRFilterConfig(loss_scaling="half")
    with pytest.raises(ValueError, match="mi_every"):
        SNRFilterConfig(mi_every=-1)
    with pytest.raises(ValueError, match="mi_num_samples"):
        SNRFilterConfig(mi_num_samples=0)
    for bad in (dict(mi_warn_drop=0.0), dict(mi_warn_min_peak=-1.0), dict(mi_warn_noise_sigmas=float("nan"))):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SNRFilterConfig(**bad)


@pytest.mark.parametrize("completion, expected", [
    ("<think> go left </think><answer>Left</answer>", "go left"),
    ("go left </think><answer>Left</answer>", "go left"),  # the prompt opened <think>
    ("<think> unfinished", "unfinished"),
    ("no tags at all ", "no tags at all"),
])
def test_reasoning_text(completion, expected):
    assert reasoning_text(completion) == expected


def test_sample_mi_pairs_columns_are_groups():
    prompts = [[1, 1], [1, 1], [2, 2], [2, 2], [3], [3]]
    reasonings = [[5], [6, 7], [], [8], [9], [10]]
    groups = [0, 0, 1, 1, 2, 2]
    pairs = sample_mi_pairs(prompts, reasonings, groups, num_samples=10, rng=np.random.default_rng(0))
    assert len(pairs.reasonings) == 5  # the empty reasoning is skipped
    assert sorted(map(tuple, pairs.prompts)) == [(1, 1), (2, 2), (3,)]
    for z, col in zip(pairs.reasonings, pairs.prompt_index):
        row = reasonings.index(z)
        assert pairs.prompts[col] == prompts[row]
    small = sample_mi_pairs(prompts, reasonings, groups, num_samples=2, rng=np.random.default_rng(0))
    assert len(small.reasonings) == 2


# ---------------------------------------------------------------------------------------------
# Env adapter pieces
# ---------------------------------------------------------------------------------------------
def test_trajectory_to_trl_splits_at_the_first_assistant_token():
    traj = Trajectory(group=0, env_seed=0, turns=[], input_ids=[1, 2, 3, 4, 5, 6, 7, 8],
                      loss_mask=[0, 0, 1, 1, 0, 1, 1, 0], reasoning_mask=[0] * 8, score=0.0, success=False,
                      num_actions=0, first_prompt_ids=[], first_reasoning_ids=[])
    assert trajectory_to_trl(traj) == ([1, 2], [3, 4, 5, 6, 7], [1, 1, 0, 1, 1])


def test_make_env_dataset_and_reward():
    ds = make_env_dataset("frozenlake", [3, 1], {"success_rate": 1.0})
    assert ds.column_names == ["prompt", "seed"] and ds["seed"] == [3, 1]
    assert "Turn 1:" in ds[0]["prompt"] and ds[0]["prompt"] != ds[1]["prompt"]
    assert make_env_dataset("frozenlake", [3], {"success_rate": 1.0})["prompt"] == [ds[0]["prompt"]]
    with pytest.raises(ValueError, match="duplicates"):
        make_env_dataset("bandit", [1, 1])
    with pytest.raises(ValueError, match="'nope'"):
        make_env_dataset("nope", [1])
    assert env_reward_func(["a", "b"], env_reward=[0.5, -0.1]) == [0.5, -0.1]


class _FakeTrainer:
    use_vllm = False
    rollout_rows = None


def test_rollout_func_needs_the_rows_and_rejects_vllm():
    rollout = make_env_rollout_func("bandit")
    with pytest.raises(RuntimeError, match="rollout_rows"):
        rollout(["p"], _FakeTrainer())
    fake = _FakeTrainer()
    fake.rollout_rows = [{"prompt": "p"}]
    with pytest.raises(ValueError, match="'seed'"):
        rollout(["p"], fake)
    fake.use_vllm = True
    with pytest.raises(ValueError, match="use_vllm=False"):
        rollout(["p"], fake)


def test_vllm_generation_is_refused_where_vllm_exists():
    pytest.importorskip("vllm")
    fake = _FakeTrainer()
    fake.use_vllm = True
    with pytest.raises(ValueError, match="use_vllm=False"):
        make_env_rollout_func("bandit")(["p"], fake)


# ---------------------------------------------------------------------------------------------
# The trainer (tiny local Llama, bandit through the adapter)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_policy_dir(tmp_path_factory):
    from ragen2.policy import make_tiny_policy

    cfg = PolicyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, tokenizer_vocab_size=400)
    return make_tiny_policy(cfg, ["bandit"], tmp_path_factory.mktemp("tiny"))


def parity_probe(completions, seed, **kwargs):
    """Test reward: 0/1 alternating inside groups with an even seed, constant 0 for odd seeds.

    TRL puts a group's rows next to each other, so row parity alternates within every group. This
    guarantees groups with and without reward variance whatever the untrained model writes.
    """
    return [float(i % 2) if s % 2 == 0 else 0.0 for i, s in enumerate(seed)]


class RecordingTrainer(SNRFilterGRPOTrainer):
    """Records the raw rewards of each generation and the rows that reach the loss."""

    def __init__(self, *args, **kwargs):
        self.generations: list[np.ndarray] = []
        self.loss_rows: list[torch.Tensor] = []
        super().__init__(*args, **kwargs)

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self.generations.append(self.last_filter.rewards.copy())
        return out

    def _compute_loss(self, model, inputs):
        self.loss_rows.append(inputs["advantages"].detach().clone())
        return super()._compute_loss(model, inputs)


def make_trainer(policy_dir, out_dir, snr_config, *, max_steps=3, device="cpu", group_size=GROUP_SIZE,
                 accumulation=1):
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=str(out_dir), per_device_train_batch_size=NUM_PROMPTS * group_size // accumulation,
                      gradient_accumulation_steps=accumulation,
                      num_generations=group_size, max_steps=max_steps, logging_steps=1, report_to="none",
                      bf16=False, use_cpu=device == "cpu", gradient_checkpointing=False, learning_rate=1e-3,
                      seed=0, save_strategy="no", max_completion_length=16, disable_tqdm=True)
    return RecordingTrainer(
        model=AutoModelForCausalLM.from_pretrained(policy_dir),
        processing_class=PreTrainedTokenizerFast.from_pretrained(policy_dir),
        reward_funcs=[env_reward_func, parity_probe], args=args,
        train_dataset=make_env_dataset("bandit", range(NUM_PROMPTS)),
        rollout_func=make_env_rollout_func("bandit", max_new_tokens=8), snr_config=snr_config)


def test_training_drops_zero_variance_groups_and_logs_mi(tiny_policy_dir, tmp_path):
    cfg = SNRFilterConfig(filter=FilterConfig(strategy="top_p", value=1.0, include_zero=False),
                          mi_every=3, mi_num_samples=16)
    trainer = make_trainer(tiny_policy_dir, tmp_path, cfg)
    start = time.perf_counter()
    trainer.train()
    seconds_per_step = (time.perf_counter() - start) / 3
    print(f"seconds per TRL step: {seconds_per_step:.2f}")

    assert len(trainer.generations) == 3 and len(trainer.loss_rows) == 3
    zero_variance_total = 0
    for rewards, advantages in zip(trainer.generations, trainer.loss_rows):
        assert rewards.shape == (NUM_PROMPTS, GROUP_SIZE)
        varied = np.std(rewards, axis=1, ddof=1) > 1e-9
        zero_variance_total += int((~varied).sum())
        assert advantages.shape[0] == GROUP_SIZE * int(varied.sum())
        assert torch.count_nonzero(advantages) == advantages.shape[0]  # no zero-advantage row was trained
    assert zero_variance_total >= NUM_PROMPTS // 2  # the odd-seed groups, at least
    logs = [h for h in trainer.state.log_history if "filter/kept_count" in h]
    assert len(logs) == 3
    for rewards, log in zip(trainer.generations, logs):
        varied = np.std(rewards, axis=1, ddof=1) > 1e-9
        assert log["filter/kept_count"] == varied.sum()
        assert log["filter/zero_variance_count"] == (~varied).sum()
        assert log["filter/trained_rows"] == GROUP_SIZE * varied.sum()
    mi_logs = [h for h in trainer.state.log_history if "mi/mi_estimate" in h]
    assert len(mi_logs) == 2  # steps 1 and 3
    for log in mi_logs:
        assert log["mi/skipped"] == 0 and log["mi/num_columns"] == NUM_PROMPTS
        assert math.isfinite(log["mi/mi_estimate"]) and log["mi/mi_upper_bound"] == pytest.approx(math.log(4))


def test_training_pads_kept_rows_to_equal_micro_batches(tiny_policy_dir, tmp_path):
    # Groups of 3, 4 micro-batches per generation: the 2 kept groups (6 rows) are padded to 8.
    cfg = SNRFilterConfig(filter=FilterConfig(strategy="top_p", value=1.0, include_zero=False),
                          loss_scaling="keep_rate")
    trainer = make_trainer(tiny_policy_dir, tmp_path, cfg, max_steps=1, group_size=3, accumulation=4)
    trainer.train()
    assert trainer.args.steps_per_generation == 4
    rewards = trainer.generations[0]
    kept = int((np.std(rewards, axis=1, ddof=1) > 1e-9).sum())
    assert kept == 2  # the even-seed groups
    sizes = [len(a) for a in trainer.loss_rows]
    assert sizes == [2, 2, 2, 2]  # 6 kept rows + 2 copies, split evenly
    advantages = torch.cat(trainer.loss_rows)
    assert torch.count_nonzero(advantages) == 8
    log = next(h for h in trainer.state.log_history if "filter/pad_rows" in h)
    assert log["filter/pad_rows"] == 2 and log["filter/trained_rows"] == 8
    assert log["filter/loss_scale"] == pytest.approx(kept / NUM_PROMPTS)


def fake_trainer(policy_dir, seeds, global_step=0):
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    model = AutoModelForCausalLM.from_pretrained(policy_dir)
    model.train()
    return SimpleNamespace(
        use_vllm=False, model=model, processing_class=PreTrainedTokenizerFast.from_pretrained(policy_dir),
        accelerator=SimpleNamespace(unwrap_model=lambda m: m, process_index=0), temperature=1.0,
        args=SimpleNamespace(seed=0), state=SimpleNamespace(global_step=global_step),
        rollout_rows=[{"prompt": "p", "seed": s} for s in seeds])


def test_rollout_func_output_layout_and_determinism(tiny_policy_dir):
    seeds = [5, 5, 5, 8, 8, 8]  # two groups of three, as TRL repeats the rows
    rollout = make_env_rollout_func("bandit", max_new_tokens=6)
    trainer = fake_trainer(tiny_policy_dir, seeds)
    out = rollout(["p"] * len(seeds), trainer)
    assert trainer.model.training  # train mode restored
    assert out["logprobs"] is None
    for key in ("prompt_ids", "completion_ids", "env_mask", "env_reward", "success", "num_turns"):
        assert len(out[key]) == len(seeds), key
    for completion, mask in zip(out["completion_ids"], out["env_mask"]):
        assert len(completion) == len(mask) and mask[0] == 1 and mask[-1] == 1
    assert out["prompt_ids"][0] == out["prompt_ids"][1] == out["prompt_ids"][2]  # a group shares its env
    assert out["prompt_ids"][0] != out["prompt_ids"][3]
    assert out == rollout(["p"] * len(seeds), fake_trainer(tiny_policy_dir, seeds))  # same seed, same result


def synthetic_output(num_rows: int) -> dict:
    batch = synthetic_batch(num_rows, seed=7)
    del batch["not_per_row"], batch["num_images"]
    return batch


def test_trainer_filter_default_is_untouched_and_empty_keeps_best_group(tiny_policy_dir, tmp_path):
    trainer = make_trainer(tiny_policy_dir, tmp_path, SNRFilterConfig())
    rewards = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 2.0, 2.0])
    output = synthetic_output(16)
    trainer._raw_rewards = rewards
    assert trainer._filter(output, []) is output  # default config: a drop-in, nothing changes

    trainer.snr_config = SNRFilterConfig(filter=FilterConfig(strategy="top_k_abs", value=1), loss_scaling="keep_rate")
    kept = trainer._filter(output, [])
    assert trainer.last_filter.trained_groups == [3]  # largest Bessel std: group 3 ([2, 0, 2, 2])
    assert torch.equal(kept["completion_ids"], output["completion_ids"][12:16])
    assert torch.equal(kept["advantages"], output["advantages"][12:16])  # keep_rate scales the whole loss ...
    assert trainer.last_filter.loss_scale == 0.25
    trainer.model.train()
    unscaled = SNRFilterGRPOTrainer.__mro__[1].compute_loss
    with patch.object(SNRFilterGRPOTrainer.__mro__[1], "compute_loss", lambda self, *a, **k: torch.tensor(2.0)):
        assert float(trainer.compute_loss(trainer.model, kept)) == 0.5
    assert SNRFilterGRPOTrainer.__mro__[1].compute_loss is unscaled
    trainer.snr_config = SNRFilterConfig(filter=FilterConfig(strategy="top_k_abs", value=1),
                                         loss_scaling="keep_rate_task")
    kept = trainer._filter(output, [])  # ... keep_rate_task the kept advantages alone
    assert torch.allclose(kept["advantages"], 0.25 * output["advantages"][12:16])
    assert trainer.last_filter.loss_scale == 1.0
    assert int(kept["num_items_in_batch"]) == int((output["completion_mask"][12:] * output["tool_mask"][12:]).sum())

    trainer.snr_config = SNRFilterConfig(filter=FilterConfig(strategy="top_p", value=0.5, include_zero=False))
    trainer._raw_rewards = torch.zeros(16)  # every group has zero variance: the selection is empty
    fallback = trainer._filter(output, [])
    assert trainer.last_filter.outcome.kept.size == 0
    assert trainer.last_filter.trained_groups == [0]
    assert fallback["completion_ids"].shape[0] == GROUP_SIZE
    assert trainer._metrics["train"]["filter/fallback_best_group"][-1] == 1.0


def test_opening_length_counts_the_tokens_through_the_opening_think(tiny_policy_dir):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(tiny_policy_dir)

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    assert opening_length(tok, ids("<think> go left </think><answer>Left</answer>")) == 1
    leading = ids("ok <think> go left </think>")
    k = opening_length(tok, leading)
    assert tok.decode(leading[:k]).endswith("<think>") and not tok.decode(leading[:k - 1]).endswith("<think>")
    for text in ("go left </think><answer>Left</answer>", "no tags at all", "</think> late <think> x"):
        assert opening_length(tok, ids(text)) == 0
    assert opening_length(tok, []) == 0


def test_mi_scores_each_reasoning_after_its_prompt_and_opening_tag(tiny_policy_dir, tmp_path, monkeypatch):
    """X ends where z began, as in ragen2's own rollouts (whose generation prompt ends with <think>)."""
    import ragen2.integrations.trl as trl_module

    cfg = SNRFilterConfig(mi_every=1, mi_warn_min_peak=0.3, mi_warn_noise_sigmas=1.5)
    trainer = make_trainer(tiny_policy_dir, tmp_path, cfg)
    assert (trainer._mi_monitor.warn_min_peak, trainer._mi_monitor.warn_noise_sigmas) == (0.3, 1.5)
    tok = trainer.processing_class
    prompts = [tok(f"user: game {g}", add_special_tokens=False)["input_ids"] for g in range(2)]
    texts = ["<think> left please </think><answer>Left</answer>", "<think> right </think><answer>Right</answer>"]
    completions = [tok(texts[r % 2], add_special_tokens=False)["input_ids"] for r in range(2 * GROUP_SIZE)]
    width, plen = max(map(len, completions)), max(map(len, prompts))
    output = {
        "prompt_ids": torch.tensor([[0] * (plen - len(prompts[r // GROUP_SIZE])) + prompts[r // GROUP_SIZE]
                                    for r in range(2 * GROUP_SIZE)]),
        "prompt_mask": torch.tensor([[0] * (plen - len(prompts[r // GROUP_SIZE])) + [1] * len(prompts[r // GROUP_SIZE])
                                     for r in range(2 * GROUP_SIZE)]),
        "completion_ids": torch.tensor([c + [0] * (width - len(c)) for c in completions]),
        "completion_mask": torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions]),
    }
    seen = {}
    real = trl_module.cross_logprobs

    def recording(model, tokenizer, x, z, **kwargs):
        seen["x"], seen["z"] = x, z
        return real(model, tokenizer, x, z, **kwargs)

    monkeypatch.setattr(trl_module, "cross_logprobs", recording)
    trainer._log_mi(output, step=1)
    think = tok.convert_tokens_to_ids("<think>")
    assert sorted(map(tuple, seen["x"])) == sorted(tuple(p + [think]) for p in prompts)
    assert {tok.decode(z) for z in seen["z"]} == {"left please", "right"}
    assert trainer._metrics["train"]["mi/skipped"] == [0.0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_training_step_on_gpu(tiny_policy_dir, tmp_path):
    cfg = SNRFilterConfig(filter=FilterConfig(strategy="top_p", value=1.0, include_zero=False), mi_every=1)
    trainer = make_trainer(tiny_policy_dir, tmp_path, cfg, max_steps=1, device="cuda")
    trainer.train()
    assert trainer.model.device.type == "cuda"
    assert any("mi/mi_estimate" in h for h in trainer.state.log_history)
