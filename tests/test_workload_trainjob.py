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
    assert [(g.name, g.pods, g.role) for g in wl.pod_groups] == [
        ("model-initializer", 1, "model-initializer"),
        ("node", 4, "trainer"),
    ]
    init, node = wl.pod_groups
    c = node.pod_spec["containers"][0]
    assert c["image"] == "ghcr.io/acme/llama-ft:1.4.2"
    # resourcesPerNode merged per key into node's runtime resources
    assert pod_requests(node.pod_spec) == {
        "cpu": Decimal(32),
        "memory": Decimal(256 * 1024**3),
        "nvidia.com/gpu": Decimal(8),
    }
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
    assert wl.managed_secrets == set()  # a torch runtime: Trainer creates no SSH Secret
    # ... but it applies a snapshot of the runtime for every TrainJob (pkg/runtime/core/snapshot.go)
    assert wl.derived["runtimeSnapshot"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "llama-ft-runtime-snapshot", "namespace": wl.namespace},
    }
    assert wl.managed_by == "trainer.kubeflow.org/trainjob-controller"
    js = wl.derived["jobSet"]
    assert js["metadata"]["name"] == "llama-ft" and js["spec"]["suspend"] is False
    rj = {r["name"]: r for r in js["spec"]["replicatedJobs"]}
    assert list(rj) == ["model-initializer", "node"]
    assert rj["node"]["template"]["spec"]["parallelism"] == rj["node"]["template"]["spec"]["completions"] == 4
    assert rj["node"]["dependsOn"] == [{"name": "model-initializer", "status": "Complete"}]
    # the runtime object itself is untouched
    assert (
        "imagePullSecrets"
        not in RUNTIME["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    )


def test_num_nodes_from_ml_policy_when_trainer_does_not_set_it():
    tj = copy.deepcopy(TRAINJOB)
    del tj["spec"]["trainer"]["numNodes"]
    rt = copy.deepcopy(RUNTIME)
    rt["spec"]["mlPolicy"]["numNodes"] = 3
    assert [g.pods for g in _build(tj, rt).pod_groups] == [1, 3]


def _rj(name, role, containers, **extra):
    tmpl = {"spec": {"template": {"spec": {"containers": containers, **extra.pop("pod", {})}}}}
    if role:
        tmpl["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": role}}
    tmpl["spec"].update(extra.pop("job", {}))
    return {"name": name, "template": tmpl, **extra}


def _rt(name, ml, jobs, **spec):
    body = {"template": {"spec": {"replicatedJobs": jobs, **spec}}}
    if ml is not None:
        body["mlPolicy"] = ml
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": body,
    }


def _tj(runtime, **spec):
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "team-a"},
        "spec": {"runtimeRef": {"name": runtime}, **spec},
    }


