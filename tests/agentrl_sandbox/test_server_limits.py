"""``sandbox serve`` caps what a request may ask for: ``memory_limit_MB`` above ``max_memory_mb`` runs with
``max_memory_mb`` (issue 40, item 7)."""

from __future__ import annotations

import httpx
from sandbox_test_helpers import serve

from agentrl_sandbox.guard import ServerLimits
from agentrl_sandbox.server import create_app

# Reports the address-space limit the run got (RLIMIT_AS = the interpreter's own mappings + memory_mb).
CODE = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"


def rlimit_as_bytes(url: str, memory_mb: int) -> int:
    body = {"code": CODE, "language": "python", "run_timeout": 20, "memory_limit_MB": memory_mb}
    resp = httpx.post(f"{url}/run_code", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    return int(resp.json()["run_result"]["stdout"])


def test_a_request_memory_limit_is_capped_at_the_server_maximum(pool):
    with serve(create_app(pool, limits=ServerLimits(max_memory_mb=768))) as url:
        capped = rlimit_as_bytes(url, 1_000_000_000)
        at_cap = rlimit_as_bytes(url, 768)
        below = rlimit_as_bytes(url, 512)
    # RLIMIT_AS = the slot's own mappings at the run's start (they vary by a few hundred KiB between runs) + memory_mb
    slack = 8 << 20
    assert abs(capped - at_cap) < slack  # 1e9 MB asked, 768 MB given (uncapped, the two would differ by ~1 PB)
    assert abs((at_cap - below) - (256 << 20)) < slack
