"""The JAX plugin (T:pkg/runtime/framework/plugins/jax/jax.go EnforceMLPolicy)."""

from __future__ import annotations

from typing import Any

from webhook.workloads.trainjob.runtime import COMPLETION_INDEX, TRAINER_PORT


def jax_env(name: str, num_nodes: int) -> list[dict[str, Any]]:
    """The JAX_* variables on the trainer's `node` container."""
    return [
        {"name": "JAX_NUM_PROCESSES", "value": str(num_nodes)},
        {"name": "JAX_PROCESS_ID", "valueFrom": COMPLETION_INDEX},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{name}-node-0-0.{name}:{TRAINER_PORT}"},
    ]
