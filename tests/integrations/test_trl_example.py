"""examples/trl_snr_filter.py: which policy it starts from, and (slow) a whole run's log."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from ragen2.config import load_config  # noqa: E402
from ragen2.warmstart import warm_start_key  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "trl_snr_filter.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("trl_snr_filter_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_config_is_the_pipelines_base_so_its_warm_start_is_found(example):
    cfg = example.example_config(example.parse_args([]))
    base = load_config(None, REPO / "params.yaml")
    assert warm_start_key(cfg) == warm_start_key(base)
    assert cfg.rollout.max_turns == base.rollout.max_turns and cfg.env == base.env
    # Other kwargs of the same env keep the warm start (its corpus env is pinned) ...
    slip_free = example.example_config(example.parse_args(["--env-kwargs", '{"success_rate": 1.0}']))
    assert slip_free.env.kwargs == {"success_rate": 1.0} and warm_start_key(slip_free) == warm_start_key(base)
    # ... another env gets its own, with that env's default limits.
    bandit = example.example_config(example.parse_args(["--env", "bandit", "--max-new-tokens", "32"]))
    assert bandit.env.name == "bandit" and bandit.rollout.max_turns == 0 and bandit.rollout.max_new_tokens == 32
    assert warm_start_key(bandit) != warm_start_key(base)


def test_without_params_the_fallback_config_is_used(example, tmp_path):
    cfg = example.example_config(example.parse_args(["--params", str(tmp_path / "none.yaml")]))
    assert cfg.env.name == "frozenlake" and cfg.rollout.max_new_tokens == example.FALLBACK_CONFIG.rollout.max_new_tokens


def test_starting_policy_prefers_the_pipelines_warm_start(example, tmp_path, monkeypatch):
    calls = []

    def fake_initial_policy(cfg, cache_dir):
        calls.append((cfg.warm_start, Path(cache_dir)))
        return Path(cache_dir) / "warm_start" / warm_start_key(cfg)

    monkeypatch.setattr(example, "initial_policy", fake_initial_policy)
    cfg = example.example_config(example.parse_args([]))
    pipeline, quick_cache = tmp_path / "pipeline", tmp_path / "quick"
    path, source = example.starting_policy(cfg, pipeline_cache=pipeline, cache_dir=quick_cache, quick_steps=50)
    assert source == "quick" and calls[-1][1] == quick_cache
    assert calls[-1][0].steps == 50 and calls[-1][0].num_episodes == example.QUICK_EPISODES
    built = pipeline / "warm_start" / warm_start_key(cfg)
    built.mkdir(parents=True)
    (built / "warm_start.json").write_text("{}")
    path, source = example.starting_policy(cfg, pipeline_cache=pipeline, cache_dir=quick_cache, quick_steps=50)
    assert (path, source) == (built, "pipeline") and calls[-1] == (cfg.warm_start, pipeline)


def test_summary_line_and_policy_description(example, tmp_path):
    log = {"reward": 0.25, "filter/kept_count": 6.0, "filter/dropped_count": 2.0, "grad_norm": 0.9, "other": 1.0}
    assert example.summary_line(2, log) == ("step 2: reward=0.25, filter/kept_count=6, filter/dropped_count=2, "
                                            "grad_norm=0.9")
    assert "random-initialised" in example.describe_policy(tmp_path, "quick", 0.0)
    (tmp_path / "warm_start.json").write_text(json.dumps({"steps": 200, "greedy_success": 0.16, "eval_seeds": 32}))
    line = example.describe_policy(tmp_path, "quick", 81.2)
    assert "quick warm start (200 SFT steps)" in line and "greedy success 0.16" in line and "81 s" in line


@pytest.mark.slow
def test_example_run_keeps_and_drops_groups_and_does_not_warn(tmp_path):
    """The practitioner's first run, end to end: a quick warm start built on the spot (about 1.5 minutes on
    a busy 2-core CPU), then 3 GRPO steps whose log shows kept and dropped groups and a real update."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--pipeline-cache", str(tmp_path / "no-pipeline"),
         "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out)],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "a quick warm start (200 SFT steps)" in proc.stdout
    assert "CollapseWarning" not in proc.stderr and "template collapse" not in proc.stderr
    steps = [h for h in json.loads((out / "log_history.json").read_text()) if "reward" in h]
    assert len(steps) == 3
    assert sum(h["filter/kept_count"] for h in steps) > 0 and sum(h["filter/dropped_count"] for h in steps) > 0
    assert all(h["grad_norm"] > 0 for h in steps) and any(h["loss"] != 0 for h in steps)
    assert all(h["mi/collapse_alarm"] == 0 and h["mi/skipped"] == 0 for h in steps)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert len(lines) == 3 and all("filter/kept_count=" in line and "filter/dropped_count=" in line for line in lines)
