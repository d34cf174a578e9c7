"""Can one node's ResourceSlices satisfy a pod's claims at once? The structured allocator, in small.

Follows k8s.io/dynamic-resource-allocation v0.37.2 (k8s.io/kubernetes v1.37.2 staging)
structured/internal/stable/: pools_stable.go GatherPools (the slices of a node: spec.nodeName,
spec.allNodes or spec.nodeSelector; a pool counts only when all its ResourceSliceCount slices of
its newest generation are there) and allocator_stable.go Allocate: every request of every claim,
in order (exactly: `count` devices; All: every matching device of the node, and at least one;
firstAvailable: the first subrequest that works), a device used once, never one already allocated,
selected by the class's and the request's CEL selectors; matchAttribute constraints hold across
the requests they name. The search is exhaustive (allocateOne), bounded here by a step budget.

Facts this model cannot judge make a device "uncertain" rather than wrong: a selector outside the
CEL subset or a CEL runtime error (dra/cel.py), device taints, shared counters, binding conditions,
multiple allocations, per-device node selection, admin access. The search evaluates every
free device for each request it tries (a superset of what the allocator evaluates): without meeting an
uncertain device its answer is the allocator's; after meeting one, success or failure is unknown (the
allocator may have stopped at a CEL runtime error there). So an unknown never denies. The allocator's own fatal errors
that depend on the search order (a CEL runtime error on the device it reaches; an `All` request
whose devices break a matchAttribute constraint: "cannot add device ... because a claim constraint
would not be satisfied") are unknown too: the tests/oracle/dra comparison found both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from webhook.models.dra.cel import matches_grouped
from webhook.objects import Node

__all__ = ["Device", "Request", "Claim", "node_devices", "SliceIndex", "fit", "Fit", "MAX_STEPS"]

#: search steps per node before the answer is "unknown"
MAX_STEPS = 20_000

DeviceID = tuple[str, str, str]  # (driver, pool, device): structured.DeviceID


@dataclass
class Device:
    id: DeviceID
    attributes: dict[str, Any]
    #: why this model cannot say whether the device may be allocated ("" when it can)
    unmodelled: str = ""
    #: selector -> answer, kept as long as the device (SliceIndex keeps it per slice version)
    memo: dict[str, bool | None] = field(default_factory=dict, compare=False, repr=False)
    #: what a group's requests read of the device (check.py _Shapes), by the requests' key
    shapes: dict[str, tuple[Any, ...]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def driver(self) -> str:
        return self.id[0]

    def matches(self, expression: str) -> bool | None:
        try:
            return self.memo[expression]
        except KeyError:
            pass
        m = matches_grouped(expression, self.driver, self.attributes)
        if len(self.memo) >= 64:  # a stream of one-off selectors cannot grow it
            self.memo.clear()
        self.memo[expression] = m
        return m


@dataclass
class Request:
    """One request (or one firstAvailable subrequest) of a claim."""

    name: str
    class_name: str
    mode: str  # "ExactCount" | "All"
    count: int
    selectors: list[str]  # the class's, then the request's
    unmodelled: str = ""


@dataclass
class Claim:
    """A claim to allocate: `label` for messages (`ResourceClaimTemplate "gpu"`), its requests (each
    a list of alternatives: one for `exactly`, the subrequests for `firstAvailable`), its
    matchAttribute constraints (request names, empty = all; fully qualified attribute)."""

    label: str
    requests: list[list[Request]]
    constraints: list[tuple[set[str], str]] = field(default_factory=list)


@dataclass
class Fit:
    ok: bool | None  # True fits, False cannot, None unknown
    #: per request (`ResourceClaimTemplate "t" request "gpus"`): matching free devices on this node (pessimistic)
    matching: dict[str, int] = field(default_factory=dict)
    why_unknown: str = ""
    #: the devices taken (pessimistic success only)
    taken: list[DeviceID] = field(default_factory=list)


# ----------------------------------------------------------------------------- pools


def _node_selector_matches(selector: Any, node: Node, term_matches: Callable[..., bool]) -> bool:
    terms = (selector or {}).get("nodeSelectorTerms") if isinstance(selector, dict) else None
    return any(term_matches(t, node) for t in terms or [] if isinstance(t, dict))


def _pool_id(s: dict[str, Any]) -> tuple[str, str]:
    spec = s.get("spec") or {}
    pool = spec.get("pool") or {}
    return (str(spec.get("driver", "")), str(pool.get("name", "")))


def _generation(s: dict[str, Any]) -> int:
    return int(((s.get("spec") or {}).get("pool") or {}).get("generation") or 0)


def _targets(s: dict[str, Any], node: Node, name: Any, term_matches: Callable[..., bool]) -> bool:
    """Whether slice `s` offers devices on `node` (GatherPools' switch)."""
    spec = s.get("spec") or {}
    if spec.get("sharedCounters") or spec.get("perDeviceNodeSelection"):
        targets = spec.get("perDeviceNodeSelection") and any(
            d.get("nodeName") == name or d.get("allNodes") for d in spec.get("devices") or []
        )
        return bool(targets) or spec.get("nodeName") == name
    if spec.get("nodeName"):
        return bool(spec["nodeName"] == name)
    if spec.get("allNodes"):
        return True
    if spec.get("nodeSelector"):
        return _node_selector_matches(spec["nodeSelector"], node, term_matches)
    return False


def _slice_devices(s: dict[str, Any], pid: tuple[str, str]) -> list[Device]:
    spec = s.get("spec") or {}
    shared = "shared counters" if spec.get("sharedCounters") or spec.get("perDeviceNodeSelection") else ""
    out: list[Device] = []
    for d in spec.get("devices") or []:
        if not isinstance(d, dict):
            continue
        why = shared
        if d.get("taints"):
            why = "device taints"
        elif d.get("consumesCounters"):
            why = "shared counters"
        elif d.get("bindingConditions"):
            why = "binding conditions"
        elif d.get("allowMultipleAllocations"):
            why = "multiple allocations"
        attrs = d.get("attributes")  # the cached object's own dict: read, never changed
        out.append(Device((pid[0], pid[1], str(d.get("name", ""))), attrs if isinstance(attrs, dict) else {}, why))
    return out


def _gather(
    chosen: list[tuple[tuple[str, str], int, dict[str, Any]]], devices_of: Callable[[int, dict[str, Any]], list[Device]]
) -> tuple[list[Device], list[str]]:
    """Complete pools' devices from the slices chosen for a node, in slice order: (pool, position, slice)."""
    pools: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
    counts: dict[tuple[str, str], int] = {}
    for pid, pos, s in chosen:
        pools.setdefault(pid, []).append((pos, s))
        counts[pid] = int(((s.get("spec") or {}).get("pool") or {}).get("resourceSliceCount") or 1)
    devices: list[Device] = []
    notes: list[str] = []
    for pid, got in pools.items():
        if len(got) < counts[pid]:
            notes.append(f"pool {pid[1]} of {pid[0]} is incomplete ({len(got)} of {counts[pid]} slices)")
            continue
        for pos, s in got:
            devices.extend(devices_of(pos, s))
    return devices, notes


def node_devices(
    slices: list[dict[str, Any]], node: Node, term_matches: Callable[..., bool]
) -> tuple[list[Device], list[str]]:
    """The devices of complete pools whose slices target `node` (GatherPools), and notes on the
    pools left out (incomplete: the allocator skips them too). One pass over every slice: the
    reference :class:`SliceIndex` answers the same from an index."""
    name = (node.get("metadata") or {}).get("name")
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        pid, gen = _pool_id(s), _generation(s)
        newest[pid] = max(newest.get(pid, gen), gen)
    chosen = [
        (_pool_id(s), i, s)
        for i, s in enumerate(slices)
        if _generation(s) == newest[_pool_id(s)] and _targets(s, node, name, term_matches)
    ]
    return _gather(chosen, lambda _pos, s: _slice_devices(s, _pool_id(s)))


#: (slice name, uid, resourceVersion) -> its devices: a slice's devices are read once per version, and keep
#: their selector answers (Device.memo) from review to review
_PREPARED: dict[tuple[str, str, str], list[Device]] = {}


class SliceIndex:
    """:func:`node_devices` for many nodes of one list of slices: the slices that name a node
    (spec.nodeName, the common case: one slice per node and driver) are indexed by it, the others
    (allNodes, nodeSelector, per-device selection) are asked of each node; each slice's devices are
    read once per resourceVersion. At 5,000 nodes this turns a review's 25 million slice visits into
    one pass (bench/scale.py --in-process)."""

    def __init__(self, slices: list[dict[str, Any]]) -> None:
        self.newest: dict[tuple[str, str], int] = {}
        for s in slices:
            pid, gen = _pool_id(s), _generation(s)
            self.newest[pid] = max(self.newest.get(pid, gen), gen)
        self.by_node: dict[str, list[tuple[tuple[str, str], int, dict[str, Any]]]] = {}
        self.other: list[tuple[tuple[str, str], int, dict[str, Any]]] = []
        for i, s in enumerate(slices):
            pid = _pool_id(s)
            if _generation(s) != self.newest[pid]:
                continue
            spec = s.get("spec") or {}
            named = spec.get("nodeName")
            if (
                isinstance(named, str)
                and named
                and not (spec.get("sharedCounters") or spec.get("perDeviceNodeSelection"))
            ):
                self.by_node.setdefault(named, []).append((pid, i, s))
            else:
                self.other.append((pid, i, s))
        self._devices: dict[int, list[Device]] = {}
        #: node name -> (the node object read, its devices and notes): a kept index answers a node again
        #: while the node is the same object (the cache replaces a node's dict on every change)
        self._answers: dict[str, tuple[Node, tuple[list[Device], list[str]]]] = {}
        live = {k for k in (self._version(s) for s in slices) if k is not None}
        if len(_PREPARED) > 2 * len(live) + 64:  # versions gone from the cache
            for k in [k for k in _PREPARED if k not in live]:
                del _PREPARED[k]

    @staticmethod
    def _version(s: dict[str, Any]) -> tuple[str, str, str] | None:
        """What names one content of a slice: its name, uid (two clusters' objects differ) and version."""
        meta = s.get("metadata") or {}
        rv, name, uid = meta.get("resourceVersion"), meta.get("name"), meta.get("uid")
        if isinstance(rv, str) and rv and isinstance(name, str) and isinstance(uid, str) and uid:
            return (name, uid, rv)
        return None

    def _devices_of(self, pos: int, s: dict[str, Any]) -> list[Device]:
        got = self._devices.get(pos)
        if got is None:
            key = self._version(s)
            got = _PREPARED.get(key) if key is not None else None
            if got is None:
                got = _slice_devices(s, _pool_id(s))
                if key is not None:
                    _PREPARED[key] = got
            self._devices[pos] = got
        return got

    def devices(self, node: Node, term_matches: Callable[..., bool]) -> tuple[list[Device], list[str]]:
        """The devices of complete pools on `node`, and notes on the incomplete ones. Read them, never change them."""
        name = (node.get("metadata") or {}).get("name")
        kept = self._answers.get(name) if isinstance(name, str) else None
        if kept is not None and kept[0] is node:
            return kept[1]
        answer = self._read(node, name, term_matches)
        if isinstance(name, str):
            self._answers[name] = (node, answer)
        return answer

    def _read(self, node: Node, name: Any, term_matches: Callable[..., bool]) -> tuple[list[Device], list[str]]:
        chosen = [t for t in self.other if _targets(t[2], node, name, term_matches)]
        if isinstance(name, str) and name in self.by_node:
            chosen = sorted(chosen + self.by_node[name], key=lambda t: t[1]) if chosen else self.by_node[name]
        return _gather(chosen, self._devices_of)


# ----------------------------------------------------------------------------- matching


def selectable(req: Request, dev: Device) -> bool | None:
    """isSelectable: every selector of the class and of the request matches (None: unknown)."""
    if req.unmodelled or dev.unmodelled:
        unknown = True
    else:
        unknown = False
    for expr in req.selectors:  # in order, the class's first; the first false or error ends it
        m = dev.matches(expr)
        if m is None:
            return None
        if m is False:
            return False
    return None if unknown else True


def _attribute(dev: Device, qualified: str) -> Any:
    """lookupAttribute: the value of a fully qualified attribute (unqualified in the driver's domain)."""
    domain, _, ident = qualified.rpartition("/")
    attr = dev.attributes.get(qualified)
    if attr is None and domain == dev.driver:
        attr = dev.attributes.get(ident)
    if not isinstance(attr, dict) or not attr:
        return None
    return tuple(sorted((k, str(v)) for k, v in attr.items()))


class _Search:
    def __init__(self, claims: list[Claim], devices: list[Device], in_use: set[DeviceID]) -> None:
        self.claims, self.devices, self.in_use = claims, devices, in_use
        self.steps = 0
        self.used: set[DeviceID] = set()
        self.picked: list[tuple[int, str, Device]] = []  # (claim index, request name, device)
        self._match: dict[tuple[int, int, int, int], bool] = {}
        #: an uncertain device or selector was met: a failure proves nothing
        self.uncertain = ""

    def matches(self, ci: int, ri: int, ai: int, req: Request, di: int) -> bool:
        key = (ci, ri, ai, di)
        m = self._match.get(key)
        if m is None:
            s = selectable(req, self.devices[di])
            if s is None:
                self.uncertain = self.uncertain or "some devices or selectors are outside what this check models"
            m = bool(s)
            self._match[key] = m
        return m

    def constraints_ok(self, ci: int, name: str, dev: Device) -> bool:
        for names, attr in self.claims[ci].constraints:
            if names and name.split("/")[0] not in names:
                continue
            value = _attribute(dev, attr)
            if value is None:
                return False
            for pci, pname, pdev in self.picked:
                if pci == ci and (not names or pname.split("/")[0] in names) and _attribute(pdev, attr) != value:
                    return False
        return True

    def run(self, ci: int = 0, ri: int = 0) -> bool:
        if ci >= len(self.claims):
            return True
        if ri >= len(self.claims[ci].requests):
            return self.run(ci + 1, 0)
        for ai, req in enumerate(self.claims[ci].requests[ri]):
            if self._request(ci, ri, ai, req):
                return True
        return False

    def _request(self, ci: int, ri: int, ai: int, req: Request) -> bool:
        free = [
            i
            for i, d in enumerate(self.devices)
            if d.id not in self.used and d.id not in self.in_use and self.matches(ci, ri, ai, req, i)
        ]
        if req.mode == "All":
            # validateDeviceRequest: every selectable device of the node, allocated or not; allocateDevice
            # (must) then fails on one already in use
            every = [i for i in range(len(self.devices)) if self.matches(ci, ri, ai, req, i)]
            if self.claims[ci].constraints:  # allocateDevice(must) on a device that breaks one: a fatal error
                ok = bool(every) and len(free) == len(every) and self._take(ci, ri, req, free, len(free), 0)
                if not ok and every:
                    self.uncertain = self.uncertain or "a request for All devices may break a matchAttribute constraint"
                return ok
            if not every or len(free) < len(every):
                return False
            return self._take(ci, ri, req, free, len(free), 0)
        return self._take(ci, ri, req, free, req.count, 0)

    def _take(self, ci: int, ri: int, req: Request, free: list[int], need: int, start: int) -> bool:
        if need == 0:
            return self.run(ci, ri + 1)
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Budget
        for k in range(start, len(free) - need + 1):
            dev = self.devices[free[k]]
            if dev.id in self.used:
                continue
            if not self.constraints_ok(ci, req.name, dev):
                if req.mode == "All":  # allocateDevice(must): a fatal error, not a "no"
                    self.uncertain = "a request for All devices breaks a matchAttribute constraint"
                continue
            self.used.add(dev.id)
            self.picked.append((ci, req.name, dev))
            if self._take(ci, ri, req, free, need - 1, k + 1):
                return True
            self.picked.pop()
            self.used.discard(dev.id)
        return False


class _Budget(Exception):
    pass


def fit(claims: list[Claim], devices: list[Device], in_use: set[DeviceID]) -> Fit:
    """Whether all `claims` can be allocated at once from `devices`, none of `in_use`."""
    out = Fit(ok=None)
    for c in claims:
        for reqs in c.requests:
            for req in reqs:
                n = sum(1 for d in devices if d.id not in in_use and selectable(req, d) is True)
                out.matching[f'{c.label} request "{req.name}"'] = n
    search = _Search(claims, devices, in_use)
    try:
        found = search.run()
        if search.uncertain:  # a success or a failure that went past an uncertain device proves nothing
            out.why_unknown = search.uncertain
        elif found:
            out.ok = True
            out.taken = [d.id for _, _, d in search.picked]
        else:
            out.ok = False
    except _Budget:
        out.why_unknown = f"the search for an allocation took over {MAX_STEPS} steps"
    return out
