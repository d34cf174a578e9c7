"""Accelerator Limits: every status and its exact wording."""

from webhook.checks.base import CheckContext
from webhook.checks.gpu import AcceleratorLimits
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.results import Status
from webhook.workloads import aiperf, trainjob
from webhook.workloads.base import PodGroup, Workload


def wl(*groups: PodGroup, kind: str = "TrainJob") -> Workload:
    facts = {"TrainJob": trainjob.FACTS, "AIPerfJob": aiperf.FACTS}[kind]  # as the kind's adapter sets them
    return Workload(kind, "v", "llama-ft", "team-a", {}, pod_groups=list(groups), facts=facts)


def node(
    requests: dict | None = None,
    limits: dict | None = None,
    name: str = "node",
    pods: int = 4,
    group: str = "node",
    init: bool = False,
) -> PodGroup:
    c = {
        "name": name,
        "image": "x",
        "resources": {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None},
    }
    spec = {"initContainers": [c], "containers": []} if init else {"containers": [c]}
    return PodGroup(group, pods, spec)


async def run(workload: Workload):
    return await AcceleratorLimits().run(CheckContext(workload=workload, deadline=Deadline(5), settings=Settings()))


async def test_pass_without_extended_resources():
    r = await run(wl(node({"cpu": "4", "memory": "16Gi"})))
    assert (r.status, r.message) == (Status.PASS, "No container requests an extended resource such as nvidia.com/gpu")


async def test_pass_with_equal_limits_reports_totals():
    r = await run(wl(node({"cpu": "32", "nvidia.com/gpu": "8"}, {"nvidia.com/gpu": 8})))
    assert (r.status, r.message) == (
        Status.PASS,
        "Extended resources have limits equal to requests (nvidia.com/gpu: 32 in total)",
    )


async def test_limit_only_is_fine_because_requests_default_to_limits():
    r = await run(wl(node(None, {"amd.com/gpu": "1"}, pods=1)))
    assert r.status is Status.PASS


async def test_request_without_limit_fails():
    r = await run(wl(node({"nvidia.com/gpu": "8"}, {"cpu": "1"})))
    assert (r.status, r.message) == (
        Status.FAIL,
        'Container "node" in pod group "node" requests nvidia.com/gpu: 8 with no limit; Kubernetes rejects its pods at Job '
        'creation ("Limit must be set for non overcommitable resources"). '
        "Fix: set limits nvidia.com/gpu: 8 in spec.trainer.resourcesPerNode.limits (or the runtime's container resources)",
    )


async def test_request_different_from_limit_fails():
    r = await run(wl(node({"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 4}, name="launcher", group="launcher", pods=1)))
    assert (r.status, r.message) == (
        Status.FAIL,
        'Container "launcher" in pod group "launcher" requests nvidia.com/gpu: 2 but limits it to 4; Kubernetes requires the '
        "request to equal the limit and rejects its pods at Job creation. "
        "Fix: set request and limit of nvidia.com/gpu to the same value in the training runtime's container resources",
    )


async def test_fractional_extended_resource_fails():
    r = await run(wl(node({"nvidia.com/gpu": "0.5"}, {"nvidia.com/gpu": "0.5"}), kind="AIPerfJob"))
    assert (r.status, r.message) == (
        Status.FAIL,
        'Container "node" in pod group "node" asks for nvidia.com/gpu: 0.5, but extended resources must be whole numbers, '
        "so Kubernetes rejects its pods at Job creation. Fix: request a whole number of nvidia.com/gpu (e.g. 1)",
    )


async def test_hugepages_need_limits_too():
    r = await run(wl(node({"hugepages-2Mi": "1Gi"}, None, name="init", init=True), kind="AIPerfJob"))
    assert (r.status, r.message) == (
        Status.FAIL,
        'Init container "init" in pod group "node" requests hugepages-2Mi: 1Gi with no limit; Kubernetes rejects its pods at '
        'Job creation ("Limit must be set for non overcommitable resources"). '
        "Fix: set limits hugepages-2Mi: 1Gi in the container's resources.limits",
    )


async def test_unparseable_quantity_fails():
    r = await run(wl(node({"nvidia.com/gpu": "one"}, {"nvidia.com/gpu": "one"})))
    assert (r.status, r.message) == (
        Status.FAIL,
        'Container "node" in pod group "node" sets nvidia.com/gpu to "one", which is not a Kubernetes quantity. '
        "Fix: use a whole number such as 1",
    )


async def test_several_findings_one_line_and_details():
    r = await run(
        wl(
            node({"nvidia.com/gpu": "8"}),
            node({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 2}, name="init", group="dataset-initializer", pods=1),
        )
    )
    assert r.status is Status.FAIL
    assert r.message.count("Fix:") == 1
    assert len(r.details) == 2
    assert all("Fix:" in d for d in r.details)
