"""Dry Run: JobSet + one Pod per group POSTed with dryRun=All; rejection text becomes the message."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from tests.fakeview import FakeView, container, pod, run_check, run_check_all, workload
from webhook.checks.dryrun import DryRun, _same_content, fix_for
from webhook.cluster.view import ApiError
from webhook.kube import placeholder_uid
from webhook.models.dryrun_probe import job_for, jobset_for, pod_for
from webhook.results import Status
from webhook.workloads.base import PodGroup

PSA = (
    'pods "llama-ft-node-0-0-dryrn" is forbidden: violates PodSecurity "restricted:latest": '
    'allowPrivilegeEscalation != false (container "node" must set securityContext.allowPrivilegeEscalation=false)'
)


def _wl() -> object:
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llama-ft", "namespace": "team-a"},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]},
    }
    groups = [
        PodGroup("model-initializer", 1, pod(container("m")), pod_metadata={"labels": {"app": "init"}}),
        PodGroup(
            "node", 4, pod(container("node")), pod_metadata={"labels": {"app": "train"}, "annotations": {"a": "b"}}
        ),
    ]
    return workload(groups, derived={"jobSet": js})


JOB_UID = placeholder_uid("Job", "team-a", "llama-ft-node-0")
JS_KEYS = {
    "jobset.sigs.k8s.io/jobset-name": "llama-ft",
    "jobset.sigs.k8s.io/jobset-uid": placeholder_uid("JobSet", "team-a", "llama-ft"),
    "jobset.sigs.k8s.io/replicatedjob-name": "node",
    "jobset.sigs.k8s.io/restart-attempt": "0",
    "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
    "jobset.sigs.k8s.io/global-replicas": "1",
    "jobset.sigs.k8s.io/job-index": "0",
    "jobset.sigs.k8s.io/job-key": hashlib.sha1(b"team-a/llama-ft-node-0").hexdigest(),
    "jobset.sigs.k8s.io/job-global-index": "0",
    "jobset.sigs.k8s.io/group-name": "default",
    "jobset.sigs.k8s.io/group-replicas": "1",
    "jobset.sigs.k8s.io/job-group-index": "0",
}


def test_pod_for_builds_the_pod_the_job_controller_creates() -> None:
    """JobSet constructJob + labelAndAnnotateObject, Job generateSelector, Job controller manageJob (index 0)."""
    wl = _wl()
    p = pod_for(wl, wl.pod_groups[1])
    index_env = {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}},
    }
    assert p == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llama-ft-node-0-0-dryrn",
            "generateName": "llama-ft-node-0-0-",
            "namespace": "team-a",
            "labels": {
                "app": "train",
                **JS_KEYS,
                "job-name": "llama-ft-node-0",
                "batch.kubernetes.io/job-name": "llama-ft-node-0",
                "controller-uid": JOB_UID,
                "batch.kubernetes.io/controller-uid": JOB_UID,
                "batch.kubernetes.io/job-completion-index": "0",
            },
            "annotations": {"a": "b", **JS_KEYS, "batch.kubernetes.io/job-completion-index": "0"},
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "llama-ft-node-0", "uid": JOB_UID, "controller": True}
            ],
        },
        "spec": {
            "containers": [{"name": "node", "image": "ghcr.io/acme/x:1", "env": [index_env]}],
            "subdomain": "llama-ft",
            "hostname": "llama-ft-node-0-0",
            "restartPolicy": "OnFailure",
        },
    }
    assert "env" not in wl.pod_groups[1].pod_spec["containers"][0]  # the group's spec is not touched


def test_job_for_builds_the_job_jobset_creates() -> None:
    """JobSet v0.12.0 constructJob: the Job template's metadata and spec, labelAndAnnotateObject on
    the Job and its pod template, completionMode Indexed, suspend as the JobSet, owned by the JobSet."""
    wl = _wl()
    wl.derived["jobSet"]["spec"]["replicatedJobs"][0]["template"] = {
        "metadata": {"labels": {"tier": "gold"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"containers": []}}},
    }
    j = job_for(wl, wl.pod_groups[1])
    assert j == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "llama-ft-node-0",
            "namespace": "team-a",
            "labels": {"tier": "gold", **JS_KEYS},
            "annotations": JS_KEYS,
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "llama-ft",
                    "uid": placeholder_uid("JobSet", "team-a", "llama-ft"),
                    "controller": True,
                }
            ],
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "completionMode": "Indexed",
            "suspend": False,
            "template": {
                "metadata": {"labels": {"app": "train", **JS_KEYS}, "annotations": {"a": "b", **JS_KEYS}},
                "spec": {
                    "containers": [{"name": "node", "image": "ghcr.io/acme/x:1"}],
                    "subdomain": "llama-ft",
                    "restartPolicy": "OnFailure",
                },
            },
        },
    }
    assert job_for(wl, wl.pod_groups[0]) is None  # model-initializer is no replicatedJob of this JobSet


def test_pod_for_follows_the_jobset_spec() -> None:
    js = {
        "metadata": {
            "name": "big",
            "annotations": {
                "alpha.jobset.sigs.k8s.io/exclusive-topology": "rack",
                "alpha.jobset.sigs.k8s.io/node-selector": "true",
            },
        },
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": "net"},
            "coordinator": {"replicatedJob": "driver", "jobIndex": 0, "podIndex": 0},
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "groupName": "a"},
                {
                    "name": "workers",
                    "replicas": 3,
                    "groupName": "b",
                    "template": {"spec": {"completionMode": "NonIndexed", "manualSelector": True}},
                },
                {"name": "eval", "replicas": 2, "groupName": "b", "template": {"spec": {"backoffLimitPerIndex": 1}}},
            ],
        },
    }
    spec = pod(container("w", env=[{"name": "JOB_COMPLETION_INDEX", "value": "7"}]), restartPolicy="Never")
    groups = [PodGroup("workers", 3, spec), PodGroup("eval", 2, pod(container("e")))]
    wl = workload(groups, derived={"jobSet": js})
    w = pod_for(wl, groups[0])
    assert w["metadata"]["generateName"] == "big-workers-0-"  # NonIndexed: getPodsPrefix
    assert "batch.kubernetes.io/job-completion-index" not in w["metadata"]["labels"]
    assert "hostname" not in w["spec"] and w["spec"]["subdomain"] == "net"
    assert "job-name" not in w["metadata"]["labels"]  # manualSelector: no generated selector labels
    assert w["spec"]["restartPolicy"] == "Never"
    assert w["metadata"]["labels"]["jobset.sigs.k8s.io/coordinator"] == "big-driver-0-0.net"
    assert w["spec"]["nodeSelector"] == {"alpha.jobset.sigs.k8s.io/namespaced-job": "team-a_big-workers-0"}
    assert w["spec"]["tolerations"] == [
        {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "operator": "Exists", "effect": "NoSchedule"}
    ]
    e = pod_for(wl, groups[1])
    labels = e["metadata"]["labels"]
    assert (labels["jobset.sigs.k8s.io/global-replicas"], labels["jobset.sigs.k8s.io/job-global-index"]) == ("6", "4")
    assert (labels["jobset.sigs.k8s.io/group-replicas"], labels["jobset.sigs.k8s.io/job-group-index"]) == ("5", "3")
    assert e["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"] == "0"
    assert e["spec"]["hostname"] == "big-eval-0-0"
    assert e["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == "rack"
    # the user's own JOB_COMPLETION_INDEX is kept, as addCompletionIndexEnvVariable does
    assert pod_for(wl, PodGroup("workers", 1, spec))["spec"]["containers"][0]["env"] == [
        {"name": "JOB_COMPLETION_INDEX", "value": "7"}
    ]
    # no DNS hostnames: no subdomain
    js["spec"]["network"] = {"enableDNSHostnames": False}
    assert "subdomain" not in pod_for(wl, groups[1])["spec"]


def test_pod_for_long_names_are_cut_as_the_job_controller_cuts_them() -> None:
    name = "x" * 50
    wl = workload([PodGroup("node", 1, pod(container("c")))], name=name)
    p = pod_for(wl, wl.pod_groups[0])
    # Job "<50 x>-node-0" + "-0-" is 60 characters: cut to 58 keeping the index (podGenerateNameWithIndex)
    assert p["metadata"]["generateName"] == "x" * 50 + "-node" + "-0-"
    assert p["metadata"]["name"] == "x" * 50 + "-node-0-dryrn"  # 63, the longest generated name


def test_the_probe_objects_leave_the_workload_as_it_was() -> None:
    """pod_for and jobset_for copy what they change (the spec, containers, metadata), not the whole job."""
    spec = pod(container("node", env=[{"name": "A", "value": "1"}]), container("side"))
    spec["serviceAccountName"] = "trainer"
    spec["initContainers"] = [container("init")]
    wl = workload([PodGroup("node", 2, spec)], managed_service_accounts={"trainer"})
    wl.derived["jobSet"] = {"metadata": {"name": "llama-ft", "resourceVersion": "7", "uid": "u"}, "spec": {}}
    before = copy.deepcopy((wl.pod_groups[0].pod_spec, wl.derived))
    p = pod_for(wl, wl.pod_groups[0])
    body = jobset_for(wl)
    assert (wl.pod_groups[0].pod_spec, wl.derived) == before
    assert "serviceAccountName" not in p["spec"] and p["spec"]["hostname"] == "llama-ft-node-0-0"
    assert [e["name"] for e in p["spec"]["containers"][0]["env"]] == ["A", "JOB_COMPLETION_INDEX"]
    assert body is not None and "resourceVersion" not in body["metadata"] and body["metadata"]["namespace"] == "team-a"


def test_jobset_for_is_owned_by_the_job() -> None:
    body = jobset_for(_wl())
    assert body is not None
    assert body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "llama-ft",
            "uid": placeholder_uid("TrainJob", "team-a", "llama-ft"),
            "controller": True,
        }
    ]
    js = {"metadata": {"name": "aiperf-bench"}, "spec": {"replicatedJobs": []}}
    aiperf = workload([], kind="AIPerfJob", name="bench", derived={"jobSet": js})
    aiperf.api_version = "aiperf.nvidia.com/v1alpha1"
    body = jobset_for(aiperf)
    assert body is not None and body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "aiperf.nvidia.com/v1alpha1",
            "kind": "AIPerfJob",
            "name": "bench",
            "uid": placeholder_uid("AIPerfJob", "team-a", "bench"),
            "controller": True,
        }
    ]


async def test_all_accepted() -> None:
    view = FakeView()
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "llama-ft", a Job of each replicatedJob (node) and a pod of each group '
        "(model-initializer, node)",
    )
    assert [(av, kind, ns, body["metadata"]["name"]) for av, kind, ns, body in view.dry_runs] == [
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "team-a", "llama-ft"),
        ("v1", "Pod", "team-a", "llama-ft-model-initializer-0-0-dryrn"),
        ("v1", "Pod", "team-a", "llama-ft-node-0-0-dryrn"),
        ("batch/v1", "Job", "team-a", "llama-ft-node-0"),  # model-initializer is no replicatedJob of this JobSet
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
    rbac = ApiError(
        403,
        'pods is forbidden: User "system:serviceaccount:pw:pw" cannot create resource "pods" in API group "" in the namespace "team-a"',
    )
    view = FakeView(dry_run_errors={("Pod", "*"): rbac})
    r = await run_check(DryRun(), _wl(), view)
    assert r.status is Status.WARN
    assert r.message == (
        "Cannot verify the Pod for model-initializer (not permitted to create pods with dryRun); "
        "Cannot verify the Pod for node (not permitted to create pods with dryRun)"
    )
    view = FakeView(
        dry_run_errors={
            ("Pod", "*"): ApiError(503, "etcd timeout"),
            ("JobSet", "llama-ft"): ApiError(
                422, 'JobSet.jobset.x-k8s.io "llama-ft" is invalid: spec.replicatedJobs[0].name: Invalid value'
            ),
        }
    )
    fail, warn = await run_check_all(DryRun(), _wl(), view)
    assert fail.status is Status.FAIL
    assert fail.message.startswith(
        'JobSet "llama-ft" rejected by the apiserver: JobSet.jobset.x-k8s.io "llama-ft" is invalid'
    )
    assert (warn.status, warn.message) == (
        Status.WARN,
        "Could not dry-run the Pod for model-initializer (transient error): etcd timeout; "
        "Could not dry-run the Pod for node (transient error): etcd timeout",
    )


async def test_existing_jobset_is_not_a_rejection() -> None:
    view = FakeView(
        dry_run_errors={("JobSet", "llama-ft"): ApiError(409, 'jobsets.jobset.x-k8s.io "llama-ft" already exists')}
    )
    r = await run_check(DryRun(), _wl(), view)
    assert r.status is Status.PASS
    assert r.message == (
        'The apiserver accepts (dryRun=All) JobSet "llama-ft" (already exists), a Job of each replicatedJob (node) and a pod '
        "of each group (model-initializer, node)"
    )


async def test_rejections_of_the_probe_itself_only_warn() -> None:
    """The owner Job does not exist yet and its uid is a placeholder: a policy refusing that is not refusing the job."""
    owner = 'admission webhook "owners.example.com" denied the request: ownerReference Job "llama-ft-node-0" must exist'
    absent = 'jobs.batch "llama-ft-model-initializer-0" not found'
    view = FakeView(
        dry_run_errors={
            ("Pod", "llama-ft-node-0-0-dryrn"): ApiError(400, owner),
            ("Pod", "llama-ft-model-initializer-0-0-dryrn"): ApiError(404, absent, "NotFound"),
        }
    )
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        "Cannot verify the Pod for model-initializer: the rejection concerns only the dry-run probe (its ownerReference to "
        'Job "llama-ft-model-initializer-0", which exists only once the job runs): jobs.batch "llama-ft-model-initializer-0" not found; '
        "Cannot verify the Pod for node: the rejection concerns only the dry-run probe (its ownerReference to "
        f'Job "llama-ft-node-0", which exists only once the job runs): {owner}',
    )
    uid = placeholder_uid("TrainJob", "team-a", "llama-ft")
    view = FakeView(
        dry_run_errors={
            ("JobSet", "llama-ft"): ApiError(403, f"owner uid {uid} is unknown"),
            ("Pod", "*"): ApiError(409, 'pods "llama-ft-node-0-0-dryrn" already exists', "AlreadyExists"),
        }
    )
    r = await run_check(DryRun(), _wl(), view)
    assert r.status is Status.WARN
    assert r.details == [
        'Cannot verify the JobSet "llama-ft": the rejection concerns only the dry-run probe (its ownerReference to TrainJob '
        f'"llama-ft", which exists only once the job runs): owner uid {uid} is unknown',
        "Cannot verify the Pod for model-initializer: the rejection concerns only the dry-run probe "
        '(its name "llama-ft-model-initializer-0-0-dryrn" is taken): pods "llama-ft-node-0-0-dryrn" already exists',
        "Cannot verify the Pod for node: the rejection concerns only the dry-run probe "
        '(its name "llama-ft-node-0-0-dryrn" is taken): pods "llama-ft-node-0-0-dryrn" already exists',
    ]


async def test_a_job_name_taken_is_about_the_probe() -> None:
    """A stored, suspended TrainJob judged again (the audit controller): its JobSet already made its Jobs."""
    view = FakeView(
        dry_run_errors={("Job", "*"): ApiError(409, 'jobs.batch "llama-ft-node-0" already exists', "AlreadyExists")}
    )
    results = await run_check_all(DryRun(), _wl(), view)
    assert [r.status for r in results] == [Status.WARN]
    assert (
        'Cannot verify the Job for node: the rejection concerns only the dry-run probe (its name "llama-ft-node-0" is taken): jobs.batch "llama-ft-node-0" already exists'
        in results[0].details
    )


async def test_owner_references_permission_enforcement_is_about_the_probe() -> None:
    """The OwnerReferencesPermissionEnforcement plugin judges the webhook's RBAC, not the job."""
    text = (
        'pods "llama-ft-node-0-0-dryrn" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a '
        "resource you can't set finalizers on: , <nil>"
    )
    view = FakeView(dry_run_errors={("Pod", "llama-ft-node-0-0-dryrn"): ApiError(403, text, "Forbidden")})
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        "Cannot verify the Pod for node: the rejection concerns only the dry-run probe (its ownerReference to "
        f'Job "llama-ft-node-0", which exists only once the job runs): {text}',
    )


