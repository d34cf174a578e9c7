"""User checks: `check_runAsNonRoot.go`, `check_runAsUser.go`.

Each function is the upstream check of the same name; `relax` is v0.34.4's
policy.RelaxPolicyForUserNamespacePods, read only by the `*_gated` functions (v0.34.4).
"""

from __future__ import annotations

from webhook.models.podsecurity.helpers import (
    _OK,
    Meta,
    Result,
    Spec,
    _bp,
    _containers,
    _d,
    _ip,
    _name,
    _sc,
    join_quote,
    pluralize,
    relaxed_for_userns,
)


def run_as_non_root_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.35+ check_runAsNonRoot.go runAsNonRoot1_0: unconditional."""
    bad_setters = []
    pod_non_root = False
    psc = _d(spec.get("securityContext"))
    prn = _bp(psc.get("runAsNonRoot")) if psc else None
    if prn is not None:
        if not prn:
            bad_setters.append("pod")
        else:
            pod_non_root = True
    explicit, implicit = [], []
    for c in _containers(spec):
        sc = _sc(c)
        rn = _bp(sc.get("runAsNonRoot")) if sc else None
        if rn is not None:
            if not rn:
                explicit.append(_name(c))
        elif not pod_non_root:
            implicit.append(_name(c))
    if explicit:
        bad_setters.append(f"{pluralize('container', 'containers', len(explicit))} {join_quote(explicit)}")
    if bad_setters:
        return Result(
            "runAsNonRoot",
            False,
            "runAsNonRoot != true",
            f"{' and '.join(bad_setters)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return Result(
            "runAsNonRoot",
            False,
            "runAsNonRoot != true",
            f"pod or {pluralize('container', 'containers', len(implicit))} {join_quote(implicit)} "
            "must set securityContext.runAsNonRoot=true",
        )
    return _OK


def run_as_user_1_23(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.35+ check_runAsUser.go runAsUser1_23: unconditional."""
    bad_setters = []
    psc = _d(spec.get("securityContext"))
    if psc is not None and _ip(psc.get("runAsUser")) == 0:
        bad_setters.append("pod")
    bad = [_name(c) for c in _containers(spec) if (sc := _sc(c)) is not None and _ip(sc.get("runAsUser")) == 0]
    if bad:
        bad_setters.append(f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)}")
    if bad_setters:
        return Result("runAsUser", False, "runAsUser=0", f"{' and '.join(bad_setters)} must not set runAsUser=0")
    return _OK


#: v0.34.4 check_runAsNonRoot.go runAsNonRoot_1_0: relaxed for hostUsers: false behind the gate.
run_as_non_root_1_0_gated = relaxed_for_userns(run_as_non_root_1_0, gated=True)

#: v0.35+ check_runAsNonRoot.go runAsNonRoot1_35: always relaxed for hostUsers: false.
run_as_non_root_1_35 = relaxed_for_userns(run_as_non_root_1_0, gated=False)

#: v0.34.4 check_runAsUser.go runAsUser_1_23: relaxed for hostUsers: false behind the gate.
run_as_user_1_23_gated = relaxed_for_userns(run_as_user_1_23, gated=True)

#: v0.35+ check_runAsUser.go runAsUser1_35: always relaxed for hostUsers: false.
run_as_user_1_35 = relaxed_for_userns(run_as_user_1_23, gated=False)
