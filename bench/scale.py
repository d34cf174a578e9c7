"""Does the webhook survive a cluster at Kubernetes' published scalability thresholds?

    .venv/bin/python bench/scale.py                   # 1 % and 10 % (~25 min on 2 shared cores)
    .venv/bin/python bench/scale.py --scale 1,10,100  # the issue's full run (hours: 150,000 Pods)
    .venv/bin/python bench/scale.py --memory --no-pods --scale 10,100 --repeat 2 --waiting-jobs 10000
                                                      # memory only (issue 38): ~15 min to 100 %
    make bench-scale [SCALE=1,10,100]

The thresholds are sig-scalability's (kubernetes/community sig-scalability/configs-and-limits/
thresholds.md: 5,000 nodes, 150,000 pods, 10,000 namespaces, 10,000 Services), with the objects
issue 22 adds: 30,000 ServiceAccounts, 5,000 ResourceQuotas and LimitRanges, 2,000 PVs, 200
StorageClasses, 500 LocalQueues, 50 ClusterQueues with flavors. They are objects in the local
control plane, not kubelets: Nodes carry what real ones do (labels, taints, allocatable and
the kubelet's 50-image list, k8s.io/kubernetes pkg/kubelet/nodestatus/setters.go `Images`).

Each level adds objects to reach its share of every threshold, then starts a fresh webhook
(`serve`, default config) and a fresh audit controller (`preflight-webhook audit`), and measures:

- time to ready (`/readyz`, every cache listed) and RSS after it;
- a relist after 410 Gone: etcd is compacted and the apiserver restarted, so every watch's
  resourceVersion is gone; the time until every cache is synced again, and the relists counted;
- review latency: /validate in process (4 connections) and a dry-run create through the
  apiserver (4 clients), p50 and p99;
- steady state over 60 s: the apiserver's non-watch requests (minus the same minute measured
  before the webhook started) and the webhook's CPU;
- the Pod LIST and WATCH requests during the start: the target is none (Pods are never read).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.audit_scale import _populate as populate_waiting_jobs  # the audit controller's scale bench's jobs
from bench.cluster_bench import (
    QUOTA_HARD,
    SAMPLE_SELECTOR,
    Admin,
    apiserver_count,
    create_quotas,
    header,
    hook_ssl,
    load,
    node,
    rss_mib,
    sample,
    setup_samples,
    verdict,
)
from bench.common import review, write_section
from bench.loadgen import run_load
from bench.run import cpu_seconds
from e2e.harness.controlplane import ControlPlane, free_ports
from e2e.harness.runner import RunningWebhook, WebhookError, parse_metrics, wait_until
from e2e.harness.trainer_manifests import train_job, training_runtime
from webhook.quantity import parse_quantity

ROOT = Path(__file__).resolve().parent.parent

#: 100 % of every threshold
THRESHOLDS = {
    "nodes": 5000,
    "namespaces": 10000,
    "serviceaccounts": 30000,
    "services": 10000,
    "resourcequotas": 5000,
    "limitranges": 5000,
    "persistentvolumes": 2000,
    "storageclasses": 200,
    "localqueues": 500,
    "clusterqueues": 50,
    "pods": 150000,
}
FLAVORS = 10
#: room for 10,000 ClusterIPs (the harness's /24 holds 254); objects only, no traffic goes there
SERVICE_CIDR = "10.0.0.0/16"
KUEUE = "kueue.x-k8s.io/v1beta2"


def chart_limit_mib(section: str | None = None) -> float:
    """The chart's default memory limit (charts/preflight-webhook/values.yaml resources.limits.memory,
    or audit.resources...), in MiB."""
    values = yaml.safe_load((ROOT / "charts" / "preflight-webhook" / "values.yaml").read_text())
    res = (values[section] if section else values)["resources"]["limits"]["memory"]
    return float(parse_quantity(str(res))) / 2**20


WAIT = 900.0


def _ns(i: int) -> str:
    return f"scale-{i:05d}"


def real_node(i: int) -> dict[str, Any]:
    """A Node as a GPU cluster's kubelet reports it: zone, instance type, GPU labels, a taint on
    every fourth, and the 50 images kubelet keeps in status (nodeStatusMaxImages)."""
    n = node(f"scale-node-{i:05d}", cpu="96", memory="1Ti")
    gpu = i % 4 == 0
    n["metadata"]["labels"].update(
        {
            "topology.kubernetes.io/region": "region-1",
            "topology.kubernetes.io/zone": f"zone-{i % 3}",
            "node.kubernetes.io/instance-type": "gpu-8x" if gpu else "cpu-96",
            "kubernetes.io/arch": "amd64",
            "nvidia.com/gpu.present": "true" if gpu else "false",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" if gpu else "none",
            "pool": f"pool-{i % 20}",
        }
    )
    if gpu:
        n["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        for k in ("capacity", "allocatable"):
            n["status"][k] = {**n["status"][k], "nvidia.com/gpu": "8"}
    n["status"]["images"] = [
        {
            "names": [f"registry.example/team-{j}/image@sha256:{j:064x}", f"registry.example/team-{j}/image:v{j}"],
            "sizeBytes": 1_000_000_000 + j,
        }
        for j in range(50)
    ]
    return n


# ----------------------------------------------------------------------------- DRA (issue 26)
#
# What NVIDIA's DRA driver publishes (NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go
# GpuInfo.GetDevice, driver.go: one ResourceSlice per node, pool = the node's name, devices gpu-0..7)
# and the DeviceClasses its chart and a cluster admin install (the chart's gpu.nvidia.com and
# mig.nvidia.com classes select on `type`; the admin's pick a product).

DRA_DRIVER = "gpu.nvidia.com"
GPUS_PER_NODE = 8
#: (productName, architecture, compute capability, memory MiB): the tainted GPU nodes of
#: :func:`real_node` carry H100s, the others L40S exposed through DRA only
GPU_MODELS = (
    ("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", 81559),
    ("NVIDIA L40S", "Ada Lovelace", "8.9.0", 46068),
)
H100 = GPU_MODELS[0][0]


def _class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


#: the DeviceClasses, in creation order (the DRA TrainJob's first: it exists at every level)
DEVICE_CLASSES = (
    _class(DRA_DRIVER, f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].type == 'gpu'"),
    _class("mig.nvidia.com", f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].type == 'mig'"),
    _class(
        "h100.example.com",
        f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].productName == '{H100}'",
    ),
    _class(
        "l40s.example.com",
        f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].productName == '{GPU_MODELS[1][0]}'",
    ),
    _class("hopper.example.com", f"device.attributes['{DRA_DRIVER}'].architecture == 'Hopper'"),
)
THRESHOLDS["resourceslices"] = 5000
THRESHOLDS["deviceclasses"] = len(DEVICE_CLASSES)


def resource_slice(i: int) -> dict[str, Any]:
    """The ResourceSlice NVIDIA's kubelet plugin publishes for node `i` of :func:`real_node`: 8 GPUs with
    their attributes (strings, versions, the PCIe root) and memory capacity."""
    node_name = f"scale-node-{i:05d}"
    product, arch, cc, mib = GPU_MODELS[0 if i % 4 == 0 else 1]
    devices = []
    for g in range(GPUS_PER_NODE):
        bus = 0x18 + 0x10 * g
        devices.append(
            {
                "name": f"gpu-{g}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "uuid": {"string": f"GPU-{uuid.UUID(int=i * GPUS_PER_NODE + g)}"},
                    "productName": {"string": product},
                    "brand": {"string": "Nvidia"},
                    "architecture": {"string": arch},
                    "cudaComputeCapability": {"version": cc},
                    "driverVersion": {"version": "580.95.5"},
                    "cudaDriverVersion": {"version": "13.0.0"},
                    "pcieBusID": {"string": f"0000:{bus:02x}:00.0"},
                    "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{bus & 0xF0:02x}"},
                },
                "capacity": {"memory": {"value": f"{mib}Mi"}},
            }
        )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRA_DRIVER}-{i % 100000:05x}"},
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


DRA_NS = "demo-train"
DRA_RUNTIME = "dra-torch"
DRA_TEMPLATE = "h100x8"


def dra_prereqs() -> list[tuple[str, dict[str, Any]]]:
    """The DRA TrainJob's namespaced prerequisites: a ResourceClaimTemplate for 8 H100s of class
    gpu.nvidia.com (the request's CEL selector picks the product), and a TrainingRuntime whose `node`
    pods claim from it and tolerate the GPU taint (Trainer's runtimePatches cannot add resourceClaims:
    the claim comes from the runtime, as in e2e/fidelity/dra_scenarios.py)."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": DRA_TEMPLATE, "namespace": DRA_NS},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {
                                "deviceClassName": DRA_DRIVER,
                                "count": GPUS_PER_NODE,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": f"device.attributes['{DRA_DRIVER}'].productName == '{H100}'"
                                        }
                                    }
                                ],
                            },
                        }
                    ],
                }
            }
        },
    }
    pod = {
        "restartPolicy": "Never",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": DRA_TEMPLATE}],
        "containers": [
            {
                "name": "node",
                "image": "registry.example/team/trainer:v1",
                "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "claims": [{"name": "gpus"}]},
            }
        ],
    }
    runtime = training_runtime(DRA_RUNTIME, pod, namespace=DRA_NS, num_nodes=4)
    return [
        (f"/apis/resource.k8s.io/v1/namespaces/{DRA_NS}/resourceclaimtemplates", template),
        (f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{DRA_NS}/trainingruntimes", runtime),
    ]


def dra_trainjob() -> dict[str, Any]:
    """A TrainJob of 4 nodes, each pod claiming 8 H100s through the runtime's ResourceClaimTemplate."""
    return train_job(
        "llm-dra",
        DRA_RUNTIME,
        namespace=DRA_NS,
        runtime_kind="TrainingRuntime",
        image="registry.example/team/trainer:v1",
        num_nodes=4,
    )


def _objects(kind: str, lo: int, hi: int, ns_count: int) -> list[tuple[str, dict[str, Any]]]:
    """POSTs for objects lo..hi-1 of one kind, in the `ns_count` namespaces that exist. Quotas and
    LimitRanges go to even namespaces, Pods to odd ones (quota admission would count every Pod
    against a quota otherwise)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(lo, hi):
        if kind == "namespaces":
            out.append(("/api/v1/namespaces", {"metadata": {"name": _ns(i), "labels": {"bench": "scale"}}}))
        elif kind == "serviceaccounts":
            name = ("default", "trainer", "runner")[i % 3]
            out.append((f"/api/v1/namespaces/{_ns(i // 3)}/serviceaccounts", {"metadata": {"name": name}}))
        elif kind == "services":
            ns = _ns(i)
            out.append(
                (
                    f"/api/v1/namespaces/{ns}/services",
                    {
                        "metadata": {"name": "llm"},
                        "spec": {"selector": {"app": "llm"}, "ports": [{"port": 8000, "name": "http"}]},
                    },
                )
            )
            out.append(
                (
                    f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                    {
                        "metadata": {"name": "llm-1", "labels": {"kubernetes.io/service-name": "llm"}},
                        "addressType": "IPv4",
                        "ports": [{"port": 8000, "name": "http"}],
                        "endpoints": [{"addresses": [f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"]}],
                    },
                )
            )
        elif kind == "limitranges":
            out.append(
                (
                    f"/api/v1/namespaces/{_ns(2 * i % ns_count)}/limitranges",
                    {
                        "metadata": {"name": "defaults"},
                        "spec": {
                            "limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]
                        },
                    },
                )
            )
        elif kind == "persistentvolumes":
            out.append(
                (
                    "/api/v1/persistentvolumes",
                    {
                        "metadata": {"name": f"scale-pv-{i:05d}"},
                        "spec": {
                            "capacity": {"storage": "100Gi"},
                            "accessModes": ["ReadWriteOnce"],
                            "storageClassName": f"scale-sc-{i % THRESHOLDS['storageclasses']:03d}",
                            "hostPath": {"path": f"/data/{i}"},
                        },
                    },
                )
            )
        elif kind == "storageclasses":
            out.append(
                (
                    "/apis/storage.k8s.io/v1/storageclasses",
                    {"metadata": {"name": f"scale-sc-{i:03d}"}, "provisioner": f"csi.example/{i % 5}"},
                )
            )
        elif kind == "clusterqueues":
            flavors = [
                {"name": f"flavor-{f}", "resources": [{"name": "cpu", "nominalQuota": "1000"}]}
                for f in range(i % FLAVORS, i % FLAVORS + 2)
            ]
            out.append(
                (
                    "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
                    {
                        "apiVersion": KUEUE,
                        "kind": "ClusterQueue",
                        "metadata": {"name": f"scale-cq-{i:03d}"},
                        "spec": {
                            "namespaceSelector": {},
                            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}],
                        },
                    },
                )
            )
        elif kind == "localqueues":
            out.append(
                (
                    f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{_ns(i)}/localqueues",
                    {
                        "apiVersion": KUEUE,
                        "kind": "LocalQueue",
                        "metadata": {"name": "default"},
                        "spec": {"clusterQueue": f"scale-cq-{i % THRESHOLDS['clusterqueues']:03d}"},
                    },
                )
            )
        elif kind == "resourceslices":
            out.append(("/apis/resource.k8s.io/v1/resourceslices", resource_slice(i)))
        elif kind == "deviceclasses":
            out.append(("/apis/resource.k8s.io/v1/deviceclasses", json.loads(json.dumps(DEVICE_CLASSES[i]))))
        elif kind == "pods":
            ns = _ns((2 * (i % (ns_count // 2)) + 1) % ns_count)
            out.append(
                (
                    f"/api/v1/namespaces/{ns}/pods",
                    {
                        "metadata": {"name": f"p-{i:06d}", "labels": {"app": "worker"}},
                        "spec": {
                            "nodeName": f"scale-node-{i % THRESHOLDS['nodes']:05d}",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "registry.example/team/trainer:v1",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                }
                            ],
                        },
                    },
                )
            )
        else:
            raise ValueError(kind)
    return out


#: creation order: what others need first (namespaces and their ServiceAccounts before Pods)
ORDER = (
    "namespaces",
    "serviceaccounts",
    "nodes",
    "deviceclasses",
    "resourceslices",
    "services",
    "resourcequotas",
    "limitranges",
    "storageclasses",
    "persistentvolumes",
    "clusterqueues",
    "localqueues",
    "pods",
)


async def create_real_nodes(admin: Admin, indexes: range) -> None:
    """The Nodes of :func:`real_node`. The apiserver's TaintNodesByCondition adds
    node.kubernetes.io/not-ready on create, which the node lifecycle controller (absent here)
    lifts once the kubelet reports Ready: lift it, keep the GPU taint, and restore the status
    (conditions, images) where create did not keep it."""
    await admin.bulk([("/api/v1/nodes", real_node(i)) for i in indexes], 48)
    sem = asyncio.Semaphore(48)

    async def settle(i: int) -> None:
        want = real_node(i)
        name = want["metadata"]["name"]
        async with sem:
            code, doc, _ = await admin.call(
                "PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": want["spec"].get("taints")}},
                "application/merge-patch+json",
            )  # fmt: skip
            if code != 200:
                raise RuntimeError(f"untaint node {name}: {code} {str(doc)[:200]}")
            if not ((doc or {}).get("status") or {}).get("images"):
                await admin.call(
                    "PATCH", f"/api/v1/nodes/{name}/status", {"status": want["status"]}, "application/merge-patch+json"
                )

    await asyncio.gather(*(settle(i) for i in indexes))


def target(kind: str, percent: float) -> int:
    n = THRESHOLDS[kind] * percent / 100.0
    return max(1, int(round(n)))


async def grow(cp: ControlPlane, have: dict[str, int], percent: float, skip: tuple[str, ...] = ()) -> dict[str, float]:
    """Create what is missing to reach `percent` of every threshold (but the kinds in `skip`); seconds per kind."""
    took: dict[str, float] = {}
    async with Admin(cp, connections=48) as admin:
        if not have.get("flavors"):
            await admin.bulk(
                [
                    (
                        "/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
                        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"flavor-{f}"}},
                    )
                    for f in range(FLAVORS + 2)
                ]
            )
            have["flavors"] = FLAVORS + 2
        if not have.get("dra"):
            await admin.bulk(dra_prereqs())
            have["dra"] = 1
        for kind in ORDER:
            if kind in skip:
                continue
            lo, hi = have.get(kind, 0), target(kind, percent)
            if kind == "namespaces":
                hi = max(hi, target("serviceaccounts", percent) // 3 + 1, target("services", percent))
            if hi <= lo:
                continue
            t0 = time.perf_counter()
            ns_count = have.get("namespaces", 0)
            if kind == "nodes":
                await create_real_nodes(admin, range(lo, hi))
            elif kind == "resourcequotas":
                await create_quotas(admin, [(_ns(2 * i % ns_count), "compute") for i in range(lo, hi)], 48)
            else:
                await admin.bulk(_objects(kind, lo, hi, ns_count), 48)
            took[kind] = time.perf_counter() - t0
            have[kind] = hi
            print(f"scale: {kind} {lo}->{hi} in {took[kind]:.0f}s", file=sys.stderr, flush=True)
    return took


def requests_total(cp: ControlPlane) -> float:
    """apiserver_request_total of every verb but WATCH (a watch is one long request)."""
    status, body = cp.get_raw("/metrics", timeout=60)
    if status != 200:
        return float("nan")
    return sum(
        v
        for (n, ls), v in parse_metrics(body).items()
        if n == "apiserver_request_total" and ("verb", "WATCH") not in ls
    )


def compact_etcd(cp: ControlPlane) -> int:
    """Compact etcd to its current revision (etcd's v3 JSON gateway): every older version is gone."""
    assert cp.etcd_url is not None

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(cp.etcd_url + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    rev = int(post("/v3/kv/range", {"key": base64.b64encode(b"/registry/").decode()})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
    return rev


RELISTING = "(410 Gone): relisting"


def cache_ages(hook: RunningWebhook) -> dict[str, float]:
    """preflight_webhook_cache_age_seconds by resource: seconds since each cache was last in sync."""
    return {
        dict(ls)["resource"]: v for (n, ls), v in hook.metrics().items() if n == "preflight_webhook_cache_age_seconds"
    }


def relist_after_410(cp: ControlPlane, hook: RunningWebhook) -> tuple[float, int]:
    """(seconds from the apiserver's return until every cache is in sync again, caches relisted).

    In sync: the cache's age (webhook/cluster/cache.py: reset when a list completes or a watch
    opens) is younger than the restart, when nothing could sync. Relisted: the reflector's 410
    line in the log."""
    before = hook.log_text().count(RELISTING)
    compact_etcd(cp)
    began = time.perf_counter()
    cp.restart_apiserver()
    back = time.perf_counter()
    cp.kubectl("create", "configmap", f"scale-tick-{int(time.time())}", "-n", "default")  # the revision moves on

    def settled() -> bool:
        ages = cache_ages(hook)
        return bool(ages) and max(ages.values()) < time.perf_counter() - began

    wait_until("every cache in sync again", settled, timeout=WAIT, every=0.2)
    return max(0.0, time.perf_counter() - back), hook.log_text().count(RELISTING) - before


def through_apiserver(cp: ControlPlane, job: dict[str, Any], requests: int) -> tuple[float, float, int]:
    """p50, p99 (ms) and errors of dry-run creates of `job` through the apiserver (4 clients)."""
    ns = job["metadata"]["namespace"]
    url = f"{cp.server_url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs?dryRun=All"
    res = asyncio.run(
        run_load(
            url,
            json.dumps(job).encode(),
            ssl_context=cp._admin_ssl(),
            connections=4,
            requests=requests,
            duration=120,
            warmup=8,
            ok_statuses=(201,),
        )
    )
    return res.percentile(50), res.percentile(99), res.errors


def audit_controller(cp: ControlPlane) -> tuple[float, float]:
    """(seconds until the audit controller's first full scan ended, its RSS MiB then)."""
    took, rss, _ = audit_controller_memory(cp)
    return took, rss


def audit_controller_memory(
    cp: ControlPlane, qps: float | None = None, wait: float = WAIT
) -> tuple[float, float, float]:
    """(seconds until the audit controller's first full scan ended, its RSS and its peak VmHWM in MiB then).
    `qps`: the controller's audit.qps (the chart's 20 makes a scan of 10,000 jobs take ~50 minutes). A scan
    still running after `wait` seconds: the figures then, with the seconds negative."""
    assert cp.kubeconfig is not None
    (port,) = free_ports(1)
    config: list[str] = []
    if qps is not None:
        path = Path(tempfile.mkdtemp(prefix="pfw-scale-audit-")) / "config.yaml"
        path.write_text(yaml.safe_dump({"audit": {"qps": qps, "burst": max(40, int(qps * 2))}}))
        config = ["--config", str(path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "audit",
            *config,
            "--kubeconfig",
            str(cp.kubeconfig),
            "--metrics-port",
            str(port),
            "--metrics-host",
            "127.0.0.1",
            "--log-level",
            "warning",
        ],  # fmt: skip
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def scanned() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    m = parse_metrics(r.read().decode())
            except OSError:
                return False
            return any(n == "preflight_audit_last_full_scan_timestamp_seconds" and v > 0 for (n, _), v in m.items())

        try:
            # every 5 s, not 0.5: a scrape at 10,000 jobs renders ~28,000 findings series (~0.2 s of the
            # controller's CPU), and polling twice a second took 36 % of its CPU in the scan measured (py-spy)
            wait_until("the audit controller's first full scan", scanned, timeout=wait, every=5.0)
        except WebhookError:
            if wait == WAIT:
                raise
            return -(time.perf_counter() - t0), rss_mib(proc.pid), rss_mib(proc.pid, "VmHWM")
        return time.perf_counter() - t0, rss_mib(proc.pid), rss_mib(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if config:
            shutil.rmtree(Path(config[1]).parent, ignore_errors=True)


def reviews_at(hook: RunningWebhook, reviewed: dict[str, Any], requests: int, warmup: int) -> Any:
    """`requests` reviews of `reviewed` sent to `hook`'s /validate over 4 connections (at most 120 s)."""
    return asyncio.run(
        run_load(
            f"{hook.url}/validate?timeout=10s",
            review(reviewed),
            ssl_context=hook_ssl(hook),
            connections=4,
            requests=requests,
            duration=120,
            warmup=warmup,
        )
    )


def measure(cp: ControlPlane, percent: float, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"percent": percent, "load": load()}
    quiet0 = requests_total(cp)
    time.sleep(args.steady)  # the apiserver's own traffic alone (its leases): the baseline
    out["baseline"] = requests_total(cp) - quiet0
    pods0 = apiserver_count(cp, "pods", "LIST") + apiserver_count(cp, "pods", "WATCH")
    t0 = time.perf_counter()
    # the webhook's log outlives a failed run (a run at 100 % takes ~35 min to grow): its path is printed
    kept = Path(tempfile.mkdtemp(prefix="pfw-scale-webhook-"))
    try:
        with RunningWebhook(
            cp,
            config={},
            namespace_selector=SAMPLE_SELECTOR,
            probe_namespace="demo-bench",
            log_level="info",
            workdir=kept,
        ) as hook:  # info: the reflectors' relist lines
            out["ready_s"] = time.perf_counter() - t0
            pid = hook.pid
            assert pid is not None
            out["rss_ready"] = rss_mib(pid)
            out["pod_reads"] = apiserver_count(cp, "pods", "LIST") + apiserver_count(cp, "pods", "WATCH") - pods0
            job = sample("trainjob-good")
            for key, reviewed in (("inproc", job), ("inproc_dra", dra_trainjob())):
                res = reviews_at(hook, reviewed, args.reviews, warmup=16)
                out[key] = (res.percentile(50), res.percentile(99), res.errors)
            out["apiserver"] = through_apiserver(cp, job, args.reviews)
            r0, c0 = requests_total(cp), cpu_seconds(pid)
            time.sleep(args.steady)
            out["steady_requests"] = (requests_total(cp) - r0 - out["baseline"]) * 60.0 / args.steady
            out["idle_cpu"] = (cpu_seconds(pid) - c0) / args.steady
            out["relist_s"], out["relists"] = relist_after_410(cp, hook)
            out["rss_after"], out["rss_peak"] = rss_mib(pid), rss_mib(pid, "VmHWM")
    except BaseException:
        shutil.rmtree(kept / "certs", ignore_errors=True)  # no key outlives the run
        print(f"scale: the webhook's log is kept in {kept / 'webhook.log'}", file=sys.stderr, flush=True)
        raise
    shutil.rmtree(kept, ignore_errors=True)
    out["audit_s"], out["audit_rss"] = audit_controller(cp)
    return out


def memory(cp: ControlPlane, percent: float, args: argparse.Namespace, audit: bool) -> list[dict[str, Any]]:
    """--memory: `--repeat` fresh webhooks (and audit controllers when `audit`) on the cluster as grown: the
    webhook's RSS when ready, then its peak (VmHWM) after `--reviews` reviews of the sample TrainJob and of
    the DRA TrainJob (4 connections: the DRA check builds its index over the slices); the audit
    controller's RSS and peak at the end of its first full scan."""
    out: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        row: dict[str, Any] = {"percent": percent, "load": load()}
        t0 = time.perf_counter()
        with RunningWebhook(
            cp, config={}, namespace_selector=SAMPLE_SELECTOR, probe_namespace="demo-bench", log_level="warning"
        ) as hook:
            row["ready_s"] = time.perf_counter() - t0
            assert hook.pid is not None
            row["rss_ready"], row["hwm_ready"] = rss_mib(hook.pid), rss_mib(hook.pid, "VmHWM")
            for reviewed in (sample("trainjob-good"), dra_trainjob()):
                reviews_at(hook, reviewed, args.reviews, warmup=4)
            row["rss_after"], row["hwm"] = rss_mib(hook.pid), rss_mib(hook.pid, "VmHWM")
        print(f"scale: memory {row}", file=sys.stderr, flush=True)
        if audit:
            row["audit_s"], row["audit_rss"], row["audit_hwm"] = audit_controller_memory(
                cp, args.audit_qps, args.audit_wait or WAIT
            )
        print(f"scale: memory {row}", file=sys.stderr, flush=True)
        out.append(row)
    return out


def render_memory(rows: list[dict[str, Any]], grew: list[str], command: str, jobs: int) -> str:
    lines = [
        *header(command),
        "Objects created per level: " + "; ".join(grew) + (f"; {jobs:,} waiting (suspended) TrainJobs" if jobs else ""),
        "",
        "| level | load | webhook ready (s) | RSS ready / peak then (MiB) | after the reviews: RSS / peak (MiB) "
        "| audit: first full scan (s) | audit RSS / peak (MiB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        audit = ("-", "-")
        if "audit_s" in r:
            took = f"{r['audit_s']:.1f}" if r["audit_s"] >= 0 else f"not done after {-r['audit_s']:.0f}"
            audit = (took, f"{r['audit_rss']:.0f} / {r['audit_hwm']:.0f}")
        lines.append(
            f"| {r['percent']:g} % | {r['load']} | {r['ready_s']:.1f} | {r['rss_ready']:.0f} / {r['hwm_ready']:.0f} "
            f"| {r['rss_after']:.0f} / {r['hwm']:.0f} | {audit[0]} | {audit[1]} |"
        )
    return "\n".join(lines)


def bench_memory(cp: ControlPlane, args: argparse.Namespace, command: str) -> str:
    levels = [float(x) for x in args.scale.split(",") if x.strip()]
    have: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    grew: list[str] = []
    jobs = 0
    for p in levels:
        took = asyncio.run(grow(cp, have, p, skip=("pods",) if args.no_pods else ()))
        grew.append(f"{p:g} %: " + ", ".join(f"{k} {v:.0f} s" for k, v in took.items()))
        if args.waiting_jobs and not jobs:
            jobs = args.waiting_jobs
            took_jobs = populate_waiting_jobs(cp, jobs, max(1, jobs // 10))
            print(f"scale: {jobs} waiting TrainJobs in {took_jobs:.0f}s", file=sys.stderr, flush=True)
        rows += memory(cp, p, args, audit=not args.no_audit and p == levels[-1])
    return render_memory(rows, grew, command, jobs)


def bench_scale(cp: ControlPlane, args: argparse.Namespace, command: str) -> str:
    levels = [float(x) for x in args.scale.split(",") if x.strip()]
    have: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    grew: list[str] = []
    for p in levels:
        took = asyncio.run(grow(cp, have, p, skip=("pods",) if args.no_pods else ()))
        grew.append(f"{p:g} %: " + ", ".join(f"{k} {v:.0f} s" for k, v in took.items()))
        m = measure(cp, p, args)
        print(f"scale: {m}", file=sys.stderr, flush=True)
        rows.append(m)
    return render(rows, grew, command)


def render(rows: list[dict[str, Any]], grew: list[str], command: str) -> str:
    def f(x: float, nd: int = 0) -> str:
        return f"{x:.{nd}f}"

    head = "| | " + " | ".join(f"{r['percent']:g} %" for r in rows) + " |"
    sep = "|---|" + "---:|" * len(rows)
    counts = [
        ", ".join(f"{k} {target(k, r['percent']):,}" for k in ("nodes", "namespaces", "pods", "resourceslices"))
        for r in rows
    ]

    def line(name: str, vals: list[str]) -> str:
        return f"| {name} | " + " | ".join(vals) + " |"

    first, last = rows[0], rows[-1]
    lines = [
        "## Scale: the webhook and the audit controller at 1 / 10 / 100 % of Kubernetes' thresholds",
        "",
        *header(command),
        "Objects created per level (concurrent POSTs, 48 in flight): " + "; ".join(grew) + ".",
        "",
        head,
        sep,
        line("nodes, namespaces, pods, ResourceSlices", counts),
        line("webhook: time to ready (s)", [f(r["ready_s"], 1) for r in rows]),
        line("webhook: RSS when ready (MiB)", [f(r["rss_ready"]) for r in rows]),
        line("webhook: peak RSS, VmHWM (MiB)", [f(r["rss_peak"]) for r in rows]),
        line("relist after 410 Gone (s; caches relisted)", [f"{r['relist_s']:.1f} ({r['relists']})" for r in rows]),
        line("/validate p50 / p99 (ms), 4 connections", [f"{r['inproc'][0]:.1f} / {r['inproc'][1]:.1f}" for r in rows]),
        line(
            "/validate of the DRA TrainJob p50 / p99 (ms)",
            [f"{r['inproc_dra'][0]:.1f} / {r['inproc_dra'][1]:.1f}" for r in rows],
        ),
        line(
            "dry-run create via apiserver p50 / p99 (ms)",
            [f"{r['apiserver'][0]:.0f} / {r['apiserver'][1]:.0f}" for r in rows],
        ),
        line("apiserver requests/min, steady state", [f(max(0.0, r["steady_requests"]), 1) for r in rows]),
        line("webhook CPU while idle (% of a core)", [f(100 * r["idle_cpu"], 2) for r in rows]),
        line("Pod LIST/WATCH requests at start", [f(r["pod_reads"]) for r in rows]),
        line("audit controller: start to first full scan (s)", [f(r["audit_s"], 1) for r in rows]),
        line("audit controller: RSS then (MiB)", [f(r["audit_rss"]) for r in rows]),
        line("load average at the start", [r["load"] for r in rows]),
        "",
    ]
    full = last["percent"] >= 100
    at = f"at {last['percent']:g} %"
    limit, audit_limit = chart_limit_mib(), chart_limit_mib("audit")

    def judged(ok: bool, what: str) -> str:
        return verdict(ok, what) if full else f"not judged: the target is at 100 %, the largest level run is {at}"

    p99_ratio = last["inproc"][1] / first["inproc"][1] if first["inproc"][1] else float("nan")
    lines += [
        f"- Webhook RSS {at}: {last['rss_peak']:.0f} MiB; the chart's limit is {limit:.0f} MiB, "
        f"{limit / 1.3:.0f} MiB with 30 % headroom → " + judged(last["rss_peak"] <= limit / 1.3, "RSS with headroom"),
        f"- Audit controller RSS {at}: {last['audit_rss']:.0f} MiB; its limit {audit_limit:.0f} MiB → "
        + judged(last["audit_rss"] <= audit_limit / 1.3, "RSS with headroom"),
        f"- Ready in {last['ready_s']:.1f} s {at} → " + judged(last["ready_s"] <= 60, "≤ 60 s"),
        f"- /validate p99 {at} is {p99_ratio:.2f}× the p99 at {first['percent']:g} % → "
        + judged(p99_ratio <= 1.2, "≤ 1.2×"),
        f"- Pod LIST/WATCH requests at start: {', '.join(f(r['pod_reads']) for r in rows)} → "
        + verdict(all(r["pod_reads"] == 0 for r in rows), "no list or watch grows with the Pod count"),
    ]
    return "\n".join(lines)


def _cached_slices(count: int) -> list[dict[str, Any]]:
    """:func:`resource_slice` for `count` nodes as the cache holds them: decoded from JSON (as the
    reflector receives them), with the metadata the apiserver adds, slimmed (webhook/cluster/cache.py)."""
    from webhook.cluster.cache import slim

    out = []
    for i in range(count):
        s = resource_slice(i)
        s["metadata"].update(
            {
                "resourceVersion": str(1000 + i),
                "uid": str(uuid.UUID(int=2**64 + i)),
                "creationTimestamp": "2026-12-01T00:00:00Z",
                "generation": 1,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": s["spec"]["nodeName"], "uid": str(uuid.UUID(int=i))}
                ],
                "managedFields": [
                    {"manager": "gpu-kubelet-plugin", "operation": "Update", "apiVersion": "resource.k8s.io/v1",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:devices": {}, "f:driver": {}}}}
                ],
            }
        )  # fmt: skip
        out.append(slim("resourceslices", json.loads(json.dumps(s))))
    return out


def slice_cache_bytes(count: int) -> tuple[float, float]:
    """(bytes the ResourceSlice cache holds for `count` of :func:`resource_slice`, bytes Device
    Allocation keeps beside it: its index of the slices by node and their devices, kept per slice
    version). tracemalloc: what the decoded, slimmed objects and the indexes allocate and keep."""
    import gc
    import tracemalloc

    from webhook.cluster import cache as cache_module
    from webhook.models.dra import allocate
    from webhook.models.nodes import term_matches

    nodes = [{"metadata": {"name": f"scale-node-{i:05d}"}} for i in range(count)]
    cache_module._VALUES.clear()  # the values shared with what was read before count too
    allocate._PREPARED.clear()  # and the devices the reviews before read
    selectors = [
        DEVICE_CLASSES[0]["spec"]["selectors"][0]["cel"]["expression"],
        f"device.attributes['{DRA_DRIVER}'].productName == '{H100}'",
    ]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    cache = cache_module.ResourceCache("resourceslices")
    cache.replace(_cached_slices(count), "1")
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    index = allocate.SliceIndex(cache.objects())
    for n in nodes:
        for d in index.devices(n, term_matches)[0]:
            for e in selectors:  # the answers a review keeps on each device
                d.matches(e)
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before - held
    tracemalloc.stop()
    assert len(cache) == count
    return float(held), float(kept)


def _cluster_objects(percent: float) -> dict[str, list[dict[str, Any]]]:
    """What :func:`grow` creates at `percent`, as the apiserver would list it (namespace and a
    resourceVersion set; Pods left out: the webhook never reads them), by cached resource."""
    from webhook.cluster.cache import SPECS_BY_RESOURCE

    out: dict[str, list[dict[str, Any]]] = {}

    def put(resource: str, obj: dict[str, Any], ns: str | None = None) -> None:
        if ns:
            obj["metadata"]["namespace"] = ns
        obj["metadata"]["resourceVersion"] = "1"
        out.setdefault(resource, []).append(obj)

    ns_count = max(target("namespaces", percent), target("serviceaccounts", percent) // 3 + 1)
    ns_count = max(ns_count, target("services", percent))
    used = {k: "0" for k in QUOTA_HARD}
    for kind in ORDER:
        hi = ns_count if kind == "namespaces" else target(kind, percent)
        if kind == "pods":
            continue
        if kind == "nodes":
            for i in range(hi):
                put("nodes", real_node(i))
        elif kind == "resourcequotas":
            for i in range(hi):
                quota = {"metadata": {"name": "compute"}, "spec": {"hard": QUOTA_HARD}}
                put("resourcequotas", {**quota, "status": {"hard": QUOTA_HARD, "used": used}}, _ns(2 * i % ns_count))
        else:
            for path, body in _objects(kind, 0, hi, ns_count):
                resource = path.rsplit("/", 1)[1]
                if resource in SPECS_BY_RESOURCE:  # EndpointSlices are not cached
                    ns = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None
                    put(resource, body, ns)
    return out


def _realistic(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    """`obj` with the metadata the apiserver adds: uid, creationTimestamp, a unique resourceVersion and
    one managedFields entry naming every field set (what a client's create leaves)."""

    def fields(o: Any) -> Any:
        return {f"f:{k}": fields(v) for k, v in o.items()} if isinstance(o, dict) else {}

    meta = obj["metadata"]
    managed = {"manager": "scale-bench", "operation": "Update", "apiVersion": "v1", "time": "2026-12-06T02:30:00Z",
               "fieldsType": "FieldsV1", "fieldsV1": fields({k: v for k, v in obj.items() if k != "status"})}  # fmt: skip
    meta.update(uid=str(uuid.UUID(int=rv)), creationTimestamp="2026-12-06T02:30:00Z", resourceVersion=str(rv))
    meta["managedFields"] = [managed]
    return obj


def write_list_pages(percent: float, into: Path) -> dict[str, int]:
    """Every cached resource at `percent` as the apiserver's list pages of 500 (JSON files); pages per resource."""
    rv = 100_000
    pages: dict[str, int] = {}
    for resource, objs in _cluster_objects(percent).items():
        for n, i in enumerate(range(0, len(objs), 500)):
            items = []
            for o in objs[i : i + 500]:
                rv += 1
                items.append(_realistic(o, rv))
            doc = {"kind": "List", "metadata": {"resourceVersion": "99"}, "items": items}
            (into / f"{resource}.{n}.json").write_text(json.dumps(doc))
            pages[resource] = n + 1
    return pages


def replay_lists_child(directory: Path) -> dict[str, Any]:
    """In a fresh process: what serve imports, then one Reflector per resource lists its pages from
    `directory` concurrently, as the webhook's do at start (read as bytes, decoded with json.loads as
    KubeClient does, the heap frozen after each list). RSS before, after, and the peak in between."""
    import gc

    import webhook.checks  # (what serve holds anyway)
    import webhook.server  # noqa: F401
    from webhook.cluster.cache import SPECS_BY_RESOURCE, Reflector, freeze_heap, trim_heap

    def status(field: str) -> float:
        return rss_mib(os.getpid(), field)

    class Pages:
        def __init__(self, resource: str) -> None:
            self.resource, self.n = resource, 0

        async def request(self, *_: Any, **__: Any) -> dict[str, Any]:
            raw = (directory / f"{self.resource}.{self.n}.json").read_bytes()
            await asyncio.sleep(0)  # another reflector's page may arrive meanwhile
            doc: dict[str, Any] = json.loads(raw)
            del raw
            self.n += 1
            if (directory / f"{self.resource}.{self.n}.json").exists():
                doc["metadata"]["continue"] = str(self.n)
            return doc

    resources = sorted({p.name.split(".")[0] for p in directory.glob("*.json")})
    gc.collect()
    trim_heap()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
    base = status("VmRSS")

    async def go() -> list[Reflector]:
        refl = [Reflector(SPECS_BY_RESOURCE[r], Pages(r), after_list=freeze_heap) for r in resources]
        await asyncio.gather(*(r.list_once() for r in refl))
        return refl

    reflectors = asyncio.run(go())
    out = {"base": base, "after": status("VmRSS"), "peak": status("VmHWM")}
    trim_heap()
    out["trimmed"] = status("VmRSS")
    out["objects"] = sum(len(r.cache) for r in reflectors)
    return out


def _replayed(percent: float, child: str) -> dict[str, Any]:
    """The list pages of `percent` written to a temporary directory, replayed by this script's `child`
    mode in a fresh process: the JSON object it prints last."""
    with tempfile.TemporaryDirectory(prefix="pfw-pages-") as d:
        write_list_pages(percent, Path(d))
        got = subprocess.run([sys.executable, __file__, child, d], check=True, capture_output=True, text=True)
    out: dict[str, Any] = json.loads(got.stdout.strip().splitlines()[-1])
    return out


def replay_lists(percents: list[float]) -> str:
    rows = [
        "| level | cached objects | RSS before (MiB) | + after the lists | + peak | + after malloc_trim |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in percents:
        r = _replayed(p, "--replay-child")
        rows.append(
            f"| {p:g} % | {r['objects']:,} | {r['base']:.0f} | {r['after'] - r['base']:.0f} "
            f"| {r['peak'] - r['base']:.0f} | {r['trimmed'] - r['base']:.0f} |"
        )
    return "\n".join(rows)


def replay_audit_child(directory: Path) -> dict[str, Any]:
    """In a fresh process: the view's caches listed from `directory` as in :func:`replay_lists_child`, then the
    audit controller's watches started on them (`AuditController.start_watches`, its own Reflectors listing the
    same pages; a kind without pages, the view's or the controller's, lists empty), synced. The objects the
    controller's own watches hold, the bytes tracemalloc saw allocated by its start, the RSS it added."""
    import gc
    import tracemalloc

    import webhook.checks  # (what the audit process holds anyway)
    from webhook.audit.controller import AuditController
    from webhook.cluster.cache import SPECS_BY_RESOURCE, Reflector, freeze_heap, trim_heap
    from webhook.config import Settings

    class Pages:
        """The apiserver as a Reflector sees it: each list answers `directory`'s pages of its resource (none:
        an empty list), each watch stays open and says nothing."""

        async def request(self, _method: str, path: str, query: dict[str, Any], **__: Any) -> dict[str, Any]:
            resource, n = path.rsplit("/", 1)[-1], int(query.get("continue") or 0)
            page = directory / f"{resource}.{n}.json"
            await asyncio.sleep(0)
            if not page.exists():
                return {"items": [], "metadata": {"resourceVersion": "99"}}
            doc: dict[str, Any] = json.loads(page.read_bytes())
            if (directory / f"{resource}.{n + 1}.json").exists():
                doc["metadata"]["continue"] = str(n + 1)
            return doc

        async def stream(self, *_: Any, **__: Any) -> Any:
            await asyncio.Event().wait()
            yield {}

    class View:
        """What AuditController reads of the view: its client, what is served, its caches, what it never reads."""

        def __init__(self, reflectors: dict[str, Reflector]) -> None:
            self.client, self.reflectors, self.never_read = Pages(), reflectors, set[str]()

        def served(self, _group_version: str) -> bool:
            return True

    async def go() -> dict[str, Any]:
        view = View({r: Reflector(spec, Pages(), after_list=freeze_heap) for r, spec in SPECS_BY_RESOURCE.items()})
        await asyncio.gather(*(r.list_once() for r in view.reflectors.values()))
        gc.collect()
        trim_heap()
        out: dict[str, Any] = {"view_objects": sum(len(r.cache) for r in view.reflectors.values())}
        out["base"] = rss_mib(os.getpid(), "VmRSS")
        tracemalloc.start()
        c = AuditController(Settings(), view, checks=webhook.checks.all_checks(), sinks=[])  # type: ignore[arg-type]
        c.start_watches()
        assert await c.wait_synced(600)
        gc.collect()
        out["traced"] = tracemalloc.get_traced_memory()[0] / 2**20
        tracemalloc.stop()
        trim_heap()
        out["rss"] = rss_mib(os.getpid(), "VmRSS") - out["base"]
        out["watches"] = len(c.reflectors)
        out["objects"] = sum(len(r.cache) for r in c.reflectors.values())
        out["followed"] = sorted(getattr(c, "followed", {}))
        await c.close()
        return out

    return asyncio.run(go())


def replay_audit(percents: list[float]) -> str:
    rows = [
        "| level | view's cached objects | controller's own watches | objects they hold | traced MiB | RSS added (MiB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in percents:
        r = _replayed(p, "--replay-audit-child")
        rows.append(
            f"| {p:g} % | {r['view_objects']:,} | {r['watches']} | {r['objects']:,} | {r['traced']:.1f} "
            f"| {r['rss']:.0f} |"
        )
        rows.append(f"<!-- following the view's caches: {', '.join(r['followed']) or 'none'} -->")
    return "\n".join(rows)


def review_in_process(node_counts: list[int], reviews: int = 20) -> str:
    """CPU per review of the sample TrainJob (its runtime, Dry Run off) and of :func:`dra_trainjob`
    (4 pods, 8 H100s each by DRA) against a cluster view that holds N of :func:`real_node`'s Nodes and,
    for the DRA job, N of :func:`resource_slice`'s ResourceSlices and the :data:`DEVICE_CLASSES`, in
    this process: what a review costs as the cluster grows, without a control plane. The view returns
    its cached objects as the live one does (no copy). Also the Device Allocation check alone, and the
    bytes the ResourceSlice cache holds."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fakeview import FakeView

    from webhook.checks import all_checks
    from webhook.config import Settings
    from webhook.deadline import Deadline
    from webhook.preflight import evaluate

    class CachedView(FakeView):  # type: ignore[misc]
        def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
            return [
                o
                for o in self.objects.get(resource, [])
                if namespace is None or (o.get("metadata") or {}).get("namespace") == namespace
            ]

        def cache_version(self, resource: str) -> tuple[int, int] | None:
            return (-count, 0)  # as the live view's, one per view: nothing changes between the reviews

    job, dra_job = sample("trainjob-good"), dra_trainjob()
    runtime = yaml.safe_load((ROOT / "e2e" / "samples" / "01-clustertrainingruntime.yaml").read_text())
    prereqs = [d for d in yaml.safe_load_all((ROOT / "e2e" / "samples" / "00-prerequisites.yaml").read_text()) if d]
    prereqs += [body for _, body in dra_prereqs()]
    settings = Settings.model_validate({"checks": {"Dry Run": "off"}})
    checks = all_checks()
    dra_check = [c for c in checks if c.name == "Device Allocation"]
    rows = [
        "| Nodes (ResourceSlices) | TrainJob, CPU ms per review | DRA TrainJob, CPU ms per review "
        "| of which Device Allocation | its verdict | ResourceSlice cache | the check's slice index |",
        "|---:|---:|---:|---:|---|---:|---:|",
    ]
    for count in node_counts:
        nodes = []
        for i in range(count):
            n = real_node(i)
            n["metadata"]["resourceVersion"] = "1"
            n["status"].pop("images", None)  # the cache slims them away (webhook/cluster/cache.py)
            nodes.append(n)
        objects: dict[str, list[dict[str, Any]]] = {
            "nodes": nodes,
            "clustertrainingruntimes": [runtime],
            "resourceslices": _cached_slices(count),
            "deviceclasses": [json.loads(json.dumps(c)) for c in DEVICE_CLASSES],
        }
        for d in prereqs:
            objects.setdefault(d["kind"].lower() + "s", []).append(d)
        view = CachedView(
            objects,
            secrets={("demo-train", "hf-token"): {"token"}},
            served={"v1", "jobset.x-k8s.io/v1alpha2", "trainer.kubeflow.org/v1alpha1", "resource.k8s.io/v1"},
        )

        async def cpu(body: dict[str, Any], only: list[Any], view: CachedView = view) -> tuple[float, Any]:
            async def once() -> Any:
                return await evaluate(body, settings=settings, deadline=Deadline(30), view=view, checks=only)

            first = await once()
            t0 = time.process_time()
            for _ in range(reviews):
                await once()
            return (time.process_time() - t0) / reviews * 1000, first

        plain, _ = asyncio.run(cpu(job, checks))
        dra, _ = asyncio.run(cpu(dra_job, checks))
        alone, res = asyncio.run(cpu(dra_job, dra_check))
        got = [r for r in res.results.checks if r.name == "Device Allocation"]
        what = f"{got[0].status.value}: {got[0].message[:70]}" if got else "(not run)"
        held, kept = slice_cache_bytes(count)
        rows.append(
            f"| {count:,} | {plain:.1f} | {dra:.1f} | {alone:.1f} | {what} "
            f"| {held / 2**20:.1f} MiB ({held / count / 1024:.1f} KiB a slice) "
            f"| {kept / 2**20:.1f} MiB ({kept / count / 1024:.1f} KiB a slice) |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows)


def review_whole_in_process(percents: list[float], reviews: int = 200) -> str:
    """CPU per review of the sample TrainJob (its runtime, Dry Run off) in this process, against a
    view that holds every object the scale run creates at each percent (:func:`_cluster_objects`)
    in the webhook's own caches (webhook/cluster/cache.py ResourceCache: slimmed, indexed by
    namespace, returned without a copy, versioned as the live view's); and the time of one full
    collection of the cyclic garbage collector over that heap, as it is and frozen
    (cache.freeze_heap)."""
    import gc

    sys.path.insert(0, str(ROOT / "tests"))
    from fakeview import FakeView

    from webhook.checks import all_checks
    from webhook.cluster.cache import SPECS_BY_RESOURCE, ResourceCache, freeze_heap
    from webhook.config import Settings
    from webhook.deadline import Deadline
    from webhook.preflight import evaluate

    class CachedView(FakeView):  # type: ignore[misc]
        def __init__(self, caches: dict[str, ResourceCache], **kw: Any) -> None:
            super().__init__({}, **kw)
            self.caches = caches

        def _cache(self, resource: str, namespace: str | None) -> tuple[ResourceCache | None, str | None]:
            spec = SPECS_BY_RESOURCE.get(resource)
            return self.caches.get(resource), namespace if spec is not None and spec.namespaced else None

        def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
            cache, ns = self._cache(resource, namespace)
            return [] if cache is None else cache.objects(ns)

        def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
            cache, ns = self._cache(resource, namespace)
            return None if cache is None else cache.get(ns, name)

        def cache_version(self, resource: str) -> tuple[int, int] | None:
            cache = self.caches.get(resource)
            return None if cache is None else (cache.generation, cache.changes)

    job = sample("trainjob-good")
    runtime = yaml.safe_load((ROOT / "e2e" / "samples" / "01-clustertrainingruntime.yaml").read_text())
    prereqs = [d for d in yaml.safe_load_all((ROOT / "e2e" / "samples" / "00-prerequisites.yaml").read_text()) if d]
    settings = Settings.model_validate({"checks": {"Dry Run": "off"}})
    checks = all_checks()
    rows = [
        "| objects | cached objects | CPU ms per review | full GC collection (ms): as is / frozen |",
        "|---:|---:|---:|---:|",
    ]
    for count in percents:
        objects = _cluster_objects(count)
        objects["clustertrainingruntimes"] = [runtime]
        for d in prereqs:
            if d["kind"].lower() + "s" in SPECS_BY_RESOURCE:
                objects.setdefault(d["kind"].lower() + "s", []).append(d)
        caches = {}
        for resource, objs in objects.items():
            caches[resource] = ResourceCache(resource)
            caches[resource].replace(objs, "1")
        served = {"v1", "jobset.x-k8s.io/v1alpha2", "trainer.kubeflow.org/v1alpha1", "kueue.x-k8s.io/v1beta2"}
        served.add("resource.k8s.io/v1")
        view = CachedView(caches, secrets={("demo-train", "hf-token"): {"token"}}, served=served)

        async def run(view: CachedView = view) -> float:
            async def once() -> Any:
                return await evaluate(job, settings=settings, deadline=Deadline(30), view=view, checks=checks)

            await once()
            t0 = time.process_time()
            for _ in range(reviews):
                await once()
            return (time.process_time() - t0) / reviews * 1000

        cpu = asyncio.run(run())
        t0 = time.perf_counter()
        gc.collect()
        as_is = (time.perf_counter() - t0) * 1000
        freeze_heap()
        t0 = time.perf_counter()
        gc.collect()
        frozen = (time.perf_counter() - t0) * 1000
        gc.unfreeze()
        held = sum(len(c) for c in caches.values())
        rows.append(f"| {count:g} % | {held:,} | {cpu:.2f} | {as_is:.0f} / {frozen:.1f} |")
        del view, caches, objects
        gc.collect()
    return "\n".join(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="1,10", help="percents of the thresholds, in order (default 1,10)")
    p.add_argument("--reviews", type=int, default=200, help="measured reviews per latency figure (default 200)")
    p.add_argument("--steady", type=float, default=60.0, help="seconds of steady state measured (default 60)")
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks/ alone")
    p.add_argument(
        "--in-process", metavar="N,N", help="only the CPU per review against N Nodes in process (no control plane)"
    )
    p.add_argument(
        "--in-process-objects",
        metavar="P,P",
        help="only the CPU per review in process against every object the run creates at P %% (no control plane), "
        "and a full garbage collection over that heap, as is and frozen",
    )
    p.add_argument(
        "--no-pods",
        action="store_true",
        help="create no Pods: they serve only the 'no Pod list at start' target, and take 12 of the 35 minutes to 100 %%",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="only the memory: grow each level once, then start --repeat fresh webhooks and audit controllers on it "
        "(RSS when ready, peak after --reviews reviews of the sample and the DRA TrainJob, the audit controller's "
        "RSS and peak after its first full scan); prints, writes nothing",
    )
    p.add_argument("--repeat", type=int, default=1, help="--memory: processes started per level (default 1)")
    p.add_argument(
        "--no-audit",
        action="store_true",
        help="--memory: the webhook only (else: the audit controller too, at the last level)",
    )
    p.add_argument(
        "--audit-qps",
        type=float,
        metavar="QPS",
        help="--memory: the audit controller's audit.qps (default: the chart's 20; a first scan of 10,000 jobs "
        "takes ~50 min at 20, ~6 at 1000)",
    )
    p.add_argument(
        "--audit-wait",
        type=float,
        metavar="S",
        help="--memory: wait at most S seconds for the audit controller's first full scan, then take its "
        "figures as they are (default: fail after 900 s)",
    )
    p.add_argument(
        "--waiting-jobs",
        type=int,
        default=0,
        metavar="N",
        help="--memory: also create N suspended TrainJobs (10 a namespace, bench/audit_scale.py's) for the audit "
        "controller to judge, after the first level's growth",
    )
    p.add_argument(
        "--replay-lists",
        metavar="P,P",
        help="only the caches' memory in process (no control plane): every resource at P %% as list pages of 500 "
        "with the apiserver's metadata, listed by concurrent Reflectors in a fresh process; RSS before, after, peak",
    )
    p.add_argument("--replay-child", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument(
        "--replay-audit",
        metavar="P,P",
        help="only the audit controller's own watches in process (no control plane): the view's caches listed from "
        "pages as --replay-lists, then the controller's watches started and synced on the same pages; the objects "
        "they hold, the bytes tracemalloc saw, the RSS added",
    )
    p.add_argument("--replay-audit-child", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument(
        "--no-build",
        action="store_true",
        help="use the control plane binaries already in the cache (no e2e/build.sh: while another build runs)",
    )
    args = p.parse_args()
    if args.replay_child:
        print(json.dumps(replay_lists_child(Path(args.replay_child))))
        return 0
    if args.replay_audit_child:
        print(json.dumps(replay_audit_child(Path(args.replay_audit_child))))
        return 0
    if args.replay_audit:
        print(replay_audit([float(x) for x in args.replay_audit.split(",")]))
        return 0
    if args.replay_lists:
        print(replay_lists([float(x) for x in args.replay_lists.split(",")]))
        return 0
    if args.in_process_objects:
        print(review_whole_in_process([float(x) for x in args.in_process_objects.split(",")]))
        return 0
    command = " ".join([".venv/bin/python bench/scale.py", *(shlex.quote(a) for a in sys.argv[1:])])
    if args.in_process:
        at_start = load()
        table = review_in_process([int(x) for x in args.in_process.split(",")], reviews=min(args.reviews, 20))
        text = "\n".join(
            [
                "## DRA at scale, in process: a review and the ResourceSlice cache as the cluster grows",
                "",
                *header(command),
                f"Load average at the start: {at_start}. CPU per review over {min(args.reviews, 20)} reviews after one "
                "(the first reads the slices and evaluates the selectors); memory by tracemalloc.",
                "",
                table,
                "",
            ]
        )
        print(text, flush=True)
        if not args.no_write:
            write_section("cluster-dra-scale", text)
        return 0
    if args.memory:
        with ControlPlane(service_cidr=SERVICE_CIDR, build=not args.no_build) as cp:
            setup_samples(cp)
            print(bench_memory(cp, args, command), flush=True)
        return 0
    with ControlPlane(service_cidr=SERVICE_CIDR, build=not args.no_build) as cp:
        setup_samples(cp)
        text = bench_scale(cp, args, command)
    print(text, flush=True)
    if not args.no_write:
        write_section("cluster-scale", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
