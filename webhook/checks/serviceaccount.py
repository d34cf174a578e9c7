"""Service Account: the ServiceAccount the pods run as exists in the namespace.

Without it the Job controller's pod creates fail (`serviceaccount "x" not found`), and
the job hangs with nothing in its own status. An unset serviceAccountName means the
namespace's `default` ServiceAccount, which the cluster creates itself: not checked.
"""

from __future__ import annotations

from webhook.checks.base import Check, CheckContext
from webhook.checks.common import cached, with_stale
from webhook.results import CheckResult, Status
from webhook.workloads.podspec import service_account


class ServiceAccount(Check):
    name = "Service Account"
    synchronous = True  # reads only the Workload and cached state
    needs_cluster = True
    permissions = cached("serviceaccounts")
    apis = ("v1",)
    summary = "The pods' serviceAccountName exists in the job's namespace."

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        wl = ctx.workload
        users: dict[str, list[str]] = {}
        for g in wl.pod_groups:
            sa = service_account(g.pod_spec)
            if sa is not None and sa not in wl.managed_service_accounts:
                users.setdefault(sa, []).append(g.name)
        if not users:
            return CheckResult(
                self.name, Status.SKIP, "No serviceAccountName set; the pods use the namespace's default ServiceAccount"
            )
        missing = [sa for sa in users if ctx.view.get_cached("serviceaccounts", wl.namespace, sa) is None]
        if missing:
            lines = [
                f'ServiceAccount "{sa}" not found in namespace "{wl.namespace}" (serviceAccountName of the '
                f"{', '.join(users[sa])} pods); the pods could not be created. "
                f"Fix: kubectl create serviceaccount {sa} -n {wl.namespace}"
                for sa in missing
            ]
            return with_stale(
                CheckResult(self.name, Status.FAIL, " ".join(lines), details=lines), ctx, "serviceaccounts"
            )
        names = ", ".join(f'"{sa}"' for sa in users)
        return with_stale(
            CheckResult(self.name, Status.PASS, f'ServiceAccount {names} exists in namespace "{wl.namespace}"'),
            ctx,
            "serviceaccounts",
        )


CHECKS = [ServiceAccount()]
