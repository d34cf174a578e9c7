"""The check registry: every check, in the order results are reported.

Each family lives in its own module and exposes `CHECKS`, a list of Check instances.
A new check goes into its family's CHECKS (or a new module listed in _FAMILIES).
"""

from __future__ import annotations

from webhook.checks import (
    basics,
    configmap,
    controllers,
    dra,
    dryrun,
    endpoint,
    gpu,
    image,
    imagepull,
    kueue,
    names,
    netpol,
    nodes,
    podsecurity,
    quotas,
    render,
    runtime,
    secrets,
    serviceaccount,
    storage,
    sweep,
)
from webhook.checks.base import Check

# order = report order; blocking checks run first regardless
_FAMILIES = (
    render,
    sweep,
    basics,
    runtime,
    image,
    imagepull,
    configmap,
    names,
    gpu,
    secrets,
    serviceaccount,
    storage,
    dra,
    quotas,
    kueue,
    nodes,
    endpoint,
    netpol,
    controllers,
    podsecurity,
    dryrun,
)


class DuplicateCheckName(Exception):
    """Two registered checks share a name: settings, annotations, metrics and reports key on it."""


def _registered() -> tuple[Check, ...]:
    checks = tuple(check for family in _FAMILIES for check in family.CHECKS)
    seen: dict[str, str] = {}
    for c in checks:
        where = type(c).__module__
        if c.name in seen:
            raise DuplicateCheckName(f"check name {c.name!r} registered twice ({seen[c.name]} and {where})")
        seen[c.name] = where
    return checks


#: asserted unique at import: a duplicate name fails at start-up, not as a silently shadowed setting
_CHECKS = _registered()


def all_checks() -> list[Check]:
    return list(_CHECKS)


def check_names() -> list[str]:
    return [c.name for c in all_checks()]
