"""The audit controller's RBAC, generated into the chart (charts/preflight-webhook/gen-rbac.py) the
way the webhook's is: what the checks declare, plus what only the controller does. Nothing else.

    reads of the checks and the view  webhook.cluster.capabilities.required_permissions (the webhook's)
    the jobs                          list, watch: every judged kind (AIPerfJobs, AIPerfSweeps, TrainJobs,
                                      JobSets: audit/jobs.py job_kinds, from the KindSpecs)
    whether a job started             list, watch: JobSets, Kueue Workloads (audit/controller.py)
    what jobs read, as metadata       list, watch: audit/controller.py TRIGGER_SPECS (Secrets, ConfigMaps,
                                      ServiceAccounts, PVCs, quotas, LimitRanges, Services, Namespaces,
                                      NetworkPolicies, Kueue queues, training runtimes)
    Events on the jobs                create, patch (core/v1 events); list: a new leader reads back the
                                      last Event of every job (events.py EventSink.resync), so a
                                      failover or a restart repeats none
    the Policy Reports                get, list, create, update, patch: openreports.io reports
                                      (webhook/audit/reports.py never deletes)
    leader election                   get, create, update: coordination.k8s.io leases, in a Role
                                      of the Lease's namespace only (audit_lease_permissions)

Secrets and the Event writes are not cluster-wide: `job_namespace_permissions` is granted only where
jobs live (the chart's rbac.jobNamespaces: a RoleBinding per namespace; rbac.clusterWide: every
namespace, with the Event writes still refused outside judged namespaces by an admission policy).
`cluster_permissions` is the rest, the audit ClusterRole's rules.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.audit.controller import JOBSETS, TRIGGER_SPECS, WORKLOADS
from webhook.audit.jobs import job_kinds
from webhook.audit.reports import GROUP as REPORTS_GROUP
from webhook.audit.reports import PLURAL as REPORTS
from webhook.cluster.capabilities import required_permissions
from webhook.cluster.view import CheckNeeds
from webhook.kube import Permission

EVENT_VERBS = ("create", "list", "patch")
REPORT_VERBS = ("get", "list", "create", "update", "patch")
LEASE_VERBS = ("get", "create", "update")


def _key(p: Permission) -> tuple[str, str, str, str, str, str]:
    return (p.namespace, p.group, p.resource, p.subresource, p.verb, p.name)


def watched() -> list[tuple[str, str]]:
    """(group, resource) of everything the controller lists and watches."""
    out = [(k.group, k.resource) for k in job_kinds()]
    out += [(s.group, s.resource) for s in (JOBSETS, WORKLOADS, *TRIGGER_SPECS)]
    return out


def audit_permissions(checks: Iterable[CheckNeeds], *, reports: bool = True) -> list[Permission]:
    """The audit ServiceAccount's cluster-wide permissions, sorted (the ClusterRole's rules)."""
    perms = set(required_permissions(checks))
    for group, resource in watched():
        perms.update(Permission(verb, resource, group) for verb in ("list", "watch"))
    perms.update(Permission(verb, "events") for verb in EVENT_VERBS)
    if reports:
        perms.update(report_permissions())
    return sorted(perms, key=_key)


#: what the audit controller may do only in the namespaces where jobs live: read Secrets (the checks' `get`,
#: and the metadata watch of audit/controller.py) and write Events on its jobs (reading them back is cluster-wide)
JOB_NAMESPACE_PERMISSIONS: tuple[Permission, ...] = (
    *(Permission(verb, "secrets") for verb in ("get", "list", "watch")),
    *(Permission(verb, "events") for verb in EVENT_VERBS if verb != "list"),
)


def job_namespace_permissions() -> list[Permission]:
    """The audit ServiceAccount's permissions in each namespace where jobs live (never cluster-wide by default)."""
    return sorted(JOB_NAMESPACE_PERMISSIONS, key=_key)


def cluster_permissions(checks: Iterable[CheckNeeds], *, reports: bool = True) -> list[Permission]:
    """audit_permissions without the job-namespace ones: the audit ClusterRole's rules."""
    scoped = set(JOB_NAMESPACE_PERMISSIONS)
    return [p for p in audit_permissions(checks, reports=reports) if p not in scoped]


def report_permissions() -> list[Permission]:
    """The Policy Reports' share of audit_permissions (the chart drops it with audit.reports.enabled=false)."""
    return [Permission(verb, REPORTS, REPORTS_GROUP) for verb in REPORT_VERBS]


def audit_lease_permissions() -> list[Permission]:
    """The Lease of the leader election, in the controller's own namespace (a Role, not cluster-wide)."""
    return [Permission(verb, "leases", "coordination.k8s.io") for verb in LEASE_VERBS]
