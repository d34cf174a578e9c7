"""The probe objects of the Dry Run check: the Pod and the JobSet it POSTs with `dryRun=All`.

The representative Pod is the first pod of the group's first Job exactly as the controllers
will create it, so a cluster policy judges the object it will judge later (e.g. "no bare
pods"): the JobSet controller's Job (sigs.k8s.io/jobset v0.12.0
pkg/controllers/jobset_controller.go constructJob, labelAndAnnotateObject; the defaults of
pkg/webhooks/jobset_webhook.go), the Job API's selector labels (k8s.io/kubernetes
pkg/registry/batch/job/strategy.go generateSelector), and the Job controller's pod
(pkg/controller/job/job_controller.go manageJob, indexed_job_utils.go;
pkg/controller/controller_utils.go GetPodFromTemplate): a controller ownerReference to the
Job, the job-tracking finalizer, completion index 0, hostname and subdomain, generateName.
Owners do not exist yet, so their uids are placeholders; the apiserver accepts an
ownerReference to an absent owner on create (the garbage collector acts later).

Used by the Dry Run check (webhook/checks/dryrun.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

from webhook.kube import JOBSET_API_VERSION, placeholder_uid
from webhook.workloads.base import PodGroup, Workload
from webhook.workloads.podspec import containers_copy

#: the name the apiserver would complete: generateName + 5 random characters (this suffix)
PROBE_SUFFIX = "dryrn"
#: k8s.io/apiserver pkg/storage/names: 63 - the 5 random characters
_MAX_GENERATED_NAME = 58

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_JS = "jobset.sigs.k8s.io/"
_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
_NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _str_map(value: Any) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def job_name_for(wl: Workload, group: PodGroup) -> str:
    """`<jobset>-<replicatedJob>-0`: the group's first Job (jobset pkg/util/placement GenJobName)."""
    return f"{_jobset_name(wl)}-{group.name}-0"


def _jobset_name(wl: Workload) -> str:
    name = ((wl.derived.get("jobSet") or {}).get("metadata") or {}).get("name")
    return name if isinstance(name, str) and name else wl.name


def _jobset_labels(wl: Workload, js: dict[str, Any], rjob: dict[str, Any], group: str, job_name: str) -> dict[str, str]:
    """labelAndAnnotateObject: the same keys go on the pod template as labels and as annotations."""
    rjobs = [r for r in (js.get("spec") or {}).get("replicatedJobs") or [] if isinstance(r, dict)]
    js_name = _jobset_name(wl)

    def replicas(r: dict[str, Any]) -> int:
        return _int(r.get("replicas"), 1)

    def group_of(r: dict[str, Any]) -> str:
        g = r.get("groupName")
        return g if isinstance(g, str) and g else "default"

    mine = group_of(rjob)
    global_index = 0
    for r in rjobs:
        if r.get("name") == group:
            break
        global_index += replicas(r)
    group_index = 0
    for r in rjobs:
        if group_of(r) != mine:
            continue
        if r.get("name") == group:
            break
        group_index += replicas(r)
    return {
        _JS + "jobset-name": js_name,
        _JS + "jobset-uid": placeholder_uid("JobSet", wl.namespace, js_name),
        _JS + "replicatedjob-name": group,
        _JS + "restart-attempt": "0",
        _JS + "replicatedjob-replicas": str(replicas(rjob)),
        _JS + "global-replicas": str(sum(replicas(r) for r in rjobs)),
        _JS + "job-index": "0",
        _JS + "job-key": hashlib.sha1(f"{wl.namespace}/{job_name}".encode()).hexdigest(),
        _JS + "job-global-index": str(global_index),
        _JS + "group-name": mine,
        _JS + "group-replicas": str(sum(replicas(r) for r in rjobs if group_of(r) == mine)),
        _JS + "job-group-index": str(group_index),
    }


def _generate_name(job_name: str, indexed: bool) -> str:
    """podGenerateNameWithIndex (Indexed) or getPodsPrefix (NonIndexed)."""
    if not indexed:
        return f"{job_name}-"
    suffix = "-0-"
    prefix = job_name + suffix
    if len(prefix) > _MAX_GENERATED_NAME:
        prefix = prefix[: _MAX_GENERATED_NAME - len(suffix)] + suffix
    return prefix


def _replicated_job(wl: Workload, group: PodGroup) -> dict[str, Any]:
    js = wl.derived.get("jobSet") or {}
    return next(
        (
            r
            for r in (js.get("spec") or {}).get("replicatedJobs") or []
            if isinstance(r, dict) and r.get("name") == group.name
        ),
        {},
    )


