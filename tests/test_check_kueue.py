"""Kueue Queue / Admission Checks / Capacity: queue resolution, every status, exact wording."""

from __future__ import annotations

from datetime import UTC

import pytest

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from webhook.checks import all_checks, kueue
from webhook.checks.kueue import KueueAdmissionChecks, KueueCapacity, KueueQueue
from webhook.cluster.view import ApiError
from webhook.config import Settings
from webhook.models.kueue.queue import selector_matches
from webhook.results import Status
from webhook.workloads.base import PodGroup

SERVED = {"v1", "jobset.x-k8s.io/v1alpha2", "trainer.kubeflow.org/v1alpha1", "kueue.x-k8s.io/v1beta2"}
ACTIVE = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}


def _tj(queue: str | None = "team-a-queue", groups: list | None = None) -> object:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama-ft", "namespace": "team-a", "labels": labels},
        "spec": {},
    }
    if groups is None:
        groups = [
            PodGroup("model-initializer", 1, pod(container("m", {"cpu": "2", "memory": "4Gi"}))),
            PodGroup("node", 4, pod(container("node", {"cpu": "32", "nvidia.com/gpu": "8"}))),
        ]
    return workload(groups, obj=obj, queue_name=queue)


def _lq(name: str = "team-a-queue", cq: str = "gpu-cq", status: dict | None = ACTIVE, **spec) -> dict:
    o = {"metadata": meta(name, "team-a"), "spec": {"clusterQueue": cq, **spec}}
    if status is not None:
        o["status"] = status
    return o


def _h100_groups(gpu: dict) -> list:
    """One resourceGroup, flavor h100: cpu 256, memory 2Ti, and nvidia.com/gpu with the quota fields `gpu`."""
    return [
        {
            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "h100",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "256"},
                        {"name": "memory", "nominalQuota": "2Ti"},
                        {"name": "nvidia.com/gpu", **gpu},
                    ],
                }
            ],
        }
    ]


def _cq(
    name: str = "gpu-cq",
    *,
    selector: dict | None = {},  # noqa: B006 (never mutated: {} means "every namespace")
    status: dict | None = ACTIVE,
    groups: list | None = None,
    **spec,
) -> dict:
    s: dict = {"resourceGroups": groups if groups is not None else _h100_groups({"nominalQuota": "32"})}
    if selector is not None:
        s["namespaceSelector"] = selector
    s.update(spec)
    o = {"metadata": meta(name), "spec": s}
    if status is not None:
        o["status"] = status
    return o


def _ns(labels: dict | None = None) -> dict:
    return {"metadata": meta("team-a", labels={"kubernetes.io/metadata.name": "team-a", **(labels or {})})}


def _view(*objs: tuple[str, dict], served: set[str] = SERVED, **kw) -> FakeView:
    v = FakeView(served=served, **kw)
    v.add("namespaces", _ns({"team": "a"}))
    for res, o in objs:
        v.add(res, o)
    return v


# --- Kueue Queue ---


async def test_no_queue_and_no_kueue_skips() -> None:
    r = await run_check(KueueQueue(), _tj(None), FakeView())
    assert (r.status, r.message) == (
        Status.SKIP,
        "Kueue is not installed (kueue.x-k8s.io/v1beta2 is not served) and the job names no queue",
    )


async def test_no_queue_with_kueue_skips_unless_default_localqueue() -> None:
    r = await run_check(KueueQueue(), _tj(None), _view())
    assert (r.status, r.message) == (
        Status.SKIP,
        'The job names no Kueue queue (kueue.x-k8s.io/queue-name) and namespace "team-a" has no LocalQueue "default"',
    )
    r = await run_check(KueueQueue(), _tj(None), _view(("localqueues", _lq("default")), ("clusterqueues", _cq())))
    assert (r.status, r.message) == (
        Status.PASS,
        'LocalQueue "default" (Kueue\'s namespace default) → ClusterQueue "gpu-cq": both Active, and the ClusterQueue selects namespace "team-a"',
    )


async def test_queue_requested_but_kueue_absent_fails() -> None:
    r = await run_check(KueueQueue(), _tj(), FakeView())
    assert r.status is Status.FAIL
    assert r.message == (
        'The job asks for LocalQueue "team-a-queue" (label kueue.x-k8s.io/queue-name) but Kueue is not installed '
        "(kueue.x-k8s.io/v1beta2 is not served), so nothing would ever admit it. Fix: install Kueue, or remove label "
        "kueue.x-k8s.io/queue-name."
    )
    assert KueueQueue.apis == ()  # never lowered to skip for a missing API