async def test_a_policy_on_owner_references_themselves_still_denies() -> None:
    text = "ValidatingAdmissionPolicy 'owned-by-replicaset' with binding 'b' denied request: pods need a ReplicaSet ownerReference"
    view = FakeView(dry_run_errors={("Pod", "llama-ft-node-0-0-dryrn"): ApiError(422, text)})
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        f"Pod for node rejected by the apiserver: {text}. Fix: satisfy the ValidatingAdmissionPolicy named in the message.",
    )


async def test_a_missing_object_the_job_needs_still_denies() -> None:
    """`not found` about anything but the probe's owners is the job's problem."""
    text = 'pods "llama-ft-node-0-0-dryrn" is forbidden: error looking up service account team-a/trainer: serviceaccount "trainer" not found'
    view = FakeView(dry_run_errors={("Pod", "llama-ft-node-0-0-dryrn"): ApiError(403, text)})
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        f"Pod for node rejected by the apiserver: {text}. Fix: create the ServiceAccount (see Service Account).",
    )


def test_fix_for() -> None:
    assert fix_for("maximum cpu usage per Container is 2, but limit is 4", "ns").startswith(
        "keep the containers' resources within the LimitRange"
    )
    assert (
        fix_for('pods "x" is forbidden: exceeded quota: q, requested: pods=1', "ns")
        == "see Resource Quotas (kubectl describe resourcequota -n ns)"
    )
    assert (
        fix_for('error looking up service account ns/trainer: serviceaccount "trainer" not found', "ns")
        == "create the ServiceAccount (see Service Account)"
    )
    assert fix_for("something else", "ns") == "correct the spec as the message says"


