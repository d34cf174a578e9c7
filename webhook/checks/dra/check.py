"""The Device Allocation check: the DRA claims of every pod group, judged as the scheduler would.

k8s.io/kubernetes v1.37.2 pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:
PreFilter reads every `spec.resourceClaims` entry of the pod (a missing ResourceClaim:
`resourceclaim "x" not found`; a claim the resourceclaim controller has not made from its
template yet: the pod waits), a claim already allocated is kept and pins the pod to its
allocation's nodeSelector, one reserved for ResourceClaimReservedForMaxSize (256) consumers takes
no more; Filter runs the structured allocator on each node (allocate.py) and answers
`cannot allocate all claims` when it finds nothing, or the allocator's own error, e.g.
`request gpus: device class nosuch.example.com does not exist`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import Findings, cached, plural, with_stale
from webhook.models import provisioning
from webhook.models.context import needs_a_task
from webhook.models.dra.allocate import Claim, Device, DeviceID, Fit, Request, SliceIndex, _attribute, fit, selectable
from webhook.models.dra.cel import outside_subset
from webhook.models.nodes import eligible_nodes, node_listing, node_name, term_matches
from webhook.objects import Node
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload
from webhook.workloads.podspec import PodClaim, resource_claims

RESOURCE = "resource.k8s.io"
#: k8s.io/api resource/v1 ResourceClaimReservedForMaxSize
RESERVED_FOR_MAX = 256
_CACHES = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")


@dataclass
class _GroupClaims:
    group: PodGroup
    per_pod: list[Claim] = field(default_factory=list)  # one per pod: from templates
    shared: list[Claim] = field(default_factory=list)  # named, not yet allocated: allocated once
    pins: list[dict[str, Any]] = field(default_factory=list)  # allocated claims' nodeSelectors
    unknown: list[str] = field(default_factory=list)


def _label(kind: str, name: str) -> str:
    return f'{kind} "{name}"'


def _requests(spec: dict[str, Any], label: str, ctx: CheckContext, fails: list[str], where: str) -> Claim | None:
    """A claim's spec.devices as the allocator reads it; None (and a FAIL line) when a class is missing."""
    assert ctx.view is not None
    devices: dict[str, Any] = spec["devices"] if isinstance(spec.get("devices"), dict) else {}
    out = Claim(label, [])
    ok = True
    for r in devices.get("requests") or []:
        if not isinstance(r, dict):
            continue
        rname = str(r.get("name", "?"))
        alts: list[tuple[str, dict[str, Any]]] = []
        if isinstance(r.get("exactly"), dict):
            alts = [(rname, r["exactly"])]
        else:
            alts = [(f"{rname}/{s.get('name', '?')}", s) for s in r.get("firstAvailable") or [] if isinstance(s, dict)]
        reqs: list[Request] = []
        for name, e in alts:
            cls_name = str(e.get("deviceClassName", ""))
            cls = ctx.view.get_cached("deviceclasses", None, cls_name)
            if cls is None:
                fails.append(
                    f'{label} request "{name}" ({where}) asks for DeviceClass "{cls_name}", which does not exist '
                    f"(the scheduler: device class {cls_name} does not exist, and the pods stay Pending). "
                    f"Fix: install the DRA driver that provides it, or correct deviceClassName."
                )
                ok = False
                continue
            selectors = [
                str((s.get("cel") or {}).get("expression", ""))
                for s in [*((cls.get("spec") or {}).get("selectors") or []), *(e.get("selectors") or [])]
                if isinstance(s, dict)
            ]
            mode = str(e.get("allocationMode") or "ExactCount")
            reqs.append(
                Request(
                    name,
                    cls_name,
                    mode,
                    int(e.get("count") or 1),
                    selectors,
                    unmodelled="admin access" if e.get("adminAccess") else "",
                )
            )
        out.requests.append(reqs)
    for c in devices.get("constraints") or []:
        if isinstance(c, dict) and c.get("matchAttribute"):
            out.constraints.append((set(c.get("requests") or []), str(c["matchAttribute"])))
    return out if ok else None


def _in_use(claims: list[dict[str, Any]]) -> set[DeviceID]:
    """Devices allocated to any claim (status.allocation), admin-access results excepted
    (allocator: AllocatedState.AllocatedDevices)."""
    out: set[DeviceID] = set()
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            if isinstance(r, dict) and not r.get("adminAccess"):
                out.add((str(r.get("driver")), str(r.get("pool")), str(r.get("device"))))
    return out


