"""DRA oracle: the Device Allocation check against the real structured allocator and the apiserver's CEL.

tests/oracle/dra/main.go (built against k8s.io/kubernetes at the e2e version by
tests/oracle/dra/build.sh) runs k8s.io/dynamic-resource-allocation structured.NewAllocator + Allocate
on generated cases (one node, its ResourceSlices × one pod's claims, some devices already allocated)
and cel.Cache.GetOrCompile + DeviceMatches on generated selectors and attributes. The same cases go
through the check here, and every answer is compared:

- a selector: ours True/False must equal Kubernetes' match; None ("cannot verify") is allowed, and
  must be what we answer whenever Kubernetes errors;
- a case: PASS ⇔ the allocator found an allocation; FAIL only when it found none and returned no
  error; WARN (cannot verify) is never a miss but is counted and bounded.

    PREFLIGHT_DRA_ORACLE="$(bash tests/oracle/dra/build.sh)" .venv/bin/python -m pytest tests/oracle/dra -q

`make test` builds the oracle and sets the variable; a bare `pytest tests` skips these.
"""

from __future__ import annotations

import random
from typing import Any

from tests.fakeview import FakeView, container, meta, pod, run_check, workload
from tests.oracle._common import GoOracle
from webhook.checks.dra import DeviceAllocation
from webhook.models.dra.cel import device_matches
from webhook.results import Status
from webhook.workloads.base import PodGroup

ORACLE = GoOracle("dra", "the DRA oracle")
pytestmark = ORACLE.skip

SEED = 20261201
CASES = 300
SELECTORS = 400
DRIVER = "gpu.example.com"
MODELS = ["H100", "B200", "A100"]

_SELECTORS = [
    'device.driver == "gpu.example.com"',
    'device.driver != "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "{m}"',
    'device.attributes["gpu.example.com"].model != "{m}"',
    'device.attributes["gpu.example.com"].model.startsWith("{p}")',
    'device.attributes["gpu.example.com"].model.endsWith("00")',
    'device.attributes["gpu.example.com"].model.contains("1")',
    'device.attributes["gpu.example.com"].model.matches("^[AB]")',
    'device.attributes["gpu.example.com"].model in ["H100", "{m}"]',
    'device.attributes["gpu.example.com"].index >= {n}',
    'device.attributes["gpu.example.com"].index % 2 == {b}',
    'device.attributes["gpu.example.com"].index + 1 < {n}',
    'device.attributes["gpu.example.com"].nvlink',
    '!device.attributes["gpu.example.com"].nvlink || device.attributes["gpu.example.com"].index > {n}',
    '"nvlink" in device.attributes["gpu.example.com"]',
    '"model" in device.attributes["other.example.com"]',
    'has(device.attributes["gpu.example.com"].model)',
    'device.attributes["other.example.com"].model == "{m}"',  # a runtime error (no such key)
    'size(device.attributes["gpu.example.com"].model) == 4',
    'device.attributes["gpu.example.com"].index > 1 ? device.attributes["gpu.example.com"].model == "{m}" : true',
    'device.attributes["gpu.example.com"].model.lowerAscii() == "h100"',  # outside the subset
    'device.attributes["gpu.example.com"].model == 1',  # heterogeneous equality: false
]


def _selector(rng: random.Random) -> str:
    return rng.choice(_SELECTORS).format(
        m=rng.choice(MODELS), p=rng.choice(["H", "B", "A1"]), n=rng.randint(0, 4), b=rng.randint(0, 1)
    )


def _attributes(rng: random.Random, i: int) -> dict[str, Any]:
    a: dict[str, Any] = {"model": {"string": rng.choice(MODELS)}, "index": {"int": i}}
    if rng.random() < 0.6:
        a["nvlink"] = {"bool": rng.random() < 0.5}
    return a


def _run(payload: dict[str, Any]) -> dict[str, Any]:
    return dict(ORACLE.run(payload))


def test_selectors_agree_with_the_apiserver_cel() -> None:
    rng = random.Random(SEED)
    cases = [
        {"expression": _selector(rng), "driver": DRIVER, "attributes": _attributes(rng, rng.randint(0, 5))}
        for _ in range(SELECTORS)
    ]
    got = _run({"cases": [], "selectors": cases})["selectors"]
    unknown = 0
    misses = []
    for c, k8s in zip(cases, got, strict=True):
        ours = device_matches(c["expression"], DRIVER, c["attributes"])
        if ours is None:
            unknown += 1
            continue
        if k8s.get("error") or ours != k8s["match"]:
            misses.append((c["expression"], c["attributes"], ours, k8s))
    assert misses == []
    assert unknown < SELECTORS * 0.25, unknown  # only the runtime errors and the function outside the subset


