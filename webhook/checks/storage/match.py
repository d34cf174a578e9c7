"""PersistentVolume matching, as the PV controller and the scheduler match one: k8s.io/component-helpers
v0.34 storage/volume/pv_helpers.go FindMatchingVolume (CheckAccessModes, helpers.go CheckNodeAffinity),
behind pkg/controller/volume/persistentvolume/index.go findByClaim (allPossibleMatchingAccessModes)
for Immediate binding and the scheduler's per-class list (binder.go findMatchingVolumes) for
WaitForFirstConsumer. tests/oracle/storage/ compares `mismatch` and `pick` with that code itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.checks.storage.classes import (
    _dict,
    _str,
    pv_class,
)
from webhook.models.nodes import term_matches
from webhook.objects import Node
from webhook.quantity import format_quantity, parse_quantity


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


def mismatch(pv: dict[str, Any], want: Want, nodes: list[Node] | None, *, delayed: bool = False) -> str:
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


def _node_ok(pv: dict[str, Any], nodes: list[Node] | None) -> bool:
    """helpers.go CheckNodeAffinity against any node; True when nodes cannot be read."""
    required = _dict(_dict(_dict(pv.get("spec")).get("nodeAffinity")).get("required"))
    terms = [t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)] if required else None
    if terms is None or nodes is None:
        return True
    return any(term_matches(t, n) for n in nodes for t in terms)


def _pv_name(pv: dict[str, Any]) -> str:
    return _str(_dict(pv.get("metadata")).get("name"))


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
