"""``/metrics`` of ``agentrl-recipe sandbox serve`` in Prometheus' text exposition format (version 0.0.4).

Calls by status, rejected requests by reason, replayed answers, requests running and queued, and a latency histogram.
Written by hand: a few metric families do not justify a dependency, and the format is a few lines of text.
"""

from __future__ import annotations

import bisect
import dataclasses
import time

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PREFIX = "agentrl_sandbox"


@dataclasses.dataclass
class ServerMetrics:
    """Counters of one server process; every mutation happens on the server's event loop (no locks needed)."""

    capacity: int  # runs that execute at once (the pool size); admitted requests beyond it wait in the queue
    calls: dict[str, int] = dataclasses.field(default_factory=dict)  # finished runs by ExecResult status
    rejected: dict[str, int] = dataclasses.field(default_factory=dict)  # unauthorized | too_large | queue_full | ...
    in_flight: int = 0  # admitted requests not answered yet (running + queued)
    replayed: int = 0  # requests answered from the idempotency cache (a repeated key: not run again)
    bucket_counts: list[int] = dataclasses.field(default_factory=lambda: [0] * len(LATENCY_BUCKETS_S))
    latency_sum_s: float = 0.0
    started: float = dataclasses.field(default_factory=time.time)

    @property
    def queued(self) -> int:
        return max(0, self.in_flight - self.capacity)

    def observe(self, status: str, latency_s: float) -> None:
        self.calls[status] = self.calls.get(status, 0) + 1
        self.latency_sum_s += latency_s
        index = bisect.bisect_left(LATENCY_BUCKETS_S, latency_s)
        if index < len(self.bucket_counts):
            self.bucket_counts[index] += 1

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def render(self) -> str:
        """The exposition text (ends with a newline, as Prometheus requires)."""
        lines = [
            f"# HELP {PREFIX}_calls_total Runs answered, by sandbox status.",
            f"# TYPE {PREFIX}_calls_total counter",
            *(f'{PREFIX}_calls_total{{status="{s}"}} {n}' for s, n in sorted(self.calls.items())),
            f"# HELP {PREFIX}_rejected_total Requests refused before running, by reason.",
            f"# TYPE {PREFIX}_rejected_total counter",
            *(f'{PREFIX}_rejected_total{{reason="{r}"}} {n}' for r, n in sorted(self.rejected.items())),
            f"# HELP {PREFIX}_replayed_total Requests with a repeated Idempotency-Key, answered without running.",
            f"# TYPE {PREFIX}_replayed_total counter",
            f"{PREFIX}_replayed_total {self.replayed}",
            f"# HELP {PREFIX}_in_flight Admitted requests not answered yet (running and queued).",
            f"# TYPE {PREFIX}_in_flight gauge",
            f"{PREFIX}_in_flight {self.in_flight}",
            f"# HELP {PREFIX}_queue_depth Admitted requests waiting for a free run slot.",
            f"# TYPE {PREFIX}_queue_depth gauge",
            f"{PREFIX}_queue_depth {self.queued}",
            f"# HELP {PREFIX}_capacity Runs that execute at once.",
            f"# TYPE {PREFIX}_capacity gauge",
            f"{PREFIX}_capacity {self.capacity}",
            f"# HELP {PREFIX}_request_seconds Time from admission to answer.",
            f"# TYPE {PREFIX}_request_seconds histogram",
        ]
        cumulative = 0
        for bound, count in zip(LATENCY_BUCKETS_S, self.bucket_counts, strict=True):
            cumulative += count
            lines.append(f'{PREFIX}_request_seconds_bucket{{le="{bound:g}"}} {cumulative}')
        total = sum(self.calls.values())
        lines += [
            f'{PREFIX}_request_seconds_bucket{{le="+Inf"}} {total}',
            f"{PREFIX}_request_seconds_sum {self.latency_sum_s:.6f}",
            f"{PREFIX}_request_seconds_count {total}",
            f"# HELP {PREFIX}_start_time_seconds When this server started (Unix time).",
            f"# TYPE {PREFIX}_start_time_seconds gauge",
            f"{PREFIX}_start_time_seconds {self.started:.3f}",
        ]
        return "\n".join(lines) + "\n"
