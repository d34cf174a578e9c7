"""Host access checks: `check_hostNamespaces.go`, `check_hostPathVolumes.go`, `check_hostPorts.go`,
`check_hostProbesAndhostLifecycle.go`, `check_windowsHostProcess.go`.

Each function is the upstream check of the same name; `relax` is v0.34.4's
policy.RelaxPolicyForUserNamespacePods, read only by the `*_gated` functions (v0.34.4).
"""

from __future__ import annotations

from typing import Any

from webhook.models.podsecurity.helpers import (
    _OK,
    Meta,
    Result,
    Spec,
    _bp,
    _containers,
    _d,
    _i,
    _l,
    _name,
    _s,
    _sc,
    _volumes,
    join_quote,
    pluralize,
)


def host_namespaces_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    found = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    if found:
        return Result("hostNamespaces", False, "host namespaces", ", ".join(found))
    return _OK


def host_path_volumes_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad = [_s(vol.get("name")) for vol in _volumes(spec) if _d(vol.get("hostPath")) is not None]
    if bad:
        return Result(
            "hostPathVolumes",
            False,
            "hostPath volumes",
            f"{pluralize('volume', 'volumes', len(bad))} {join_quote(bad)}",
        )
    return _OK


def host_ports_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad = []
    ports: set[str] = set()
    for c in _containers(spec):
        valid = True
        for p in _l(c.get("ports")):
            hp = _i(p.get("hostPort")) if isinstance(p, dict) else 0
            if hp != 0:
                valid = False
                ports.add(str(hp))
        if not valid:
            bad.append(_name(c))
    if bad:
        return Result(
            "hostPorts",
            False,
            "hostPort",
            f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)} {pluralize('uses', 'use', len(bad))} "
            f"{pluralize('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
        )
    return _OK


def _handler_hosts(handler: Any) -> list[str]:
    """getForbiddenHostProbes / getForbiddenHostLifecycle: httpGet.host and tcpSocket.host."""
    h = _d(handler)
    if h is None:
        return []
    out = []
    for kind in ("httpGet", "tcpSocket"):
        action = _d(h.get(kind))
        if action is not None and _s(action.get("host")):
            out.append(_s(action.get("host")))
    return out


def host_probes_and_host_lifecycle_1_34(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad: set[str] = set()
    hosts: set[str] = set()
    for c in _containers(spec):
        handlers = [c.get("livenessProbe"), c.get("readinessProbe"), c.get("startupProbe")]
        lc = _d(c.get("lifecycle"))
        if lc is not None:
            handlers += [lc.get("postStart"), lc.get("preStop")]
        for handler in handlers:
            found = _handler_hosts(handler)
            if found:
                bad.add(_name(c))
                hosts.update(found)
    if bad:
        return Result(
            "hostProbesAndHostLifecycle",
            False,
            "probe or lifecycle host",
            f"{pluralize('container', 'containers', len(bad))} {join_quote(sorted(bad))} "
            f"{pluralize('uses', 'use', len(bad))} "
            f"{pluralize('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} {join_quote(sorted(hosts))}",
        )
    return _OK


def _host_process(sc: dict[str, Any] | None) -> bool:
    wo = _d(sc.get("windowsOptions")) if sc else None
    return wo is not None and _bp(wo.get("hostProcess")) is True


def windows_host_process_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad = [_name(c) for c in _containers(spec) if _host_process(_sc(c))]
    setters = ["pod"] if _host_process(_d(spec.get("securityContext"))) else []
    if bad:
        setters.append(f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)}")
    if setters:
        return Result(
            "windowsHostProcess",
            False,
            "hostProcess",
            f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true",
        )
    return _OK
