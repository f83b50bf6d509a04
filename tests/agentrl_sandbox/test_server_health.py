"""``/health`` of ``sandbox serve`` runs a trivial program through the pool, outside its queue: a pool whose every
slot is busy is healthy; concurrent checks share one run. (A failing check -> 503: test_fleet.py.)"""

from __future__ import annotations

import asyncio

import httpx
from sandbox_test_helpers import serve

from agentrl_sandbox.server import create_app

SLEEPER = {"code": "import time; time.sleep(60)", "language": "python", "run_timeout": 8}


def test_health_runs_a_program_past_a_full_queue_and_checks_share_one_run(pool):
    app = create_app(pool)
    health = app.state.health
    with serve(app) as url:

        async def scenario() -> tuple[list[httpx.Response], bool, list[httpx.Response]]:
            async with httpx.AsyncClient(timeout=60) as http:
                sleepers = [asyncio.ensure_future(http.post(f"{url}/run_code", json=SLEEPER)) for _ in range(2)]
                while not pool._sem.locked():  # both of the pool's run slots are taken
                    await asyncio.sleep(0.01)
                checks = await asyncio.gather(*(http.get(f"{url}/health") for _ in range(3)))
                busy = not any(s.done() for s in sleepers)
                return checks, busy, await asyncio.gather(*sleepers)

        probes = health.probes
        checks, busy_while_checked, slept = asyncio.run(scenario())
    assert busy_while_checked  # answered while both slots were still running the sleepers
    assert [c.status_code for c in checks] == [200] * 3 and all(c.json()["ok"] for c in checks)
    assert checks[0].json()["backend"] == "local" and checks[0].json()["error"] == ""
    assert health.probes - probes == 1  # three concurrent checks, one run
    assert [s.json()["agentrl"]["status"] for s in slept] == ["timeout", "timeout"]
