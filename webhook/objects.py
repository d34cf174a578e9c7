"""Typed views of the Kubernetes objects the checks read: pod specs, containers, volumes, nodes.

The field names and JSON types are Kubernetes v1's: k8s.io/api core/v1/types.go (PodSpec,
Container, ResourceRequirements, EnvVar, EnvFromSource, VolumeMount, Volume and its VolumeSource,
Toleration, Taint, PodTemplateSpec, Node, NodeSpec, NodeStatus, NodeCondition, NodeSystemInfo)
and k8s.io/apimachinery pkg/apis/meta/v1/types.go (ObjectMeta, OwnerReference).

Every view is a `TypedDict` with `total=False`: the objects stay the plain JSON dicts the
apiserver sends (nothing is copied or converted), a key may be missing, and a key not declared
here (Kubernetes adds fields) is kept and passed on untouched. The views declare what the checks
read; a nested structure they do not look into stays `dict[str, Any]`. A value that comes from a
user or the apiserver is still checked with `isinstance` where the code reads it: the view says
what the field is meant to hold, not that the input honours it.

Raw JSON becomes a view in one place each, `as_pod_spec`, `as_object_meta`, `as_node` and
`as_nodes`: the only casts of these types in the project.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, cast

__all__ = [
    "ResourceList",
    "ContainerListKey",
    "OwnerReference",
    "ObjectMeta",
    "ResourceClaim",
    "ResourceRequirements",
    "KeySelector",
    "EnvVarSource",
    "EnvVar",
    "NamedSource",
    "EnvFromSource",
    "VolumeMount",
    "ContainerPort",
    "Container",
    "KeyToPath",
    "SecretVolumeSource",
    "ConfigMapVolumeSource",
    "PersistentVolumeClaimVolumeSource",
    "VolumeProjection",
    "ProjectedVolumeSource",
    "EphemeralVolumeSource",
    "HostPathVolumeSource",
    "EmptyDirVolumeSource",
    "Volume",
    "Toleration",
    "Taint",
    "LocalObjectReference",
    "PodResourceClaim",
    "PodSpec",
    "PodTemplateSpec",
    "NodeSpec",
    "NodeCondition",
    "NodeSystemInfo",
    "NodeStatus",
    "Node",
    "as_pod_spec",
    "as_object_meta",
    "as_node",
    "as_nodes",
]

#: core/v1 ResourceList: resource name → Quantity. A Quantity is a string in the apiserver's JSON, but
#: users write plain numbers too (`cpu: 1`), so the value stays Any (webhook.quantity parses both).
ResourceList = dict[str, Any]


#: the PodSpec fields that hold a list of Containers (ephemeralContainers hold EphemeralContainers):
#: a loop over them with this type reads and writes the typed lists
ContainerListKey = Literal["initContainers", "containers"]


class OwnerReference(TypedDict, total=False):
    """meta/v1 OwnerReference."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    """meta/v1 ObjectMeta, the fields read."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]


class ResourceClaim(TypedDict, total=False):
    """core/v1 ResourceClaim: a claim of the pod a container uses (ResourceRequirements.claims)."""

    name: str
    request: str


class ResourceRequirements(TypedDict, total=False):
    """core/v1 ResourceRequirements."""

    limits: ResourceList
    requests: ResourceList
    claims: list[ResourceClaim]


class KeySelector(TypedDict, total=False):
    """core/v1 SecretKeySelector and ConfigMapKeySelector (the same JSON: LocalObjectReference inlined)."""

    name: str
    key: str
    optional: bool


class EnvVarSource(TypedDict, total=False):
    """core/v1 EnvVarSource; fieldRef, resourceFieldRef and fileKeyRef are not looked into."""

    fieldRef: dict[str, Any]
    resourceFieldRef: dict[str, Any]
    configMapKeyRef: KeySelector
    secretKeyRef: KeySelector
    fileKeyRef: dict[str, Any]


class EnvVar(TypedDict, total=False):
    """core/v1 EnvVar."""

    name: str
    value: str
    valueFrom: EnvVarSource


class NamedSource(TypedDict, total=False):
    """core/v1 SecretEnvSource and ConfigMapEnvSource (LocalObjectReference inlined, optional)."""

    name: str
    optional: bool


