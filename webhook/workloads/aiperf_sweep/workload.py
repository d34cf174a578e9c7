"""The sweep's Workload: the peak pod groups, every child, and how children are ranked.

What runs at once is the sweep-controller pod plus one child (AIPerf 0.13.0's
`orchestrator/orchestrator.py` awaits each child's terminal phase before it starts the next), so
`SweepWorkload.pod_groups` is the controller group plus the groups of the heaviest child: the
first by `worst_first` (most pods, then most CPU and memory requested, then the biggest
run-config ConfigMap). Every child stays in `SweepWorkload.children` for the per-child checks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.quantity import parse_quantity
from webhook.workloads.base import PodGroup, Workload, text_bytes


@dataclass
class SweepChild:
    """One child AIPerfJob: a (variation, trial) cell the sweep controller creates."""

    name: str
    variation: int
    label: str
    trials: list[int]  # the trial indexes that share this render ([0] without a trial suffix)
    workload: Workload
    #: every trial's child name, e.g. ["s-v03-t0", "s-v03-t1"]
    names: list[str] = field(default_factory=list)

    @property
    def pods(self) -> int:
        return self.workload.total_pods

    @functools.cached_property
    def requests(self) -> tuple[int, Decimal, Decimal]:
        """(pods, CPU cores, memory bytes) requested in all: computed once, ranked and reported often."""
        return requests_of(self.workload)

    #: the run-config ConfigMap's payload size (measured before its data is released, see `build`)
    configmap_bytes: int = 0

    def describe(self) -> str:
        """`s-v03 (phases.profiling.concurrency=64)`: how messages name a child."""
        return f"{self.name} ({self.label})"


@dataclass
class SweepWorkload(Workload):
    """A Workload whose pod groups are the peak (controller + heaviest child) and which keeps every child."""

    children: list[SweepChild] = field(default_factory=list)
    #: variations the operator counts (samples / iterations for run-time sampled sweeps)
    variations: int = 0
    trials: int = 1
    sweep_type: str = "grid"
    #: "repeated" (trials outer, variations inner: the default) or "independent"
    iteration_order: str = "repeated"
    #: the controller's own derived objects (JobSet, ServiceAccount, Role, RoleBinding)
    controller_objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the child whose pods are the pod groups after the controller (None when nothing rendered)
    worst: SweepChild | None = None
    #: notes for plan/Sweep Children (e.g. "children sampled at run time")
    notes: list[str] = field(default_factory=list)
    #: the variations left unrendered to keep the review within its deadline (`s-v07 (label)` each, in
    #: order): their children are not verified (children.render_children)
    unrendered: list[str] = field(default_factory=list)
    #: pod group name → (the Workload whose controller creates those pods, its own group)
    _sources: dict[str, tuple[Workload, PodGroup]] = field(default_factory=dict)

    def run_order(self) -> list[tuple[str, SweepChild]]:
        """Every child run (name, its variation's child) in the order the controller creates them
        (orchestrator.py: repeated = trials outer, variations inner; independent = the reverse)."""
        if self.iteration_order == "independent":
            return [(n, c) for c in self.children for n in c.names]
        most = max((len(c.names) for c in self.children), default=0)
        return [(c.names[t], c) for t in range(most) for c in self.children if t < len(c.names)]

    def set_peak(self, controller: PodGroup) -> None:
        """The peak's pod groups and objects: the controller's JobSet and ServiceAccount, and the
        heaviest child's JobSet and ConfigMap, its groups named `v<NN>-<group>`."""
        self.derived = {
            "jobSet": self.controller_objects["jobSet"],
            "serviceAccount": self.controller_objects["serviceAccount"],
        }
        self.pod_groups = [controller]
        if self.worst is None:
            return
        cwl = self.worst.workload
        self.queue_name = cwl.queue_name
        for key in ("jobSet", "configMap"):
            if key in cwl.derived:
                self.derived["child" + key[0].upper() + key[1:]] = cwl.derived[key]
        for g in cwl.pod_groups:
            peak = PodGroup(name=f"v{self.worst.variation:02d}-{g.name}", pods=g.pods, pod_spec=g.pod_spec,
                            pod_metadata=g.pod_metadata, role=f"{g.role} of child {self.worst.name}")  # fmt: skip
            self.pod_groups.append(peak)
            self._sources[peak.name] = (cwl, g)

    def group_source(self, group: PodGroup) -> tuple[Workload, PodGroup]:
        """Who creates a group's pods: the child AIPerfJob (its JobSet) for a child group, else the sweep."""
        return self._sources.get(group.name, (self, group))


def _quantity(value: Any) -> Decimal:
    """A request's exact value (`webhook.quantity`); one Kubernetes would refuse counts 0 in the ranking."""
    try:
        return parse_quantity(value if value is not None else 0)
    except ValueError:
        return Decimal(0)


def requests_of(wl: Workload) -> tuple[int, Decimal, Decimal]:
    """(pods, CPU cores, memory bytes) a Workload requests in all (containers' requests, init excluded)."""
    cpu = mem = Decimal(0)
    for g in wl.pod_groups:
        for c in g.containers(init=False):
            req = (c.get("resources") or {}).get("requests") or {}
            cpu += _quantity(req.get("cpu")) * g.pods
            mem += _quantity(req.get("memory")) * g.pods
    return wl.total_pods, cpu, mem


def configmap_bytes(wl: Workload) -> int:
    cm = wl.derived.get("configMap") or {}
    return sum(len(str(k).encode()) + text_bytes(v) for k, v in (cm.get("data") or {}).items())


def rank(c: SweepChild) -> tuple[Any, ...]:
    """The sort key of `worst_first` (smaller is heavier)."""
    return (*(-x for x in c.requests), -c.configmap_bytes, c.variation)


def worst_first(children: list[SweepChild]) -> list[SweepChild]:
    """Most workers (pods), then largest requests, then biggest ConfigMap, first."""
    return sorted(children, key=rank)
