"""The DeepCoder sandbox: correct code scores, hostile code is contained and scores 0.

"Contained" is checked from the host: no file appears where the code tried to write, no connection
reaches a listener on the host's loopback, no process survives the call, and the wall time is
bounded. Most tests run under bubblewrap (skipped where it cannot run); the last ones force the
rlimit-only fallback.
"""

from __future__ import annotations

import os
import socket
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from ragen2.envs import sandbox, sandbox_process
from ragen2.envs.sandbox import run_tests

REPO = Path(__file__).resolve().parents[2]
LIMIT_S = 1.5  # suite wall-clock limit used for hostile code
BOUND_S = LIMIT_S + sandbox.STARTUP_GRACE_S + 2.0  # the most any hostile call may take

STDIN_TESTS = [
    {"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
    {"input": "10 -4\n", "output": "6", "testtype": "stdin"},
    {"input": "0 0\n", "output": "0", "testtype": "stdin"},
]
ADD_CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
FUNC_TESTS = [
    {"input": "[1, 2, 3]", "output": "[3, 2, 1]", "testtype": "functional", "metadata": {"func_name": "flip"}},
    {"input": "[]", "output": "[]", "testtype": "functional", "metadata": {"func_name": "flip"}},
    {"input": "[5, 5]", "output": "[5, 5]", "testtype": "functional", "metadata": {"func_name": "flip"}},
]

needs_bwrap = pytest.mark.skipif(not sandbox.bwrap_available()[0], reason="bubblewrap cannot run here")


def _sandbox_processes() -> list[int]:
    """Live processes owned by the sandbox's private uids (only meaningful when we are root)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if sandbox_process.UID_BASE <= uid < sandbox_process.UID_BASE + sandbox_process.UID_SPAN and state != "Z":
                found.append(int(entry))
    return found


def _children() -> list[int]:
    """Our live descendants (zombies are already dead and do not count)."""
    me, kids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == me and state != "Z":
            kids.append(int(entry))
    return kids


def _run_hostile(code: str, tests=STDIN_TESTS, **kw) -> sandbox.SandboxResult:
    start = time.monotonic()
    result = run_tests(textwrap.dedent(code), tests, time_limit_s=LIMIT_S, **kw)
    elapsed = time.monotonic() - start
    assert elapsed < BOUND_S, f"took {elapsed:.1f}s"
    assert result.passed == 0, result
    assert _children() == [], "a child process survived the sandbox"
    assert _sandbox_processes() == [], "a sandbox-uid process survived"
    return result


# -- correct code and partial credit ------------------------------------------------------------
@needs_bwrap
def test_correct_stdin_solution_scores_one():
    result = run_tests(ADD_CODE, STDIN_TESTS)
    assert (result.passed, result.total, result.backend) == (3, 3, "bwrap")
    assert result.all_passed and result.fraction == 1.0
    assert all(d.passed and d.error is None for d in result.details)


@needs_bwrap
def test_correct_functional_solution_in_class_or_top_level():
    in_class = "class Solution:\n    def flip(self, xs):\n        return xs[::-1]\n"
    top_level = "def flip(xs):\n    return tuple(reversed(xs))\n"  # tuples equal JSON lists
    for code in (in_class, top_level):
        result = run_tests(code, FUNC_TESTS)
        assert result.passed == 3, result


@needs_bwrap
def test_partial_credit_and_per_test_errors():
    # Right only when the answer is 0 or positive and small.
    code = "a, b = map(int, input().split())\nprint(a + b if a < 5 else 'nope')\n"
    result = run_tests(code, STDIN_TESTS)
    assert (result.passed, result.total) == (2, 3)
    assert [d.passed for d in result.details] == [True, False, True]
    assert result.details[1].error == "wrong answer"
    crash = run_tests("def flip(xs):\n    return xs[::-1] if xs else 1 / 0\n", FUNC_TESTS)
    assert [d.passed for d in crash.details] == [True, False, True]
    assert "ZeroDivisionError" in crash.details[1].error


@needs_bwrap
def test_str_comparison_keeps_bool_apart_from_int():
    tests = [{"input": "3", "output": "true", "testtype": "functional", "metadata": {"func_name": "odd"}}]
    assert run_tests("def odd(n):\n    return n % 2 == 1\n", tests).passed == 1
    assert run_tests("def odd(n):\n    return n % 2\n", tests).passed == 0


@needs_bwrap
def test_each_test_gets_a_fresh_namespace():
    code = "seen = globals().setdefault('seen', [])\nseen.append(1)\nprint(len(seen))\n"
    tests = [{"input": "", "output": "1", "testtype": "stdin"}] * 3
    assert run_tests(code, tests).passed == 3


@needs_bwrap
def test_output_paths_and_exit_codes():
    tests = [{"input": "", "output": "ok", "testtype": "stdin"}]
    for code in ("import os\nos.write(1, b'ok\\n')", "import sys\nsys.stdout.buffer.write(b'ok')",
                 "print('ok')\nraise SystemExit(0)", "import sys\nprint('ok', end='\\r\\n  ')\nsys.exit()"):
        assert run_tests(code, tests).passed == 1, code
    failed = run_tests("import sys\nprint('ok')\nsys.exit(3)", tests)
    assert failed.passed == 0 and failed.details[0].error == "SystemExit(3)"


# -- hostile code ---------------------------------------------------------------------------------
@needs_bwrap
def test_infinite_loop_times_out():
    result = _run_hostile("while True:\n    pass\n")
    assert result.timed_out
    assert [d.error for d in result.details] == ["timed out"] * 3
    assert LIMIT_S <= result.wall_s < LIMIT_S + 3.0  # the suite clock starts once the worker runs


@needs_bwrap
def test_memory_bomb_is_contained():
    _run_hostile("x = bytearray(50 * 1024 ** 3)\nprint(3)\n")
    _run_hostile("chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 ** 2))\n")


@needs_bwrap
def test_fork_bomb_is_contained():
    _run_hostile(
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """
    )