async def test_old_kueue_is_named() -> None:
    r = await run_check(KueueQueue(), _tj(), FakeView(served={"v1", "kueue.x-k8s.io/v1beta1"}))
    assert r.status is Status.FAIL
    assert r.message == (
        'The job asks for LocalQueue "team-a-queue" (label kueue.x-k8s.io/queue-name) but the installed Kueue is too old: '
        "only kueue.x-k8s.io/v1beta1 is served. Fix: upgrade Kueue to v0.15 or later."
    )


async def test_aiperf_queue_sources() -> None:
    obj = {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "metadata": {"name": "b", "namespace": "team-a"},
        "spec": {"scheduling": {"queueName": "bench-queue"}},
    }
    wl = workload(kind="AIPerfJob", obj=obj)
    r = await run_check(KueueQueue(), wl, _view())
    assert r.status is Status.FAIL
    assert r.message.startswith('LocalQueue "bench-queue" not found in namespace "team-a" (spec.scheduling.queueName)')
    obj["spec"] = {}
    settings = Settings(aiperfEnv={"AIPERF_K8S_JOBSET_KUEUE_DEFAULT_QUEUE_NAME": "ops-queue"})
    r = await run_check(KueueQueue(), workload(kind="AIPerfJob", obj=obj), _view(), settings)
    assert r.message.startswith(
        'LocalQueue "ops-queue" not found in namespace "team-a" (the AIPerf operator\'s default queue (kueue.defaultQueueName))'
    )


async def test_localqueue_missing_lists_others() -> None:
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq("cpu-queue"))))
    assert r.status is Status.FAIL
    assert r.message == (
        'LocalQueue "team-a-queue" not found in namespace "team-a" (label kueue.x-k8s.io/queue-name), so Kueue would keep '
        'the job suspended (LocalQueues in the namespace: cpu-queue). Fix: create LocalQueue "team-a-queue" in namespace '
        '"team-a" pointing at a ClusterQueue, or correct label kueue.x-k8s.io/queue-name.'
    )


async def test_clusterqueue_missing() -> None:
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq())))
    assert r.status is Status.FAIL
    assert r.message == (
        'ClusterQueue "gpu-cq" of LocalQueue "team-a-queue" does not exist, so Kueue never admits the job. '
        'Fix: create ClusterQueue "gpu-cq", or recreate LocalQueue "team-a-queue" with an existing spec.clusterQueue.'
    )


async def test_namespace_selector_nil_and_mismatch() -> None:
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq(selector=None))))
    assert r.status is Status.FAIL
    assert r.message == (
        'ClusterQueue "gpu-cq" has no namespaceSelector, so it admits workloads from no namespace. Fix: set '
        'spec.namespaceSelector of ClusterQueue "gpu-cq" to {} (all) or to a selector matching namespace "team-a".'
    )
    cq = _cq(selector={"matchLabels": {"team": "b"}})
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", cq)))
    assert r.status is Status.FAIL
    assert r.message == (
        'ClusterQueue "gpu-cq" does not select namespace "team-a" (namespaceSelector team=b), so Kueue never admits the job. '
        'Fix: label the namespace to match (kubectl label namespace team-a <key>=<value>) or widen the selector of ClusterQueue "gpu-cq".'
    )


async def test_inactive_queues() -> None:
    inactive = {
        "conditions": [
            {
                "type": "Active",
                "status": "False",
                "reason": "FlavorNotFound",
                "message": "Can't admit new workloads: references missing ResourceFlavor(s): h100.",
            }
        ]
    }
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq(status=inactive))))
    assert r.status is Status.FAIL
    assert r.message == (
        'ClusterQueue "gpu-cq" is not Active (FlavorNotFound: Can\'t admit new workloads: references missing ResourceFlavor(s): h100), '
        "so Kueue admits nothing from it. Fix: create the ResourceFlavors it names."
    )
    lq_inactive = {"conditions": [{"type": "Active", "status": "False", "reason": "Stopped", "message": "stopped"}]}
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq(status=lq_inactive)), ("clusterqueues", _cq())))
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'LocalQueue "team-a-queue" is not Active (Stopped: stopped), so Kueue does not admit from it.'
    )


