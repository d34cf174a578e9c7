"""What the TrainJob adapter reads, and how: the API names, the shapes of TrainJob v1alpha1,
(Cluster)TrainingRuntime and the JobSet v1alpha2 template (validated with `shape.clean`
before use), and the cache of validated runtime specs.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from webhook.workloads import podspec
from webhook.workloads.shape import ListOf, Schema, clean

API_GROUP = "trainer.kubeflow.org"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
RUNTIME_SNAPSHOT_SUFFIX = "-runtime-snapshot"  # T:pkg/runtime/core/snapshot.go
# role (ancestor step) → the container Trainer writes into
ROLE_CONTAINER = {
    "trainer": "node",
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
}

# --- the shapes this adapter reads (TrainJob v1alpha1, JobSet v1alpha2), validated before use ---
_JOB_SPEC: dict[str, Schema] = {
    "parallelism": "integer",
    "completions": "integer",
    "backoffLimit": "integer",
    "completionMode": "string",
    "template": podspec.POD_TEMPLATE,
}
REPLICATED_JOB: dict[str, Schema] = {
    "name": "string",
    "replicas": "integer",
    "dependsOn": ListOf({"name": "string", "status": "string"}),
    "template": {"metadata": podspec.OBJECT_META, "spec": _JOB_SPEC},
}
JOBSET_TEMPLATE: dict[str, Schema] = {
    "metadata": podspec.OBJECT_META,
    "spec": {
        "replicatedJobs": ListOf(REPLICATED_JOB),
        "suspend": "boolean",
        "volumeClaimPolicies": ListOf({"templates": ListOf({"metadata": podspec.OBJECT_META})}),
    },
}
_INITIALIZER: dict[str, Schema] = {
    "storageUri": "string",
    "env": ListOf(podspec.ENV_VAR),
    "secretRef": {"name": "string"},
}
TRAINJOB_SPEC: dict[str, Schema] = {
    "runtimeRef": {"name": "string", "kind": "string", "apiGroup": "string"},
    "trainer": {
        "image": "string",
        "command": ListOf("string"),
        "args": ListOf("string"),
        "env": ListOf(podspec.ENV_VAR),
        "numNodes": "integer",
        "numProcPerNode": "int-or-string",
        "resourcesPerNode": podspec.RESOURCES,
    },
    "initializer": {"dataset": _INITIALIZER, "model": _INITIALIZER},
    "runtimePatches": ListOf({"manager": "string", "trainingRuntimeSpec": {"template": JOBSET_TEMPLATE}}),
    "suspend": "boolean",
    "managedBy": "string",
}
RUNTIME_SPEC: dict[str, Schema] = {
    "mlPolicy": {
        "numNodes": "integer",
        "torch": {"numProcPerNode": "int-or-string"},
        "mpi": {
            "runLauncherAsNode": "boolean",
            "numProcPerNode": "integer",
            "sshAuthMountPath": "string",
            "mpiImplementation": "string",
        },
        "flux": {"numProcPerNode": "integer"},
        "jax": {},
        "xgboost": {},
    },
    "template": JOBSET_TEMPLATE,
}


#: validated runtime specs of cluster objects: id(runtime) → (runtime, resourceVersion, spec).
#: The watch cache replaces an object on every change (new resourceVersion) and an entry keeps
#: its object alive, so an id is never reused while cached. Objects without a resourceVersion
#: (the CLI's input files, tests) are validated every time, as before.
_RUNTIME_SPECS: OrderedDict[int, tuple[dict[str, Any], str, dict[str, Any]]] = OrderedDict()
_RUNTIME_SPECS_MAX = 64


def runtime_spec(runtime: dict[str, Any], path: str) -> dict[str, Any]:
    """clean(runtime spec), once per version of a cluster runtime rather than per request.

    The result may be shared between requests and is never changed: the JobSet renderer only
    reads it and works on copies (strategic_merge and clean both return new containers)."""
    meta = runtime.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(rv, str) or not rv:
        return clean(runtime.get("spec"), RUNTIME_SPEC, path) or {}
    key = id(runtime)
    hit = _RUNTIME_SPECS.get(key)
    if hit is not None and hit[0] is runtime and hit[1] == rv:
        _RUNTIME_SPECS.move_to_end(key)
        return hit[2]
    rt_spec = clean(runtime.get("spec"), RUNTIME_SPEC, path) or {}
    _RUNTIME_SPECS[key] = (runtime, rv, rt_spec)
    if len(_RUNTIME_SPECS) > _RUNTIME_SPECS_MAX:
        _RUNTIME_SPECS.popitem(last=False)
    return rt_spec