# ---------------------------------------------------------------- one Pod per distinct pod template


def _job_template(pod_spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {"metadata": {"labels": dict(labels or {"app": "train"})}, "spec": pod_spec},
        }
    }


def _twins(**second: Any) -> Any:
    """A JobSet whose replicatedJobs `launcher`, `worker-a` and `worker-bbb` hold the same Job template
    unless `second` changes worker-bbb's (labels=..., pod=...)."""
    same = pod(container("node", {"cpu": "1"}))
    rjobs = [
        {"name": "launcher", "replicas": 1, "template": _job_template(pod(container("launcher")))},
        {"name": "worker-a", "replicas": 1, "template": _job_template(copy.deepcopy(same))},
        {
            "name": "worker-bbb",
            "replicas": 3,
            "template": _job_template(second.get("pod", copy.deepcopy(same)), second.get("labels")),
        },
    ]
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llama-ft", "namespace": "team-a"},
        "spec": {"replicatedJobs": rjobs},
    }
    groups = [
        PodGroup(
            r["name"],
            r["replicas"],
            r["template"]["spec"]["template"]["spec"],
            pod_metadata=r["template"]["spec"]["template"]["metadata"],
        )
        for r in rjobs
    ]
    return workload(groups, derived={"jobSet": js})


def _pods(view: FakeView) -> list[str]:
    return [body["metadata"]["name"] for _, kind, _, body in view.dry_runs if kind == "Pod"]


