"""ProcessWide: one live instance per key, rebuilt once closed, all closed by close_all, forgotten in a forked child."""

from __future__ import annotations

import os

from agentrl_sandbox.process_wide import ProcessWide


class Thing:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_one_instance_per_key_rebuilt_after_close() -> None:
    shared: ProcessWide[Thing] = ProcessWide()
    built: list[str] = []

    def build(name: str) -> Thing:
        built.append(name)
        return Thing(name)

    a = shared.get("a", lambda: build("a"))
    assert shared.get("a", lambda: build("a2")) is a
    b = shared.get("b", lambda: build("b"))
    assert b is not a and built == ["a", "b"]
    a.close()
    assert shared.get("a", lambda: build("a3")).name == "a3"


def test_close_all_closes_every_instance_and_the_next_get_builds_anew() -> None:
    shared: ProcessWide[Thing] = ProcessWide()
    things = [shared.get(key, lambda key=key: Thing(key)) for key in ("x", "y")]
    shared.close_all()
    assert all(t.closed for t in things)
    assert shared.get("x", lambda: Thing("x-again")).name == "x-again"


def test_a_forked_child_builds_its_own() -> None:
    shared: ProcessWide[Thing] = ProcessWide()
    parent = shared.get("k", lambda: Thing("parent"))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, shared.get("k", lambda: Thing("child")).name.encode())
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 16)
    os.waitpid(pid, 0)
    assert answer == b"child"
    assert shared.get("k", lambda: Thing("other")) is parent and not parent.closed
