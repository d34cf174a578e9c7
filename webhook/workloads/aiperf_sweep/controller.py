"""The sweep controller: the JobSet, ServiceAccount, Role and RoleBinding the operator provisions.

Follows AIPerf 0.13.0's `operator/handlers/sweep/create.py` `_create_sweep_controller_jobset`
(one pod: the `sweep-controller` container and the `results-sidecar`, the podTemplate's
pass-through fields, the operator's security contexts) and `_provision_rbac` (what the
controller may do with its children and its own AIPerfSweep). Resource defaults are
`K8sEnvironment.SWEEP_CONTROLLER` / `RESULTS_SIDECAR` (`aiperf/kubernetes/environment.py`).
"""

from __future__ import annotations

from typing import Any

from webhook.config import Settings
from webhook.workloads import aiperf
from webhook.workloads.aiperf import (
    Env,
    container_security,
    k8s_resources,
    lookup,
    merge_pod_security,
    results_sidecar,
)
from webhook.workloads.aiperf_sweep.spec import KIND

# K8sEnvironment.SWEEP_CONTROLLER / RESULTS_SIDECAR defaults (aiperf/kubernetes/environment.py)
SWEEP_CONTROLLER_RESOURCES = ("75m", "512Mi")
RESULTS_SIDECAR_PORT = aiperf.RESULTS_SIDECAR_PORT
#: the replicatedJob of the sweep-controller JobSet, and so its pod group's name
CONTROLLER_GROUP = "controller"
_DEFAULT_OPERATOR_URL = "http://aiperf-operator.aiperf-system:8081"
_POD_PASSTHROUGH = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "imagePullSecrets",
    "priorityClassName",
    "runtimeClassName",
)


def controller_objects(
    spec: dict[str, Any], name: str, ns: str, uid: str, epoch: str, settings: Settings
) -> dict[str, dict[str, Any]]:
    """create._create_sweep_controller_jobset and _provision_rbac: the objects the operator provisions."""
    env = Env(settings)  # AIPerf's settings classes read env names case-insensitively, as Env does
    tmpl = lookup(spec, "podTemplate") or {}
    mode = lookup(spec, "resourceMode") or "burstable"
    sa = f"aiperf-sweep-controller-{name}"
    security = container_security(tmpl.get("containerSecurityContext"))
    ctl = _controller_container(spec, tmpl, env, mode, security, name=name, ns=ns, uid=uid, epoch=epoch)
    sidecar = results_sidecar(spec.get("image"), env)  # its pull policy, resources and security context next
    pull = lookup(spec, "imagePullPolicy")
    if pull is not None:
        ctl["imagePullPolicy"] = sidecar["imagePullPolicy"] = pull
    if mode != "none":
        sidecar["resources"] = k8s_resources(*env.resources("RESULTS_SIDECAR"), mode)
    sidecar["securityContext"] = dict(security)
    owner = [
        {
            "apiVersion": aiperf.API_VERSION,
            "kind": KIND,
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return {"jobSet": _jobset(name, ns, owner, _pod_spec(tmpl, sa, [ctl, sidecar])), **_rbac(name, ns, sa, owner)}


def _controller_container(
    spec: dict[str, Any],
    tmpl: dict[str, Any],
    env: Env,
    mode: str,
    security: dict[str, Any],
    *,
    name: str,
    ns: str,
    uid: str,
    epoch: str,
) -> dict[str, Any]:
    """The `sweep-controller` container: the sweep's identity in its env (the podTemplate's env cannot
    override it), the podTemplate's resources or the operator's defaults."""
    ctl: dict[str, Any] = {
        "name": "sweep-controller",
        "image": spec.get("image"),
        "command": ["python", "-m", "aiperf.sweep_controller.main"],
        "env": [
            {"name": "AIPERF_SWEEP_NAME", "value": name},
            {"name": "AIPERF_SWEEP_NAMESPACE", "value": ns},
            {"name": "AIPERF_SWEEP_UID", "value": uid},
            {"name": "AIPERF_SWEEP_EPOCH", "value": epoch},
            {"name": "AIPERF_OPERATOR_MANAGED", "value": "1"},
            {"name": "AIPERF_RESULTS_DIR", "value": "/results"},
            {"name": "AIPERF_OPERATOR_BASE_URL", "value": env.get("AIPERF_OPERATOR_BASE_URL", _DEFAULT_OPERATOR_URL)},
        ],
        "volumeMounts": [{"name": "results", "mountPath": "/results"}, {"name": "tmp", "mountPath": "/tmp"}],
    }
    reserved = {e["name"] for e in ctl["env"]}
    ctl["env"] += [e for e in (tmpl.get("env") or []) if isinstance(e, dict) and e.get("name") not in reserved]
    if tmpl.get("resources") is not None:
        ctl["resources"] = tmpl["resources"]
    elif mode != "none":
        ctl["resources"] = k8s_resources(
            env.get("AIPERF_K8S_SWEEP_CONTROLLER_CPU", SWEEP_CONTROLLER_RESOURCES[0]),
            env.get("AIPERF_K8S_SWEEP_CONTROLLER_MEMORY", SWEEP_CONTROLLER_RESOURCES[1]),
            mode,
        )
    ctl["securityContext"] = security
    return ctl


def _pod_spec(tmpl: dict[str, Any], sa: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller pod: its ServiceAccount, two emptyDirs, the operator's pod security context
    (`merge_pod_security`, as for AIPerfJob pods) and the podTemplate's scheduling pass-through."""
    pod_spec: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "serviceAccountName": sa,
        "containers": containers,
        "volumes": [{"name": "results", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
        "securityContext": merge_pod_security(None),
    }
    for key in _POD_PASSTHROUGH:
        if tmpl.get(key) is not None:
            pod_spec[key] = tmpl[key]
    if tmpl.get("podSecurityContext"):
        pod_spec["securityContext"] = merge_pod_security(tmpl["podSecurityContext"])
    return pod_spec


def _jobset(name: str, ns: str, owner: list[dict[str, Any]], pod_spec: dict[str, Any]) -> dict[str, Any]:
    """`aiperf-<sweep>`: one replicatedJob `controller` of one pod, owned by the AIPerfSweep."""
    return {
        "apiVersion": aiperf.JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {"name": f"aiperf-{name}", "namespace": ns, "ownerReferences": owner},
        "spec": {
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {"name": CONTROLLER_GROUP, "replicas": 1,
                 "template": {"spec": {"completions": 1, "parallelism": 1, "template": {"spec": pod_spec}}}},
            ],
        },
    }  # fmt: skip


def _rbac(name: str, ns: str, sa: str, owner: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """_provision_rbac: the controller's ServiceAccount, and a Role bound to it that manages AIPerfJobs
    and reads and updates its own AIPerfSweep."""
    rules = [
        {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs", "aiperfjobs/status"],
         "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]},
        {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfsweeps", "aiperfsweeps/status"],
         "verbs": ["get", "patch", "update"], "resourceNames": [name]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ]  # fmt: skip
    meta = {"name": sa, "namespace": ns, "ownerReferences": owner}
    return {
        "serviceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        "role": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(meta), "rules": rules},
        "roleBinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": dict(meta),
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
        },
    }
