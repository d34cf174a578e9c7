"""Malformed AIPerfJobs and TrainJobs: every wrong shape is an AdapterError naming the field path.

Each case is a crash the /validate fuzzer (tests/test_fuzz_validate.py) once found inside an
adapter or a check (an exception that made the server fail open); the adapter now refuses
the object with a message that says which field is wrong and what it must be.
"""

from __future__ import annotations

import copy
import datetime
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeview import FakeView, meta

from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.manifests import split_runtimes
from webhook.preflight import evaluate
from webhook.results import Status
from webhook.workloads import build_workload
from webhook.workloads.base import AdapterError, Workload
from webhook.workloads.shape import integer

ORACLE = Path(__file__).parent / "oracle"
AIPERF = yaml.safe_load((ORACLE / "specs" / "multi-pod-template.yaml").read_text())
TRAINJOB = yaml.safe_load((ORACLE / "samples" / "trainjob.yaml").read_text())
RUNTIME = yaml.safe_load((ORACLE / "samples" / "clustertrainingruntime.yaml").read_text())
NODE_PATCH = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"


def _build(obj: dict[str, Any], runtime: dict[str, Any] = RUNTIME) -> Workload:
    wl = build_workload(obj, settings=Settings(), runtime_lookup=split_runtimes([copy.deepcopy(runtime)])[1])
    assert wl is not None
    return wl


