"""Security profile checks: `check_appArmorProfile.go`, `check_seLinuxOptions.go`,
`check_seccompProfile_baseline.go`, `check_seccompProfile_restricted.go`.

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
    _annotations,
    _containers,
    _d,
    _name,
    _s,
    _sc,
    _windows,
    go_quote,
    join_quote,
    pluralize,
)

_APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def _apparmor_type_ok(t: str) -> bool:
    return t in ("RuntimeDefault", "Localhost")


def app_armor_profile_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad_setters: list[str] = []
    bad_values: set[str] = set()
    psc = _d(spec.get("securityContext"))
    prof = _d(psc.get("appArmorProfile")) if psc else None
    if prof is not None and not _apparmor_type_ok(_s(prof.get("type"))):
        bad_setters.append("pod")
        bad_values.add(_s(prof.get("type")))
    bad_containers = []
    for c in _containers(spec):
        sc = _sc(c)
        prof = _d(sc.get("appArmorProfile")) if sc else None
        if prof is not None and not _apparmor_type_ok(_s(prof.get("type"))):
            bad_containers.append(_name(c))
            bad_values.add(_s(prof.get("type")))
    if bad_containers:
        bad_setters.append(f"{pluralize('container', 'containers', len(bad_containers))} {join_quote(bad_containers)}")
    forbidden = []
    for k, val in _annotations(meta).items():
        if k.startswith(_APPARMOR_ANNOTATION_PREFIX) and not (
            val == "" or val == "runtime/default" or val.startswith("localhost/")
        ):
            forbidden.append(f"{k}={go_quote(val)}")
    values = sorted(bad_values)
    if forbidden:
        values += sorted(forbidden)
        bad_setters.append(pluralize("annotation", "annotations", len(forbidden)))
    if bad_setters:
        return Result(
            "appArmorProfile",
            False,
            pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            f"{' and '.join(bad_setters)} must not set AppArmor profile type to {join_quote(values)}",
        )
    return _OK


_SELINUX_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
_SELINUX_TYPES_1_31 = _SELINUX_TYPES_1_0 | {"container_engine_t"}


def _se_linux_options(meta: Meta, spec: Spec, allowed: frozenset[str]) -> Result:
    bad_setters = []
    bad_types: set[str] = set()
    set_user = set_role = False

    def valid(opts: dict[str, Any]) -> bool:
        nonlocal set_user, set_role
        ok = True
        if _s(opts.get("type")) not in allowed:
            ok = False
            bad_types.add(_s(opts.get("type")))
        if _s(opts.get("user")):
            ok = False
            set_user = True
        if _s(opts.get("role")):
            ok = False
            set_role = True
        return ok

    psc = _d(spec.get("securityContext"))
    opts = _d(psc.get("seLinuxOptions")) if psc else None
    if opts is not None and not valid(opts):
        bad_setters.append("pod")
    bad = []
    for c in _containers(spec):
        sc = _sc(c)
        opts = _d(sc.get("seLinuxOptions")) if sc else None
        if opts is not None and not valid(opts):
            bad.append(_name(c))
    if bad:
        bad_setters.append(f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)}")
    if bad_setters:
        data = []
        if bad_types:
            data.append(f"{pluralize('type', 'types', len(bad_types))} {join_quote(sorted(bad_types))}")
        if set_user:
            data.append("user may not be set")
        if set_role:
            data.append("role may not be set")
        return Result(
            "seLinuxOptions",
            False,
            "seLinuxOptions",
            f"{' and '.join(bad_setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
        )
    return _OK


def se_linux_options_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    return _se_linux_options(meta, spec, _SELINUX_TYPES_1_0)


def se_linux_options_1_31(meta: Meta, spec: Spec, relax: bool) -> Result:
    return _se_linux_options(meta, spec, _SELINUX_TYPES_1_31)


_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"


def _seccomp_ok(t: str) -> bool:
    return t in ("Localhost", "RuntimeDefault")


def _seccomp_annotation_ok(val: str) -> bool:
    return val in ("runtime/default", "docker/default") or val.startswith("localhost/")


def seccomp_profile_baseline_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    forbidden: set[str] = set()
    ann = _annotations(meta)
    if _SECCOMP_POD_ANNOTATION in ann and not _seccomp_annotation_ok(ann[_SECCOMP_POD_ANNOTATION]):
        forbidden.add(f"{_SECCOMP_POD_ANNOTATION}={go_quote(ann[_SECCOMP_POD_ANNOTATION])}")
    for c in _containers(spec):
        key = _SECCOMP_CONTAINER_PREFIX + _name(c)
        if key in ann and not _seccomp_annotation_ok(ann[key]):
            forbidden.add(f"{key}={go_quote(ann[key])}")
    if forbidden:
        return Result(
            "seccompProfile_baseline",
            False,
            "seccompProfile",
            f"forbidden {pluralize('annotation', 'annotations', len(forbidden))} {', '.join(sorted(forbidden))}",
        )
    return _OK


def _seccomp_type(sc: dict[str, Any] | None) -> str | None:
    prof = _d(sc.get("seccompProfile")) if sc else None
    return None if prof is None else _s(prof.get("type"))


def seccomp_profile_baseline_1_19(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad_setters = []
    bad_values: set[str] = set()
    t = _seccomp_type(_d(spec.get("securityContext")))
    if t is not None and not _seccomp_ok(t):
        bad_setters.append("pod")
        bad_values.add(t)
    bad = []
    for c in _containers(spec):
        t = _seccomp_type(_sc(c))
        if t is not None and not _seccomp_ok(t):
            bad.append(_name(c))
            bad_values.add(t)
    if bad:
        bad_setters.append(f"{pluralize('container', 'containers', len(bad))} {join_quote(bad)}")
    if bad_setters:
        return Result(
            "seccompProfile_baseline",
            False,
            "seccompProfile",
            f"{' and '.join(bad_setters)} must not set securityContext.seccompProfile.type to "
            f"{join_quote(sorted(bad_values))}",
        )
    return _OK


def seccomp_profile_restricted_1_19(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad_setters = []
    bad_values: set[str] = set()
    pod_set = False
    t = _seccomp_type(_d(spec.get("securityContext")))
    if t is not None:
        if not _seccomp_ok(t):
            bad_setters.append("pod")
            bad_values.add(t)
        else:
            pod_set = True
    explicit, implicit = [], []
    for c in _containers(spec):
        t = _seccomp_type(_sc(c))
        if t is not None:
            if not _seccomp_ok(t):
                explicit.append(_name(c))
                bad_values.add(t)
        elif not pod_set:
            implicit.append(_name(c))
    if explicit:
        bad_setters.append(f"{pluralize('container', 'containers', len(explicit))} {join_quote(explicit)}")
    if bad_setters:
        return Result(
            "seccompProfile_restricted",
            False,
            "seccompProfile",
            f"{' and '.join(bad_setters)} must not set securityContext.seccompProfile.type to "
            f"{join_quote(sorted(bad_values))}",
        )
    if implicit:
        return Result(
            "seccompProfile_restricted",
            False,
            "seccompProfile",
            f"pod or {pluralize('container', 'containers', len(implicit))} {join_quote(implicit)} must set "
            'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
        )
    return _OK


def seccomp_profile_restricted_1_25(meta: Meta, spec: Spec, relax: bool) -> Result:
    if _windows(spec):
        return _OK
    return seccomp_profile_restricted_1_19(meta, spec, relax)
