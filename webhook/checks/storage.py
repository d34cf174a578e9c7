"""Volume Claims: every PersistentVolumeClaim the job's pods use exists or will be created, and can bind.

A claim that cannot bind does not fail the job: its pods stay Pending forever. The scheduler's
VolumeBinding plugin (k8s.io/kubernetes v1.34 pkg/scheduler/framework/plugins/volumebinding/
volume_binding.go podHasPVCs, PreFilter; binder.go GetPodVolumeClaims, checkVolumeProvisions) says
`persistentvolumeclaim "x" not found`, `... is being deleted`, `pod has unbound immediate
PersistentVolumeClaims` or `node(s) didn't find available persistent volumes to bind`.

The claims, from every pod group's PodSpec (after the adapter's rendering):
- `persistentVolumeClaim.claimName` volumes: read by name (a live GET, never cached: a claim the
  user creates is judged on the next apply). A claimName that is one of the JobSet's
  `volumeClaimPolicies` templates (`<template>-<jobset>`, sigs.k8s.io/jobset v0.12.0
  pkg/controllers/volume_claim_policy.go GeneratePVCName) is created by the JobSet controller from
  the template, unless a claim of that name exists: `createPVCsIfNecessary` then keeps it.
- `ephemeral.volumeClaimTemplate`: one claim `<pod>-<volume>` per pod, made by the ephemeral
  volume controller (pkg/controller/volume/ephemeral); the pod names are not known yet, so the
  template alone is judged.

The rules:
- an existing claim: Bound → fine; being deleted → fail (the scheduler refuses it, then it is
  gone); Lost, or Pending with no way to bind (the same rules as a template, with its own class) →
  warn: the claim is the cluster's state, and an administrator may still add what it waits for;
- a missing claimName → fail (same stance as a missing Secret): create the claim;
- a template: its class is the beta annotation `volume.beta.kubernetes.io/storage-class`, else
  `storageClassName`, else the default StorageClass the DefaultStorageClass admission plugin
  (plugin/pkg/admission/storage/storageclass/setdefault/admission.go; pkg/volume/util/
  storageclass.go GetDefaultClass: of several defaults the newest, then the first by name)
  assigns; none → class "". A class that exists and has a provisioner other than
  `kubernetes.io/no-provisioner` can provision the claim: fine (the provisioner's health, capacity
  and allowedTopologies are not judged). Otherwise (class "", a class that does not exist, or one
  that cannot provision) only a PersistentVolume can bind it, matched as the PV controller and the
  scheduler match one (k8s.io/component-helpers v0.34 storage/volume/pv_helpers.go
  FindMatchingVolume, used by pkg/controller/volume/persistentvolume/index.go findBestMatchForClaim):
  not being deleted; claimRef empty or this claim (a PV pre-bound to the claim is taken first);
  capacity ≥ the request; the same volumeMode (Filesystem when unset) and volumeAttributesClassName;
  phase Available (an unclaimed PV still Pending counts: the PV controller makes it Available);
  labels matching the claim's selector; the same class; access modes including the claim's
  (index.go allPossibleMatchingAccessModes, pv_helpers.go CheckAccessModes); a required node
  affinity some node of the cluster satisfies (helpers.go CheckNodeAffinity). Immediate binding is the
  PV controller's: every PV, from the access-mode groups that include the claim's, fewest modes first;
  WaitForFirstConsumer the scheduler's: only PVs of the claim's class (`mismatch`, `pick`). The job's
  claims take PVs smallest request first (binder.go findMatchingVolumes). None → fail; candidates that
  only miss on node affinity → warn (a node may join).

tests/oracle/storage/ compares the matching and the default class with that code itself.

StorageClasses and PersistentVolumes come from watch caches; a cache that cannot be read makes the
verdict "cannot verify" (warn), never a deny. Claims of other workloads that may take a matching PV
first, ReadWriteOnce claims shared by pods on different nodes, a ReadWriteOncePod claim used by several
pods at once and the pods' own node placement against a PV's node affinity are not judged.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import before_deadline, cached, plural, with_stale
from webhook.checks.nodes import term_matches
from webhook.kube import ApiError, Permission
from webhook.quantity import format_quantity, parse_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import Workload

STORAGE_API = "storage.k8s.io"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
NO_PROVISIONER = "kubernetes.io/no-provisioner"
IMMEDIATE_REASON = "pod has unbound immediate PersistentVolumeClaims"
DELAYED_REASON = "node(s) didn't find available persistent volumes to bind"
_SHOWN_PVS = 3  # near misses named in a message


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


# --------------------------------------------------------------------------- the claims


@dataclass
class Claim:
    """One claim the pods use: an existing one by name, a JobSet template, or an ephemeral template."""

    kind: str  # "claim" | "template" | "ephemeral"
    name: str  # the claim's name ("" for ephemeral: one per pod)
    volume: str  # the pod volume (or the JobSet template) name
    groups: list[str] = field(default_factory=list)
    template: dict[str, Any] = field(default_factory=dict)  # {metadata, spec} of a template
    pods: int = 0  # claims an ephemeral template makes: one per pod

    @property
    def users(self) -> str:
        return f"the {', '.join(self.groups)} pods"

    @property
    def what(self) -> str:
        if self.kind == "template":
            return (
                f'PersistentVolumeClaim "{self.name}" (JobSet volumeClaimPolicies template "{self.volume}", '
                f"used by {self.users})"
            )
        if self.kind == "ephemeral":
            return f'Ephemeral volume "{self.volume}" of {self.users} (a claim <pod>-{self.volume} per pod)'
        return f'PersistentVolumeClaim "{self.name}" (volume "{self.volume}" of {self.users})'


def _jobset_templates(wl: Workload) -> dict[str, tuple[str, dict[str, Any]]]:
    """`<template>-<jobset>` → (template name, template) for the JobSet's volumeClaimPolicies."""
    js = _dict(wl.derived.get("jobSet"))
    js_name = _str(_dict(js.get("metadata")).get("name"))
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    policies = _dict(js.get("spec")).get("volumeClaimPolicies")
    for policy in policies if isinstance(policies, list) else []:
        templates = _dict(policy).get("templates")
        for t in templates if isinstance(templates, list) else []:
            name = _str(_dict(_dict(t).get("metadata")).get("name"))
            if name and js_name:
                out.setdefault(f"{name}-{js_name}", (name, _dict(t)))
    return out


