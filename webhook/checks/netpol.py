"""Network Policies: would the NetworkPolicies of the job's namespaces drop its own traffic?

A benchmark whose workers cannot reach the endpoint, or a training job whose nodes cannot
reach each other, starts and then hangs on its first connection. AIPerf's own preflight only
lists the namespace's policies (operator/preflight/_infra.py `_check_network_policies`:
"Ensure pod-to-pod communication is allowed"); this check evaluates them for the paths the
job needs, as the NetworkPolicy API defines them (k8s.io/api networking/v1 types.go; the
cases of kubernetes-sigs/network-policy-api's conformance suite follow the same rules): isolation,
rules, peers and ports are evaluated in webhook/models/netpol.py, both sides of each
connection (the egress of the source pod and the ingress of the destination pod).

The paths: an AIPerfJob's (and AIPerfSweep's) worker pods → the pods behind each in-cluster
endpoint Service (selected by the Service's selector, on its targetPort), and → kube-dns
(UDP 53) to resolve the name; the AIPerf operator (controllers.aiperf.namespace, pods
`app.kubernetes.io/name=aiperf-operator`) → the controller pod's `api` and `results` ports
(progress and results); the job's own pods → each other on the ports its pods declare
(AIPerf's ZMQ and API ports, Trainer's rendezvous port; `health` ports are the kubelet's,
which NetworkPolicy does not govern), and for TrainJobs also on every port (NCCL, Gloo and MPI
open connections on ports of their own choosing).

The job's pod labels are its templates' labels plus the JobSet's name labels; labels that
its controllers add besides (jobset.sigs.k8s.io/, batch.kubernetes.io/, Kueue's, Trainer's)
and the endpoint pods' labels beyond the Service's selector are unknown, so a policy that
selects by them gives "cannot tell", never a verdict.

**Always a warning, never a deny.** Policies are enforced by the CNI: one that does not
enforce them (the project's own node runs the bridge CNI, which does not) runs the job fine,
and pod IPs, the full label sets and vendor policy kinds are not visible here. A warning
names the policy, the path and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import cached, with_stale
from webhook.models.endpoint import endpoint_urls, service_of, url_port
from webhook.models.netpol import Labels, Peer, Port, Side, direction
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup

NETWORKING = "networking.k8s.io"
#: label domains the job's controllers add to its pods: a selector on them cannot be judged here
CONTROLLER_LABEL_PREFIXES = (
    "jobset.sigs.k8s.io/",
    "batch.kubernetes.io/",
    "kueue.x-k8s.io/",
    "trainer.kubeflow.org/",
    "controller-uid",
    "job-name",
)
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
DNS_NAMESPACE, DNS_LABELS = "kube-system", {"k8s-app": "kube-dns"}
#: AIPerf 0.13.0 kubernetes/constants.py OPERATOR_POD_LABEL_SELECTOR
OPERATOR_LABELS = {"app.kubernetes.io/name": "aiperf-operator"}
#: the controller pod's ports the operator calls: the API (progress) and the results sidecar
OPERATOR_PORTS = ("api", "results")

# --- the job's paths ---------------------------------------------------------------------


def _ns_labels(ctx: CheckContext, ns: str) -> Labels:
    assert ctx.view is not None
    obj = ctx.view.get_cached("namespaces", None, ns)
    if obj is None:
        return Labels({"kubernetes.io/metadata.name": ns}, complete=False)
    return Labels({str(k): str(v) for k, v in ((obj.get("metadata") or {}).get("labels") or {}).items()})


def _group_peer(ctx: CheckContext, g: PodGroup, ns_labels: Labels) -> Peer:
    wl = ctx.workload
    raw = g.pod_metadata.get("labels") if isinstance(g.pod_metadata, dict) else None
    labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    js = (wl.derived.get("jobSet") or {}).get("metadata") or {}
    labels[JOBSET_NAME_LABEL] = str(js.get("name") or wl.name)
    labels[REPLICATED_JOB_LABEL] = g.name
    named = {
        str(p["name"]): int(p["containerPort"])
        for c in g.containers()
        for p in _ports(c)
        if isinstance(p, dict) and p.get("name") and isinstance(p.get("containerPort"), int)
    }
    return Peer(
        f"{g.name} pods",
        wl.namespace,
        Labels(labels, open_prefixes=CONTROLLER_LABEL_PREFIXES),
        ns_labels,
        named,
    )


def _ports(container: Any) -> list[Any]:
    ports = container.get("ports") if isinstance(container, dict) else None
    return ports if isinstance(ports, list) else []


def serving_ports(g: PodGroup) -> list[Port]:
    """The ports a group's pods declare, but the kubelet's probe ports (named `health`)."""
    out: list[Port] = []
    for c in g.containers(init=False):
        for p in _ports(c):
            if not isinstance(p, dict) or not isinstance(p.get("containerPort"), int):
                continue
            if str(p.get("name") or "").startswith("health"):
                continue
            port = Port(int(p["containerPort"]), p.get("name"), str(p.get("protocol") or "TCP"))
            if port not in out:
                out.append(port)
    return out


@dataclass(frozen=True)
class Path:
    src: Peer
    dst: Peer
    port: Port
    what: str  # "the workers pods' requests to Service "llm" in "models""
    consequence: str


def job_paths(ctx: CheckContext) -> list[Path]:
    """The paths the job needs, in order: to the endpoint Services and to kube-dns (`_service_paths`,
    `_dns_paths`), from the AIPerf operator (`_operator_paths`), between the job's pods (`_peer_paths`),
    and a TrainJob's collective traffic on any port (`_collective_paths`)."""
    wl = ctx.workload
    nsl = _ns_labels(ctx, wl.namespace)
    # hostNetwork pods: "NetworkPolicy behaviour for hostNetwork pods is undefined" (the API's
    # documentation); most CNIs do not apply policies to them, so they are not judged
    groups = [g for g in wl.pod_groups if g.pods > 0 and g.pod_spec.get("hostNetwork") is not True]
    peers = {g.name: _group_peer(ctx, g, nsl) for g in groups}
    out: list[Path] = []
    if wl.facts.calls_endpoints:
        workers = [g for g in groups if g.role.startswith("workers")] or groups
        out += _service_paths(ctx, workers, peers)
        out += _dns_paths(ctx, workers, peers)
        out += _operator_paths(ctx, groups, peers)
    out += _peer_paths(ctx, groups, peers)
    if wl.facts.collective:
        out += _collective_paths(groups, peers)
    return out


