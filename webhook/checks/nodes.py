"""Nodes: can the job's pods land anywhere?

Three checks over the cached Nodes, one verdict per question so that policy can act on
each: does any Ready, schedulable (not cordoned) node match the pods' nodeSelector and
required node affinity; does the largest pod of each group fit the allocatable of one
such node whose taints it tolerates; and does every toleration match some node's taint
(a misspelled toleration is the usual reason a pod stays Pending on a tainted GPU pool).
Only allocatable is compared: the webhook does not watch pods, so free capacity is not known.

Matching follows the scheduler: k8s.io/component-helpers scheduling/corev1/nodeaffinity/
nodeaffinity.go (GetRequiredNodeAffinity: nodeSelector AND the ORed required terms), used by
k8s.io/kubernetes pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go; taints as
pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go (NoSchedule and NoExecute
filter) with k8s.io/api core/v1 toleration.go ToleratesTaint.

A pod no node takes today still runs once a node that takes it is added, so Node Selector
Match and Per-Node Schedulability deny only when nothing could add one (webhook/models/provisioning.py:
Karpenter NodePools, cluster-autoscaler, Kueue ResourceFlavors, each read as its project does)
and warn otherwise, naming what they saw. Matching nodes that are only NotReady or cordoned
are a warning: they may come back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from webhook.checks.base import Check, CheckContext, Permission
from webhook.checks.common import Findings, cached, fail_and_warn, plural, with_stale
from webhook.config import Settings
from webhook.models import provisioning
from webhook.models.nodes import (
    _alloc,
    _by_shape,
    _dict,
    _distinct_taints,
    _fmt_resources,
    _listing,
    _selected_and_usable,
    _walk,
    blocking_taints,
    is_cordoned,
    node_name,
    pod_field,
    required_terms,
    selection_text,
    taint_text,
    tolerates,
    toleration_text,
)
from webhook.objects import Node, Toleration
from webhook.quantity import format_quantity
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload
from webhook.workloads.podspec import pod_requests

NODE_PERMISSIONS = cached("nodes")
#: condition taints the node lifecycle controller adds and removes by itself
_CONDITION_TAINT_PREFIX = "node.kubernetes.io/"


def _selecting_groups(wl: Workload) -> list[PodGroup]:
    return [g for g in wl.pod_groups if (g.pod_spec.get("nodeSelector") or required_terms(g.pod_spec) is not None)]


def _results(
    name: str, fails: list[str], warns: list[str], passes: list[str], ok: str, ctx: CheckContext
) -> CheckResult | list[CheckResult]:
    """One FAIL (all failures), one WARN (all warnings), both, or the PASS `ok`."""
    out = [
        with_stale(r, ctx, "nodes")
        for r in fail_and_warn(name, fails, warns, fail_details=fails + warns + passes, warn_sep=" ")
    ]
    if not out:
        return with_stale(CheckResult(name, Status.PASS, ok), ctx, "nodes")
    return out[0] if len(out) == 1 else out


async def _judged(
    ctx: CheckContext, group: PodGroup, finding: str, fix: str, fails: list[str], warns: list[str]
) -> None:
    """A group no node takes: FAIL when nothing could add one that does, else WARN saying what could."""
    prov = await provisioning.provisioning_for(ctx, group.pod_spec)
    line = f"{finding}, {prov.clause()}. {fix}"
    (fails if prov.certain_none else warns).append(line)


# --- checks -------------------------------------------------------------------------------


class _ProvisionableNodeCheck(Check):
    """A check on the nodes a pod could land on, that denies only when nothing could add a node
    (provisioning.py): it reads the node cache and, optionally, what could provision one."""

    default_action = "deny"
    needs_cluster = True
    local_capacity = True
    # the node cache and, when nothing fits, what could provision a node: all of it read through the view
    reads_only_the_view = True
    permissions = NODE_PERMISSIONS
    optional_permissions = provisioning.PERMISSIONS
    apis = ("v1",)

    def named_permissions(self, settings: Settings) -> tuple[Permission, ...]:
        return provisioning.autoscaler_permissions(settings)


class NodeSelectorMatch(_ProvisionableNodeCheck):
    name = "Node Selector Match"
    # denies only when no node matches and nothing could add one (provisioning.py)
    summary = (
        "Some Ready, schedulable (not cordoned) node matches each pod's nodeSelector and required node affinity, "
        "or a Karpenter NodePool, cluster-autoscaler or Kueue ResourceFlavor could add one."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        wl = ctx.workload
        groups = _selecting_groups(wl)
        if not groups:
            return CheckResult(self.name, Status.SKIP, "No nodeSelector or required node affinity set")
        nodes = _listing(ctx.view)
        if not nodes:
            return with_stale(
                CheckResult(
                    self.name, Status.WARN, "No nodes are visible, so the pods' node selection cannot be matched"
                ),
                ctx,
                "nodes",
            )
        fails: list[str] = []
        warns: list[str] = []
        passes: list[str] = []
        for g in groups:
            what = selection_text(g.pod_spec)
            matching, usable = _by_shape(nodes, g.pod_spec, _selected_and_usable(g.pod_spec), 2)
            if usable:
                passes.append(f"{what} of the {g.name} pods matches {plural(len(usable), 'Ready, schedulable node')}")
                continue
            if not matching:
                sel = _dict(g.pod_spec.get("nodeSelector"))
                label = " ".join(f"{k}={v}" for k, v in sel.items())
                fix = (
                    f"Fix: label a node (kubectl label node <name> {label}) or correct {pod_field(wl, 'nodeSelector')}."
                    if sel and required_terms(g.pod_spec) is None
                    else f"Fix: label a node to satisfy it, or correct {pod_field(wl, 'nodeSelector')} / affinity."
                )
                await _judged(
                    ctx,
                    g,
                    f"No node matches {what} of the {g.name} pods (0 of {plural(len(nodes), 'node')})",
                    fix,
                    fails,
                    warns,
                )
            else:
                states = ", ".join(
                    f"{node_name(n)}: {'cordoned' if is_cordoned(n) else 'NotReady'}" for n in matching[:5]
                )
                cordoned = [node_name(n) for n in matching if is_cordoned(n)]
                fix = f"uncordon (kubectl uncordon {cordoned[0]}) or repair them" if cordoned else "repair them"
                warns.append(
                    f"The {plural(len(matching), 'node')} matching {what} of the {g.name} pods "
                    f"{'is' if len(matching) == 1 else 'are'} not Ready or cordoned ({states}): the pods wait "
                    f"until one is back. Fix: {fix}, or label another node to match."
                )
        return _results(self.name, fails, warns, passes, "; ".join(passes), ctx)


class PerNodeSchedulability(_ProvisionableNodeCheck):
    name = "Per-Node Schedulability"
    # denies only when nothing could add a node that fits (provisioning.py)
    summary = (
        "Each pod fits the allocatable of one Ready, schedulable node that it selects and whose taints it tolerates, "
        "or a Karpenter NodePool, cluster-autoscaler or Kueue ResourceFlavor could add one."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        """Steps: each pod group's requests against the nodes it may use (`_group`), then the verdict (`_verdict`)."""
        assert ctx.view is not None
        nodes = _listing(ctx.view)
        if not nodes:
            return with_stale(CheckResult(self.name, Status.SKIP, "No nodes are visible"), ctx, "nodes")
        found = _Found()
        for g in ctx.workload.pod_groups:
            try:
                req = pod_requests(g.pod_spec)
            except ValueError as exc:
                return CheckResult(
                    self.name, Status.WARN, f"Could not compute the requests of the {g.name} pods: {exc}"
                )
            await self._group(ctx, g, nodes, {r: v for r, v in req.items() if v > 0}, found)
        return self._verdict(ctx, found)

    @staticmethod
    async def _group(
        ctx: CheckContext, g: PodGroup, nodes: list[Node], need: dict[str, Decimal], found: _Found
    ) -> None:
        """One pod group: no node selects it (Node Selector Match says why), every node it selects has a taint
        it does not tolerate, it fits one of the eligible nodes, or none of them alone can fit it."""
        wl = ctx.workload
        selected, eligible, fits = _walk(nodes, g.pod_spec, need)
        if not selected:
            found.unselected.append(g.name)
            return
        if not eligible:
            sample = selected[0]
            bt = blocking_taints(g.pod_spec, sample)
            t = bt[0]
            tol = f"{{key: {t.get('key', '')}, operator: Exists, effect: {t.get('effect', '')}}}"
            await _judged(
                ctx,
                g,
                f"Every Ready node the {g.name} pods may use has a taint they do not tolerate "
                f"({node_name(sample)}: {', '.join(taint_text(x) for x in bt)})",
                f"Fix: add a toleration such as {tol} to {pod_field(wl, 'tolerations')}, or use untainted nodes.",
                found.fails,
                found.warns,
            )
            return
        if fits:
            found.passes.append(
                f"{g.name} ({_fmt_resources(need)}) fits {len(fits)} of {plural(len(eligible), 'eligible node')}"
            )
            return
        await _judged(
            ctx,
            g,
            f"No single node can fit a {g.name} pod ({_fmt_resources(need)}): {_most_offered(need, eligible)}",
            "Fix: add nodes with that much allocatable, or reduce the pod's requests.",
            found.fails,
            found.warns,
        )

    def _verdict(self, ctx: CheckContext, found: _Found) -> CheckResult | list[CheckResult]:
        """FAIL and WARN as found; no group selected by any node: SKIP; else the PASS naming each group's fit."""
        if found.fails or found.warns:
            return _results(self.name, found.fails, found.warns, found.passes, "", ctx)
        if not found.passes:
            return with_stale(
                CheckResult(
                    self.name,
                    Status.SKIP,
                    f"No Ready, schedulable node matches the node selection of the {', '.join(found.unselected)} pods (see Node Selector Match)",
                ),
                ctx,
                "nodes",
            )
        details = [f"{name}: no Ready, schedulable node matches its node selection" for name in found.unselected]
        return with_stale(
            CheckResult(self.name, Status.PASS, "Each pod fits a node: " + "; ".join(found.passes), details=details),
            ctx,
            "nodes",
        )


