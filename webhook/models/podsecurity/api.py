"""Levels, versions and the namespace labels (`api/constants.go`, `api/helpers.go`): `ParseLevel`,
`ParseVersion`, `CompareLevels` and `PolicyToEvaluate` (the namespace labels over the
AdmissionConfiguration's defaults; an invalid enforce level counts as `restricted`, an invalid
version as `latest`, an invalid warn/audit level as `privileged`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from webhook.models.podsecurity.helpers import go_quote

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