async def test_groups_with_the_same_template_share_one_pod_dry_run() -> None:
    """worker-a and worker-bbb differ only in name and replicas: one Pod, the longer-named group's."""
    view = FakeView()
    r = await run_check(DryRun(), _twins(), view)
    assert _pods(view) == ["llama-ft-launcher-0-0-dryrn", "llama-ft-worker-bbb-0-0-dryrn"]
    # and one Job each: the Jobs differ in the same things only
    assert [b["metadata"]["name"] for _, kind, _, b in view.dry_runs if kind == "Job"] == [
        "llama-ft-launcher-0",
        "llama-ft-worker-bbb-0",
    ]
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "llama-ft", a Job of each replicatedJob (launcher, worker-a, '
        "worker-bbb) and a pod of each group (launcher, worker-a, worker-bbb)",
    )


async def test_a_rejection_of_a_shared_template_names_every_group() -> None:
    view = FakeView(dry_run_errors={("Pod", "llama-ft-worker-bbb-0-0-dryrn"): ApiError(403, PSA)})
    r = await run_check(DryRun(), _twins(), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        f"Pod for worker-a and worker-bbb (same pod template) rejected by the apiserver: {PSA}. Fix: make the pod "
        'spec meet the Pod Security level of namespace "team-a" (label pod-security.kubernetes.io/enforce), or ask '
        "an admin to relax it.",
    )
    view = FakeView(dry_run_errors={("Pod", "*"): ApiError(503, "etcd timeout")})
    (w,) = await run_check_all(DryRun(), _twins(), view)
    assert w.message == (
        "Could not dry-run the Pod for launcher (transient error): etcd timeout; "
        "Could not dry-run the Pod for worker-a and worker-bbb (same pod template) (transient error): etcd timeout"
    )


