"""Train many runs of ``params.yaml`` as Ray tasks, dearest run first: on a laptop, on one GPU box or on a cluster.

``make repro`` trains the stale runs with it (``python -m ragen2.repro train-runs``); so does a cluster
(``train-runs --address auto``, docs/cluster.md). Each run is one Ray task asking for the resources its profile
needs: ``threads`` CPUs (one on the CPU profile) and, where its policy runs on a GPU, one GPU (``gpus_per_run``),
so two 3B runs never share a device. Without ``address`` the command starts a local Ray of ``workers x threads``
CPUs itself and stops it at the end; with one it joins that cluster (``auto``: the one this node belongs to).

Ray keeps its worker processes between CPU tasks, so a worker imports torch, transformers and ragen2 once (about
5 s on the 2-core machine) and then trains run after run; a GPU run gets a worker of its own, which exits with it
(its CUDA memory and its vLLM engine go with it). Runs are submitted dearest first (:func:`by_cost`, from
the measured :data:`ragen2.repro.profiles.S_PER_STEP`), so the last run to finish is a short one and no worker
idles long.

A run trained by a worker is the same run as one trained alone by ``python -m ragen2 train RUN_ID``:
:func:`ragen2.trainer.loop.train` seeds every random stream from the run's config, and every worker gets the
pinned math kernels (:mod:`ragen2.kernels`) in its environment before it imports torch (tested). A task whose
worker dies (a killed process, a lost node) is retried ``retries`` times and resumes from the run's last
checkpoint; a directory that holds a finished run (``summary.json``) or a run of another config starts over:
``make repro`` passes the runs DVC finds stale, so a finished one was trained by other code or settings. So that
an interrupted ``make`` keeps the runs that did finish, ``on_done`` records them as they come (``train-runs
--commit``: in ``dvc.lock``, every :data:`COMMIT_EVERY_S` seconds and at the end).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragen2 import kernels
from ragen2.cli_options import OFFLINE_ENV
from ragen2.config import RunConfig, load_config

COMMIT_EVERY_S = 600.0
"""``train-runs --commit``: finished runs are recorded in ``dvc.lock`` at most this often (each record parses the
pipeline, seconds of CPU the workers would miss if it ran after every run) and once at the end."""
RETRIES = 2
"""How many times a run whose worker died is started again (it resumes from its last checkpoint)."""
LOCAL_OBJECT_STORE_BYTES = 200 * 1024 * 1024
"""The local Ray's object store: the tasks pass only configs and short reports, so a small one spares memory."""
WORKER_ENV = (kernels.OPT_OUT, *kernels.PINNED, *OFFLINE_ENV, "HF_HOME", "MPLBACKEND")
"""Variables handed to every worker as this process sees them (a cluster's workers do not inherit the driver's
environment): the kernel pins, which must be set before torch is imported, and the offline settings."""


@dataclass(frozen=True)
class RunReport:
    """What a task sends back."""

    run_id: str
    seconds: float
    error: str | None = None
    """The traceback of a run that failed, None when it finished."""
    resumed_from: str | None = None
    """The checkpoint file the run resumed from (an interrupted run, a retried task), None when it started fresh."""
    pid: int = 0
    """The worker process that trained it."""


def by_cost(configs: dict[str, RunConfig]) -> list[str]:
    """Run ids, dearest first by :func:`ragen2.repro.profiles.run_seconds` (ties and unmeasured envs keep their order;
    a run without a measured cost counts one second per step)."""
    from ragen2.repro.profiles import run_seconds

    def cost(rid: str) -> float:
        try:
            return run_seconds(configs[rid])
        except ValueError:
            return float(configs[rid].trainer.steps)

    return sorted(configs, key=lambda rid: -cost(rid))  # sorted() is stable


def wants_gpu(cfg: RunConfig, cluster_has_gpus: bool) -> bool:
    """Whether a run's policy runs on a GPU: ``policy.device`` ``cuda``/``cuda:N``, or ``auto`` where the cluster
    has GPUs."""
    device = cfg.policy.device
    return device.startswith("cuda") or (device == "auto" and cluster_has_gpus)


def _train_one(run_id: str, cfg: RunConfig, cache_dir: str, runs_root: str, threads: int | None) -> RunReport:
    """Train one run in a worker (the Ray task's body; plain-callable too)."""
    if "torch" not in sys.modules:  # a fresh worker: the pins (already in its environment: WORKER_ENV) or set now
        kernels.pin()
    t0 = time.perf_counter()
    try:
        import torch

        from ragen2.rundir import config_changes, latest_checkpoint
        from ragen2.trainer.loop import train
        from ragen2.warmstart import initial_policy

        if threads:
            torch.set_num_threads(threads)
        run_dir = Path(runs_root) / run_id
        resume = not (run_dir / "summary.json").exists() and not config_changes(cfg, run_dir)
        resumed = latest_checkpoint(run_dir) if resume else None
        train(cfg, run_dir, initial_policy(cfg, Path(cache_dir)), resume=resume, progress=False)
    except Exception:  # noqa: BLE001 - reported per run; the other runs go on
        return RunReport(run_id, time.perf_counter() - t0, traceback.format_exc(), pid=os.getpid())
    return RunReport(run_id, time.perf_counter() - t0, None, resumed.name if resumed else None, os.getpid())


