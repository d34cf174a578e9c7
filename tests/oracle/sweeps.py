"""Generated AIPerfSweeps for the sweep oracle: grid, zip, scenarios, trials, convergence, the
variation / trial / child-name caps at and over their limits, epoch, image, pod template.

`cases()` → {case: AIPerfSweep body}. Used by tests/oracle/test_sweep_oracle.py, which gives
them to AIPerf 0.13.0 (tests/oracle/sweep_oracle.py) and to our adapter.
"""

from __future__ import annotations

import copy
from typing import Any


def base(name: str = "sw", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfSweep",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": "0b5c-4f1e",
            "creationTimestamp": "2026-03-04T05:06:07Z",
        },
        "spec": {
            "image": "nvcr.io/nvidia/aiperf:0.13.0",
            "connectionsPerWorker": 100,
            "benchmark": {
                "models": ["meta/llama-3.1-8b-instruct"],
                "endpoint": {"urls": ["http://llm.models.svc.cluster.local:8000"]},
                "datasets": [{"name": "main", "type": "synthetic", "entries": 20, "prompts": {"isl": 128, "osl": 64}}],
                "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 50}],
            },
            "sweep": {"type": "grid", "parameters": {"concurrency": [10, 200]}},
        },
    }
    body["spec"].update(spec)
    return body


