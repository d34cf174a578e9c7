"""Dry Run: JobSet + one Pod per group POSTed with dryRun=All; rejection text becomes the message."""

from __future__ import annotations

from webhook.checks.dryrun import DryRun, fix_for, pod_for
from webhook.cluster.view import ApiError
from webhook.results import Status
from webhook.workloads.base import PodGroup

from tests.fakeview import FakeView, container, pod, run_check, run_check_all, workload

PSA = (
    'pods "llama-ft-node-0-0-dryrn" is forbidden: violates PodSecurity "restricted:latest": '
    'allowPrivilegeEscalation != false (container "node" must set securityContext.allowPrivilegeEscalation=false)'
)


def _wl() -> object:
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "llama-ft", "namespace": "team-a"},
          "spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]}}
    groups = [
        PodGroup("model-initializer", 1, pod(container("m")), pod_metadata={"labels": {"app": "init"}}),
        PodGroup("node", 4, pod(container("node")), pod_metadata={"labels": {"app": "train"}, "annotations": {"a": "b"}}),
    ]
    return workload(groups, derived={"jobSet": js})


def test_pod_for_builds_a_representative_pod() -> None:
    wl = _wl()
    p = pod_for(wl, wl.pod_groups[1])
    assert p == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llama-ft-node-0-0-dryrn",
            "namespace": "team-a",
            "labels": {"app": "train", "jobset.sigs.k8s.io/jobset-name": "llama-ft", "jobset.sigs.k8s.io/replicatedjob-name": "node"},
            "annotations": {"a": "b"},
        },
        "spec": wl.pod_groups[1].pod_spec,
    }


async def test_all_accepted() -> None:
    view = FakeView()
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.PASS, 'The apiserver accepts (dryRun=All) JobSet "llama-ft" and a pod of each group (model-initializer, node)'
    )
    assert [(av, kind, ns, body["metadata"]["name"]) for av, kind, ns, body in view.dry_runs] == [
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "llama-ft"),
        ("v1", "Pod", "team-a", "llama-ft-model-initializer-0-0-dryrn"),
        ("v1", "Pod", "team-a", "llama-ft-node-0-0-dryrn"),
    ]


async def test_pod_security_rejection_becomes_the_message() -> None:
    view = FakeView(dry_run_errors={("Pod", "llama-ft-node-0-0-dryrn"): ApiError(403, PSA, "Forbidden")})
    r = await run_check(DryRun(), _wl(), view)
    assert r.status is Status.FAIL
    assert r.message == (
        f"Pod for node rejected by the apiserver: {PSA}. Fix: make the pod spec meet the Pod Security level of namespace "
        '"team-a" (label pod-security.kubernetes.io/enforce), or ask an admin to relax it.'
    )


async def test_jobset_rejection_by_webhook() -> None:
    text = 'admission webhook "validation.gatekeeper.sh" denied the request: [require-team-label] missing label team'
    view = FakeView(dry_run_errors={("JobSet", "llama-ft"): ApiError(400, text)})
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        f'JobSet "llama-ft" rejected by the apiserver: {text}. Fix: satisfy the policy of admission webhook '
        '"validation.gatekeeper.sh", or ask its owner for an exception.',
    )


async def test_rbac_denial_and_transient_warn_without_hiding_rejections() -> None:
    rbac = ApiError(403, 'pods is forbidden: User "system:serviceaccount:pw:pw" cannot create resource "pods" in API group "" in the namespace "team-a"')
    view = FakeView(dry_run_errors={("Pod", "*"): rbac})
    r = await run_check(DryRun(), _wl(), view)
    assert r.status is Status.WARN
    assert r.message == (
        "Cannot verify the Pod for model-initializer (not permitted to create pods with dryRun); "
        "Cannot verify the Pod for node (not permitted to create pods with dryRun)"
    )
    view = FakeView(dry_run_errors={("Pod", "*"): ApiError(503, "etcd timeout"), ("JobSet", "llama-ft"): ApiError(422, 'JobSet.jobset.x-k8s.io "llama-ft" is invalid: spec.replicatedJobs[0].name: Invalid value')})
    fail, warn = await run_check_all(DryRun(), _wl(), view)
    assert fail.status is Status.FAIL
    assert fail.message.startswith('JobSet "llama-ft" rejected by the apiserver: JobSet.jobset.x-k8s.io "llama-ft" is invalid')
    assert (warn.status, warn.message) == (
        Status.WARN,
        "Could not dry-run the Pod for model-initializer (transient error): etcd timeout; "
        "Could not dry-run the Pod for node (transient error): etcd timeout",
    )


async def test_existing_jobset_is_not_a_rejection() -> None:
    view = FakeView(dry_run_errors={("JobSet", "llama-ft"): ApiError(409, 'jobsets.jobset.x-k8s.io "llama-ft" already exists')})
    r = await run_check(DryRun(), _wl(), view)
    assert r.status is Status.PASS
    assert r.message == (
        'The apiserver accepts (dryRun=All) JobSet "llama-ft" (already exists) and a pod of each group (model-initializer, node)'
    )


def test_fix_for() -> None:
    assert fix_for("maximum cpu usage per Container is 2, but limit is 4", "ns").startswith("keep the containers' resources within the LimitRange")
    assert fix_for('pods "x" is forbidden: exceeded quota: q, requested: pods=1', "ns") == "see Resource Quotas (kubectl describe resourcequota -n ns)"
    assert fix_for('error looking up service account ns/trainer: serviceaccount "trainer" not found', "ns") == "create the ServiceAccount (see Service Account)"
    assert fix_for("something else", "ns") == "correct the spec as the message says"
