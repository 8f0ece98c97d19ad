"""Paired re-scoring of a run's policy: seeds, determinism, checkpoints, the expert ceiling, the CLI."""

import json

import numpy as np
import pytest
import torch

from ragen2.__main__ import main
from ragen2.config import RunConfig, apply_overrides
from ragen2.evaluate import (
    Evaluation,
    evaluate_policy,
    evaluation_seeds,
    expert_success,
    learning_gains,
    load_run_policy,
    paired_gain,
)
from ragen2.rundir import read_config
from ragen2.trainer.loop import train
from ragen2.warmstart import initial_policy
from tests.trainer._tiny import TINY_RUN

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-step GRPO run whose step-1 checkpoint is kept, and the cache its policy lives in."""
    root = tmp_path_factory.mktemp("evaluate")
    cfg = apply_overrides(RunConfig(), [*TINY_RUN, "trainer.algo=grpo", "trainer.steps=2", "trainer.keep_every=1"])
    train(cfg, root / "run", initial_policy(cfg, root / "cache"), progress=False)
    return root / "run", root / "cache"


def test_evaluation_seeds_start_at_the_validation_seed_and_reject_zero():
    cfg = RunConfig()
    assert evaluation_seeds(cfg, 3) == [cfg.rollout.val_seed, cfg.rollout.val_seed + 1, cfg.rollout.val_seed + 2]
    with pytest.raises(ValueError, match="episodes must be >= 1, got 0"):
        evaluation_seeds(cfg, 0)


def test_same_arguments_give_the_same_successes_and_shapes_follow_the_seeds(trained):
    run_dir, cache = trained
    cfg, actor, tok = load_run_policy(run_dir, "latest", cache_dir=cache)
    a = evaluate_policy(actor, tok, cfg, policy="p", episodes=5, sampling_seeds=[0, 1], batch_size=2)
    b = evaluate_policy(actor, tok, cfg, policy="p", episodes=5, sampling_seeds=[0, 1], batch_size=2)
    assert a.successes.shape == (2, 5)
    assert set(np.unique(a.successes)) <= {0.0, 1.0}
    np.testing.assert_array_equal(a.successes, b.successes)
    assert a.success == pytest.approx(a.successes.mean())
    assert a.env_seeds == evaluation_seeds(cfg, 5)
    record = a.to_dict()
    assert record["episodes"] == 10 and len(record["successes"]) == 2 and len(record["successes"][0]) == 5
    for per_episode in (a.turns, a.invalid_turns, a.response_tokens):
        assert per_episode.shape == (2, 5)
    assert (a.turns >= 1).all() and (a.turns <= cfg.rollout.max_turns).all()
    assert (a.invalid_turns >= 0).all() and (a.invalid_turns <= a.turns).all()
    assert a.invalid_turn_rate == pytest.approx(a.invalid_turns.sum() / a.turns.sum())
    assert a.tokens_per_turn == pytest.approx(a.response_tokens.sum() / a.turns.sum())
    np.testing.assert_array_equal(a.invalid_turns, b.invalid_turns)
    np.testing.assert_array_equal(a.response_tokens, b.response_tokens)


def test_invalid_turns_match_the_rollouts_they_come_from(trained):
    """One sampling seed, one batch: the evaluation's per-episode counts are those of the same rollout."""
    from ragen2.rollout.collect import collect_rollouts

    run_dir, cache = trained
    cfg, actor, tok = load_run_policy(run_dir, "initial", cache_dir=cache)
    ev = evaluate_policy(actor, tok, cfg, policy="p", episodes=4, sampling_seeds=[0], batch_size=4)
    batch = collect_rollouts(actor, tok, cfg.env, cfg.rollout, evaluation_seeds(cfg, 4), group_size=1,
                             temperature=cfg.rollout.val_temperature, seed=0)
    assert ev.invalid_turns[0].tolist() == [sum(not u.valid for u in t.turns) for t in batch.trajectories]
    assert ev.turns[0].tolist() == [len(t.turns) for t in batch.trajectories]
    assert ev.response_tokens[0].tolist() == [t.response_length for t in batch.trajectories]