async def test_unreconciled_and_stopped_warn() -> None:
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq(status=None)), ("clusterqueues", _cq())))
    assert (r.status, r.message) == (
        Status.WARN,
        'LocalQueue "team-a-queue" has no Active condition yet (is Kueue\'s controller running?)',
    )
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq(stopPolicy="Hold"))))
    assert (r.status, r.message) == (
        Status.WARN,
        'ClusterQueue "gpu-cq" is stopped (stopPolicy Hold): the job waits until it is resumed',
    )
    r = await run_check(
        KueueQueue(), _tj(), _view(("localqueues", _lq(stopPolicy="HoldAndDrain")), ("clusterqueues", _cq()))
    )
    assert (r.status, r.message) == (
        Status.WARN,
        'LocalQueue "team-a-queue" is stopped (stopPolicy HoldAndDrain): the job waits until it is resumed',
    )
    r = await run_check(KueueQueue(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq(status=None))))
    assert (r.status, r.message) == (
        Status.WARN,
        'ClusterQueue "gpu-cq" has no Active condition yet (is Kueue\'s controller running?)',
    )


@pytest.mark.parametrize(
    "selector,expected",
    [
        ({}, True),
        ({"matchLabels": {"team": "a"}}, True),
        ({"matchLabels": {"team": "b"}}, False),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, False),
    ],
)
def test_selector_matches(selector: dict, expected: bool) -> None:
    assert selector_matches(selector, {"team": "a"}) is expected


# --- Kueue Admission Checks ---


def _ac(name: str, controller: str = "dispatch.phpboyscout.uk/admission", active: bool | None = True) -> dict:
    o = {"metadata": meta(name), "spec": {"controllerName": controller}}
    if active is not None:
        o["status"] = {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "Ready" if active else "NotActive",
                    "message": "x",
                }
            ]
        }
    return o


def _strategy(*names: str, on: list | None = None) -> dict:
    return {"admissionChecks": [{"name": n, **({"onFlavors": on} if on else {})} for n in names]}


async def test_admission_checks_skip_without_queue_or_checks() -> None:
    r = await run_check(KueueAdmissionChecks(), _tj(None), FakeView())
    assert r.status is Status.SKIP and r.message.startswith("Skipped: Kueue is not installed")
    r = await run_check(KueueAdmissionChecks(), _tj(), _view(("localqueues", _lq())))
    assert (r.status, r.message) == (Status.SKIP, 'Skipped: ClusterQueue "gpu-cq" does not exist (see Kueue Queue)')
    r = await run_check(KueueAdmissionChecks(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq())))
    assert (r.status, r.message) == (Status.SKIP, 'ClusterQueue "gpu-cq" uses no AdmissionChecks')


async def test_admission_check_missing_and_inactive() -> None:
    cq = _cq(admissionChecksStrategy=_strategy("gate", "prov"))
    r = await run_check(
        KueueAdmissionChecks(),
        _tj(),
        _view(
            ("localqueues", _lq()),
            ("clusterqueues", cq),
            ("admissionchecks", _ac("prov", "kueue.x-k8s.io/provisioning-request", False)),
        ),
    )
    assert r.status is Status.FAIL
    assert r.message == (
        'AdmissionCheck "gate" (listed by ClusterQueue "gpu-cq") does not exist, so Kueue never admits the job. '
        'Fix: create AdmissionCheck "gate", or remove it from spec.admissionChecksStrategy of ClusterQueue "gpu-cq". '
        'AdmissionCheck "prov" is not Active (NotActive: x): its controller "kueue.x-k8s.io/provisioning-request" has not started. '
        'Fix: deploy or start the controller "kueue.x-k8s.io/provisioning-request".'
    )


async def test_admission_checks_pass() -> None:
    cq = _cq(admissionChecksStrategy=_strategy("gate"))
    r = await run_check(
        KueueAdmissionChecks(),
        _tj(),
        _view(("localqueues", _lq()), ("clusterqueues", cq), ("admissionchecks", _ac("gate"))),
    )
    assert (r.status, r.message) == (
        Status.PASS,
        '1 AdmissionCheck(s) of ClusterQueue "gpu-cq" exist and are Active: gate',
    )


GATE = Settings(
    kueue={
        "admissionCheckController": "dispatch.phpboyscout.uk/admission",
        "admissionLease": "dispatch/admission",
        "leaseMaxAgeSeconds": 60,
    }
)


