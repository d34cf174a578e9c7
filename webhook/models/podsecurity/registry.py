"""Which checks run for a level and version, and the evaluator (`policy/registry.go`: `populate`,
`inflateVersions`: each check's version in force, restricted checks overriding baseline ones,
baseline ids first then restricted ids, each sorted; a version newer than the newest check counts
as it, and v0.35+ `NewEvaluator`'s emulationVersion lowers that newest version: here the
apiserver's), with `policy/checks.go` `AggregateCheckResults` and `ForbiddenDetail`, for the two
library generations (v0.34.4 and v0.37.2).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from webhook.models.podsecurity.api import (
    BASELINE,
    LIBRARY,
    PRIVILEGED,
    RESTRICTED,
    LevelVersion,
    Version,
    v,
)
from webhook.models.podsecurity.checks_host import (
    host_namespaces_1_0,
    host_path_volumes_1_0,
    host_ports_1_0,
    host_probes_and_host_lifecycle_1_34,
    windows_host_process_1_0,
)
from webhook.models.podsecurity.checks_pod import (
    restricted_volumes_1_0,
    sysctls_1_0,
    sysctls_1_27,
    sysctls_1_29,
    sysctls_1_32,
    sysctls_1_37,
)
from webhook.models.podsecurity.checks_privilege import (
    allow_privilege_escalation_1_8,
    allow_privilege_escalation_1_25,
    capabilities_baseline_1_0,
    capabilities_restricted_1_22,
    capabilities_restricted_1_25,
    privileged_1_0,
    proc_mount_1_0,
    proc_mount_1_0_gated,
    proc_mount_1_35_baseline,
)
from webhook.models.podsecurity.checks_profiles import (
    app_armor_profile_1_0,
    se_linux_options_1_0,
    se_linux_options_1_31,
    seccomp_profile_baseline_1_0,
    seccomp_profile_baseline_1_19,
    seccomp_profile_restricted_1_19,
    seccomp_profile_restricted_1_25,
)
from webhook.models.podsecurity.checks_users import (
    run_as_non_root_1_0,
    run_as_non_root_1_0_gated,
    run_as_non_root_1_35,
    run_as_user_1_23,
    run_as_user_1_23_gated,
    run_as_user_1_35,
)
from webhook.models.podsecurity.helpers import CheckFn, Meta, Result, Spec


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
