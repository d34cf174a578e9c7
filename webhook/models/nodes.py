"""Nodes as the scheduler reads them: node facts, the pods' node selection, taints and tolerations,
and nodes grouped by shape so thousands alike are judged once (the placement checks, DRA, Volume Claims'
node affinity, Image Pull's platforms and the provisioning model all read them).

Matching follows the scheduler: k8s.io/component-helpers scheduling/corev1/nodeaffinity/
nodeaffinity.go (GetRequiredNodeAffinity: nodeSelector AND the ORed required terms), used by
k8s.io/kubernetes pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go; taints as
pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go (NoSchedule and NoExecute
filter) with k8s.io/api core/v1 toleration.go ToleratesTaint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from itertools import compress
from operator import is_
from typing import TYPE_CHECKING, Any, TypeVar

from webhook.objects import Node, PodSpec, Taint, as_nodes
from webhook.quantity import format_quantity, parse_quantity
from webhook.workloads.base import Workload

if TYPE_CHECKING:
    from webhook.cluster.view import ClusterView

_T = TypeVar("_T")

# --- node facts ---------------------------------------------------------------------------


def node_name(node: Node) -> str:
    return str((node.get("metadata") or {}).get("name", "?"))


def node_labels(node: Node) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def is_ready(node: Node) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def is_cordoned(node: Node) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def taints(node: Node) -> list[Taint]:
    return list((node.get("spec") or {}).get("taints") or [])


# --- pod facts ----------------------------------------------------------------------------


def _dict(v: Any) -> dict[str, Any]:
    """`v` when it is a mapping, else {} (the AIPerfJob CRD keeps whatever a pod template holds)."""
    return v if isinstance(v, dict) else {}


def required_terms(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    aff = _dict(_dict(pod_spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not isinstance(aff, dict):
        return None
    terms = aff.get("nodeSelectorTerms")
    return [t for t in terms if isinstance(t, dict)] if isinstance(terms, list) else []


def _requirement(req: dict[str, Any], value: str | None) -> bool:
    op = req.get("operator")
    values = [str(v) for v in req.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: dict[str, Any], node: Node) -> bool:
    """A nodeSelectorTerm: every expression and field must match; an empty term matches nothing."""
    exprs = [e for e in term.get("matchExpressions") or [] if isinstance(e, dict)]
    fields = [f for f in term.get("matchFields") or [] if isinstance(f, dict)]
    if not exprs and not fields:
        return False
    labels = node_labels(node)
    if not all(_requirement(e, labels.get(e.get("key", ""))) for e in exprs):
        return False
    return all(_requirement(f, node_name(node) if f.get("key") == "metadata.name" else None) for f in fields)


def selects(pod_spec: PodSpec, node: Node) -> bool:
    """nodeSelector (exact labels) and required node affinity (terms ORed)."""
    labels = node_labels(node)
    sel = pod_spec.get("nodeSelector")
    for k, v in (sel if isinstance(sel, dict) else {}).items():
        if labels.get(k) != v:
            return False
    terms = required_terms(pod_spec)
    if terms is not None and not any(term_matches(t, node) for t in terms):
        return False
    return True


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """k8s.io/api core/v1 toleration.go ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return op == "Exists"


def blocking_taints(pod_spec: PodSpec, node: Node) -> list[Taint]:
    """NoSchedule/NoExecute taints of the node that no toleration of the pod tolerates."""
    tols = pod_spec.get("tolerations") or []
    return [
        t
        for t in taints(node)
        if t.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(tol, t) for tol in tols)
    ]


# --- wording ------------------------------------------------------------------------------


def selection_text(pod_spec: PodSpec) -> str:
    parts = []
    sel = _dict(pod_spec.get("nodeSelector"))
    if sel:
        parts.append("nodeSelector {" + ", ".join(f"{k}={v}" for k, v in sel.items()) + "}")
    terms = required_terms(pod_spec)
    if terms is not None:
        rendered = []
        for t in terms:
            exprs = [
                f"{e.get('key')} {e.get('operator')}"
                + (f" [{', '.join(map(str, e.get('values') or []))}]" if e.get("values") else "")
                for e in (t.get("matchExpressions") or []) + (t.get("matchFields") or [])
            ]
            rendered.append(" and ".join(exprs) or "(empty term)")
        parts.append("required node affinity (" + " or ".join(rendered) + ")")
    return " and ".join(parts)