def test_greedy_evaluation_does_not_depend_on_the_sampling_seed(trained):
    run_dir, cache = trained
    cfg, actor, tok = load_run_policy(run_dir, "initial", cache_dir=cache)
    ev = evaluate_policy(actor, tok, cfg, policy="p", episodes=4, sampling_seeds=[0, 3], temperature=0)
    np.testing.assert_array_equal(ev.successes[0], ev.successes[1])


def test_checkpoints_load_the_weights_they_name(trained):
    run_dir, cache = trained
    params = {}
    for which in ("initial", "1", "latest"):
        _, actor, _ = load_run_policy(run_dir, which, cache_dir=cache)
        params[which] = torch.cat([p.detach().flatten() for p in actor.parameters()])
    assert not torch.equal(params["initial"], params["1"])  # training moved the weights
    assert not torch.equal(params["1"], params["latest"])
    with pytest.raises(ValueError, match=r"checkpoint '7' is not 'latest', 'mid', 'initial' or a kept step"):
        load_run_policy(run_dir, "7", cache_dir=cache)
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        read_config(cache)


def test_bad_temperature_is_named(trained):
    run_dir, cache = trained
    cfg, actor, tok = load_run_policy(run_dir, "initial", cache_dir=cache)
    with pytest.raises(ValueError, match="temperature must be >= 0, got -1.0"):
        evaluate_policy(actor, tok, cfg, policy="p", episodes=2, temperature=-1.0)
    with pytest.raises(ValueError, match="sampling_seeds is empty"):
        evaluate_policy(actor, tok, cfg, policy="p", episodes=2, sampling_seeds=[])


def test_expert_ceiling_on_an_ice_free_lake_is_certain():
    cfg = apply_overrides(RunConfig(), ["env.name=frozenlake", "rollout.max_turns=1", "rollout.max_actions_per_turn=10",
                                        "rollout.max_actions_per_traj=10"])
    cfg_sure = apply_overrides(cfg, ["env.kwargs={\"success_rate\": 1.0}"])
    assert expert_success(cfg_sure, 20) == 1.0
    slippery = apply_overrides(cfg, ["env.kwargs={\"success_rate\": 0.5}"])
    assert expert_success(slippery, 40) < 1.0