async def test_groups_whose_templates_differ_in_anything_get_a_pod_each() -> None:
    for second in (
        {"labels": {"app": "other"}},  # pod metadata
        {"pod": pod(container("node", {"cpu": "2"}))},  # a container
        {"pod": pod(container("node", {"cpu": "1"}), hostNetwork=True)},  # a pod field
    ):
        view = FakeView()
        await run_check(DryRun(), _twins(**second), view)
        assert _pods(view) == [
            "llama-ft-launcher-0-0-dryrn",
            "llama-ft-worker-a-0-0-dryrn",
            "llama-ft-worker-bbb-0-0-dryrn",
        ], second


def test_same_content_is_json_content() -> None:
    """Python's == equates true and 1; JSON (and the apiserver) does not."""
    assert _same_content({"a": [1, {"b": "c"}]}, {"a": [1, {"b": "c"}]})
    assert not _same_content({"a": True}, {"a": 1})
    assert not _same_content({"a": 1.0}, {"a": 1})


class KueueView(FakeView):
    """Kueue v0.17.0's mutating webhooks as they answer a dry run: a JobSet or Pod whose controller
    owner does not exist is refused (FindAncestorJobManagedByKueue); without a controller
    reference there is no lookup and the later layers (``later``, by kind and name) judge it."""

    def __init__(self, later: dict[tuple[str, str], ApiError] | None = None) -> None:
        super().__init__()
        self.later = later or {}

    async def dry_run_create(
        self, api_version: str, kind: str, namespace: str, body: dict[str, Any], deadline: Any
    ) -> dict[str, Any] | None:
        await super().dry_run_create(api_version, kind, namespace, body, deadline)
        meta = body["metadata"]
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
        if owner is not None:
            hook = {"JobSet": "mjobset.kb.io", "Job": "mjob.kb.io", "Pod": "mpod.kb.io"}[kind]
            resource = {"Job": "jobs.batch", "JobSet": "jobsets.jobset.x-k8s.io"}.get(owner["kind"], "trainjobs")
            raise ApiError(
                403,
                f'admission webhook "{hook}" denied the request: workload owner not found\n'
                f'{resource} "{owner["name"]}" not found',
            )
        err = self.later.get((kind, meta["name"]))
        if err is not None:
            raise err
        return None


