"""CPU per review of the checks issue 10 added, in process, against cached objects of growing size:

    .venv/bin/python bench/stack_checks.py [-n 200]

* Network Policies: the sample AIPerfJob (endpoint Service in another namespace) with N
  NetworkPolicies in its namespace (half select other pods, half allow egress to other
  namespaces; one default-deny-egress), so every path is evaluated against every policy;
* Node Selector Match: a pod group no node takes, with N Karpenter NodePools and N Kueue
  ResourceFlavors that do not match (every one is evaluated), the cluster-autoscaler ConfigMap
  read answered at once (404).

Prints one Markdown row per (check, N): median and p95 ms of the check's `run()`, and the load
average; docs/benchmarks.md records a run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhook.checks.base import CheckContext  # noqa: E402
from webhook.checks.netpol import NetworkPolicies  # noqa: E402
from webhook.checks.nodes import NodeSelectorMatch  # noqa: E402
from webhook.config import Settings  # noqa: E402
from webhook.deadline import Deadline  # noqa: E402
from webhook.workloads import build_workload, import_adapters  # noqa: E402

SAMPLE = ROOT / "e2e" / "samples" / "aiperfjob-good.yaml"
CLUSTER_SCOPED = {"namespaces", "nodes", "nodepools", "resourceflavors"}


class View:
    """The part of the ClusterView these checks read, over in-memory objects."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects

    def list_cached(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        objs = self.objects.get(resource, [])
        if namespace is None or resource in CLUSTER_SCOPED:
            return objs
        return [o for o in objs if o["metadata"].get("namespace") == namespace]

    def get_cached(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        for o in self.list_cached(resource, namespace):
            if o["metadata"]["name"] == name:
                return o
        return None

    def cache_age(self, resource: str) -> float | None:
        return 1.0

    def served(self, gv: str) -> bool:
        return True

    async def get_object(self, *args: Any, **kw: Any) -> dict[str, Any] | None:
        return None


def _ns(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}


def netpol_objects(n: int) -> dict[str, list[dict[str, Any]]]:
    pols: list[dict[str, Any]] = [
        {
            "metadata": {"name": "deny", "namespace": "demo-bench"},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"]},
        }
    ]
    for i in range(n - 1):
        if i % 2:
            spec = {"podSelector": {"matchLabels": {"app": f"other-{i}"}}, "ingress": [{}]}
        else:
            spec = {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [{"namespaceSelector": {"matchLabels": {"team": f"t{i}"}}}],
                        "ports": [{"port": 1000 + i}],
                    }
                ],
            }
        pols.append({"metadata": {"name": f"p{i}", "namespace": "demo-bench"}, "spec": spec})
    svc = {
        "metadata": {"name": "llm", "namespace": "models"},
        "spec": {"ports": [{"port": 8000}], "selector": {"app": "llm"}, "clusterIP": "10.96.0.9"},
    }
    return {
        "namespaces": [_ns("demo-bench"), _ns("models"), _ns("kube-system")],
        "services": [svc],
        "networkpolicies": pols if n else [],
    }


def placement_objects(n: int) -> dict[str, list[dict[str, Any]]]:
    node = {
        "metadata": {"name": "cpu-1", "labels": {"pool": "cpu"}},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "8"}},
    }
    pools = [
        {
            "metadata": {"name": f"np{i}"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"pool": f"p{i}"}},
                    "spec": {"requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
                }
            },
        }
        for i in range(n)
    ]
    flavors = [{"metadata": {"name": f"rf{i}"}, "spec": {"nodeLabels": {"pool": f"p{i}"}}} for i in range(n)]
    return {"nodes": [node], "nodepools": pools, "resourceflavors": flavors}


async def measure(check: Any, wl: Any, view: View, n: int) -> list[float]:
    out = []
    for _ in range(n):
        ctx = CheckContext(workload=wl, deadline=Deadline(10), settings=Settings(), view=view)  # type: ignore[arg-type]
        t = time.perf_counter()
        await check.run(ctx)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    args = ap.parse_args()
    import_adapters()
    job = yaml.safe_load(SAMPLE.read_text())
    job["spec"]["benchmark"]["endpoint"]["urls"] = ["http://llm.models.svc.cluster.local:8000"]
    wl = build_workload(job, settings=Settings(), namespace="demo-bench")
    placed = dict(job, spec={**job["spec"], "podTemplate": {"nodeSelector": {"pool": "gpu"}}})
    wl_sel = build_workload(placed, settings=Settings(), namespace="demo-bench")
    print("| check | objects | median ms | p95 ms | load avg |")
    print("|---|---:|---:|---:|---:|")
    for size in (0, 10, 100, 1000):
        for name, check, w, objs in (
            ("Network Policies", NetworkPolicies(), wl, netpol_objects(size)),
            ("Node Selector Match", NodeSelectorMatch(), wl_sel, placement_objects(size)),
        ):
            times = asyncio.run(measure(check, w, View(objs), args.n))
            times.sort()
            what = (
                f"{size} NetworkPolicies"
                if name == "Network Policies"
                else f"{size} NodePools + {size} ResourceFlavors"
            )
            print(
                f"| {name} | {what} | {statistics.median(times):.3f} | {times[int(len(times) * 0.95) - 1]:.3f} "
                f"| {os.getloadavg()[0]:.1f} |"
            )


if __name__ == "__main__":
    main()