def _service_paths(ctx: CheckContext, workers: list[PodGroup], peers: dict[str, Peer]) -> list[Path]:
    """The workers' requests to the pods behind each in-cluster endpoint Service, on its targetPort."""
    out: list[Path] = []
    for url in endpoint_urls(ctx.workload.obj):
        svc_ns = service_of(url)
        if svc_ns is None:
            continue
        svc, ns = svc_ns
        obj = ctx.view.get_cached("services", ns, svc) if ctx.view is not None else None
        if obj is None:
            continue  # Endpoint Service reports it
        spec = obj.get("spec") or {}
        if spec.get("type") == "ExternalName":
            continue
        port = _target_port(spec, url_port(url))
        dst = Peer(
            f'Service "{svc}" in "{ns}"',
            ns,
            Labels({str(k): str(v) for k, v in (spec.get("selector") or {}).items()}, complete=False),
            _ns_labels(ctx, ns),
        )
        for g in workers:
            out.append(
                Path(peers[g.name], dst, port, f"the {g.name} pods' requests to {dst.what}", "the benchmark hangs")
            )
    return out


def _dns_paths(ctx: CheckContext, workers: list[PodGroup], peers: dict[str, Peer]) -> list[Path]:
    """The workers' DNS lookups (UDP 53 to kube-dns), when an endpoint is an in-cluster Service name."""
    # CoreDNS as kubeadm and most distributions deploy it carries k8s-app=kube-dns and its
    # ReplicaSet's pod-template-hash: taken as its whole label set, so the other policies of
    # kube-system (selecting other pods) do not turn every DNS path into "cannot tell"
    dns = Peer(
        "kube-dns pods",
        DNS_NAMESPACE,
        Labels(dict(DNS_LABELS), open_prefixes=("pod-template-hash",)),
        _ns_labels(ctx, DNS_NAMESPACE),
    )
    if not any(service_of(u) for u in endpoint_urls(ctx.workload.obj)):
        return []
    return [
        Path(
            peers[g.name],
            dns,
            Port(53, "dns", "UDP"),
            f"the {g.name} pods' DNS lookups (kube-dns in kube-system)",
            "the endpoint's name does not resolve",
        )
        for g in workers
    ]