@dataclass
class _Found(Findings):
    """What Per-Node Schedulability found, pod group by pod group."""

    #: the pod groups no Ready, schedulable node selects (left to Node Selector Match)
    unselected: list[str] = field(default_factory=list)


def _most_offered(need: dict[str, Decimal], eligible: list[Node]) -> str:
    """Per resource short on every eligible node, the most one of them offers (or: none has all of it at once)."""
    short = []
    for r, v in sorted(need.items()):
        best = max(eligible, key=lambda n: _alloc(n, r))
        if _alloc(best, r) < v:
            short.append(f"{r} {format_quantity(_alloc(best, r), r)} ({node_name(best)})")
    return (
        f"the most any of the {plural(len(eligible), 'eligible node')} offers is {', '.join(short)}"
        if short
        else f"none of the {plural(len(eligible), 'eligible node')} has all of it at once"
    )


class Tolerations(Check):
    name = "Tolerations"
    synchronous = True  # reads only the Workload and cached state
    needs_cluster = True
    local_capacity = True
    permissions = NODE_PERMISSIONS
    apis = ("v1",)
    summary = "Every toleration matches a taint on some node (a misspelled toleration leaves pods Pending)."

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        wl = ctx.workload
        users: dict[str, tuple[Toleration, list[str]]] = {}
        any_tol = False
        for g in wl.pod_groups:
            for tol in g.pod_spec.get("tolerations") or []:
                any_tol = True
                key = tol.get("key") or ""
                if (tol.get("operator") == "Exists" and not key) or key.startswith(_CONDITION_TAINT_PREFIX):
                    continue  # tolerates everything, or a condition taint that comes and goes
                text = toleration_text(tol)
                users.setdefault(text, (tol, []))[1].append(g.name)
        if not any_tol:
            return CheckResult(self.name, Status.SKIP, "No tolerations set")
        if not users:
            return CheckResult(
                self.name, Status.PASS, "The tolerations match any taint (key-less Exists) or node condition taints"
            )
        nodes = _listing(ctx.view)
        if not nodes:
            return with_stale(CheckResult(self.name, Status.SKIP, "No nodes are visible"), ctx, "nodes")
        all_taints = _distinct_taints(nodes)
        unmatched = {
            text: groups for text, (tol, groups) in users.items() if not any(tolerates(tol, t) for t in all_taints)
        }
        if unmatched:
            groups = sorted({g for gs in unmatched.values() for g in gs})
            lines = [
                f"toleration {text} of the {', '.join(dict.fromkeys(gs))} pods matches no node's taint"
                for text, gs in unmatched.items()
            ]
            return with_stale(
                CheckResult(
                    self.name,
                    Status.WARN,
                    f"No node has a taint matching toleration {', '.join(unmatched)} ({', '.join(groups)} pods): misspelled or unneeded?",
                    details=lines,
                    hints=[
                        "Compare with the nodes' taints: kubectl get nodes -o custom-columns=NAME:.metadata.name,TAINTS:.spec.taints"
                    ],
                ),
                ctx,
                "nodes",
            )
        return with_stale(
            CheckResult(self.name, Status.PASS, "Every toleration matches a taint on at least one node"), ctx, "nodes"
        )


CHECKS = [NodeSelectorMatch(), PerNodeSchedulability(), Tolerations()]