def _with(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    cur = out
    keys = path.split(".")
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
    if value is _DEL:
        cur.pop(keys[-1], None)
    else:
        cur[keys[-1]] = value
    return out


_DEL = object()


def grid(*values: list[Any], **params: list[Any]) -> dict[str, Any]:
    return {"type": "grid", "parameters": params or {"concurrency": list(values[0])}}


def cases() -> dict[str, dict[str, Any]]:
    c: dict[str, dict[str, Any]] = {}
    b = base()
    c["grid-one-param"] = base(sweep=grid([10, 200, 2000]))
    c["grid-two-params"] = base(sweep=grid(concurrency=[10, 400], requests=[20, 40, 80]))
    c["grid-full-path"] = base(sweep=grid(**{"phases.profiling.concurrency": [1, 150, 301]}))
    c["grid-workers-per-pod"] = base(
        sweep=grid(**{"runtime.workersPerPod": [1, 5]}),
        benchmark={
            **b["spec"]["benchmark"],
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 900, "requests": 50}],
        },
    )
    c["grid-variables"] = base(variables={"tag": "a"}, sweep=grid(**{"variables.tag": ["x", "y"], "concurrency": [5]}))
    c["zip"] = base(sweep={"type": "zip", "parameters": {"concurrency": [10, 300, 1200], "requests": [20, 40, 60]}})
    c["zip-unequal"] = base(sweep={"type": "zip", "parameters": {"concurrency": [10, 300], "requests": [20]}})
    c["scenarios-named"] = base(sweep={"type": "scenarios", "runs": [
        {"name": "small", "benchmark": {"phases": [{"name": "profiling", "concurrency": 20}]}},
        {"name": "large", "benchmark": {"phases": [{"name": "profiling", "concurrency": 1500}]}},
    ]})  # fmt: skip
    c["scenarios-unnamed-add-phase"] = base(sweep={"type": "scenarios", "runs": [
        {"benchmark": {"phases": [{"name": "warmup", "type": "concurrency", "concurrency": 2, "requests": 4}]}},
        {"benchmark": {"phases": [{"name": "profiling", "concurrency": 700}]}},
    ]})  # fmt: skip
    c["scenarios-unknown-key"] = base(sweep={"type": "scenarios", "runs": [{"name": "a", "phases": []}]})
    c["trials-2"] = base(multiRun={"numRuns": 2})
    c["trials-10"] = base(multiRun={"numRuns": 10})
    c["trials-11"] = base(multiRun={"numRuns": 11})
    c["convergence-1-run"] = base(multiRun={"numRuns": 1, "convergence": {"metric": "ttft"}})
    c["convergence-3-runs"] = base(
        multiRun={"numRuns": 3, "convergence": {"metric": "ttft"}},
        sweep={**grid([10, 20]), "iterationOrder": "independent"},
    )
    c["convergence-default-order"] = base(multiRun={"numRuns": 3, "convergence": {"metric": "ttft"}})
    c["convergence-repeated"] = base(
        multiRun={"numRuns": 3, "convergence": {"metric": "ttft"}},
        sweep={**grid([10, 20]), "iterationOrder": "repeated"},
    )
    c["grid-typo"] = base(sweep={"type": "grid", "paramters": {"concurrency": [1, 2]}})
    c["unknown-sweep-type"] = base(sweep={"type": "random", "parameters": {"concurrency": [1, 2]}})
    c["credential-axis-header"] = base(sweep=grid(**{"endpoint.headers.x-team": ["a", "b"]}))
    c["credential-axis-scenario"] = base(sweep={"type": "scenarios", "runs": [
        {"name": "k1", "benchmark": {"endpoint": {"apiKey": "k1"}}}, {"name": "k2", "benchmark": {"endpoint": {"apiKey": "k2"}}}]})  # fmt: skip
    c["variations-200"] = base(sweep=grid(concurrency=list(range(1, 11)), requests=list(range(10, 30))))
    c["variations-201"] = base(sweep=grid(concurrency=list(range(1, 202))))
    c["variations-400-cheap"] = base(sweep=grid(concurrency=list(range(1, 21)), requests=list(range(10, 30))))
    c["name-31-at-limit"] = _with(base(), "metadata.name", "a" * 31)
    c["name-32-over"] = _with(base(), "metadata.name", "a" * 32)
    c["name-30-101-variations"] = _with(base(sweep=grid(concurrency=list(range(1, 102)))), "metadata.name", "b" * 30)
    c["name-31-101-variations"] = _with(base(sweep=grid(concurrency=list(range(1, 102)))), "metadata.name", "b" * 31)
    c["name-28-trials"] = _with(base(multiRun={"numRuns": 2}), "metadata.name", "c" * 28)
    c["name-29-trials"] = _with(base(multiRun={"numRuns": 2}), "metadata.name", "c" * 29)
    c["epoch-1969"] = _with(base(), "metadata.creationTimestamp", "1969-04-25T18:22:03Z")
    c["no-image"] = _with(base(), "spec.image", _DEL)
    c["no-sweep"] = _with(base(), "spec.sweep", _DEL)
    c["guaranteed"] = base(resourceMode="guaranteed")
    c["resource-mode-none"] = base(resourceMode="none")
    c["pod-template"] = base(podTemplate={
        "imagePullSecrets": [{"name": "ngc"}], "nodeSelector": {"pool": "cpu"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "env": [{"name": "HTTP_PROXY", "value": "http://proxy:3128"}],
        "containerSecurityContext": {"runAsUser": 2000},
        "podSecurityContext": {"fsGroup": 3000},
        "priorityClassName": "batch",
    }, imagePullPolicy="IfNotPresent")  # fmt: skip
    c["random-seed"] = base(randomSeed=7)
    c["same-seed"] = base(randomSeed=7, sweep={**grid([10, 20]), "sameSeed": True})
    c["child-metadata"] = base(childMetadata={"labels": {"team": "perf"}, "annotations": {"note": "x"}})
    c["stripped-fields"] = base(ttlSecondsAfterFinished=60, timeoutSeconds=3600, failurePolicy={"maxFailures": 1})
    c["bad-path"] = base(sweep=grid(**{"phases.nosuch.concurrency": [1, 2]}))
    c["benchmark-prefix"] = base(sweep=grid(**{"benchmark.phases.profiling.concurrency": [1, 2]}))
    c["scheduling-queue"] = base(scheduling={"queueName": "bench-queue"})
    return c
