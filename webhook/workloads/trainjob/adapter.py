"""The adapter entry: one TrainJob (and the runtime it names) to a Workload.

Without the runtime the pod groups are unknown; the TrainJob's own secret references are
still recorded so the secrets check can run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from webhook.config import Settings
from webhook.kube import MULTIKUEUE, QUEUE_LABEL
from webhook.workloads.base import KindFacts, RuntimeLookup, Workload
from webhook.workloads.shape import clean, listing, mapping, read_metadata, wrong
from webhook.workloads.trainjob.jobset import config_map, render
from webhook.workloads.trainjob.schema import (
    API_GROUP,
    RUNTIME_KINDS,
    RUNTIME_SNAPSHOT_SUFFIX,
    TRAINJOB_SPEC,
    runtime_spec,
)
from webhook.workloads.walks import plain_json


def _own_secret_refs(spec: dict[str, Any]) -> list[tuple[str, str | None, bool, str]]:
    """Secrets named by the TrainJob itself (trainer env, initializer env and secretRef); `spec` is validated."""
    refs: list[tuple[str, str | None, bool, str]] = []

    def env_refs(env: list[dict[str, Any]], path: str) -> None:
        for e in env:
            ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name"):
                refs.append(
                    (ref["name"], ref.get("key"), bool(ref.get("optional", False)), f"{path}[{e.get('name', '?')}]")
                )

    env_refs((spec.get("trainer") or {}).get("env") or [], "spec.trainer.env")
    for kind in ("dataset", "model"):
        section = (spec.get("initializer") or {}).get(kind) or {}
        env_refs(section.get("env") or [], f"spec.initializer.{kind}.env")
        sref = section.get("secretRef") or {}
        if sref.get("name"):
            refs.append((sref["name"], None, False, f"spec.initializer.{kind}.secretRef"))
    return refs


#: Trainer renders the JobSet from the runtime: pod-level fields live in the runtime or in
#: spec.runtimePatches, the trainer node's resources in spec.trainer.resourcesPerNode
FACTS = KindFacts(
    controllers=("Trainer", "JobSet"),
    pod_field="{field} (in the runtime or spec.runtimePatches)",
    resources_at=(
        ("node", "spec.trainer.resourcesPerNode.limits (or the runtime's container resources)"),
        ("", "the training runtime's container resources"),
    ),
    # the trainer nodes rendezvous and exchange tensors; the initializers talk to no one
    collective=True,
    operator_ports=False,
    peer_consequence="the training hangs at rendezvous",
)


def build(
    obj: dict[str, Any],
    *,
    settings: Settings,
    runtime_lookup: RuntimeLookup | None = None,
    namespace: str | None = None,
) -> Workload:
    """The Workload for one TrainJob. Raises AdapterError when it cannot be read as one."""
    plain_json(obj)
    mapping(obj.get("metadata"), "metadata")  # its shape is reported before the spec's
    raw_spec = obj.get("spec")
    if not isinstance(raw_spec, dict):  # the one field where null is not "absent": a job needs a spec
        raise wrong("spec", "a mapping", raw_spec)
    spec = clean(raw_spec, TRAINJOB_SPEC, "spec")
    # runtime patches are merged as given: a null in a patch means "delete", which clean() drops
    patches = listing(raw_spec.get("runtimePatches"), "spec.runtimePatches")
    name, ns, labels, _ = read_metadata(obj, namespace)
    wl = Workload(
        kind="TrainJob",
        api_version=str(obj.get("apiVersion") or f"{API_GROUP}/v1alpha1"),
        name=name,
        namespace=ns,
        obj=obj,
        queue_name=labels.get(QUEUE_LABEL) or None,
        managed_by=spec.get("managedBy") or "trainer.kubeflow.org/trainjob-controller",
    )
    # a TrainJob MultiKueue dispatches runs in another cluster: here only Kueue acts on it
    wl.facts = FACTS if wl.managed_by != MULTIKUEUE else replace(FACTS, controllers=())
    rt_kind, rt_name, runtime = _runtime(wl, spec, runtime_lookup)
    if runtime is None:
        wl.extra_secret_refs = _own_secret_refs(spec)
        return wl
    wl.runtime = runtime
    rt_path = f'{rt_kind} "{rt_name}" spec'
    rt_spec = runtime_spec(mapping(runtime, f'{rt_kind} "{rt_name}"'), rt_path)
    if (rt_spec.get("mlPolicy") or {}).get("flux") is not None and spec.get("trainer") is None:
        # T:pkg/runtime/framework/plugins/flux/flux.go EnforceMLPolicy reads spec.trainer.env and
        # sets spec.trainer.command without a nil check: the controller fails on every reconcile
        wl.render_errors.append(
            f'Kubeflow Trainer v2.3 cannot render a TrainJob on the Flux runtime {rt_kind} "{rt_name}" without '
            "spec.trainer (its Flux plugin reads spec.trainer), so no JobSet or pod is ever created. "
            "Fix: set spec.trainer, e.g. trainer: {numNodes: 1}."
        )
    render(wl, spec, patches, rt_spec)
    # Trainer applies a copy of the runtime as `<name>-runtime-snapshot` before it builds anything
    # (T:pkg/runtime/core/snapshot.go createRuntimeSnapshot, called from NewObjects of both runtime
    # kinds): one more ConfigMap in the namespace, for every TrainJob whose runtime exists. Its
    # content is the runtime itself; only its identity matters to the checks (count/configmaps).
    wl.derived["runtimeSnapshot"] = config_map(wl, RUNTIME_SNAPSHOT_SUFFIX)
    return wl


def _runtime(
    wl: Workload, spec: dict[str, Any], runtime_lookup: RuntimeLookup | None
) -> tuple[str, Any, dict[str, Any] | None]:
    """(the runtime's kind, its name, the runtime spec.runtimeRef names, or None: then why is `wl`'s
    incomplete_reason: no name, an unsupported kind, offline, or not found)."""
    ref = spec.get("runtimeRef") or {}
    rt_name = ref.get("name")
    rt_kind = ref.get("kind") or "ClusterTrainingRuntime"
    rt_group = ref.get("apiGroup") or API_GROUP
    runtime = None
    ns = wl.namespace
    if not rt_name:
        wl.incomplete_reason = "spec.runtimeRef.name is not set"
    elif rt_group != API_GROUP or rt_kind not in RUNTIME_KINDS:
        wl.incomplete_reason = f"unsupported runtime: {rt_kind}.{rt_group}"
    elif runtime_lookup is None:
        wl.incomplete_reason = f'{rt_kind} "{rt_name}" was not available (offline: put it in the same input file)'
    else:
        runtime = runtime_lookup(rt_kind, ns if rt_kind == "TrainingRuntime" else "", rt_name)
        if runtime is None:
            where = f' in namespace "{ns}"' if rt_kind == "TrainingRuntime" else ""
            wl.incomplete_reason = (
                f'{rt_kind} "{rt_name}"{where} was not found (offline: put it in the same input file)'
            )
    return rt_kind, rt_name, runtime
