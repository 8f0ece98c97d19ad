"""Tests of ``ragen2.bench``: the report's shape and the timing helpers. No assertions on speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen2.bench import BENCHMARKS, Comparison, Sample, interleave, machine_info
from ragen2.bench.__main__ import main
from ragen2.bench.baseline import generate_loop
from ragen2.bench.cases import Shape, bench_rollout, bench_update_shared_prefix, make_context
from ragen2.bench.steps import with_response_reasoning
from ragen2.config import EnvConfig, RolloutConfig

DETAIL_KEYS = {"median", "min", "max", "baseline_s", "candidate_s", "reps", "ratios"}
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bench-cache")


@pytest.fixture(scope="module")
def ctx(cache_dir):
    return make_context(cache_dir)


def check_report(report: dict, names) -> None:
    for name in names:
        assert isinstance(report[name], float), name
        detail = report["details"][name]
        assert DETAIL_KEYS <= set(detail), name
        assert detail["min"] <= detail["median"] <= detail["max"]
        assert detail["baseline_s"] > 0 and detail["candidate_s"] > 0
        assert len(detail["baseline_runs_s"]) == len(detail["candidate_runs_s"]) == detail["reps"]
        assert set(report["targets"][name]) == {"op", "value", "met"}
    machine = report["machine"]
    assert {"cpu_model", "cpu_flags", "torch_capability", "kernels", "cpu_count", "torch_threads", "load_average",
            "versions"} <= set(machine)
    assert machine["versions"]["torch"] and machine["versions"]["transformers"]
    assert report["seconds_total"] > 0


# ---------------------------------------------------------------------------------------------
# Timing helpers (no model)
# ---------------------------------------------------------------------------------------------
def test_interleave_alternates_order_and_forms_ratios():
    calls = []

    def base():
        calls.append("b")
        return Sample(2.0, 10.0)

    def cand():
        calls.append("c")
        return Sample(1.0, 10.0)

    comp = interleave("speedup", base, cand, reps=3, warmup=1)
    assert calls == ["b", "c", "b", "c", "c", "b", "b", "c"]
    assert comp.ratios == [2.0, 2.0, 2.0]
    assert interleave("throughput", base, cand, reps=1, warmup=0).ratios == [2.0]
    assert interleave("time_fraction", base, cand, reps=1, warmup=0).ratios == [0.5]


def test_comparison_summary_has_median_min_max():
    comp = Comparison("speedup")
    for base, cand in [(3.0, 1.0), (2.0, 1.0), (4.0, 1.0)]:
        comp.add(Sample(base), Sample(cand))
    summary = comp.summary()
    assert (summary["median"], summary["min"], summary["max"]) == (3.0, 2.0, 4.0)
    assert summary["baseline_s"] == 3.0 and summary["candidate_s"] == 1.0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="'nope'"):
        interleave("nope", lambda: Sample(1.0), lambda: Sample(1.0), reps=1)
    with pytest.raises(ValueError, match="reps=0"):
        interleave("speedup", lambda: Sample(1.0), lambda: Sample(1.0), reps=0)
    with pytest.raises(ValueError, match="no repetitions"):
        Comparison("speedup").summary()


def test_machine_info_reports_threads_and_versions():
    info = machine_info()
    assert info["torch_threads"] >= 1 and info["cpu_count"] >= 1
    assert info["versions"]["torch"]


# ---------------------------------------------------------------------------------------------
# Tiny benchmark runs
# ---------------------------------------------------------------------------------------------
def test_generate_loop_counts_new_tokens(ctx):
    rc = RolloutConfig(max_turns=2, max_new_tokens=4)
    tokens = generate_loop(ctx.model, ctx.tokenizer, EnvConfig(name="frozenlake"), rc, [1], group_size=2,
                           temperature=1.0, seed=0)
    assert 0 < tokens <= 2 * 2 * 4


def test_bench_rollout_counts_tokens_on_both_sides(ctx):
    comp = bench_rollout(ctx, Shape(1, 2, 1, 4), reps=1, warmup=0)
    summary = comp.summary()
    assert 0 < summary["baseline_work"][0] <= 8 and 0 < summary["candidate_work"][0] <= 8
    assert summary["median"] > 0


def test_shared_prefix_update_bench_compares_equal_forwards(ctx):
    comp = bench_update_shared_prefix(ctx, Shape(2, 3, 1, 6), reps=1, warmup=0)
    summary = comp.summary()
    assert summary["median"] > 0 and summary["baseline_s"] > 0 and summary["candidate_s"] > 0
    assert summary["max_abs_diff"] < 1e-4  # the two forwards give the same log-probs
    assert summary["rows"] == 6 and summary["prompt_tokens_mean"] > 0


def test_with_response_reasoning_fills_every_turn(ctx):
    from ragen2.rollout import collect_rollouts

    batch = collect_rollouts(ctx.model, ctx.tokenizer, EnvConfig(name="frozenlake"),
                             RolloutConfig(max_turns=2, max_new_tokens=4), [3], group_size=2, temperature=1.0,
                             seed=0)
    filled = with_response_reasoning(batch, ctx.tokenizer)
    assert all(turn.reasoning_ids for t in filled.trajectories for turn in t.turns)
    assert all(t.first_reasoning_ids == t.turns[0].reasoning_ids for t in filled.trajectories)
    assert filled is not batch and len(filled) == len(batch)


@pytest.fixture
def keep_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_cli_prints_one_json_object_last(tmp_path, capsys, keep_threads, ctx, cache_dir):
    out_file = tmp_path / "report.json"
    assert main(["--quick", "--json", "--only", "scoring_speedup_vs_naive", "--cache-dir", str(cache_dir),
                 "--out", str(out_file), "--record", str(tmp_path / "records")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    (record_file,) = (tmp_path / "records").glob("*_quick.json")  # the run kept as a dated record
    record = json.loads(record_file.read_text())
    assert record["mode"] == "quick" and record["threads"] == 1 and record["report"]["mode"] == "quick"
    report = json.loads(last)
    check_report(report, ["scoring_speedup_vs_naive"])
    assert report["mode"] == "quick" and report["machine"]["torch_threads"] == 1
    assert report["details"]["scoring_speedup_vs_naive"]["max_abs_diff"] < 1e-3
    assert json.loads(out_file.read_text()) == report


def test_cli_rejects_bad_input_in_one_line(tmp_path, capsys, keep_threads):
    assert main(["--quick", "--only", "bogus", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--only=bogus" in err
    assert main(["--only", "step_over_floor_ppo", "--params", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "missing.yaml" in err and "does not exist" in err
    assert main(["--threads", "0"]) == 2
    assert "--threads=0" in capsys.readouterr().err


def test_a_failing_figure_is_reported_and_the_rest_still_run(tmp_path, capsys, keep_threads, cache_dir,
                                                             monkeypatch):
    import ragen2.bench.cases as cases

    def fails(*args, **kwargs):
        raise RuntimeError("no such run\n(a second line)")

    def measured(*args, **kwargs):
        comp = Comparison("speedup")
        comp.add(Sample(2.0), Sample(1.0))
        return comp

    written = []
    monkeypatch.setattr(cases, "bench_rollout", fails)
    monkeypatch.setattr(cases, "bench_scoring", measured)
    report = cases.run_benchmarks(cases.QUICK, cache_dir, only=("rollout_speedup_vs_generate",
                                                                "scoring_speedup_vs_naive"),
                                  log=lambda line: None, on_figure=lambda r: written.append(dict(r)))
    assert report["rollout_speedup_vs_generate"] is None
    assert report["details"]["rollout_speedup_vs_generate"]["failed"] == "RuntimeError: no such run (a second line)"
    assert report["targets"]["rollout_speedup_vs_generate"]["met"] is None
    assert report["scoring_speedup_vs_naive"] == 2.0  # the next figure still ran
    assert [sorted(k for k in r if k in BENCHMARKS) for r in written] == [
        ["rollout_speedup_vs_generate"], ["rollout_speedup_vs_generate", "scoring_speedup_vs_naive"]]
    out_file = tmp_path / "report.json"
    assert main(["--quick", "--only", "rollout_speedup_vs_generate", "--cache-dir", str(cache_dir), "--out",
                 str(out_file)]) == 1  # a figure failed
    assert "rollout_speedup_vs_generate failed: RuntimeError" in capsys.readouterr().out
    assert json.loads(out_file.read_text())["rollout_speedup_vs_generate"] is None


@pytest.mark.slow
def test_quick_json_run_has_every_key(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "ragen2.bench", "--quick", "--json", "--cache-dir",
                           str(tmp_path / "cache")], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    check_report(report, BENCHMARKS)
    assert set(report["details"]) == set(BENCHMARKS)


def test_the_pins_price_is_the_pinned_step_over_the_native_one(tmp_path, monkeypatch, cache_dir):
    """pinned_step_over_native trains the same run under both kernel settings (fresh processes, interleaved) and
    reports pinned over native per repetition, with each side's phases."""
    import ragen2.bench.ab as ab
    import ragen2.bench.cases as cases

    seen = {}

    def fake_compare(old, new, run_id, steps, reps, cache, envs, cwd, log):
        import yaml

        seen.update(params=yaml.safe_load((cwd / "params.yaml").read_text()), run_id=run_id, envs=envs, steps=steps)
        phases = {k: 0.1 for k in ab.PHASES}
        return {"runs": {"old": [{"per_step": 1.0}, {"per_step": 2.0}], "new": [{"per_step": 1.5}, {"per_step": 2.0}]},
                "summary": {"old": phases, "new": {**phases, "update": 0.3}}}

    monkeypatch.setattr(ab, "compare", fake_compare)
    summary = cases.bench_pin_price(cases.QUICK, Path("params.yaml"), cache_dir, log=lambda line: None).summary()
    assert summary["ratios"] == [1.5, 1.0] and summary["median"] == 1.25
    assert summary["phases_pinned_s"]["update"] == 0.3 and summary["steps"] == cases.QUICK.pin_steps
    assert seen["run_id"] in seen["params"]["runs"] and seen["envs"] == (ab.KERNEL_ENVS["native"], ab.KERNEL_ENVS["pinned"])