# Trainer's deepspeed-distributed (mlx-distributed has the same shape): `node` runs sshd workers,
# `launcher` carries the trainer label and, with runLauncherAsNode, is one of the nodes.
DEEPSPEED = _rt(
    "deepspeed-distributed",
    {"numNodes": 1, "mpi": {"numProcPerNode": 1, "sshAuthMountPath": "/home/mpiuser/.ssh", "runLauncherAsNode": True}},
    [
        _rj("node", None, [{"name": "node", "image": "ghcr.io/kubeflow/trainer/deepspeed-runtime"}]),
        _rj(
            "launcher",
            "trainer",
            [{"name": "node", "image": "ghcr.io/kubeflow/trainer/deepspeed-runtime"}],
            dependsOn=[{"name": "node", "status": "Ready"}],
        ),
    ],
)
GPUS = {"requests": {"cpu": "8", "nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}


def test_mpi_deepspeed_pod_counts_and_gpus():
    """T:pkg/runtime/framework/plugins/mpi/mpi.go: numNodes sizes the job named `node` (minus the
    launcher when it runs as a node); the launcher keeps the runtime's numNodes."""
    tj = _tj("deepspeed-distributed", trainer={"numNodes": 4, "image": "acme/ds:1", "resourcesPerNode": GPUS})
    wl = _build(tj, DEEPSPEED)
    assert [(g.name, g.pods, g.role) for g in wl.pod_groups] == [("node", 3, "node"), ("launcher", 1, "trainer")]
    node, launcher = wl.pod_groups
    # resourcesPerNode reaches both: the trainer job and, with runLauncherAsNode, the job named node
    assert (
        pod_requests(node.pod_spec)["nvidia.com/gpu"] == pod_requests(launcher.pod_spec)["nvidia.com/gpu"] == Decimal(4)
    )
    assert sum(g.pods * pod_requests(g.pod_spec)["nvidia.com/gpu"] for g in wl.pod_groups) == Decimal(16)
    # the image goes to the trainer job only
    assert launcher.pod_spec["containers"][0]["image"] == "acme/ds:1"
    assert node.pod_spec["containers"][0]["image"] == "ghcr.io/kubeflow/trainer/deepspeed-runtime"
    assert launcher.depends_on == [("node", "Ready")] and node.depends_on == []
    # the SSH Secret on both, mounted where the runtime says; the hostfile on the launcher
    assert {v["name"] for v in node.pod_spec["volumes"]} == {"mpi-ssh-auth"}
    assert {v["name"] for v in launcher.pod_spec["volumes"]} == {"mpi-ssh-auth", "mpi-hostfile"}
    assert {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"} in node.pod_spec["containers"][0]["volumeMounts"]
    assert [r.name for r in secret_refs(node.pod_spec)] == ["tj-mpi-ssh-auth"] * 3
    assert wl.managed_secrets == {"tj-mpi-ssh-auth"}
    assert wl.derived["configMap"]["metadata"]["name"] == "tj-mpi-hostfile"
    # slots: the runtime's numProcPerNode 1 becomes the 4 GPUs per node
    assert wl.derived["configMap"]["data"]["hostfile"].splitlines() == [
        "tj-node-0-0.tj slots=4",
        "tj-node-0-1.tj slots=4",
        "tj-node-0-2.tj slots=4",
        "tj-launcher-0-0.tj slots=4",
    ]
    env = {e["name"]: e.get("value") for e in launcher.pod_spec["containers"][0]["env"]}
    assert env["OMPI_MCA_orte_set_default_slots"] == "4"
    # trainer.numProcPerNode wins
    tj["spec"]["trainer"]["numProcPerNode"] = 2
    assert _build(tj, DEEPSPEED).derived["configMap"]["data"]["hostfile"].splitlines()[0] == "tj-node-0-0.tj slots=2"


def test_mpi_without_num_nodes_keeps_template_counts():
    # no numNodes on the TrainJob: `node` keeps its parallelism, the launcher gets the runtime's numNodes
    rt = copy.deepcopy(DEEPSPEED)
    rt["spec"]["mlPolicy"]["numNodes"] = 2
    assert [g.pods for g in _build(_tj("deepspeed-distributed"), rt).pod_groups] == [1, 2]
    rt["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    assert [g.pods for g in _build(_tj("deepspeed-distributed", trainer={"numNodes": 4}), rt).pod_groups] == [4, 2]
    # without runLauncherAsNode resourcesPerNode reaches the trainer job only
    wl = _build(_tj("deepspeed-distributed", trainer={"numNodes": 4, "resourcesPerNode": GPUS}), rt)
    assert "nvidia.com/gpu" not in pod_requests(wl.pod_groups[0].pod_spec)


def test_runtime_without_ml_policy_keeps_parallelism():
    rt = _rt(
        "plain",
        None,
        [
            _rj(
                "node",
                "trainer",
                [{"name": "node", "image": "x", "resources": {"limits": {"cpu": "1"}}}],
                job={"parallelism": 3},
            ),
            _rj("side", None, [{"name": "s", "image": "y"}], job={"parallelism": 2}, replicas=2),
        ],
    )
    wl = _build(_tj("plain", trainer={"resourcesPerNode": GPUS}), rt)
    assert [(g.name, g.pods) for g in wl.pod_groups] == [("node", 3), ("side", 4)]
    # T:pkg/runtime/core/trainingruntime.go: resourcesPerNode needs an mlPolicy
    assert pod_limits(wl.pod_groups[0].pod_spec) == {"cpu": Decimal(1)}
    # plainml: numNodes still sizes the trainer job
    assert [g.pods for g in _build(_tj("plain", trainer={"numNodes": 5}), rt).pod_groups] == [5, 4]
    assert wl.managed_secrets == set() and "configMap" not in wl.derived


def test_trainer_env_replaces_runtime_entry_whole():
    rt = copy.deepcopy(RUNTIME)
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    node["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "runtime-secret", "key": "k"}}},
        {"name": "MODE", "value": "fast"},
    ]
    tj = copy.deepcopy(TRAINJOB)
    tj["spec"]["trainer"]["env"] = [
        {"name": "TOKEN", "value": "literal"},
        {"name": "MODE", "valueFrom": {"secretKeyRef": {"name": "mode-secret", "key": "m"}}},
    ]
    env = {e["name"]: e for e in _build(tj, rt).pod_groups[1].pod_spec["containers"][0]["env"]}
    assert env["TOKEN"] == {"name": "TOKEN", "value": "literal"}
    assert env["MODE"] == {"name": "MODE", "valueFrom": {"secretKeyRef": {"name": "mode-secret", "key": "m"}}}


def test_flux_adds_installer_init_container_and_volumes():
    rt = _rt("flux", {"numNodes": 1, "flux": {}}, [_rj("node", "trainer", [{"name": "node", "image": "ubuntu:jammy"}])])
    wl = _build(
        _tj("flux", trainer={"numNodes": 2, "env": [{"name": "FLUX_VIEW_IMAGE", "value": "acme/flux-view:1"}]}), rt
    )
    (g,) = wl.pod_groups
    assert g.pods == 2
    assert [(c["name"], c["image"]) for c in g.pod_spec["initContainers"]] == [("flux-installer", "acme/flux-view:1")]
    assert {v["name"] for v in g.pod_spec["volumes"]} == {
        "spack-install",
        "flux-install",
        "tj-flux-entrypoint",
        "shared-memory",
        "flux-curve",
    }
    assert (
        wl.managed_secrets == {"tj-flux-curve"} and wl.derived["configMap"]["metadata"]["name"] == "tj-flux-entrypoint"
    )
    wl = _build(_tj("flux", trainer={}), rt)
    assert (
        wl.pod_groups[0].pod_spec["initContainers"][0]["image"]
        == "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
    )
    assert wl.render_errors == []


def test_flux_without_trainer_is_a_render_error():
    rt = _rt("flux", {"numNodes": 1, "flux": {}}, [_rj("node", "trainer", [{"name": "node", "image": "ubuntu:jammy"}])])
    assert _build(_tj("flux"), rt).render_errors == [
        'Kubeflow Trainer v2.3 cannot render a TrainJob on the Flux runtime ClusterTrainingRuntime "flux" without '
        "spec.trainer (its Flux plugin reads spec.trainer), so no JobSet or pod is ever created. "
        "Fix: set spec.trainer, e.g. trainer: {numNodes: 1}."
    ]


def test_volume_claim_policies_add_pvc_volumes():
    """J:pkg/controllers/volume_claim_policy.go: every Job mounting a template gets its PVC volume."""
    mount = [{"name": "initializer", "mountPath": "/workspace"}]
    rt = _rt(
        "torchtune",
        {"numNodes": 1, "torch": {}},
        [
            _rj(
                "model-initializer",
                "model-initializer",
                [{"name": "model-initializer", "image": "i", "volumeMounts": mount}],
            ),
            _rj("node", "trainer", [{"name": "node", "image": "t", "volumeMounts": mount}]),
            _rj("other", None, [{"name": "o", "image": "o"}]),
        ],
        volumeClaimPolicies=[
            {"templates": [{"metadata": {"name": "initializer"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}
        ],
    )
    wl = _build(_tj("torchtune"), rt)
    pvc = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tj"}}
    assert [g.pod_spec.get("volumes") for g in wl.pod_groups] == [[pvc], [pvc], None]
    assert wl.derived["jobSet"]["spec"]["volumeClaimPolicies"][0]["templates"][0]["metadata"]["name"] == "initializer"


def test_missing_runtime_keeps_own_secret_refs():
    wl = build(copy.deepcopy(TRAINJOB), settings=Settings(), runtime_lookup=_lookup())
    assert wl.pod_groups == [] and wl.derived == {}
    assert (
        wl.incomplete_reason
        == 'ClusterTrainingRuntime "torch-distributed" was not found (offline: put it in the same input file)'
    )
    assert wl.extra_secret_refs == [
        ("hf-token", "token", False, "spec.trainer.env[HF_TOKEN]"),
        ("hf-token", None, False, "spec.initializer.model.secretRef"),
    ]
    wl = build(copy.deepcopy(TRAINJOB), settings=Settings())
    assert (
        wl.incomplete_reason
        == 'ClusterTrainingRuntime "torch-distributed" was not available (offline: put it in the same input file)'
    )


def test_namespaced_runtime_is_looked_up_in_the_job_namespace():
    tj = copy.deepcopy(TRAINJOB)
    tj["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    rt = copy.deepcopy(RUNTIME)
    rt["kind"] = "TrainingRuntime"
    rt["metadata"]["namespace"] = "other"
    wl = _build(tj, rt)
    assert (
        wl.incomplete_reason
        == 'TrainingRuntime "torch-distributed" in namespace "team-a" was not found (offline: put it in the same input file)'
    )
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
        "containers": [
            {"name": "a", "env": [{"name": "X", "value": "3"}, {"name": "Y", "value": "2"}], "image": "i"},
            {"name": "b"},
        ],
        "imagePullSecrets": [{"name": "one"}, {"name": "two"}],
        "nodeSelector": {"a": "1", "b": "2"},
        "tolerations": [{"key": "k2"}],
    }


@pytest.mark.parametrize(
    "spec, message",
    [
        ([], "spec must be a mapping, not list"),
        ({"trainer": "x"}, "spec.trainer must be a mapping"),
        ({"runtimePatches": {}}, "spec.runtimePatches must be a list"),
    ],
)
def test_unreadable_trainjobs(spec, message):
    with pytest.raises(AdapterError, match=message):
        build(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "x"},
                "spec": spec,
            },
            settings=Settings(),
        )


def test_cached_runtime_spec_is_never_changed_by_rendering():
    # a cluster runtime (resourceVersion set) is validated once and shared between requests
    rt = _rt(
        "flux",
        {"numNodes": 1, "flux": {}},
        [_rj("node", "trainer", [{"name": "node", "image": "u", "env": [{"name": "A", "value": "1"}]}])],
    )
    rt["metadata"]["resourceVersion"] = "7"
    before = copy.deepcopy(rt)
    tj = _tj(
        "flux",
        trainer={"numNodes": 2, "env": [{"name": "A", "value": "2"}], "resourcesPerNode": {"limits": {"cpu": "2"}}},
    )
    first, second = (_build(tj, rt).pod_groups[0].pod_spec for _ in range(2))
    assert first == second and [c["name"] for c in second["initContainers"]] == ["flux-installer"]
    assert rt == before


def test_replicas_forced_only_for_trainer_and_initializer_jobs():
    rt = _rt(
        "r",
        {"numNodes": 1, "torch": {}},
        [
            _rj("node", "trainer", [{"name": "node", "image": "t"}], replicas=3),
            _rj("helper", "something-else", [{"name": "h", "image": "h"}], replicas=2),
        ],
    )
    wl = _build(_tj("r"), rt)
    assert [(g.name, g.pods) for g in wl.pod_groups] == [("node", 1), ("helper", 2)]
    assert [rj["replicas"] for rj in wl.derived["jobSet"]["spec"]["replicatedJobs"]] == [1, 2]


def _env_of(wl, group=0):
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in wl.pod_groups[group].pod_spec["containers"][0].get("env") or []
    }


def test_framework_env_of_torch_jax_xgboost():
    node = [{"name": "node", "image": "x"}]
    torch = _rt("t", {"numNodes": 1, "torch": {}}, [_rj("node", "trainer", node)])
    env = _env_of(_build(_tj("t", trainer={"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "6"}}}), torch))
    # `auto` without GPUs becomes the CPUs per node (T:…/plugins/torch/torch.go)
    assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["PET_MASTER_ADDR"]) == ("2", "6", "tj-node-0-0.tj")
    assert _env_of(_build(_tj("t", trainer={"resourcesPerNode": GPUS}), torch))["PET_NPROC_PER_NODE"] == "auto"
    jax = _rt("j", {"numNodes": 1, "jax": {}}, [_rj("node", "trainer", node)])
    env = _env_of(_build(_tj("j", trainer={"numNodes": 3}), jax))
    assert (env["JAX_NUM_PROCESSES"], env["JAX_COORDINATOR_ADDRESS"]) == ("3", "tj-node-0-0.tj:29500")
    xgb = _rt("x", {"numNodes": 1, "xgboost": {}}, [_rj("node", "trainer", node)])
    # one worker per GPU
    assert _env_of(_build(_tj("x", trainer={"numNodes": 2, "resourcesPerNode": GPUS}), xgb))["DMLC_NUM_WORKER"] == "8"
    assert _env_of(_build(_tj("x", trainer={"numNodes": 2}), xgb))["DMLC_NUM_WORKER"] == "2"
    # no spec.trainer: the plugins set nothing
    assert _env_of(_build(_tj("x"), xgb)) == {}