def _read_group(wl: Workload, g: PodGroup, pcs: list[PodClaim], ctx: CheckContext, fails: list[str]) -> _GroupClaims:
    assert ctx.view is not None
    out = _GroupClaims(g)
    ns = wl.namespace
    for pc in pcs:
        where = f'pod claim "{pc.name}" of the {g.name} pods'
        if pc.template_name:
            t = ctx.view.get_cached("resourceclaimtemplates", ns, pc.template_name)
            if t is None:
                fails.append(
                    f'ResourceClaimTemplate "{pc.template_name}" not found in namespace "{ns}" ({where}): no claim '
                    f"is made for the pods, so they stay Pending. Fix: create it in {ns}, or correct "
                    f"resourceClaimTemplateName."
                )
                continue
            c = _requests((t.get("spec") or {}).get("spec") or {}, _label("ResourceClaimTemplate", pc.template_name),
                          ctx, fails, where)  # fmt: skip
            if c is not None:
                out.per_pod.append(c)
        elif pc.claim_name:
            rc = ctx.view.get_cached("resourceclaims", ns, pc.claim_name)
            if rc is None:
                fails.append(
                    f'ResourceClaim "{pc.claim_name}" not found in namespace "{ns}" ({where}): the scheduler '
                    f'answers resourceclaim "{pc.claim_name}" not found. Fix: create it in {ns}, or correct '
                    f"resourceClaimName."
                )
                continue
            status = rc.get("status") or {}
            reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, dict)]
            if status.get("allocation"):
                if len(reserved) + g.pods > RESERVED_FOR_MAX:
                    fails.append(
                        f'ResourceClaim "{pc.claim_name}" ({where}) is reserved for {len(reserved)} consumers; '
                        f"{g.pods} more pods exceed the {RESERVED_FOR_MAX} a claim can serve (the scheduler: "
                        f"resourceclaim in use). Fix: use a ResourceClaimTemplate, one claim per pod."
                    )
                sel = (status["allocation"] or {}).get("nodeSelector")
                if isinstance(sel, dict):
                    out.pins.append(sel)
                continue
            c = _requests(rc.get("spec") or {}, _label("ResourceClaim", pc.claim_name), ctx, fails, where)
            if c is not None:
                out.shared.append(c)
    return out


def _eligible(g: _GroupClaims, nodes: list[Node]) -> list[Node]:
    """Ready, schedulable nodes the pods select and tolerate (as the placement checks read them, nodes
    alike judged once: webhook.models.nodes.eligible_nodes), within the nodeSelector of every claim
    already allocated. Read it, never change it."""
    out = eligible_nodes(nodes, g.group.pod_spec)
    if g.pins:
        out = [n for n in out if all(any(term_matches(t, n) for t in p.get("nodeSelectorTerms") or []) for p in g.pins)]
    return out


class _Shapes:
    """Nodes alike in what the allocator reads are judged once per group.

    What `fit` and the greedy count read of a node is, for each of its devices in order: why it is
    not modelled, every request's selector answer, the values of the matchAttribute attributes,
    whether it is allocated already or taken by the groups before, and which devices share an ID.
    Two nodes with the same such shape get the same answers, the devices taken mapped by position.
    At 5,000 nodes of 8 GPUs the shapes are a handful (bench/scale.py --in-process);
    tests/test_dra_scale_paths.py compares the verdicts with the node-by-node reading."""

    def __init__(self, claims: list[Claim], per_pod: list[Claim]) -> None:
        self.claims, self.per_pod = claims, per_pod
        self.reqs = [r for c in claims for reqs in c.requests for r in reqs]
        self.attrs = sorted({a for c in claims for _, a in c.constraints})
        #: what `_device` depends on: the requests' selectors and unmodelled reasons, the attributes named
        #: (a string: its hash is computed once, not at each of 40,000 lookups)
        self.key = repr((tuple((tuple(r.selectors), r.unmodelled) for r in self.reqs), tuple(self.attrs)))
        self._seen: dict[tuple[Any, ...], tuple[Fit, int, list[int], int]] = {}
        #: False: every node is read on its own (the reference path the tests compare with)
        self.enabled = SHAPES

    def _device(self, d: Device) -> tuple[Any, ...]:
        got = d.shapes.get(self.key)  # kept on the device, so from review to review while its slice stays
        if got is None:
            got = (
                d.unmodelled,
                tuple(selectable(r, d) for r in self.reqs),
                tuple(_attribute(d, a) for a in self.attrs),
            )
            if len(d.shapes) >= 16:
                d.shapes.clear()
            d.shapes[self.key] = got
        return got

    def judge(
        self, devs: list[Device], in_use: set[DeviceID], taken: set[DeviceID], pods: int
    ) -> tuple[Fit, int, set[DeviceID], int]:
        """(this group alone on the node, the pods it holds greedily, the devices they take, its free devices)."""
        if not self.enabled:
            return self._judge(devs, in_use, taken, pods)
        first: dict[DeviceID, int] = {}
        shape = (
            tuple(self._device(d) for d in devs),
            tuple(first.setdefault(d.id, p) for p, d in enumerate(devs)),
            tuple((d.id in in_use, d.id in taken) for d in devs) if in_use or taken else (),
            pods,
        )
        hit = self._seen.get(shape)
        if hit is None:
            f, k, got, free = self._judge(devs, in_use, taken, pods)
            self._seen[shape] = (f, k, [first[i] for i in got], free)
            return f, k, got, free
        f, k, positions, free = hit
        return f, k, {devs[p].id for p in positions}, free

    def _judge(
        self, devs: list[Device], in_use: set[DeviceID], taken: set[DeviceID], pods: int
    ) -> tuple[Fit, int, set[DeviceID], int]:
        f = fit(self.claims, devs, in_use)  # the verdict: this group alone
        got: set[DeviceID] = set()
        k = 0
        if f.ok is not False:
            # how many pods this node holds, after what the groups before took (greedy: a lower bound,
            # each a real allocation) and at most (its free devices over the fewest a pod takes)
            blocked = {d.id for d in devs if d.id in in_use or d.id in taken}
            while k < pods:
                more = fit(self.claims if k == 0 else self.per_pod, devs, blocked | got)
                if not more.ok:
                    break
                got.update(more.taken)
                k += 1
                if not self.per_pod:  # only shared claims: every pod uses the same allocation
                    k = pods
        return f, k, got, sum(1 for d in devs if d.id not in in_use)