def _subdomain(wl: Workload) -> str:
    """GetSubdomain: the network's subdomain, else the JobSet's name."""
    network = ((wl.derived.get("jobSet") or {}).get("spec") or {}).get("network") or {}
    sub = network.get("subdomain")
    return sub if isinstance(sub, str) and sub else _jobset_name(wl)


def _label_and_annotate(wl: Workload, group: PodGroup, labels: dict[str, str], annotations: dict[str, str]) -> None:
    """labelAndAnnotateObject (jobset_controller.go), on a Job or its pod template: the JobSet keys as
    labels and annotations, the coordinator's endpoint, and the exclusive-placement annotations of
    the JobSet or the replicatedJob's Job template."""
    js = wl.derived.get("jobSet") or {}
    js_spec = js.get("spec") or {}
    rjob = _replicated_job(wl, group)
    keys = _jobset_labels(wl, js, rjob, group.name, job_name_for(wl, group))
    labels.update(keys)
    annotations.update(keys)
    coordinator = js_spec.get("coordinator")
    if isinstance(coordinator, dict) and coordinator.get("replicatedJob"):
        endpoint = (
            f"{_jobset_name(wl)}-{coordinator['replicatedJob']}-{_int(coordinator.get('jobIndex'), 0)}-"
            f"{_int(coordinator.get('podIndex'), 0)}.{_subdomain(wl)}"
        )
        labels[_JS + "coordinator"] = annotations[_JS + "coordinator"] = endpoint
    job_meta = (rjob.get("template") or {}).get("metadata")
    job_annotations = _str_map(job_meta.get("annotations") if isinstance(job_meta, dict) else None)
    for source in (_str_map((js.get("metadata") or {}).get("annotations")), job_annotations):
        if _EXCLUSIVE in source:
            annotations[_EXCLUSIVE] = source[_EXCLUSIVE]
            if _NODE_SELECTOR_STRATEGY in source:
                annotations[_NODE_SELECTOR_STRATEGY] = source[_NODE_SELECTOR_STRATEGY]


def job_for(wl: Workload, group: PodGroup) -> dict[str, Any] | None:
    """The group's first Job as JobSet v0.12.0 creates it (pkg/controllers/jobset_controller.go
    constructJob, labelAndAnnotateObject on the Job and its pod template, SetControllerReference
    to the JobSet; the webhook's defaults: completionMode Indexed, restartPolicy OnFailure), owned by
    the JobSet whose uid is a placeholder (blockOwnerDeletion left out as for the pod). None for a
    group that is no replicatedJob of the job's JobSet (no Job is created from it)."""
    rjob = _replicated_job(wl, group)
    if not rjob:
        return None
    template = rjob.get("template") or {}
    job_meta = template.get("metadata")
    labels = _str_map(job_meta.get("labels") if isinstance(job_meta, dict) else None)
    annotations = _str_map(job_meta.get("annotations") if isinstance(job_meta, dict) else None)
    _label_and_annotate(wl, group, labels, annotations)
    pod_labels, pod_annotations, pod_spec, job_spec = _pod_template(wl, group)
    spec = {k: v for k, v in job_spec.items() if k != "template"}
    spec.setdefault("completionMode", "Indexed")
    js = wl.derived.get("jobSet") or {}
    spec["suspend"] = (js.get("spec") or {}).get("suspend") is True
    spec["template"] = {"metadata": {"labels": pod_labels, "annotations": pod_annotations}, "spec": pod_spec}
    js_name = _jobset_name(wl)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name_for(wl, group),
            "namespace": wl.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": JOBSET_API_VERSION,
                    "kind": "JobSet",
                    "name": js_name,
                    "uid": placeholder_uid("JobSet", wl.namespace, js_name),
                    "controller": True,
                }
            ],  # fmt: skip
        },
        "spec": spec,
    }