async def test_owner_lookups_of_kueue_are_passed_by_a_twin_without_the_controller_flag() -> None:
    """A good job on a cluster with Kueue: no warning; every later layer judged the twins."""
    view = KueueView()
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.PASS,
        'The apiserver accepts (dryRun=All) JobSet "llama-ft", a Job of each replicatedJob (node) and a pod of each group '
        "(model-initializer, node)",
    )
    assert r.details == [
        f'{subject}: admission webhook "{hook}" looks up its owner, which exists only once the job runs; every later '
        "admission layer accepts its twin without the controller flag of its ownerReference"
        for subject, hook in (
            ('JobSet "llama-ft"', "mjobset.kb.io"),
            ("Pod for model-initializer", "mpod.kb.io"),
            ("Pod for node", "mpod.kb.io"),
            ("Job for node", "mjob.kb.io"),
        )
    ]
    sent = [(kind, body["metadata"]["name"], body["metadata"]["ownerReferences"]) for _, kind, _, body in view.dry_runs]
    assert [(k, n) for k, n, _ in sent] == [
        ("JobSet", "llama-ft"),
        ("Pod", "llama-ft-model-initializer-0-0-dryrn"),
        ("Pod", "llama-ft-node-0-0-dryrn"),
        ("Job", "llama-ft-node-0"),
    ] * 2
    # the twins keep the owner (kind, name, uid), without the flag; nothing else differs
    for (_, first), (_, twin) in zip(
        [(k, b) for _, k, _, b in view.dry_runs[:4]], [(k, b) for _, k, _, b in view.dry_runs[4:]], strict=True
    ):
        assert [o.get("controller") for o in first["metadata"]["ownerReferences"]] == [True]
        assert twin["metadata"]["ownerReferences"] == [
            {k: v for k, v in o.items() if k != "controller"} for o in first["metadata"]["ownerReferences"]
        ]
        assert {**twin, "metadata": {**twin["metadata"], "ownerReferences": None}} == {
            **first,
            "metadata": {**first["metadata"], "ownerReferences": None},
        }


async def test_a_later_layer_refusing_the_twin_denies_with_its_words() -> None:
    vap = (
        "pods \"llama-ft-node-0-0-dryrn\" is forbidden: ValidatingAdmissionPolicy 'no-hostpath' with binding "
        "'no-hostpath' denied request: pods may not mount hostPath volumes"
    )
    view = KueueView(later={("Pod", "llama-ft-node-0-0-dryrn"): ApiError(422, vap, "Invalid")})
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        f"Pod for node rejected by the apiserver: {vap}. Fix: satisfy the ValidatingAdmissionPolicy named in the message.",
    )