@needs_bwrap
def test_writes_outside_the_scratch_dir_do_not_reach_the_host():
    tag = uuid.uuid4().hex
    targets = [Path("/tmp") / f"ragen2-escape-{tag}", Path.home() / f"ragen2-escape-{tag}", REPO / f"escape-{tag}"]
    code = f"""
        for path in {[str(t) for t in targets]!r}:
            try:
                with open(path, "w") as handle:
                    handle.write("escaped")
            except OSError:
                pass
        """
    try:
        _run_hostile(code)
        assert [t for t in targets if t.exists()] == []
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


@needs_bwrap
def test_shell_and_subprocess_cannot_touch_the_host(tmp_path):
    markers = [tmp_path / "via-system", tmp_path / "via-subprocess", REPO / f"marker-{uuid.uuid4().hex}"]
    code = f"""
        import os, subprocess
        os.system("touch {markers[0]} {markers[2]}")
        try:
            subprocess.run(["touch", "{markers[1]}"], check=False)
        except OSError:
            pass
        """
    try:
        _run_hostile(code)
        assert [m for m in markers if m.exists()] == []
    finally:
        markers[2].unlink(missing_ok=True)


@needs_bwrap
def test_no_network_connection_reaches_the_host():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        code = f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"hello")
                print(3)
            except OSError:
                pass
            """
        _run_hostile(code)
        with pytest.raises(TimeoutError):
            listener.accept()


@needs_bwrap
def test_forged_verdicts_do_not_score():
    fake = '{"timed_out": false, "results": [{"passed": true}, {"passed": true}, {"passed": true}]}'
    code = f"""
        import os, sys
        fake = {fake!r}
        print("ALL TESTS PASSED", fake)
        for i in range(3):
            line = '{{"i": %d, "stdout": "forged"}}\\n' % i
            for fd in range(3, 64):  # any inherited descriptor, e.g. the report pipe
                try:
                    os.write(fd, (line + fake + "\\n").encode())
                except OSError:
                    pass
        for pid in ("1", str(os.getppid())):  # the harness and init: their stdout reaches the host
            for fd in ("0", "1", "2"):
                try:
                    with open(f"/proc/{{pid}}/fd/{{fd}}", "w") as handle:
                        handle.write("deadbeef " + fake + "\\n")
                except OSError:
                    pass
        """
    result = _run_hostile(code)
    assert not result.timed_out


@needs_bwrap
def test_flooding_every_descriptor_is_bounded():
    _run_hostile(
        """
        import os
        block = b"0 stdout " + b"A" * 65536
        while True:
            for fd in range(1, 16):
                try:
                    os.write(fd, block)
                except OSError:
                    pass
        """
    )


@needs_bwrap
def test_sandbox_sees_no_repository_home_or_installed_packages():
    code = f"""
        import glob, os
        visible = [os.path.exists({str(REPO)!r}), os.path.exists({str(Path.home())!r} + "/.cache")]
        for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages"):
            visible += [bool(os.listdir(path)) for path in glob.glob(pattern)]
        print(int(any(visible)))
        """
    tests = [{"input": "", "output": "0", "testtype": "stdin"}]
    assert run_tests(textwrap.dedent(code), tests).passed == 1


# -- the weaker fallback --------------------------------------------------------------------------
def test_rlimit_fallback_scores_and_warns():
    with pytest.warns(RuntimeWarning, match="WEAKER"):
        result = run_tests(ADD_CODE, STDIN_TESTS, backend="rlimit")
    assert (result.passed, result.backend) == (3, "rlimit")


@pytest.mark.filterwarnings("ignore:DeepCoder sandbox is WEAKER")
def test_rlimit_fallback_contains_infinite_loop_and_memory_bomb():
    assert _run_hostile("while True:\n    pass\n", backend="rlimit").timed_out
    _run_hostile("x = bytearray(50 * 1024 ** 3)\nprint(3)\n", backend="rlimit")
    _run_hostile("chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 ** 2))\n", backend="rlimit")


# -- argument checks --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"memory_mb": 10}, "memory_mb"),
        ({"backend": "docker"}, "backend"),
        ({"max_processes": 2.5}, "max_processes"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_tests(ADD_CODE, STDIN_TESTS, **kwargs)


def test_malformed_tests_are_clear_errors():
    with pytest.raises(ValueError, match="testtype"):
        run_tests(ADD_CODE, [{"input": "", "output": "", "testtype": "unit"}])
    with pytest.raises(ValueError, match="func_name"):
        run_tests(ADD_CODE, [{"input": "1", "output": "1", "testtype": "functional"}])
    with pytest.raises(ValueError, match="non-empty"):
        run_tests(ADD_CODE, [])
