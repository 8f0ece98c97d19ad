"""Run model-written Python against a problem's tests inside a sandbox.

:func:`run_tests` runs *all* tests of one problem in one sandboxed process and never raises on
hostile code: a crash, a timeout or a broken sandbox all score 0 passed.

Containment with ``backend="bwrap"`` (Debian's bubblewrap; plumbing in
:mod:`ragen2.envs.sandbox_process`):

- the file system holds only what the interpreter needs, read-only (``/usr``, ``/bin``, ``/lib*``,
  ``/etc`` and the interpreter's own prefix, with its ``site-``/``dist-packages`` hidden): the
  repository, ``$HOME``, installed packages, the data files and the host's ``/tmp`` are not
  visible, and the worker runs with the standard library only (``python -S``). The only writable places are a private, size-capped tmpfs
  ``/tmp`` and a private, size-capped tmpfs scratch directory ``/sandbox`` (the working directory);
  both vanish with the sandbox;
- new user, PID, network (only a loopback that is down), IPC, UTS and cgroup namespaces
  (``--unshare-all --unshare-user``), no nested user namespaces (``--disable-userns``), all
  capabilities dropped, a new session (``--new-session``), ``--die-with-parent``, a cleared
  environment with ``PYTHONHASHSEED=0``;
- when the host runs as root, the sandbox runs as a fresh unprivileged uid of its own;
- limits on the sandbox's processes: ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``, ``RLIMIT_NPROC``, no core dumps;
- a wall-clock limit for the whole suite; on expiry, or when the call ends, the sandbox's process
  group is killed, which tears down its PID namespace and every process the code started (as root,
  leftovers of the private uid are also killed by uid).

Scoring: the sandbox only ever receives the code and the test *inputs*. The worker inside
(:mod:`ragen2.envs.sandbox_worker`) reports what the code produced, and the host compares that
with the expected outputs, which never enter the sandbox. A program that prints a fake "all
passed" line, or writes fake reports to any descriptor it finds, can therefore only claim outputs;
it scores exactly when the claimed outputs are right.

Fallback (``backend="rlimit"``): where bubblewrap is missing or cannot start (probed once per
process and cached), the worker runs as a plain subprocess with the same limits, a private
temporary working directory and (as root) a fresh uid, but **without** file-system, network or
PID-namespace isolation. This is announced with :func:`warnings.warn` and a log warning.
"""

from __future__ import annotations

import binascii
import json
import logging
import math
import shutil
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

from ragen2.envs.sandbox_process import STARTUP_GRACE_S, Limits, WorkerRun, run_worker

logger = logging.getLogger(__name__)

BACKENDS = ("auto", "bwrap", "rlimit")
__all__ = ["BACKENDS", "STARTUP_GRACE_S", "SandboxResult", "TestOutcome", "bwrap_available", "run_tests"]

_probe_lock = threading.Lock()
_probe_cache: dict[str, tuple[bool, str]] = {}
_warned: set[str] = set()


