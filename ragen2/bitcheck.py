"""``python -m ragen2.bitcheck``: does this machine train the committed bits?

A short fixed training of the tiny policy on one torch thread, under the pinned kernels
(:mod:`ragen2.kernels`): a few SFT steps of a warm start on FrozenLake, then two GRPO steps with the MI
diagnostics and a validation; and GRPO's advantages of every group of 16 rewards in {-0.1, 0, 1} (the CPU profile's
group size and FrozenLake's rewards: every group standard deviation its runs can meet, where a square root that is not
correctly rounded gives other bits on another CPU vendor). The SHA-256 of the warm start's and of the trained actor's
weights, of every logged value but the timings, and of those advantages must equal :data:`REFERENCE`, recorded with the locked environment
(``requirements-cpu.lock``) on an x86-64 CPU. Equal hashes here mean the pipeline's runs give the
committed numbers on this machine; other hashes mean they will not, and the printed machine record says what
differs. It takes about ten seconds; ``tests/test_bitcheck.py`` runs it in ``make test``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

REFERENCE = {
    "warm_start_sha256": "9dc5baf223f37cc04eac327475740d10618e7f19a8022e57572d1d13076c26f5",
    "actor_sha256": "f6a74528748c50fe2058982af3f2d5cc271198a8e8f3a88f2a663f74e182f170",
    "metrics_sha256": "72fdaf7eb59c156e0dde648128b3ce5732568995dbeede51e610e1a8fcde7930",
    "advantages_sha256": "004e2ad4f31918abd80385b49ec2234f1a52562c8573aebcd4c54ab00ba1c618",
    "versions": {"torch": "2.13.0+cpu", "transformers": "5.24.0"},
}
"""The hashes the fixed training gives under the pin, and the library versions they were made with."""

OVERRIDES = [
    "env.name=frozenlake", "seed=0", "policy.device=cpu",
    "warm_start.steps=4", "warm_start.batch_size=8", "warm_start.num_episodes=16",
    "rollout.env_groups=2", "rollout.group_size=4", "rollout.max_turns=1", "rollout.max_new_tokens=16",
    "rollout.val_groups=2", "trainer.algo=grpo", "trainer.steps=2", "trainer.mini_batch_size=4",
    "trainer.micro_batch_size=4", "trainer.test_freq=0", "trainer.save_freq=0", "trainer.entropy_coef=0.01",
    "collapse.num_samples=8",
]
"""The fixed training: the tiny policy's defaults with these ``--set`` overrides."""


def state_sha256(state: dict[str, Any]) -> str:
    """SHA-256 over a state dict's tensors (names and raw bytes, in name order)."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(name.encode() + b"\0" + str(tensor.dtype).encode() + b"\0")
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


HASHED = ("warm_start_sha256", "actor_sha256", "metrics_sha256", "advantages_sha256")
"""The hashes :func:`verdict` compares."""
GROUP_SIZE = 16
REWARDS = (-0.1, 0.0, 1.0)
"""FrozenLake's rewards (an invalid answer, a miss, the goal) and the CPU profile's GRPO group size."""


def reward_groups() -> tuple[Any, Any]:
    """Scores and group ids of every group of :data:`GROUP_SIZE` rewards drawn from :data:`REWARDS` (153 groups,
    one per multiset of rewards, in a fixed order), as float32 / int64 tensors."""
    import itertools

    import torch

    groups = list(itertools.combinations_with_replacement(REWARDS, GROUP_SIZE))
    scores = torch.tensor([r for group in groups for r in group], dtype=torch.float32)
    return scores, torch.arange(len(groups)).repeat_interleave(GROUP_SIZE)


def advantages_sha256() -> str:
    """SHA-256 of GRPO's advantages over :func:`reward_groups` (one batch) and of the batch's ``adv/std``."""
    from ragen2.kernels import exact_sqrt
    from ragen2.trainer.advantages import grpo_advantages

    adv = grpo_advantages(*reward_groups())
    spread = exact_sqrt(((adv - adv.mean()) ** 2).mean())
    return hashlib.sha256(adv.numpy().tobytes() + spread.numpy().tobytes()).hexdigest()


def fixed_training(work_dir: Path) -> dict[str, Any]:
    """Run the fixed training in ``work_dir`` (one torch thread); its hashes, versions and machine record."""
    import torch
    import transformers

    from ragen2 import kernels
    from ragen2.config import RunConfig, apply_overrides
    from ragen2.policy import load_policy
    from ragen2.rundir import latest_checkpoint
    from ragen2.trainer.checkpoint import load_checkpoint
    from ragen2.trainer.loop import train
    from ragen2.trainer.runlog import read_metrics
    from ragen2.warmstart import initial_policy

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="collapse_", category=UserWarning)  # a 4-step warm start barely reasons
    cfg = apply_overrides(RunConfig(), OVERRIDES)
    init = initial_policy(cfg, work_dir / "cache")
    warm, _ = load_policy(init, device="cpu")
    train(cfg, work_dir / "run", init, resume=False, progress=False)
    actor = load_checkpoint(latest_checkpoint(work_dir / "run"))["actor"]
    rows = [{k: v for k, v in row.items() if not k.startswith("timing_s/")} for row in read_metrics(work_dir / "run")]
    return {"warm_start_sha256": state_sha256(warm.state_dict()), "actor_sha256": state_sha256(actor),
            "metrics_sha256": hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest(),
            "advantages_sha256": advantages_sha256(),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
            "machine": kernels.machine_record()}


def verdict(result: dict[str, Any], reference: dict[str, Any] = REFERENCE) -> tuple[bool, str]:
    """``(same bits, one line saying so or why not)``."""
    keys = HASHED
    if all(result[k] == reference[k] for k in keys):
        return True, "same bits as the committed results"
    from ragen2.kernels import mismatch

    why = [mismatch(result["machine"]) or "pinned kernels as the reference's"]
    if result["versions"] != reference["versions"]:
        why.append(f"versions {result['versions']} (reference: {reference['versions']})")
    differs = [k for k in keys if result[k] != reference[k]]
    return False, (f"other bits ({', '.join(differs)}) on {result['machine']['cpu_model']} "
                   f"(capability {result['machine']['torch_capability']}): {'; '.join(why)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragen2.bitcheck", description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = p.parse_args(argv)
    from ragen2 import kernels

    kernels.pin()
    with tempfile.TemporaryDirectory() as tmp:
        result = fixed_training(Path(tmp))
    same, line = verdict(result)
    print(json.dumps({**result, "same_bits": same, "verdict": line}, indent=None if args.json else 2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