def _pod_template(
    wl: Workload, group: PodGroup
) -> tuple[dict[str, str], dict[str, str], dict[str, Any], dict[str, Any]]:
    """The pod template of the group's first Job as JobSet's constructJob writes it: (labels,
    annotations, pod spec, the replicatedJob's Job spec)."""
    js_spec = (wl.derived.get("jobSet") or {}).get("spec") or {}
    job_spec = (_replicated_job(wl, group).get("template") or {}).get("spec") or {}
    job_name = job_name_for(wl, group)
    meta = group.pod_metadata or {}
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    # JobSet controller: labelAndAnnotateObject on the pod template
    _label_and_annotate(wl, group, labels, annotations)
    network = js_spec.get("network") or {}
    subdomain = _subdomain(wl)

    # a new spec, container lists and container dicts (what this changes); the rest is shared
    # with the Workload, which nothing here or after changes (the body is only serialized)
    spec = containers_copy(group.pod_spec)
    if spec.get("serviceAccountName") in wl.managed_service_accounts:
        # the job's controller creates that ServiceAccount just before the pods (AIPerfSweep's
        # sweep controller): the probe runs as the namespace's default one instead
        spec.pop("serviceAccountName")
    if network.get("enableDNSHostnames", True) is not False:  # the JobSet webhook defaults it to true
        spec["subdomain"] = subdomain
    if _EXCLUSIVE in annotations and _NODE_SELECTOR_STRATEGY in annotations:
        namespaced_job = {"alpha.jobset.sigs.k8s.io/namespaced-job": f"{wl.namespace}_{job_name}"}
        spec["nodeSelector"] = {**_str_map(spec.get("nodeSelector")), **namespaced_job}
        spec["tolerations"] = list(spec.get("tolerations") or []) + [
            {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "operator": "Exists", "effect": "NoSchedule"}
        ]
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "OnFailure"  # the JobSet webhook's default

    return labels, annotations, spec, job_spec


