"""Train params.yaml's runs on a Ray cluster, one GPU per run, then record them in dvc.lock for ``dvc repro``.

**UNTESTED ON A CLUSTER.** Written against Ray's core API (``ray.init``, ``@ray.remote(num_gpus=...)``,
``ray.wait``) and never run: the machine this package was built on has neither Ray nor a GPU.

Each run is trained by ``python -m ragen2 train-runs RUN_ID --workers 1`` in a subprocess on a worker with one
GPU: into ``data/runs/RUN_ID``, as the DVC ``train`` stage's command would, under ``make repro``'s rule (an
interrupted run resumes from its last checkpoint, so a retry after a lost node continues where it left off; a
finished run or one of another config starts over). Afterwards this script records the runs that succeeded with
``python -m ragen2 commit-runs`` (one write of ``dvc.lock``), so that ``dvc repro`` runs only the data stage, the
notebooks and the claims.

Assumptions: every Ray worker sees this repository checkout at the same path (a shared filesystem) with the same
Python environment, and the Hugging Face cache holds the policy (runs are offline).

Usage, from the repository root on a node of a running cluster (``ray start --head`` / ``ray start --address``)::

    python -m ragen2 profile paper --write params.yaml
    python examples/ray_paper_runs.py              # the stale runs (python -m ragen2 stale-runs)
    python examples/ray_paper_runs.py RUN_ID ...   # or the runs named
    dvc repro                                      # the data stage, notebooks and claims
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "DVC_NO_ANALYTICS": "1", "TOKENIZERS_PARALLELISM": "false"}


def stale_runs() -> list[str]:
    """The run ids whose DVC train stage is not up to date, in params.yaml order."""
    out = subprocess.run([sys.executable, "-m", "ragen2", "stale-runs"], cwd=REPO, check=True, capture_output=True,
                         text=True)
    return out.stdout.split()


def train_one(run_id: str, repo: str, threads: int) -> tuple[str, int, str]:
    """Train ``run_id`` in ``repo``; returns the run id, the exit status and the output's tail."""
    proc = subprocess.run([sys.executable, "-m", "ragen2", "train-runs", run_id, "--workers", "1",
                           "--threads", str(threads), "--cache-dir", "data/cache"],
                          cwd=repo, env={**os.environ, **OFFLINE}, capture_output=True, text=True, check=False)
    return run_id, proc.returncode, (proc.stdout + proc.stderr)[-2000:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_ids", nargs="*", help="runs of params.yaml (default: python -m ragen2 stale-runs)")
    p.add_argument("--address", default="auto", help="the Ray cluster to join (default: auto)")
    p.add_argument("--gpus-per-run", type=float, default=1.0)
    p.add_argument("--cpus-per-run", type=int, default=8, help="CPUs per run (also its torch threads)")
    p.add_argument("--retries", type=int, default=2, help="restarts of a run whose node died (it resumes)")
    args = p.parse_args(argv)

    import ray

    run_ids = args.run_ids or stale_runs()
    if not run_ids:
        print("nothing to train: every train stage is up to date")
        return 0
    ray.init(address=args.address)
    remote = ray.remote(num_gpus=args.gpus_per_run, num_cpus=args.cpus_per_run, max_retries=args.retries)(train_one)
    pending = [remote.remote(rid, str(REPO), args.cpus_per_run) for rid in run_ids]
    done, failed = [], []
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        run_id, status, tail = ray.get(ready[0])
        (done if status == 0 else failed).append(run_id)
        print(f"[{len(done) + len(failed)}/{len(run_ids)}] {run_id}: {'ok' if status == 0 else f'exit {status}'}",
              flush=True)
        if status != 0:
            print(tail, file=sys.stderr)
    if done:  # one process writes dvc.lock, after every run has finished
        subprocess.run([sys.executable, "-m", "ragen2", "commit-runs", *done], cwd=REPO, check=True)
    if failed:
        print(f"{len(failed)} run(s) failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
