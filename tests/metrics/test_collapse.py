"""collapse_pairs sampling (docs/method.md §5.3) and collapse_metrics on a synthetic RolloutBatch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ragen2.config import CollapseConfig
from ragen2.metrics import CollapseMonitor
from ragen2.metrics.collapse import collapse_due, collapse_metrics, collapse_pairs, validity_counts
from ragen2.metrics.templates import first_turn_template_metrics
from ragen2.rollout.types import RolloutBatch, Trajectory, Turn


def _turn(prompt_ids, reasoning_ids, responded=True):
    return Turn(prompt_text="p", response_text="<think>r</think>" if responded else "", think="r",
                actions=[], valid=True, env_reward=0.0, prompt_ids=list(prompt_ids),
                reasoning_ids=list(reasoning_ids))


def make_batch(env_groups=3, group_size=4, seed=0, num_turns=(1, 3)) -> RolloutBatch:
    """Group g's first prompt is [g+1]*(g+3); turn t>0 appends t; reasoning is random, empty 25 %."""
    rng = np.random.default_rng(seed)
    trajs = []
    for g in range(env_groups):
        first_prompt = [g + 1] * (g + 3)
        for _ in range(group_size):
            turns, prompt = [], list(first_prompt)
            for t in range(int(rng.integers(num_turns[0], num_turns[1] + 1))):
                if t:
                    prompt = prompt + [40 + t, int(rng.integers(50, 60))]
                reasoning = [] if rng.random() < 0.25 else rng.integers(60, 90, int(rng.integers(1, 6))).tolist()
                turns.append(_turn(prompt, reasoning))
            trajs.append(Trajectory(group=g, env_seed=100 + g, turns=turns, input_ids=[], loss_mask=[],
                                    reasoning_mask=[], score=0.0, success=False, num_actions=0,
                                    first_prompt_ids=list(turns[0].prompt_ids),
                                    first_reasoning_ids=list(turns[0].reasoning_ids)))
    return RolloutBatch(trajectories=trajs, env_groups=env_groups, group_size=group_size)


def test_first_turn_takes_all_valid_rows_when_few():
    batch = make_batch()
    pairs = collapse_pairs(batch, "first_turn", 64, np.random.default_rng(0))
    valid = [t for t in batch.trajectories if t.first_reasoning_ids]
    assert len(pairs.reasonings) == len(valid)
    assert sorted(map(tuple, pairs.reasonings)) == sorted(tuple(t.first_reasoning_ids) for t in valid)
    groups = sorted({t.group for t in valid})
    assert pairs.prompts == [[g + 1] * (g + 3) for g in groups]
    assert pairs.prompt_keys == [tuple(p) for p in pairs.prompts]
    for z, c in zip(pairs.reasonings, pairs.prompt_index):  # each row points at its own group's prompt
        owner = next(t for t in valid if t.first_reasoning_ids == z)
        assert pairs.prompts[c] == owner.first_prompt_ids


def test_first_turn_samples_without_replacement():
    batch = make_batch(env_groups=4, group_size=8, seed=1)
    for r, t in enumerate(batch.trajectories):  # unique reasonings identify the sampled rows
        t.first_reasoning_ids = [] if r % 5 == 0 else [r, r]
    valid = {tuple(t.first_reasoning_ids) for t in batch.trajectories if t.first_reasoning_ids}
    for seed in range(20):
        pairs = collapse_pairs(batch, "first_turn", 5, np.random.default_rng(seed))
        drawn = [tuple(z) for z in pairs.reasonings]
        assert len(drawn) == len(set(drawn)) == 5 and set(drawn) <= valid
        assert len(pairs.prompts) == len(set(pairs.prompt_index.tolist()))
        for z, c in zip(drawn, pairs.prompt_index):
            assert pairs.prompts[c] == batch.trajectories[z[0]].first_prompt_ids


def test_first_turn_rejects_differing_prompts_in_a_group():
    batch = make_batch()
    batch.trajectories[1].first_prompt_ids = [99, 98]
    batch.trajectories[1].first_reasoning_ids = [61]
    batch.trajectories[0].first_reasoning_ids = [62]
    with pytest.raises(ValueError, match="group 0"):
        collapse_pairs(batch, "first_turn", 64, np.random.default_rng(0))


def test_trajectory_family_every_draw_is_a_column():
    batch = make_batch(seed=3)
    valid_pairs = {(tuple(turn.prompt_ids), tuple(turn.reasoning_ids))
                   for t in batch.trajectories for turn in t.turns if turn.reasoning_ids}
    num_valid = sum(1 for t in batch.trajectories for turn in t.turns if turn.reasoning_ids)
    pairs = collapse_pairs(batch, "trajectory", 10, np.random.default_rng(0))
    assert len(pairs.prompts) == len(pairs.reasonings) <= min(10, num_valid)
    assert pairs.prompt_index.tolist() == list(range(len(pairs.prompts)))
    assert all((tuple(x), tuple(z)) in valid_pairs for x, z in zip(pairs.prompts, pairs.reasonings))
    again = collapse_pairs(batch, "trajectory", 10, np.random.default_rng(0))
    assert again.prompts == pairs.prompts and again.reasonings == pairs.reasonings


