"""Trusted test driver that runs INSIDE the sandbox, next to one untrusted program (stdlib only, Python >= 3.10).

The parent (:mod:`agentrl_recipe.training.rewards.code.io_tests`) sends this file's source as the code of one sandbox
execution, followed by ``_main()``, and a JSON payload on stdin: the program, the test *inputs* (never the expected
outputs) from test number ``start`` on, and a per-request random nonce. For each test the driver runs the program and
writes one frame ``\\n<nonce> <json>\\n`` with what the program produced (captured stdout, or the JSON of the returned
value). The parent parses the frames and does every comparison itself, so nothing the program prints about itself is
trusted: a forged frame can only claim an output, which is what printing that output would do anyway, and a test whose
frame never arrives (``os._exit``, a crash, a kill) counts as failed.

Execution follows LiveCodeBench's ``testing_util``: its import prelude, ``sys.setrecursionlimit(50000)``, a
``SIGALRM`` timeout per test, ``SystemExit`` swallowed, stdout captured (with a ``.buffer`` for fast-IO solutions).
Differences from LCB, chosen so that correct programs pass: a stdin program is run as ``__main__`` in fresh globals
per test (LCB wraps it in a function, which breaks ``global`` statements), ``sys.stdin`` is a real text stream, and
``open(0)`` reads the test's input.
"""

import builtins
import contextlib
import functools
import hashlib
import io
import json
import os
import signal
import sys
import traceback

# LiveCodeBench's import_string (lcb_runner/evaluation/testing_util.py), executed before the program.
LCB_PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\nfrom heapq import *\n"
    "from bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\nfrom statistics import *\n"
    "from itertools import *\nfrom functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\nimport datetime\n"
    "import collections\nimport heapq\nimport bisect\nimport copy\nimport math\nimport random\nimport statistics\n"
    "import itertools\nimport functools\nimport operator\nimport io\nimport sys\nimport json\n"
    "sys.setrecursionlimit(50000)\n"
)


class _TestTimeout(BaseException):  # BaseException: a program's `except Exception` must not swallow the alarm
    pass


def _on_alarm(signum, frame):
    raise _TestTimeout()


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _Framer:
    def __init__(self, fd, nonce, max_frame_chars):
        self.fd = fd
        self.nonce = nonce
        self.max_frame_chars = max_frame_chars

    def send(self, record):
        line = "\n" + self.nonce + " " + json.dumps(record, ensure_ascii=True) + "\n"
        _write_all(self.fd, line.encode("ascii"))

    def result(self, index, status, out=None, error=None):
        record = {"t": "result", "i": index, "status": status}
        if out is not None and len(out) > self.max_frame_chars:
            # Too big to send whole: the parent compares LCB's stripped lines by digest (exact-match rule only).
            lines = [line.strip() for line in out.strip().split("\n")]
            record["sha256"] = hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()
            record["lines"] = len(lines)
        else:
            record["out"] = out
        if error:
            record["error"] = error[-500:]
        self.send(record)


def _short_error(exc):
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _run_timed(fn, timeout_s):
    """(status, value, error) of ``fn()`` under a one-shot SIGALRM. SystemExit is a normal end, as in LCB."""
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            return "ok", fn(), None
        except SystemExit:
            return "ok", None, None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _TestTimeout:  # also when the alarm fires inside the inner `finally`
        return "timeout", None, None
    except BaseException as exc:
        return "runtime_error", None, _short_error(exc)


def _stdin_stream(text):
    return io.TextIOWrapper(io.BytesIO(text.encode("utf-8", "surrogatepass")), encoding="utf-8", newline=None)


def _capture():
    buffer = io.BytesIO()
    return buffer, io.TextIOWrapper(buffer, encoding="utf-8", errors="replace", write_through=True)


def _make_open(real_open, get_stdin_text):
    def patched_open(file, *args, **kwargs):
        # AtCoder-style `open(0).read()` reads stdin; LCB mocks `open` for exactly this.
        if file == 0 or file == "/dev/stdin":
            mode = args[0] if args else kwargs.get("mode", "r")
            text = get_stdin_text()
            return io.BytesIO(text.encode("utf-8")) if "b" in mode else _stdin_stream(text)
        return real_open(file, *args, **kwargs)

    return patched_open


