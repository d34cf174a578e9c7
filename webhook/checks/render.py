"""Job Render: would the job's own controller render it at all?

The AIPerf operator refuses some specs only when it renders them (an uneven worker
split, a worker-pod memory budget below the per-worker floor); the adapter records
those refusals as `render_errors` and this check turns them into a FAIL at apply time.
"""

from __future__ import annotations

from webhook.checks.base import Check, CheckContext
from webhook.results import CheckResult, Status


class JobRender(Check):
    name = "Job Render"
    synchronous = True  # reads only the Workload and cached state
    blocking = True
    needs_pod_groups = False
    summary = (
        "The job's controller can render it into pods (AIPerf worker split and memory floor; TrainJob runtime merge)."
    )

    async def run(self, ctx: CheckContext) -> CheckResult:
        wl = ctx.workload
        if wl.render_errors:
            return CheckResult(self.name, Status.FAIL, " ".join(wl.render_errors), details=list(wl.render_errors))
        if wl.incomplete_reason:
            return CheckResult(self.name, Status.SKIP, f"Skipped: {wl.incomplete_reason}")
        groups = ", ".join(f"{g.pods} {g.name} pod{'s' if g.pods != 1 else ''}" for g in wl.pod_groups)
        return CheckResult(self.name, Status.PASS, f"Renders {wl.total_pods} pod(s): {groups}")


CHECKS = [JobRender()]
