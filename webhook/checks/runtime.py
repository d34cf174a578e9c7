"""Training Runtime: which (Cluster)TrainingRuntime a TrainJob runs on.

The runtime is resolved from the cache and fed to the TrainJob adapter (so the pod
groups, secrets and resources of every other check come from it). A missing runtime is
already rejected by Trainer's own webhook with its own text; this check does not repeat
that verdict, it only says why the runtime-dependent checks are skipped.
"""

from __future__ import annotations

from typing import Any

from webhook.checks.base import TRAINJOB, Check, CheckContext
from webhook.checks.common import cached, with_stale
from webhook.models.apis import TRAINER_API
from webhook.results import CheckResult, Status

GROUP = "trainer.kubeflow.org"


def runtime_ref(obj: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of spec.runtimeRef with Trainer's defaults."""
    ref = ((obj.get("spec") or {}).get("runtimeRef")) or {}
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    return str(kind), str(ref.get("name") or "")


class TrainingRuntime(Check):
    name = "Training Runtime"
    synchronous = True  # reads only the Workload and cached state
    kinds = frozenset({TRAINJOB})
    needs_cluster = True
    needs_pod_groups = False
    permissions = (*cached("clustertrainingruntimes", GROUP), *cached("trainingruntimes", GROUP))
    apis = (TRAINER_API,)
    summary = "The TrainJob's (Cluster)TrainingRuntime is found, so the other checks see the pods it will create."

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        wl = ctx.workload
        kind, name = runtime_ref(wl.obj)
        resource = "trainingruntimes" if kind == "TrainingRuntime" else "clustertrainingruntimes"
        where = f' in namespace "{wl.namespace}"' if kind == "TrainingRuntime" else ""
        if kind not in ("TrainingRuntime", "ClusterTrainingRuntime"):
            return CheckResult(
                self.name,
                Status.SKIP,
                f"Skipped: runtimeRef kind {kind!r} is not a Trainer runtime; Trainer's webhook rejects it",
            )
        found = wl.runtime is not None or (
            ctx.view.get_cached(resource, wl.namespace if kind == "TrainingRuntime" else None, name) is not None
        )
        if not found:
            return with_stale(
                CheckResult(
                    self.name,
                    Status.SKIP,
                    f'Skipped: {kind} "{name}"{where} does not exist; Trainer\'s own webhook rejects the TrainJob '
                    "and the checks that need the runtime's pods are skipped",
                ),
                ctx,
                resource,
            )
        return with_stale(CheckResult(self.name, Status.PASS, f'Uses {kind} "{name}"{where}'), ctx, resource)


CHECKS = [TrainingRuntime()]
