"""End-to-end runs of ``train`` with the tiny policy on FrozenLake (a few steps, tiny batches)."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ragen2.config import ConfigError, RunConfig, apply_overrides, to_dict
from ragen2.rundir import latest_checkpoint, read_val_episodes
from ragen2.trainer.checkpoint import load_checkpoint
from ragen2.trainer.loop import train
from ragen2.trainer.runlog import read_metrics
from ragen2.warmstart import initial_policy
from tests.trainer._tiny import TINY_RUN

REPO = Path(__file__).resolve().parents[2]
TINY = TINY_RUN
DOCUMENTED = ["rollout/score_mean", "rollout/success", "filter/kept_ratio", "filter/reward_std_mean",
              "actor/pg_loss", "actor/entropy", "actor/grad_norm", "adv/mean", "train/mini_batch_rows",
              "timing_s/rollout", "timing_s/update", "timing_s/diagnostics"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def _cfg(*extra):
    return apply_overrides(RunConfig(), TINY + list(extra))


def _comparable(rows):
    return [{k: v for k, v in r.items() if not k.startswith("timing_s/")} for r in rows]


@pytest.mark.slow
def test_ppo_run_writes_records_and_moves_parameters(tmp_path, cache_dir):
    cfg = _cfg("trainer.algo=ppo", "trainer.steps=2", "trainer.kl_coef=0.1", "grad_analysis.enabled=true",
               "grad_analysis.every=2", "grad_analysis.num_buckets=1")
    summary = train(cfg, tmp_path / "run", initial_policy(cfg, cache_dir), progress=False)
    run = tmp_path / "run"
    for name in ("config.json", "env.json", "summary.json", "metrics.jsonl", "grad_analysis.csv",
                 "dvclive/metrics.json"):
        assert (run / name).exists(), name
    assert not (run / "dvc.yaml").exists() and not (run / "dvclive" / "dvc.yaml").exists()
    assert json.loads((run / "config.json").read_text()) == to_dict(cfg)
    assert summary["steps_completed"] == 2 and summary["early_stop_reason"] is None
    assert summary["final_val_success"] is not None
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert "val/success" in rows[0] and "val/success" in rows[2] and "val/success" not in rows[1]
    # every validation episode's success is kept, in env-seed order, and averages to val/success
    episodes = read_val_episodes(run)
    assert sorted(episodes) == [0, 2] and all(len(v) == cfg.rollout.val_groups for v in episodes.values())
    for step in (0, 2):
        assert episodes[step].mean() == pytest.approx(rows[step]["val/success"])
    for row in rows[1:]:
        for name in DOCUMENTED + ["critic/vf_loss", "actor/kl_loss"]:
            assert name in row, name
            assert math.isfinite(row[name]), (name, row[name])
    assert "grad_norm/all/task" in rows[1] and "grad_norm/all/task" not in rows[2]  # steps 1, 3, ...
    # the gradient analysis is timed apart from the MI diagnostics, on the steps it runs
    assert rows[1]["timing_s/grad_analysis"] > 0 and "timing_s/grad_analysis" not in rows[2]
    assert summary["timings_s"]["grad_analysis_per_step"] == pytest.approx(rows[1]["timing_s/grad_analysis"] / 2)
    # the actor moved away from the initial policy; the critic and optimisers were saved
    state = load_checkpoint(latest_checkpoint(run))
    from ragen2.policy import load_policy

    init, _ = load_policy(initial_policy(cfg, cache_dir), device="cpu")
    moved = [not torch.equal(v, state["actor"][k]) for k, v in init.state_dict().items()]
    assert any(moved)
    assert state["critic"] is not None and state["step"] == 2
    # the decomposition also runs on the saved checkpoint (fresh rollout, no optimiser step)
    from ragen2.trainer.grad_analysis import analyze_checkpoint

    table = analyze_checkpoint(run, num_buckets=2, cache_dir=cache_dir)
    assert table["bucket"].tolist() == ["1", "2", "all"] and (table["step"] == 2).all()
    assert load_checkpoint(latest_checkpoint(run))["actor"].keys() == state["actor"].keys()


def test_grpo_run_is_finite_moves_parameters_and_repeats_exactly(tmp_path, cache_dir):
    cfg = _cfg("trainer.algo=grpo", "trainer.steps=2", "trainer.entropy_scope=reasoning")
    summary = train(cfg, tmp_path / "a", initial_policy(cfg, cache_dir), progress=False)
    assert summary["steps_completed"] == 2 and (tmp_path / "a" / "summary.json").exists()
    a = read_metrics(tmp_path / "a")
    for row in a[1:]:
        for name in DOCUMENTED:
            assert math.isfinite(row[name]), (name, row.get(name))
    from ragen2.policy import load_policy

    init, _ = load_policy(initial_policy(cfg, cache_dir), device="cpu")
    state = load_checkpoint(latest_checkpoint(tmp_path / "a"))
    assert any(not torch.equal(v, state["actor"][k]) for k, v in init.state_dict().items())

    train(cfg, tmp_path / "b", initial_policy(cfg, cache_dir), progress=False)
    b = read_metrics(tmp_path / "b")
    assert _comparable(a) == _comparable(b)
    seed1 = apply_overrides(cfg, ["seed=1"])
    other = train(seed1, tmp_path / "c", initial_policy(seed1, cache_dir), progress=False)
    assert other["steps_completed"] == 2
    assert _comparable(read_metrics(tmp_path / "c")) != _comparable(a)


def test_bad_setting_is_named_before_training():
    with pytest.raises(ConfigError, match="trainer.entropy_scope='thinking': must be one of all, reasoning"):
        _cfg("trainer.entropy_scope=thinking")
    with pytest.raises(ConfigError, match="trainer.max_refill_rounds=-2: must be >= 0"):
        _cfg("trainer.max_refill_rounds=-2")


@pytest.mark.slow
def test_sigkill_and_resume_matches_uninterrupted_run(tmp_path, cache_dir):
    overrides = ["trainer.algo=ppo", "trainer.steps=4", "trainer.kl_coef=0.05"]
    cfg = _cfg(*overrides)
    train(cfg, tmp_path / "ref", initial_policy(cfg, cache_dir), progress=False)
    expected = read_metrics(tmp_path / "ref")

    run = tmp_path / "killed"
    script = ("import sys, torch; torch.set_num_threads(1)\n"
              "from pathlib import Path\n"
              "from ragen2.config import RunConfig, apply_overrides\n"
              "from ragen2.trainer.loop import train\n"
              "from ragen2.warmstart import initial_policy\n"
              f"cfg = apply_overrides(RunConfig(), {TINY + overrides!r})\n"
              f"train(cfg, Path({str(run)!r}), initial_policy(cfg, Path({str(cache_dir)!r})), progress=False)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env)
    deadline = time.time() + 300
    while time.time() < deadline:  # kill once step 2 has been logged (its checkpoint may or may not exist)
        rows = read_metrics(run) if (run / "metrics.jsonl").exists() else []
        if rows and rows[-1]["step"] >= 2:
            break
        if proc.poll() is not None:
            pytest.fail("the run finished before it could be killed")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run / "summary.json").exists()
    summary = train(cfg, run, initial_policy(cfg, cache_dir), progress=False)
    assert summary["steps_completed"] == 4
    assert _comparable(read_metrics(run)) == _comparable(expected)
    assert (run / "val_episodes.jsonl").read_text() == (tmp_path / "ref" / "val_episodes.jsonl").read_text()
    steps_in_tsv = (run / "dvclive" / "plots" / "metrics" / "rollout" / "score_mean.tsv").read_text().split("\n")
    assert len([line for line in steps_in_tsv[1:] if line.strip()]) == 4  # no duplicated rows


def test_collapse_metrics_are_logged_every_compute_freq_steps(tmp_path, cache_dir, monkeypatch):
    """The MI diagnostics appear at step 1 and every ``compute_freq`` steps, and only then.

    A random tiny policy never closes ``</think>``, so its turns have no reasoning and both families
    would be skipped. The rollouts here are the real ones, with each turn's reasoning ids filled in
    from the trajectory's own response tokens (so Z depends on the rollout) before the diagnostics
    see them; the update is unchanged.
    """
    import ragen2.rollout.collect as collect

    real = collect.collect_rollouts

    def with_reasoning(*args, **kwargs):
        batch = real(*args, **kwargs)
        for traj in batch.trajectories:
            response = [t for t, m in zip(traj.input_ids, traj.loss_mask) if m][:6] or [5, 6]
            traj.first_reasoning_ids = list(response)
            for turn in traj.turns:
                turn.reasoning_ids = list(response)
        return batch

    monkeypatch.setattr(collect, "collect_rollouts", with_reasoning)
    cfg = _cfg("trainer.algo=grpo", "trainer.steps=5", "collapse.compute_freq=2", "trainer.save_freq=0")
    train(cfg, tmp_path / "run", initial_policy(cfg, cache_dir), progress=False)
    rows = {r["step"]: r for r in read_metrics(tmp_path / "run")}
    logged = {step for step, r in rows.items() if "collapse_first_turn/mi_estimate" in r}
    assert logged == {1, 2, 4}
    for step in logged:
        for family in ("collapse_first_turn", "collapse_trajectory"):
            for key in ("mi_estimate", "mi_zscore", "retrieval_accuracy", "conditional_entropy_est"):
                assert math.isfinite(rows[step][f"{family}/{key}"]), (step, family, key)
    assert all("actor/entropy" in rows[s] for s in range(1, 6))


def test_keep_every_leaves_the_mid_run_checkpoints_on_disk(tmp_path, cache_dir):
    from ragen2.rundir import kept_checkpoints

    cfg = _cfg("trainer.algo=grpo", "trainer.steps=3", "trainer.keep_every=2", "collapse.enabled=false")
    train(cfg, tmp_path / "run", initial_policy(cfg, cache_dir), progress=False)
    kept = kept_checkpoints(tmp_path / "run")
    assert sorted(kept) == [2, 3]
    assert load_checkpoint(kept[2])["step"] == 2
    assert latest_checkpoint(tmp_path / "run") == kept[3]


def test_negative_keep_every_is_named(tmp_path, cache_dir):
    with pytest.raises(ValueError, match="trainer.keep_every"):
        train(_cfg("trainer.keep_every=-1"), tmp_path / "run", cache_dir=cache_dir, progress=False)


def test_dapo_refills_constant_groups_and_repeats_exactly(tmp_path, cache_dir, monkeypatch):
    import ragen2.rollout.collect as collect_mod
    from ragen2.trainer.dynamic_sampling import REFILL_SEED_OFFSET

    real = collect_mod.collect_rollouts

    def collect(model, tokenizer, env_cfg, rollout_cfg, seeds, **kw):  # refill groups made to vary
        batch = real(model, tokenizer, env_cfg, rollout_cfg, seeds, **kw)
        if min(seeds) >= rollout_cfg.train_seed + REFILL_SEED_OFFSET:
            for g in range(batch.env_groups):
                batch.trajectories[g * batch.group_size].score += 1.0
        return batch

    monkeypatch.setattr(collect_mod, "collect_rollouts", collect)
    cfg = _cfg("trainer.algo=dapo", "trainer.steps=3", "trainer.max_refill_rounds=3", "collapse.enabled=false")
    train(cfg, tmp_path / "a", initial_policy(cfg, cache_dir), progress=False)
    rows = read_metrics(tmp_path / "a")[1:]
    k, groups = cfg.rollout.group_size, cfg.rollout.env_groups
    for row in rows:
        dropped = row["filter/dynamic_sampling_dropped"]
        assert row["filter/dynamic_sampling_rounds"] == (1 if dropped else 0)  # one round fills the batch
        assert row["filter/dynamic_sampling_drawn"] == dropped and row["filter/dynamic_sampling_short"] == 0
        assert row["train/task_rows"] == k * groups and math.isfinite(row["actor/pg_loss"])
    assert sum(r["filter/dynamic_sampling_dropped"] for r in rows) > 0  # the untrained policy: constant groups
    train(cfg, tmp_path / "b", initial_policy(cfg, cache_dir), progress=False)
    assert _comparable(read_metrics(tmp_path / "b")) == _comparable(read_metrics(tmp_path / "a"))
    monkeypatch.setattr(collect_mod, "collect_rollouts", real)  # constant refills: rounds run out, no update
    train(cfg, tmp_path / "c", initial_policy(cfg, cache_dir), progress=False)
    for row in read_metrics(tmp_path / "c")[1:]:
        assert row["filter/dynamic_sampling_rounds"] == 3 and row["filter/dynamic_sampling_short"] == groups
        assert "train/task_rows" not in row


def test_resuming_a_run_of_another_config_is_refused(tmp_path, cache_dir):
    cfg = _cfg("trainer.algo=grpo", "trainer.steps=1", "collapse.enabled=false")
    train(cfg, tmp_path / "a", initial_policy(cfg, cache_dir), progress=False)
    with pytest.raises(ValueError, match=r"another config \(seed, trainer.actor_lr differ\)"):
        train(apply_overrides(cfg, ["seed=3", "trainer.actor_lr=0.5"]), tmp_path / "a",
              initial_policy(cfg, cache_dir), progress=False)
    again = train(cfg, tmp_path / "a", initial_policy(cfg, cache_dir), progress=False)  # the same config resumes
    assert again["steps_completed"] == 1


def test_fp16_checkpointed_ppo_run_keeps_fp32_masters_and_resumes_exactly(tmp_path, cache_dir):
    """Mixed precision end to end: fp16 autocast + loss scaling, activation checkpointing, a float16 reference."""
    cfg = _cfg("trainer.algo=ppo", "trainer.steps=2", "trainer.kl_coef=0.1", "trainer.precision=fp16",
               "policy.dtype=float16", "trainer.gradient_checkpointing=true", "trainer.logprob_micro_batch_size=6",
               "trainer.keep_every=1", "collapse.enabled=false")
    init = initial_policy(cfg, cache_dir)
    train(cfg, tmp_path / "full", init, progress=False)
    full = read_metrics(tmp_path / "full")
    for row in full[1:]:
        for name in DOCUMENTED + ["critic/vf_loss", "actor/kl"]:
            assert math.isfinite(row[name]), (name, row[name])
    state = load_checkpoint(latest_checkpoint(tmp_path / "full"))
    assert {v.dtype for v in state["actor"].values()} == {torch.float32}
    assert state["actor_scaler"]["scale"] > 0 and state["critic_scaler"] is not None
    # resume from the step-1 checkpoint (loss scales included): the same second step
    shutil.copytree(tmp_path / "full", tmp_path / "resumed")
    (tmp_path / "resumed" / "checkpoints" / "latest.json").write_text(
        json.dumps({"step": 1, "file": "step_000001.pt"}))
    train(cfg, tmp_path / "resumed", init, progress=False)
    assert _comparable(read_metrics(tmp_path / "resumed")) == _comparable(full)


def test_a_resumed_run_says_from_which_step(tmp_path, cache_dir, caplog):
    cfg = _cfg("trainer.algo=grpo", "trainer.steps=2", "trainer.report_to=none")
    train(cfg, tmp_path / "run", initial_policy(cfg, cache_dir), progress=False)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoints", "config.json", "env.json",
                                                                     "metrics.jsonl", "summary.json",
                                                                     "val_episodes.jsonl"]
    with caplog.at_level("INFO", logger="ragen2.trainer.loop"):
        train(cfg, tmp_path / "run", initial_policy(cfg, cache_dir), progress=False)
    assert [r.getMessage() for r in caplog.records] == [
        f"resuming {tmp_path / 'run'} from step 2 of 2 (step_000002.pt)"]
