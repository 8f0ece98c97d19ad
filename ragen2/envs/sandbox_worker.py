"""The process that runs model-written code inside the DeepCoder sandbox (untrusted side).

:mod:`ragen2.envs.sandbox` starts a fresh interpreter with this file's source and ``-c``, so the
module must stay standard-library only, import nothing from ragen2 and import little at all
(interpreter start-up dominates the cost of a test suite). It receives, as a :mod:`marshal` blob on
stdin, the code and the test *inputs*; the expected outputs never enter the sandbox. For each test
it runs the code in a fresh namespace and reports what the code produced on the report stream
(its original stdout), one line per report field::

    <test index> <field> <base64 of the UTF-8 value>

after a first line ``started``, with fields ``stdout`` (stdin tests), ``str`` and ``json`` (functional tests: ``str(result)`` and
the result as JSON, if it is JSON-like) and ``error``. The host judges these against the expected
outputs. The code under test can write to the report stream too, but all it can do there is claim
outputs, which it would have had to compute anyway; it cannot learn the expected outputs.
"""

import binascii
import builtins
import io
import marshal
import os
import resource
import signal
import sys

MAX_REPORT_BYTES = 1 << 20  # a test's output beyond this fails the test
STARTED = b"started\n"  # first line of the report stream, once the request is read


def json_text(value, depth=0):
    """``value`` as JSON text (tuples as lists), or ``None`` if it is not a JSON-like value."""
    if depth > 100:
        return None
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else None
    if type(value) is str:
        out = ['"']
        for ch in value:
            if ch == '"' or ch == "\\":
                out.append("\\" + ch)
            elif ord(ch) < 0x20:
                out.append(f"\\u{ord(ch):04x}")
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    if type(value) in (list, tuple):
        parts = [json_text(v, depth + 1) for v in value]
        return None if None in parts else "[" + ", ".join(parts) + "]"
    if type(value) is dict:
        parts = []
        for key, item in value.items():
            key_text, item_text = json_text(key, depth + 1), json_text(item, depth + 1)
            if type(key) is not str or item_text is None:
                return None
            parts.append(key_text + ": " + item_text)
        return "{" + ", ".join(parts) + "}"
    return None


def main():
    """Read the request, apply the in-sandbox limits, run every test and report the outputs."""
    chunks = []
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    request = marshal.loads(b"".join(chunks))
    if request.get("processes"):  # counted inside our user namespace, so set here, not by the host
        resource.setrlimit(resource.RLIMIT_NPROC, (request["processes"], request["processes"]))
    report_fd = os.dup(1)
    os.write(report_fd, STARTED)  # the host's suite clock starts now
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing us
    my_pid = os.getpid()

    def report(index, field, text):
        data = f"{index} {field} ".encode() + binascii.b2a_base64(text.encode("utf-8", "replace"))
        while data:
            data = data[os.write(report_fd, data):]

    try:
        compiled = compile(request["code"], "<solution>", "exec")
    except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), MemoryError, RecursionError ...
        for index in range(len(request["tests"])):
            report(index, "error", f"compile error: {type(exc).__name__}: {_safe_str(exc)}")
        os._exit(0)

    for index, (testtype, given, func_name, args) in enumerate(request["tests"]):
        outcome = {}
        try:
            in_path, out_path = f"in{index}", f"out{index}"
            with open(in_path, "w", encoding="utf-8") as handle:
                handle.write(given)
            in_fd = os.open(in_path, os.O_RDONLY)
            out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(in_fd, 0)
            os.dup2(out_fd, 1)
            os.close(in_fd)
            os.close(out_fd)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
            namespace = {"__name__": "__main__", "__builtins__": builtins}
            try:
                if testtype == "functional":
                    # LeetCode-style starters annotate with typing names (List[int]) without importing them.
                    exec("from typing import *", namespace)
                exec(compiled, namespace)
                if testtype == "functional":
                    solution_class = namespace.get("Solution")
                    if isinstance(solution_class, type) and hasattr(solution_class, func_name):
                        target = getattr(solution_class(), func_name)
                    elif callable(namespace.get(func_name)):
                        target = namespace[func_name]
                    else:
                        raise NameError(f"no function or Solution method named {func_name!r}")
                    result = target(*args)
                    outcome["str"] = str(result)[:MAX_REPORT_BYTES]
                    as_json = json_text(result)
                    if as_json is not None:
                        outcome["json"] = as_json[:MAX_REPORT_BYTES]
            except SystemExit as exc:
                if exc.code not in (None, 0) or testtype == "functional":
                    outcome["error"] = f"SystemExit({_safe_str(exc.code)})"
            except BaseException as exc:  # the model's code may raise anything
                outcome["error"] = f"runtime error: {type(exc).__name__}: {_safe_str(exc)}"
            finally:
                if os.getpid() != my_pid:  # a fork of the model's code must not carry on as the worker
                    os._exit(0)
                try:
                    sys.stdout.flush()
                except BaseException:
                    outcome.setdefault("error", "could not flush stdout")
                sys.stdout, sys.stdin = sys.__stdout__, sys.__stdin__
                os.dup2(devnull, 0)
                os.dup2(devnull, 1)
            if testtype == "stdin" and "error" not in outcome:
                with open(out_path, "rb") as handle:
                    data = handle.read(MAX_REPORT_BYTES + 1)
                if len(data) > MAX_REPORT_BYTES:
                    outcome["error"] = "output too long"
                else:
                    outcome["stdout"] = data.decode("utf-8", "replace")
        except BaseException as exc:  # the worker's own machinery failed on this test
            if os.getpid() != my_pid:
                os._exit(0)
            outcome = {"error": f"sandbox error: {type(exc).__name__}"}
        for field, text in outcome.items():
            report(index, field, text[:MAX_REPORT_BYTES] if field != "error" else text[:500])
    os._exit(0)


def _safe_str(exc):
    try:
        return str(exc)[:300]
    except BaseException:
        return "?"