async def test_readmission_gate_controller_mismatch_and_onflavors() -> None:
    cq = _cq(admissionChecksStrategy=_strategy("gate"))
    objs = (("localqueues", _lq()), ("clusterqueues", cq), ("admissionchecks", _ac("gate", "example.com/other")))
    live = {
        ("leases", "dispatch", "admission"): {
            "spec": {"holderIdentity": "a", "renewTime": "2030-01-01T00:00:00.000000Z"}
        }
    }
    r = await run_check(KueueAdmissionChecks(), _tj(), _view(*objs, live=live), GATE)
    assert r.status is Status.FAIL
    assert r.message == (
        'the readmission gate is not proven: ClusterQueue "gpu-cq" lists no AdmissionCheck of controller '
        '"dispatch.phpboyscout.uk/admission" (AdmissionCheck "gate" names controller "example.com/other"). Fix: list an '
        'AdmissionCheck with controllerName "dispatch.phpboyscout.uk/admission" in spec.admissionChecksStrategy of ClusterQueue "gpu-cq".'
    )
    cq = _cq(admissionChecksStrategy=_strategy("gate", on=["h100"]))
    r = await run_check(
        KueueAdmissionChecks(),
        _tj(),
        _view(("localqueues", _lq()), ("clusterqueues", cq), ("admissionchecks", _ac("gate")), live=live),
        GATE,
    )
    assert (r.status, r.message) == (
        Status.FAIL,
        'the readmission gate is not proven: ClusterQueue "gpu-cq" lists AdmissionCheck "gate" only on flavors h100. Fix: list it without onFlavors.',
    )


@pytest.mark.parametrize(
    "lease,status,message",
    [
        (
            None,
            Status.FAIL,
            "the readmission gate is not proven: Lease dispatch/admission does not exist. Fix: deploy the admission controller, or correct kueue.admissionLease.",
        ),
        (
            {"spec": {}},
            Status.FAIL,
            "the readmission gate is not proven: the admission controller's Lease has no holder. Fix: start the admission controller.",
        ),
        (
            {"spec": {"holderIdentity": "pod-1"}},
            Status.FAIL,
            "the readmission gate is not proven: the admission controller's Lease has never been renewed. Fix: start the admission controller.",
        ),
        (
            {"spec": {"holderIdentity": "pod-1", "renewTime": "2026-01-01T00:00:00.000000Z"}},
            Status.FAIL,
            "the readmission gate is not proven: the admission controller's Lease was last renewed 5m ago, beyond 60s: the controller is down or stalled. Fix: restart it.",
        ),
        (
            {"spec": {"holderIdentity": "pod-1", "renewTime": "2026-01-01T00:04:30.000000Z"}},
            Status.PASS,
            '1 AdmissionCheck(s) of ClusterQueue "gpu-cq" exist and are Active: gate',
        ),
        (
            ApiError(403, "forbidden"),
            Status.WARN,
            "Cannot verify the admission controller's Lease dispatch/admission (not permitted to get leases)",
        ),
    ],
)
@pytest.mark.parametrize("ttl", [0, 5])
async def test_readmission_gate_lease(
    monkeypatch: pytest.MonkeyPatch, lease, status: Status, message: str, ttl: float
) -> None:
    """Every status and its exact wording, with the Lease read reused (kueue.leaseTtlSeconds 5, the default)
    or read for every job (0): the same answers away from the bound."""
    from datetime import datetime

    monkeypatch.setattr(kueue, "now", lambda: datetime(2026, 1, 1, 0, 5, tzinfo=UTC).timestamp())
    cq = _cq(admissionChecksStrategy=_strategy("gate"))
    live = {("leases", "dispatch", "admission"): lease} if lease is not None else {}
    view = _view(("localqueues", _lq()), ("clusterqueues", cq), ("admissionchecks", _ac("gate")), live=live)
    settings = GATE.model_copy(update={"kueue": GATE.kueue.model_copy(update={"lease_ttl_seconds": ttl})})
    r = await run_check(KueueAdmissionChecks(), _tj(), view, settings)
    assert (r.status, r.message) == (status, message)