def collect(wl: Workload) -> list[Claim]:
    """Every claim of every pod group, in first-use order; a claim shared by groups is listed once."""
    templates = _jobset_templates(wl)
    claims: dict[tuple[str, str], Claim] = {}
    for g in wl.pod_groups:
        volumes = g.pod_spec.get("volumes")
        for vol in volumes if isinstance(volumes, list) else []:
            vol = _dict(vol)
            vname = _str(vol.get("name"))
            pvc = vol.get("persistentVolumeClaim")
            eph = vol.get("ephemeral")
            if isinstance(pvc, dict):
                claim_name = _str(pvc.get("claimName"))
                if not claim_name:
                    continue  # the apiserver refuses the pod (Dry Run says so)
                if claim_name in templates:
                    tname, template = templates[claim_name]
                    c = claims.setdefault(("template", claim_name), Claim("template", claim_name, tname, [], template))
                else:
                    c = claims.setdefault(("claim", claim_name), Claim("claim", claim_name, vname))
            elif isinstance(eph, dict):
                template = _dict(eph.get("volumeClaimTemplate"))
                c = claims.setdefault(("ephemeral", f"{g.name}\0{vname}"), Claim("ephemeral", "", vname, [], template))
                c.pods += g.pods
            else:
                continue
            if g.name not in c.groups:
                c.groups.append(g.name)
    return list(claims.values())


