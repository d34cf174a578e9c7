"""The torch plugin (T:pkg/runtime/framework/plugins/torch/torch.go EnforceMLPolicy): the PET_*
variables torchrun reads, on the trainer's `node` container."""

from __future__ import annotations

from typing import Any

from webhook.workloads.trainjob.merge import upsert_env
from webhook.workloads.trainjob.runtime import COMPLETION_INDEX, TRAINER_PORT, cpus, framework_env, gpus


def torch_env(
    node: dict[str, Any],
    name: str,
    num_nodes: int,
    trainer: dict[str, Any],
    res_per_node: dict[str, Any] | None,
) -> None:
    """The PET_* variables the torch plugin sets on `node`, after the TrainJob's own trainer.env."""
    res = res_per_node if res_per_node is not None else (node.get("resources") or {})
    nproc: str = str(trainer["numProcPerNode"]) if trainer.get("numProcPerNode") is not None else "auto"
    if nproc == "auto" and gpus(res) == 0:
        nproc = str(max(1, cpus(res)))
    if trainer.get("env"):
        upsert_env(node, trainer["env"])
    env: list[dict[str, Any]] = [
        {"name": "PET_NNODES", "value": str(num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        {"name": "PET_NODE_RANK", "valueFrom": COMPLETION_INDEX},
    ]
    if trainer.get("command") != ["tune", "run"]:
        env += [
            {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)},
        ]
    framework_env(node, env)