def pod_for(wl: Workload, group: PodGroup) -> dict[str, Any]:
    """The first pod of the group's first Job, as the JobSet and Job controllers create it.

    Named `<generateName>dryrn` (the apiserver would add 5 random characters instead), owned
    by Job `<jobset>-<group>-0` whose uid is a placeholder. blockOwnerDeletion, which the Job
    controller also sets, is left out: under the OwnerReferencesPermissionEnforcement plugin
    it would need the webhook to be allowed to update jobs/finalizers, a question about the
    webhook, not the job.
    """
    labels, annotations, spec, job_spec = _pod_template(wl, group)
    job_name = job_name_for(wl, group)
    job_uid = placeholder_uid("Job", wl.namespace, job_name)
    meta = group.pod_metadata or {}

    # Job API: generateSelector adds the selector labels unless the user chose a manual selector
    if job_spec.get("manualSelector") is not True:
        for key in ("job-name", "batch.kubernetes.io/job-name"):
            labels.setdefault(key, job_name)
        for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
            labels.setdefault(key, job_uid)

    # Job controller: completion index 0 of an Indexed Job (the JobSet webhook's default mode)
    indexed = (job_spec.get("completionMode") or "Indexed") == "Indexed"
    if indexed:
        annotations[COMPLETION_INDEX] = "0"
        labels[COMPLETION_INDEX] = "0"  # PodIndexLabel, GA
        if job_spec.get("backoffLimitPerIndex") is not None:
            annotations["batch.kubernetes.io/job-index-failure-count"] = "0"
        spec["hostname"] = f"{job_name}-0"
        field_ref = {"fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}  # PodIndexLabel on
        index_env = {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": field_ref}}
        for kind in ("initContainers", "containers"):
            for c in spec.get(kind) or []:
                env = (c.get("env") or []) if isinstance(c, dict) else None
                if env is not None and not any(isinstance(e, dict) and e.get("name") == index_env["name"] for e in env):
                    c["env"] = [*env, {"name": index_env["name"], "valueFrom": {"fieldRef": dict(field_ref)}}]
    generate_name = _generate_name(job_name, indexed)
    finalizers = [f for f in meta.get("finalizers") or [] if isinstance(f, str)]
    if JOB_TRACKING_FINALIZER not in finalizers:
        finalizers.append(JOB_TRACKING_FINALIZER)
    metadata: dict[str, Any] = {
        "name": generate_name + PROBE_SUFFIX,
        "generateName": generate_name,
        "namespace": wl.namespace,
        "labels": labels,
        "annotations": annotations,
        "finalizers": finalizers,
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid, "controller": True}
        ],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _without_claim_volumes(spec: dict[str, Any], js_name: str) -> dict[str, Any]:
    """The JobSet spec without the volumes JobSet's controller adds to each Job for its
    volumeClaimPolicies (v0.12.0 pkg/controllers/volume_claim_policy.go addVolumes: a volume named
    as the claim template, claimName `<template>-<jobset>`), which the Workload's pod specs carry:
    the JobSet as Trainer creates it has none, and JobSet's webhook refuses a pod volume named as a
    template (pkg/webhooks/jobset_webhook.go validateVolumeClaimPolicies: "volume name conflicts with
    VolumeClaimPolicy template name"). Copied where it changes; the rest is shared."""
    claims = {
        str((t.get("metadata") or {}).get("name"))
        for policy in spec.get("volumeClaimPolicies") or []
        if isinstance(policy, dict)
        for t in policy.get("templates") or []
        if isinstance(t, dict)
    }
    if not claims:
        return spec

    def added(v: Any) -> bool:
        return (
            isinstance(v, dict)
            and v.get("name") in claims
            and (v.get("persistentVolumeClaim") or {}).get("claimName") == f"{v.get('name')}-{js_name}"
        )

    rjobs = []
    for r in spec.get("replicatedJobs") or []:
        pod = (
            (((r.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
            if isinstance(r, dict)
            else None
        )
        if not isinstance(pod, dict) or not any(added(v) for v in pod.get("volumes") or []):
            rjobs.append(r)
            continue
        pod = {**pod, "volumes": [v for v in pod["volumes"] if not added(v)]}
        if not pod["volumes"]:
            del pod["volumes"]
        template = {**r["template"]["spec"]["template"], "spec": pod}
        rjobs.append({**r, "template": {**r["template"], "spec": {**r["template"]["spec"], "template": template}}})
    return {**spec, "replicatedJobs": rjobs}


def jobset_for(wl: Workload) -> dict[str, Any] | None:
    """The derived JobSet, owned by the job as its controller creates it: a controller
    ownerReference to the TrainJob (kubeflow/trainer v2.3.0
    pkg/runtime/framework/plugins/jobset/jobset.go) or the AIPerfJob (AIPerf 0.13.0
    aiperf/operator/handlers/create.py, OwnerReference.for_aiperf_job), whose uid is a
    placeholder; blockOwnerDeletion left out as for the pod."""
    js = wl.derived.get("jobSet")
    if not js or wl.facts.derived_self == "jobSet":
        # a JobSet applied directly: this very request passes every admission layer of the apiserver
        return None
    body = dict(js)  # only the metadata changes: a new one, the spec shared with the Workload
    body.setdefault("apiVersion", JOBSET_API_VERSION)
    body.setdefault("kind", "JobSet")
    body["metadata"] = dict(body.get("metadata") or {})
    body["metadata"]["namespace"] = wl.namespace
    body["metadata"].pop("resourceVersion", None)
    body["metadata"].pop("uid", None)
    body["spec"] = _without_claim_volumes(body.get("spec") or {}, _jobset_name(wl))
    if not body["metadata"].get("ownerReferences"):
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": wl.api_version, "kind": wl.kind, "name": wl.name,
             "uid": placeholder_uid(wl.kind, wl.namespace, wl.name), "controller": True}
        ]  # fmt: skip
    return body


def twin_of(body: dict[str, Any]) -> dict[str, Any]:
    """The probe's twin: the same object whose ownerReferences do not say `controller: true`.

    Sent when a webhook refused the probe because it looked its owner up and the owner does not
    exist yet (it will once the job is stored). Kueue v0.17.0 does so for every JobSet, Job and
    Pod it is configured for, in its mutating webhooks mjobset.kb.io, mjob.kb.io and mpod.kb.io
    (pkg/controller/jobs/jobset/jobset_webhook.go Default -> pkg/controller/jobframework/defaults.go
    ApplyDefaultForSuspend -> WorkloadShouldBeSuspended; pkg/controller/jobs/pod/pod_webhook.go
    Default): pkg/controller/jobframework/reconciler.go FindAncestorJobManagedByKueue starts from
    `metav1.GetControllerOf` and GETs that owner when its kind is one Kueue knows (every
    integration it registers: batch/v1 Job, JobSet, TrainJob, ...), failing with "workload owner
    not found". With no controller reference the walk stops at once, and the rest of that webhook
    (the local-queue default, the suspend default for an object carrying a queue-name label) and
    every later admission layer judge the twin. The twin differs from what the controllers create
    only in that flag: the owner references themselves (kind, name, uid) are kept, so a "no bare
    pods" rule sees them."""
    meta = dict(body.get("metadata") or {})
    meta["ownerReferences"] = [
        {k: v for k, v in o.items() if k != "controller"} if isinstance(o, dict) else o
        for o in meta.get("ownerReferences") or []
    ]
    return {**body, "metadata": meta}