def _mutated(base: dict[str, Any], mutate: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    mutate(obj)
    return obj


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting the field at a dotted path (`[i]` for list items)."""

    def mutate(obj: dict[str, Any]) -> None:
        parts = [int(p) if p.isdigit() else p for p in path.replace("[", ".").replace("]", "").split(".")]
        target = obj
        for p in parts[:-1]:
            target = target[p]
        target[parts[-1]] = value

    return mutate


def _pod_patch(**fields: Any) -> Callable[[dict[str, Any]], None]:
    """Replace the node job's pod spec in the sample's runtime patch."""
    return _set(NODE_PATCH + ".template.spec.template.spec", fields)


AIPERF_CASES = [
    # _ordered: AttributeError on a list item of benchmark.models
    (
        "model-item-list",
        _set("spec.benchmark.model", ["a", ["b"]]),
        "spec.benchmark.model[1] must be a string or a mapping, not list",
    ),
    (
        "models-int",
        _set("spec.benchmark.model", 7),
        "spec.benchmark.model must be a string, a list or a mapping, not int",
    ),
    (
        "models-items-dict",
        _set("spec.benchmark.model", {"items": {"name": "x"}}),
        "spec.benchmark.model.items must be a list, not dict",
    ),
    # endpoint check: AttributeError on a non-mapping endpoint
    (
        "endpoint-list",
        _set("spec.benchmark.endpoint", ["http://llm:8000"]),
        "spec.benchmark.endpoint must be a mapping, not list",
    ),
    (
        "endpoint-urls-item",
        _set("spec.benchmark.endpoint", {"urls": ["http://a", 3]}),
        "spec.benchmark.endpoint.urls[1] must be a string, not int",
    ),
    ("dataset-str", _set("spec.benchmark.dataset", "synthetic"), "spec.benchmark.dataset must be a mapping, not str"),
    (
        "dataset-prompts",
        _set("spec.benchmark.dataset.prompts", [128]),
        "spec.benchmark.dataset.prompts must be a mapping, not list",
    ),
    ("profiling-str", _set("spec.benchmark.profiling", "fast"), "spec.benchmark.profiling must be a mapping, not str"),
    (
        "phases-item",
        _set("spec.benchmark.phases", [{"name": "profiling", "kind": "profiling"}, 5]),
        "spec.benchmark.phases[1] must be a mapping, not int",
    ),
    (
        "phase-name",
        _set("spec.benchmark.profiling.name", ["p"]),
        "spec.benchmark.profiling.name must be a string, not list",
    ),
    (
        "concurrency",
        _set("spec.benchmark.profiling.concurrency", "many"),
        "spec.benchmark.profiling.concurrency must be an integer, not str",
    ),
    (
        "concurrency-huge",
        _set("spec.benchmark.profiling.concurrency", 2**64),
        "spec.benchmark.profiling.concurrency must be an integer from 0 to 2147483647, not 18446744073709551616",
    ),
    ("runtime-list", _set("spec.benchmark.runtime", [1]), "spec.benchmark.runtime must be a mapping, not list"),
    (
        "workers",
        _set("spec.benchmark.runtime", {"workers": {"n": 2}}),
        "spec.benchmark.runtime.workers must be an integer, not dict",
    ),
    ("artifacts", _set("spec.benchmark.artifacts", "all"), "spec.benchmark.artifacts must be a mapping, not str"),
    ("connections", _set("spec.connectionsPerWorker", "100"), "spec.connectionsPerWorker must be a number, not str"),
    ("ttl", _set("spec.ttlSecondsAfterFinished", 1.5), "spec.ttlSecondsAfterFinished must be an integer, not float"),
    ("variables", _set("spec.variables", ["a"]), "spec.variables must be a mapping, not list"),
    ("queue-name", _set("spec.scheduling.queueName", 5), "spec.scheduling.queueName must be a string, not int"),
    ("metadata-list", _set("metadata", []), "metadata must be a mapping, not list"),
    ("metadata-name", _set("metadata.name", 5), "metadata.name must be a string, not int"),
    ("metadata-label", _set("metadata.labels", {"team": 1}), "metadata.labels.team must be a string, not int"),
    (
        "metadata-annotations",
        _set("metadata.annotations", ["skip"]),
        "metadata.annotations must be a mapping, not list",
    ),
    # podTemplate parts copied into every pod: the checks walk them
    (
        "env-item",
        _set("spec.podTemplate.env", [{"name": "A", "value": "1"}, "B=2"]),
        "spec.podTemplate.env[1] must be a mapping, not str",
    ),
    (
        "env-secret-name",
        _set("spec.podTemplate.env[0].valueFrom.secretKeyRef.name", ["x"]),
        "spec.podTemplate.env[0].valueFrom.secretKeyRef.name must be a string, not list",
    ),
    (
        "node-selector",
        _set("spec.podTemplate.nodeSelector", ["pool=cpu"]),
        "spec.podTemplate.nodeSelector must be a mapping, not list",
    ),
    (
        "node-selector-value",
        _set("spec.podTemplate.nodeSelector", {"pool": 1}),
        "spec.podTemplate.nodeSelector.pool must be a string, not int",
    ),
    (
        "toleration-key",
        _set("spec.podTemplate.tolerations", [{"key": 1, "operator": "Exists"}]),
        "spec.podTemplate.tolerations[0].key must be a string, not int",
    ),
    (
        "affinity-expr",
        _set(
            "spec.podTemplate.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions",
            ["zone"],
        ),
        "spec.podTemplate.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0] must be a mapping, not str",
    ),
    (
        "init-container",
        _set("spec.podTemplate.initContainers", ["busybox"]),
        "spec.podTemplate.initContainers[0] must be a mapping, not str",
    ),
    (
        "init-resources",
        _set("spec.podTemplate.initContainers[0].resources", "1cpu"),
        "spec.podTemplate.initContainers[0].resources must be a mapping, not str",
    ),
    (
        "init-requests",
        _set("spec.podTemplate.initContainers[0].resources.requests", [1]),
        "spec.podTemplate.initContainers[0].resources.requests must be a mapping, not list",
    ),
    (
        "init-quantity",
        _set("spec.podTemplate.initContainers[0].resources.requests.cpu", "lots"),
        'spec.podTemplate.initContainers[0].resources.requests.cpu must be a Kubernetes quantity such as "500m", "2" or "1Gi", not \'lots\'',
    ),
    (
        "init-quantity-bool",
        _set("spec.podTemplate.initContainers[0].resources.requests.cpu", True),
        'spec.podTemplate.initContainers[0].resources.requests.cpu must be a quantity (a string such as "500m" or a number), not bool',
    ),
    (
        "volumes-item",
        _set("spec.podTemplate.volumes", [None]),
        "spec.podTemplate.volumes[0] must be a mapping, not null",
    ),
    (
        "pull-secrets",
        _set("spec.podTemplate.imagePullSecrets", "regcred"),
        "spec.podTemplate.imagePullSecrets must be a list, not str",
    ),
    (
        "labels",
        _set("spec.podTemplate.labels", {"team": ["b"]}),
        "spec.podTemplate.labels.team must be a string, not list",
    ),
    (
        "security",
        _set("spec.podTemplate.containerSecurityContext", {"capabilities": ["NET_ADMIN"]}),
        "spec.podTemplate.containerSecurityContext.capabilities must be a mapping, not list",
    ),
    (
        "grace",
        _set("spec.podTemplate.terminationGracePeriodSeconds", "30"),
        "spec.podTemplate.terminationGracePeriodSeconds must be an integer, not str",
    ),
    (
        "extra-pod-spec",
        _set("spec.podTemplate.extraPodSpec", {"overhead": {"cpu": {}}}),
        'spec.podTemplate.extraPodSpec.overhead.cpu must be a quantity (a string such as "500m" or a number), not dict',
    ),
    (
        "extra-init",
        _set("spec.podTemplate.extraPodSpec", {"initContainers": {"name": "x"}}),
        "spec.podTemplate.extraPodSpec.initContainers must be a list, not dict",
    ),
    (
        "snake-case-key",
        _set("spec.podTemplate", {"node_selector": "pool"}),
        "spec.podTemplate.node_selector must be a mapping, not str",
    ),
    # YAML (the CLI's input) allows non-string keys; _snake() raised TypeError on them
    (
        "yaml-int-key",
        _set("spec.benchmark.phases", {1: {"type": "concurrency"}}),
        "spec.benchmark.phases must have string keys, not int 1",
    ),
    (
        "yaml-date",
        _set("spec.benchmark.runtime", {"started": datetime.date(2026, 1, 15)}),
        "spec.benchmark.runtime.started must be a JSON value (string, number, boolean, list or mapping), not date",
    ),
    # max(nan, 1) is nan, and ceil(concurrency / nan) raised ValueError (the stdlib JSON parser accepts NaN)
    (
        "nan",
        _set("spec.connectionsPerWorker", float("nan")),
        "spec.connectionsPerWorker must be a finite number, not nan",
    ),
    (
        "too-deep",
        _set("spec.variables", functools.reduce(lambda inner, _: [inner], range(300), [])),
        # the first list 258 levels below the object (spec is 1), its path clipped to its head and tail
        ("spec.variables" + "[0]" * 256)[:60]
        + "…"
        + ("spec.variables" + "[0]" * 256)[-80:]
        + " is nested more than 256 levels below spec, which the AIPerf operator refuses "
        '("Configuration nested too deeply (>256 levels)") and no Kubernetes schema allows',
    ),
]


@pytest.mark.parametrize("mutate, message", [c[1:] for c in AIPERF_CASES], ids=[c[0] for c in AIPERF_CASES])
def test_malformed_aiperfjob(mutate: Callable[[dict[str, Any]], Any], message: str) -> None:
    with pytest.raises(AdapterError) as err:
        _build(_mutated(AIPERF, mutate))
    assert str(err.value) == message


TRAINJOB_CASES = [
    # trainjob.runtime.pod_spec / role_of, trainjob.jobset.render: AttributeError and TypeError on a patched replicated job
    ("patch-template-str", _set(NODE_PATCH + ".template", "pod"), f"{NODE_PATCH}.template must be a mapping, not str"),
    (
        "patch-metadata-list",
        _set(NODE_PATCH + ".template.metadata", ["x"]),
        f"{NODE_PATCH}.template.metadata must be a mapping, not list",
    ),
    (
        "patch-parallelism",
        _set(NODE_PATCH + ".template.spec.parallelism", [2]),
        f"{NODE_PATCH}.template.spec.parallelism must be an integer, not list",
    ),
    (
        "patch-replicated-jobs",
        _set("spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs", {"name": "node"}),
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs must be a list, not dict",
    ),
    (
        "patch-spec-str",
        _set("spec.runtimePatches[0].trainingRuntimeSpec", "x"),
        "spec.runtimePatches[0].trainingRuntimeSpec must be a mapping, not str",
    ),
    ("patch-item", _set("spec.runtimePatches", [None]), "spec.runtimePatches[0] must be a mapping, not null"),
    (
        "patch-containers",
        _pod_patch(containers="node"),
        f"{NODE_PATCH}.template.spec.template.spec.containers must be a list, not str",
    ),
    (
        "patch-env-item",
        _pod_patch(containers=[{"name": "node", "env": [1]}]),
        f"{NODE_PATCH}.template.spec.template.spec.containers[0].env[0] must be a mapping, not int",
    ),
    (
        "patch-resources-value",
        _pod_patch(containers=[{"name": "node", "resources": {"limits": {"cpu": ["1"]}}}]),
        f'{NODE_PATCH}.template.spec.template.spec.containers[0].resources.limits.cpu must be a quantity (a string such as "500m" or a number), not list',
    ),
    (
        "patch-tolerations",
        _pod_patch(tolerations={"key": "gpu"}),
        f"{NODE_PATCH}.template.spec.template.spec.tolerations must be a list, not dict",
    ),
    (
        "patch-node-selector",
        _pod_patch(nodeSelector="gpu"),
        f"{NODE_PATCH}.template.spec.template.spec.nodeSelector must be a mapping, not str",
    ),
    (
        "trainer-resources",
        _set("spec.trainer.resourcesPerNode", {"requests": "8 gpus"}),
        "spec.trainer.resourcesPerNode.requests must be a mapping, not str",
    ),
    (
        "trainer-quantity",
        _set("spec.trainer.resourcesPerNode.requests.cpu", "32 cores"),
        'spec.trainer.resourcesPerNode.requests.cpu must be a Kubernetes quantity such as "500m", "2" or "1Gi", not \'32 cores\'',
    ),
    ("trainer-env", _set("spec.trainer.env", {"HF_TOKEN": "x"}), "spec.trainer.env must be a list, not dict"),
    ("trainer-num-nodes", _set("spec.trainer.numNodes", "4"), "spec.trainer.numNodes must be an integer, not str"),
    ("trainer-image", _set("spec.trainer.image", {"name": "x"}), "spec.trainer.image must be a string, not dict"),
    (
        "trainer-command",
        _set("spec.trainer.command", "python train.py"),
        "spec.trainer.command must be a list, not str",
    ),
    (
        "initializer-secret",
        _set("spec.initializer.model.secretRef", "hf-token"),
        "spec.initializer.model.secretRef must be a mapping, not str",
    ),
    ("runtime-ref-name", _set("spec.runtimeRef.name", 1), "spec.runtimeRef.name must be a string, not int"),
    ("suspend", _set("spec.suspend", "yes"), "spec.suspend must be a boolean, not str"),
    ("metadata-labels", _set("metadata.labels", ["team-a-queue"]), "metadata.labels must be a mapping, not list"),
    ("metadata-annotation", _set("metadata.annotations", {"a": 1}), "metadata.annotations.a must be a string, not int"),
    ("spec-null", _set("spec", None), "spec must be a mapping, not null"),
]


@pytest.mark.parametrize("mutate, message", [c[1:] for c in TRAINJOB_CASES], ids=[c[0] for c in TRAINJOB_CASES])
def test_malformed_trainjob(mutate: Callable[[dict[str, Any]], Any], message: str) -> None:
    with pytest.raises(AdapterError) as err:
        _build(_mutated(TRAINJOB, mutate))
    assert str(err.value) == message


def test_secret_refs_are_validated_even_without_the_runtime() -> None:
    obj = _mutated(
        TRAINJOB, _set("spec.trainer.env", [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": "hf-token"}}])
    )
    with pytest.raises(AdapterError) as err:
        build_workload(obj, settings=Settings())  # offline, runtime unknown
    assert str(err.value) == "spec.trainer.env[0].valueFrom.secretKeyRef must be a mapping, not str"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            _set("spec.mlPolicy.numNodes", "2"),
            'ClusterTrainingRuntime "torch-distributed" spec.mlPolicy.numNodes must be an integer, not str',
        ),
        (
            _set("spec.template.spec.replicatedJobs[1].template", []),
            'ClusterTrainingRuntime "torch-distributed" spec.template.spec.replicatedJobs[1].template must be a mapping, not list',
        ),
    ],
)
def test_malformed_runtime_names_the_runtime(mutate: Callable[[dict[str, Any]], Any], message: str) -> None:
    with pytest.raises(AdapterError) as err:
        _build(copy.deepcopy(TRAINJOB), _mutated(RUNTIME, mutate))
    assert str(err.value) == message


@pytest.mark.parametrize(
    "value, expected",
    [
        ("12", 12),
        (" -3 ", -3),
        (3.0, 3),
        ("+-5", "p must be an integer, not str"),
        ("²", "p must be an integer, not str"),
        ("1" * 30, "p must be an integer, not str"),
        (2.5, "p must be an integer, not float"),
        (True, "p must be an integer, not bool"),
        ("-11", "p must be an integer from -10 to 2147483647, not -11"),
    ],
)
def test_lax_integers_read_like_pydantic(value: Any, expected: int | str) -> None:
    """AIPerf's counts accept numeric strings and integral floats; int('²') used to raise ValueError."""
    if isinstance(expected, int):
        assert integer(value, "p", lax=True, minimum=-10) == expected
    else:
        with pytest.raises(AdapterError) as err:
            integer(value, "p", lax=True, minimum=-10)
        assert str(err.value) == expected


# ----------------------------------------------------------------------------- null means absent


def test_null_fields_are_absent_not_a_crash() -> None:
    """`resources: null` used to reach the quota check's setdefault() as None."""
    obj = _mutated(AIPERF, _set("spec.podTemplate.initContainers[0].resources", None))
    obj["spec"]["podTemplate"]["nodeSelector"] = {"pool": "cpu", "zone": None}
    obj["spec"]["podTemplate"]["tolerations"] = None
    wl = _build(obj)
    controller = wl.pod_groups[0].pod_spec
    assert controller["initContainers"][0]["name"] == "prep" and "resources" not in controller["initContainers"][0]
    assert controller["nodeSelector"] == {"pool": "cpu"} and "tolerations" not in controller


def test_a_null_in_a_runtime_patch_still_deletes() -> None:
    """Strategic merge: null removes the runtime's field; the merged pod spec carries no nulls."""
    runtime = copy.deepcopy(RUNTIME)
    node_pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    node_pod["nodeSelector"] = {"pool": "a100"}
    obj = _mutated(
        TRAINJOB, _pod_patch(nodeSelector=None, containers=[{"name": "node", "resources": None, "workingDir": None}])
    )
    node = _build(obj, runtime).pod_groups[1]
    assert "nodeSelector" not in node.pod_spec
    assert None not in node.pod_spec["containers"][0].values()


async def test_checks_run_on_null_fields_without_raising() -> None:
    """LimitRange defaults and quotas over a container whose resources were null: verdicts, no check error."""
    obj = _mutated(AIPERF, _set("spec.podTemplate.initContainers[0].resources", None))
    view = FakeView(
        {
            "namespaces": [{"metadata": meta("team-b")}],
            "limitranges": [
                {"metadata": meta("lr", "team-b"), "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}}
            ],
            "resourcequotas": [
                {"metadata": meta("q", "team-b"), "spec": {"hard": {"limits.cpu": "1000"}}, "status": {"used": {}}}
            ],
        }
    )
    ev = await evaluate(obj, settings=Settings(), deadline=Deadline(5), view=view)
    quota = [r for r in ev.results.checks if r.name == "Resource Quotas"]
    assert quota and quota[0].status is Status.PASS, quota
    assert not [r for r in ev.results.checks if "Check failed with error" in r.message]


# ----------------------------------------------------------------------------- sizes the operator cannot render


def test_worker_pod_with_too_many_containers_is_a_render_error() -> None:
    obj = _mutated(AIPERF, _set("spec.benchmark.runtime", {"workers": 2000, "workersPerPod": 2000}))
    wl = _build(obj)
    assert wl.pod_groups == [] and wl.incomplete_reason == "the AIPerf operator cannot render this AIPerfJob"
    assert wl.render_errors == [
        "The AIPerf operator would refuse to render this job: each worker pod would hold 4001 containers "
        "(1 worker-pod-manager + 2000 worker(s) + 2000 record processor(s)), about 2 KB each, so the JobSet cannot fit "
        "the apiserver's 1.5 MiB object limit. Fix: lower spec.benchmark.runtime.workersPerPod / recordProcessorsPerPod "
        "so a pod holds at most 1000 containers."
    ]


def test_overflowing_record_processor_cpu_is_a_render_error() -> None:
    """float('1e999') is inf; int(round(inf)) raised OverflowError out of the adapter."""
    obj = _mutated(
        AIPERF, _set("spec.podTemplate.env", [{"name": "AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST", "value": "1e999"}])
    )
    wl = _build(obj)
    assert wl.render_errors == [
        "The AIPerf operator would refuse to render this job: AIPERF_K8S_RECORD_PROCESSOR_CPU_REQUEST is not a valid "
        "Kubernetes CPU quantity: '1e999'. Fix: use a value like '500m' or '2'."
    ]
