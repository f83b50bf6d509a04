"""``communicate_capped`` (the subprocess backend's capture): output past the cap is read to its end and dropped."""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest

from agentrl_sandbox._capture import communicate_capped

CAP = 1 << 16


def test_output_past_the_cap_is_read_to_the_end_so_the_pipes_close_on_the_loop(monkeypatch: pytest.MonkeyPatch):
    """The capture stopped reading stdout at the cap: the pipe stayed open after the call, ``Process.wait()`` (which
    waits for the pipes) sat out its grace period, and the garbage collector closed the transport once the loop was
    gone ("Event loop is closed", an unraisable exception in whatever test ran then)."""
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value}"))

    async def capture() -> tuple[bytes, bool, bool, bool]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import sys; sys.stdout.write('x' * (1 << 20))",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        cap = await communicate_capped(proc, None, 60.0, CAP)
        return cap.stdout, cap.truncated, proc.stdout.at_eof(), proc.stderr.at_eof()

    gc.disable()  # what is left is collected after the loop is closed, as it happened in the suite
    try:
        stdout, truncated, stdout_at_eof, stderr_at_eof = asyncio.run(capture())
        gc.collect()
    finally:
        gc.enable()
    assert (stdout, truncated) == (b"x" * CAP, True)
    assert stdout_at_eof and stderr_at_eof
    assert unraisable == []