@dataclass(frozen=True)
class TestOutcome:
    """The verdict on one test; ``error`` says why it failed (``None`` if it passed)."""

    __test__ = False  # not a pytest test class

    index: int
    testtype: str
    passed: bool
    error: str | None = None


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one problem's test suite.

    Attributes:
        passed: tests passed (0 whenever the suite timed out or the sandbox failed).
        total: tests run.
        details: one :class:`TestOutcome` per test, in order.
        backend: ``"bwrap"`` or ``"rlimit"`` (the weaker fallback).
        timed_out: the wall-clock limit for the suite expired.
        wall_s: seconds this call took on the host.
        error: a sandbox-level failure, if any.
    """

    passed: int
    total: int
    details: tuple[TestOutcome, ...]
    backend: str
    timed_out: bool = False
    wall_s: float = 0.0
    error: str | None = None

    @property
    def fraction(self) -> float:
        """``passed / total``."""
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


# -- tests and their judging ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Test:
    testtype: str
    stdin: str
    func_name: str | None
    args: list | None
    expected: str


def validate_tests(tests: list[dict]) -> list[_Test]:
    """Check tests in DeepCoder's schema.

    Each test needs string ``input`` and ``output`` and ``testtype`` in ``{"functional", "stdin"}``.
    Functional tests also need ``metadata.func_name`` (a dict or a JSON string), and their input is
    one JSON value per line: the positional arguments.

    Raises:
        ValueError: naming the first malformed test.
    """
    if not isinstance(tests, list) or not tests:
        raise ValueError(f"tests must be a non-empty list of dicts, got {tests!r:.200}")
    clean = []
    for index, test in enumerate(tests):
        if not isinstance(test, dict):
            raise ValueError(f"test {index} must be a dict, got {test!r:.200}")
        testtype = test.get("testtype")
        if testtype not in ("functional", "stdin"):
            raise ValueError(f"test {index}: testtype must be 'functional' or 'stdin', got {testtype!r}")
        for key in ("input", "output"):
            if not isinstance(test.get(key), str):
                raise ValueError(f"test {index}: {key!r} must be a string, got {test.get(key)!r:.200}")
        if testtype == "stdin":
            clean.append(_Test("stdin", test["input"], None, None, test["output"]))
            continue
        metadata = test.get("metadata") or {}
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata) if metadata.strip() else {}
            except ValueError as exc:
                raise ValueError(f"test {index}: metadata is not JSON: {metadata!r:.200}") from exc
        func_name = metadata.get("func_name") if isinstance(metadata, dict) else None
        if not (isinstance(func_name, str) and func_name.isidentifier()):
            raise ValueError(f"test {index}: functional tests need metadata.func_name, got {func_name!r}")
        try:
            args = [json.loads(line) for line in test["input"].split("\n") if line.strip()]
        except ValueError as exc:
            raise ValueError(f"test {index}: functional input is not one JSON value per line") from exc
        clean.append(_Test("functional", "", func_name, args, test["output"]))
    return clean


def normalise_stdout(text: str) -> str:
    """Stripped text with ``\\r\\n`` read as ``\\n`` and trailing spaces removed from each line."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().split("\n"))


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values in which ``true`` never equals ``1`` (ints and floats compare by value)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _judge(test: _Test, report: dict[str, str] | None) -> tuple[bool, str | None]:
    if not report:
        return False, "no result (the code crashed or was killed)"
    if "error" in report:
        return False, report["error"]
    if test.testtype == "stdin":
        if "stdout" not in report:
            return False, "no output"
        ok = normalise_stdout(report["stdout"]) == normalise_stdout(test.expected)
        return ok, None if ok else "wrong answer"
    try:
        expected = json.loads(test.expected)
    except ValueError:
        expected = test.expected
    ok = report.get("str") == str(expected)
    if not ok and "json" in report:
        try:
            ok = json_equal(json.loads(report["json"]), expected)
        except (ValueError, RecursionError):
            ok = False
    return ok, None if ok else "wrong answer"


def _parse_reports(stream: bytes, n_tests: int) -> dict[int, dict[str, str]]:
    """``{test index: {field: value}}`` from the worker's report lines; the first value of a field wins."""
    reports: dict[int, dict[str, str]] = {}
    for line in stream.split(b"\n"):
        parts = line.split(b" ")
        if len(parts) != 3 or parts[1] not in (b"stdout", b"str", b"json", b"error"):
            continue
        try:
            index = int(parts[0])
            value = binascii.a2b_base64(parts[2]).decode("utf-8", "replace")
        except (ValueError, binascii.Error):
            continue
        if 0 <= index < n_tests:
            reports.setdefault(index, {}).setdefault(parts[1].decode(), value)
    return reports


def _result(tests: list[_Test], run: WorkerRun, backend: str, wall_s: float) -> SandboxResult:
    if run.timed_out or run.exit_code is None:
        why = "timed out" if run.timed_out else run.stderr or "sandbox failed"
        details = tuple(TestOutcome(i, t.testtype, False, why) for i, t in enumerate(tests))
        return SandboxResult(0, len(tests), details, backend, run.timed_out, wall_s, None if run.timed_out else why)
    reports = _parse_reports(run.reports, len(tests))
    details = tuple(TestOutcome(i, t.testtype, *_judge(t, reports.get(i))) for i, t in enumerate(tests))
    error = None if reports or not run.stderr else run.stderr
    return SandboxResult(sum(d.passed for d in details), len(tests), details, backend, False, wall_s, error)


# -- backends -----------------------------------------------------------------------------------------
def _limits(time_limit_s: float, memory_mb: int, max_processes: int, max_file_mb: int, open_files: int) -> Limits:
    return Limits(
        wall_s=float(time_limit_s),
        cpu_s=math.ceil(time_limit_s) + 1,
        memory_bytes=memory_mb << 20,
        file_bytes=max_file_mb << 20,
        tmpfs_bytes=4 * (max_file_mb << 20),
        open_files=open_files,
        processes=max_processes,
    )


def _execute(code: str, tests: list[_Test], backend: str, limits: Limits) -> SandboxResult:
    start = time.monotonic()
    request = {"code": code, "tests": [(t.testtype, t.stdin, t.func_name, t.args) for t in tests]}
    run = run_worker(backend, request, limits)
    return _result(tests, run, backend, time.monotonic() - start)


