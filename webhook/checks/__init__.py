"""The check registry: every check, in the order results are reported.

Each family lives in its own module and exposes `CHECKS`, a list of Check instances.
"""

from __future__ import annotations

import importlib

from webhook.checks.base import Check

# order = report order; blocking checks run first regardless
_MODULES = (
    "render",
    "sweep",
    "basics",
    "runtime",
    "image",
    "configmap",
    "names",
    "gpu",
    "secrets",
    "serviceaccount",
    "quotas",
    "kueue",
    "nodes",
    "endpoint",
    "dryrun",
)


def all_checks() -> list[Check]:
    out: list[Check] = []
    for mod in _MODULES:
        out.extend(importlib.import_module(f"webhook.checks.{mod}").CHECKS)
    return out


def check_names() -> list[str]:
    return [c.name for c in all_checks()]