# --------------------------------------------------------------------------- classes and volumes


def claim_class(meta: dict[str, Any], spec: dict[str, Any]) -> str | None:
    """component-helpers storage/volume helpers.go GetPersistentVolumeClaimClass; None when the claim
    has no class at all (PersistentVolumeClaimHasClass false: the default class applies)."""
    ann = _dict(meta.get("annotations"))
    if BETA_CLASS_ANNOTATION in ann:
        return _str(ann[BETA_CLASS_ANNOTATION])
    if spec.get("storageClassName") is not None:
        return _str(spec["storageClassName"])
    return None


def default_class(classes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """pkg/volume/util/storageclass.go GetDefaultClass: newest creationTimestamp, then name ascending."""
    defaults = [
        c
        for c in classes
        if any(_dict(_dict(c.get("metadata")).get("annotations")).get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS)
    ]
    if not defaults:
        return None
    # RFC 3339 UTC timestamps sort as text; newest first, then by name
    by_name = sorted(defaults, key=lambda c: _str(_dict(c.get("metadata")).get("name")))
    return sorted(by_name, key=lambda c: _str(_dict(c.get("metadata")).get("creationTimestamp")), reverse=True)[0]


def pv_class(pv: dict[str, Any]) -> str:
    """helpers.go GetPersistentVolumeClass: the beta annotation first."""
    ann = _dict(_dict(pv.get("metadata")).get("annotations"))
    if BETA_CLASS_ANNOTATION in ann:
        return _str(ann[BETA_CLASS_ANNOTATION])
    return _str(_dict(pv.get("spec")).get("storageClassName"))


def _storage(resources: Any, key: str) -> Decimal:
    try:
        return parse_quantity(_dict(_dict(resources).get(key)).get("storage") or 0)
    except (ValueError, TypeError, ArithmeticError):
        return Decimal(0)


def _modes(v: Any) -> list[str]:
    return [m for m in v if isinstance(m, str)] if isinstance(v, list) else []


@dataclass
class Want:
    """What one claim asks of a PersistentVolume."""

    namespace: str
    name: str  # "" for an ephemeral claim (its name is not known yet)
    cls: str
    spec: dict[str, Any]
    uid: str = ""  # an existing claim's UID ("" for a claim not created yet)

    @property
    def request(self) -> Decimal:
        return _storage(self.spec.get("resources"), "requests")

    @property
    def shape(self) -> str:
        """`class "", 20Gi, ReadWriteOnce`."""
        parts = [f'class "{self.cls}"', format_quantity(self.request, "storage")]
        modes = _modes(self.spec.get("accessModes"))
        if modes:
            parts.append(", ".join(modes))
        mode = _str(self.spec.get("volumeMode"))
        if mode and mode != "Filesystem":
            parts.append(f"volumeMode {mode}")
        return ", ".join(parts)

    @property
    def pv_fix(self) -> str:
        """`class "" with at least 20Gi and ReadWriteOnce`."""
        parts = []
        if self.request > 0:
            parts.append(f"at least {format_quantity(self.request, 'storage')}")
        modes = _modes(self.spec.get("accessModes"))
        if modes:
            parts.append(", ".join(modes))
        mode = _str(self.spec.get("volumeMode"))
        if mode and mode != "Filesystem":
            parts.append(f"volumeMode {mode}")
        return f'class "{self.cls}"' + (f" with {' and '.join(parts)}" if parts else "")


def _bound_to(pv: dict[str, Any], want: Want) -> bool:
    """pv_helpers.go IsVolumeBoundToClaim (a claim not created yet has no UID: a UID never matches it)."""
    ref = _dict(_dict(pv.get("spec")).get("claimRef"))
    if not ref:
        return False
    if not want.name or ref.get("name") != want.name or ref.get("namespace") != want.namespace:
        return False
    return not ref.get("uid") or ref.get("uid") == want.uid


def mismatch(pv: dict[str, Any], want: Want, nodes: list[dict[str, Any]] | None, *, delayed: bool = False) -> str:
    """Why `pv` cannot bind the claim ("" when it can), in FindMatchingVolume's order.

    `delayed` (WaitForFirstConsumer) is the scheduler's path (binder.go findMatchingVolumes): only
    PVs of the claim's class are listed, and a PV pre-bound to the claim is taken before its access
    modes are looked at. Otherwise the PV controller's (index.go findByClaim): every PV, but only
    from the access-mode groups that include the claim's modes."""
    meta, spec = _dict(pv.get("metadata")), _dict(pv.get("spec"))
    ref = _dict(spec.get("claimRef"))
    prebound = _bound_to(pv, want)
    if delayed and pv_class(pv) != want.cls:
        return f'class "{pv_class(pv)}"'
    missing = [m for m in _modes(want.spec.get("accessModes")) if m not in _modes(spec.get("accessModes"))]
    modes_text = f"access modes {', '.join(_modes(spec.get('accessModes'))) or 'none'}, not {', '.join(missing)}"
    if missing and not delayed:
        return modes_text
    if ref and not prebound:
        return f"bound to claim {ref.get('namespace')}/{ref.get('name')}"
    capacity = _storage(spec, "capacity")
    if capacity < want.request:
        return f"{format_quantity(capacity, 'storage')}, less than {format_quantity(want.request, 'storage')}"
    have_mode, want_mode = (
        _str(spec.get("volumeMode")) or "Filesystem",
        _str(want.spec.get("volumeMode")) or "Filesystem",
    )
    if have_mode != want_mode:
        return f"volumeMode {have_mode}, not {want_mode}"
    have_vac, want_vac = _str(spec.get("volumeAttributesClassName")), _str(want.spec.get("volumeAttributesClassName"))
    if have_vac != want_vac:
        return f'volumeAttributesClassName "{have_vac}", not "{want_vac}"'
    if meta.get("deletionTimestamp"):
        return "being deleted"
    if not prebound:
        phase = _str(_dict(pv.get("status")).get("phase"))
        if phase not in ("Available", "Pending", ""):
            return f"phase {phase}"
        selector = want.spec.get("selector")
        if isinstance(selector, dict) and not _selects(selector, _dict(meta.get("labels"))):
            return "its labels do not match the claim's selector"
        if pv_class(pv) != want.cls:
            return f'class "{pv_class(pv)}"'
        if missing:
            return modes_text
    return NODE_AFFINITY if not _node_ok(pv, nodes) else ""


NODE_AFFINITY = "its node affinity matches no node of the cluster"


def _selects(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    """A metav1.LabelSelector (apimachinery pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector): every
    matchLabels pair and matchExpression holds. A malformed one matches nothing (the apiserver refuses
    such a claim: pkg/apis/core/validation ValidatePersistentVolumeClaimSpec)."""
    match_labels, exprs = selector.get("matchLabels") or {}, selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(exprs, list):
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for e in exprs:
        e = _dict(e)
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list):
            return False
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            return False
        if not ok:
            return False
    return True


def _node_ok(pv: dict[str, Any], nodes: list[dict[str, Any]] | None) -> bool:
    """helpers.go CheckNodeAffinity against any node; True when nodes cannot be read."""
    required = _dict(_dict(_dict(pv.get("spec")).get("nodeAffinity")).get("required"))
    terms = [t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)] if required else None
    if terms is None or nodes is None:
        return True
    return any(term_matches(t, n) for n in nodes for t in terms)


