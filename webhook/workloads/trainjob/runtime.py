"""Reading a replicatedJob the way Trainer's plugins do: its pod spec, its role (ancestor step),
a container by name, the resources per node and the GPU and CPU counts in them
(T:pkg/runtime/runtime.go), and the env + port every torch-like framework sets on `node`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from webhook import quantity
from webhook.workloads.trainjob.merge import upsert_env
from webhook.workloads.trainjob.schema import ANCESTOR_LABEL

#: T:pkg/constants ContainerTrainerPort: the rendezvous port torch, jax and xgboost open on `node`
TRAINER_PORT = 29500
#: the pod's JobSet completion index, the rank Trainer hands to each framework
COMPLETION_INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def container(pod: dict[str, Any], name: str) -> dict[str, Any] | None:
    for c in pod.get("containers") or []:
        if c.get("name") == name:
            return c
    return None


def pod_spec(rj: dict[str, Any]) -> dict[str, Any]:
    tmpl = rj.setdefault("template", {})
    job_spec = tmpl.setdefault("spec", {})
    pod = job_spec.setdefault("template", {})
    return pod.setdefault("spec", {})


def role_of(rj: dict[str, Any]) -> str | None:
    labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(ANCESTOR_LABEL)


def node_resources(ordered: list[dict[str, Any]]) -> dict[str, Any]:
    """T:pkg/runtime/runtime.go ExtractResourcePerNodeFromRuntime: container `node` of the first job
    named `node` or labelled trainer that has resources."""
    for rj in ordered:
        if rj.get("name") == "node" or role_of(rj) == "trainer":
            for c in pod_spec(rj).get("containers") or []:
                if c.get("name") == "node" and c.get("resources") is not None:
                    return c["resources"]
    return {}


def framework_env(node: dict[str, Any], env: list[dict[str, Any]]) -> None:
    """The framework's env upserted on `node`, and the trainer port opened once."""
    upsert_env(node, env)
    ports = list(node.get("ports") or [])
    if not any(p.get("containerPort") == TRAINER_PORT for p in ports):
        ports.append({"containerPort": TRAINER_PORT})
    node["ports"] = ports


def _first_number(resources: dict[str, Any], match: Callable[[str], bool]) -> int:
    """The first matching resource's value rounded up (Quantity.Value()), requests first, then limits."""
    for key in ("requests", "limits"):
        for rname, q in (resources.get(key) or {}).items():
            if match(rname):
                try:
                    v = int(math.ceil(quantity.parse_quantity(q)))
                except (ValueError, TypeError, ArithmeticError):
                    v = 0
                if v:
                    return v
                break
    return 0


def gpus(res: dict[str, Any]) -> int:
    """T:pkg/runtime/runtime.go GetNumGPUPerNode: a resource named *gpu*, requests first, then limits."""
    return _first_number(res, lambda n: "gpu" in n.lower())


def cpus(res: dict[str, Any]) -> int:
    return _first_number(res, lambda n: n == "cpu")