async def test_a_twin_refused_for_its_owners_is_cannot_verify_not_a_deny() -> None:
    """A rule on the controller flag the twin lacks: the one thing the twin cannot answer."""
    text = "ValidatingAdmissionPolicy 'owned' with binding 'owned' denied request: a Pod needs a controller"
    view = KueueView(later={("Pod", "llama-ft-node-0-0-dryrn"): ApiError(422, text, "Invalid")})
    r = await run_check(DryRun(), _wl(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify the Pod for node: admission webhook "mpod.kb.io" looks up its owner, which exists only once the '
        f"job runs, and its twin without the controller flag of its ownerReference is refused: {text}",
    )


async def test_a_twin_is_sent_only_for_an_owner_lookup() -> None:
    """Any other rejection is the verdict: no second dry run."""
    view = FakeView(dry_run_errors={("Pod", "llama-ft-node-0-0-dryrn"): ApiError(403, PSA, "Forbidden")})
    await run_check(DryRun(), _wl(), view)
    assert len(view.dry_runs) == 4  # JobSet, two Pods, the Job of node


def test_what_dry_run_cannot_verify_is_declared_once() -> None:
    """Said at /capabilities (describe, the live view's entries) and in a metric, never on an apply."""
    from webhook.checks.base import describe
    from webhook.metrics import Metrics

    assert [what for what, _ in DryRun.unverified] == ["owner-controller-flag", "owner-state"]
    assert describe(DryRun())["unverified"] == [text for _, text in DryRun.unverified]
    assert DryRun.unverified[0][1] == (
        "a rule on the controller flag of a JobSet's or Pod's ownerReference, on a cluster whose webhooks look the "
        "owner up (Kueue's mjobset.kb.io and mpod.kb.io): the dry-run object's owner does not exist yet, so the "
        "layers after such a webhook judge its twin without that flag"
    )
    body, _ = Metrics(unverified=[("Dry Run", what) for what, _ in DryRun.unverified]).render()
    lines = [ln for ln in body.decode().splitlines() if ln.startswith("preflight_webhook_check_unverified{")]
    assert lines == [
        'preflight_webhook_check_unverified{check="Dry Run",what="owner-controller-flag"} 1.0',
        'preflight_webhook_check_unverified{check="Dry Run",what="owner-state"} 1.0',
    ]


def test_only_a_rejections_own_words_about_owners_make_a_twin_unverifiable() -> None:
    """Names are quoted by the apiserver: the pod of AIPerf's "controller" group is no word about owners."""
    from webhook.checks.dryrun import speaks_of_owners

    vap = "ValidatingAdmissionPolicy 'no-env' with binding 'no-env' denied request: pods may not set FORBIDDEN"
    assert not speaks_of_owners(f'pods "aiperf-bench-controller-0-0-dryrn" is forbidden: {vap}')
    assert not speaks_of_owners("ValidatingAdmissionPolicy 'require-controller' with binding 'b' denied request: no")
    assert speaks_of_owners("ValidatingAdmissionPolicy 'p' with binding 'p' denied request: a Pod needs a controller")
    assert speaks_of_owners('admission webhook "x" denied the request: ownerReferences[0] must be a controller')
    assert speaks_of_owners('admission webhook "x" denied the request: bad owner')
    # Kyverno names the object unquoted (pkg/webhooks/utils/block.go): its names are no words about owners
    kyverno = (
        'admission webhook "validate.kyverno.svc-fail" denied the request: \n\nresource '
        "Pod/fx-a/aiperf-bench-controller-0-0-dryrn was blocked due to the following policies \n\n"
        "fx-no-env:\n  no-env: 'validation error: pods may not set FORBIDDEN. rule no-env failed at path "
        "/spec/containers/0/env/0/name/'"
    )
    assert speaks_of_owners(kyverno)
    assert not speaks_of_owners(kyverno, ["aiperf-bench-controller-0-0-dryrn", "fx-a", "aiperf-bench-controller-0"])
    assert speaks_of_owners(kyverno + " needs a controller", ["aiperf-bench-controller-0-0-dryrn"])


def test_the_jobset_probe_has_no_claim_volume_the_jobs_and_pods_get_it() -> None:
    """JobSet's controller adds a volumeClaimPolicies volume to each Job that mounts it (addVolumes);
    the JobSet Trainer creates has none, and JobSet's webhook refuses one named as the template."""
    claim = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-llama-ft"}}
    own = {"name": "scratch", "emptyDir": {}}
    spec = {"containers": [{"name": "node", "volumeMounts": [{"name": "initializer", "mountPath": "/w"}]}]}
    groups = [PodGroup("node", 1, {**spec, "volumes": [own, claim]})]
    js = {
        "metadata": {"name": "llama-ft"},
        "spec": {
            "volumeClaimPolicies": [{"templates": [{"metadata": {"name": "initializer"}}]}],
            "replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {**spec, "volumes": [own, claim]}}}}}
            ],
        },
    }
    wl = workload(groups, derived={"jobSet": js})
    body = jobset_for(wl)
    assert body is not None
    assert body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"] == [own]
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"] == [own, claim]
    job = job_for(wl, groups[0])
    assert job is not None and job["spec"]["template"]["spec"]["volumes"] == [own, claim]
    assert pod_for(wl, groups[0])["spec"]["volumes"] == [own, claim]