def _pv_name(pv: dict[str, Any]) -> str:
    return _str(_dict(pv.get("metadata")).get("name"))


# --------------------------------------------------------------------------- verdicts


@dataclass
class Verdict:
    status: Status
    text: str


@dataclass
class _Need:
    """A claim that only a PersistentVolume can bind, waiting for the PV assignment."""

    claim: Claim
    want: Want
    count: int
    why: str  # why no provisioner binds it
    fix: str  # the part of the fix that is not "create a PersistentVolume"
    reason: str  # the scheduler's words
    existing: bool  # an existing claim (its failure is a warning)
    delayed: bool = False  # WaitForFirstConsumer: the scheduler binds it, not the PV controller
    pvs: list[str] = field(default_factory=list)  # the PVs it takes


@dataclass
class _Cluster:
    classes: list[dict[str, Any]] | None
    pvs: list[dict[str, Any]] | None
    nodes: list[dict[str, Any]] | None
    class_reason: str = "not permitted to list storageclasses.storage.k8s.io"
    pv_reason: str = "not permitted to list persistentvolumes"

    def storage_class(self, name: str) -> dict[str, Any] | None:
        for c in self.classes or []:
            if _dict(c.get("metadata")).get("name") == name:
                return c
        return None

    def class_names(self) -> list[str]:
        return sorted(_str(_dict(c.get("metadata")).get("name")) for c in self.classes or [])