def bwrap_available() -> tuple[bool, str]:
    """(whether bubblewrap can run the worker here, why not); probed once per process, then cached."""
    with _probe_lock:
        if "bwrap" not in _probe_cache:
            if shutil.which("bwrap") is None:
                _probe_cache["bwrap"] = (False, "bwrap is not installed (apt-get install bubblewrap)")
            else:
                probe = validate_tests([{"input": "2\n3", "output": "5", "testtype": "functional",
                                         "metadata": {"func_name": "add"}}])
                result = _execute("def add(a, b):\n    return a + b\n", probe, "bwrap", _limits(10.0, 512, 16, 16, 64))
                ok = result.passed == 1
                reason = "" if ok else f"bwrap failed to run the worker: {result.details[0].error}"
                _probe_cache["bwrap"] = (ok, reason)
        return _probe_cache["bwrap"]


def _warn_weak(reason: str) -> None:
    """Warn, once per process and reason, that the weaker rlimit-only sandbox is in use."""
    if reason in _warned:
        return
    _warned.add(reason)
    message = (
        f"DeepCoder sandbox is WEAKER than intended ({reason}): running model code with resource "
        "limits only, without file-system, network or PID isolation. Install bubblewrap to fix this."
    )
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    logger.warning(message)


def _check_number(name: str, value: Any, minimum: float, *, integer: bool) -> None:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) or value < minimum:
        what = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {what} >= {minimum}, got {value!r}")


def check_limits(time_limit_s: float, memory_mb: int, max_processes: int, max_file_mb: int, open_files: int) -> None:
    """Raise ValueError naming the first bad limit (shared with the DeepCoder env's arguments)."""
    _check_number("time_limit_s", time_limit_s, 0.05, integer=False)
    _check_number("memory_mb", memory_mb, 64, integer=True)
    _check_number("max_processes", max_processes, 1, integer=True)
    _check_number("max_file_mb", max_file_mb, 1, integer=True)
    _check_number("open_files", open_files, 16, integer=True)


def run_tests(
    code: str,
    tests: list[dict],
    *,
    time_limit_s: float = 3.0,
    memory_mb: int = 1024,
    max_processes: int = 16,
    max_file_mb: int = 16,
    open_files: int = 64,
    backend: str = "auto",
) -> SandboxResult:
    """Run ``code`` against every test of one problem in one sandbox.

    Functional tests call ``Solution().<func_name>`` if the code defines such a class and method,
    else a top-level ``<func_name>``, with the JSON values on the input's lines as arguments
    (``typing``'s names are predefined, as LeetCode-style starters use them). One passes if
    ``str(result) == str(expected)`` **or** the result, read as JSON with tuples as lists, equals the
    expected JSON value (``true`` never equals ``1``; no float tolerance). Stdin tests run the code
    as ``__main__`` with the input on stdin; one passes if the stripped stdout equals the stripped
    expected output (``\\r\\n`` and trailing spaces on each line ignored). Each test gets a fresh
    namespace. A runtime error or a nonzero ``sys.exit`` fails that test; a timeout fails all.

    Args:
        code: the Python source to test (untrusted).
        tests: DeepCoder-schema tests, see :func:`validate_tests`.
        time_limit_s: wall-clock limit for the whole suite (the reference: 3 s). The CPU limit per process
            is ``ceil(time_limit_s) + 1`` s; starting the sandbox gets up to ``STARTUP_GRACE_S`` more.
        memory_mb: address-space limit per process.
        max_processes: processes and threads allowed inside the sandbox.
        max_file_mb: largest file the code may write; each tmpfs holds 4x this.
        open_files: open file descriptors per process.
        backend: ``"auto"`` (bubblewrap when it works, else the fallback with a warning),
            ``"bwrap"`` (raise if unavailable) or ``"rlimit"`` (force the weaker fallback).

    Returns:
        A :class:`SandboxResult`. Never raises because of what the code does.

    Raises:
        ValueError: bad arguments or malformed tests.
        RuntimeError: ``backend="bwrap"`` where bubblewrap cannot run.

    Example:
        >>> tests = [{"input": "1 2\\n", "output": "3\\n", "testtype": "stdin"}]
        >>> run_tests("a, b = map(int, input().split())\\nprint(a + b)", tests).passed
        1
    """
    if not isinstance(code, str):
        raise ValueError(f"code must be a string, got {type(code).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    check_limits(time_limit_s, memory_mb, max_processes, max_file_mb, open_files)
    clean = validate_tests(tests)
    if backend == "rlimit":
        _warn_weak("backend='rlimit' was requested")
    else:
        ok, reason = bwrap_available()
        if ok:
            backend = "bwrap"
        elif backend == "bwrap":
            raise RuntimeError(f"backend='bwrap' requested but unavailable: {reason}")
        else:
            _warn_weak(reason)
            backend = "rlimit"
    return _execute(code, clean, backend, _limits(time_limit_s, memory_mb, max_processes, max_file_mb, open_files))