def _train_one_on_a_fresh_worker(run_id: str, cfg: RunConfig, cache_dir: str, runs_root: str,
                                 threads: int | None) -> RunReport:
    """:func:`_train_one` for a worker that exits afterwards (GPU runs: a run's CUDA memory and vLLM engine go with
    its process)."""
    return _train_one(run_id, cfg, cache_dir, runs_root, threads)


def _start_ray(address: str | None, cpus: int):
    """``ray``, initialised: a local Ray of ``cpus`` CPUs (GPUs detected) or the cluster at ``address``; returns
    ``(ray, started)`` (``started``: this call started it, so the caller shuts it down)."""
    import ray

    if ray.is_initialized():
        return ray, False
    env = {key: os.environ[key] for key in WORKER_ENV if key in os.environ}
    common = dict(runtime_env={"env_vars": env}, logging_level=logging.WARNING, log_to_driver=True)
    if address is None:
        ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE_BYTES, **common)
    else:
        ray.init(address=address, **common)
    return ray, True


def train_runs(run_ids: Sequence[str], *, params: str | Path = "params.yaml", workers: int = 2,
               threads: int | None = 1, cache_dir: str | Path = "data/cache", runs_root: str | Path = "data/runs",
               overrides: Sequence[str] = (), log: Callable[[str], None] = print,
               on_done: Callable[[list[str]], None] | None = None, every_s: float = COMMIT_EVERY_S,
               address: str | None = None, gpus_per_run: float | None = None, retries: int = RETRIES,
               reports: list[RunReport] | None = None) -> list[str]:
    """Train ``run_ids`` (each into ``runs_root/<id>``) as Ray tasks of ``threads`` torch threads, each run's params
    entry with ``overrides`` (``--set`` syntax) applied. ``on_done``, when given, is called with the runs finished
    since its last call, at most every ``every_s`` seconds and once at the end.

    Args:
        workers: Runs at a time on the local Ray this call starts (its CPUs: ``workers x threads``); on a cluster
            (``address``) the cluster's resources decide.
        address: A running Ray cluster to join (``auto``, ``HOST:PORT``); None starts a local one.
        gpus_per_run: GPUs per task; None: 1 for runs whose policy runs on a GPU (:func:`wants_gpu`), else 0.
        retries: Restarts of a task whose worker died; the run resumes from its last checkpoint.
        reports: When given, every task's :class:`RunReport` is appended to it.

    Every id is checked against ``params`` before anything starts (and before Ray is imported). A run that fails is
    reported through ``log`` with its traceback and the others go on.

    Returns:
        The ids of the runs that failed (empty when all finished).

    Raises:
        ValueError: ``workers < 1``, ``retries < 0`` or an id repeated; ``ragen2.config.ConfigError``: an unknown id
            or a bad config.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries!r}")
    if gpus_per_run is not None and gpus_per_run < 0:
        raise ValueError(f"gpus_per_run must be >= 0, got {gpus_per_run!r}")
    if len(set(run_ids)) != len(run_ids):
        raise ValueError(f"run ids repeat: {sorted({r for r in run_ids if list(run_ids).count(r) > 1})}")
    configs = {rid: load_config(rid, params_path=params, overrides=list(overrides)) for rid in run_ids}
    order = by_cost(configs)
    if not order:
        return []
    cpus = max(threads or 1, 1)
    ray, started = _start_ray(address, workers * cpus)
    try:
        gpus_there = ray.cluster_resources().get("GPU", 0)
        asks = {rid: gpus_per_run if gpus_per_run is not None else float(wants_gpu(configs[rid], gpus_there > 0))
                for rid in order}
        if (wanting := [rid for rid in order if asks[rid] > gpus_there]):
            raise ValueError(f"run {wanting[0]} asks for {asks[wanting[0]]:g} GPU(s) (policy.device="
                             f"{configs[wanting[0]].policy.device!r}) but the Ray cluster has {gpus_there:g}; "
                             "train it where there are GPUs, or on the CPU with --set policy.device=cpu")
        reused, fresh = ray.remote(_train_one), ray.remote(max_calls=1)(_train_one_on_a_fresh_worker)
        refs = {}
        for rid in order:
            gpus = asks[rid]
            task = fresh if gpus > 0 else reused
            options = task.options(num_cpus=cpus, num_gpus=gpus, max_retries=retries, name=f"train {rid}")
            refs[options.remote(rid, configs[rid], str(cache_dir), str(runs_root), threads)] = rid
        failed, finished, pending, done = [], [], list(refs), 0
        last = time.monotonic()
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            done += 1
            try:
                report = ray.get(ready[0])
            except ray.exceptions.RayError as err:  # the worker died more often than retries allow
                report = RunReport(refs[ready[0]], 0.0, f"its worker was lost {retries + 1} time(s): "
                                                        f"{type(err).__name__}: {str(err).splitlines()[0]}")
            if reports is not None:
                reports.append(report)
            rid = report.run_id
            if report.error is None:
                resumed = f" (resumed from {report.resumed_from})" if report.resumed_from else ""
                log(f"[{done}/{len(order)}] {rid}: {report.seconds:.0f} s{resumed}")
                finished.append(rid)
            else:
                failed.append(rid)
                log(f"[{done}/{len(order)}] {rid} FAILED after {report.seconds:.0f} s:\n{report.error}")
            if on_done is not None and finished and (time.monotonic() - last >= every_s or not pending):
                on_done(finished)
                finished, last = [], time.monotonic()
    finally:
        if started:
            ray.shutdown()
    return [rid for rid in order if rid in failed]
