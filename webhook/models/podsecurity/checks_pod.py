"""Pod-wide checks: `check_restrictedVolumes.go`, `check_sysctls.go`.

Each function is the upstream check of the same name; `relax` is v0.34.4's
policy.RelaxPolicyForUserNamespacePods, read only by the `*_gated` functions (v0.34.4).
"""

from __future__ import annotations

from webhook.models.podsecurity.helpers import (
    _OK,
    Meta,
    Result,
    Spec,
    _d,
    _l,
    _s,
    _volumes,
    join_quote,
    pluralize,
)

_ALLOWED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
_RESTRICTED_VOLUMES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)


def restricted_volumes_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    bad = []
    types: set[str] = set()
    for vol in _volumes(spec):
        if any(_d(vol.get(k)) is not None for k in _ALLOWED_VOLUMES):
            continue
        bad.append(_s(vol.get("name")))
        types.add(next((k for k in _RESTRICTED_VOLUMES if _d(vol.get(k)) is not None), "unknown"))
    if bad:
        return Result(
            "restrictedVolumes",
            False,
            "restricted volume types",
            f"{pluralize('volume', 'volumes', len(bad))} {join_quote(bad)} {pluralize('uses', 'use', len(bad))} "
            f"{pluralize('restricted volume type', 'restricted volume types', len(types))} {join_quote(sorted(types))}",
        )
    return _OK


_SYSCTLS_1_0 = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
_SYSCTLS_1_27 = _SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SYSCTLS_1_29 = _SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
_SYSCTLS_1_32 = _SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
_SYSCTLS_1_37 = _SYSCTLS_1_32 | {"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}  # v0.37


def _sysctls(spec: Spec, allowed: frozenset[str]) -> Result:
    psc = _d(spec.get("securityContext"))
    names = [_s(x.get("name")) if isinstance(x, dict) else "" for x in _l(psc.get("sysctls"))] if psc else []
    forbidden = [n for n in names if n not in allowed]
    if forbidden:
        return Result("sysctls", False, "forbidden sysctls", ", ".join(forbidden))
    return _OK


def sysctls_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    return _sysctls(spec, _SYSCTLS_1_0)


def sysctls_1_27(meta: Meta, spec: Spec, relax: bool) -> Result:
    return _sysctls(spec, _SYSCTLS_1_27)


def sysctls_1_29(meta: Meta, spec: Spec, relax: bool) -> Result:
    return _sysctls(spec, _SYSCTLS_1_29)


def sysctls_1_32(meta: Meta, spec: Spec, relax: bool) -> Result:
    return _sysctls(spec, _SYSCTLS_1_32)


def sysctls_1_37(meta: Meta, spec: Spec, relax: bool) -> Result:
    return _sysctls(spec, _SYSCTLS_1_37)