#: nodes alike judged once (see _Shapes); the tests turn it off for the reference reading
SHAPES = True

#: the index of the last ResourceSlice listing, with the slice cache's version it was read at
_KEPT: list[tuple[tuple[int, int], SliceIndex]] = []


def _slice_index(view: Any) -> SliceIndex:
    """The ResourceSlices by node: the kept index while the slice cache's version is the one it was read
    at (ClusterView.cache_version: a slice added, changed or removed, or a relist, is a new version),
    else a new one. A view that cannot tell its version gets a new index every review."""
    version = view.cache_version("resourceslices")
    if version is not None and _KEPT and _KEPT[0][0] == version:
        return _KEPT[0][1]
    index = SliceIndex(view.list_cached("resourceslices"))
    _KEPT[:] = [(version, index)] if version is not None else []
    return index


def _selector_notes(claims: list[Claim]) -> list[str]:
    notes = []
    for c in claims:
        for reqs in c.requests:
            for r in reqs:
                for e in r.selectors:
                    why = outside_subset(e)
                    if why:
                        notes.append(f'request "{r.name}" has a selector not evaluated: {why}')
    return notes


def _demand(claims: list[Claim]) -> str:
    parts = []
    for c in claims:
        for reqs in c.requests:
            r = reqs[0]
            many = "all matching devices" if r.mode == "All" else plural(r.count, "device")
            alt = f" (or {len(reqs) - 1} alternative{'s' if len(reqs) > 2 else ''})" if len(reqs) > 1 else ""
            parts.append(f'{c.label} request "{r.name}" wants {many} of DeviceClass "{r.class_name}"{alt}')
    return "; ".join(parts)


def _per_pod_min(claims: list[Claim]) -> tuple[int, bool]:
    """(fewest devices one pod takes, whether some request takes All)."""
    total, every = 0, False
    for c in claims:
        for reqs in c.requests:
            total += min((1 if r.mode == "All" else r.count) for r in reqs) if reqs else 0
            every = every or any(r.mode == "All" for r in reqs)
    return total, every


@dataclass
class _Cluster:
    """What every group is judged against: the nodes, their ResourceSlices, the devices already allocated."""

    nodes: list[Node]
    slices: SliceIndex
    in_use: set[DeviceID]
    #: each node's devices and its pools' notes, read once per review
    devices_of: dict[str, tuple[list[Device], list[str]]] = field(default_factory=dict)
    #: what the groups before took (greedy, pessimistic)
    taken: set[DeviceID] = field(default_factory=set)


