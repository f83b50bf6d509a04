"""benchmarks/host_probe.py: what it times is what it says it times."""

from __future__ import annotations

import sys

from benchmarks import host_probe


def test_each_page_of_the_probe_is_faulted_once_by_its_write() -> None:
    pages, faults, seconds = host_probe.touch_fresh_pages(4)
    assert pages == (4 << 20) // host_probe.PAGE
    # fresh memory: every page faults on its first write (a few more for the interpreter's own allocations)
    assert pages <= faults <= pages + 64, (pages, faults)
    assert seconds > 0


def test_the_import_probe_times_a_new_interpreter_and_says_when_it_cannot() -> None:
    assert host_probe.import_cpu_s("json", sys.executable) is not None
    assert host_probe.import_cpu_s("agentrl_no_such_module", sys.executable) is None


def test_the_line_names_each_figure_with_its_unit() -> None:
    speed = host_probe.HostSpeed(copy_gb_s=7.26, page_fault_us=0.734, loop_ns=28.26, import_torch_s=2.456)
    assert speed.line() == (
        "memory copy 7.3 GB/s, page fault 0.73 µs, python loop 28.3 ns/iteration, import torch 2.46 s of CPU"
    )
    assert host_probe.HostSpeed(5.0, 1.0, 30.0, None).line().endswith("import torch n/a of CPU")
