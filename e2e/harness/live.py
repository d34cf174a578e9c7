"""The engine against the live control plane: one evaluation helper for the e2e tests that run
checks in process on a real cluster view (the `open_view` fixture in conftest.py opens the view)."""

from __future__ import annotations

import copy
from typing import Any

from webhook.cluster.live import LiveClusterView
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.preflight import Evaluation, evaluate
from webhook.results import CheckResult


async def live_evaluate(obj: dict[str, Any], view: LiveClusterView, settings: Settings | None = None) -> Evaluation:
    """The webhook's whole path (adapter, checks, policy) for `obj`, on a copy, with a 15 s budget."""
    return await evaluate(copy.deepcopy(obj), settings=settings or Settings(), deadline=Deadline(15), view=view)


def results_of(ev: Evaluation, name: str) -> list[CheckResult]:
    return [r for r in ev.results.checks if r.name == name]


def result_of(ev: Evaluation, name: str) -> CheckResult:
    """The one result of check `name` (a check that reports a FAIL and a WARN has two: use results_of)."""
    found = results_of(ev, name)
    assert len(found) == 1, [(r.name, r.status, r.message) for r in ev.results.checks]
    return found[0]
