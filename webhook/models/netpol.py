"""NetworkPolicy semantics, as the NetworkPolicy API defines them (k8s.io/api networking/v1
types.go; the cases of kubernetes-sigs/network-policy-api's conformance suite follow the same
rules), in three-valued logic (True, False, None: cannot tell):

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

The Network Policies check (webhook/checks/netpol.py) asks these questions for the paths a job needs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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
