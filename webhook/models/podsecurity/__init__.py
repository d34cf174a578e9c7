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

The package, one upstream file family a module: `api` (api/), `helpers` (policy/helpers.go,
visitor.go, the Go-like reads), `checks_privilege`, `checks_host`, `checks_profiles`,
`checks_users`, `checks_pod` (the check_*.go files), `registry` (policy/registry.go, checks.go).
This package re-exports the public names.
"""

from __future__ import annotations

from webhook.models.podsecurity.api import (
    AUDIT_LABEL,
    AUDIT_VERSION_LABEL,
    BASELINE,
    ENFORCE_LABEL,
    ENFORCE_VERSION_LABEL,
    LABEL_PREFIX,
    LATEST,
    LEVELS,
    LIBRARY,
    MODULE,
    MODULE_V034,
    PRIVILEGED,
    RESTRICTED,
    WARN_LABEL,
    WARN_VERSION_LABEL,
    LevelVersion,
    Policy,
    Version,
    compare_levels,
    parse_level,
    parse_version,
    policy_to_evaluate,
    v,
)
from webhook.models.podsecurity.helpers import (
    CheckFn,
    Meta,
    Result,
    Spec,
    go_quote,
    join_quote,
    pluralize,
)
from webhook.models.podsecurity.registry import (
    DEFAULT_CHECKS,
    DEFAULT_CHECKS_V034,
    MAX_VERSION,
    MAX_VERSION_V034,
    Check,
    VersionedCheck,
    evaluate_pod,
    failing,
    forbidden_detail,
)

__all__ = [
    "AUDIT_LABEL",
    "AUDIT_VERSION_LABEL",
    "BASELINE",
    "Check",
    "CheckFn",
    "DEFAULT_CHECKS",
    "DEFAULT_CHECKS_V034",
    "ENFORCE_LABEL",
    "ENFORCE_VERSION_LABEL",
    "LABEL_PREFIX",
    "LATEST",
    "LEVELS",
    "LIBRARY",
    "LevelVersion",
    "MAX_VERSION",
    "MAX_VERSION_V034",
    "MODULE",
    "MODULE_V034",
    "Meta",
    "PRIVILEGED",
    "Policy",
    "RESTRICTED",
    "Result",
    "Spec",
    "Version",
    "VersionedCheck",
    "WARN_LABEL",
    "WARN_VERSION_LABEL",
    "compare_levels",
    "evaluate_pod",
    "failing",
    "forbidden_detail",
    "go_quote",
    "join_quote",
    "parse_level",
    "parse_version",
    "pluralize",
    "policy_to_evaluate",
    "v",
]
