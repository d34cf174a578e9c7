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

from webhook.checks.dra.cel import device_matches

__all__ = ["Device", "Request", "Claim", "node_devices", "fit", "Fit", "MAX_STEPS"]

#: search steps per node before the answer is "unknown"
MAX_STEPS = 20_000

DeviceID = tuple[str, str, str]  # (driver, pool, device): structured.DeviceID


@dataclass
class Device:
    id: DeviceID
    attributes: dict[str, Any]
    #: why this model cannot say whether the device may be allocated ("" when it can)
    unmodelled: str = ""

    @property
    def driver(self) -> str:
        return self.id[0]


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


def _node_selector_matches(selector: Any, node: dict[str, Any], term_matches: Callable[..., bool]) -> bool:
    terms = (selector or {}).get("nodeSelectorTerms") if isinstance(selector, dict) else None
    return any(term_matches(t, node) for t in terms or [] if isinstance(t, dict))


def node_devices(
    slices: list[dict[str, Any]], node: dict[str, Any], term_matches: Callable[..., bool]
) -> tuple[list[Device], list[str]]:
    """The devices of complete pools whose slices target `node` (GatherPools), and notes on the
    pools left out (incomplete: the allocator skips them too)."""
    name = (node.get("metadata") or {}).get("name")
    pools: dict[tuple[str, str], list[dict[str, Any]]] = {}
    counts: dict[tuple[str, str], int] = {}
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        pid = (str(spec.get("driver", "")), str(pool.get("name", "")))
        gen = int(pool.get("generation") or 0)
        newest[pid] = max(newest.get(pid, gen), gen)
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        pid = (str(spec.get("driver", "")), str(pool.get("name", "")))
        if int(pool.get("generation") or 0) != newest[pid]:
            continue
        if spec.get("sharedCounters") or spec.get("perDeviceNodeSelection"):
            targets = spec.get("perDeviceNodeSelection") and any(
                d.get("nodeName") == name or d.get("allNodes") for d in spec.get("devices") or []
            )
            if not targets and spec.get("nodeName") != name:
                continue
        elif spec.get("nodeName"):
            if spec["nodeName"] != name:
                continue
        elif spec.get("allNodes"):
            pass
        elif spec.get("nodeSelector"):
            if not _node_selector_matches(spec["nodeSelector"], node, term_matches):
                continue
        else:
            continue
        pools.setdefault(pid, []).append(s)
        counts[pid] = int(pool.get("resourceSliceCount") or 1)
    devices: list[Device] = []
    notes: list[str] = []
    for pid, got in pools.items():
        if len(got) < counts[pid]:
            notes.append(f"pool {pid[1]} of {pid[0]} is incomplete ({len(got)} of {counts[pid]} slices)")
            continue
        for s in got:
            spec = s.get("spec") or {}
            shared = "shared counters" if spec.get("sharedCounters") or spec.get("perDeviceNodeSelection") else ""
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
                devices.append(Device((pid[0], pid[1], str(d.get("name", ""))), dict(d.get("attributes") or {}), why))
    return devices, notes


# ----------------------------------------------------------------------------- matching


def selectable(req: Request, dev: Device) -> bool | None:
    """isSelectable: every selector of the class and of the request matches (None: unknown)."""
    if req.unmodelled or dev.unmodelled:
        unknown = True
    else:
        unknown = False
    for expr in req.selectors:  # in order, the class's first; the first false or error ends it
        m = device_matches(expr, dev.driver, dev.attributes)
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
