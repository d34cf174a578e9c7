"""The adapters pass DRA claims on as upstream does: a TrainJob's runtime template keeps its
spec.resourceClaims (Trainer v2.3 copies the runtime's JobSet template; JobSet v0.12 passes the Job's
pod template unchanged) and resourcesPerNode.claims merge by name into the `node` container
(T:pkg/util/trainingruntime/trainingruntime.go MergeResourceRequirements, patchMergeKey name); an
AIPerfJob's podTemplate.extraPodSpec.resourceClaims is merged into every pod (AIPerf 0.13.0
kubernetes/jobset_specs.py: extra_pod_spec update; containers cannot be set there)."""

from __future__ import annotations

import copy

import yaml

from tests.test_workload_trainjob import RUNTIME, SAMPLES, TRAINJOB, _build
from webhook.config import Settings
from webhook.workloads.aiperf import build as build_aiperf
from webhook.workloads.podspec import PodClaim, resource_claims


def test_trainjob_runtime_claims_and_resources_per_node_claims() -> None:
    rt = copy.deepcopy(RUNTIME)
    node_job = next(j for j in rt["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
    pod = node_job["template"]["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "h100x8"}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    tj = copy.deepcopy(TRAINJOB)
    tj["spec"]["trainer"]["resourcesPerNode"]["claims"] = [{"name": "gpus", "request": "gpu"}]
    wl = _build(tj, rt)
    node = next(g for g in wl.pod_groups if g.name == "node")
    assert resource_claims(node.pod_spec) == [PodClaim("gpus", None, "h100x8", ("node/gpu",))]
    init = next(g for g in wl.pod_groups if g.name == "model-initializer")
    assert resource_claims(init.pod_spec) == []


def test_aiperfjob_extra_pod_spec_claims_reach_every_pod() -> None:
    spec = yaml.safe_load((SAMPLES / "aiperfjob.yaml").read_text())
    spec["spec"]["podTemplate"]["extraPodSpec"] = {"resourceClaims": [{"name": "nic", "resourceClaimName": "rdma"}]}
    wl = build_aiperf(spec, settings=Settings())
    assert wl.pod_groups
    for g in wl.pod_groups:
        assert resource_claims(g.pod_spec) == [PodClaim("nic", "rdma", None, ())]
