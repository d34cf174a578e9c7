"""What the audit tests wait on: a condition with a deadline, and the audit controller's Events on one
job (e2e/test_audit_live.py on the bare control plane, e2e/test_audit_stack.py on the real node)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from e2e.harness.controlplane import ControlPlane
from webhook.audit.events import FAILED, PASSED


async def until(what: str, cond: Callable[[], Any], timeout: float, every: float = 0.2) -> Any:
    """Wait for ``cond()`` to be truthy (it may be a coroutine function) and return it; at the
    deadline, fail the test with ``what`` (a condition wait, not a sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f}s: {what} (the condition stayed false; last: {got!r})")
        await asyncio.sleep(every)


def _preflight_events(cp: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    out = cp.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    return [
        e for e in json.loads(out)["items"]
        if e.get("reason") in (FAILED, PASSED) and (e.get("involvedObject") or {}).get("name") == job
    ]  # fmt: skip


async def preflight_events(cp: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    """The PreflightFailed/PreflightPassed Events on the object ``job`` in ``namespace``, in the
    apiserver's order (kubectl runs in a thread: the controller under test shares the loop)."""
    return await asyncio.to_thread(_preflight_events, cp, namespace, job)