def _provisioner(sc: dict[str, Any]) -> str:
    return _str(sc.get("provisioner"))


def _wfc(sc: dict[str, Any] | None) -> bool:
    return sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"


def _plan(
    claim: Claim, ns: str, name: str, meta: dict[str, Any], spec: dict[str, Any], cl: _Cluster, *, existing: bool
) -> Verdict | _Need:
    """How a claim with this metadata and spec binds: a class that provisions it, or a PV (a _Need)."""
    subject = f"{claim.what}: Pending;" if existing else f"{claim.what}:"
    if cl.classes is None:
        return Verdict(Status.WARN, f"Cannot verify {claim.what}: StorageClasses cannot be read ({cl.class_reason})")
    cls = claim_class(meta, spec)
    how = ""
    if cls is None:
        default = default_class(cl.classes)
        if default is not None:
            cls, how = _str(_dict(default.get("metadata")).get("name")), "the default "
        else:
            cls = ""
    sc = cl.storage_class(cls) if cls else None
    if sc is not None and _provisioner(sc) not in ("", NO_PROVISIONER):
        mode = ", WaitForFirstConsumer" if _wfc(sc) else ""
        return Verdict(
            Status.PASS,
            f'{subject} {how}StorageClass "{cls}" provisions it ({_provisioner(sc)}{mode}; provisioner health not judged)',
        )
    want = Want(ns, name, cls, spec, _str(meta.get("uid")))
    others = ", ".join(n for n in cl.class_names() if n != cls)
    use = f" (existing: {others})" if others else ""
    reason = DELAYED_REASON if _wfc(sc) else IMMEDIATE_REASON
    where = "in the claim" if existing else "in the template"
    if sc is not None:
        why = f'{how}StorageClass "{cls}" cannot provision (provisioner {_provisioner(sc) or "none"})'
        fix = f"use a StorageClass that provisions{use}"
    elif cls and not how:
        why = f'StorageClass "{cls}" does not exist'
        fix = f'create StorageClass "{cls}", use an existing one{use}'
    elif claim_class(meta, spec) == "":
        why = 'storageClassName "" asks for a pre-provisioned PersistentVolume'
        fix = f"set storageClassName {where} to a StorageClass that provisions{use}"
    else:
        why = "it names no StorageClass and the cluster has no default StorageClass"
        fix = (
            'mark a StorageClass default (annotation storageclass.kubernetes.io/is-default-class: "true"), '
            f"set storageClassName {where}{use}"
        )
    count = claim.pods if claim.kind == "ephemeral" else 1
    return _Need(claim, want, max(count, 1), why, fix, reason, existing, _wfc(sc))


def _smallest(pvs: list[dict[str, Any]], want: Want) -> dict[str, Any]:
    """FindMatchingVolume over one list: a PV pre-bound to the claim, else the smallest (ties: by name)."""
    for pv in sorted(pvs, key=_pv_name):
        if _bound_to(pv, want):
            return pv
    return min(pvs, key=lambda pv: (_storage(_dict(pv.get("spec")), "capacity"), _pv_name(pv)))