@dataclass
class _Walk:
    """What the eligible nodes offer one group's claims, node by node (`_walk`)."""

    claims: list[Claim]
    #: how many nodes are eligible
    eligible: int
    #: the fewest devices one pod takes, and whether some request takes All (_per_pod_min)
    min_need: int
    every: bool
    #: (matching devices, node, matching devices by request) of the node that offers the most
    best: tuple[int, str, dict[str, int]] = (-1, "", {})
    fits_on: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    #: the pods surely placed (greedy: each a real allocation), and at most (free devices over the fewest a pod takes)
    lo: int = 0
    hi: int = 0
    incomplete: list[str] = field(default_factory=list)
    any_device: bool = False


async def _judge_group(ctx: CheckContext, gc: _GroupClaims, cluster: _Cluster, found: Findings) -> None:
    """The finding on one group: its claims fit at once, cannot be allocated on any node (`_none_fits`), or
    all its pods cannot hold theirs together (`_all_pods`); a warning when that cannot be verified."""
    g = gc.group
    claims = gc.shared + gc.per_pod
    if not claims:
        found.passes.append(f"the {g.name} pods' claims are already allocated")
        return
    notes = _selector_notes(claims)
    eligible = _eligible(gc, cluster.nodes)
    if not eligible:
        found.warns.append(
            f"No Ready node the {g.name} pods may use to allocate their claims on (see Node Selector Match)"[:120]
        )
        return
    walk = _walk(gc, claims, eligible, cluster)
    if not walk.fits_on and not walk.unknown:
        await _none_fits(ctx, gc, walk, notes, found)
        return
    if not walk.fits_on:
        why = notes[0] if notes else walk.unknown[0]
        found.warns.append(f"Cannot verify the claims of the {g.name} pods: {why}"[:120])
        return
    _all_pods(gc, walk, found)


def _walk(gc: _GroupClaims, claims: list[Claim], eligible: list[Node], cluster: _Cluster) -> _Walk:
    """The eligible nodes in order, each judged as the allocator would (`_Shapes`) for the pods still to place;
    the devices they take greedily are taken from the groups after. Stops once every pod is placed and three
    nodes fit."""
    g = gc.group
    shapes = _Shapes(claims, gc.per_pod)
    min_need, every = _per_pod_min(gc.per_pod)
    w = _Walk(claims, len(eligible), min_need, every)
    for n in eligible:
        nn = node_name(n)
        if nn not in cluster.devices_of:
            cluster.devices_of[nn] = cluster.slices.devices(n, term_matches)
        devs, pool_notes = cluster.devices_of[nn]
        w.incomplete.extend(pool_notes)
        w.any_device = w.any_device or bool(devs)
        # the pods still to place: a node takes devices for those only (the scheduler puts
        # each pod on one node; devices for more pods than the group has are not taken)
        f, k, got, free = shapes.judge(devs, cluster.in_use, cluster.taken, g.pods - w.lo)
        score = sum(f.matching.values())
        if score > w.best[0]:
            w.best = (score, nn, f.matching)
        if f.ok is None:
            w.unknown.append(f"{nn}: {f.why_unknown}")
        if f.ok is False:
            continue
        if f.ok:
            w.fits_on.append(nn)
        w.lo += k
        cluster.taken.update(got)
        if not gc.per_pod:
            w.hi = g.pods
        elif every:
            w.hi += 1  # a request for All devices leaves nothing on the node for a second pod
        else:
            w.hi += free // max(1, min_need)
        if w.lo >= g.pods and len(w.fits_on) >= 3:
            break  # every pod placed and the three nodes the verdict names found: no later node changes it
    return w


async def _none_fits(ctx: CheckContext, gc: _GroupClaims, walk: _Walk, notes: list[str], found: Findings) -> None:
    """No eligible node can allocate the group's claims at once (the scheduler: cannot allocate all claims): a
    FAIL when provisioning surely adds no such node, else a warning (also when a selector or a pool is not read)."""
    g = gc.group
    offer = ", ".join(f"{v} free matching devices for {k}" for k, v in walk.best[2].items())
    finding = (
        f"No node can allocate the claims of the {g.name} pods at once (the scheduler: cannot allocate all "
        f"claims): {_demand(walk.claims)}; the best of {plural(walk.eligible, 'eligible node')}, {walk.best[1]}, "
        f"offers {offer or 'no devices'}"
    )
    fix = "Fix: ask for what one node offers (count, selectors), or add nodes whose DRA driver publishes such devices."
    if notes:
        found.warns.append(f"Cannot verify the claims of the {g.name} pods: {notes[0]}"[:120])
    elif walk.incomplete or not walk.any_device:
        why = walk.incomplete[0] if walk.incomplete else "no ResourceSlice offers devices on them yet"
        found.warns.append(f"Cannot verify the claims of the {g.name} pods: {why}"[:120])
    else:
        prov = await provisioning.provisioning_for(ctx, g.pod_spec)
        line = f"{finding}, {prov.clause()}. {fix}"
        (found.fails if prov.certain_none else found.warns).append(line)