def _wl_image(image: str) -> object:
    """`_wl()` with another image in every container: other content, so the dry-run cache misses."""
    wl: Any = _wl()
    wl.derived["jobSet"]["metadata"]["labels"] = {"image": image.rsplit(":", 1)[-1]}
    for g in wl.pod_groups:
        for c in g.pod_spec["containers"]:
            c["image"] = image
    return wl


def _flags(view: FakeView) -> list[tuple[str, list[Any]]]:
    return [
        (k, [o.get("controller") for o in b["metadata"].get("ownerReferences") or []]) for _, k, _, b in view.dry_runs
    ]


async def test_a_namespace_whose_webhooks_look_owners_up_gets_the_twins_at_once() -> None:
    """The twin memo: the next review in the namespace sends each probe as its twin at once (4 dry
    runs, not 8), with the same verdict and the same details naming the webhook that looks up."""
    view = KueueView()
    first = await run_check(DryRun(), _wl(), view)
    assert len(view.dry_runs) == 8
    view.dry_runs.clear()
    second = await run_check(DryRun(), _wl_image("ghcr.io/acme/y:2"), view)
    assert (second.status, second.message, second.details) == (first.status, first.message, first.details)
    assert _flags(view) == [("JobSet", [None]), ("Pod", [None]), ("Pod", [None]), ("Job", [None])]


async def test_a_later_layer_refusing_a_remembered_twin_still_denies_with_its_words() -> None:
    view = KueueView()
    await run_check(DryRun(), _wl(), view)
    vap = (
        "pods \"llama-ft-node-0-0-dryrn\" is forbidden: ValidatingAdmissionPolicy 'no-hostpath' with binding "
        "'no-hostpath' denied request: pods may not mount hostPath volumes"
    )
    view.later[("Pod", "llama-ft-node-0-0-dryrn")] = ApiError(422, vap, "Invalid")
    r = await run_check(DryRun(), _wl_image("ghcr.io/acme/y:2"), view)
    assert (r.status, r.message) == (
        Status.FAIL,
        f"Pod for node rejected by the apiserver: {vap}. Fix: satisfy the ValidatingAdmissionPolicy named in the message.",
    )
    assert len(view.dry_runs) == 8 + 4


async def test_no_twin_memo_when_dry_runs_are_not_cached() -> None:
    """dryRunCacheSeconds 0: every review asks everything anew, the owner lookups included."""
    from webhook.config import Settings

    view = KueueView()
    settings = Settings(dryRunCacheSeconds=0)
    await run_check(DryRun(), _wl(), view, settings)
    view.dry_runs.clear()
    r = await run_check(DryRun(), _wl_image("ghcr.io/acme/y:2"), view, settings)
    assert r.status == Status.PASS
    assert [f for _, f in _flags(view)] == [[True]] * 4 + [[None]] * 4


async def test_a_cluster_without_owner_lookups_is_not_twinned() -> None:
    view = FakeView()
    await run_check(DryRun(), _wl(), view)
    view.dry_runs.clear()
    await run_check(DryRun(), _wl_image("ghcr.io/acme/y:2"), view)
    assert [f for _, f in _flags(view)] == [[True]] * 4
