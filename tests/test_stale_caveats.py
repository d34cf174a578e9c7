"""A verdict from stale cached data tells the kubectl user so (the apiserver unreachable: the caches stop updating).

The stale note used to live only in `details`, which the admission answer never carries:
a PASS (or a FAIL) computed from a cache the apiserver stopped updating looked current.
"""

from __future__ import annotations

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks.serviceaccount import ServiceAccount
from webhook.config import Settings
from webhook.policy import decide
from webhook.results import CheckResult, PreflightResults, Status
from webhook.workloads.base import PodGroup

STALE = "cached serviceaccounts are 400s old (over cacheStaleSeconds 120); this verdict may be out of date"


def _wl() -> object:
    spec = pod(container("node"))
    spec["serviceAccountName"] = "trainer"
    return workload([PodGroup("node", 2, spec)])


async def test_stale_cache_becomes_a_caveat_of_the_result() -> None:
    view = FakeView(
        {"serviceaccounts": [{"metadata": meta("trainer", "team-a")}]}, cache_ages={"serviceaccounts": 400.0}
    )
    r = await run_check(ServiceAccount(), _wl(), view)
    assert (r.status, r.details, r.caveats) == (Status.PASS, [STALE], [STALE])


async def test_fresh_cache_has_no_caveat() -> None:
    view = FakeView({"serviceaccounts": [{"metadata": meta("trainer", "team-a")}]}, cache_ages={"serviceaccounts": 3.0})
    r = await run_check(ServiceAccount(), _wl(), view)
    assert (r.status, r.details, r.caveats) == (Status.PASS, [], [])


def _stale(status: Status, message: str) -> CheckResult:
    return CheckResult("Service Account", status, message, details=[STALE], caveats=[STALE])


def test_stale_pass_is_allowed_with_a_warning_naming_the_check() -> None:
    d = decide(PreflightResults([_stale(Status.PASS, "fine")]), settings=Settings())
    assert (d.allowed, d.outcome) == (True, "warned")
    assert d.warnings == [f"[Service Account] {STALE}"]


def test_stale_fail_keeps_its_denial_and_adds_the_warning_once() -> None:
    fail = _stale(Status.FAIL, 'ServiceAccount "trainer" not found in namespace "team-a". Fix: create it')
    again = _stale(Status.WARN, "could not verify something else")
    d = decide(PreflightResults([fail, again]), settings=Settings(), subject="the job")
    assert not d.allowed
    assert d.message == (
        'the job failed 1 preflight check:\n[Service Account] ServiceAccount "trainer" not found in namespace "team-a". Fix: create it'
    )
    assert d.warnings == ["[Service Account] could not verify something else", f"[Service Account] {STALE}"]


def test_audit_mode_and_quiet_actions_show_no_caveat() -> None:
    stale = PreflightResults([_stale(Status.PASS, "fine")])
    assert decide(stale, settings=Settings(mode="audit")).warnings == []
    assert decide(stale, settings=Settings(checks={"Service Account": "audit"})).warnings == []
    assert decide(stale, settings=Settings(checks={"Service Account": "off"})).warnings == []


def test_skipped_result_shows_no_caveat() -> None:
    d = decide(PreflightResults([_stale(Status.SKIP, "Skipped: whatever")]), settings=Settings())
    assert (d.warnings, d.outcome) == ([], "allowed")
