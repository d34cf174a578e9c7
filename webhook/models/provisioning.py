"""Could anything in the cluster add a node the pods can use? (for the placement checks)

Node Selector Match and Per-Node Schedulability judge the nodes that exist. A pod that no
node takes today still runs when something adds a node that does, so before they deny they
ask this module what could add one:

* **Karpenter** (karpenter.sh/v1 NodePools, cached): a NodePool could launch a node for the
  pod when its template's requirements and labels are *compatible* with the pod's node
  selection and the pod tolerates every taint of the template. This follows Karpenter's own
  code (sigs.k8s.io/karpenter v1.13.0, pkg/scheduling/requirement.go, requirements.go
  `Compatible` with `AllowUndefinedWellKnownLabels`, taints.go `Taints.Tolerates`; the
  template: pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go NewNodeClaimTemplate —
  requirements + template labels + `karpenter.sh/nodepool` and the NodeClass label;
  nodeclaim.go CanAdd checks the template's
  taints, then Compatible): a custom label the pod asks for must
  be defined by the NodePool, a well-known one (zone, region, instance type, arch, os,
  capacity type, windows build; and the cloud providers' own `karpenter.*` domains, which
  they add to the well-known set) may be left open. Instance types, limits and the
  NodePool's readiness are not modelled: a compatible NodePool counts as "could add".
* **cluster-autoscaler**: it publishes its status ConfigMap (`--status-config-map-name`,
  default `cluster-autoscaler-status`, in its `--namespace`, default `kube-system`; the
  place is `nodeProvisioning.clusterAutoscalerStatus`). The ConfigMap does not say what its
  node groups' templates look like, so its presence alone counts as "could add".
* **Kueue ResourceFlavors** (kueue.x-k8s.io/v1beta2, cached): a flavor describes nodes by
  `nodeLabels` and `nodeTaints`, and Kueue adds its `tolerations` to the pods it admits on
  it. A flavor could place the pod when its labels are compatible with the pod's selection
  (Karpenter's rule above, the flavor's labels as the only defined ones) and the pod, with
  the flavor's tolerations, tolerates its taints. A flavor adds no node by itself, though:
  the fidelity matrix on the real stack (docs/fidelity.md, `cpu-more-than-a-node-has`) saw a
  job admitted because of a label-less flavor never start. So a flavor counts as "could add"
  only when it names `nodeLabels` that no node carries today: a pool the admin expects but
  that has no node now (scaled to zero, or made by a provisioner we cannot see). A flavor
  without labels, or whose nodes exist, describes the nodes already judged.

A source that cannot be read (its API is served but the cache is missing: no permission, not
synced; the ConfigMap read is refused or fails) is named as unreadable, and the caller warns
instead of denying: unknown is never a deny.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.config import Settings
from webhook.kube import ApiError, Permission
from webhook.models.apis import KUEUE_API
from webhook.models.context import CheckContext, before_deadline
from webhook.models.nodes import label_values, node_listing, tolerates
from webhook.objects import Node, PodSpec

KARPENTER_API = "karpenter.sh/v1"
NODEPOOL_LABEL = "karpenter.sh/nodepool"

#: karpenter v1.13.0 pkg/apis/v1/labels.go WellKnownLabels
WELL_KNOWN_LABELS = frozenset(
    {
        NODEPOOL_LABEL,
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "karpenter.sh/capacity-type",
        "node.kubernetes.io/windows-build",
    }
)
#: karpenter pkg/apis/v1/labels.go NormalizedLabels: aliases a pod may use
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
}

#: the autoscaler's ConfigMap read is reused this long (every pod group, every review in a burst)
AUTOSCALER_STATUS_TTL = 5.0

PERMISSIONS = (
    Permission("list", "nodepools", "karpenter.sh"),
    Permission("watch", "nodepools", "karpenter.sh"),
    Permission("list", "resourceflavors", "kueue.x-k8s.io"),
    Permission("watch", "resourceflavors", "kueue.x-k8s.io"),
)


def autoscaler_status_ref(settings: Settings) -> tuple[str, str] | None:
    """(namespace, name) of cluster-autoscaler's status ConfigMap, None when not looked for."""
    ref = settings.node_provisioning.cluster_autoscaler_status
    if not ref:
        return None
    ns, _, name = ref.partition("/")
    return ns, name


