"""TrainJob + (Cluster)TrainingRuntime → the JobSet pod groups Trainer v2.3 builds."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from webhook.config import Settings
from webhook.manifests import split_runtimes
from webhook.workloads.base import AdapterError
from webhook.workloads.podspec import pod_limits, pod_requests, secret_refs
from webhook.workloads.trainjob import build, strategic_merge

SAMPLES = Path(__file__).parent / "oracle" / "samples"  # copies of the design notes' samples

TRAINJOB = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
RUNTIME = yaml.safe_load((SAMPLES / "clustertrainingruntime.yaml").read_text())


def _lookup(*runtimes):
    return split_runtimes(list(runtimes))[1]


def _build(tj=TRAINJOB, *runtimes):
    return build(copy.deepcopy(tj), settings=Settings(), runtime_lookup=_lookup(*(runtimes or (RUNTIME,))))


def test_sample_pod_groups():
    wl = _build()
    assert wl.incomplete_reason is None
    assert [(g.name, g.pods, g.role) for g in wl.pod_groups] == [("model-initializer", 1, "model-initializer"), ("node", 4, "trainer")]
    init, node = wl.pod_groups
    c = node.pod_spec["containers"][0]
    assert c["image"] == "ghcr.io/acme/llama-ft:1.4.2"
    # resourcesPerNode merged per key into node's runtime resources
    assert pod_requests(node.pod_spec) == {"cpu": Decimal(32), "memory": Decimal(256 * 1024**3), "nvidia.com/gpu": Decimal(8)}
    assert pod_limits(node.pod_spec) == {"nvidia.com/gpu": Decimal(8)}
    # the runtime patch added pull secrets and the node selector
    assert node.pod_spec["imagePullSecrets"] == [{"name": "ghcr-pull"}]
    assert node.pod_spec["nodeSelector"] == {"pool": "gpu-h100"}
    env = {e["name"]: e for e in c["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}
    assert env["PET_NNODES"]["value"] == "4" and env["PET_MASTER_ADDR"]["value"] == "llama-ft-node-0-0.llama-ft"
    ic = init.pod_spec["containers"][0]
    assert {"name": "STORAGE_URI", "value": "hf://meta-llama/Llama-3.2-1B"} in ic["env"]
    assert ic["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    assert [(r.name, r.key, r.optional) for r in secret_refs(init.pod_spec)] == [("hf-token", None, False)]
    assert wl.queue_name == "team-a-queue"
    assert wl.managed_secrets == {"llama-ft-mpi-ssh-auth"}
    assert wl.managed_by == "trainer.kubeflow.org/trainjob-controller"
    js = wl.derived["jobSet"]
    assert js["metadata"]["name"] == "llama-ft" and js["spec"]["suspend"] is False
    rj = {r["name"]: r for r in js["spec"]["replicatedJobs"]}
    assert list(rj) == ["model-initializer", "node"]
    assert rj["node"]["template"]["spec"]["parallelism"] == rj["node"]["template"]["spec"]["completions"] == 4
    assert rj["node"]["dependsOn"] == [{"name": "model-initializer", "status": "Complete"}]
    # the runtime object itself is untouched
    assert "imagePullSecrets" not in RUNTIME["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]


def test_num_nodes_from_ml_policy_when_trainer_does_not_set_it():
    tj = copy.deepcopy(TRAINJOB)
    del tj["spec"]["trainer"]["numNodes"]
    rt = copy.deepcopy(RUNTIME)
    rt["spec"]["mlPolicy"]["numNodes"] = 3
    assert [g.pods for g in _build(tj, rt).pod_groups] == [1, 3]


def test_mpi_launcher_rule():
    rt = copy.deepcopy(RUNTIME)
    rt["spec"]["mlPolicy"] = {"numNodes": 1, "mpi": {"runLauncherAsNode": True}}
    launcher = {
        "name": "launcher",
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "node", "image": "mpi:1"}]}}}},
    }
    rt["spec"]["template"]["spec"]["replicatedJobs"].insert(1, launcher)
    wl = _build(TRAINJOB, rt)
    assert [(g.name, g.pods) for g in wl.pod_groups] == [("model-initializer", 1), ("launcher", 1), ("node", 3)]
    # the launcher runs as a node: it gets the trainer image and resources too
    assert wl.pod_groups[1].pod_spec["containers"][0]["image"] == "ghcr.io/acme/llama-ft:1.4.2"
    rt["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    assert [g.pods for g in _build(TRAINJOB, rt).pod_groups] == [1, 1, 4]


def test_missing_runtime_keeps_own_secret_refs():
    wl = build(copy.deepcopy(TRAINJOB), settings=Settings(), runtime_lookup=_lookup())
    assert wl.pod_groups == [] and wl.derived == {}
    assert wl.incomplete_reason == 'ClusterTrainingRuntime "torch-distributed" was not found (offline: put it in the same input file)'
    assert wl.extra_secret_refs == [
        ("hf-token", "token", False, "spec.trainer.env[HF_TOKEN]"),
        ("hf-token", None, False, "spec.initializer.model.secretRef"),
    ]
    wl = build(copy.deepcopy(TRAINJOB), settings=Settings())
    assert wl.incomplete_reason == 'ClusterTrainingRuntime "torch-distributed" was not available (offline: put it in the same input file)'


def test_namespaced_runtime_is_looked_up_in_the_job_namespace():
    tj = copy.deepcopy(TRAINJOB)
    tj["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    rt = copy.deepcopy(RUNTIME)
    rt["kind"] = "TrainingRuntime"
    rt["metadata"]["namespace"] = "other"
    wl = _build(tj, rt)
    assert wl.incomplete_reason == 'TrainingRuntime "torch-distributed" in namespace "team-a" was not found (offline: put it in the same input file)'
    rt["metadata"]["namespace"] = "team-a"
    assert _build(tj, rt).incomplete_reason is None


def test_strategic_merge_rules():
    base = {
        "containers": [{"name": "a", "env": [{"name": "X", "value": "1"}], "image": "i"}],
        "imagePullSecrets": [{"name": "one"}],
        "nodeSelector": {"a": "1"},
        "tolerations": [{"key": "k1"}],
    }
    patch = {
        "containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "3"}]}, {"name": "b"}],
        "imagePullSecrets": [{"name": "two"}],
        "nodeSelector": {"b": "2"},
        "tolerations": [{"key": "k2"}],
    }
    assert strategic_merge(base, patch) == {
        "containers": [{"name": "a", "env": [{"name": "X", "value": "3"}, {"name": "Y", "value": "2"}], "image": "i"}, {"name": "b"}],
        "imagePullSecrets": [{"name": "one"}, {"name": "two"}],
        "nodeSelector": {"a": "1", "b": "2"},
        "tolerations": [{"key": "k2"}],
    }


@pytest.mark.parametrize(
    "spec, message",
    [([], "spec must be a mapping, not list"), ({"trainer": "x"}, "spec.trainer must be a mapping"), ({"runtimePatches": {}}, "spec.runtimePatches must be a list")],
)
def test_unreadable_trainjobs(spec, message):
    with pytest.raises(AdapterError, match=message):
        build({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "x"}, "spec": spec}, settings=Settings())