def test_cli_writes_the_per_episode_record(trained, tmp_path, capsys):
    run_dir, cache = trained
    out = tmp_path / "eval.json"
    assert main(["evaluate", str(run_dir), "--episodes", "3", "--sampling-seeds", "1", "--expert",
                 "--cache-dir", str(cache), "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert len(record["successes"]) == 1 and len(record["successes"][0]) == 3
    assert record["success"] == pytest.approx(np.mean(record["successes"]))
    assert 0.0 <= record["expert_success"] <= 1.0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["success"] == record["success"] and "successes" not in printed


def _evaluation(successes, policy="p", temperature=0.5, env_seeds=None):
    successes = np.asarray(successes, dtype=float)
    seeds = env_seeds if env_seeds is not None else list(range(successes.shape[1]))
    return Evaluation(policy, temperature, seeds, list(range(successes.shape[0])), successes)


def test_evaluation_round_trips_through_its_record():
    ev = _evaluation([[1, 0, 1], [0, 0, 1]])
    back = Evaluation.from_dict(json.loads(json.dumps(ev.to_dict())))
    np.testing.assert_array_equal(back.successes, ev.successes)
    assert (back.env_seeds, back.sampling_seeds, back.temperature) == (ev.env_seeds, ev.sampling_seeds, 0.5)
    # stderr over env seeds of the per-seed means 1.0, 0.0, 0.5
    assert ev.stderr == pytest.approx(np.std([1.0, 0.0, 1.0 / 2], ddof=1) / np.sqrt(3))
    assert back.turns is None and np.isnan(back.invalid_turn_rate) and np.isnan(back.tokens_per_turn)
    assert "invalid_turn_rate" not in ev.to_dict()  # a file written before turns were recorded reads back the same


def test_turn_counts_round_trip_and_give_the_invalid_rate():
    ev = _evaluation([[1, 0], [0, 1]])
    ev.turns, ev.invalid_turns = np.array([[2, 5], [5, 1]]), np.array([[0, 3], [1, 0]])
    ev.response_tokens = np.array([[60, 200], [150, 30]])
    record = json.loads(json.dumps(ev.to_dict()))
    assert record["invalid_turn_rate"] == pytest.approx(4 / 13) and record["tokens_per_turn"] == pytest.approx(440 / 13)
    back = Evaluation.from_dict(record)
    np.testing.assert_array_equal(back.invalid_turns, ev.invalid_turns)
    np.testing.assert_array_equal(back.response_tokens, ev.response_tokens)


def test_paired_gain_refuses_evaluations_on_other_seeds_or_temperatures():
    start = _evaluation([[0, 0, 1, 1]])
    assert paired_gain(start, _evaluation([[1, 1, 1, 1]], policy="end")) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="'end' and 'p' were not evaluated on the same seeds"):
        paired_gain(start, _evaluation([[1, 1, 1, 1]], policy="end", env_seeds=[5, 6, 7, 8]))
    with pytest.raises(ValueError, match="T 1.0 vs 0.5"):
        paired_gain(start, _evaluation([[1, 1, 1, 1]], policy="end", temperature=1.0))


def test_learning_gains_by_hand():
    start = _evaluation([[0] * 6 + [1] * 4])  # 40 %
    ends = {"up": [_evaluation([[0] * 4 + [1] * 6]), _evaluation([[0] * 3 + [1] * 7])],  # +20, +30
            "noisy": [_evaluation([[0] * 5 + [1] * 5]), _evaluation([[0] * 7 + [1] * 3])],  # +10, -10
            "one": [_evaluation([[1] * 10])]}
    table = learning_gains(start, ends).set_index("label")
    assert table.loc["up", "start"] == pytest.approx(40)
    assert table.loc["up", "end_mean"] == pytest.approx(65)
    assert table.loc["up", "gain_mean"] == pytest.approx(25)
    assert table.loc["up", "gain_std"] == pytest.approx(np.std([20, 30], ddof=1))
    assert table.loc["up", "min_gain"] == pytest.approx(20)
    assert bool(table.loc["up", "above_spread"]) and table.loc["up", "runs"] == 2
    assert table.loc["noisy", "gain_mean"] == pytest.approx(0) and not table.loc["noisy", "above_spread"]
    assert np.isnan(table.loc["one", "gain_std"]) and not table.loc["one", "above_spread"]
    assert np.isnan(table.loc["up", "start_invalid"]) and np.isnan(table.loc["up", "end_invalid"])
    with pytest.raises(ValueError, match="label 'none' has no evaluations"):
        learning_gains(start, {"none": []})


def test_learning_gains_report_the_invalid_turn_share_of_start_and_runs():
    def with_turns(successes, turns, invalid):
        ev = _evaluation([successes])
        ev.turns, ev.invalid_turns = np.array([turns], float), np.array([invalid], float)
        ev.response_tokens = np.zeros_like(ev.turns)
        return ev

    start = with_turns([0, 1], [4, 2], [1, 0])  # 1 of 6 turns
    ends = {"a": [with_turns([1, 1], [2, 2], [0, 0]), with_turns([0, 1], [5, 3], [4, 0])]}  # 0 and 1/2
    row = learning_gains(start, ends).iloc[0]
    assert row["start_invalid"] == pytest.approx(100 / 6) and row["end_invalid"] == pytest.approx(25)


def test_gains_cli_prints_a_row_per_label_and_names_a_malformed_argument(tmp_path, capsys):
    paths = {}
    for name, succ in (("start", [[0, 0, 1, 1]]), ("a", [[0, 1, 1, 1]]), ("b", [[1, 1, 1, 1]])):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(_evaluation(succ, policy=name).to_dict()))
    assert main(["gains", str(paths["start"]), f"algo={paths['a']},{paths['b']}"]) == 0
    out = capsys.readouterr().out
    assert "| algo " in out and "37.5" in out  # gains +25 and +50: mean 37.5
    assert main(["gains", str(paths["start"]), "algo"]) == 2
    assert "'algo' is not of the form LABEL=END.json" in capsys.readouterr().err
