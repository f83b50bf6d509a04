"""A repeated ``Idempotency-Key`` is answered from ``sandbox serve``'s cache, never run twice (in sequence or at once);
another key runs again; the cache forgets after its TTL and stays within its byte bound; a SandboxError answer is not
kept. The fleet client sends one key per call (the retry test in test_fleet.py checks it is kept across attempts)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sandbox_test_helpers import serve

from agentrl_sandbox.guard import ServerLimits
from agentrl_sandbox.idempotency import HEADER, ReplayCache
from agentrl_sandbox.server import create_app

# Prints a fresh random number: two executions cannot print the same one.
CODE = {"code": "import secrets; print(secrets.token_hex(16))", "language": "python", "run_timeout": 20}


@pytest.fixture(scope="module")
def app_and_url(pool):
    app = create_app(pool, limits=ServerLimits(replay_ttl_s=600.0))
    with serve(app) as url:
        yield app, url


def post(url: str, key: str | None) -> str:
    headers = {HEADER: key} if key else {}
    resp = httpx.post(f"{url}/run_code", json=CODE, headers=headers, timeout=60)
    assert resp.status_code == 200, resp.text
    return resp.json()["run_result"]["stdout"]


def test_the_same_key_twice_runs_once_and_another_key_runs_again(app_and_url):
    app, url = app_and_url
    metrics = app.state.metrics
    before, replayed = sum(metrics.calls.values()), metrics.replayed
    first = post(url, "key-1")
    assert post(url, "key-1") == first and len(first) == 33
    assert sum(metrics.calls.values()) - before == 1 and metrics.replayed - replayed == 1  # executed once
    assert post(url, "key-2") != first and post(url, None) != post(url, None)  # no key: never cached
    assert sum(metrics.calls.values()) - before == 4
    assert f"agentrl_sandbox_replayed_total {metrics.replayed}" in httpx.get(f"{url}/metrics").text


def test_the_same_key_at_once_waits_for_the_first_run(app_and_url):
    app, url = app_and_url
    metrics = app.state.metrics
    before = sum(metrics.calls.values())

    async def together() -> list[str]:
        async with httpx.AsyncClient(timeout=60) as http:
            answers = await asyncio.gather(
                *(http.post(f"{url}/run_code", json=CODE, headers={HEADER: "key-at-once"}) for _ in range(4))
            )
        return [a.json()["run_result"]["stdout"] for a in answers]

    outputs = asyncio.run(together())
    assert len(set(outputs)) == 1 and sum(metrics.calls.values()) - before == 1


def test_a_key_too_long_is_refused(app_and_url):
    _, url = app_and_url
    resp = httpx.post(f"{url}/run_code", json=CODE, headers={HEADER: "k" * 129}, timeout=60)
    assert resp.status_code == 400 and HEADER in resp.json()["detail"]


def answer(stdout: str, status: str = "Success") -> dict:
    return {"status": status, "run_result": {"stdout": stdout, "stderr": ""}, "message": ""}


def test_the_cache_expires_keeps_its_byte_bound_and_does_not_keep_sandbox_errors():
    async def scenario() -> None:
        runs: list[str] = []

        def runner(stdout: str, status: str = "Success"):
            async def run() -> dict:
                runs.append(stdout)
                return answer(stdout, status)

            return run

        cache = ReplayCache(ttl_s=600.0, max_bytes=3 * (256 + 1000))
        for i in range(4):
            await cache.answer(f"k{i}", "h", runner(str(i) * 1000))
        assert len(cache) == 3  # the oldest was dropped: 4 answers are over the byte bound
        assert (await cache.answer("k0", "h", runner("again")))[0]["run_result"]["stdout"] == "again"
        assert (await cache.answer("k3", "h", runner("never")))[1] is True and "never" not in runs

        await cache.answer("broken", "h", runner("x", status="SandboxError"))
        assert (await cache.answer("broken", "h", runner("y")))[1] is False  # the sandbox failed: the retry runs

        short = ReplayCache(ttl_s=1e-6)
        await short.answer("k", "h", runner("first"))
        await asyncio.sleep(0.01)
        assert (await short.answer("k", "h", runner("second")))[0]["run_result"]["stdout"] == "second"

    asyncio.run(scenario())


def test_a_key_is_bound_to_its_request_body_and_its_caller(pool):
    """The same key with another body: 422, never the first body's output; the same key from another caller (another
    token): its own run, not the first caller's answer (issue 40, item 6)."""
    app = create_app(pool, limits=ServerLimits(replay_ttl_s=600.0))
    with serve(app) as url:
        first = post(url, "bound-key")
        other_body = {**CODE, "code": "print('other')"}
        resp = httpx.post(f"{url}/run_code", json=other_body, headers={HEADER: "bound-key"}, timeout=60)
        assert resp.status_code == 422 and HEADER in resp.json()["detail"] and first not in resp.text
        assert post(url, "bound-key") == first  # the original request still replays
        stranger = {HEADER: "bound-key", "Authorization": "Bearer someone-else"}
        resp = httpx.post(f"{url}/run_code", json=CODE, headers=stranger, timeout=60)
        assert resp.status_code == 200 and resp.json()["run_result"]["stdout"] not in ("", first)
