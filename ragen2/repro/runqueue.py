"""Train many runs of ``params.yaml`` on a few long-lived worker processes, dearest run first.

``make repro`` trains the stale runs with it (``python -m ragen2 train-runs``). Compared with one
``python -m ragen2 train`` process per run (what each DVC ``train`` stage's command does), a worker
imports torch, transformers and ragen2 once (about 5 s per process on the 2-core machine) and then
trains run after run. Runs are handed out dearest first (:func:`by_cost`, from the measured
:data:`ragen2.repro.profiles.S_PER_STEP`), so the last run to finish is a short one and no worker idles long.

A run trained in a worker is the same run as one trained alone: :func:`ragen2.trainer.loop.train`
seeds every random stream from the run's config, so what a worker ran before does not change it
(tested). An interrupted run resumes from its checkpoint, as with ``train``; a directory that holds a
finished run (``summary.json``) or a run of another config starts over: ``make repro`` passes the runs
DVC finds stale, so a finished one was trained by other code or settings. So that an interrupted ``make`` keeps
the runs that did finish, ``on_done`` records them as they come (``train-runs --commit``: in ``dvc.lock``, every
:data:`COMMIT_EVERY_S` seconds and at the end).
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from ragen2.config import RunConfig, load_config

COMMIT_EVERY_S = 600.0
"""``train-runs --commit``: finished runs are recorded in ``dvc.lock`` at most this often (each record parses the
pipeline, seconds of CPU the workers would miss if it ran after every run) and once at the end."""


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


def _init_worker(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def _train_one(run_id: str, cfg: RunConfig, cache_dir: str, runs_root: str) -> tuple[str, float, str | None]:
    """Train one run in a worker; ``(run_id, seconds, None)`` or ``(run_id, seconds, traceback)``."""
    from ragen2.rundir import config_changes
    from ragen2.trainer.loop import train
    from ragen2.warmstart import initial_policy

    t0 = time.perf_counter()
    try:
        run_dir = Path(runs_root) / run_id
        resume = not (run_dir / "summary.json").exists() and not config_changes(cfg, run_dir)
        train(cfg, run_dir, initial_policy(cfg, Path(cache_dir)), resume=resume, progress=False)
    except Exception:  # noqa: BLE001 - reported per run; the other runs go on
        return run_id, time.perf_counter() - t0, traceback.format_exc()
    return run_id, time.perf_counter() - t0, None


def train_runs(run_ids: Sequence[str], *, params: str | Path = "params.yaml", workers: int = 2,
               threads: int | None = 1, cache_dir: str | Path = "data/cache", runs_root: str | Path = "data/runs",
               overrides: Sequence[str] = (), log: Callable[[str], None] = print,
               on_done: Callable[[list[str]], None] | None = None, every_s: float = COMMIT_EVERY_S) -> list[str]:
    """Train ``run_ids`` (each into ``runs_root/<id>``) on ``workers`` processes of ``threads`` torch threads,
    each run's params entry with ``overrides`` (``--set`` syntax) applied. ``on_done``, when given, is called with
    the runs finished since its last call, at most every ``every_s`` seconds and once at the end.

    Every id is checked against ``params`` before anything starts. A run that fails is reported through
    ``log`` with its traceback and the others go on.

    Returns:
        The ids of the runs that failed (empty when all finished).

    Raises:
        ValueError: ``workers < 1`` or an id repeated; ``ragen2.config.ConfigError``: an unknown id or bad config.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    if len(set(run_ids)) != len(run_ids):
        raise ValueError(f"run ids repeat: {sorted({r for r in run_ids if list(run_ids).count(r) > 1})}")
    configs = {rid: load_config(rid, params_path=params, overrides=list(overrides)) for rid in run_ids}
    order = by_cost(configs)
    failed: list[str] = []
    # spawn, not fork: the parent may hold torch threads; the workers inherit os.environ (offline settings)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, max(len(order), 1)), mp_context=context,
                             initializer=_init_worker, initargs=(threads,)) as pool:
        futures = [pool.submit(_train_one, rid, configs[rid], str(cache_dir), str(runs_root)) for rid in order]
        finished: list[str] = []
        last = time.monotonic()
        for done, future in enumerate(as_completed(futures), start=1):
            rid, seconds, error = future.result()
            if error is None:
                log(f"[{done}/{len(order)}] {rid}: {seconds:.0f} s")
                finished.append(rid)
            else:
                failed.append(rid)
                log(f"[{done}/{len(order)}] {rid} FAILED after {seconds:.0f} s:\n{error}")
            if on_done is not None and finished and (time.monotonic() - last >= every_s or done == len(order)):
                on_done(finished)
                finished, last = [], time.monotonic()
    return failed
