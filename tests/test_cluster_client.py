"""Request coalescing, the no-write guard and Status-message extraction."""

from __future__ import annotations

import asyncio

import pytest

from webhook.cluster.client import Coalescer, assert_no_write, status_message
from webhook.cluster.view import ApiError


async def test_identical_concurrent_reads_share_one_call() -> None:
    gate = asyncio.Event()
    co: Coalescer[str] = Coalescer()

    async def fetch(timeout: float) -> str:
        await gate.wait()
        return "keys"

    waiters = [asyncio.ensure_future(co.run(("ns", "s"), 5.0, fetch)) for _ in range(50)]
    other = asyncio.ensure_future(co.run(("ns", "t"), 5.0, fetch))
    await asyncio.sleep(0)  # let every waiter join
    assert co.inflight() == 2
    gate.set()
    assert await asyncio.gather(*waiters, other) == ["keys"] * 51
    assert co.calls == 2
    assert co.inflight() == 0


async def test_errors_are_shared_and_not_remembered() -> None:
    co: Coalescer[str] = Coalescer()
    n = 0

    async def fetch(timeout: float) -> str:
        nonlocal n
        n += 1
        raise ApiError(403, 'secrets "s" is forbidden')

    results = await asyncio.gather(*(co.run("k", 5.0, fetch) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, ApiError) and r.status == 403 for r in results)
    assert n == 1
    with pytest.raises(ApiError):
        await co.run("k", 5.0, fetch)
    assert n == 2  # a later read asks again


async def test_late_joiner_retries_when_the_leaders_budget_ran_out() -> None:
    co: Coalescer[str] = Coalescer()
    budgets: list[float] = []
    first_started = asyncio.Event()
    release_leader = asyncio.Event()

    async def fetch(timeout: float) -> str:
        budgets.append(timeout)
        if len(budgets) == 1:
            first_started.set()
            await release_leader.wait()
            raise ApiError(0, "timed out")  # the leader's short budget expired
        return "keys"

    leader = asyncio.ensure_future(co.run("k", 1.0, fetch))
    await first_started.wait()
    joiner = asyncio.ensure_future(co.run("k", 60.0, fetch))
    await asyncio.sleep(0)
    release_leader.set()
    with pytest.raises(ApiError):
        await leader
    assert await joiner == "keys"
    assert co.calls == 2
    assert budgets[1] > 1.0


async def test_caller_timeout_is_a_status_0_api_error() -> None:
    co: Coalescer[str] = Coalescer()

    async def fetch(timeout: float) -> str:
        await asyncio.Event().wait()
        return "never"

    with pytest.raises(ApiError) as info:
        await co.run("k", 0.01, fetch)
    assert info.value.status == 0 and info.value.transient


def test_no_write_without_dry_run() -> None:
    assert_no_write("GET", "/api/v1/secrets", None)
    assert_no_write("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", None)
    assert_no_write("POST", "/api/v1/namespaces/a/pods", {"dryRun": "All"})
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        with pytest.raises(ValueError, match="without dryRun=All"):
            assert_no_write(method, "/api/v1/namespaces/a/pods", {"dryRun": "None"})


def test_status_message_is_the_apiserver_text_exactly() -> None:
    body = (
        b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \\"x\\" is forbidden: '
        b'violates PodSecurity \\"restricted:latest\\"","reason":"Forbidden","code":403}'
    )
    assert status_message(403, body) == ('pods "x" is forbidden: violates PodSecurity "restricted:latest"', "Forbidden")
    assert status_message(502, b"bad gateway") == ("bad gateway", "")
    assert status_message(503, b"") == ("HTTP 503", "")


def test_an_apiserver_message_is_kept_to_8192_characters_and_its_length() -> None:
    """Another webhook's denial reaches us through the apiserver at any length; the checks classify
    it and quote it in a denial, so it is cut (issue 25: a 1 MB message took Dry Run 2.4 s)."""
    from webhook.kube import ApiError

    short = ApiError(403, "x" * 8192)
    assert short.message == "x" * 8192
    long = ApiError(403, 'admission webhook "policy.example.com" denied the request: ' + "a" * 1_000_000)
    assert long.message == (
        'admission webhook "policy.example.com" denied the request: ' + "a" * (8192 - 59) + "… (1000059 characters)"
    )
    assert str(long) == long.message