def _operator_paths(ctx: CheckContext, groups: list[PodGroup], peers: dict[str, Peer]) -> list[Path]:
    """The AIPerf operator's requests to the ports named in OPERATOR_PORTS of the job's pods."""
    # the operator polls the controller pod's API (progress) and its results sidecar
    # (AIPerf 0.13.0 operator/progress_client.py: <jobset>-controller-0-0.<jobset>.<ns>.svc)
    op = ctx.settings.controllers.aiperf.namespace
    operator = Peer(
        f'the AIPerf operator (namespace "{op}")',
        op,
        Labels(dict(OPERATOR_LABELS), complete=False),
        _ns_labels(ctx, op),
    )
    out: list[Path] = []
    for g in groups:
        for port in serving_ports(g):
            if port.name in OPERATOR_PORTS:
                out.append(
                    Path(
                        operator,
                        peers[g.name],
                        port,
                        f"the AIPerf operator's requests to the {g.name} pods",
                        "the operator cannot read the job's progress or results",
                    )
                )
    return out


def _peer_paths(ctx: CheckContext, groups: list[PodGroup], peers: dict[str, Peer]) -> list[Path]:
    """The job's pods' traffic to each other on the ports they serve (a group to itself when it has two pods;
    in a TrainJob, between groups only from the groups that train)."""
    facts = ctx.workload.facts
    out: list[Path] = []
    for dst_g in groups:
        for port in serving_ports(dst_g):
            if facts.operator_ports and port.name in OPERATOR_PORTS:
                continue  # the operator's, above
            for src_g in groups:
                if src_g is dst_g and src_g.pods < 2:
                    continue
                if facts.collective and src_g is not dst_g and not _talks(src_g):
                    continue
                out.append(
                    Path(
                        peers[src_g.name],
                        peers[dst_g.name],
                        port,
                        f"the {src_g.name} pods' traffic to the {dst_g.name} pods",
                        facts.peer_consequence,
                    )
                )
    return out


def _collective_paths(groups: list[PodGroup], peers: dict[str, Peer]) -> list[Path]:
    """A TrainJob's collective traffic on any port between the groups that train, when they have two pods."""
    talking = [g for g in groups if _talks(g)]
    if sum(g.pods for g in talking) <= 1:
        return []
    out: list[Path] = []
    for a in talking:
        for b in talking:
            if a is b and a.pods < 2:
                continue
            out.append(
                Path(
                    peers[a.name],
                    peers[b.name],
                    Port(None, any_port=True),
                    f"the {a.name} pods' collective traffic to the {b.name} pods",
                    "NCCL, Gloo and MPI open connections on ports of their own choosing",
                )
            )
    return out


def _talks(g: PodGroup) -> bool:
    """Groups of a TrainJob that take part in the training (not the initializers)."""
    return "initializer" not in (g.role or g.name)


def _target_port(spec: dict[str, Any], url_port: int | None) -> Port:
    for p in spec.get("ports") or []:
        if not isinstance(p, dict):
            continue
        if url_port is None or p.get("port") == url_port or spec.get("clusterIP") == "None":
            target = p.get("targetPort", p.get("port"))
            proto = str(p.get("protocol") or "TCP")
            if isinstance(target, int):
                return Port(target, None, proto)
            return Port(None, str(target), proto)
    return Port(url_port, None)