def pick(fits: list[dict[str, Any]], want: Want, *, delayed: bool) -> dict[str, Any] | None:
    """The PV a claim gets among those that match it (`mismatch` empty).

    WaitForFirstConsumer: the scheduler runs FindMatchingVolume over all of them. Immediate: the PV
    controller (index.go findByClaim) groups the PVs by their access modes and tries the groups
    fewest modes first, FindMatchingVolume in each; groups with as many modes come in map order, so
    among their answers the smallest is taken here (tests/oracle/storage compares with the real code)."""
    if not fits:
        return None
    if delayed:
        return _smallest(fits, want)
    groups: dict[frozenset[str], list[dict[str, Any]]] = {}
    for pv in fits:
        groups.setdefault(frozenset(_modes(_dict(pv.get("spec")).get("accessModes"))), []).append(pv)
    level = min(len(k) for k in groups)
    answers = [_smallest(g, want) for k, g in groups.items() if len(k) == level]
    return min(answers, key=lambda pv: (_storage(_dict(pv.get("spec")), "capacity"), _pv_name(pv)))


def _assign(needs: list[_Need], cl: _Cluster) -> dict[int, Verdict]:
    """binder.go findMatchingVolumes: the claims, smallest request first, each take the PV `pick`
    chooses among the matching ones not taken yet."""
    out: dict[int, Verdict] = {}
    if cl.pvs is None:
        for i, n in enumerate(needs):
            out[i] = Verdict(
                Status.WARN,
                f"Cannot verify {n.claim.what}: {n.why}, and PersistentVolumes cannot be read ({cl.pv_reason})",
            )
        return out
    taken: set[str] = set()
    order = sorted(range(len(needs)), key=lambda i: needs[i].want.request)
    for i in order:
        n = needs[i]
        for _ in range(n.count):
            fits = [
                pv
                for pv in cl.pvs
                if _pv_name(pv) not in taken and not mismatch(pv, n.want, cl.nodes, delayed=n.delayed)
            ]
            best = pick(fits, n.want, delayed=n.delayed)
            if best is None:
                break
            taken.add(_pv_name(best))
            n.pvs.append(_pv_name(best))
        out[i] = _need_verdict(n, cl)
    return out


def _need_verdict(n: _Need, cl: _Cluster) -> Verdict:
    subject = n.claim.what
    if len(n.pvs) == n.count:
        which = ", ".join(f'"{p}"' for p in n.pvs)
        state = "Pending; " if n.existing else ""
        pvs = f"PersistentVolume {which} matches" if len(n.pvs) == 1 else f"PersistentVolumes {which} match"
        return Verdict(Status.PASS, f"{subject}: {state}{n.why}; {pvs} it")
    got = f" ({len(n.pvs)} of the {n.count} needed)" if n.pvs else ""
    misses = [
        (pv, why)
        for pv in sorted(cl.pvs or [], key=_pv_name)
        if _pv_name(pv) not in n.pvs
        and (pv_class(pv) == n.want.cls or _bound_to(pv, n.want))
        and (why := mismatch(pv, n.want, cl.nodes, delayed=n.delayed))
    ]
    if misses:
        shown = "; ".join(f'"{_pv_name(pv)}": {why}' for pv, why in misses[:_SHOWN_PVS])
        more = f"; {len(misses) - _SHOWN_PVS} more" if len(misses) > _SHOWN_PVS else ""
        near = f'{plural(len(misses), "PersistentVolume")} of class "{n.want.cls}" do not fit ({shown}{more})'
        if len(misses) == 1:
            near = near.replace(" do not fit", " does not fit", 1)
    else:
        near = f'no PersistentVolume has class "{n.want.cls}"'
    only_nodes = bool(misses) and all(why == NODE_AFFINITY for _, why in misses)
    state = "is Pending and can never bind" if n.existing else "can never bind"
    text = (
        f"{subject} {state}{got}: {n.why}, so only a PersistentVolume can bind it, and none matches "
        f"({n.want.shape}): {near}; the pods would stay Pending ({n.reason}). "
        f"Fix: {n.fix}, or create a PersistentVolume of {n.want.pv_fix}"
    )
    if only_nodes:
        text += " (or a node matching a PersistentVolume's node affinity may still join)"
    return Verdict(Status.WARN if n.existing or only_nodes else Status.FAIL, text)