def _run_stdin_tests(program_code, inputs, start, timeout_s, framer):
    real_open, real_stdin, real_stdout = builtins.open, sys.stdin, sys.stdout
    prelude_code = compile(LCB_PRELUDE, "<prelude>", "exec")
    current = {"text": ""}
    for offset, text in enumerate(inputs):
        index = start + offset
        current["text"] = text
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        exec(prelude_code, namespace)
        patched_open = _make_open(real_open, lambda: current["text"])
        namespace["open"] = patched_open  # the prelude's `from io import *` bound io.open there
        buffer, stdout = _capture()
        sys.stdin, sys.stdout = _stdin_stream(text), stdout
        builtins.open = patched_open
        try:
            status, _, error = _run_timed(functools.partial(exec, program_code, namespace), timeout_s)
        finally:
            builtins.open, sys.stdin, sys.stdout = real_open, real_stdin, real_stdout
        with contextlib.suppress(Exception):
            stdout.flush()
        out = buffer.getvalue().decode("utf-8", "replace") if status == "ok" else None
        framer.result(index, status, out=out, error=error)


def _resolve_function(namespace, prelude, fn_name):
    """``Solution().fn_name`` or the top-level ``fn_name`` the program bound itself: a name the prelude star-imported
    (``add`` from operator, ``gcd`` from math) and the program left alone is not the program's function."""
    solution_cls = namespace.get("Solution")
    if isinstance(solution_cls, type) and hasattr(solution_cls, fn_name):
        return getattr(solution_cls(), fn_name)
    candidate = namespace.get(fn_name)
    if callable(candidate) and candidate is not prelude.get(fn_name):
        return candidate
    raise AttributeError(f"no Solution.{fn_name} and no top-level function {fn_name} defined by the program")


def _run_call_tests(program_code, fn_name, inputs, start, timeout_s, framer):
    real_stdout = sys.stdout
    namespace = {"__name__": "__solution__", "__builtins__": builtins}

    def set_up():
        exec(compile(LCB_PRELUDE, "<prelude>", "exec"), namespace)
        prelude = dict(namespace)
        exec(program_code, namespace)
        return _resolve_function(namespace, prelude, fn_name)

    sys.stdout = io.StringIO()  # output printed by the program is not its answer
    try:
        status, method, error = _run_timed(set_up, timeout_s)  # the module body is timed like a test (LCB)
    finally:
        sys.stdout = real_stdout
    if status != "ok" or method is None:
        error = error or "SystemExit in the module body"
        framer.send({"t": "setup_error", "status": status, "error": error[-500:]})
        return
    for offset, text in enumerate(inputs):
        index = start + offset
        try:
            args = [json.loads(line) for line in text.split("\n")]
        except ValueError as exc:  # validated by the parent; kept for robustness
            framer.result(index, "runtime_error", error="bad test input: " + str(exc))
            continue
        sys.stdout = io.StringIO()  # output printed by the program is not its answer
        try:
            status, value, error = _run_timed(functools.partial(method, *args), timeout_s)
        finally:
            sys.stdout = real_stdout
        out = None
        if status == "ok":
            try:
                out = json.dumps(value)  # tuples become lists, as LCB converts a returned tuple
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                status, error = "unserializable", _short_error(exc)
        framer.result(index, status, out=out, error=error)


def _main():
    payload = json.loads(sys.stdin.read())
    frame_fd = os.dup(1)
    # Output written straight to fd 1/2 (os.write, C extensions) is not part of any answer, as in LCB.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    framer = _Framer(frame_fd, payload["nonce"], int(payload["max_frame_chars"]))
    signal.signal(signal.SIGALRM, _on_alarm)
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(50000)
    try:
        program_code = compile(payload["program"], "<solution>", "exec")
    except BaseException as exc:
        framer.send({"t": "setup_error", "status": "compile_error", "error": _short_error(exc)[-500:]})
        framer.send({"t": "end"})
        return
    framer.send({"t": "ready"})
    timeout_s = float(payload["timeout_s"])
    start = int(payload["start"])
    if payload["fn_name"] is None:
        _run_stdin_tests(program_code, payload["inputs"], start, timeout_s, framer)
    else:
        _run_call_tests(program_code, payload["fn_name"], payload["inputs"], start, timeout_s, framer)
    framer.send({"t": "end"})
    os._exit(0)  # skip interpreter teardown: atexit hooks or __del__ the program registered could still print