class NetworkPolicies(Check):
    name = "Network Policies"
    synchronous = True  # reads only the Workload and cached state
    default_action = "warn"  # enforcement depends on the CNI: judged from the policy objects, never a deny
    needs_cluster = True
    permissions = (*cached("networkpolicies", NETWORKING), *cached("namespaces"), *cached("services"))
    apis = (f"{NETWORKING}/v1",)
    summary = (
        "The NetworkPolicies of the job's namespaces let its pods reach the endpoint Service (and DNS) and each other "
        "(rendezvous, MPI, AIPerf's ports); judged from the policy objects, enforced by the CNI."
    )

    async def run(self, ctx: CheckContext) -> CheckResult:
        """Steps: build (`job_paths`) → dispatch (the policies of the paths' namespaces) → classify
        (`_judge_path`: both sides of each path, webhook.models.netpol.direction) → message (`_message`)."""
        assert ctx.view is not None
        view = ctx.view
        paths = job_paths(ctx)
        if not paths:
            return CheckResult(self.name, Status.SKIP, "The job's pods open no connection to judge")
        namespaces = sorted({p.src.namespace for p in paths} | {p.dst.namespace for p in paths})
        policies: dict[str, list[dict[str, Any]]] = {ns: view.list_cached("networkpolicies", ns) for ns in namespaces}
        if not any(policies.values()):
            return with_stale(
                CheckResult(
                    self.name,
                    Status.PASS,
                    f"No NetworkPolicy in namespace {', '.join(map(_q, namespaces))}: traffic is not restricted",
                ),
                ctx,
                "networkpolicies",
            )
        found = _Flows()
        seen: set[tuple[str, str, str]] = set()
        for path in paths:
            key = (path.src.what, path.dst.what, path.port.text())
            if key in seen:
                continue
            seen.add(key)
            _judge_path(path, policies, found)
        return self._message(ctx, namespaces, found)

    def _message(self, ctx: CheckContext, namespaces: list[str], found: _Flows) -> CheckResult:
        """WARN with the paths dropped and those that cannot be told, else PASS counting the paths allowed."""
        note = "judged from the policy objects; enforcement depends on the cluster's CNI"
        if found.dropped or found.unsure:
            lines = found.dropped + found.unsure
            return with_stale(
                CheckResult(self.name, Status.WARN, "; ".join(lines), details=lines + [note]),
                ctx,
                "networkpolicies",
                "namespaces",
            )
        return with_stale(
            CheckResult(
                self.name,
                Status.PASS,
                f"The NetworkPolicies of {', '.join(map(_q, namespaces))} allow the job's {found.passed} connection "
                "paths",
                details=[note],
            ),
            ctx,
            "networkpolicies",
            "namespaces",
        )


@dataclass
class _Flows:
    """The verdicts on the job's distinct paths."""

    dropped: list[str] = field(default_factory=list)
    unsure: list[str] = field(default_factory=list)
    passed: int = 0


def _judge_path(path: Path, policies: dict[str, list[dict[str, Any]]], found: _Flows) -> None:
    """One path: the egress of its source and the ingress of its destination under their namespaces' policies;
    dropped when either side is isolated and no rule allows it, unsure when either side cannot tell."""
    eg = direction(policies[path.src.namespace], path.src.namespace, "Egress", path.src, path.dst, path.port)
    ing = direction(policies[path.dst.namespace], path.dst.namespace, "Ingress", path.dst, path.src, path.port)
    flow = f"{path.what} ({path.port.text()})"
    if eg.allowed is False or ing.allowed is False:
        found.dropped.append(_dropped(path, eg, ing, flow))
    elif eg.allowed is None or ing.allowed is None:
        names = list(dict.fromkeys(eg.unsure + ing.unsure))
        found.unsure.append(
            f"Cannot tell whether NetworkPolicies allow {flow}: {_names(names)} select by labels, named ports "
            "or ipBlocks the webhook cannot resolve"
        )
    else:
        found.passed += 1


def _dropped(path: Path, eg: Side, ing: Side, flow: str) -> str:
    """The warning on a path a side drops: which policies isolate it, what follows, where to add the rule."""
    why = []
    if eg.allowed is False:
        why.append(
            f"{_names(eg.isolating)} in {_q(path.src.namespace)} isolate{'s' if len(eg.isolating) == 1 else ''} "
            "their egress and no rule allows it"
        )
    if ing.allowed is False:
        why.append(
            f"{_names(ing.isolating)} in {_q(path.dst.namespace)} isolate{'s' if len(ing.isolating) == 1 else ''} "
            f"the ingress of {'those pods' if path.dst.what.startswith('Service') else 'the ' + path.dst.what} "
            "and no rule allows it"
        )
    fix_ns = path.src.namespace if eg.allowed is False else path.dst.namespace
    way = "an egress" if eg.allowed is False else "an ingress"
    return (
        f"NetworkPolicies drop {flow}: {'; '.join(why)}, so {path.consequence}. "
        f"Fix: add {way} rule allowing it to a NetworkPolicy in {_q(fix_ns)}"
    )


def _q(ns: str) -> str:
    return f'"{ns}"'


def _names(names: list[str]) -> str:
    shown = ", ".join(f'"{n}"' for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return ("NetworkPolicy " if len(names) == 1 else "NetworkPolicies ") + shown


CHECKS = [NetworkPolicies()]