def taint_text(t: Mapping[str, Any]) -> str:
    kv = t.get("key", "") + (f"={t['value']}" if t.get("value") else "")
    return f"{kv}:{t.get('effect', '')}"


def toleration_text(t: Mapping[str, Any]) -> str:
    key = t.get("key") or "*"
    if (t.get("operator") or "Equal") == "Equal" and t.get("value"):
        key += f"={t['value']}"
    return key + (f":{t['effect']}" if t.get("effect") else "")


def pod_field(wl: Workload, field: str) -> str:
    """Where the user sets a pod-level field of this job (its kind's facts)."""
    return wl.facts.pod_field.format(field=field)


def _fmt_resources(req: dict[str, Decimal]) -> str:
    return ", ".join(f"{r} {format_quantity(v, r)}" for r, v in sorted(req.items()) if v > 0) or "no requests"


def _usable(node: Node) -> bool:
    return is_ready(node) and not is_cordoned(node)


# --- nodes alike in what a verdict reads are judged once ------------------------------------
#
# A cluster's Nodes come in pools: thousands of them differ only in labels no pod selects on
# (hostname, zone). Per-Node Schedulability asks the same three questions of each (selected?
# tolerated? fits?); the answers are memoized per review by the node's shape: readiness, the
# cordon, every taint, the allocatable, the values of the labels the pod's selection names (and
# the node's name when a term matches on metadata.name). At 5,000 Nodes this took a TrainJob's
# review from 41.6 ms to a few (docs/benchmarks/cluster.md, the scale run).

#: (name, resourceVersion) -> the Node's static shape: every change of a Node is a new resourceVersion
_STATIC: dict[tuple[str, str], tuple[Any, ...]] = {}


def _static_shape(node: Node) -> tuple[Any, ...]:
    """Readiness, cordon, taints and allocatable, as a hashable value; kept per resourceVersion
    (a Node without one, as only a test builds, is read each time)."""
    rv = (node.get("metadata") or {}).get("resourceVersion")
    key = (str((node.get("metadata") or {}).get("name", "?")), rv) if isinstance(rv, str) and rv else None
    if key is not None and (hit := _STATIC.get(key)) is not None:
        return hit
    alloc = (node.get("status") or {}).get("allocatable") or {}
    shape = (
        _usable(node),
        tuple(
            tuple(sorted((str(k), repr(v)) for k, v in t.items())) if isinstance(t, dict) else (repr(t),)
            for t in taints(node)
        ),
        tuple(sorted((str(k), repr(v)) for k, v in alloc.items())) if isinstance(alloc, dict) else (repr(alloc),),
    )
    if key is not None:
        _STATIC[key] = shape
    return shape


def selection_keys(pod_spec: Mapping[str, Any]) -> tuple[tuple[str, ...], bool] | None:
    """(the label keys the pod's node selection reads, whether a term reads the node's name), or
    None when the selection is not plain enough to group nodes by (then each node is judged)."""
    keys: list[str] = []
    sel = pod_spec.get("nodeSelector")
    if sel is not None and not isinstance(sel, dict):
        return None
    for k in sel or {}:
        if not isinstance(k, str):
            return None
        keys.append(k)
    by_name = False
    for term in required_terms(pod_spec) or []:
        for e in term.get("matchExpressions") or []:
            if isinstance(e, dict):
                key = e.get("key", "")
                if not isinstance(key, str):
                    return None
                keys.append(key)
        if any(isinstance(f, dict) for f in term.get("matchFields") or []):
            by_name = True
    return tuple(dict.fromkeys(keys)), by_name


def node_shape(node: Node, keys: tuple[str, ...], by_name: bool) -> tuple[Any, ...]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    values = tuple(labels.get(k) for k in keys) if isinstance(labels, dict) else (repr(labels),)
    return (_static_shape(node), values, node_name(node) if by_name else None)


