"""Network Policies: would the NetworkPolicies of the job's namespaces drop its own traffic?

A benchmark whose workers cannot reach the endpoint, or a training job whose nodes cannot
reach each other, starts and then hangs on its first connection. AIPerf's own preflight only
lists the namespace's policies (operator/preflight/_infra.py `_check_network_policies`:
"Ensure pod-to-pod communication is allowed"); this check evaluates them for the paths the
job needs, as the NetworkPolicy API defines them (k8s.io/api networking/v1 types.go; the
cases of kubernetes-sigs/network-policy-api's conformance suite follow the same rules):

* a pod is isolated for a direction when some policy of its namespace selects it
  (`spec.podSelector`, empty = every pod) and has that direction in `policyTypes` (unset:
  Ingress, plus Egress when the policy has an `egress` section);
* an isolated pod's traffic is allowed when any rule of any policy that selects it allows
  it (policies add up, there is no deny rule); a rule allows a peer when its `from`/`to` is
  empty or some peer matches — `podSelector` alone: pods of the policy's own namespace,
  `namespaceSelector` alone: every pod of the matching namespaces, both: pods matching both,
  `ipBlock`: addresses (pod IPs are not known here, so only `0.0.0.0/0`/`::/0` without
  `except` is certain) — and its `ports` are empty or one matches (protocol TCP by default,
  `endPort` ranges, named ports resolved against the destination pod's container ports);
* a connection needs both sides: the egress of the source pod and the ingress of the
  destination pod.

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

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from webhook.checks.base import AIPERFJOB, AIPERFSWEEP, TRAINJOB, Check, CheckContext
from webhook.checks.common import cached, with_stale
from webhook.checks.endpoint import endpoint_urls, service_of, url_port
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

T = bool | None  # three-valued: True, False, None (cannot tell)


def t_and(values: Iterable[T]) -> T:
    out: T = True
    for v in values:
        if v is False:
            return False
        if v is None:
            out = None
    return out


def t_or(values: Iterable[T]) -> T:
    out: T = False
    for v in values:
        if v is True:
            return True
        if v is None:
            out = None
    return out


def t_not(v: T) -> T:
    return None if v is None else not v


@dataclass(frozen=True)
class Labels:
    """Labels of a set of pods (or a namespace): `known`, and whether a key outside it is
    known to be absent (`absent(key)` True), or may be present (False: cannot tell)."""

    known: dict[str, str]
    complete: bool = True
    open_prefixes: tuple[str, ...] = ()

    def get(self, key: str) -> tuple[T, str | None]:
        """(present?, value): present True/False, or None when it cannot be told."""
        if key in self.known:
            return True, self.known[key]
        if not self.complete or any(key.startswith(p) for p in self.open_prefixes):
            return None, None
        return False, None


def selector_matches(selector: dict[str, Any] | None, labels: Labels) -> T:
    """A metav1.LabelSelector (matchLabels AND matchExpressions; empty selects everything)."""
    if selector is None:
        return False
    out: list[T] = []
    for k, v in (selector.get("matchLabels") or {}).items():
        present, value = labels.get(str(k))
        out.append(None if present is None else bool(present) and value == str(v))
    for e in selector.get("matchExpressions") or []:
        present, value = labels.get(str(e.get("key", "")))
        op, vals = e.get("operator"), [str(x) for x in e.get("values") or []]
        if op == "In":
            out.append(None if present is None else bool(present) and value in vals)
        elif op == "NotIn":
            out.append(None if present is None else not present or value not in vals)
        elif op == "Exists":
            out.append(present)
        elif op == "DoesNotExist":
            out.append(t_not(present))
        else:
            out.append(False)  # an invalid selector selects nothing (the apiserver refuses it)
    return t_and(out)


@dataclass(frozen=True)
class Port:
    """A destination port: a number and/or a name (known on the destination pod), a protocol;
    `any_port` asks whether every port is open (collective traffic on ports of its own choosing)."""

    number: int | None
    name: str | None = None
    protocol: str = "TCP"
    any_port: bool = False

    def text(self) -> str:
        if self.any_port:
            return f"every {self.protocol} port"
        return f"port {self.number if self.number is not None else self.name}/{self.protocol}"


def port_matches(rule_ports: list[dict[str, Any]] | None, port: Port, named: dict[str, int] | None) -> T:
    """networking/v1 NetworkPolicyPort: empty list = all ports; protocol TCP by default; a
    missing port = every port of the protocol; endPort a range; a name a container port name."""
    if not rule_ports:
        return True
    out: list[T] = []
    for rp in rule_ports:
        if not isinstance(rp, dict) or (rp.get("protocol") or "TCP") != port.protocol:
            out.append(False)
            continue
        want = rp.get("port")
        if want is None:
            out.append(True)
            continue
        if port.any_port:
            top = rp.get("endPort")
            out.append(isinstance(want, int) and want <= 1 and isinstance(top, int) and top >= 65535)
            continue
        if isinstance(want, int):
            raw_end = rp.get("endPort")
            end: int = raw_end if isinstance(raw_end, int) else want
            number = port.number
            if number is None:
                out.append(None)
            else:
                out.append(want <= number <= end)
        else:
            if port.name is not None:
                out.append(port.name == want)
            elif named is not None:
                out.append(named.get(str(want)) == port.number)
            else:
                out.append(None)
    return t_or(out)


@dataclass(frozen=True)
class Peer:
    """One side of a connection: the pods (labels), their namespace and its labels, and the
    named ports of the pods when known."""

    what: str
    namespace: str
    labels: Labels
    ns_labels: Labels
    named_ports: dict[str, int] | None = None


def peer_matches(peer_rule: Any, policy_ns: str, other: Peer) -> T:
    if not isinstance(peer_rule, dict):
        return False
    block = peer_rule.get("ipBlock")
    if block is not None:
        cidr = str((block or {}).get("cidr", ""))
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            return False
        return True if net.prefixlen == 0 and not (block or {}).get("except") else None
    pod_sel, ns_sel = peer_rule.get("podSelector"), peer_rule.get("namespaceSelector")
    if pod_sel is None and ns_sel is None:
        return False
    ns_ok: T = selector_matches(ns_sel, other.ns_labels) if ns_sel is not None else other.namespace == policy_ns
    pod_ok: T = selector_matches(pod_sel, other.labels) if pod_sel is not None else True
    return t_and([ns_ok, pod_ok])


def policy_types(policy: dict[str, Any]) -> set[str]:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    if types:
        return {str(t) for t in types}
    return {"Ingress"} | ({"Egress"} if spec.get("egress") else set())


@dataclass
class Side:
    """The verdict of one direction of one path: allowed (True/False/None) and the policies."""

    allowed: T
    isolating: list[str] = field(default_factory=list)
    unsure: list[str] = field(default_factory=list)


def direction(policies: list[dict[str, Any]], ns: str, way: str, selected: Peer, other: Peer, port: Port) -> Side:
    """Egress of `selected` to `other` (way "Egress"), or ingress of `selected` from `other`
    ("Ingress"), under the policies of `selected`'s namespace `ns`."""
    key, peers_key = ("egress", "to") if way == "Egress" else ("ingress", "from")
    named = other.named_ports if way == "Egress" else selected.named_ports
    isolated: list[T] = []
    allows: list[T] = []
    side = Side(True)
    for p in policies:
        if way not in policy_types(p):
            continue
        spec = p.get("spec") or {}
        sel = selector_matches(spec.get("podSelector") or {}, selected.labels)
        if sel is False:
            continue
        name = str((p.get("metadata") or {}).get("name", "?"))
        rules: list[T] = []
        for rule in spec.get(key) or []:
            if not isinstance(rule, dict):
                continue
            peers = rule.get(peers_key)
            who: T = True if not peers else t_or(peer_matches(x, ns, other) for x in peers)
            rules.append(t_and([who, port_matches(rule.get("ports"), port, named)]))
        allow = t_or(rules)
        isolated.append(sel)
        allows.append(t_and([sel, allow]))
        if sel is True:
            side.isolating.append(name)
        if sel is None or allow is None:
            side.unsure.append(name)
    side.allowed = t_or([t_not(t_or(isolated)), t_or(allows)])
    return side


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
    wl = ctx.workload
    nsl = _ns_labels(ctx, wl.namespace)
    # hostNetwork pods: "NetworkPolicy behaviour for hostNetwork pods is undefined" (the API's
    # documentation); most CNIs do not apply policies to them, so they are not judged
    groups = [g for g in wl.pod_groups if g.pods > 0 and g.pod_spec.get("hostNetwork") is not True]
    peers = {g.name: _group_peer(ctx, g, nsl) for g in groups}
    out: list[Path] = []
    if wl.kind in (AIPERFJOB, AIPERFSWEEP):
        workers = [g for g in groups if g.role.startswith("workers")] or groups
        for url in endpoint_urls(wl.obj):
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
        # CoreDNS as kubeadm and most distributions deploy it carries k8s-app=kube-dns and its
        # ReplicaSet's pod-template-hash: taken as its whole label set, so the other policies of
        # kube-system (selecting other pods) do not turn every DNS path into "cannot tell"
        dns = Peer(
            "kube-dns pods",
            DNS_NAMESPACE,
            Labels(dict(DNS_LABELS), open_prefixes=("pod-template-hash",)),
            _ns_labels(ctx, DNS_NAMESPACE),
        )
        if any(service_of(u) for u in endpoint_urls(wl.obj)):
            for g in workers:
                out.append(
                    Path(
                        peers[g.name],
                        dns,
                        Port(53, "dns", "UDP"),
                        f"the {g.name} pods' DNS lookups (kube-dns in kube-system)",
                        "the endpoint's name does not resolve",
                    )
                )
        # the operator polls the controller pod's API (progress) and its results sidecar
        # (AIPerf 0.13.0 operator/progress_client.py: <jobset>-controller-0-0.<jobset>.<ns>.svc)
        op = ctx.settings.controllers.aiperf.namespace
        operator = Peer(
            f'the AIPerf operator (namespace "{op}")',
            op,
            Labels(dict(OPERATOR_LABELS), complete=False),
            _ns_labels(ctx, op),
        )
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
    consequence = "the training hangs at rendezvous" if wl.kind == TRAINJOB else "the job's pods cannot connect"
    for dst_g in groups:
        for port in serving_ports(dst_g):
            if wl.kind != TRAINJOB and port.name in OPERATOR_PORTS:
                continue  # the operator's, above
            for src_g in groups:
                if src_g is dst_g and src_g.pods < 2:
                    continue
                if wl.kind == TRAINJOB and src_g is not dst_g and not _talks(src_g):
                    continue
                out.append(
                    Path(
                        peers[src_g.name],
                        peers[dst_g.name],
                        port,
                        f"the {src_g.name} pods' traffic to the {dst_g.name} pods",
                        consequence,
                    )
                )
    if wl.kind == TRAINJOB:
        talking = [g for g in groups if _talks(g)]
        if sum(g.pods for g in talking) > 1:
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
        dropped: list[str] = []
        unsure: list[str] = []
        passed = 0
        seen: set[tuple[str, str, str]] = set()
        for path in paths:
            key = (path.src.what, path.dst.what, path.port.text())
            if key in seen:
                continue
            seen.add(key)
            eg = direction(policies[path.src.namespace], path.src.namespace, "Egress", path.src, path.dst, path.port)
            ing = direction(policies[path.dst.namespace], path.dst.namespace, "Ingress", path.dst, path.src, path.port)
            flow = f"{path.what} ({path.port.text()})"
            if eg.allowed is False or ing.allowed is False:
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
                dropped.append(
                    f"NetworkPolicies drop {flow}: {'; '.join(why)}, so {path.consequence}. "
                    f"Fix: add {way} rule allowing it to a NetworkPolicy in {_q(fix_ns)}"
                )
            elif eg.allowed is None or ing.allowed is None:
                names = list(dict.fromkeys(eg.unsure + ing.unsure))
                unsure.append(
                    f"Cannot tell whether NetworkPolicies allow {flow}: {_names(names)} select by labels, named ports "
                    "or ipBlocks the webhook cannot resolve"
                )
            else:
                passed += 1
        note = "judged from the policy objects; enforcement depends on the cluster's CNI"
        if dropped or unsure:
            lines = dropped + unsure
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
                f"The NetworkPolicies of {', '.join(map(_q, namespaces))} allow the job's {passed} connection paths",
                details=[note],
            ),
            ctx,
            "networkpolicies",
            "namespaces",
        )


def _q(ns: str) -> str:
    return f'"{ns}"'


def _names(names: list[str]) -> str:
    shown = ", ".join(f'"{n}"' for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return ("NetworkPolicy " if len(names) == 1 else "NetworkPolicies ") + shown


CHECKS = [NetworkPolicies()]
