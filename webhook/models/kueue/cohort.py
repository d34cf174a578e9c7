"""Kueue's cohort-tree arithmetic, as Kueue v0.17.0 computes it (pkg/cache/scheduler/
resource_node.go): each node's own nominalQuota (ClusterQueues and Cohort objects), nested
Cohorts, lending and borrowing limits, and what a ClusterQueue has available now
(`available`, every ClusterQueue's reservation counted) or could ever get
(`potential_available`). The Kueue oracle (tests/oracle/kueue) compares it with Kueue's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.quantity import parse_quantity

ZERO = Decimal(0)


def _flavor_usage(cq: dict[str, Any]) -> dict[tuple[str, str], Decimal]:
    status = cq.get("status") or {}
    rows = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    out: dict[tuple[str, str], Decimal] = {}
    for f in rows:
        for r in f.get("resources") or []:
            try:
                out[(str(f.get("name")), str(r.get("name")))] = parse_quantity(r.get("total", 0))
            except ValueError:
                continue
    return out


def _q(raw: Any) -> Decimal | None:
    if raw is None:
        return None
    try:
        return parse_quantity(raw)
    except ValueError:
        return None


def _cohort(cq: dict[str, Any]) -> str:
    """A ClusterQueue's cohort (v1beta2 spec.cohortName, v1beta1 spec.cohort)."""
    spec = cq.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _parent(cohort: dict[str, Any]) -> str:
    """A Cohort object's parent (v1beta2/v1beta1 spec.parentName, v1alpha1 spec.parent)."""
    spec = cohort.get("spec") or {}
    return str(spec.get("parentName") or spec.get("parent") or "")


FR = tuple[str, str]  # (flavor, resource)


@dataclass
class Quota:
    """One flavor/resource of a resourceGroup (pkg/cache/scheduler/resource.go ResourceQuota)."""

    nominal: Decimal
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None


@dataclass
class Node:
    """A ClusterQueue or a Cohort of the tree (pkg/cache/scheduler/resource_node.go resourceNode)."""

    kind: str  # "ClusterQueue" | "Cohort"
    name: str
    parent: str  # cohort name, "" for a root
    quotas: dict[FR, Quota]
    usage: dict[FR, Decimal]
    children: list[Node]


def _quotas(obj: dict[str, Any], label: str, issues: list[str]) -> dict[FR, Quota]:
    """createResourceQuotas (pkg/cache/scheduler/resource.go): every flavor × resource of every
    resourceGroup. An unparsable quantity is an issue (the tree cannot be read fully), counted as 0."""
    out: dict[FR, Quota] = {}
    for rg in (obj.get("spec") or {}).get("resourceGroups") or []:
        for f in rg.get("flavors") or []:
            for r in f.get("resources") or []:
                key = (str(f.get("name")), str(r.get("name")))
                vals: list[Decimal | None] = []
                for field_ in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    raw = r.get(field_)
                    v = _q(raw)
                    if raw is not None and v is None:
                        issues.append(f'{label} has an unreadable {field_} "{raw}" for {key[1]} in flavor "{key[0]}"')
                    vals.append(v)
                out[key] = Quota(vals[0] or ZERO, vals[1], vals[2])
    return out


def _queue_node(cq: dict[str, Any], name: str, parent: str, issues: list[str]) -> Node:
    """A ClusterQueue's node: its quotas and its reservation."""
    return Node("ClusterQueue", name, parent, _quotas(cq, f'ClusterQueue "{name}"', issues), _flavor_usage(cq), [])


