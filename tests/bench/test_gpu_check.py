"""The prepared GPU check, run on a CPU at a tiny shape with the optional packages made unimportable."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ragen2.bench.gpu_check import main, parse_micro_batches, parse_shape

REPO = Path(__file__).resolve().parents[2]
ABSENT = ("gymnasium", "vllm", "trl", "dvc", "dvclive", "datasets", "bm25s", "accelerate", "peft", "deepspeed",
          "matplotlib", "papermill", "ragen2.envs", "ragen2.rollout.collect")
"""What the GPU machine lacks (and what the check must not load)."""


def test_gpu_check_runs_on_cpu_without_the_optional_packages():
    code = ("import sys\n"
            f"for name in {ABSENT!r}:\n"
            "    sys.modules[name] = None  # import fails, find_spec says absent\n"
            "from ragen2.bench.__main__ import main\n"
            "raise SystemExit(main(['--gpu', '--arch', 'tiny', '--shape', 'tiny', '--device', 'cpu', '--threads', '1',"
            " '--json']))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    steps = [(r["algo"], r["step"], r["status"]) for r in report["results"]]
    assert steps == [("ppo", 1, "ok"), ("grpo", 1, "ok"), ("grpo", 2, "ok")]
    # the paper profile's micro-batches per algorithm; no vLLM placeholder on a CPU
    assert [(r["micro_batch"], r["logprob_micro_batch"]) for r in report["results"]] == [(1, 2), (2, 4), (2, 4)]
    assert report["vllm_share"] == 0.0 and all(r["vllm_reserved_gb"] == 0.0 for r in report["results"])
    for r in report["results"]:
        assert r["weights_changed_fraction"] > 0.99  # lr 1e-6 under bf16 autocast moves the fp32 masters
        assert r["generated_tokens"] > 0 and r["gen_tokens_per_s"] > 0 and r["step_s"] > 0
        assert r["rows"] == 6 and r["trained_tokens"] == 6 * 12
        assert r["peak_allocated_gb"] is None and r["estimated_peak_gb"] > 0
    assert "critic/vf_loss" in report["results"][0]["metrics"]
    assert "ppo step 1:" in out.stderr and "weights changed" in out.stderr


def test_shape_option_takes_a_preset_and_overrides():
    shape = parse_shape("paper,micro_batch=4,groups=2")
    assert (shape.micro_batch, shape.groups, shape.group_size, shape.seq_len) == (4, 2, 16, 4000)
    with pytest.raises(ValueError, match="unknown shape"):
        parse_shape("huge")
    with pytest.raises(ValueError, match="bad shape override"):
        parse_shape("tiny,width=3")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_without_cuda_the_check_says_how_to_run_on_cpu(capsys):
    assert main(["--arch", "tiny"]) == 2
    assert "--device cpu" in capsys.readouterr().err


def test_time_budget_predictions_scale_with_model_size():
    from ragen2.bench.gpu_check import predicted_seconds

    assert predicted_seconds("ppo", 10, {}) == 0.0  # nothing measured yet: run it
    history = {"ppo": (100.0, 3_000)}
    assert predicted_seconds("grpo", 3_000, history) == 60.0  # GRPO from PPO's time
    assert predicted_seconds("ppo", 500, history) == 40.0  # a smaller model: at least 0.4 of the time
    history["grpo"] = (50.0, 3_000)
    assert predicted_seconds("grpo", 3_000, history) == 50.0


def test_a_spent_budget_skips_every_step(capsys):
    assert main(["--arch", "tiny", "--shape", "tiny", "--device", "cpu", "--budget-s", "0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {r["status"] for r in report["results"]} == {"skipped (time budget)"} and len(report["results"]) == 3


def test_micro_batches_option():
    assert parse_micro_batches("profile") == {"ppo": (1, 2), "grpo": (2, 4)}
    assert parse_micro_batches("shape") is None
    assert parse_micro_batches("ppo=2/4") == {"ppo": (2, 4), "grpo": (2, 4)}
    for bad in ("ppo=2", "dapo=2/4", "ppo=0/2", "ppo=a/b"):
        with pytest.raises(ValueError, match="bad micro-batches"):
            parse_micro_batches(bad)


def test_bad_vllm_share_is_a_one_line_error(capsys):
    assert main(["--arch", "tiny", "--shape", "tiny", "--device", "cpu", "--vllm-share", "0.95"]) == 2
    err = capsys.readouterr().err
    assert "--vllm-share" in err and "0.95" in err and len(err.strip().splitlines()) == 1