def autoscaler_permissions(settings: Settings) -> tuple[Permission, ...]:
    """`get` of that one ConfigMap (a Role in its namespace, not `get configmaps` cluster-wide)."""
    ref = autoscaler_status_ref(settings)
    return () if ref is None else (Permission("get", "configmaps", namespace=ref[0], name=ref[1]),)


def _well_known(key: str) -> bool:
    """Karpenter's well-known labels, plus the providers' own domains (karpenter.k8s.aws/…,
    karpenter.azure.com/…): providers add their labels to the well-known set at start-up."""
    if key in WELL_KNOWN_LABELS:
        return True
    domain = key.split("/", 1)[0] if "/" in key else ""
    return domain.startswith("karpenter.") and domain != "karpenter.sh"


# --- Karpenter's requirement sets (pkg/scheduling/requirement.go) ---------------------------


@dataclass(frozen=True)
class Requirement:
    """One key's allowed values: `values` (complement=False) or everything but `values`
    (complement=True), optionally bounded by inclusive integer bounds (Karpenter v1.13 turns
    Gt N into gte N+1 and Lt N into lte N-1)."""

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    gte: int | None = None
    lte: int | None = None

    @staticmethod
    def of(key: str, operator: str, values: list[str] | tuple[str, ...] = ()) -> Requirement:
        key = NORMALIZED_LABELS.get(key, key)
        vals = frozenset(str(v) for v in values)
        if operator == "In":
            return Requirement(key, False, vals)
        if operator == "NotIn":
            return Requirement(key, True, vals)
        if operator == "DoesNotExist":
            return Requirement(key, False)
        if operator in ("Gt", "Lt", "Gte", "Lte"):
            try:
                bound = int(next(iter(vals)))
            except (StopIteration, ValueError):
                return Requirement(key, True)  # invalid: the apiserver refuses it; treat as Exists
            if operator == "Gt":
                return Requirement(key, True, gte=bound + 1)
            if operator == "Lt":
                return Requirement(key, True, lte=bound - 1)
            return Requirement(key, True, gte=bound) if operator == "Gte" else Requirement(key, True, lte=bound)
        return Requirement(key, True)  # Exists

    def intersection(self, other: Requirement) -> Requirement:
        complement = self.complement and other.complement
        gte = _max(self.gte, other.gte)
        lte = _min(self.lte, other.lte)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False)
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = frozenset(v for v in values if _within(v, gte, lte))
        if not complement:
            gte = lte = None
        return Requirement(self.key, complement, values, gte, lte)

    def empty(self) -> bool:
        """Not HasIntersection: no value satisfies it (a complement set within its bounds never is)."""
        return not self.complement and not self.values

    @property
    def operator(self) -> str:
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _within(value: str, gte: int | None, lte: int | None) -> bool:
    if gte is None and lte is None:
        return True
    try:
        v = int(value)
    except ValueError:
        return False
    return (gte is None or v >= gte) and (lte is None or v <= lte)


Requirements = dict[str, Requirement]


def add(reqs: Requirements, *items: Requirement) -> Requirements:
    for r in items:
        have = reqs.get(r.key)
        reqs[r.key] = r.intersection(have) if have is not None else r
    return reqs


def from_labels(labels: dict[str, Any]) -> Requirements:
    return add({}, *(Requirement.of(k, "In", [str(v)]) for k, v in labels.items()))


def from_expressions(exprs: list[dict[str, Any]]) -> Requirements:
    return add(
        {},
        *(
            Requirement.of(str(e.get("key", "")), str(e.get("operator", "")), [str(v) for v in e.get("values") or []])
            for e in exprs
            if isinstance(e, dict)
        ),
    )


def pod_requirement_options(pod_spec: PodSpec) -> list[Requirements]:
    """The pod's node selection as Karpenter reads it (newPodRequirements): nodeSelector plus
    one required nodeSelectorTerm at a time (Karpenter relaxes to the next term when one
    cannot be met), so one Requirements per term; matchFields are not labels and are ignored."""
    sel = pod_spec.get("nodeSelector")
    base = from_labels(dict(sel) if isinstance(sel, dict) else {})
    aff = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = (aff or {}).get("nodeSelectorTerms") if isinstance(aff, dict) else None
    if not terms:
        return [base]
    out = []
    for t in terms if isinstance(terms, list) else []:
        exprs = t.get("matchExpressions") if isinstance(t, dict) else None
        r = dict(base)
        add(r, *from_expressions(exprs if isinstance(exprs, list) else []).values())
        out.append(r)
    return out or [base]


