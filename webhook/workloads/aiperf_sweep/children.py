"""The child AIPerfJobs: AIPerf 0.13.0's `sweep_controller/k8s_executor.py`.

`_build_child_spec`: a child is the parent spec without the sweep-only fields, with the
variation's benchmark and variables and the trial's seed; `_build_child_metadata`: its name
(`naming.child_name`) and the sweep's labels. Each child is rendered by the AIPerfJob adapter
(`webhook.workloads.aiperf.build`), as the operator renders any AIPerfJob. Trials of one variation
differ only in name and seed, so each variation is rendered once and its trials share that render.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.config import Settings
from webhook.kube import placeholder_uid
from webhook.workloads import aiperf
from webhook.workloads.aiperf_sweep.expansion import Variation
from webhook.workloads.aiperf_sweep.naming import child_name, sanitize_for_label
from webhook.workloads.aiperf_sweep.spec import SpecInvalid
from webhook.workloads.aiperf_sweep.workload import SweepChild, SweepWorkload, configmap_bytes, rank
from webhook.workloads.base import AdapterError

SWEEP_LABEL = "aiperf.nvidia.com/sweep"
SWEEP_UID_LABEL = "aiperf.nvidia.com/sweep-uid"
SWEEP_RUN_EPOCH_LABEL = "aiperf.nvidia.com/sweep-run-epoch"
VARIATION_INDEX_LABEL = "aiperf.nvidia.com/variation-index"
VARIATION_LABEL_LABEL = "aiperf.nvidia.com/variation-label"
TRIAL_INDEX_LABEL = "aiperf.nvidia.com/trial-index"

# k8s_executor._build_child_spec: parent fields a child never inherits
_NOT_INHERITED = frozenset(
    "sweep failurePolicy failure_policy cancel ttlSecondsAfterFinished ttl_seconds_after_finished childMetadata "
    "child_metadata multiRun multi_run plot variables randomSeed random_seed".split()
)


def child_uid(namespace: str, name: str) -> str:
    """The stand-in uid of the child `name` (see ChildPlan.child_obj)."""
    return placeholder_uid("AIPerfSweep child", namespace, name)


@dataclass(frozen=True)
class ChildPlan:
    """What every child of one sweep shares: the parent, the sweep's identity and labels, the trials, the seed."""

    parent: dict[str, Any]
    spec: dict[str, Any]
    sweep: str
    namespace: str
    uid: str
    epoch: str
    extra_labels: dict[str, str]
    trials: int
    with_trial: bool
    #: the parent's seed (None: no seed), and whether every variation keeps it (`sameSeed`)
    seed: Any
    same_seed: bool

    def trial_ids(self) -> list[int | None]:
        return list(range(self.trials)) if self.with_trial else [None]

    def labels(self, var: Variation) -> dict[str, str]:
        """_build_child_metadata's labels of the first trial (the childMetadata labels under them)."""
        labels = {**self.extra_labels, SWEEP_LABEL: self.sweep, SWEEP_UID_LABEL: self.uid,
                  SWEEP_RUN_EPOCH_LABEL: self.epoch, VARIATION_INDEX_LABEL: f"{var.index:02d}",
                  VARIATION_LABEL_LABEL: sanitize_for_label(var.label)}  # fmt: skip
        if self.with_trial:
            labels[TRIAL_INDEX_LABEL] = "0"
        return labels

    def seed_of(self, var: Variation) -> Any:
        """randomSeed + the variation's index, unless sameSeed (or the seed is not an integer)."""
        seed = self.seed
        return seed if seed is None or self.same_seed else seed + var.index if isinstance(seed, int) else seed

    def child_obj(self, var: Variation, name: str) -> dict[str, Any]:
        """_build_child_spec + _build_child_metadata: the AIPerfJob the controller creates."""
        child_spec = {k: v for k, v in self.spec.items() if k not in _NOT_INHERITED}
        child_spec["benchmark"] = var.envelope.get("benchmark") or {}
        variables = var.envelope.get("variables")
        if variables:
            child_spec["variables"] = variables
        seed = self.seed_of(var)
        if seed is not None:
            child_spec["randomSeed"] = seed
        # the child's uid is the apiserver's once the controller creates it; a stand-in until then,
        # so the render holds AIPERF_JOB_UID as the operator writes it for the child and Dry Run
        # keys the child's objects as the child's own review will (webhook.checks.dryrun_cache).
        # Not the stand-in Dry Run gives an absent owner (placeholder_uid("AIPerfJob", ...)): that
        # one stays in the JobSet's ownerReference in both reviews, this one is "this job".
        meta: dict[str, Any] = {
            "name": name,
            "namespace": self.namespace,
            "uid": child_uid(self.namespace, name),
            "labels": self.labels(var),
        }
        pmeta = self.parent.get("metadata") or {}
        if pmeta.get("creationTimestamp"):  # a child exists only later; its epoch is not judged here
            meta["creationTimestamp"] = pmeta["creationTimestamp"]
        return {"apiVersion": aiperf.API_VERSION, "kind": "AIPerfJob", "metadata": meta, "spec": child_spec}


def render_children(wl: SweepWorkload, plan: ChildPlan, variations: list[Variation], settings: Settings) -> None:
    """One rendered child per variation into `wl.children`, and the heaviest of them as `wl.worst`.

    200 run-config texts can hold 200 x ~1 MiB: only the heaviest child so far keeps its
    ConfigMap's data (every size is kept)."""
    for var in variations:
        trial_ids = plan.trial_ids()
        first = child_name(plan.sweep, var.index, trial_ids[0])
        try:
            cwl = aiperf.build(plan.child_obj(var, first), settings=settings, namespace=plan.namespace)
        except AdapterError as exc:
            raise SpecInvalid(f"variation {var.index} ({var.label}): {exc}") from exc
        child = SweepChild(
            name=first,
            variation=var.index,
            label=var.label,
            trials=[t or 0 for t in trial_ids],
            workload=cwl,
            names=[child_name(plan.sweep, var.index, t) for t in trial_ids],
            configmap_bytes=configmap_bytes(cwl),
        )
        wl.children.append(child)
        if cwl.render_errors or not cwl.pod_groups:
            _release_configmap(child)
        elif wl.worst is None or rank(child) < rank(wl.worst):
            if wl.worst is not None:
                _release_configmap(wl.worst)
            wl.worst = child
        else:
            _release_configmap(child)


def _release_configmap(c: SweepChild) -> None:
    """Drop a child's run-config text once its size is measured (the metadata stays)."""
    cm = c.workload.derived.get("configMap")
    if cm is not None and "data" in cm:
        c.workload.derived["configMap"] = {k: v for k, v in cm.items() if k != "data"}
