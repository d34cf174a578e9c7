"""Cluster basics: is this a cluster the job can run on at all?

Blocking and cheap (discovery only): a JobSet-based job on a cluster that does not
serve JobSet fails no matter what else is true, so nothing else is worth probing.
"""

from __future__ import annotations

from webhook.checks.base import AIPERFJOB, TRAINJOB, Check, CheckContext
from webhook.kube import JOBSET_API_VERSION
from webhook.models.apis import TRAINER_API
from webhook.results import CheckResult, Status

JOBSET_INSTALL = (
    "kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"
)
TRAINER_INSTALL = (
    'kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0"'
)


class KubernetesVersion(Check):
    name = "Kubernetes Version"
    synchronous = True  # reads only the Workload and cached state
    blocking = True
    needs_cluster = True
    needs_pod_groups = False
    summary = (
        "The cluster runs at least the Kubernetes version the checks support (minKubernetesVersion, default 1.27)."
    )

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        minimum = parse_version(ctx.settings.min_kubernetes_version)
        have = ctx.view.server_version()
        if have is None:
            return CheckResult(
                self.name, Status.WARN, "Could not read the cluster's Kubernetes version (discovery has not answered)"
            )
        shown = f"{have[0]}.{have[1]}"
        want = f"{minimum[0]}.{minimum[1]}"
        if have < minimum:
            return CheckResult(
                self.name,
                Status.FAIL,
                f"Kubernetes {shown} is older than {want}, the oldest version these checks support. "
                f"Fix: upgrade the cluster to Kubernetes {want} or later.",
            )
        return CheckResult(self.name, Status.PASS, f"Kubernetes {shown} (>= {want})")


class JobSetAPI(Check):
    """Both kinds run as a JobSet; without the API the controller can create nothing.

    `apis` stays empty on purpose: a missing API is this check's FAIL, not a reason to skip it.
    """

    name = "JobSet API"
    synchronous = True  # reads only the Workload and cached state
    blocking = True
    needs_cluster = True
    needs_pod_groups = False
    summary = f"The cluster serves {JOBSET_API_VERSION}: the job runs as a JobSet."

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        if ctx.view.served(JOBSET_API_VERSION):
            return CheckResult(self.name, Status.PASS, f"{JOBSET_API_VERSION} is served")
        kind = ctx.workload.kind
        return CheckResult(
            self.name,
            Status.FAIL,
            f"The cluster does not serve {JOBSET_API_VERSION}, so the {kind}'s JobSet cannot be created. "
            f"Fix: install JobSet v0.12 or later: {JOBSET_INSTALL}",
        )


class TrainerAPI(Check):
    name = "Trainer API"
    synchronous = True  # reads only the Workload and cached state
    blocking = True
    needs_cluster = True
    needs_pod_groups = False
    kinds = frozenset({TRAINJOB})
    summary = f"The cluster serves {TRAINER_API}: Kubeflow Trainer's controller turns the TrainJob into a JobSet."

    async def run(self, ctx: CheckContext) -> CheckResult:
        assert ctx.view is not None
        if ctx.view.served(TRAINER_API):
            return CheckResult(self.name, Status.PASS, f"{TRAINER_API} is served")
        return CheckResult(
            self.name,
            Status.FAIL,
            f"The cluster does not serve {TRAINER_API}, so no controller runs the TrainJob. "
            f"Fix: install Kubeflow Trainer v2.3: {TRAINER_INSTALL}",
        )


CHECKS = [KubernetesVersion(), JobSetAPI(), TrainerAPI()]


def parse_version(text: str) -> tuple[int, int]:
    """`1.27`, `v1.30.2`, `1.29+` → (major, minor)."""
    parts = text.strip().lstrip("v").split(".")
    digits = ["".join(ch for ch in p if ch.isdigit()) or "0" for p in parts[:2]]
    while len(digits) < 2:
        digits.append("0")
    return int(digits[0]), int(digits[1])


__all__ = [
    "AIPERFJOB",
    "CHECKS",
    "parse_version",
]
