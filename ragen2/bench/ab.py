"""Two commits' training step, side by side: ``python -m ragen2.bench.ab OLD_TREE NEW_TREE``; or one tree under
native and pinned math kernels (:mod:`ragen2.kernels`): ``python -m ragen2.bench.ab --kernels TREE``.

Each tree (a checkout of the repository: ``git worktree add /tmp/old <commit>``) trains the same run of its
own ``params.yaml`` for ``--steps`` steps in a fresh process with one torch thread, from the same warm start
(one ``--cache-dir`` for both; the warm start is built once, before any timing, if missing). A repetition runs
every tree once, the order alternating between repetitions, so a change in the machine's load falls on both.
The figure per tree is the run's own timer (``summary.json``'s ``total_elapsed``, step-0 validation, MI
diagnostics, validation, logging and checkpoints included) over its steps: what the pipeline pays a step. The
speedup is old over new per repetition; the report gives its median, min and max and the phases' medians.

With ``--kernels`` the "old" side is the tree under ``RAGEN2_KERNELS=native`` (no pin: each library picks its
kernels for this CPU) and the "new" side the same tree under the pin, so the speedup below 1 is what the pin costs.

The trees must share the run-directory contract (``ragen2.config.load_config``, ``ragen2.warmstart.initial_policy``
and ``ragen2.trainer.loop.train(cfg, run_dir, init_policy, resume=..., progress=...)``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ragen2.kernels import PINNED

PHASES = ("rollout", "update", "diagnostics", "grad_analysis", "validation")
"""Phases read from each run's ``metrics.jsonl`` (one a tree does not log counts 0 there)."""
CHILD = """
import json, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
import transformers
transformers.logging.set_verbosity_error()
import dvclive  # imported before the timer, as in a pipeline worker
from ragen2.config import load_config
from ragen2.trainer.loop import train
from ragen2.warmstart import initial_policy
run_id, steps, out, cache, build_only = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5] == "1"
cfg = load_config(run_id, params_path="params.yaml", overrides=[f"trainer.steps={steps}", f"trainer.save_freq={steps}"])
init = initial_policy(cfg, cache)
if build_only:
    print(json.dumps({"init": str(init)}))
    sys.exit(0)
summary = train(cfg, out, init, resume=False, progress=False)
rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
rows = [r for r in rows if r["step"] >= 1]
phases = {k: sum(r.get(f"timing_s/{k}", 0.0) for r in rows) / len(rows) for k in PHASES}
print(json.dumps({"per_step": summary["timings_s"]["total_elapsed"] / len(rows), "steps": len(rows), **phases}))
""".replace("PHASES", repr(PHASES))


KERNEL_ENVS = {"native": {"RAGEN2_KERNELS": "native", **{k: None for k in PINNED}},
               "pinned": {"RAGEN2_KERNELS": "avx2", **PINNED}}
"""The child environments of ``--kernels`` (None: the variable is removed)."""


def run_tree(tree: Path, run_id: str, steps: int, out: Path, cache: Path, build_only: bool = False,
             env: dict[str, str | None] | None = None, cwd: Path | None = None) -> dict:
    """One training process of ``tree``'s package (``env``: variables set, or removed where None), in ``cwd``
    (default: ``tree``), whose ``params.yaml`` declares ``run_id``; its JSON report."""
    changes = env or {}
    env = {k: v for k, v in os.environ.items() if k not in changes}
    env.update({k: v for k, v in changes.items() if v is not None})
    env.update(PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", CHILD, run_id, str(steps), str(out), str(cache),
                           "1" if build_only else "0"], cwd=cwd or tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: training failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(old: Path, new: Path, run_id: str, steps: int, reps: int, cache: Path,
            envs: tuple[dict | None, dict | None] = (None, None), cwd: Path | None = None,
            log=lambda line: print(line, file=sys.stderr, flush=True)) -> dict:
    """Interleaved repetitions of both trees (``envs``: each side's environment changes, ``cwd``: where both run,
    see :func:`run_tree`); per-tree medians and the old/new speedup."""
    results: dict[str, list[dict]] = {"old": [], "new": []}
    env_of = {"old": envs[0], "new": envs[1]}
    with tempfile.TemporaryDirectory() as tmp:
        for name, tree in (("old", old), ("new", new)):  # the shared warm start, built before any timing if missing
            run_tree(tree, run_id, steps, Path(tmp) / "build", cache, build_only=True, env=env_of[name], cwd=cwd)
        for rep in range(reps):
            order = (("old", old), ("new", new)) if rep % 2 == 0 else (("new", new), ("old", old))
            for name, tree in order:
                load = os.getloadavg()[0]
                r = run_tree(tree, run_id, steps, Path(tmp) / f"{name}{rep}", cache, env=env_of[name], cwd=cwd)
                r["load"] = load
                results[name].append(r)
                log(f"rep {rep} {name}: {r['per_step']:.3f} s/step (load {load:.2f})")
    ratios = [o["per_step"] / n["per_step"] for o, n in zip(results["old"], results["new"])]
    summary = {name: {"per_step_median": statistics.median(r["per_step"] for r in rs),
                      "per_step_min": min(r["per_step"] for r in rs), "per_step_max": max(r["per_step"] for r in rs),
                      **{k: statistics.median(r[k] for r in rs) for k in PHASES}}
               for name, rs in results.items()}
    return {"run": run_id, "steps": steps, "reps": reps, "old": str(old), "new": str(new), "summary": summary,
            "speedup": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
            "runs": results}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragen2.bench.ab", description=__doc__.split("\n")[0])
    p.add_argument("old", type=Path, help="the baseline tree (a checkout of the older commit)")
    p.add_argument("new", type=Path, nargs="?", default=None, help="the candidate tree (not with --kernels)")
    p.add_argument("--kernels", action="store_true",
                   help="one tree (OLD) under native (old) and pinned (new) math kernels: what the pin costs")
    p.add_argument("--run", action="append", required=True, help="run id of both params.yaml (repeatable)")
    p.add_argument("--steps", type=int, default=30, help="RL steps per run (default: 30, the CPU profile's)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per tree (default: 3)")
    p.add_argument("--cache-dir", type=Path, default=Path("data/cache/bench-ab"), help="the shared warm-start cache")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    args = p.parse_args(argv)
    if args.steps < 1 or args.reps < 1:
        raise SystemExit(f"--steps={args.steps}, --reps={args.reps}: both must be >= 1")
    if (args.new is None) != args.kernels:
        raise SystemExit("give OLD and NEW trees, or one tree with --kernels")
    new, envs = (args.old, (KERNEL_ENVS["native"], KERNEL_ENVS["pinned"])) if args.kernels else (args.new, (None, None))
    report = {rid: compare(args.old.resolve(), new.resolve(), rid, args.steps, args.reps, args.cache_dir.resolve(),
                           envs=envs) for rid in args.run}
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    old_label, new_label = ("native", "pinned") if args.kernels else ("old", "new")
    for rid, r in report.items():
        s = r["speedup"]
        print(f"{rid}: {old_label} {r['summary']['old']['per_step_median']:.3f} s/step, {new_label} "
              f"{r['summary']['new']['per_step_median']:.3f} s/step, speedup {s['median']:.2f} "
              f"({s['min']:.2f}-{s['max']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
