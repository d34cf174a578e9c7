"""The Workload: what a job will create, as every check sees it.

An adapter turns one Kubernetes object (plain JSON dict) into a Workload: its pod
groups (a replicatedJob of the JobSet: how many pods, and the PodSpec each pod gets)
and the objects the job's controller would derive (the JobSet, a ConfigMap).
Kubernetes objects stay plain dicts; a pod group's PodSpec and pod metadata are read through
the typed views of webhook/objects.py (the same dicts, typed as core/v1 declares them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from webhook.objects import Container, ObjectMeta, PodSpec


@dataclass(frozen=True)
class JsonText:
    """A derived object's JSON text, measured but not written: its document and its exact size.

    An adapter leaves a text unwritten when it is over a limit that a check only measures and
    reports: an AIPerf run_config.json nested deep is many times its document (its 2-space indent
    grows with the depth), so writing it would cost depth × size. `str()` writes it."""

    doc: Any
    #: bytes of the text (UTF-8)
    nbytes: int
    write: Callable[[Any], str] = field(repr=False)

    def __str__(self) -> str:
        return self.write(self.doc)


def text_bytes(value: Any) -> int:
    """Bytes (UTF-8) of a derived object's data value: a text, or a JsonText left unwritten."""
    if isinstance(value, JsonText):
        return value.nbytes
    return len(str(value).encode("utf-8"))


@dataclass
class PodGroup:
    """One replicatedJob: `pods` identical pods built from `pod_spec`."""

    name: str
    pods: int
    pod_spec: PodSpec
    pod_metadata: ObjectMeta = field(default_factory=ObjectMeta)
    # role of the group for messages: "controller", "workers", "trainer", "dataset-initializer", ...
    role: str = ""
    # JobSet `dependsOn` of this replicatedJob: (group name, "Ready" | "Complete") pairs. Its pods
    # are created only once those groups reach that status (sigs.k8s.io/jobset
    # pkg/controllers/depends_on.go), so a group after a "Complete" dependency never runs at the
    # same time as it (quota and Kueue arithmetic take the peak over such stages).
    depends_on: list[tuple[str, str]] = field(default_factory=list)
    # whether the job's Kueue workload holds these pods (an AIPerfSweep's sweep-controller JobSet
    # carries no queue label: only its children queue)
    queued: bool = True

    def containers(self, *, init: bool = True) -> list[Container]:
        out = list(self.pod_spec.get("containers") or [])
        if init:
            out = list(self.pod_spec.get("initContainers") or []) + out
        return out


@dataclass(frozen=True)
class KindFacts:
    """What differs between kinds where a check must say what acts on a job or where a fix goes.

    The kind's adapter sets them, so no check names a kind (docs/development.md, "A new workload
    kind"). The defaults are a plain JobSet's."""

    #: the controllers that turn the object into pods in this cluster, in order, as users name them
    #: ("AIPerf operator", "Trainer", "JobSet"); Controllers adds Kueue when the job queues
    controllers: tuple[str, ...] = ("JobSet",)
    #: where a pod-level field (nodeSelector, tolerations) is set, "{field}" filled in
    pod_field: str = "spec.replicatedJobs[].template.spec.template.spec.{field}"
    #: where the pods' image pull Secrets are listed
    pull_secrets_at: str = "imagePullSecrets on the pods"
    #: where a container's resources are set: (container name, where), "" for any other container
    resources_at: tuple[tuple[str, str], ...] = (("", "the container's resources.limits"),)
    #: the key of `derived` that is the applied object itself (a JobSet applied directly): it has no
    #: owner, and the apiserver's own admission of this very request judges it (no dry run of it)
    derived_self: str = ""
    #: the name of the JobSet its controller makes is the job's with this prefix ("aiperf-": AIPerf's operator)
    jobset_prefix: str = ""
    #: the field besides the Kueue label that names the job's queue ("spec.scheduling.queueName"), and
    #: whether its controller falls back to a default queue of its own (the AIPerf operator's)
    queue_field: str = ""
    default_queue: bool = False
    #: what the Fix of a container without requests or limits adds: (("requests" | "limits", hint), ...)
    resources_hint: tuple[tuple[str, str], ...] = ()
    #: network paths beyond pod-to-pod (Network Policies): its workers call the endpoint URLs of its
    #: spec and the AIPerf operator polls its pods' OPERATOR_PORTS (an AIPerf benchmark)
    calls_endpoints: bool = False
    #: the ports named as the AIPerf operator's (OPERATOR_PORTS) are never pod-to-pod traffic
    operator_ports: bool = True
    #: a distributed training: only the groups that talk (the trainer nodes) reach the other groups, and
    #: they open collective connections (NCCL, Gloo, MPI) on ports of their own choosing
    collective: bool = False
    #: what a dropped pod-to-pod path does to the job
    peer_consequence: str = "the job's pods cannot connect"

    def resources_of(self, container: str) -> str:
        by_name = dict(self.resources_at)
        return by_name.get(container) or by_name.get("") or "the container's resources.limits"


@dataclass
class Workload:
    kind: str
    api_version: str
    name: str
    namespace: str
    obj: dict[str, Any]
    pod_groups: list[PodGroup] = field(default_factory=list)
    # derived objects as full manifests: {"jobSet": {...}, "configMap": {...}}
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Kueue LocalQueue name the job asks for (label or AIPerf scheduling.queueName), if any
    queue_name: str | None = None
    # TrainJob spec.managedBy (kueue.x-k8s.io/multikueue → runs elsewhere)
    managed_by: str | None = None
    # the (Cluster)TrainingRuntime used, when known
    runtime: dict[str, Any] | None = None
    # why runtime-dependent facts are unknown (e.g. "runtime ClusterTrainingRuntime \"x\" not given");
    # checks that need pod groups skip with this reason
    incomplete_reason: str | None = None
    # reasons the job's controller would refuse to render it: (message-with-fix) lines
    render_errors: list[str] = field(default_factory=list)
    # secrets the job's own controller creates (never required to pre-exist)
    managed_secrets: set[str] = field(default_factory=set)
    # ServiceAccounts the job's own controller creates (e.g. an AIPerfSweep's sweep-controller account)
    managed_service_accounts: set[str] = field(default_factory=set)
    # extra secret references that are not in any pod spec: (secret, key|None, optional, field path)
    extra_secret_refs: list[tuple[str, str | None, bool, str]] = field(default_factory=list)
    # what differs between kinds (who acts on the job, where fixes go): set by the adapter
    facts: KindFacts = field(default_factory=KindFacts)
    # the render cache's id of this render (webhook/workloads/render_cache.py: one per render it made,
    # never reused), None when not rendered through it; the Dry Run check memoizes its probes' digests by it
    render_id: int | None = None
    # the adapter left out renders to keep the review within its deadline (webhook.deadline.render_time_left):
    # what it left is named by the kind's checks as not verified, and such a render is never cached
    cut_short: bool = False

    @property
    def ref(self) -> str:
        """`AIPerfJob bench/llama-sweep`: how messages name the object."""
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def total_pods(self) -> int:
        return sum(g.pods for g in self.pod_groups)

    def group_source(self, group: PodGroup) -> tuple[Workload, PodGroup]:
        """Who creates a group's pods, and as which of its own groups: the job itself (an
        AIPerfSweep answers with the child AIPerfJob whose JobSet creates them)."""
        return self, group


class RuntimeLookup(Protocol):
    """Finds a (Cluster)TrainingRuntime; offline from the input file, online from the cache."""

    def __call__(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...


class AdapterError(ValueError):
    """The object cannot be read as its kind at all (a client mistake, not a check verdict)."""
