"""The Pod Security Standards, as k8s.io/pod-security-admission evaluates them (a line-by-line port).

Followed: k8s.io/pod-security-admission v0.37.2 (the module kube-apiserver v1.37.2 builds its
PodSecurity admission plugin from), and v0.34.4 for apiservers up to v1.34. A generation is
chosen by the apiserver's own version (`library`), as each apiserver judges with the module of
its own release:

* v0.34.4 (apiservers <= v1.34): `check_procMount.go` procMount 1.0, `check_runAsNonRoot.go`
  runAsNonRoot 1.0 and `check_runAsUser.go` runAsUser 1.23 skip a `hostUsers: false` pod when the
  opt-in `RelaxPolicyForUserNamespacePods` is on (kube-apiserver sets it from the
  UserNamespacesPodSecurityStandards gate; here the `relax_user_namespaces` argument);
* v0.35.0 and later (apiservers >= v1.35; v0.35 changed `helpers.go`, `registry.go`,
  `check_runAsNonRoot.go`, `check_runAsUser.go`, `check_hostProbesAndhostLifecycle.go` and split
  `check_procMount.go`): the switch is gone. runAsNonRoot 1.0, runAsUser 1.23 and procMount 1.0
  never relax; their new 1.35 versions (`check_runAsNonRoot.go`, `check_runAsUser.go`,
  `check_procMount_baseline.go`) always skip a `hostUsers: false` pod, and the restricted
  `procMount_restricted` 1.35 (`check_procMount_restricted.go`) runs the unconditional procMount 1.0
  and overrides the baseline `procMount`. `relax_user_namespaces` has no effect. v0.37.2
  `check_sysctls.go` adds 1.37 (net.ipv4.tcp_slow_start_after_idle, net.ipv4.tcp_notsent_lowat);
  v0.35/v0.36 are v0.37.2 with versions clamped to the apiserver's (`registry.go` maxVersion:
  their newest check is 1.35, and nothing but sysctls 1.37 came after);

* `api/constants.go`, `api/helpers.go`: levels, versions (`latest`, `v1.<minor>`), `ParseLevel`,
  `ParseVersion`, `CompareLevels` and `PolicyToEvaluate` (the namespace labels over the
  AdmissionConfiguration's defaults; an invalid enforce level counts as `restricted`, an
  invalid version as `latest`, an invalid warn/audit level as `privileged`);
* `policy/registry.go`: which checks run for a level and version (`populate`, `inflateVersions`:
  each check's version in force, restricted checks overriding baseline ones, baseline ids
  first then restricted ids, each sorted; a version newer than the newest check counts as it,
  and v0.35+ `NewEvaluator`'s emulationVersion lowers that newest version: here the apiserver's);
* `policy/checks.go`: `AggregateCheckResults` and `ForbiddenDetail`;
* `policy/visitor.go`: init containers, containers, ephemeral containers, in that order;
* every check: `check_allowPrivilegeEscalation.go`, `check_appArmorProfile.go`,
  `check_capabilities_baseline.go`, `check_capabilities_restricted.go`,
  `check_hostNamespaces.go`, `check_hostPathVolumes.go`, `check_hostPorts.go`,
  `check_hostProbesAndhostLifecycle.go`, `check_privileged.go`, `check_procMount.go` (v0.34.4),
  `check_procMount_baseline.go` and `check_procMount_restricted.go` (v0.35+), `check_restrictedVolumes.go`, `check_runAsNonRoot.go`, `check_runAsUser.go`,
  `check_seLinuxOptions.go`, `check_seccompProfile_baseline.go`,
  `check_seccompProfile_restricted.go`, `check_sysctls.go`, `check_windowsHostProcess.go`,
  with `helpers.go` (`joinQuote`, `pluralize`, `relaxPolicyForUserNamespacePod`).

The pod is plain JSON (metadata and spec dicts) read as Go's encoding/json would fill
corev1.Pod: an absent or null field is the zero value / a nil pointer. A value of the wrong
type (which the apiserver refuses when it decodes the pod) is read as absent.
tests/oracle/test_podsecurity_oracle.py compares every answer with upstream's own evaluator.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "LEVELS",
    "LIBRARY",
    "MAX_VERSION",
    "MODULE",
    "MODULE_V034",
    "LevelVersion",
    "Policy",
    "Result",
    "Version",
    "compare_levels",
    "evaluate_pod",
    "failing",
    "forbidden_detail",
    "parse_level",
    "parse_version",
    "policy_to_evaluate",
]

#: the upstream module this is a port of (its newest generation)
MODULE = "k8s.io/pod-security-admission v0.37.2"
#: the generation apiservers up to v1.34 judge with
MODULE_V034 = "k8s.io/pod-security-admission v0.34.4"
#: the module's minor that MODULE is (k8s.io/pod-security-admission v0.<minor> ships in kube-apiserver v1.<minor>)
LIBRARY = 37

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)

LABEL_PREFIX = "pod-security.kubernetes.io/"
ENFORCE_LABEL = LABEL_PREFIX + "enforce"
ENFORCE_VERSION_LABEL = LABEL_PREFIX + "enforce-version"
AUDIT_LABEL = LABEL_PREFIX + "audit"
AUDIT_VERSION_LABEL = LABEL_PREFIX + "audit-version"
WARN_LABEL = LABEL_PREFIX + "warn"
WARN_VERSION_LABEL = LABEL_PREFIX + "warn-version"


# ----------------------------------------------------------------------------- api/helpers.go


@dataclass(frozen=True, order=False)
class Version:
    """`latest` or `v<major>.<minor>` (api.Version)."""

    major: int = 0
    minor: int = 0
    latest: bool = False

    def __str__(self) -> str:
        return "latest" if self.latest else f"v{self.major}.{self.minor}"

    def older(self, other: Version) -> bool:
        """api.Version.Older: latest is newer than every version, even future ones."""
        if self.latest:
            return False
        if other.latest:
            return True
        if self.major != other.major:
            return self.major < other.major
        return self.minor < other.minor


LATEST = Version(latest=True)


def v(minor: int) -> Version:
    return Version(1, minor)


@dataclass(frozen=True)
class LevelVersion:
    level: str
    version: Version

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"


@dataclass(frozen=True)
class Policy:
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion

    def fully_privileged(self) -> bool:
        return self.enforce.level == self.audit.level == self.warn.level == PRIVILEGED


def parse_level(level: str) -> tuple[str, str | None]:
    """api.ParseLevel: an invalid level is `restricted` with an error."""
    if level in LEVELS:
        return level, None
    return RESTRICTED, "must be one of privileged, baseline, restricted"


_VERSION = re.compile(r"v1\.([0-9]|[1-9][0-9]*)")
_INT_MAX = 2**63 - 1  # strconv.Atoi on a 64-bit platform


def parse_version(version: str) -> tuple[Version, str | None]:
    """api.ParseVersion: an invalid version is `latest` with an error."""
    if version == "latest":
        return LATEST, None
    m = _VERSION.fullmatch(version)
    if m is None or int(m.group(1)) > _INT_MAX:
        return LATEST, 'must be "latest" or "v1.x"'
    return Version(1, int(m.group(1))), None


def compare_levels(a: str, b: str) -> int:
    """api.CompareLevels."""
    if a == b:
        return 0
    if a == PRIVILEGED:
        return -1
    if a == RESTRICTED:
        return 1
    if b == PRIVILEGED:
        return 1
    if b == RESTRICTED:
        return -1
    return 0


def policy_to_evaluate(labels: dict[str, str], defaults: Policy) -> tuple[Policy, list[str]]:
    """api.PolicyToEvaluate: the namespace's labels over the defaults, and one error per bad label."""
    errs: list[str] = []
    if not labels:
        return defaults, errs
    enforce, audit, warn = defaults.enforce, defaults.audit, defaults.warn
    has_enforce_level = has_warn_level = has_warn_version = False

    def bad(label: str, value: str, err: str | None) -> None:
        if err is not None:
            errs.append(f"metadata.labels[{label}]: Invalid value: {go_quote(value)}: {err}")

    if ENFORCE_LABEL in labels:
        level, err = parse_level(labels[ENFORCE_LABEL])
        enforce = LevelVersion(level, enforce.version)
        has_enforce_level = err is None  # don't default warn in case of error
        bad(ENFORCE_LABEL, labels[ENFORCE_LABEL], err)
    if ENFORCE_VERSION_LABEL in labels:
        ver, err = parse_version(labels[ENFORCE_VERSION_LABEL])
        enforce = LevelVersion(enforce.level, ver)
        bad(ENFORCE_VERSION_LABEL, labels[ENFORCE_VERSION_LABEL], err)
    if AUDIT_LABEL in labels:
        level, err = parse_level(labels[AUDIT_LABEL])
        audit = LevelVersion(PRIVILEGED if err else level, audit.version)  # fail open for audit
        bad(AUDIT_LABEL, labels[AUDIT_LABEL], err)
    if AUDIT_VERSION_LABEL in labels:
        ver, err = parse_version(labels[AUDIT_VERSION_LABEL])
        audit = LevelVersion(audit.level, ver)
        bad(AUDIT_VERSION_LABEL, labels[AUDIT_VERSION_LABEL], err)
    if WARN_LABEL in labels:
        has_warn_level = True
        level, err = parse_level(labels[WARN_LABEL])
        warn = LevelVersion(PRIVILEGED if err else level, warn.version)  # fail open for warn
        bad(WARN_LABEL, labels[WARN_LABEL], err)
    if WARN_VERSION_LABEL in labels:
        has_warn_version = True
        ver, err = parse_version(labels[WARN_VERSION_LABEL])
        warn = LevelVersion(warn.level, ver)
        bad(WARN_VERSION_LABEL, labels[WARN_VERSION_LABEL], err)
    # default warn to the enforce level when explicitly set to a more restrictive level
    if not has_warn_level and has_enforce_level and compare_levels(enforce.level, warn.level) > 0:
        warn = LevelVersion(enforce.level, warn.version if has_warn_version else enforce.version)
    return Policy(enforce, audit, warn), errs