def _walk(nodes: list[Node], pod_spec: PodSpec, need: dict[str, Decimal]) -> tuple[list[Node], list[Node], list[Node]]:
    """The nodes (in cache order) that are usable and selected; of those, the ones whose taints the
    pods tolerate; of those, the ones whose allocatable fits `need`. Nodes of one shape
    (:func:`node_shape`) are judged once, and the grouping into shapes is kept while the Node
    listing is the same (:func:`_grouping`): a review asks its questions of the shapes, not of
    every Node. The lists may be kept ones: read them, never change them."""
    lists = _by_shape(nodes, pod_spec, lambda n: _answer(pod_spec, need, n), 3)
    return lists[0], lists[1], lists[2]


def _by_shape(
    nodes: list[Node],
    pod_spec: PodSpec,
    judge: Callable[[Node], tuple[bool, ...]],
    width: int,
) -> list[list[Node]]:
    """For each of the `width` answers of `judge` (a function of a node's shape for this pod
    spec), the nodes in listing order that answer True; one node per shape is judged. The lists
    may be kept ones: read them, never change them."""
    plan = selection_keys(pod_spec)
    if plan is None:  # judged node by node
        answers = [judge(n) for n in nodes]
        return [[n for n, a in zip(nodes, answers, strict=True) if a[k]] for k in range(width)]
    kept = _grouping(nodes, plan)
    shapes = kept.plans[plan]
    per_shape = [judge(rep) for rep in shapes.reps]
    out: list[list[Node]] = []
    for k in range(width):
        flags = tuple(a[k] for a in per_shape)
        got = kept.lists.get((plan, flags))
        if got is None:
            if len(kept.lists) >= _Grouping.MAX_LISTS:
                kept.lists.clear()
            got = kept.lists[(plan, flags)] = shapes.select(kept.nodes, flags)
        out.append(got)
    return out


def eligible_nodes(nodes: list[Node], pod_spec: PodSpec) -> list[Node]:
    """The usable nodes (Ready, not cordoned) the pod selects and whose taints it tolerates, in listing
    order: one judgement per node shape (:func:`_by_shape`). `nodes`: :func:`node_listing`'s, so that the
    grouping is kept from review to review. A kept list: read it, never change it."""

    def judge(node: Node) -> tuple[bool]:
        return (_usable(node) and selects(pod_spec, node) and not blocking_taints(pod_spec, node),)

    return _by_shape(nodes, pod_spec, judge, 1)[0]


def _selected_and_usable(pod_spec: PodSpec) -> Callable[[Node], tuple[bool, bool]]:
    """Node Selector Match's two questions of a node: does the pod select it; is it also usable."""

    def judge(node: Node) -> tuple[bool, bool]:
        matches = selects(pod_spec, node)
        return matches, matches and _usable(node)

    return judge


def _distinct_taints(nodes: list[Node]) -> list[Taint]:
    """Every taint of the listing, each distinct one once (kept with the listing's grouping)."""
    kept = _grouping(nodes, None)
    if kept.taints is None:
        seen: dict[str, Taint] = {}
        for n in kept.nodes:
            for t in taints(n):
                seen.setdefault(repr(sorted(t.items())) if isinstance(t, dict) else repr(t), t)
        kept.taints = list(seen.values())
    return kept.taints


def _answer(pod_spec: PodSpec, need: dict[str, Decimal], node: Node) -> tuple[bool, bool, bool]:
    """(usable and selected, and tolerated, and fits) for one node."""
    sel = _usable(node) and selects(pod_spec, node)
    elig = sel and not blocking_taints(pod_spec, node)
    return sel, elig, elig and _fits(need, node)


def _listing(view: ClusterView) -> list[Node]:
    """The cached Nodes: the kept listing while the Node cache's version is the one it was read at
    (no copy of 5,000 Nodes per review), else a new one. Read it, never change it."""
    version = view.cache_version("nodes")
    kept = _KEPT[0] if _KEPT else None
    if version is not None and kept is not None and kept.version == version:
        return kept.nodes
    nodes = as_nodes(view.list_cached("nodes"))
    kept = _grouping(nodes, None)
    kept.version = version
    return kept.nodes


def node_listing(view: ClusterView) -> list[Node]:
    """The cached Nodes as the placement checks read them, kept per Node-cache version
    (ClusterView.cache_version): for the other checks that read Nodes. Read it, never change it."""
    return _listing(view)