def _existing(claim: Claim, pvc: dict[str, Any], cl: _Cluster, ns: str) -> Verdict | _Need:
    """An existing claim, as the scheduler and the PV controller (pv_controller.go syncUnboundClaim) see it."""
    meta, spec = _dict(pvc.get("metadata")), _dict(pvc.get("spec"))
    subject = claim.what
    phase = _str(_dict(pvc.get("status")).get("phase")) or "Pending"
    volume = _str(spec.get("volumeName"))
    if meta.get("deletionTimestamp"):
        return Verdict(
            Status.FAIL,
            f'{subject} is being deleted: the scheduler refuses it (persistentvolumeclaim "{claim.name}" is being '
            f"deleted), then it is gone. Fix: wait until it is deleted and create it again, or use another claim",
        )
    if phase == "Bound":
        return Verdict(Status.PASS, f'{subject}: Bound to PersistentVolume "{volume}"')
    if phase == "Lost":
        return Verdict(
            Status.WARN,
            f'{subject} is Lost: its PersistentVolume "{volume}" is gone and the pods would stay Pending '
            f'(bound to non-existent persistentvolume). Fix: recreate PersistentVolume "{volume}", or use another claim',
        )
    if volume:
        if cl.pvs is None:
            return Verdict(
                Status.WARN, f'Cannot verify {subject}: it waits for PersistentVolume "{volume}" ({cl.pv_reason})'
            )
        pv = next((p for p in cl.pvs if _pv_name(p) == volume), None)
        if pv is None:
            return Verdict(
                Status.WARN,
                f'{subject} is Pending: it asks for PersistentVolume "{volume}", which does not exist; the pods would stay '
                f'Pending ({IMMEDIATE_REASON}). Fix: create PersistentVolume "{volume}", or clear spec.volumeName',
            )
        ref = _dict(_dict(pv.get("spec")).get("claimRef"))
        if ref and (ref.get("name"), ref.get("namespace")) != (claim.name, ns):
            return Verdict(
                Status.WARN,
                f'{subject} is Pending: PersistentVolume "{volume}" it asks for is bound to claim '
                f"{ref.get('namespace')}/{ref.get('name')}; the pods would stay Pending ({IMMEDIATE_REASON}). "
                "Fix: use another claim",
            )
        return Verdict(Status.PASS, f'{subject}: Pending, binding to PersistentVolume "{volume}"')
    return _plan(claim, ns, claim.name, meta, spec, cl, existing=True)


def _cannot_read(claim: Claim, ns: str, exc: BaseException) -> Verdict:
    if isinstance(exc, ApiError) and exc.forbidden:
        why = "not permitted to get persistentvolumeclaims"
    elif isinstance(exc, ApiError) and exc.status == 0:
        why = exc.message or "timed out"
    else:
        why = exc.message if isinstance(exc, ApiError) else (str(exc) or type(exc).__name__)
    return Verdict(Status.WARN, f'Cannot verify PersistentVolumeClaim "{claim.name}" in namespace "{ns}" ({why})')


def _missing(claim: Claim, ns: str) -> Verdict:
    return Verdict(
        Status.FAIL,
        f'PersistentVolumeClaim "{claim.name}" not found in namespace "{ns}" (volume "{claim.volume}" of {claim.users}): '
        f'the pods would stay Pending (persistentvolumeclaim "{claim.name}" not found). '
        f'Fix: create PersistentVolumeClaim "{claim.name}" in namespace "{ns}", or correct the claimName',
    )