class EnvFromSource(TypedDict, total=False):
    """core/v1 EnvFromSource."""

    prefix: str
    configMapRef: NamedSource
    secretRef: NamedSource


class VolumeMount(TypedDict, total=False):
    """core/v1 VolumeMount."""

    name: str
    readOnly: bool
    recursiveReadOnly: str
    mountPath: str
    subPath: str
    mountPropagation: str
    subPathExpr: str


class ContainerPort(TypedDict, total=False):
    """core/v1 ContainerPort."""

    name: str
    hostPort: int
    containerPort: int
    protocol: str
    hostIP: str


class Container(TypedDict, total=False):
    """core/v1 Container (also the JSON of an init container). Probes, lifecycle and the security
    context are not looked into by a view: they stay plain dicts."""

    name: str
    image: str
    command: list[str]
    args: list[str]
    workingDir: str
    ports: list[ContainerPort]
    envFrom: list[EnvFromSource]
    env: list[EnvVar]
    resources: ResourceRequirements
    resizePolicy: list[dict[str, Any]]
    restartPolicy: str
    restartPolicyRules: list[dict[str, Any]]
    volumeMounts: list[VolumeMount]
    volumeDevices: list[dict[str, Any]]
    livenessProbe: dict[str, Any]
    readinessProbe: dict[str, Any]
    startupProbe: dict[str, Any]
    lifecycle: dict[str, Any]
    terminationMessagePath: str
    terminationMessagePolicy: str
    imagePullPolicy: str
    securityContext: dict[str, Any]
    stdin: bool
    stdinOnce: bool
    tty: bool


class KeyToPath(TypedDict, total=False):
    """core/v1 KeyToPath."""

    key: str
    path: str
    mode: int


class SecretVolumeSource(TypedDict, total=False):
    """core/v1 SecretVolumeSource."""

    secretName: str
    items: list[KeyToPath]
    defaultMode: int
    optional: bool


class ConfigMapVolumeSource(TypedDict, total=False):
    """core/v1 ConfigMapVolumeSource (LocalObjectReference inlined); also ConfigMapProjection and
    SecretProjection, the same JSON."""

    name: str
    items: list[KeyToPath]
    defaultMode: int
    optional: bool


class PersistentVolumeClaimVolumeSource(TypedDict, total=False):
    """core/v1 PersistentVolumeClaimVolumeSource."""

    claimName: str
    readOnly: bool


class VolumeProjection(TypedDict, total=False):
    """core/v1 VolumeProjection."""

    secret: ConfigMapVolumeSource
    configMap: ConfigMapVolumeSource
    downwardAPI: dict[str, Any]
    serviceAccountToken: dict[str, Any]
    clusterTrustBundle: dict[str, Any]
    podCertificate: dict[str, Any]


class ProjectedVolumeSource(TypedDict, total=False):
    """core/v1 ProjectedVolumeSource."""

    sources: list[VolumeProjection]
    defaultMode: int


class EphemeralVolumeSource(TypedDict, total=False):
    """core/v1 EphemeralVolumeSource: volumeClaimTemplate is a PersistentVolumeClaimTemplate
    (metadata and a PersistentVolumeClaimSpec), not looked into by a view."""

    volumeClaimTemplate: dict[str, Any]


class HostPathVolumeSource(TypedDict, total=False):
    """core/v1 HostPathVolumeSource."""

    path: str
    type: str


class EmptyDirVolumeSource(TypedDict, total=False):
    """core/v1 EmptyDirVolumeSource (sizeLimit is a Quantity)."""

    medium: str
    sizeLimit: Any


class Volume(TypedDict, total=False):
    """core/v1 Volume: its name and the VolumeSource inlined. The sources the checks read are typed;
    every other (the in-tree plugins, csi, image) is a plain dict."""

    name: str
    hostPath: HostPathVolumeSource
    emptyDir: EmptyDirVolumeSource
    secret: SecretVolumeSource
    persistentVolumeClaim: PersistentVolumeClaimVolumeSource
    configMap: ConfigMapVolumeSource
    projected: ProjectedVolumeSource
    ephemeral: EphemeralVolumeSource
    downwardAPI: dict[str, Any]
    csi: dict[str, Any]
    image: dict[str, Any]


class Toleration(TypedDict, total=False):
    """core/v1 Toleration."""

    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: int