def per_shape(
    nodes: list[Node],
    pod_spec: PodSpec | None,
    judge: Callable[[Node], _T],
    labels: tuple[str, ...] = (),
) -> list[_T]:
    """`judge` of one node of each shape present in `nodes`, in no set order; node by node when
    `pod_spec`'s node selection is too odd to group by. Nodes are of one shape when they agree on
    readiness, cordon, taints, allocatable, the values of the labels `pod_spec`'s node selection
    names (none when `pod_spec` is None) and of `labels`, and on their name when a term matches on
    metadata.name, so `judge` must read no more of a node than that. The grouping is the one the
    placement checks keep per Node listing (:func:`_grouping`): a review judges the shapes, not
    5,000 Nodes, and a changed Node re-shapes only itself."""
    plan = ((), False) if pod_spec is None else selection_keys(pod_spec)
    if plan is None:
        return [judge(n) for n in nodes]
    plan = (tuple(dict.fromkeys((*plan[0], *labels))), plan[1])
    shapes = _grouping(nodes, plan).plans[plan]
    return [judge(shapes.reps[i]) for i in shapes.present()]


def label_values(nodes: list[Node], keys: tuple[str, ...]) -> set[tuple[Any, ...]]:
    """The distinct values `nodes` hold for `keys` (None where a node lacks a label), one tuple
    per kind of node: e.g. whether some node carries every nodeLabel of a Kueue ResourceFlavor."""

    def values(node: Node) -> tuple[Any, ...]:
        labels: object = (node.get("metadata") or {}).get("labels") or {}  # a hand-made Node's may be anything
        if not isinstance(labels, dict):
            return (None,) * len(keys)
        # label values are strings; anything else (only a hand-made Node has it) as its repr, hashable
        return tuple(v if v is None or isinstance(v, str) else repr(v) for v in map(labels.get, keys))

    return set(per_shape(nodes, None, values, keys))


class _Shapes:
    """One listing's Nodes grouped by shape under one plan."""

    def __init__(self) -> None:
        self.of_node: list[int] = []  # each node's shape index, in listing order
        self.reps: list[Node] = []  # one node per shape
        self.index: dict[tuple[Any, ...], int] = {}  # shape -> its index
        self._packed: bytes | None = None  # of_node as bytes, while there are fewer than 256 shapes
        self._present: list[int] | None = None  # the shape indexes some node of the listing has

    def present(self) -> list[int]:
        """The indexes of the shapes the listing's nodes have (`reps` also holds shapes carried
        over from the previous listing that no node has any more)."""
        if self._present is None:
            self._present = sorted(set(self.of_node))
        return self._present

    def select(self, nodes: list[Node], flags: tuple[bool, ...]) -> list[Node]:
        """The nodes whose shape's flag is True, in listing order (C loops only: the shape indexes
        as bytes, translated to 0/1, when there are fewer than 256 shapes)."""
        if all(flags):
            return list(nodes)
        if not any(flags):
            return []
        if len(flags) < 256:
            if self._packed is None:
                self._packed = bytes(self.of_node)
            mask = self._packed.translate(bytes(flags) + bytes(256 - len(flags)))
            return list(compress(nodes, mask))
        return list(compress(nodes, map(flags.__getitem__, self.of_node)))

    def place(self, node: Node, plan: tuple[tuple[str, ...], bool]) -> int:
        """The shape index of `node`, a new shape when none is alike."""
        key = node_shape(node, *plan)
        try:
            i = self.index.get(key)
            if i is None:
                i = self.index[key] = len(self.reps)
                self.reps.append(node)
        except TypeError:  # a label value that is not a string (only a hand-made object has one)
            i = len(self.reps)
            self.reps.append(node)
        return i

    @classmethod
    def of(
        cls,
        nodes: list[Node],
        plan: tuple[tuple[str, ...], bool],
        before: tuple[list[Node], _Shapes] | None = None,
    ) -> _Shapes:
        """`nodes` grouped by `plan`. With `before` (the previous listing, whose nodes are still
        alive so that an id names one object, and its shapes under the same plan), a node that was
        in it keeps its shape and only the added or changed nodes are shaped: a kubelet's status
        update costs one node, not 5,000. The lookups are C loops: by position when the listing
        kept its length (the cache keeps a changed Node in its place), else by id."""
        out = cls()
        old_nodes, old = before if before is not None else ([], None)
        if old is None or len(old.reps) > 2 * len(nodes) + 64:
            out.of_node = [out.place(n, plan) for n in nodes]
            return out
        out.reps, out.index = list(old.reps), dict(old.index)
        found: list[int | None]
        if len(old_nodes) == len(nodes):
            found = list(old.of_node)
            kept = list(map(is_, old_nodes, nodes))
            i = 0
            while True:
                try:
                    i = kept.index(False, i)
                except ValueError:
                    break
                found[i] = None
                i += 1
        else:
            by_id = dict(zip(map(id, old_nodes), old.of_node, strict=True))
            found = list(map(by_id.get, map(id, nodes)))
        i = 0
        while True:
            try:
                i = found.index(None, i)
            except ValueError:
                break
            found[i] = out.place(nodes[i], plan)
        out.of_node = found  # type: ignore[assignment]  # no None is left
        return out


