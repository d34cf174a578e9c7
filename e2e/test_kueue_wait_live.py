"""Kueue Capacity's "will wait" warning (issue 39) on a real kube-apiserver v1.37.2 with Kueue
v0.17.0's CRDs and no Kueue controller: the ClusterQueue's status (flavorsUsage,
flavorsReservation, pendingWorkloads) is written through its status subresource, as Kueue's
controller writes it; Kueue's visibility API (an aggregated API its controller serves) is not
registered here, so discovery says it is not served and the count ahead is the status's, said so.
Another LocalQueue of the namespace, on a ClusterQueue with room, is named as where it fits now;
one whose ClusterQueue is too small is not. No request to the unserved API is sent.
"""

from __future__ import annotations

import json
from typing import Any

from e2e.harness.controlplane import ControlPlane
from e2e.harness.kueue import KUEUE, active_status, cluster_queue
from e2e.harness.live import live_evaluate, result_of
from e2e.test_checks_live import _trainjob, cluster  # noqa: F401 (the module's fixture: Trainer's runtime)
from webhook.results import Status

NS = "chk-kueue-wait"


def _cq(name: str, gpus: str) -> dict[str, Any]:
    quotas = {"cpu": "1k", "memory": "16Ti", "nvidia.com/gpu": gpus}
    return cluster_queue(name, flavor="chk-wait-a100", quotas=quotas, namespace=NS)


def _status(used: str = "0", reserved: str = "0", pending: int = 0) -> dict[str, Any]:
    def rows(total: str) -> list[dict[str, Any]]:
        return [
            {
                "name": "chk-wait-a100",
                "resources": [{"name": "nvidia.com/gpu", "total": total, "borrowed": "0"}],
            }
        ]

    return active_status(pendingWorkloads=pending, flavorsUsage=rows(used), flavorsReservation=rows(reserved))


async def test_a_job_that_will_wait_says_why_from_the_status(cluster: ControlPlane, open_view: Any) -> None:  # noqa: F811
    cluster.ensure_namespace(NS)
    lqs = [("main", "chk-wait-full"), ("spot", "chk-wait-spot"), ("small", "chk-wait-small")]
    cluster.apply(
        [
            {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "chk-wait-a100"}},
            _cq("chk-wait-full", "40"),
            _cq("chk-wait-spot", "64"),
            _cq("chk-wait-small", "8"),
            *(
                {
                    "apiVersion": KUEUE,
                    "kind": "LocalQueue",
                    "metadata": {"name": n, "namespace": NS},
                    "spec": {"clusterQueue": c},
                }
                for n, c in lqs
            ),
        ]
    )
    statuses = {"chk-wait-full": _status("12", "14", 4), "chk-wait-spot": _status(), "chk-wait-small": _status()}
    for name, status in statuses.items():
        cluster.kubectl("patch", "clusterqueue", name, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    active = {"status": _status()["status"]["conditions"]}
    for name, _ in lqs:
        body = json.dumps({"status": {"conditions": active["status"]}})
        cluster.kubectl("patch", "localqueue", name, "-n", NS, "--subresource=status", "--type=merge", "-p", body)

    view = await open_view()
    assert not view.served("visibility.kueue.x-k8s.io/v1beta2")
    ev = await live_evaluate(_trainjob(NS, queue="main", patches=False, secrets=False), view)
    r = result_of(ev, "Kueue Capacity")
    assert r.status is Status.WARN
    head, _, age = r.message.rpartition(" (ClusterQueue status as watched ")
    assert head == (
        'TrainJob "llama-ft" will wait in ClusterQueue "chk-wait-full": it needs nvidia.com/gpu 32, 26 free now (flavor '
        '"chk-wait-a100": 12 of 40 in use and 2 reserved), and 4 workloads are pending ahead of it (ClusterQueue '
        "status.pendingWorkloads, every priority: visibility.kueue.x-k8s.io/v1beta2 is not served); ClusterQueue "
        '"chk-wait-full" is in no cohort: it cannot borrow; it preempts nothing (withinClusterQueue Never). Fix: nothing '
        'to fix; to start sooner, ask for at most 26 nvidia.com/gpu, or use LocalQueue "spot" (ClusterQueue '
        '"chk-wait-spot"), where it fits now'
    )
    assert age.endswith("s ago).")
    assert r.details == ['blocking: ClusterQueue "chk-wait-full" has too little nvidia.com/gpu free for the job']

    # the same job on the ClusterQueue with room: no warning at all (the zero-noise rule)
    ev = await live_evaluate(_trainjob(NS, queue="spot", patches=False, secrets=False), view)
    r = result_of(ev, "Kueue Capacity")
    assert (r.status, r.message.split(" (")[0]) == (Status.PASS, "The job")
    assert 'fits ClusterQueue "chk-wait-spot" now' in r.message
