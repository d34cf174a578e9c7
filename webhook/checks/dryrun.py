"""Dry Run: would the apiserver accept what the job's controllers will create?

The JobSet the job becomes, and one representative Pod per pod group, are POSTed with
`dryRun=All`, concurrently: every admission step runs (schema, Pod Security Admission,
LimitRange, ResourceQuota, other webhooks and policy engines) and nothing is stored.
The apiserver's own rejection text becomes the message. These are the only writes the
webhook ever sends. (A dry-run Pod is not one of our kinds: no recursion.)
"""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any

from webhook.checks.base import Check, CheckContext, Permission
from webhook.checks.basics import JOBSET_API
from webhook.cluster.view import ApiError
from webhook.results import CheckResult, Status
from webhook.workloads.base import PodGroup, Workload

_REPORT_MARGIN = 0.05
_RBAC_DENIED = re.compile(r"cannot create resource")
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request')


def pod_for(wl: Workload, group: PodGroup) -> dict[str, Any]:
    """The first pod of a group as the Job controller would create it (name `<jobset>-<rjob>-0-0-dryrn`)."""
    jobset = ((wl.derived.get("jobSet") or {}).get("metadata") or {}).get("name") or wl.name
    meta = copy.deepcopy(group.pod_metadata or {})
    labels = dict(meta.get("labels") or {})
    labels.setdefault("jobset.sigs.k8s.io/jobset-name", jobset)
    labels.setdefault("jobset.sigs.k8s.io/replicatedjob-name", group.name)
    metadata: dict[str, Any] = {"name": f"{jobset}-{group.name}-0-0-dryrn"[:253], "namespace": wl.namespace, "labels": labels}
    if meta.get("annotations"):
        metadata["annotations"] = dict(meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": copy.deepcopy(group.pod_spec)}


def jobset_for(wl: Workload) -> dict[str, Any] | None:
    js = wl.derived.get("jobSet")
    if not js:
        return None
    body = copy.deepcopy(js)
    body.setdefault("apiVersion", JOBSET_API)
    body.setdefault("kind", "JobSet")
    body.setdefault("metadata", {})["namespace"] = wl.namespace
    body["metadata"].pop("resourceVersion", None)
    body["metadata"].pop("uid", None)
    return body


def fix_for(text: str, ns: str) -> str:
    """The likely fix for a rejection, from the apiserver's own words."""
    if "violates PodSecurity" in text:
        return (
            f'make the pod spec meet the Pod Security level of namespace "{ns}" (label pod-security.kubernetes.io/enforce), '
            "or ask an admin to relax it"
        )
    if "LimitRange" in text or re.search(r"(maximum|minimum) .* usage per (Container|Pod)", text):
        return f"keep the containers' resources within the LimitRange of namespace \"{ns}\" (kubectl describe limitrange -n {ns})"
    if "exceeded quota" in text or "failed quota" in text:
        return f"see Resource Quotas (kubectl describe resourcequota -n {ns})"
    if "serviceaccount" in text.lower() and "not found" in text:
        return "create the ServiceAccount (see Service Account)"
    m = _WEBHOOK.search(text)
    if m:
        return f'satisfy the policy of admission webhook "{m.group(1)}", or ask its owner for an exception'
    if "ValidatingAdmissionPolicy" in text:
        return "satisfy the ValidatingAdmissionPolicy named in the message"
    return "correct the spec as the message says"


def _subject(kind: str, name: str, group: str | None) -> str:
    return f"Pod for {group}" if group is not None else f'{kind} "{name}"'


class DryRun(Check):
    name = "Dry Run"
    needs_cluster = True
    local_capacity = True
    permissions = (Permission("create", "jobsets", "jobset.x-k8s.io"), Permission("create", "pods"))
    apis = ("v1", JOBSET_API)
    summary = (
        "The JobSet and one Pod per pod group pass the apiserver's admission with dryRun=All "
        "(schema, Pod Security, LimitRange, quota, other webhooks and policies)."
    )

    async def run(self, ctx: CheckContext) -> CheckResult | list[CheckResult]:
        assert ctx.view is not None
        wl = ctx.workload
        ns = wl.namespace
        bodies: list[tuple[str, str, str, str | None, dict[str, Any]]] = []  # (apiVersion, kind, name, group, body)
        js = jobset_for(wl)
        if js is not None:
            bodies.append((js["apiVersion"], "JobSet", js["metadata"].get("name", wl.name), None, js))
        for g in wl.pod_groups:
            pod = pod_for(wl, g)
            bodies.append(("v1", "Pod", pod["metadata"]["name"], g.name, pod))
        if not bodies:
            return CheckResult(self.name, Status.SKIP, "Nothing to dry-run: the job derives no JobSet and no pods")

        view = ctx.view
        tasks = {
            asyncio.ensure_future(view.dry_run_create(av, kind, ns, body, ctx.deadline)): (kind, name, group)
            for av, kind, name, group, body in bodies
        }
        done, pending = await asyncio.wait(tasks.keys(), timeout=max(0.0, ctx.deadline.remaining() - _REPORT_MARGIN))
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

        fails: list[str] = []
        unknown: list[str] = []
        accepted: list[str] = []
        for task, (kind, name, group) in tasks.items():
            subject = _subject(kind, name, group)
            if task in pending:
                unknown.append(f"Could not dry-run the {subject} (timed out)")
                continue
            exc = task.exception()
            if exc is None:
                accepted.append(subject if group is None else group)
                continue
            if not isinstance(exc, ApiError):
                unknown.append(f"Could not dry-run the {subject}: {exc or type(exc).__name__}")
            elif exc.transient:
                unknown.append(f"Could not dry-run the {subject} (transient error): {exc.message}")
            elif exc.forbidden and _RBAC_DENIED.search(exc.message):
                unknown.append(f"Cannot verify the {subject} (not permitted to create {kind.lower()}s with dryRun)")
            elif exc.status == 409 and kind == "JobSet":
                accepted.append(f"{subject} (already exists)")
            else:
                text = exc.message.strip().rstrip(".")
                fails.append(f"{subject} rejected by the apiserver: {text}. Fix: {fix_for(text, ns)}.")

        out: list[CheckResult] = []
        if fails:
            out.append(CheckResult(self.name, Status.FAIL, " ".join(fails), details=fails))
        if unknown:  # reported next to the rejections, never instead of them
            out.append(CheckResult(self.name, Status.WARN, "; ".join(unknown), details=unknown))
        if out:
            return out
        objects = [a for a in accepted if a.startswith("JobSet")]
        groups = [a for a in accepted if not a.startswith("JobSet")]
        parts = objects + ([f"a pod of each group ({', '.join(groups)})"] if groups else [])
        return CheckResult(self.name, Status.PASS, f"The apiserver accepts (dryRun=All) {' and '.join(parts)}")


CHECKS = [DryRun()]