def _renewed(seconds_ago: float) -> dict:
    from datetime import datetime, timedelta

    at = datetime(2026, 1, 1, 0, 5, tzinfo=UTC) - timedelta(seconds=seconds_ago)
    return {"spec": {"holderIdentity": "pod-1", "renewTime": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


PASS_GATE = '1 AdmissionCheck(s) of ClusterQueue "gpu-cq" exist and are Active: gate'


def _stale(age: str) -> str:
    return (
        f"the readmission gate is not proven: the admission controller's Lease was last renewed {age} ago, beyond "
        "60s: the controller is down or stalled. Fix: restart it."
    )


@pytest.mark.parametrize(
    "ttl,age,status,message",
    [
        (0, 60, Status.PASS, PASS_GATE),  # at leaseMaxAgeSeconds: still fresh
        (0, 61, Status.FAIL, _stale("61s")),  # read for every job: the bound is leaseMaxAgeSeconds alone
        (5, 61, Status.PASS, PASS_GATE),  # a read reused up to 5 s may be 5 s older than the Lease is
        (5, 65, Status.PASS, PASS_GATE),  # 60 + 5: at the widened bound
        (5, 66, Status.FAIL, _stale("66s")),  # past it: the wording names leaseMaxAgeSeconds, as without reuse
        (300, 359, Status.PASS, PASS_GATE),
        (300, 361, Status.FAIL, _stale("6m")),
    ],
)
async def test_a_reused_lease_read_is_stale_only_past_max_age_plus_the_reuse_window(
    monkeypatch: pytest.MonkeyPatch, ttl: float, age: float, status: Status, message: str
) -> None:
    from datetime import datetime

    monkeypatch.setattr(kueue, "now", lambda: datetime(2026, 1, 1, 0, 5, tzinfo=UTC).timestamp())
    cq = _cq(admissionChecksStrategy=_strategy("gate"))
    live = {("leases", "dispatch", "admission"): _renewed(age)}
    view = _view(("localqueues", _lq()), ("clusterqueues", cq), ("admissionchecks", _ac("gate")), live=live)
    asked: list[float] = []
    inner = view.get_object

    async def get_object(*args, ttl: float = 0.0):  # type: ignore[no-untyped-def]
        asked.append(ttl)
        return await inner(*args, ttl=ttl)

    view.get_object = get_object  # type: ignore[method-assign]
    settings = Settings(kueue={**GATE.kueue.model_dump(by_alias=True), "leaseTtlSeconds": ttl})
    r = await run_check(KueueAdmissionChecks(), _tj(), view, settings)
    assert (r.status, r.message) == (status, message)
    assert asked == [ttl]  # the view is asked to reuse the read for exactly that window


def test_admission_checks_share_their_reads_unless_the_lease_is_read_for_every_job() -> None:
    """No Lease configured: no live read at all. A Lease reused for a window: one GET per window for every
    job. leaseTtlSeconds 0: one GET per job, so the check is not one the audit's cheap pass may run."""
    check = KueueAdmissionChecks()
    assert check.shares_reads(Settings()) is True
    assert check.shares_reads(GATE) is True
    no_reuse = Settings(kueue={**GATE.kueue.model_dump(by_alias=True), "leaseTtlSeconds": 0})
    assert check.shares_reads(no_reuse) is False
    assert check.shares_reads(Settings(kueue={"leaseTtlSeconds": 0})) is True  # no Lease to read


# --- Kueue Capacity ---


async def test_capacity_fits_now() -> None:
    r = await run_check(KueueCapacity(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq())))
    assert (r.status, r.message) == (
        Status.PASS,
        'The job (cpu 130, memory 4Gi, nvidia.com/gpu 32) fits ClusterQueue "gpu-cq" now',
    )


async def test_capacity_borrowing_from_cohort_without_limit() -> None:
    small = _h100_groups({"nominalQuota": "16"})
    other = _cq(
        "other-cq",
        groups=[
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "h100",
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "32", "lendingLimit": "16"}],
                    }
                ],
            }
        ],
        cohortName="org",
    )
    view = _view(
        ("localqueues", _lq()), ("clusterqueues", _cq(groups=small, cohortName="org")), ("clusterqueues", other)
    )
    r = await run_check(KueueCapacity(), _tj(), view)
    assert r.status is Status.PASS
    view = _view(("localqueues", _lq()), ("clusterqueues", _cq(groups=small)))  # no cohort: no borrowing
    r = await run_check(KueueCapacity(), _tj(), view)
    assert r.status is Status.FAIL and 'can provide at most 16 (flavor "h100": nominalQuota 16)' in r.message


async def test_capacity_must_wait() -> None:
    usage = {
        **ACTIVE,
        "flavorsReservation": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "24"}]}],
    }
    r = await run_check(KueueCapacity(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq(status=usage))))
    assert (r.status, r.message) == (
        Status.WARN,
        'TrainJob "llama-ft" will wait in ClusterQueue "gpu-cq": it needs nvidia.com/gpu 32, 8 free now (flavor "h100": '
        "0 of 32 in use and 24 reserved), and 0 workloads are pending ahead of it (ClusterQueue status.pendingWorkloads, "
        'every priority: visibility.kueue.x-k8s.io/v1beta2 is not served); ClusterQueue "gpu-cq" is in no cohort: it '
        "cannot borrow; it preempts nothing (withinClusterQueue Never). Fix: nothing to fix; to start sooner, ask for "
        "at most 8 nvidia.com/gpu (ClusterQueue status as watched 1s ago).",
    )


