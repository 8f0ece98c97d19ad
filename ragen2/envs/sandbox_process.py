"""Starting, feeding, bounding and killing the DeepCoder sandbox process (host side).

:func:`run_worker` starts :mod:`ragen2.envs.sandbox_worker` either under bubblewrap
(``backend="bwrap"``) or as a plain rlimited subprocess (``backend="rlimit"``), sends it its
request, collects its report stream under a wall-clock deadline and a size cap, and makes sure no
process it started outlives the call. See :mod:`ragen2.envs.sandbox` for the containment model.
"""

from __future__ import annotations

import glob
import logging
import marshal
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ragen2.envs import sandbox_worker

logger = logging.getLogger(__name__)

#: Extra wall time granted on top of the suite limit for starting the sandbox and the interpreter.
STARTUP_GRACE_S = 5.0
#: Sandbox uids used when the host runs as root: a fresh one per call, cycling through this range.
UID_BASE, UID_SPAN = 1_500_000_000, 1_000_000
_WORKER_SOURCE = Path(sandbox_worker.__file__).read_text(encoding="utf-8") + "\nmain()\n"
_uid_counter = 0
_uid_lock = threading.Lock()


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run (see :func:`ragen2.envs.sandbox.run_tests`)."""

    wall_s: float
    cpu_s: int
    memory_bytes: int
    file_bytes: int
    tmpfs_bytes: int
    open_files: int
    processes: int


@dataclass(frozen=True)
class WorkerRun:
    """What came back from one run: the raw report stream, or why there is none."""

    reports: bytes
    timed_out: bool
    exit_code: int | None
    stderr: str


# -- who runs the sandbox ---------------------------------------------------------------------
def next_uid() -> int | None:
    """A fresh unprivileged uid for this call when we are root, else ``None`` (keep our own uid).

    Root ignores ``RLIMIT_NPROC``; an unused uid per call also keeps concurrent sandboxes from
    sharing one process budget and lets us kill every leftover process of the call by uid.
    """
    global _uid_counter
    if os.geteuid() != 0:
        return None
    with _uid_lock:
        _uid_counter += 1
        return UID_BASE + (os.getpid() * 1009 + _uid_counter) % UID_SPAN


def _world_usable(path: str) -> bool:
    """True if every directory above ``path`` is world-searchable and the file world-executable."""
    path = os.path.realpath(path)
    try:
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
        parent = os.path.dirname(path)
        while True:
            if not os.stat(parent).st_mode & 0o001:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def interpreter(drop_uid: bool) -> str:
    """The Python the sandbox runs: ours, or a system Python when other uids cannot read ours."""
    ours = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    if not drop_uid or _world_usable(ours):
        return ours
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3") or ""):
        if candidate and _world_usable(candidate):
            return os.path.realpath(candidate)
    return ours


# -- command lines ------------------------------------------------------------------------------
def bwrap_argv(python: str, limits: Limits) -> list[str]:
    """bubblewrap's command line: a minimal read-only root, private size-capped tmpfs dirs, no network."""
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns"]
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox", "--clearenv"]
    prefix = os.path.dirname(os.path.dirname(python))  # /usr for /usr/bin/python3
    mounted: list[str] = []
    for path in ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", prefix]:
        if os.path.exists(path) and not any(path == m or path.startswith(m + "/") for m in mounted):
            argv += ["--ro-bind", path, path]
            mounted.append(path)
    # Hide installed packages (ragen2 and its data may live there); the worker needs the stdlib only.
    hidden = {
        path
        for root in (prefix, "/usr", "/usr/local")
        for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages")
        for path in glob.glob(os.path.join(root, pattern))
        if os.path.isdir(path) and any(path.startswith(m + "/") for m in mounted)
    }
    for path in sorted(hidden):
        argv += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
    size = str(limits.tmpfs_bytes)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/sandbox", "--chdir", "/sandbox"]
    for key, value in _sandbox_env("/sandbox", "/tmp").items():
        argv += ["--setenv", key, value]
    return argv


