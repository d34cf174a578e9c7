"""Helpers the check modules share, that are not a check (a cluster read cut before the deadline is
webhook.models.context.before_deadline): the permissions a cached resource needs, the "cached data is N s old" note a verdict from a stale cache carries, and plurals."""

from __future__ import annotations

from dataclasses import dataclass, field

from webhook.checks.base import CheckContext
from webhook.kube import Permission
from webhook.results import CheckResult, Status


def cached(resource: str, group: str = "") -> tuple[Permission, Permission]:
    """A watch-backed cache needs list and watch."""
    return Permission("list", resource, group), Permission("watch", resource, group)


def stale_details(ctx: CheckContext, *resources: str) -> list[str]:
    """One detail line per cache that is older than cacheStaleSeconds (or never synced)."""
    view = ctx.view
    if view is None:
        return []
    out: list[str] = []
    limit = ctx.settings.cache_stale_seconds
    for resource in resources:
        age = view.cache_age(resource)
        if age is None:
            out.append(f"cached {resource} have not synced yet; this verdict may miss objects")
        elif age > limit:
            out.append(
                f"cached {resource} are {age:.0f}s old (over cacheStaleSeconds {limit:g}); this verdict may be out of date"
            )
    return out


def with_stale(result: CheckResult, ctx: CheckContext, *resources: str) -> CheckResult:
    """Note stale caches in the details and as caveats, so a kubectl user sees them too."""
    lines = stale_details(ctx, *resources)
    result.details.extend(lines)
    result.caveats.extend(lines)
    return result


def kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def plural(n: int, word: str, suffix: str = "s") -> str:
    return f"{n} {word}{'' if n == 1 else suffix}"


def no_quota(check: str, ctx: CheckContext) -> CheckResult:
    """The PASS of a quota check in a namespace without a ResourceQuota (the cache's age noted)."""
    return with_stale(
        CheckResult(check, Status.PASS, f'No ResourceQuota in namespace "{ctx.workload.namespace}"'),
        ctx,
        "resourcequotas",
    )


@dataclass
class Findings:
    """A check's lines so far, pod group by pod group: FAIL, WARN and PASS (see `fail_and_warn`)."""

    fails: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)


def fail_and_warn(
    check: str,
    fails: list[str],
    warns: list[str],
    *,
    fail_details: list[str] | None = None,
    warn_sep: str = "; ",
    warn_tail: str = "",
) -> list[CheckResult]:
    """One FAIL (every failure, joined by a space; its details `fail_details`, else the failures) and
    one WARN (every warning joined by `warn_sep`, then `warn_tail`; next to the failures, never instead
    of them): both, one, or none (the caller's PASS)."""
    out: list[CheckResult] = []
    if fails:
        details = list(fails if fail_details is None else fail_details)
        out.append(CheckResult(check, Status.FAIL, " ".join(fails), details=details))
    if warns:
        out.append(CheckResult(check, Status.WARN, warn_sep.join(warns) + warn_tail, details=list(warns)))
    return out
