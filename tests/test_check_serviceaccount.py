"""Service Account: exists / missing / unset, exact wording."""

from __future__ import annotations

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks.serviceaccount import ServiceAccount
from webhook.results import Status
from webhook.workloads.base import PodGroup


def _wl(sa: str | None) -> object:
    spec = pod(container("node"))
    if sa:
        spec["serviceAccountName"] = sa
    return workload([PodGroup("node", 4, spec), PodGroup("model-initializer", 1, dict(spec))])


async def test_unset_is_skipped() -> None:
    r = await run_check(ServiceAccount(), _wl(None), FakeView())
    assert (r.status, r.message) == (
        Status.SKIP,
        "No serviceAccountName set; the pods use the namespace's default ServiceAccount",
    )


async def test_missing_fails_with_fix() -> None:
    r = await run_check(ServiceAccount(), _wl("trainer"), FakeView())
    assert r.status is Status.FAIL
    assert r.message == (
        'ServiceAccount "trainer" not found in namespace "team-a" (serviceAccountName of the node, model-initializer pods); '
        "the pods could not be created. Fix: kubectl create serviceaccount trainer -n team-a"
    )


async def test_exists_passes_and_stale_cache_is_noted() -> None:
    view = FakeView(
        {"serviceaccounts": [{"metadata": meta("trainer", "team-a")}]}, cache_ages={"serviceaccounts": 400.0}
    )
    r = await run_check(ServiceAccount(), _wl("trainer"), view)
    assert (r.status, r.message) == (Status.PASS, 'ServiceAccount "trainer" exists in namespace "team-a"')
    assert r.details == [
        "cached serviceaccounts are 400s old (over cacheStaleSeconds 120); this verdict may be out of date"
    ]


async def test_other_namespace_does_not_count() -> None:
    view = FakeView({"serviceaccounts": [{"metadata": meta("trainer", "team-b")}]})
    r = await run_check(ServiceAccount(), _wl("trainer"), view)
    assert r.status is Status.FAIL
