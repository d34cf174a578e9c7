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
from webhook.checks.common import cached, plural, with_stale
from webhook.models import provisioning
from webhook.models.dra.allocate import Claim, Device, DeviceID, Fit, Request, SliceIndex, _attribute, fit, selectable
from webhook.models.dra.cel import outside_subset
from webhook.models.nodes import eligible_nodes, node_listing, node_name, term_matches
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


def _eligible(g: _GroupClaims, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


class DeviceAllocation(Check):
    name = "Device Allocation"
    default_action = "deny"
    needs_cluster = True
    local_capacity = True
    synchronous = False  # asks provisioning (live reads) when nothing fits
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
        assert ctx.view is not None
        wl = ctx.workload
        groups = [(g, resource_claims(g.pod_spec)) for g in wl.pod_groups]
        groups = [(g, pcs) for g, pcs in groups if pcs]
        if not groups:
            return CheckResult(self.name, Status.SKIP, "No pod uses a DRA ResourceClaim")
        fails: list[str] = []
        warns: list[str] = []
        passes: list[str] = []
        read = [_read_group(wl, g, pcs, ctx, fails) for g, pcs in groups]
        if fails:
            return self._result(fails, warns, passes, ctx)
        view = ctx.view
        nodes = node_listing(view)
        slices = _slice_index(view)
        in_use = _in_use(view.list_cached("resourceclaims"))
        devices_of: dict[str, tuple[list[Device], list[str]]] = {}
        taken: set[DeviceID] = set()  # what the groups before took (greedy, pessimistic)
        for gc in read:
            g = gc.group
            claims = gc.shared + gc.per_pod
            if not claims:
                passes.append(f"the {g.name} pods' claims are already allocated")
                continue
            notes = _selector_notes(claims)
            eligible = _eligible(gc, nodes)
            if not eligible:
                warns.append(
                    f"No Ready node the {g.name} pods may use to allocate their claims on (see Node Selector Match)"[
                        :120
                    ]
                )
                continue
            best: tuple[int, str, dict[str, int]] = (-1, "", {})
            fits_on: list[str] = []
            unknown: list[str] = []
            lo = hi = 0
            shapes = _Shapes(claims, gc.per_pod)
            min_need, every = _per_pod_min(gc.per_pod)
            incomplete: list[str] = []
            any_device = False
            for n in eligible:
                nn = node_name(n)
                if nn not in devices_of:
                    devices_of[nn] = slices.devices(n, term_matches)
                devs, pool_notes = devices_of[nn]
                incomplete.extend(pool_notes)
                any_device = any_device or bool(devs)
                # the pods still to place: a node takes devices for those only (the scheduler puts
                # each pod on one node; devices for more pods than the group has are not taken)
                f, k, got, free = shapes.judge(devs, in_use, taken, g.pods - lo)
                score = sum(f.matching.values())
                if score > best[0]:
                    best = (score, nn, f.matching)
                if f.ok is None:
                    unknown.append(f"{nn}: {f.why_unknown}")
                if f.ok is False:
                    continue
                if f.ok:
                    fits_on.append(nn)
                lo += k
                taken.update(got)
                if not gc.per_pod:
                    hi = g.pods
                elif every:
                    hi += 1  # a request for All devices leaves nothing on the node for a second pod
                else:
                    hi += free // max(1, min_need)
                if lo >= g.pods and len(fits_on) >= 3:
                    break  # every pod placed and the three nodes the verdict names found: no later node changes it
            demand = _demand(claims)
            if not fits_on and not unknown:
                offer = ", ".join(f"{v} free matching devices for {k}" for k, v in best[2].items())
                finding = (
                    f"No node can allocate the claims of the {g.name} pods at once (the scheduler: cannot allocate all "
                    f"claims): {demand}; the best of {plural(len(eligible), 'eligible node')}, {best[1]}, offers "
                    f"{offer or 'no devices'}"
                )
                fix = "Fix: ask for what one node offers (count, selectors), or add nodes whose DRA driver publishes such devices."
                if notes:
                    warns.append(f"Cannot verify the claims of the {g.name} pods: {notes[0]}"[:120])
                elif incomplete or not any_device:
                    why = incomplete[0] if incomplete else "no ResourceSlice offers devices on them yet"
                    warns.append(f"Cannot verify the claims of the {g.name} pods: {why}"[:120])
                else:
                    prov = await provisioning.provisioning_for(ctx, g.pod_spec)
                    line = f"{finding}, {prov.clause()}. {fix}"
                    (fails if prov.certain_none else warns).append(line)
                continue
            if not fits_on:
                why = notes[0] if notes else unknown[0]
                warns.append(f"Cannot verify the claims of the {g.name} pods: {why}"[:120])
                continue
            if lo >= g.pods:
                at_once = (
                    f"all {g.pods} {g.name} pods' claims fit at once"
                    if g.pods > 1
                    else f"the {g.name} pods' claims fit"
                )
                passes.append(f"{at_once} on {', '.join(fits_on[:3])}")
            elif g.pods > 1 and gc.per_pod and hi < g.pods:
                fails.append(
                    f"The {g.pods} {g.name} pods need their claims allocated at once, at least "
                    f"{plural(min_need * g.pods, 'device')} ({_demand(gc.per_pod)} per pod), but the eligible nodes "
                    f"hold devices for at most {hi} of them (devices already allocated excluded): the JobSet's pods "
                    f"would wait for each other forever. Fix: lower the number of pods or the devices per pod, "
                    f"or add nodes with such devices."
                )
            else:  # short only after the groups before took theirs, or the greedy count is not sure
                warns.append(
                    f"Cannot verify that all {g.pods} {g.name} pods' claims fit beside the job's other pods ({lo} surely do)"[
                        :120
                    ]
                )
        return self._result(fails, warns, passes, ctx)

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
