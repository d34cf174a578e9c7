"""The Flux plugin (T:pkg/runtime/framework/plugins/flux/flux.go EnforceMLPolicy): the
flux-installer init container and Flux's volumes on the job named `node`."""

from __future__ import annotations

from typing import Any

from webhook.workloads.trainjob.merge import copy_json, upsert_mounts, upsert_volumes
from webhook.workloads.trainjob.runtime import container, pod_spec, role_of

FLUX_INSTALLER_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"


def flux_policy(name: str, ordered: list[dict[str, Any]], trainer: dict[str, Any]) -> None:
    """The flux-installer init container and Flux's volumes on the job named `node`
    (T:…/plugins/flux/flux.go EnforceMLPolicy). FLUX_VIEW_IMAGE picks the installer's image: the
    trainer container's env in the runtime, then the TrainJob's trainer.env."""
    image = FLUX_INSTALLER_IMAGE
    first_trainer = next((rj for rj in ordered if role_of(rj) == "trainer"), None)
    if first_trainer is not None:
        node = container(pod_spec(first_trainer), "node")
        for e in (node or {}).get("env") or []:
            if e.get("name") == "FLUX_VIEW_IMAGE" and e.get("value") is not None:
                image = e["value"]
    for e in trainer.get("env") or []:
        if e.get("name") == "FLUX_VIEW_IMAGE":
            image = e.get("value") or ""
    cm = f"{name}-flux-entrypoint"
    volumes = [
        {"name": "spack-install", "emptyDir": {}},
        {"name": "flux-install", "emptyDir": {}},
        {"name": cm, "configMap": {"name": cm, "defaultMode": 0o755}},
        {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        {"name": "flux-curve", "secret": {"secretName": f"{name}-flux-curve", "defaultMode": 0o400}},
    ]
    installer = {
        "name": "flux-installer",
        "image": image,
        "command": ["/bin/bash", "/etc/flux-config/init.sh"],
        "volumeMounts": [
            {"name": "flux-install", "mountPath": "/mnt/flux"},
            {"name": cm, "mountPath": "/etc/flux-config", "readOnly": True},
        ],
    }
    for rj in ordered:
        if rj.get("name") != "node":
            continue
        pod = pod_spec(rj)
        upsert_volumes(pod, volumes)
        pod["initContainers"] = list(pod.get("initContainers") or []) + [copy_json(installer)]
        node = container(pod, "node")
        if node is not None:
            upsert_mounts(
                node,
                [
                    {"name": "flux-install", "mountPath": "/mnt/flux"},
                    {"name": "spack-install", "mountPath": "/opt/software"},
                    {"name": cm, "mountPath": "/etc/flux-config", "readOnly": True},
                    {"name": "flux-curve", "mountPath": "/curve", "readOnly": True},
                    {"name": "shared-memory", "mountPath": "/dev/shm", "readOnly": True},
                ],
            )
