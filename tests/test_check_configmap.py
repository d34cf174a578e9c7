"""ConfigMap Size: every status and its exact wording."""

import base64
import json

from webhook.checks import all_checks
from webhook.checks.base import CheckContext
from webhook.checks.configmap import CONFIGMAP_MAX_BYTES, ConfigMapSize, largest_parts, payload_bytes
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.engine import applicable
from webhook.results import Status
from webhook.workloads.base import Workload

KEY = "run_config.json"


def cm(value: str, **extra) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "aiperf-demo-config"},
        "data": {KEY: value},
        **extra,
    }


def wl(configmap: dict | None, kind: str = "AIPerfJob") -> Workload:
    derived = {"configMap": configmap} if configmap is not None else {}
    return Workload(kind, "aiperf.nvidia.com/v1alpha1", "demo", "bench", {}, derived=derived)


async def run(workload: Workload):
    return await ConfigMapSize().run(CheckContext(workload=workload, deadline=Deadline(5), settings=Settings()))


def test_size_counts_utf8_keys_and_values_and_decoded_binary_data():
    m = cm("é" * 10, binaryData={"blob": base64.b64encode(b"\x00" * 30).decode()})
    assert payload_bytes(m) == len(KEY) + 20 + len("blob") + 30


async def test_pass_gives_the_size():
    r = await run(wl(cm("x" * (2048 - len(KEY)))))
    assert (r.status, r.message) == (Status.PASS, 'ConfigMap "aiperf-demo-config" is 2.0 KiB of the 1024 KiB limit')


async def test_exactly_the_limit_passes_one_byte_more_fails():
    r = await run(wl(cm("x" * (CONFIGMAP_MAX_BYTES - len(KEY)))))
    assert r.status is Status.PASS
    r = await run(wl(cm("x" * (CONFIGMAP_MAX_BYTES - len(KEY) + 1))))
    assert r.status is Status.FAIL


async def test_fail_gives_real_size_and_what_to_shrink():
    doc = {"benchmark": {"models": ["m"], "datasets": [{"name": "main", "prompts": ["p" * 1000] * 1100}]}}
    value = json.dumps(doc)
    r = await run(wl(cm(value)))
    size = len(KEY) + len(value)
    assert r.status is Status.FAIL
    assert r.message == (
        f'ConfigMap "aiperf-demo-config" that the AIPerf operator renders from this spec would be {size / 1024:.1f} KiB '
        f"({size} bytes), over the 1024 KiB (1 MiB) ConfigMap limit, so the operator cannot start the benchmark; "
        "largest parts: benchmark.datasets[0].prompts (1077.4 KiB). "
        "Fix: shrink the spec: reference datasets by file or URL instead of inlining them, "
        "shorten inline prompts or input payloads, or split the run into several jobs"
    )
    assert r.details == ["benchmark.datasets[0].prompts: 1103301 bytes"]


def test_largest_parts_lists_big_siblings_and_non_json_keys():
    doc = {"a": "x" * 600_000, "b": "y" * 500_000, "c": 1}
    assert largest_parts({"data": {KEY: json.dumps(doc)}}) == [("a", 600002), ("b", 500002)]
    assert largest_parts({"data": {"prompts.txt": "z" * 100}}) == [("prompts.txt", 100)]


async def test_skip_without_a_derived_configmap():
    r = await run(wl(None))
    assert (r.status, r.message) == (Status.SKIP, "Skipped: the job derives no ConfigMap")


def test_applies_to_aiperfjobs_only():
    names = lambda w: [c.name for c in applicable(all_checks(), w, Settings())]  # noqa: E731
    assert "ConfigMap Size" in names(wl(cm("{}")))
    assert "ConfigMap Size" not in names(wl(None, kind="TrainJob"))


async def test_on_the_aiperfjob_sample_through_the_adapter():
    from pathlib import Path

    import yaml

    from webhook.workloads import build_workload

    obj = yaml.safe_load((Path(__file__).parent / "oracle" / "samples" / "aiperfjob.yaml").read_text())
    w = build_workload(obj, settings=Settings())
    size = payload_bytes(w.derived["configMap"])
    assert 0 < size < CONFIGMAP_MAX_BYTES
    r = await run(w)
    assert (r.status, r.message) == (
        Status.PASS,
        f'ConfigMap "aiperf-llama-sweep-config" is {size / 1024:.1f} KiB of the 1024 KiB limit',
    )
