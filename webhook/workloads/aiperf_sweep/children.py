"""The child AIPerfJobs: AIPerf 0.13.0's `sweep_controller/k8s_executor.py`.

`_build_child_spec`: a child is the parent spec without the sweep-only fields, with the
variation's benchmark and variables and the trial's seed; `_build_child_metadata`: its name
(`naming.child_name`) and the sweep's labels. Each child is rendered by the AIPerfJob adapter
(`webhook.workloads.aiperf.build`), as the operator renders any AIPerfJob. Trials of one variation
differ only in name and seed, so each variation is rendered once and its trials share that render.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.config import Settings
from webhook.deadline import render_time_left, rendering_for_review
from webhook.kube import placeholder_uid
from webhook.objects import Container, ContainerListKey, ObjectMeta
from webhook.workloads import aiperf
from webhook.workloads.aiperf.jobset import shared_pod_templates
from webhook.workloads.aiperf_sweep.expansion import Variation
from webhook.workloads.aiperf_sweep.naming import child_name, sanitize_for_label
from webhook.workloads.aiperf_sweep.spec import SpecInvalid
from webhook.workloads.aiperf_sweep.workload import SweepChild, SweepWorkload, configmap_bytes, rank
from webhook.workloads.base import AdapterError, PodGroup
from webhook.workloads.walks import is_plain, verified_plain

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
        # keys the child's objects as the child's own review will (webhook.models.dryrun_cache).
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

    200 run-config texts can hold 200 x ~1 MiB: only the heaviest child so far keeps its ConfigMap's
    data (every size is kept). In a review (webhook.deadline.rendering_for_review) memory stays about
    one full render: 200 JobSets held 200 copies of a large pod template's env lists, so every child
    but the heaviest keeps only what the per-child checks read (`_slim`: sizes, names, pod requests).
    Time is bounded by the review's deadline: once the adapter's share of it is spent
    (webhook.deadline.render_time_left), the variations not rendered yet are listed in
    `wl.unrendered` (named "not verified" by Sweep Children) and the peak is the heaviest rendered.
    The first variation is always rendered, so the sweep's pods are judged."""
    # a child is the parent's values (shared, not copied) plus names, labels and the variation's values,
    # themselves the parent's: a plain parent has plain children, not walked again for each
    plain = is_plain(plan.parent)
    # for a review, every child but the heaviest keeps only what the checks read; a plain build (the plan,
    # the audit's child list, the oracles) keeps every child's whole render, released ConfigMap text aside
    release = _slim if rendering_for_review() else _release_configmap
    with shared_pod_templates():  # the children hold the parent's podTemplate: validated once
        _render(wl, plan, variations, settings, plain, release)


def _render(
    wl: SweepWorkload,
    plan: ChildPlan,
    variations: list[Variation],
    settings: Settings,
    plain: bool,
    release: Callable[[SweepChild], None],
) -> None:
    for n, var in enumerate(variations):
        if n and not render_time_left():
            wl.unrendered = [
                f"{child_name(plan.sweep, v.index, plan.trial_ids()[0])} ({v.label})" for v in variations[n:]
            ]
            wl.cut_short = True
            break
        trial_ids = plan.trial_ids()
        first = child_name(plan.sweep, var.index, trial_ids[0])
        obj = plan.child_obj(var, first)
        try:
            with verified_plain(obj if plain else None):
                cwl = aiperf.build(obj, settings=settings, namespace=plan.namespace)
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
            release(child)
        elif wl.worst is None or rank(child) < rank(wl.worst):
            if wl.worst is not None:
                release(wl.worst)
            wl.worst = child
        else:
            release(child)


def _release_configmap(c: SweepChild) -> None:
    """Drop a child's run-config text once its size is measured (the metadata stays)."""
    cm = c.workload.derived.get("configMap")
    if cm is not None and "data" in cm:
        c.workload.derived["configMap"] = {k: v for k, v in cm.items() if k != "data"}


def _slim_container(c: Container) -> Container:
    """What a container keeps in a slimmed child: what quota admission and the plan's requests read
    (its name, resources and restartPolicy, in that order)."""
    out = Container()
    if "name" in c:
        out["name"] = c["name"]
    if "resources" in c:
        out["resources"] = c["resources"]
    if "restartPolicy" in c:
        out["restartPolicy"] = c["restartPolicy"]
    return out


def _slim(c: SweepChild) -> None:
    """Keep of a child that is not the heaviest what the per-child checks and the plan read: its
    object, names, pod requests (`requests`, and each pod group's pod spec without volumes and with
    containers reduced to their name, resources and restartPolicy), its ConfigMap's size and metadata,
    its JobSet's name and replicatedJobs (names, replicas, completions, parallelism)."""
    _ = c.requests  # measured on the whole render, kept
    cwl = c.workload
    cm = cwl.derived.get("configMap")
    if cm is not None:
        cwl.derived["configMap"] = {k: v for k, v in cm.items() if k != "data"}
    js = cwl.derived.get("jobSet")
    if js is not None:
        rjobs = (js.get("spec") or {}).get("replicatedJobs")
        skeleton: dict[str, Any] = {k: v for k, v in js.items() if k != "spec"}
        if isinstance(rjobs, list):
            kept = []
            for rj in rjobs:
                if not isinstance(rj, dict):
                    continue
                spec = (rj.get("template") or {}).get("spec") or {}
                job = {k: spec[k] for k in ("completions", "parallelism") if k in spec}
                kept.append({"name": rj.get("name"), "replicas": rj.get("replicas"), "template": {"spec": job}})
            skeleton["spec"] = {"replicatedJobs": kept}
        cwl.derived["jobSet"] = skeleton
    cwl.pod_groups = [_slim_group(g) for g in cwl.pod_groups]


def _slim_group(g: PodGroup) -> PodGroup:
    pod = g.pod_spec.copy()
    pod.pop("containers", None)
    pod.pop("initContainers", None)
    pod.pop("volumes", None)
    keys: tuple[ContainerListKey, ...] = ("containers", "initContainers")
    for key in keys:
        items = g.pod_spec.get(key)
        if isinstance(items, list):
            pod[key] = [_slim_container(c) for c in items if isinstance(c, dict)]
    return dataclasses.replace(g, pod_spec=pod, pod_metadata=ObjectMeta())
