"""Trusted driver for LeetCode assert tests; runs INSIDE the sandbox next to one untrusted program (stdlib only).

The parent (:mod:`agentrl_recipe.training.rewards.code.assert_tests`) splits every ``assert`` of a Skywork-OR1 /
LeetCodeDataset
``test_code`` into the expression that calls the program (e.g. ``candidate(head = list_node([1, 2]))``) and the
expected value. Only the call expressions come here, with the program, the row's ``import_prefix``, its
``entry_point`` and a per-request nonce (JSON on stdin). Per test the driver runs, under one ``SIGALRM``, what the
original ran in one process per assert: the helpers, the prefix, the program, ``candidate = <entry_point>``, then the
call, in fresh globals; it reports the value in canonical JSON (linked lists and trees as their values) in a frame
tagged with the nonce. The parent compares with the expected value, which never enters the sandbox, so a program can
only claim a return value (``__eq__`` tricks, ``os._exit(0)`` and forged frames pass nothing).

The helper classes LeetCode provides (``ListNode``, ``TreeNode``, ``list_node``, ``tree_node``, ``is_same_list``,
``is_same_tree``) are defined before the prefix, so rows whose tests build helper objects are graded even when the
prefix lacks them; a prefix that defines its own wins. The parent imports :data:`HELPERS` and :func:`canonical` from
here to build expected values the same way.
"""

import builtins
import collections
import functools
import io
import json
import os
import signal
import sys
import traceback

HELPERS = """
from collections import deque as _deque


class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right


def list_node(values):
    if not values:
        return None
    head = ListNode(values[0])
    node = head
    for value in values[1:]:
        node.next = ListNode(value)
        node = node.next
    return head


def tree_node(values):
    if not values:
        return None
    root = TreeNode(values[0])
    queue, i = _deque([root]), 1
    while queue and i < len(values):
        node = queue.popleft()
        for side in ("left", "right"):
            if i < len(values) and values[i] is not None:
                child = TreeNode(values[i])
                setattr(node, side, child)
                queue.append(child)
            i += 1
    return root


def is_same_list(p, q):
    while p is not None and q is not None:
        if p.val != q.val:
            return False
        p, q = p.next, q.next
    return p is None and q is None


def is_same_tree(p, q):
    if p is None or q is None:
        return p is q
    return p.val == q.val and is_same_tree(p.left, q.left) and is_same_tree(p.right, q.right)
"""

MAX_NODES = 1_000_000  # a longer list (or a cycle) is not a value


def canonical(value):
    """A JSON-able form of a returned value: linked lists ``{"ListNode": [...]}``, trees ``{"TreeNode": [...]}`` in
    LeetCode's level order (trailing nulls cut), dicts ``{"dict": {...}}``; tuples become lists. TypeError for the
    rest."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("dict keys must be strings")
        return {"dict": {k: canonical(v) for k, v in value.items()}}  # wrapped: no dict can pose as a node
    if hasattr(value, "val") and hasattr(value, "left") and hasattr(value, "right"):
        return {"TreeNode": _tree_values(value)}
    if hasattr(value, "val") and hasattr(value, "next"):
        return {"ListNode": _list_values(value)}
    raise TypeError(f"cannot compare a {type(value).__name__}")


def _list_values(node):
    values: list = []
    seen: set = set()
    while node is not None:
        if id(node) in seen or len(values) >= MAX_NODES:
            raise ValueError("linked list has a cycle or is too long")
        seen.add(id(node))
        values.append(canonical(node.val))
        node = node.next
    return values


def _tree_values(root):
    values: list = []
    seen: set = set()
    queue = collections.deque([root])
    while queue:
        node = queue.popleft()
        if node is None:
            values.append(None)
            continue
        if id(node) in seen or len(seen) >= MAX_NODES:
            raise ValueError("tree has a cycle or is too large")
        seen.add(id(node))
        values.append(canonical(node.val))
        queue.extend((node.left, node.right))
    while values and values[-1] is None:
        values.pop()
    return values


class _TestTimeout(BaseException):  # BaseException: a program's `except Exception` must not swallow the alarm
    pass


def _on_alarm(signum, frame):
    raise _TestTimeout()


def _send(fd, nonce, record):
    data = ("\n" + nonce + " " + json.dumps(record, ensure_ascii=True) + "\n").encode("ascii")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _short_error(exc):
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()[-500:]


def _run_one(helpers, prefix, program, entry_point, call):
    """One assert's process in the original: helpers + prefix + program, the entry point, the call."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    exec(helpers, namespace)
    exec(prefix, namespace)
    exec(program, namespace)
    namespace["candidate"] = eval(entry_point, namespace)
    return json.dumps(canonical(eval(call, namespace)))


def _timed(fn, timeout_s):
    """(status, value, error) of ``fn()`` under a one-shot alarm; SystemExit is a failure here (nothing returned)."""
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            return "ok", fn(), None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _TestTimeout:
        return "timeout", None, None
    except BaseException as exc:
        return "runtime_error", None, _short_error(exc)


def _main():
    payload = json.loads(sys.stdin.read())
    nonce, frame_fd = payload["nonce"], os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what the program writes to fd 1 is not an answer
    signal.signal(signal.SIGALRM, _on_alarm)
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(50000)
    try:
        helpers = compile(HELPERS, "<helpers>", "exec")
        prefix = compile(payload["import_prefix"], "<import_prefix>", "exec")
        program = compile(payload["program"], "<solution>", "exec")
    except BaseException as exc:
        _send(frame_fd, nonce, {"t": "setup_error", "status": "compile_error", "error": _short_error(exc)})
        _send(frame_fd, nonce, {"t": "end"})
        return
    real_stdout = sys.stdout
    for offset, call in enumerate(payload["calls"]):
        run = functools.partial(_run_one, helpers, prefix, program, payload["entry_point"], call)
        sys.stdout = io.StringIO()  # what the program prints is not its answer
        try:
            status, out, error = _timed(run, float(payload["timeout_s"]))
        finally:
            sys.stdout = real_stdout
        record = {"t": "result", "i": int(payload["start"]) + offset, "status": status}
        if out is not None and len(out) > int(payload["max_frame_chars"]):
            status, out, error = "runtime_error", None, "returned value too large to report"
            record["status"] = status
        if out is not None:
            record["out"] = out
        if error:
            record["error"] = error
        _send(frame_fd, nonce, record)
    _send(frame_fd, nonce, {"t": "end"})
    os._exit(0)  # skip interpreter teardown: hooks the program registered could still print
