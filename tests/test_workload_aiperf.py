"""The AIPerfJob adapter against AIPerf 0.13.0's own renderer (goldens in tests/oracle/golden).

Regenerate the goldens with tests/oracle/generate.py (see its docstring); the live variant
is tests/oracle/test_oracle_live.py.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from webhook.config import Settings
from webhook.workloads import build_workload
from webhook.workloads.aiperf import build
from webhook.workloads.base import AdapterError
from webhook.workloads.podspec import pod_limits, pod_requests, secret_refs

ORACLE = Path(__file__).parent / "oracle"
CASES = sorted(p.stem for p in (ORACLE / "specs").glob("*.yaml"))


def _load(case: str):
    spec = yaml.safe_load((ORACLE / "specs" / f"{case}.yaml").read_text())
    golden = json.loads((ORACLE / "golden" / f"{case}.json").read_text())
    return spec, golden


def _build(case: str):
    spec, golden = _load(case)
    return build(spec, settings=Settings(aiperfEnv=golden["aiperfEnv"])), golden


@pytest.fixture(autouse=True)
def _no_operator_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("AIPERF_"):
            monkeypatch.delenv(k)


def test_every_spec_has_a_golden():
    assert CASES and all((ORACLE / "golden" / f"{c}.json").exists() for c in CASES)


@pytest.mark.parametrize("case", CASES)
def test_adapter_matches_the_oracle(case):
    wl, golden = _build(case)
    if "error" in golden:
        assert wl.pod_groups == [] and wl.derived == {}
        assert len(wl.render_errors) == 1
        # the operator's reason, then a fix
        reason = golden["error"].split(". ")[0]
        assert reason in wl.render_errors[0]
        assert "Fix: " in wl.render_errors[0]
        return
    assert wl.render_errors == []
    js, cm = golden["jobSet"], golden["configMap"]
    # pod groups: names, replicas, containers
    assert [(g.name, g.pods) for g in wl.pod_groups] == [
        (rj["name"], rj["replicas"]) for rj in js["spec"]["replicatedJobs"]
    ]
    assert wl.pod_groups[1].pods == golden["workerPods"]
    for group, rj in zip(wl.pod_groups, js["spec"]["replicatedJobs"]):
        want = rj["template"]["spec"]["template"]["spec"]
        assert [(c["name"], c["image"], c.get("resources")) for c in group.pod_spec["containers"]] == [
            (c["name"], c["image"], c.get("resources")) for c in want["containers"]
        ]
        assert pod_requests(group.pod_spec) == pod_requests(want)
        assert pod_limits(group.pod_spec) == pod_limits(want)
    # the whole JobSet and the ConfigMap, byte for byte
    assert wl.derived["jobSet"] == js
    assert wl.derived["configMap"]["metadata"] == cm["metadata"]
    assert wl.derived["configMap"]["data"]["run_config.json"] == cm["data"]["run_config.json"]


def test_sample_totals_are_the_documented_defaults():
    wl, _ = _build("sample")
    controller, workers = wl.pod_groups
    assert (controller.pods, workers.pods) == (1, 2)
    assert pod_requests(controller.pod_spec) == {"cpu": Decimal("0.45"), "memory": Decimal(1792 * 1024**2)}
    assert pod_requests(workers.pod_spec) == {"cpu": Decimal("3.35"), "memory": Decimal(6 * 1024**3)}
    assert pod_limits(workers.pod_spec) == pod_requests(workers.pod_spec)  # guaranteed
    assert wl.queue_name == "bench-queue"
    assert wl.derived["jobSet"]["metadata"]["name"] == "aiperf-llama-sweep"
    assert wl.derived["configMap"]["metadata"]["name"] == "aiperf-llama-sweep-config"
    # podTemplate env reaches every container except the results sidecar
    refs = {(r.name, r.field_path) for r in secret_refs(controller.pod_spec)}
    assert ("hf", "containers[control-plane].env[HF_TOKEN]") in refs
    assert not any("results-sidecar" in p for _, p in refs)
    assert ("ngc", "imagePullSecrets[0]") in refs


def test_burstable_has_no_limits_and_none_has_no_resources():
    wl, _ = _build("burstable-small")
    assert pod_limits(wl.pod_groups[1].pod_spec) == {}
    assert pod_requests(wl.pod_groups[1].pod_spec)["cpu"] == Decimal("3.35")
    assert [c["name"] for c in wl.pod_groups[1].pod_spec["containers"]] == [
        "worker-group-manager", "worker-0", "worker-1", "worker-2",
        "record-processor-0", "record-processor-1", "record-processor-2",
    ]  # fmt: skip
    wl, _ = _build("none-mode")
    assert all(pod_requests(g.pod_spec) == {} for g in wl.pod_groups)


def test_uneven_split_message():
    wl, _ = _build("uneven-split")
    assert wl.render_errors == [
        "The AIPerf operator would refuse to render this job: total_workers=25 is not a multiple of workers_per_pod=10, "
        "and a JobSet replicated job cannot express a partial final pod. Fix: set spec.benchmark.runtime.workers to a "
        "multiple of 10 (e.g. 20 or 30), or set spec.benchmark.runtime.workersPerPod to a value that divides 25."
    ]
    assert wl.incomplete_reason


def test_memory_floor_message_names_the_setting():
    wl, _ = _build("memory-floor")
    assert wl.render_errors[0].startswith(
        "The AIPerf operator would refuse to render this job: WORKER_POD memory budget (2048Mi) leaves worker "
        "containers below the 162Mi worker import-memory floor"
    )
    assert "Fix: raise AIPERF_K8S_WORKER_POD_MEMORY" in wl.render_errors[0]


def test_process_env_is_read_but_settings_win(monkeypatch):
    spec, _ = _load("sample")
    monkeypatch.setenv("AIPERF_K8S_WORKER_POD_CPU", "5")
    wl = build(spec, settings=Settings())
    assert pod_requests(wl.pod_groups[1].pod_spec)["cpu"] == Decimal(5)
    wl = build(spec, settings=Settings(aiperfEnv={"AIPERF_K8S_WORKER_POD_CPU": "4"}))
    assert pod_requests(wl.pod_groups[1].pod_spec)["cpu"] == Decimal(4)


def test_queue_falls_back_to_settings_default_then_label():
    spec, _ = _load("burstable-small")
    assert build(spec, settings=Settings()).queue_name is None
    wl = build(spec, settings=Settings(kueue={"defaultQueueName": "lq"}))
    assert wl.queue_name == "lq" and wl.derived["jobSet"]["spec"]["suspend"] is True
    spec["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "from-label"}
    assert build(spec, settings=Settings()).queue_name == "from-label"


def test_long_name_is_a_render_error():
    spec, _ = _load("burstable-small")
    spec["metadata"]["name"] = "a" * 36
    wl = build(spec, settings=Settings())
    assert wl.pod_groups == []
    assert wl.render_errors == [
        f'AIPerfJob name "{"a" * 36}" is not a DNS label of at most 35 characters, which the AIPerf operator requires for '
        "its job id (pods are named aiperf-<name>-controller-0-0-xxxxx, at most 63 characters). Fix: rename the "
        "AIPerfJob to at most 35 lowercase letters, digits and '-'."
    ]


def test_phase_without_kind_is_a_render_error():
    spec, _ = _load("burstable-small")
    spec["spec"]["benchmark"]["phases"][1]["name"] = "main"
    wl = build(spec, settings=Settings())
    assert wl.render_errors == [
        "Phase 'main': kind is required for non-canonical phase names, so the AIPerf operator rejects the config. "
        "Fix: set kind: profiling (or warmup) on phase 'main', or name it profiling/warmup."
    ]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda s: s.__setitem__("spec", []), "spec must be a mapping, not list"),
        (lambda s: s["spec"].__setitem__("workers", 3), "spec.workers is not a field of AIPerfJob"),
        (lambda s: s["spec"].pop("benchmark"), "spec.benchmark is required"),
        (lambda s: s["spec"].__setitem__("podTemplate", {"envFrom": []}), "spec.podTemplate.envFrom is not a field"),
        (
            lambda s: s["spec"].__setitem__("resourceMode", "max"),
            "spec.resourceMode must be guaranteed, burstable or none",
        ),
    ],
)
def test_unreadable_objects_raise_adapter_error(mutate, message):
    spec, _ = _load("sample")
    mutate(spec)
    with pytest.raises(AdapterError, match=message.replace("(", r"\(")):
        build(spec, settings=Settings())


def test_registry_dispatches_to_the_adapter():
    spec, _ = _load("sample")
    wl = build_workload(spec, settings=Settings())
    assert wl is not None and wl.kind == "AIPerfJob" and wl.ref == "AIPerfJob bench/llama-sweep"


@pytest.mark.parametrize("case", CASES)
def test_a_cached_render_of_another_create_matches_the_oracle(case):
    """The render cache renders an AIPerfJob once per content, its uid and run epoch as placeholders
    (webhook/workloads/render_cache.py): the golden's object, reviewed after a create of the same
    spec with another uid and creationTimestamp, hits that render and still gets exactly the JobSet
    and run_config.json AIPerf 0.13.0's operator renders for it (its own AIPERF_JOB_UID and epoch)."""
    from webhook.workloads.render_cache import CACHE, stats

    spec, golden = _load(case)
    settings = Settings(aiperfEnv=golden["aiperfEnv"])
    other = json.loads(json.dumps(spec))
    other["metadata"]["uid"] = "0a0a0a0a-other-create"
    # another time of the same form (an epoch key of the same length: its length is in the key)
    other["metadata"]["creationTimestamp"] = spec["metadata"]["creationTimestamp"].replace(
        "2026-01-15T10", "2026-02-01T08"
    )
    assert other["metadata"]["creationTimestamp"] != spec["metadata"]["creationTimestamp"]
    if "uid" not in spec["metadata"]:
        del other["metadata"]["uid"]  # without a uid: only the epoch differs
    CACHE.clear()
    build_workload(other, settings=settings)
    hits = stats()[0]
    wl = build_workload(spec, settings=settings)
    assert stats()[0] == hits + 1
    if "error" in golden:
        assert wl.derived == {} and len(wl.render_errors) == 1
        assert golden["error"].split(". ")[0] in wl.render_errors[0]
        return
    assert wl.derived["jobSet"] == golden["jobSet"]
    assert json.dumps(wl.derived["jobSet"]) == json.dumps(golden["jobSet"])
    assert wl.derived["configMap"]["data"]["run_config.json"] == golden["configMap"]["data"]["run_config.json"]
    assert [g.pod_spec for g in wl.pod_groups] == [
        rj["template"]["spec"]["template"]["spec"] for rj in golden["jobSet"]["spec"]["replicatedJobs"]
    ]