async def test_capacity_uncovered_resource() -> None:
    groups = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": "default",
                    "resources": [{"name": "cpu", "nominalQuota": "1000"}, {"name": "memory", "nominalQuota": "4Ti"}],
                }
            ],
        }
    ]
    r = await run_check(KueueCapacity(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq(groups=groups))))
    assert (r.status, r.message) == (
        Status.FAIL,
        'ClusterQueue "gpu-cq" has no quota for nvidia.com/gpu, which the job requests, so Kueue never admits it. '
        'Fix: add nvidia.com/gpu to a resourceGroup of ClusterQueue "gpu-cq", or use another queue.',
    )


async def test_capacity_per_podset_must_fit_one_flavor() -> None:
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [
                {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "10"}]},
                {"name": "b", "resources": [{"name": "cpu", "nominalQuota": "10"}]},
            ],
        }
    ]
    wl = _tj(groups=[PodGroup("node", 3, pod(container("node", {"cpu": "5"})))])
    r = await run_check(KueueCapacity(), wl, _view(("localqueues", _lq()), ("clusterqueues", _cq(groups=groups))))
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'The node pods need cpu 15 in one flavor but no flavor of ClusterQueue "gpu-cq" holds more than 10 '
        '(flavor "a": nominalQuota 10; flavor "b": nominalQuota 10), so Kueue would never admit it.'
    )


# --- Kueue Capacity over the cohort tree ---
# The table below is Kueue v0.17.0's own TestAvailable (pkg/cache/scheduler/resource_test.go),
# quantities in cpu cores: (name, parent, nominalQuota, borrowingLimit, lendingLimit).


def _red(nominal: str, borrowing: str | None = None, lending: str | None = None) -> list:
    q = {"name": "cpu", "nominalQuota": nominal}
    if borrowing is not None:
        q["borrowingLimit"] = borrowing
    if lending is not None:
        q["lendingLimit"] = lending
    return [{"coveredResources": ["cpu"], "flavors": [{"name": "red", "resources": [q]}]}]


def _tree_cq(name: str, cohort: str, quota: tuple, used: str | None = None) -> dict:
    status = {**ACTIVE}
    if used is not None:
        status["flavorsReservation"] = [{"name": "red", "resources": [{"name": "cpu", "total": used}]}]
    return _cq(name, groups=_red(*quota), status=status, **({"cohortName": cohort} if cohort else {}))


def _cohort(name: str, parent: str = "", quota: tuple | None = None) -> dict:
    spec: dict = {}
    if parent:
        spec["parentName"] = parent
    if quota is not None:
        spec["resourceGroups"] = _red(*quota)
    return {"metadata": meta(name), "spec": spec}


UPSTREAM_TREES = {
    # name: (ClusterQueues (name, cohort, quota, usage), Cohorts, {cq: (potential, available)})
    "cq borrows from cohort": (
        [("cq1", "cohort", ("10",), "11")],
        [_cohort("cohort", quota=("10",))],
        {"cq1": ("20", "9")},
    ),
    "cq oversubscription spills into cohort": (
        [("cq1", "cohort", ("10",), "31"), ("cq2", "cohort", ("10", "0", "0"), None)],
        [_cohort("cohort", quota=("10",))],
        {"cq1": ("20", "0"), "cq2": ("10", "0")},
    ),
    "lending and borrowing limits respected": (
        [
            ("cq1", "cohort", ("10",), "20"),
            ("cq2", "cohort", ("10", "2"), "10"),
            ("cq3", "cohort", ("10", None, "5"), "6"),
        ],
        [_cohort("cohort", quota=("10",))],
        {"cq1": ("35", "4"), "cq2": ("12", "2"), "cq3": ("40", "4")},
    ),
    "hierarchical cohort": (
        [("cq1", "left", ("10",), "10"), ("cq2", "right", ("10", None, "0"), "5")],
        [_cohort("root"), _cohort("left", "root", ("10",)), _cohort("right", "root", ("10",))],
        {"cq1": ("30", "20"), "cq2": ("40", "25")},
    ),
    "hierarchical cohort respects borrowing limit": (
        [
            ("left-cq1", "left", ("10",), None),
            ("left-cq2", "left", ("10", "5"), None),
            ("right-cq", "right", ("10",), None),
        ],
        [_cohort("root"), _cohort("left", "root", ("10", "5")), _cohort("right", "root", ("10",))],
        {"left-cq1": ("35", "35"), "left-cq2": ("15", "15"), "right-cq": ("50", "50")},
    ),
    "hierarchical cohort respects lending limit": (
        [
            ("left-cq1", "left", ("10", None, "5"), None),
            ("left-cq2", "left", ("10",), None),
            ("right-cq", "right", ("0",), None),
            ("root-cq", "root", ("0",), None),
        ],
        [_cohort("root"), _cohort("left", "root", ("0", None, "5")), _cohort("right", "root", ("0",))],
        {"left-cq1": ("20", "20"), "left-cq2": ("15", "15"), "right-cq": ("5", "5"), "root-cq": ("5", "5")},
    ),
    "base cqs (no cohort)": (
        [("cq1", "", ("0",), "1"), ("cq2", "", ("5",), "2.5")],
        [],
        {"cq1": ("0", "0"), "cq2": ("5", "2.5")},
    ),
}