class Taint(TypedDict, total=False):
    """core/v1 Taint."""

    key: str
    value: str
    effect: str
    timeAdded: str


class LocalObjectReference(TypedDict, total=False):
    """core/v1 LocalObjectReference (imagePullSecrets)."""

    name: str


class PodResourceClaim(TypedDict, total=False):
    """core/v1 PodResourceClaim."""

    name: str
    resourceClaimName: str
    resourceClaimTemplateName: str


class PodSpec(TypedDict, total=False):
    """core/v1 PodSpec. The security context, affinity and the scheduling structures not typed
    below stay plain dicts."""

    volumes: list[Volume]
    initContainers: list[Container]
    containers: list[Container]
    ephemeralContainers: list[dict[str, Any]]
    restartPolicy: str
    terminationGracePeriodSeconds: int
    activeDeadlineSeconds: int
    dnsPolicy: str
    nodeSelector: dict[str, str]
    serviceAccountName: str
    serviceAccount: str
    automountServiceAccountToken: bool
    nodeName: str
    hostNetwork: bool
    hostPID: bool
    hostIPC: bool
    shareProcessNamespace: bool
    securityContext: dict[str, Any]
    imagePullSecrets: list[LocalObjectReference]
    hostname: str
    subdomain: str
    affinity: dict[str, Any]
    schedulerName: str
    tolerations: list[Toleration]
    hostAliases: list[dict[str, Any]]
    priorityClassName: str
    priority: int
    dnsConfig: dict[str, Any]
    readinessGates: list[dict[str, Any]]
    runtimeClassName: str
    enableServiceLinks: bool
    preemptionPolicy: str
    overhead: ResourceList
    topologySpreadConstraints: list[dict[str, Any]]
    setHostnameAsFQDN: bool
    os: dict[str, Any]
    hostUsers: bool
    schedulingGates: list[dict[str, Any]]
    resourceClaims: list[PodResourceClaim]
    resources: ResourceRequirements
    hostnameOverride: str


class PodTemplateSpec(TypedDict, total=False):
    """core/v1 PodTemplateSpec."""

    metadata: ObjectMeta
    spec: PodSpec


class NodeSpec(TypedDict, total=False):
    """core/v1 NodeSpec, the fields read."""

    podCIDR: str
    podCIDRs: list[str]
    providerID: str
    unschedulable: bool
    taints: list[Taint]


class NodeCondition(TypedDict, total=False):
    """core/v1 NodeCondition."""

    type: str
    status: str
    lastHeartbeatTime: str
    lastTransitionTime: str
    reason: str
    message: str


class NodeSystemInfo(TypedDict, total=False):
    """core/v1 NodeSystemInfo."""

    machineID: str
    systemUUID: str
    bootID: str
    kernelVersion: str
    osImage: str
    containerRuntimeVersion: str
    kubeletVersion: str
    kubeProxyVersion: str
    operatingSystem: str
    architecture: str


class NodeStatus(TypedDict, total=False):
    """core/v1 NodeStatus, the fields read."""

    capacity: ResourceList
    allocatable: ResourceList
    phase: str
    conditions: list[NodeCondition]
    addresses: list[dict[str, Any]]
    nodeInfo: NodeSystemInfo
    runtimeHandlers: list[dict[str, Any]]
    declaredFeatures: list[str]


class Node(TypedDict, total=False):
    """core/v1 Node."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus


def as_pod_spec(raw: dict[str, Any]) -> PodSpec:
    """A PodSpec view of a JSON object: the same dict, not copied or checked. Call it where a pod spec
    leaves its parsed JSON (an adapter's validated fragment, an object read from the apiserver)."""
    return cast(PodSpec, raw)


def as_object_meta(raw: dict[str, Any]) -> ObjectMeta:
    """An ObjectMeta view of a JSON object's `metadata` (the same dict)."""
    return cast(ObjectMeta, raw)


def as_node(raw: dict[str, Any]) -> Node:
    """A Node view of a Node read from the apiserver (the same dict)."""
    return cast(Node, raw)


def as_nodes(raw: list[dict[str, Any]]) -> list[Node]:
    """Node views of the cluster view's cached Nodes (ClusterView.list_cached("nodes")): the same list,
    not copied, so that a listing kept per cache version stays the one object."""
    return cast(list[Node], raw)
