"""The fidelity matrix's DRA scenarios (issue 26; joined into ``SCENARIOS`` by e2e/fidelity/scenarios.py).

GPUs by Dynamic Resource Allocation (resource.k8s.io/v1): the node runs the minimal DRA kubelet
plugin of e2e/draplugin (e2e/harness/dra_plugin.py, driver ``gpu.example.com``), which publishes
:data:`DEVICES` devices of model ``H100`` as the node's ResourceSlice and prepares what the
scheduler allocates from them, so a pod whose claim can be allocated really starts; the
DeviceClass ``gpu.example.com`` selects them (``device.driver == "gpu.example.com"``). The runner
starts the plugin when a selected scenario needs it (:func:`needs_dra`).

A pod asks through ``spec.resourceClaims`` naming a ResourceClaimTemplate of its namespace (the
real kube-controller-manager's resourceclaim controller makes one ResourceClaim per pod from it):

* a TrainJob carries it from its runtime: a namespaced TrainingRuntime whose ``node`` pod template
  has the claim and the container's ``resources.claims`` (Trainer's runtimePatches cannot add
  ``resourceClaims``: PodSpecPatch in trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go
  has no such field);
* an AIPerfJob through ``spec.podTemplate.extraPodSpec.resourceClaims``, which the operator copies
  into the pod spec of both its controller and its worker pod (aiperf operator
  handlers/create.py): two claims, one per pod.

Twins: each runnable job has a broken one the scheduler can never place (a class that does not
exist, more devices than the node has, a CEL selector no device matches); nothing here says what
should happen, the runner observes it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from e2e.fidelity.aiperf_scenarios import aiperfjob
from e2e.fidelity.scenarios_base import WORKLOAD_IMAGE, Scenario
from e2e.harness import trainer_manifests
from e2e.harness.aiperf_manifests import tokenizer_configmap
from e2e.harness.dra_plugin import DRIVER, device_class

#: the devices the plugin publishes: enough for the runnable rows at once (the TrainJob's 1, the
#: AIPerfJob's 2), fewer than the "too many" row asks
DEVICES = 4
CLAIM = "gpu"

#: the DeviceClass selecting every device of the driver (a cluster admin's or the driver chart's)
DEVICE_CLASS: dict[str, Any] = device_class(DRIVER)


def claim_template(exactly: dict[str, Any], name: str = CLAIM) -> dict[str, Any]:
    """A ResourceClaimTemplate with one request ``gpus`` (``exactly``: its deviceClassName, count, selectors)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": copy.deepcopy(exactly)}]}}},
    }


def training_runtime(name: str = "dra-runtime") -> dict[str, Any]:
    """A namespaced TrainingRuntime: one ``node`` Job whose pod claims :data:`CLAIM` from its template
    and gives it to the trainer container."""
    pod = {
        "restartPolicy": "Never",
        "resourceClaims": [{"name": CLAIM, "resourceClaimTemplateName": CLAIM}],
        "containers": [
            {
                "name": "node",
                "image": WORKLOAD_IMAGE,
                "resources": {
                    "requests": {"cpu": "50m", "memory": "32Mi"},
                    "limits": {"cpu": "50m", "memory": "32Mi"},
                    "claims": [{"name": CLAIM}],
                },
            }
        ],
    }
    return trainer_manifests.training_runtime(name, pod, job_spec={"backoffLimit": 0})


def dra_trainjob(runtime: str = "dra-runtime") -> dict[str, Any]:
    return trainer_manifests.train_job(
        "train", runtime, runtime_kind="TrainingRuntime", image=WORKLOAD_IMAGE, num_nodes=1
    )


def dra_aiperfjob() -> dict[str, Any]:
    """The good AIPerfJob whose two pods each claim :data:`CLAIM` (``podTemplate.extraPodSpec``)."""
    job = aiperfjob()
    job["spec"]["podTemplate"]["extraPodSpec"] = {
        "resourceClaims": [{"name": CLAIM, "resourceClaimTemplateName": CLAIM}]
    }
    return job


ONE = {"deviceClassName": DRIVER, "count": 1}
B200 = {
    "deviceClassName": DRIVER,
    "count": 1,
    "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "B200"'}}],
}


def _trainjob_row(name: str, note: str, exactly: dict[str, Any], covers: str) -> Scenario:
    return Scenario(
        name,
        note,
        dra_trainjob(),
        prereqs=[claim_template(exactly), training_runtime()],
        cluster_prereqs=[DEVICE_CLASS],
        covers=covers,
    )


def _aiperf_row(name: str, note: str, exactly: dict[str, Any], covers: str) -> Scenario:
    return Scenario(
        name,
        note,
        dra_aiperfjob(),
        prereqs=[tokenizer_configmap(), claim_template(exactly)],
        cluster_prereqs=[DEVICE_CLASS],
        covers=covers,
    )


DRA_SCENARIOS: list[Scenario] = [
    _trainjob_row(
        "good-dra-trainjob",
        f"TrainJob: its TrainingRuntime's pod claims 1 device of DeviceClass {DRIVER} (the node's DRA plugin "
        f"publishes {DEVICES} H100)",
        ONE,
        "good, DRA",
    ),
    _trainjob_row(
        "dra-trainjob-too-many",
        f"TrainJob: its runtime's claim asks {DEVICES * 2} devices of {DRIVER}; the node has {DEVICES}",
        {"deviceClassName": DRIVER, "count": DEVICES * 2},
        "DRA",
    ),
    _trainjob_row(
        "dra-trainjob-no-class",
        "TrainJob: its runtime's claim names DeviceClass nosuch.example.com, which does not exist",
        {"deviceClassName": "nosuch.example.com", "count": 1},
        "DRA",
    ),
    _aiperf_row(
        "good-dra-aiperf",
        f"AIPerfJob: podTemplate.extraPodSpec claims 1 device of {DRIVER} per pod (controller and worker: 2 of "
        f"{DEVICES})",
        ONE,
        "good, DRA",
    ),
    _aiperf_row(
        "dra-aiperf-b200",
        f"AIPerfJob: its pods' claim selects model B200 by CEL; the node's {DRIVER} devices are H100",
        B200,
        "DRA",
    ),
]


def needs_dra(scenarios: Sequence[Scenario]) -> bool:
    """Whether any of ``scenarios`` claims devices of the plugin's driver (the runner then starts it)."""
    return any(o is DEVICE_CLASS or o == DEVICE_CLASS for s in scenarios for o in s.cluster_prereqs)