@dataclass(frozen=True)
class _Index:
    """What the tree is built from: the other ClusterQueues by cohort, the Cohort objects by name, and the
    Cohorts' names by parent."""

    by_cohort: dict[str, list[dict[str, Any]]]
    objs: dict[str, dict[str, Any]]
    sub_cohorts: dict[str, list[str]]

    @classmethod
    def of(cls, cq_name: str, all_cqs: list[dict[str, Any]], cohorts: list[dict[str, Any]] | None) -> _Index:
        """The index of every ClusterQueue in a cohort but `cq_name`, and of the Cohort objects."""
        by_cohort: dict[str, list[dict[str, Any]]] = {}
        for other in all_cqs:
            if (other.get("metadata") or {}).get("name") != cq_name and _cohort(other):
                by_cohort.setdefault(_cohort(other), []).append(other)
        objs = {str((c.get("metadata") or {}).get("name")): c for c in cohorts or []}
        sub_cohorts: dict[str, list[str]] = {}
        for name, c in objs.items():
            if _parent(c):
                sub_cohorts.setdefault(_parent(c), []).append(name)
        return cls(by_cohort, objs, sub_cohorts)


class CohortTree:
    """The ClusterQueue's cohort tree as Kueue v0.17.0 builds it (pkg/cache/hierarchy/manager.go,
    pkg/cache/scheduler/resource_node.go): ClusterQueues under their spec.cohortName, Cohort
    objects under their spec.parentName, a Cohort that is named but has no object is an empty
    implicit one (no quota, no limits). A Cohort object's own resourceGroups are quota shared
    by its whole subtree.

    `issues` says why the tree cannot be read fully (Cohorts unreadable, a parent that does not
    exist, a cycle, an unreadable quantity): a "never" verdict from it is only a warning.
    """

    def __init__(self, cq: dict[str, Any], all_cqs: list[dict[str, Any]], cohorts: list[dict[str, Any]] | None) -> None:
        """Steps: index the cluster's queues and Cohorts (`_Index.of`) → the ClusterQueue's node → its
        ancestors (`_walk_up`, hierarchy/manager.go: a missing parent, a cycle) → every node under the root
        (`_build`)."""
        self.issues: list[str] = []
        self._subtree: dict[tuple[int, FR], Decimal] = {}
        self._usage: dict[tuple[int, FR], Decimal] = {}
        cq_name = str((cq.get("metadata") or {}).get("name", "?"))
        index = _Index.of(cq_name, all_cqs, cohorts)
        self.cq = _queue_node(cq, cq_name, _cohort(cq), self.issues)
        self.path: list[Node] = []  # the ClusterQueue's ancestors, nearest first
        if not self.cq.parent:
            return
        if cohorts is None:
            self.issues.append(
                f'the Cohort objects of cohort "{self.cq.parent}" cannot be read (cached cohorts have not synced)'
            )
        self._walk_up(index.objs, cohorts is not None)
        if not any("cycle" in i for i in self.issues):
            self.path[0].children.append(self.cq)
            self._build(index, self.path[-1], 0)

    def _walk_up(self, objs: dict[str, dict[str, Any]], readable: bool) -> None:
        """The ClusterQueue's ancestors into `path`, nearest first: each Cohort object (a named Cohort without
        one is an empty implicit Cohort), up to the root or to a cycle of parentName references."""
        seen: set[str] = set()
        name, child = self.cq.parent, self.cq.name
        while name:
            if name in seen:
                self.issues.append(
                    f'cohort "{name}" is part of a cycle of parentName references, so Kueue deactivates it'
                )
                break
            seen.add(name)
            obj = objs.get(name)
            if obj is None and self.path and readable:
                self.issues.append(f'Cohort "{name}" (parentName of Cohort "{child}") does not exist')
            node = Node(
                "Cohort",
                name,
                _parent(obj) if obj else "",
                _quotas(obj, f'Cohort "{name}"', self.issues) if obj else {},
                {},
                [],
            )
            self.path.append(node)
            child, name = name, node.parent

    def _build(self, index: _Index, cohort: Node, depth: int) -> None:
        """Every node under `cohort`, built once (a cycle below the path cannot happen: names are unique): its
        ClusterQueues, then its sub-Cohorts by name (the path's own node where the path goes down)."""
        if depth > 64:
            self.issues.append(f'the cohort tree under "{cohort.name}" is deeper than 64 levels')
            return
        for c in index.by_cohort.get(cohort.name, []):
            n = str((c.get("metadata") or {}).get("name", "?"))
            cohort.children.append(_queue_node(c, n, cohort.name, self.issues))
        for sub in sorted(index.sub_cohorts.get(cohort.name, [])):
            on_path = next((p for p in self.path if p.name == sub), None)
            if on_path is not None:
                cohort.children.append(on_path)
                self._build(index, on_path, depth + 1)
                continue
            o = index.objs[sub]
            node = Node("Cohort", sub, cohort.name, _quotas(o, f'Cohort "{sub}"', self.issues), {}, [])
            cohort.children.append(node)
            self._build(index, node, depth + 1)

    @property
    def cohort_names(self) -> list[str]:
        return [n.name for n in self.path]

    # --- resource_node.go, over Decimal quantities ---

    def subtree_quota(self, node: Node, fr: FR) -> Decimal:
        """SubtreeQuota: own nominal + what each child exposes (its subtree minus its localQuota)."""
        key = (id(node), fr)
        if key not in self._subtree:
            q = node.quotas.get(fr)
            total = q.nominal if q else ZERO
            for child in node.children:
                total += self.subtree_quota(child, fr) - self.local_quota(child, fr)
            self._subtree[key] = total
        return self._subtree[key]

    def local_quota(self, node: Node, fr: FR) -> Decimal:
        """localQuota: what lendingLimit keeps for the subtree, never lent to the parent."""
        q = node.quotas.get(fr)
        if q is None or q.lending_limit is None:
            return ZERO
        return max(ZERO, self.subtree_quota(node, fr) - q.lending_limit)

    def usage(self, node: Node, fr: FR) -> Decimal:
        """Usage: a ClusterQueue's reservation; a Cohort's is its children's usage past their localQuota."""
        if node.kind == "ClusterQueue":
            return node.usage.get(fr, ZERO)
        key = (id(node), fr)
        if key not in self._usage:
            self._usage[key] = sum(
                (max(ZERO, self.usage(c, fr) - self.local_quota(c, fr)) for c in node.children), ZERO
            )
        return self._usage[key]

    def _chain(self) -> list[Node]:
        return [self.cq, *self.path] if not any("cycle" in i for i in self.issues) else [self.cq]

    def potential_available(self, fr: FR) -> Decimal:
        """potentialAvailable: the largest request the ClusterQueue could ever admit (no usage),
        its localQuota plus what its parent could provide, capped by nominal + borrowingLimit."""
        chain = self._chain()

        def pa(i: int) -> Decimal:
            node = chain[i]
            if i == len(chain) - 1:
                return self.subtree_quota(node, fr)
            avail = self.local_quota(node, fr) + pa(i + 1)
            q = node.quotas.get(fr)
            if q is not None and q.borrowing_limit is not None:
                avail = min(self.subtree_quota(node, fr) + q.borrowing_limit, avail)
            return avail

        return pa(0)

    def available(self, fr: FR) -> Decimal:
        """available: capacity left now, bounded by borrowingLimits and what is used up the tree."""
        chain = self._chain()

        def av(i: int) -> Decimal:
            node = chain[i]
            if i == len(chain) - 1:
                return self.subtree_quota(node, fr) - self.usage(node, fr)
            parent_avail = av(i + 1)
            q = node.quotas.get(fr)
            local = self.local_quota(node, fr)
            if q is not None and q.borrowing_limit is not None:
                stored = self.subtree_quota(node, fr) - local
                used = max(ZERO, self.usage(node, fr) - local)
                parent_avail = min(stored - used + q.borrowing_limit, parent_avail)
            return max(ZERO, local - self.usage(node, fr)) + parent_avail

        return av(0)


def flavor_limits(tree: CohortTree, frs: list[FR]) -> dict[FR, tuple[Decimal, Decimal]]:
    """(flavor, resource) → (nominalQuota, the most it can borrow) for the tree's ClusterQueue."""
    out: dict[FR, tuple[Decimal, Decimal]] = {}
    for fr in frs:
        q = tree.cq.quotas.get(fr)
        nominal = q.nominal if q else ZERO
        out[fr] = (nominal, max(ZERO, tree.potential_available(fr) - nominal))
    return out