class VolumeClaims(Check):
    name = "Volume Claims"
    needs_cluster = True
    local_capacity = True  # a MultiKueue job's claims are bound in the worker cluster
    permissions = (Permission("get", "persistentvolumeclaims"),)
    #: the caches the binding rules read; without one the verdicts that need it are "cannot verify"
    optional_permissions = (*cached("storageclasses", STORAGE_API), *cached("persistentvolumes"))
    apis = ("v1",)
    summary = (
        "Every PersistentVolumeClaim the pods use exists (claimName) or will be created (JobSet volumeClaimPolicies, "
        "ephemeral volumes), and can bind: a StorageClass (or the default one) that provisions, or a matching "
        "PersistentVolume."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        view = ctx.view
        wl = ctx.workload
        ns = wl.namespace
        claims = collect(wl)
        if not claims:
            return CheckResult(self.name, Status.SKIP, "No PersistentVolumeClaims used by the pods")
        cl = _Cluster(
            classes=view.list_cached("storageclasses") if view.cache_age("storageclasses") is not None else None,
            pvs=view.list_cached("persistentvolumes") if view.cache_age("persistentvolumes") is not None else None,
            nodes=view.list_cached("nodes") if view.cache_age("nodes") is not None else None,
        )

        async def read(c: Claim) -> dict[str, Any] | None | BaseException:
            try:
                return await before_deadline(
                    ctx, view.get_object("v1", "persistentvolumeclaims", ns, c.name, ctx.deadline)
                )
            except ApiError as exc:
                return exc

        named = [c for c in claims if c.kind != "ephemeral"]
        got = dict(zip((c.name for c in named), await asyncio.gather(*(read(c) for c in named))))
        plans: list[Verdict | _Need] = []
        for c in claims:
            if c.kind == "ephemeral":
                plans.append(
                    _plan(
                        c, ns, "", _dict(c.template.get("metadata")), _dict(c.template.get("spec")), cl, existing=False
                    )
                )
                continue
            pvc = got[c.name]
            if isinstance(pvc, BaseException):
                plans.append(_cannot_read(c, ns, pvc))
            elif pvc is not None:
                v = _existing(c, pvc, cl, ns)
                if c.kind == "template" and isinstance(v, Verdict) and v.status is Status.PASS:
                    v.text += " (exists already: JobSet keeps it)"
                plans.append(v)
            elif c.kind == "template":
                meta, spec = _dict(c.template.get("metadata")), _dict(c.template.get("spec"))
                plans.append(_plan(c, ns, c.name, meta, spec, cl, existing=False))
            else:
                plans.append(_missing(c, ns))
        needs = [p for p in plans if isinstance(p, _Need)]
        assigned = _assign(needs, cl)
        verdicts = [assigned[needs.index(p)] if isinstance(p, _Need) else p for p in plans]

        fails = [v.text for v in verdicts if v.status is Status.FAIL]
        warns = [v.text for v in verdicts if v.status is Status.WARN]
        passes = [v.text for v in verdicts if v.status is Status.PASS]
        out: list[CheckResult] = []
        if fails:
            out.append(CheckResult(self.name, Status.FAIL, " ".join(fails), details=fails + passes))
        if warns:  # next to the failures, never instead of them
            out.append(CheckResult(self.name, Status.WARN, "; ".join(warns), details=warns))
        if not out:
            out.append(
                CheckResult(
                    self.name,
                    Status.PASS,
                    "Every claim can bind: " + "; ".join(passes),
                    details=passes,
                )
            )
        cached_read = [
            r for r, objs in (("storageclasses", cl.classes), ("persistentvolumes", cl.pvs)) if objs is not None
        ]
        return [with_stale(r, ctx, *cached_read) for r in out]


CHECKS = [VolumeClaims()]