def _all_pods(gc: _GroupClaims, walk: _Walk, found: Findings) -> None:
    """Some node fits the group's claims: do all its pods hold theirs at once? A FAIL when the eligible nodes
    hold devices for fewer pods than the group (the JobSet's pods would wait for each other forever)."""
    g = gc.group
    if walk.lo >= g.pods:
        at_once = f"all {g.pods} {g.name} pods' claims fit at once" if g.pods > 1 else f"the {g.name} pods' claims fit"
        found.passes.append(f"{at_once} on {', '.join(walk.fits_on[:3])}")
    elif g.pods > 1 and gc.per_pod and walk.hi < g.pods:
        found.fails.append(
            f"The {g.pods} {g.name} pods need their claims allocated at once, at least "
            f"{plural(walk.min_need * g.pods, 'device')} ({_demand(gc.per_pod)} per pod), but the eligible nodes "
            f"hold devices for at most {walk.hi} of them (devices already allocated excluded): the JobSet's pods "
            f"would wait for each other forever. Fix: lower the number of pods or the devices per pod, "
            f"or add nodes with such devices."
        )
    else:  # short only after the groups before took theirs, or the greedy count is not sure
        found.warns.append(
            f"Cannot verify that all {g.pods} {g.name} pods' claims fit beside the job's other pods ({walk.lo} surely do)"[
                :120
            ]
        )


class DeviceAllocation(Check):
    name = "Device Allocation"
    default_action = "deny"
    needs_cluster = True
    local_capacity = True
    synchronous = False  # asks provisioning (live reads) when nothing fits
    kept_reads = True  # a job without claims is answered in the review's task; one with claims runs as a task
    permissions = tuple(p for r in _CACHES for p in cached(r, RESOURCE)) + cached("nodes")
    optional_permissions = provisioning.PERMISSIONS
    apis = ("resource.k8s.io/v1",)
    summary = (
        "The pods' DRA claims (resource.k8s.io/v1) can be allocated: their DeviceClasses, ResourceClaims and "
        "templates exist, and some eligible node's ResourceSlices satisfy every request at once, for all pods."
    )
    unverified = (
        (
            "dra-cel",
            "DRA selectors outside the evaluated CEL subset (capacity, quantity, semver, macros) are not judged",
        ),
    )

    def named_permissions(self, settings: Any) -> tuple[Any, ...]:
        return provisioning.autoscaler_permissions(settings)

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps: build (`_read_group`: each group's claims; a missing class, claim or template is a FAIL) →
        dispatch (`_walk`: the group's eligible nodes, after what the groups before took) → classify
        (`_judge_group`) → message (`_result`)."""
        assert ctx.view is not None
        wl = ctx.workload
        groups = [(g, resource_claims(g.pod_spec)) for g in wl.pod_groups]
        groups = [(g, pcs) for g, pcs in groups if pcs]
        if not groups:
            return CheckResult(self.name, Status.SKIP, "No pod uses a DRA ResourceClaim")
        # a walk over the nodes may end in provisioning's reads: a job with claims runs as a task from here,
        # so no walk is done twice (in the kept-only run, then again as a task)
        needs_a_task(ctx, "the claims' allocation")
        found = Findings()
        read = [_read_group(wl, g, pcs, ctx, found.fails) for g, pcs in groups]
        if found.fails:
            return self._result(found.fails, found.warns, found.passes, ctx)
        view = ctx.view
        cluster = _Cluster(node_listing(view), _slice_index(view), _in_use(view.list_cached("resourceclaims")))
        for gc in read:
            await _judge_group(ctx, gc, cluster, found)
        return self._result(found.fails, found.warns, found.passes, ctx)

    def _result(
        self, fails: list[str], warns: list[str], passes: list[str], ctx: CheckContext
    ) -> CheckResult | list[CheckResult]:
        out: list[CheckResult] = []
        if fails:
            out.append(
                with_stale(
                    CheckResult(self.name, Status.FAIL, " ".join(fails), details=fails + warns + passes), ctx, *_CACHES
                )
            )
        if warns:
            out.append(
                with_stale(CheckResult(self.name, Status.WARN, " ".join(warns), details=list(warns)), ctx, *_CACHES)
            )
        if not out:
            return with_stale(
                CheckResult(self.name, Status.PASS, "DRA claims can be allocated: " + "; ".join(passes)), ctx, *_CACHES
            )
        return out[0] if len(out) == 1 else out


CHECKS = [DeviceAllocation()]