# ----------------------------------------------------------------------------- Go-like reads


def _d(x: Any) -> dict[str, Any] | None:
    """A pointer to a struct: None for absent, null or not an object."""
    return x if isinstance(x, dict) else None


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _s(x: Any) -> str:
    return x if isinstance(x, str) else ""


def _bp(x: Any) -> bool | None:
    """A *bool."""
    return x if isinstance(x, bool) else None


def _i(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def _ip(x: Any) -> int | None:
    """An *int64."""
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _sc(c: dict[str, Any]) -> dict[str, Any] | None:
    return _d(c.get("securityContext"))


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """policy/visitor.go visitContainers: init containers, containers, ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in _l(spec.get(key)):
            yield c if isinstance(c, dict) else {}


def _name(c: dict[str, Any]) -> str:
    return _s(c.get("name"))


def join_quote(items: list[str]) -> str:
    """policy/helpers.go joinQuote."""
    return '"' + '", "'.join(items) + '"' if items else ""


def pluralize(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}


def go_quote(s: str) -> str:
    """fmt's %q of a string (strconv.Quote): Go escapes, printable runes kept."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():  # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols, ASCII space
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


class Result(NamedTuple):
    """policy.CheckResult, with the id of the check that gave it."""

    check: str
    allowed: bool
    reason: str = ""
    detail: str = ""


_OK = Result("", True)

Meta = dict[str, Any]
Spec = dict[str, Any]
CheckFn = Callable[[Meta, Spec, bool], Result]


# ----------------------------------------------------------------------------- the checks
# Each function is the upstream check of the same name; `relax` is v0.34.4's
# policy.RelaxPolicyForUserNamespacePods, read only by the `*_gated` functions (v0.34.4).


def _relax_userns(spec: Spec, relax: bool) -> bool:
    """helpers.go relaxPolicyForUserNamespacePod: hostUsers is false (v0.34.4: and the gate is on)."""
    return relax and _bp(spec.get("hostUsers")) is False


def _windows(spec: Spec) -> bool:
    os_ = _d(spec.get("os"))
    return os_ is not None and _s(os_.get("name")) == "windows"


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


def _annotations(meta: Meta) -> dict[str, str]:
    raw = _d(meta.get("annotations")) or {}
    return {str(k): val for k, val in raw.items() if isinstance(val, str)}


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


def host_namespaces_1_0(meta: Meta, spec: Spec, relax: bool) -> Result:
    found = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    if found:
        return Result("hostNamespaces", False, "host namespaces", ", ".join(found))
    return _OK


def _volumes(spec: Spec) -> Iterator[dict[str, Any]]:
    for vol in _l(spec.get("volumes")):
        yield vol if isinstance(vol, dict) else {}


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


def proc_mount_1_0_gated(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.34.4 check_procMount.go procMount_1_0: relaxed for hostUsers: false behind the gate."""
    if _relax_userns(spec, relax):
        return _OK
    return proc_mount_1_0(meta, spec, relax)


def proc_mount_1_35_baseline(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.35+ check_procMount_baseline.go procMount1_35baseline: always relaxed for hostUsers: false."""
    if _relax_userns(spec, True):
        return _OK
    return proc_mount_1_0(meta, spec, relax)


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


def run_as_non_root_1_0_gated(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.34.4 check_runAsNonRoot.go runAsNonRoot_1_0: relaxed for hostUsers: false behind the gate."""
    if _relax_userns(spec, relax):
        return _OK
    return run_as_non_root_1_0(meta, spec, relax)


def run_as_non_root_1_35(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.35+ check_runAsNonRoot.go runAsNonRoot1_35: always relaxed for hostUsers: false."""
    if _relax_userns(spec, True):
        return _OK
    return run_as_non_root_1_0(meta, spec, relax)


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


def run_as_user_1_23_gated(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.34.4 check_runAsUser.go runAsUser_1_23: relaxed for hostUsers: false behind the gate."""
    if _relax_userns(spec, relax):
        return _OK
    return run_as_user_1_23(meta, spec, relax)


def run_as_user_1_35(meta: Meta, spec: Spec, relax: bool) -> Result:
    """v0.35+ check_runAsUser.go runAsUser1_35: always relaxed for hostUsers: false."""
    if _relax_userns(spec, True):
        return _OK
    return run_as_user_1_23(meta, spec, relax)


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


# ----------------------------------------------------------------------------- policy/registry.go


@dataclass(frozen=True)
class VersionedCheck:
    minimum: Version
    fn: CheckFn
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    id: str
    level: str
    versions: tuple[VersionedCheck, ...] = field(default_factory=tuple)


#: policy.DefaultChecks() of v0.34.4, each with its versions (the check_*.go files)
DEFAULT_CHECKS_V034: tuple[Check, ...] = (
    Check(
        "allowPrivilegeEscalation",
        RESTRICTED,
        (VersionedCheck(v(8), allow_privilege_escalation_1_8), VersionedCheck(v(25), allow_privilege_escalation_1_25)),
    ),
    Check("appArmorProfile", BASELINE, (VersionedCheck(v(0), app_armor_profile_1_0),)),
    Check("capabilities_baseline", BASELINE, (VersionedCheck(v(0), capabilities_baseline_1_0),)),
    Check(
        "capabilities_restricted",
        RESTRICTED,
        (
            VersionedCheck(v(22), capabilities_restricted_1_22, ("capabilities_baseline",)),
            VersionedCheck(v(25), capabilities_restricted_1_25, ("capabilities_baseline",)),
        ),
    ),
    Check("hostNamespaces", BASELINE, (VersionedCheck(v(0), host_namespaces_1_0),)),
    Check("hostPathVolumes", BASELINE, (VersionedCheck(v(0), host_path_volumes_1_0),)),
    Check("hostPorts", BASELINE, (VersionedCheck(v(0), host_ports_1_0),)),
    Check("hostProbesAndHostLifecycle", BASELINE, (VersionedCheck(v(34), host_probes_and_host_lifecycle_1_34),)),
    Check("privileged", BASELINE, (VersionedCheck(v(0), privileged_1_0),)),
    Check("procMount", BASELINE, (VersionedCheck(v(0), proc_mount_1_0_gated),)),
    Check("restrictedVolumes", RESTRICTED, (VersionedCheck(v(0), restricted_volumes_1_0, ("hostPathVolumes",)),)),
    Check("runAsNonRoot", RESTRICTED, (VersionedCheck(v(0), run_as_non_root_1_0_gated),)),
    Check("runAsUser", RESTRICTED, (VersionedCheck(v(23), run_as_user_1_23_gated),)),
    Check(
        "seLinuxOptions",
        BASELINE,
        (VersionedCheck(v(0), se_linux_options_1_0), VersionedCheck(v(31), se_linux_options_1_31)),
    ),
    Check(
        "seccompProfile_baseline",
        BASELINE,
        (VersionedCheck(v(0), seccomp_profile_baseline_1_0), VersionedCheck(v(19), seccomp_profile_baseline_1_19)),
    ),
    Check(
        "seccompProfile_restricted",
        RESTRICTED,
        (
            VersionedCheck(v(19), seccomp_profile_restricted_1_19, ("seccompProfile_baseline",)),
            VersionedCheck(v(25), seccomp_profile_restricted_1_25, ("seccompProfile_baseline",)),
        ),
    ),
    Check(
        "sysctls",
        BASELINE,
        (
            VersionedCheck(v(0), sysctls_1_0),
            VersionedCheck(v(27), sysctls_1_27),
            VersionedCheck(v(29), sysctls_1_29),
            VersionedCheck(v(32), sysctls_1_32),
        ),
    ),
    Check("windowsHostProcess", BASELINE, (VersionedCheck(v(0), windows_host_process_1_0),)),
)


def _v035(checks: tuple[Check, ...]) -> tuple[Check, ...]:
    """What v0.35.0 changed in policy.DefaultChecks() (v0.35.0..v0.37.2 changed nothing but sysctls)."""
    changed = {
        # check_procMount_baseline.go
        "procMount": Check(
            "procMount",
            BASELINE,
            (VersionedCheck(v(0), proc_mount_1_0), VersionedCheck(v(35), proc_mount_1_35_baseline)),
        ),
        # check_runAsNonRoot.go
        "runAsNonRoot": Check(
            "runAsNonRoot",
            RESTRICTED,
            (VersionedCheck(v(0), run_as_non_root_1_0), VersionedCheck(v(35), run_as_non_root_1_35)),
        ),
        # check_runAsUser.go
        "runAsUser": Check(
            "runAsUser",
            RESTRICTED,
            (VersionedCheck(v(23), run_as_user_1_23), VersionedCheck(v(35), run_as_user_1_35)),
        ),
    }
    # check_procMount_restricted.go: the unconditional check for restricted, overriding the baseline one
    added = Check("procMount_restricted", RESTRICTED, (VersionedCheck(v(35), proc_mount_1_0, ("procMount",)),))
    return tuple(changed.get(c.id, c) for c in checks) + (added,)


def _v037(checks: tuple[Check, ...]) -> tuple[Check, ...]:
    """v0.37.0 check_sysctls.go: a 1.37 version."""
    return tuple(
        Check(c.id, c.level, (*c.versions, VersionedCheck(v(37), sysctls_1_37))) if c.id == "sysctls" else c
        for c in checks
    )


#: policy.DefaultChecks() of v0.37.2 (MODULE)
DEFAULT_CHECKS: tuple[Check, ...] = _v037(_v035(DEFAULT_CHECKS_V034))


def _max_version(checks: tuple[Check, ...]) -> Version:
    """registry.go populate: maxVersion, the newest version any check has."""
    return max((c.versions[-1].minimum for c in checks), key=lambda x: (x.major, x.minor))


#: registry.go maxVersion of MODULE
MAX_VERSION = _max_version(DEFAULT_CHECKS)
MAX_VERSION_V034 = _max_version(DEFAULT_CHECKS_V034)


_GENERATIONS = {34: DEFAULT_CHECKS_V034, LIBRARY: DEFAULT_CHECKS}


def _registry(library: int) -> tuple[int, Version]:
    """The module generation of an apiserver v1.<library> (34: v0.34.4, LIBRARY: v0.35+) and the newest
    version it judges: registry.go maxVersion, lowered to the apiserver's own version (v0.35 and v0.36 are
    v0.37.2 without sysctls 1.37, which the clamp to 1.35 / 1.36 leaves out)."""
    gen, newest = (34, MAX_VERSION_V034) if library <= 34 else (LIBRARY, MAX_VERSION)
    own = v(library)
    return gen, own if own.older(newest) else newest


def _in_force(check: Check, version: Version) -> VersionedCheck | None:
    """inflateVersions: the check's newest version not newer than `version`."""
    found = None
    for vc in check.versions:
        if not version.older(vc.minimum):
            found = vc
    return found


@functools.lru_cache(maxsize=256)
def _checks_for(gen: int, level: str, version: Version) -> tuple[tuple[str, VersionedCheck], ...]:
    """populate: the checks of a generation's level at a version, in evaluation order (baseline ids, then
    restricted ids, each sorted)."""
    checks = _GENERATIONS[gen]
    order = sorted(c.id for c in checks if c.level == BASELINE) + sorted(c.id for c in checks if c.level == RESTRICTED)
    baseline = {c.id: vc for c in checks if c.level == BASELINE and (vc := _in_force(c, version))}
    if level == BASELINE:
        chosen = baseline
    else:
        restricted = {c.id: vc for c in checks if c.level == RESTRICTED and (vc := _in_force(c, version))}
        overridden = {o for vc in restricted.values() for o in vc.overrides}
        chosen = {**{k: vc for k, vc in baseline.items() if k not in overridden}, **restricted}
    return tuple((cid, chosen[cid]) for cid in order if cid in chosen)


def evaluate_pod(
    lv: LevelVersion, meta: Meta, spec: Spec, *, relax_user_namespaces: bool = False, library: int = LIBRARY
) -> list[Result]:
    """checkRegistry.EvaluatePod of the evaluator kube-apiserver v1.<library> builds: one result per
    check run (none for privileged). `relax_user_namespaces` is its UserNamespacesPodSecurityStandards
    gate, read only when library <= 34 (v0.35 made the relaxation unconditional from policy version 1.35)."""
    if lv.level == PRIVILEGED:
        return []
    gen, newest = _registry(library)
    version = newest if newest.older(lv.version) else lv.version
    out = []
    for cid, vc in _checks_for(gen, lv.level, version):
        r = vc.fn(meta, spec, relax_user_namespaces)
        out.append(r if r.allowed else r._replace(check=cid))
    return out


def failing(results: list[Result]) -> list[Result]:
    """AggregateCheckResults: the results that forbid the pod (an empty reason reads as upstream's)."""
    return [r if r.reason else r._replace(reason="unknown forbidden reason") for r in results if not r.allowed]


def forbidden_detail(results: list[Result]) -> str:
    """AggregateCheckResult.ForbiddenDetail: `reason (detail), reason (detail)`."""
    return ", ".join(f"{r.reason} ({r.detail})" if r.detail else r.reason for r in failing(results))
