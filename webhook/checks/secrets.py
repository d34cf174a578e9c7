"""Secrets: every Secret (and key) the pods need exists in the namespace.

A missing Secret does not fail the job; it leaves pods in CreateContainerConfigError or
ContainerCreating forever. References come from every pod group's PodSpec (the adapter
has already applied runtime templates and patches, and turned a TrainJob initializer's
`secretRef` into `envFrom`), plus `Workload.extra_secret_refs`; Secrets the job's own
controller creates (`Workload.managed_secrets`) are skipped. `optional` is honoured.

The reads run concurrently and stop at the deadline. A 403 or a transient error makes
that Secret "cannot verify" (a WARN result) and never hides a missing Secret or key found
in another read (a FAIL result next to it). Only key names are ever seen here: the view drops values on arrival.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from webhook.checks.base import Check, CheckContext, Permission
from webhook.cluster.names import is_dns1123_subdomain
from webhook.cluster.view import ApiError
from webhook.results import CheckResult, Status
from webhook.workloads.base import Workload
from webhook.workloads.podspec import SecretRef, describe_path, secret_refs

#: time kept free at the end of the budget to report what was read
_REPORT_MARGIN = 0.05


@dataclass
class _Use:
    """All references to one Secret."""

    name: str
    refs: list[tuple[SecretRef, str]] = field(default_factory=list)  # (ref, where it is, in prose)

    @property
    def required(self) -> list[tuple[SecretRef, str]]:
        return [(r, w) for r, w in self.refs if not r.optional]

    @property
    def pull_secret(self) -> bool:
        return any(r.field_path.startswith("imagePullSecrets") for r, _ in self.refs)


def _where(ref: SecretRef, group: str | None) -> str:
    text = describe_path(ref.field_path)
    if group is not None and (ref.field_path.startswith("imagePullSecrets") or ref.field_path.startswith("volumes")):
        text += f" of the {group} pods"
    return text


def collect(wl: Workload) -> dict[str, _Use]:
    uses: dict[str, _Use] = {}
    for g in wl.pod_groups:
        for ref in secret_refs(g.pod_spec):
            uses.setdefault(ref.name, _Use(ref.name)).refs.append((ref, _where(ref, g.name)))
    for name, key, optional, path in wl.extra_secret_refs:
        ref = SecretRef(name, key, optional, path)
        uses.setdefault(name, _Use(name)).refs.append((ref, _where(ref, None)))
    for managed in wl.managed_secrets:
        uses.pop(managed, None)
    return uses


def _by(refs: list[tuple[SecretRef, str]]) -> str:
    """Distinct referencing fields; `X of the a pods` and `X of the b pods` become `X of the a, b pods`."""
    merged: dict[str, list[str]] = {}
    for _, where in refs:
        head, sep, tail = where.partition(" of the ")
        if sep and tail.endswith(" pods"):
            groups = merged.setdefault(head + "\0", [])
            if tail[: -len(" pods")] not in groups:
                groups.append(tail[: -len(" pods")])
        else:
            merged.setdefault(where, [])
    return ", ".join(
        f"{key[:-1]} of the {', '.join(groups)} pods" if key.endswith("\0") else key for key, groups in merged.items()
    )


def _missing_secret(use: _Use, ns: str) -> str:
    refs = use.required
    if not is_dns1123_subdomain(use.name):
        return _invalid_name(use, refs)
    if use.pull_secret:
        fix = (
            f"kubectl create secret docker-registry {use.name} -n {ns} "
            "--docker-server=<registry> --docker-username=<user> --docker-password=…"
        )
    else:
        keys = sorted({r.key for r, _ in refs if r.key})
        literals = " ".join(f"--from-literal={k}=…" for k in keys) or "--from-literal=<key>=…"
        fix = f"kubectl create secret generic {use.name} -n {ns} {literals}"
    return f'Secret "{use.name}" not found in namespace "{ns}" (referenced by {_by(refs)}). Fix: {fix}'


def _invalid_name(use: _Use, refs: list[tuple[SecretRef, str]]) -> str:
    """A name no Secret can have (pkg/apis/core/validation ValidateSecretName): never looked up.

    ValidatePodSpec refuses it in env secretKeyRef and envFrom secretRef, so those pods are
    never created; in volumes and imagePullSecrets it only has to be non-empty, and the
    kubelet then cannot find it.
    """
    in_env = any(".env[" in r.field_path or ".envFrom[" in r.field_path for r, _ in refs)
    why = "the apiserver refuses pods that reference it in env" if in_env else "the kubelet will never find it"
    return (
        f'"{use.name}" is not a valid Secret name (referenced by {_by(refs)}): {why}. '
        "Fix: reference the Secret by its real name (a lowercase RFC 1123 subdomain)"
    )


def _missing_key(use: _Use, ns: str, key: str, refs: list[tuple[SecretRef, str]]) -> str:
    return (
        f'Secret "{use.name}" in namespace "{ns}" has no key "{key}" (referenced by {_by(refs)}). '
        f"Fix: kubectl patch secret {use.name} -n {ns} --type merge -p '{{\"stringData\":{{\"{key}\":\"…\"}}}}'"
    )


def _cannot_verify(name: str, ns: str, exc: BaseException) -> str:
    if isinstance(exc, ApiError) and exc.forbidden:
        return f'Cannot verify Secret "{name}" in namespace "{ns}" (not permitted to get secrets)'
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f'Cannot verify Secret "{name}" in namespace "{ns}" (timed out)'
    text = exc.message if isinstance(exc, ApiError) else (str(exc) or type(exc).__name__)
    return f'Cannot verify Secret "{name}" in namespace "{ns}" ({text})'


class Secrets(Check):
    name = "Secrets"
    needs_cluster = True
    permissions = (Permission("get", "secrets"),)
    apis = ("v1",)
    summary = (
        "Every referenced Secret and key exists: imagePullSecrets, secret and projected volumes (items, optional), "
        "env secretKeyRef and envFrom of all containers, TrainJob initializer secretRef, runtime templates."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        wl = ctx.workload
        ns = wl.namespace
        uses = collect(wl)
        if not uses:
            skipped = f" ({len(wl.managed_secrets)} created by the job's controller)" if wl.managed_secrets else ""
            return CheckResult(self.name, Status.SKIP, f"No Secrets referenced{skipped}")
        to_read = [u for u in uses.values() if u.required]
        if not to_read:
            return CheckResult(self.name, Status.PASS, f"Only optional Secret references ({', '.join(sorted(uses))})")

        view = ctx.view
        tasks = {asyncio.ensure_future(view.secret_keys(ns, u.name, ctx.deadline)): u for u in to_read}
        done, pending = await asyncio.wait(tasks.keys(), timeout=max(0.0, ctx.deadline.remaining() - _REPORT_MARGIN))
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

        fails: list[str] = []
        unknown: list[str] = []
        for task, use in sorted(tasks.items(), key=lambda kv: kv[1].name):
            if task in pending:
                unknown.append(_cannot_verify(use.name, ns, asyncio.TimeoutError()))
                continue
            exc = task.exception()
            if exc is not None:
                if isinstance(exc, ApiError) and exc.not_found:
                    fails.append(_missing_secret(use, ns))
                else:
                    unknown.append(_cannot_verify(use.name, ns, exc))
                continue
            keys = task.result()
            if keys is None:
                fails.append(_missing_secret(use, ns))
                continue
            by_key: dict[str, list[tuple[SecretRef, str]]] = {}
            for ref, where in use.required:
                if ref.key is not None and ref.key not in keys:
                    by_key.setdefault(ref.key, []).append((ref, where))
            fails += [_missing_key(use, ns, k, refs) for k, refs in sorted(by_key.items())]

        out: list[CheckResult] = []
        if fails:
            out.append(CheckResult(self.name, Status.FAIL, " ".join(fails), details=fails))
        if unknown:  # reported next to the failures, never instead of them
            out.append(CheckResult(self.name, Status.WARN, "; ".join(unknown), details=unknown))
        if out:
            return out
        n = len(to_read)
        return CheckResult(
            self.name,
            Status.PASS,
            f"{n} Secret{'s' if n != 1 else ''} exist with the keys used: {', '.join(sorted(u.name for u in to_read))}",
        )


CHECKS = [Secrets()]