def incompatibility(offered: Requirements, wanted: Requirements, *, allow_well_known: bool = True) -> str:
    """Karpenter's Requirements.Compatible(wanted, AllowUndefinedWellKnownLabels): "" when
    compatible, else the first reason."""
    for key in sorted(wanted):
        if allow_well_known and _well_known(key):
            continue
        if key in offered or wanted[key].operator in ("NotIn", "DoesNotExist"):
            continue
        return f"label {key} is not defined"
    for key in sorted(set(offered) & set(wanted)):
        have, want = offered[key], wanted[key]
        if have.intersection(want).empty():
            if want.operator in ("NotIn", "DoesNotExist") and have.operator in ("NotIn", "DoesNotExist"):
                continue
            return f"{key} {want.operator} {sorted(want.values)} not in {have.operator} {sorted(have.values)}"
    return ""


# --- taints --------------------------------------------------------------------------------


def untolerated(taints: list[dict[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Karpenter's Taints.Tolerates: every taint of a template (any effect) must be tolerated."""
    return [t for t in taints if isinstance(t, dict) and not any(tolerates(tol, t) for tol in tolerations)]


# --- the sources -------------------------------------------------------------------------


@dataclass
class Provisioning:
    """What could add a node for one pod group, and what could not be read."""

    could_add: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    looked_at: list[str] = field(default_factory=list)

    @property
    def certain_none(self) -> bool:
        """Nothing could add a node, and every source was read."""
        return not self.could_add and not self.unreadable

    def clause(self) -> str:
        """What the placement checks add to a finding: why it denies, or why it only warns."""
        if self.could_add:
            return "but a node could still be added (" + "; ".join(self.could_add) + ")"
        if self.unreadable:
            return "and whether a node could be added is unknown (" + "; ".join(self.unreadable) + ")"
        return "and nothing could add one (" + ", ".join(self.looked_at) + ")"


def _nodepool_template(np: dict[str, Any]) -> tuple[Requirements, list[dict[str, Any]]]:
    name = str((np.get("metadata") or {}).get("name", ""))
    template = (np.get("spec") or {}).get("template") or {}
    tspec = template.get("spec") or {}
    reqs = from_expressions(list(tspec.get("requirements") or []))
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels[NODEPOOL_LABEL] = name
    ref = tspec.get("nodeClassRef") or {}
    if ref.get("group") and ref.get("kind"):  # v1.NodeClassLabelKey
        labels[f"{ref['group']}/{str(ref['kind']).lower()}"] = str(ref.get("name", ""))
    add(reqs, *from_labels(labels).values())
    return reqs, list(tspec.get("taints") or [])


def nodepools_for(pod_spec: PodSpec, nodepools: list[dict[str, Any]]) -> list[str]:
    """Names of the NodePools that could launch a node for this pod."""
    options = pod_requirement_options(pod_spec)
    tolerations = [t for t in pod_spec.get("tolerations") or [] if isinstance(t, dict)]
    out = []
    for np in nodepools:
        offered, taints = _nodepool_template(np)
        if untolerated(taints, tolerations):
            continue
        if any(not incompatibility(offered, want) for want in options):
            out.append(str((np.get("metadata") or {}).get("name", "?")))
    return out


def flavors_for(pod_spec: PodSpec, flavors: list[dict[str, Any]], nodes: list[Node] | None = None) -> list[str]:
    """Names of the ResourceFlavors that stand for nodes not there yet and that could take this pod.

    A flavor without `nodeLabels`, or one some node in `nodes` already carries every label of,
    describes existing nodes (see the module docstring) and is not counted.
    """
    options = pod_requirement_options(pod_spec)
    base_tols = [t for t in pod_spec.get("tolerations") or [] if isinstance(t, dict)]
    carried = _carried(nodes or [], flavors)
    out = []
    for rf in flavors:
        spec = rf.get("spec") or {}
        labels = dict(spec.get("nodeLabels") or {})
        if not labels or carried(labels):
            continue
        offered = from_labels(labels)
        tols = base_tols + [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
        taints = [t for t in spec.get("nodeTaints") or [] if isinstance(t, dict)]
        if [
            t
            for t in taints
            if t.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(x, t) for x in tols)
        ]:
            continue
        if any(not incompatibility(offered, want) for want in options):
            out.append(str((rf.get("metadata") or {}).get("name", "?")))
    return out


def _carried(nodes: list[Node], flavors: list[dict[str, Any]]) -> Callable[[dict[str, Any]], bool]:
    """Whether some node carries every label of a flavor's `nodeLabels`. The nodes are read once
    per kind of node for the label keys the flavors name (nodes.label_values, kept per Node
    listing), not once per Node and flavor; none are read when no flavor names a label."""
    keys = tuple(
        sorted(
            {
                k
                for rf in flavors
                if isinstance(labels := (rf.get("spec") or {}).get("nodeLabels"), dict)
                for k in labels
                if isinstance(k, str)
            }
        )
    )
    present = label_values(nodes, keys) if keys and nodes else set()
    at = {k: i for i, k in enumerate(keys)}
    #: the label positions a flavor names -> the values the nodes hold there
    projected: dict[tuple[int, ...], set[tuple[Any, ...]]] = {}

    def carried(labels: dict[str, Any]) -> bool:
        positions = [at.get(k) for k in labels]
        where = tuple(i for i in positions if i is not None)
        if len(where) < len(positions):  # a label no flavor key list holds: not a string key
            return False
        seen = projected.get(where)
        if seen is None:
            seen = projected[where] = {tuple(values[i] for i in where) for values in present}
        try:
            return tuple(labels.values()) in seen
        except TypeError:  # a value that is not a string (only a hand-made flavor has one) is on no node
            return False

    return carried


async def provisioning_for(ctx: CheckContext, pod_spec: PodSpec) -> Provisioning:
    """Ask every source whether it could add a node for a pod with `pod_spec`."""
    assert ctx.view is not None
    view = ctx.view
    p = Provisioning()
    # Karpenter
    if not view.served(KARPENTER_API):
        p.looked_at.append("Karpenter not installed")
    elif view.cache_age("nodepools") is None:
        p.unreadable.append("Karpenter NodePools unreadable: no list/watch permission, or not synced")
    else:
        pools = view.list_cached("nodepools")
        names = nodepools_for(pod_spec, pools)
        if names:
            p.could_add.append("Karpenter NodePool " + ", ".join(f'"{n}"' for n in names[:3]))
        else:
            p.looked_at.append(f"no Karpenter NodePool matches (of {len(pools)})")
    # cluster-autoscaler
    ref = autoscaler_status_ref(ctx.settings)
    if ref is None:
        p.looked_at.append("cluster-autoscaler not looked for (nodeProvisioning.clusterAutoscalerStatus is empty)")
    else:
        ns, name = ref
        try:
            cm = await before_deadline(
                ctx, view.get_object("v1", "configmaps", ns, name, ctx.deadline, ttl=AUTOSCALER_STATUS_TTL)
            )
        except ApiError as exc:
            why = "not permitted to get configmaps" if exc.forbidden else exc.message
            p.unreadable.append(f"cluster-autoscaler status ConfigMap {ns}/{name} unreadable: {why}")
        else:
            if cm is not None:
                p.could_add.append(f"cluster-autoscaler (its status ConfigMap {ns}/{name} exists)")
            else:
                p.looked_at.append(f"no cluster-autoscaler status ConfigMap {ns}/{name}")
    # Kueue ResourceFlavors
    if not view.served(KUEUE_API):
        p.looked_at.append("Kueue not installed")
    elif view.cache_age("resourceflavors") is None:
        p.unreadable.append("Kueue ResourceFlavors unreadable: no list/watch permission, or not synced")
    else:
        flavors = view.list_cached("resourceflavors")
        names = flavors_for(pod_spec, flavors, node_listing(view))
        if names:
            p.could_add.append("Kueue ResourceFlavor " + ", ".join(f'"{n}"' for n in names[:3]))
        else:
            p.looked_at.append(f"no Kueue ResourceFlavor matches (of {len(flavors)})")
    return p