@pytest.mark.parametrize("case", sorted(UPSTREAM_TREES))
def test_cohort_tree_matches_kueues_own_test_table(case: str) -> None:
    from decimal import Decimal

    from webhook.models.kueue.cohort import CohortTree

    cq_rows, cohorts, want = UPSTREAM_TREES[case]
    cqs = [_tree_cq(*row) for row in cq_rows]
    for cq in cqs:
        name = cq["metadata"]["name"]
        tree = CohortTree(cq, cqs, cohorts)
        got = (tree.potential_available(("red", "cpu")), max(Decimal(0), tree.available(("red", "cpu"))))
        assert got == (Decimal(want[name][0]), Decimal(want[name][1])), name
        assert tree.issues == []


def _gpu_job() -> object:
    return _tj(groups=[PodGroup("node", 2, pod(container("node", {"cpu": "4"})))])  # cpu 8 in all


def _tree_view(*objs: tuple[str, dict], **kw) -> FakeView:
    return _view(("localqueues", _lq()), *objs, **kw)


async def test_capacity_fits_only_by_borrowing_a_cohorts_own_nominal_quota() -> None:
    """A Cohort object's own nominalQuota is shared by its subtree (apis/kueue/v1beta2/cohort_types.go)."""
    view = _tree_view(("clusterqueues", _tree_cq("gpu-cq", "team", ("2",))), ("cohorts", _cohort("team", quota=("6",))))
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert (r.status, r.message) == (Status.PASS, 'The job (cpu 8) fits ClusterQueue "gpu-cq" now')


async def test_capacity_nested_cohorts_and_a_parents_borrowing_limit() -> None:
    cohorts = [_cohort("org", quota=("100",)), _cohort("team", "org", ("2", "3"))]
    view = _tree_view(("clusterqueues", _tree_cq("gpu-cq", "team", ("2",))), *(("cohorts", c) for c in cohorts))
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        'The job needs cpu 8 but ClusterQueue "gpu-cq" can provide at most 7 (flavor "red": nominalQuota 2 + 5 borrowable '
        'in cohort "team" → "org"), so Kueue would never admit it. Fix: reduce the job\'s pods or requests, or raise '
        'nominalQuota/borrowingLimit for cpu in ClusterQueue "gpu-cq" or the quota cohort "team" → "org" can lend.',
    )


async def test_capacity_borrowing_limit_without_lenders_is_not_capacity() -> None:
    """potentialAvailable: a borrowingLimit only caps what the cohort holds; alone in its cohort, nothing to borrow."""
    groups = _h100_groups({"nominalQuota": "8", "borrowingLimit": "8"})
    r = await run_check(
        KueueCapacity(), _tj(), _view(("localqueues", _lq()), ("clusterqueues", _cq(groups=groups, cohortName="org")))
    )
    assert (r.status, r.message) == (
        Status.FAIL,
        'The job needs nvidia.com/gpu 32 but ClusterQueue "gpu-cq" can provide at most 8 (flavor "h100": nominalQuota 8 + 0 '
        'borrowable in cohort "org"), so Kueue would never admit it. Fix: reduce the job\'s pods or requests, or raise '
        'nominalQuota/borrowingLimit for nvidia.com/gpu in ClusterQueue "gpu-cq" or the quota cohort "org" can lend.',
    )


