"""The check registry: every check, in the order results are reported.

Each family lives in its own module and exposes `CHECKS`, a list of Check instances.
A new check goes into its family's CHECKS (or a new module listed in _FAMILIES).
"""

from __future__ import annotations

from webhook.checks import (
    basics,
    configmap,
    controllers,
    dryrun,
    endpoint,
    gpu,
    image,
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
    configmap,
    names,
    gpu,
    secrets,
    serviceaccount,
    storage,
    quotas,
    kueue,
    nodes,
    endpoint,
    netpol,
    controllers,
    podsecurity,
    dryrun,
)


def all_checks() -> list[Check]:
    return [check for family in _FAMILIES for check in family.CHECKS]


def check_names() -> list[str]:
    return [c.name for c in all_checks()]