def test_trajectory_family_is_uniform_over_trajectories_then_turns():
    # Trajectory A has one valid turn, B has three: A's turn should be drawn half the time.
    a = Trajectory(group=0, env_seed=0, turns=[_turn([1], [10])], input_ids=[], loss_mask=[],
                   reasoning_mask=[], score=0, success=False, num_actions=0, first_prompt_ids=[1],
                   first_reasoning_ids=[10])
    b = Trajectory(group=1, env_seed=1, turns=[_turn([2], [20]), _turn([2, 3], [21]), _turn([2, 4], [22])],
                   input_ids=[], loss_mask=[], reasoning_mask=[], score=0, success=False, num_actions=0,
                   first_prompt_ids=[2], first_reasoning_ids=[20])
    batch = RolloutBatch([a, b], env_groups=2, group_size=1)
    rng = np.random.default_rng(0)
    drawn = [z[0] for _ in range(1500) for z in collapse_pairs(batch, "trajectory", 64, rng).reasonings]
    assert len(drawn) == 1500 * 4  # min(64, 4 valid turns) draws, none wasted
    share = {z: drawn.count(z) / len(drawn) for z in (10, 20, 21, 22)}
    assert share[10] == pytest.approx(0.5, abs=0.02)
    for z in (20, 21, 22):
        assert share[z] == pytest.approx(1 / 6, abs=0.02)


def test_validity_counts():
    batch = make_batch(seed=4)
    batch.trajectories[0].turns[0].response_text = ""  # no response at all: not in the denominator
    batch.trajectories[0].turns[0].reasoning_ids = []
    turns = [turn for t in batch.trajectories for turn in t.turns if turn.response_text]
    counts = validity_counts(batch)
    assert counts["collapse/valid_thinking_rate"] == pytest.approx(
        sum(1 for turn in turns if turn.reasoning_ids) / len(turns))
    first_valid = sum(1 for t in batch.trajectories if t.first_reasoning_ids)
    assert counts["collapse/first_turn_num_total"] == 12
    assert counts["collapse/first_turn_num_valid"] == first_valid
    assert counts["collapse/first_turn_valid_rate"] == pytest.approx(first_valid / 12)


def test_collapse_due():
    cfg = CollapseConfig(compute_freq=5)
    assert [s for s in range(1, 16) if collapse_due(s, cfg)] == [1, 5, 10, 15]
    assert not collapse_due(1, CollapseConfig(enabled=False))


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg).eval()


def test_collapse_metrics_end_to_end(tiny_model):
    batch = make_batch(env_groups=4, group_size=4, seed=5)
    cfg = CollapseConfig(num_samples=12)
    monitors: dict[str, CollapseMonitor] = {}
    out = collapse_metrics(tiny_model, None, batch, cfg, np.random.default_rng(0), monitors=monitors)
    assert set(monitors) == {"first_turn", "trajectory"}
    for family in ("first_turn", "trajectory"):
        p = f"collapse_{family}/"
        assert out[p + "skipped"] == 0.0
        assert np.isfinite(out[p + "mi_estimate"]) and out[p + "mi_estimate"] <= out[p + "mi_upper_bound"]
        assert out[p + "mi_upper_bound"] == pytest.approx(np.log(out[p + "num_columns"]))
        assert out[p + "marginal_std_ema"] == out[p + "marginal_std"]  # first update
        assert p + "mi_zscore_ema_seq" in out
    assert out["collapse_trajectory/num_rows"] == out["collapse_trajectory/num_columns"]
    assert "collapse/valid_thinking_rate" in out
    # Same seed, same numbers.
    again = collapse_metrics(tiny_model, None, batch, cfg, np.random.default_rng(0))
    assert again["collapse_first_turn/mi_estimate"] == out["collapse_first_turn/mi_estimate"]
    assert "collapse_first_turn/marginal_std_ema" not in again


def test_collapse_metrics_logs_the_first_turns_template_signs(tiny_model):
    batch = make_batch(env_groups=4, group_size=4, seed=5)
    for i, t in enumerate(batch.trajectories):
        t.turns[0].prompt_text = f"State:\nPlayer: ({t.group},1)\nYou have 3 actions left."
        t.turns[0].think = f"player ({t.group},1) so go down" if i % 2 else "i will think step by step now"
    expected = first_turn_template_metrics(batch)
    assert expected["ungrounded_share"] == 0.5 and expected["shared_prefix_share"] == 0.5
    out = collapse_metrics(tiny_model, None, batch, CollapseConfig(num_samples=12), np.random.default_rng(0))
    for key in ("ungrounded_share", "shared_prefix_share", "reasoning_words_mean"):
        assert out[f"collapse_first_turn/{key}"] == expected[key]
    off = collapse_metrics(tiny_model, None, batch, CollapseConfig(num_samples=12, first_turn_enabled=False),
                           np.random.default_rng(0))
    assert not any(k.startswith("collapse_first_turn/") for k in off)


def test_collapse_metrics_skips_a_family_with_one_column(tiny_model):
    batch = make_batch(env_groups=1, group_size=4, seed=6, num_turns=(1, 1))
    for t in batch.trajectories:
        t.first_reasoning_ids = t.turns[0].reasoning_ids = [70, 71]
    cfg = CollapseConfig(num_samples=8, multi_turn_enabled=False)
    with pytest.warns(UserWarning, match="at least 2"):
        out = collapse_metrics(tiny_model, None, batch, cfg, np.random.default_rng(0))
    assert out["collapse_first_turn/skipped"] == 1.0
    assert not any(k.startswith("collapse_trajectory/") for k in out)


def test_unknown_family():
    with pytest.raises(ValueError, match="'turn'"):
        collapse_pairs(make_batch(), "turn", 8, np.random.default_rng(0))