def _sandbox_env(home: str, tmp: str) -> dict[str, str]:
    return {"HOME": home, "TMPDIR": tmp, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


def _preexec(uid: int | None, limits: Limits):
    """Runs in the forked child before ``exec``: limits for the whole sandbox tree, then drop root."""

    def preexec() -> None:
        for which, value in (
            (resource.RLIMIT_CPU, limits.cpu_s),
            (resource.RLIMIT_AS, limits.memory_bytes),
            (resource.RLIMIT_FSIZE, limits.file_bytes),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(which, (value, value))
        if uid is not None:
            # A fresh uid owns no other process, so the limit can be set here; otherwise the worker
            # sets it inside its own user namespace, where it counts only the sandbox's processes.
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return preexec


# -- running ------------------------------------------------------------------------------------
def run_worker(backend: str, request: dict, limits: Limits) -> WorkerRun:
    """Run the worker on ``request`` (``code``, ``tests``) under ``backend`` within ``limits``.

    Never raises on anything the sandboxed code does; a failure to start is reported through
    ``exit_code=None`` and ``stderr``.
    """
    uid = next_uid()
    python = interpreter(uid is not None)
    worker = [python, "-S", "-s", "-B", "-c", _WORKER_SOURCE]
    workdir = None
    if backend == "bwrap":
        argv, cwd, env = bwrap_argv(python, limits) + ["--"] + worker, "/", {"PATH": "/usr/bin:/bin"}
    else:
        workdir = tempfile.mkdtemp(prefix="ragen2-sandbox-")
        if uid is not None:
            os.chown(workdir, uid, uid)
        argv, cwd, env = worker, workdir, _sandbox_env(workdir, workdir)
    processes = limits.processes if backend == "bwrap" or uid is not None else limits.processes + _own_task_count()
    payload = marshal.dumps({"code": request["code"], "tests": request["tests"], "processes": processes})
    # Base64 reports of at most MAX_REPORT_BYTES per field; never hold more than 64 MiB of them.
    cap = min(len(request["tests"]) * (2 * sandbox_worker.MAX_REPORT_BYTES + 4096) + 65536, 64 << 20)
    try:
        return _communicate(argv, cwd, env, _preexec(uid, limits), payload, limits.wall_s, cap)
    finally:
        kill_uid(uid)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _communicate(argv, cwd, env, preexec, payload: bytes, wall_s: float, cap: int) -> WorkerRun:
    """Start ``argv``, write ``payload``, read stdout/stderr until exit, deadline or ``cap`` bytes."""
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
            preexec_fn=preexec, start_new_session=True, close_fds=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return WorkerRun(b"", False, None, f"could not start the sandbox: {exc}")
    # Until the worker says it has started, the deadline includes the start-up grace; then the
    # suite gets exactly ``wall_s``.
    deadline = time.monotonic() + wall_s + STARTUP_GRACE_S
    started = False
    out, err, pending = bytearray(), bytearray(), memoryview(payload)
    timed_out = False
    with selectors.DefaultSelector() as selector:
        os.set_blocking(proc.stdin.fileno(), False)
        selector.register(proc.stdin, selectors.EVENT_WRITE)
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                if key.fileobj is proc.stdin:
                    try:
                        pending = pending[os.write(proc.stdin.fileno(), pending[:65536]) :]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the worker died before reading its request
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if not started and key.data is out and out.startswith(sandbox_worker.STARTED):
                    started = True
                    deadline = min(deadline, time.monotonic() + wall_s)
            if len(out) + len(err) > cap:
                break  # a flood on the report stream: stop reading, kill, judge what we have
    kill_group(proc)
    exit_code = proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if not stream.closed:
            stream.close()
    return WorkerRun(bytes(out), timed_out, exit_code, err.decode("utf-8", "replace")[-1000:])


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group we started (bwrap's death takes its whole PID namespace with it)."""
    for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), proc.kill):
        try:
            kill()
        except OSError:
            pass


def _live_pids_of_uid(uid: int) -> list[int]:
    """Processes (zombies excluded) whose owner is ``uid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            pids.append(int(entry))
    return pids


def kill_uid(uid: int | None) -> None:
    """SIGKILL every process still owned by the sandbox's private uid and wait until none is left."""
    if uid is None:
        return

    def kill_as_uid() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        try:
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal, except the caller
        except ProcessLookupError:
            pass

    for _ in range(100):
        if not _live_pids_of_uid(uid):
            return
        try:
            subprocess.run(["/bin/true"], preexec_fn=kill_as_uid, check=False, timeout=10, close_fds=True)
        except (OSError, subprocess.SubprocessError) as exc:
            logger.warning("could not clean up sandbox uid %d: %s", uid, exc)
            return
        time.sleep(0.01)
    logger.warning("processes of sandbox uid %d survived SIGKILL: %s", uid, _live_pids_of_uid(uid))


def _own_task_count() -> int:
    """Threads owned by our uid: what ``RLIMIT_NPROC`` counts when there is no user namespace."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                continue
    return count
