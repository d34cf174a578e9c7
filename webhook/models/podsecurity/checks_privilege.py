"""Privilege checks: `check_allowPrivilegeEscalation.go`, `check_capabilities_baseline.go`,
`check_capabilities_restricted.go`, `check_privileged.go`, `check_procMount.go` (v0.34.4),
`check_procMount_baseline.go` and `check_procMount_restricted.go` (v0.35+).

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
    _l,
    _name,
    _s,
    _sc,
    _windows,
    join_quote,
    pluralize,
    relaxed_for_userns,
)


def allow_privilege_escalation_1_8(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad = []
    for c in _containers(spec):
        sc = _sc(c)
        ape = _bp(sc.get("allowPrivilegeEscalation")) if sc else None
        if ape is None or ape:
            bad.append(_name(c))
    if bad:
        return Result(
            "allowPrivilegeEscalation",
            False,
            "allowPrivilegeEscalation != false",
            f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)} "
            "must set securityContext.allowPrivilegeEscalation=false",
        )
    return _OK


def allow_privilege_escalation_1_25(meta: Meta, spec: Spec, relax: bool) -> Result:
    if _windows(spec):
        return _OK
    return allow_privilege_escalation_1_8(meta, spec, relax)


_CAPABILITIES_ALLOWED_1_0 = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def _caps(c: dict[str, Any]) -> dict[str, Any] | None:
    sc = _sc(c)
    return _d(sc.get("capabilities")) if sc else None


def capabilities_baseline_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad = []
    non_default: set[str] = set()
    for c in _containers(spec):
        caps = _caps(c)
        if caps is None:
            continue
        valid = True
        for cap in _l(caps.get("add")):
            if _s(cap) not in _CAPABILITIES_ALLOWED_1_0:
                valid = False
                non_default.add(_s(cap))
        if not valid:
            bad.append(_name(c))
    if bad:
        return Result(
            "capabilities_baseline",
            False,
            "non-default capabilities",
            f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)} must not include "
            f"{join_quote(sorted(non_default))} in securityContext.capabilities.add",
        )
    return _OK


def capabilities_restricted_1_22(meta: Meta, spec: Spec, relax: bool) -> Result:
    missing_drop_all: list[str] = []
    adding: list[str] = []
    forbidden: set[str] = set()
    for c in _containers(spec):
        caps = _caps(c)
        if caps is None:
            missing_drop_all.append(_name(c))
            continue
        if not any(_s(x) == "ALL" for x in _l(caps.get("drop"))):
            missing_drop_all.append(_name(c))
        added = False
        for cap in _l(caps.get("add")):
            if _s(cap) != "NET_BIND_SERVICE":
                added = True
                forbidden.add(_s(cap))
        if added:
            adding.append(_name(c))
    details = []
    if missing_drop_all:
        details.append(
            f"{pluralize('container', 'containers', len(missing_drop_all))} {join_quote(missing_drop_all)} "
            'must set securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{pluralize('container', 'containers', len(adding))} {join_quote(adding)} must not include "
            f"{join_quote(sorted(forbidden))} in securityContext.capabilities.add"
        )
    if details:
        return Result("capabilities_restricted", False, "unrestricted capabilities", "; ".join(details))
    return _OK


def capabilities_restricted_1_25(meta: Meta, spec: Spec, relax: bool) -> Result:
    if _windows(spec):
        return _OK
    return capabilities_restricted_1_22(meta, spec, relax)


def privileged_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad = [_name(c) for c in _containers(spec) if (sc := _sc(c)) is not None and _bp(sc.get("privileged")) is True]
    if bad:
        return Result(
            "privileged",
            False,
            "privileged",
            f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)} must not set securityContext.privileged=true",
        )
    return _OK


def proc_mount_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.35+ check_procMount_baseline.go procMount_1_0 (also procMount_restricted 1.35): unconditional."""
    bad = []
    types: set[str] = set()
    for c in _containers(spec):
        sc = _sc(c)
        if sc is None or not isinstance(sc.get("procMount"), str):
            continue
        if sc["procMount"] != "Default":
            bad.append(_name(c))
            types.add(sc["procMount"])
    if bad:
        return Result(
            "procMount",
            False,
            "procMount",
            f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)} must not set "
            f"securityContext.procMount to {join_quote(sorted(types))}",
        )
    return _OK


#: v0.34.4 check_procMount.go procMount_1_0: relaxed for hostUsers: false behind the gate.
proc_mount_1_0_gated = relaxed_for_userns(proc_mount_1_0, gated=True)

#: v0.35+ check_procMount_baseline.go procMount1_35baseline: always relaxed for hostUsers: false.
proc_mount_1_35_baseline = relaxed_for_userns(proc_mount_1_0, gated=False)