class _Grouping:
    """One Node listing grouped by shape, per selection plan, and the node lists made from it.

    `nodes` is kept so that the next listing can be compared with it: the cache replaces a Node's
    dict on every change and no check mutates one, so while every Node is the same object the
    grouping holds. `before`: the previous listing's grouping, read once per plan to carry its
    shapes over, then dropped."""

    MAX_PLANS = 64
    MAX_LISTS = 256

    def __init__(self, nodes: list[Node], before: _Grouping | None = None) -> None:
        self.nodes = nodes
        self.before = before
        #: the Node cache's version this listing was read at (ClusterView.cache_version), if known
        self.version: tuple[int, int] | None = None
        self.plans: dict[tuple[tuple[str, ...], bool], _Shapes] = {}
        #: (plan, one answer per shape) -> the nodes, in listing order, whose shape answers True
        self.lists: dict[tuple[Any, ...], list[Node]] = {}
        #: every distinct taint of the listing (Tolerations)
        self.taints: list[Taint] | None = None


#: the grouping of the last Node listing a review read (one: there is one Node cache)
_KEPT: list[_Grouping] = []


def _grouping(nodes: list[Node], plan: tuple[tuple[str, ...], bool] | None) -> _Grouping:
    """The kept grouping of this listing, with `plan`'s shapes in it; a new one for a new listing.

    The listing is the kept one when it holds the same objects in the same order (a C loop,
    ~30 µs at 5,000 Nodes), so a Node added, removed, changed or moved is a new grouping, which
    carries the shapes of the Nodes it shares with the last one over (:meth:`_Shapes.of`). A
    listing equal in content but made of other objects (a view that copies) keeps the shapes it
    equals and becomes the kept listing."""
    kept = _KEPT[0] if _KEPT else None
    same = kept is not None and (
        kept.nodes is nodes or (len(kept.nodes) == len(nodes) and all(map(is_, kept.nodes, nodes)))
    )
    if kept is not None and not same and kept.nodes == nodes:
        kept = _Grouping(list(nodes))  # equal content, other objects: shaped anew, handing out these
        _KEPT[:] = [kept]
    elif not same:
        if len(_STATIC) > 2 * len(nodes) + 64:  # Nodes gone or changed since: start again
            _STATIC.clear()
        if kept is not None:
            kept.before = None  # one listing back at most
        kept = _Grouping(list(nodes), kept)
        _KEPT[:] = [kept]
    assert kept is not None
    if plan is not None and plan not in kept.plans:
        if len(kept.plans) >= _Grouping.MAX_PLANS:
            kept.plans.clear()
            kept.lists.clear()
        prev = kept.before
        old = prev.plans.get(plan) if prev is not None else None
        kept.plans[plan] = _Shapes.of(kept.nodes, plan, None if prev is None or old is None else (prev.nodes, old))
    return kept


def _alloc(node: Node, resource: str) -> Decimal:
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    if raw is None:
        return Decimal(0)
    try:
        return parse_quantity(raw)
    except ValueError:
        return Decimal(0)


def _fits(need: dict[str, Decimal], node: Node) -> bool:
    return all(_alloc(node, r) >= v for r, v in need.items())