async def test_capacity_unreadable_cohorts_warn_never_deny() -> None:
    view = _tree_view(("clusterqueues", _tree_cq("gpu-cq", "team", ("2",))), cache_ages={"cohorts": None})
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'The job needs cpu 8 but ClusterQueue "gpu-cq" can provide at most 2 (flavor "red": nominalQuota 2 + 0 borrowable in '
        'cohort "team") as far as its cohort tree can be read (the Cohort objects of cohort "team" cannot be read (cached '
        "cohorts have not synced)), so Kueue may never admit it. Fix: correct the cohort tree, or reduce the job's pods or "
        'requests, or raise nominalQuota/borrowingLimit for cpu in ClusterQueue "gpu-cq" or the quota cohort "team" can lend.',
    )
    # a ClusterQueue in no cohort needs no Cohort: still a denial
    view = _tree_view(("clusterqueues", _tree_cq("gpu-cq", "", ("2",))), cache_ages={"cohorts": None})
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert r.status is Status.FAIL and r.caveats == []


async def test_capacity_parent_that_does_not_exist_warns() -> None:
    view = _tree_view(
        ("clusterqueues", _tree_cq("gpu-cq", "team", ("2",))), ("cohorts", _cohort("team", "org", ("1",)))
    )
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert r.status is Status.WARN
    assert r.message.startswith(
        'The job needs cpu 8 but ClusterQueue "gpu-cq" can provide at most 3 (flavor "red": nominalQuota 2 + 1 borrowable in '
        'cohort "team" → "org") as far as its cohort tree can be read (Cohort "org" (parentName of Cohort "team") does not '
        "exist), so Kueue may never admit it."
    )
    assert r.details == ['Cohort "org" (parentName of Cohort "team") does not exist']


async def test_capacity_cohort_cycle_warns() -> None:
    cohorts = [_cohort("a", "b", ("10",)), _cohort("b", "a", ("10",))]
    view = _tree_view(("clusterqueues", _tree_cq("gpu-cq", "a", ("2",))), *(("cohorts", c) for c in cohorts))
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert r.status is Status.WARN
    assert 'cohort "a" is part of a cycle of parentName references, so Kueue deactivates it' in r.message


async def test_capacity_a_fitting_job_from_an_unreadable_tree_says_so() -> None:
    view = _tree_view(("clusterqueues", _tree_cq("gpu-cq", "team", ("20",))), cache_ages={"cohorts": None})
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert (r.status, r.message) == (
        Status.PASS,
        'The job (cpu 8) fits ClusterQueue "gpu-cq" now (as far as its cohort tree can be read: the Cohort objects of '
        'cohort "team" cannot be read (cached cohorts have not synced))',
    )


async def test_capacity_waits_for_what_the_cohort_has_lent_out() -> None:
    cqs = [_tree_cq("gpu-cq", "team", ("2",)), _tree_cq("other", "team", ("0",), "5")]
    view = _tree_view(*(("clusterqueues", c) for c in cqs), ("cohorts", _cohort("team", quota=("6",))))
    r = await run_check(KueueCapacity(), _gpu_job(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'TrainJob "llama-ft" will wait in ClusterQueue "gpu-cq": it needs cpu 8, 3 free now (flavor "red": 0 of 2 in use '
        "and 0 reserved), and 0 workloads are pending ahead of it (ClusterQueue status.pendingWorkloads, every priority: "
        'visibility.kueue.x-k8s.io/v1beta2 is not served); borrowing from cohort "team" leaves 3 free, not enough; it '
        "preempts nothing (withinClusterQueue Never, reclaimWithinCohort Never). Fix: nothing to fix; to start sooner, "
        "ask for at most 3 cpu (ClusterQueue status as watched 1s ago).",
    )


def test_cohorts_are_cached_and_optional_for_kueue_capacity() -> None:
    """Watched like ClusterQueues; optional, so missing RBAC lowers only "never fits" to a warning."""
    from webhook.checks.base import Permission
    from webhook.cluster.cache import SPECS_BY_RESOURCE
    from webhook.cluster.capabilities import required_permissions

    spec = SPECS_BY_RESOURCE["cohorts"]
    assert (spec.group_version, spec.namespaced) == ("kueue.x-k8s.io/v1beta2", False)
    wanted = {
        Permission("list", "cohorts", "kueue.x-k8s.io"),
        Permission("watch", "cohorts", "kueue.x-k8s.io"),
        Permission("get", "clusterqueues", "visibility.kueue.x-k8s.io", "pendingworkloads"),
    }
    assert set(KueueCapacity.optional_permissions) == wanted
    assert not wanted & set(KueueCapacity.permissions)
    assert wanted <= set(required_permissions(all_checks()))