def _case(rng: random.Random, i: int) -> tuple[dict[str, Any], FakeView, Any]:
    node = {
        "metadata": meta("node-1", labels={"kubernetes.io/hostname": "node-1"}),
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    ndev = rng.randint(0, 6)
    devices = [{"name": f"gpu-{d}", "attributes": _attributes(rng, d)} for d in range(ndev)]
    slices = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": meta("node-1-gpu"),
            "spec": {
                "driver": DRIVER,
                "nodeName": "node-1",
                "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    ]
    cls_sel = [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]
    if rng.random() < 0.3:
        cls_sel.append({"cel": {"expression": _selector(rng)}})
    classes = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": meta("gpu"),
            "spec": {"selectors": cls_sel},
        }
    ]

    def exact() -> dict[str, Any]:
        e: dict[str, Any] = {"deviceClassName": "gpu" if rng.random() < 0.95 else "nosuch"}
        if rng.random() < 0.15:
            e["allocationMode"] = "All"
        else:
            e["allocationMode"] = "ExactCount"
            e["count"] = rng.randint(1, 4)
        if rng.random() < 0.5:
            e["selectors"] = [{"cel": {"expression": _selector(rng)}}]
        return e

    requests = []
    for r in range(rng.randint(1, 2)):
        if rng.random() < 0.25:
            requests.append({"name": f"r{r}", "firstAvailable": [{"name": f"s{k}", **exact()} for k in range(2)]})
        else:
            requests.append({"name": f"r{r}", "exactly": exact()})
    spec: dict[str, Any] = {"devices": {"requests": requests}}
    if rng.random() < 0.2:
        spec["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/model"}]
    allocated = [{"driver": DRIVER, "pool": "node-1", "device": d["name"]} for d in devices if rng.random() < 0.2]
    oracle_case = {
        "id": str(i),
        "node": node,
        "slices": slices,
        "classes": classes,
        "claims": [
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta("c", "ns"), "spec": spec}
        ],
        "allocated": allocated,
    }
    other = {
        "metadata": meta("other", "ns2"),
        "spec": {},
        "status": {"allocation": {"devices": {"results": [{"request": "x", **a} for a in allocated]}}},
    }
    view = FakeView(
        {
            "nodes": [node],
            "resourceslices": slices,
            "deviceclasses": [c for c in classes],
            "resourceclaimtemplates": [{"metadata": meta("t", "ns"), "spec": {"spec": spec}}],
            "resourceclaims": [other],
        }
    )
    c = container("main", {"cpu": "1"})
    p = pod(c)
    p["resourceClaims"] = [{"name": "c", "resourceClaimTemplateName": "t"}]
    wl = workload([PodGroup("main", 1, p)], kind="TrainJob", namespace="ns")
    return oracle_case, view, wl


async def test_allocations_agree_with_the_structured_allocator() -> None:
    rng = random.Random(SEED)
    built = [_case(rng, i) for i in range(CASES)]
    got = {c["id"]: c for c in _run({"cases": [b[0] for b in built], "selectors": []})["cases"]}
    misses, warned, passes, fails = [], 0, 0, 0
    for oracle_case, view, wl in built:
        k8s = got[oracle_case["id"]]
        r = await run_check(DeviceAllocation(), wl, view)
        missing_class = "does not exist" in r.message
        if r.status is Status.PASS:
            passes += 1
            ok = k8s["ok"]
        elif r.status is Status.FAIL:
            fails += 1
            # a missing class: the allocator fails with an error (that one, or an error it met before
            # reaching the request: a CEL runtime error); otherwise it found nothing, without error
            ok = (
                (not k8s["ok"] and bool(k8s.get("error")))
                if missing_class
                else (not k8s["ok"] and not k8s.get("error"))
            )
        else:
            warned += 1
            ok = True
        if not ok:
            misses.append((oracle_case["claims"][0]["spec"], oracle_case["allocated"], r.status, r.message, k8s))
    assert misses == [], misses[:3]
    assert passes and fails
    assert warned < CASES * 0.3, warned
