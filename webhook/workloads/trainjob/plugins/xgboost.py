"""The XGBoost plugin (T:pkg/runtime/framework/plugins/xgboost/xgboost.go EnforceMLPolicy)."""

from __future__ import annotations

from typing import Any

from webhook.workloads.trainjob.runtime import COMPLETION_INDEX, TRAINER_PORT


def xgboost_env(name: str, workers: int) -> list[dict[str, Any]]:
    """The DMLC_* variables on the trainer's `node` container: one worker per GPU (or per node without GPUs)."""
    return [
        {"name": "DMLC_TRACKER_URI", "value": f"{name}-node-0-0.{name}"},
        {"name": "DMLC_TRACKER_PORT", "value": str(TRAINER_PORT)},
        {"name": "DMLC_TASK_ID", "valueFrom": COMPLETION_INDEX},
        {"name": "DMLC_NUM_WORKER", "value": str(workers)},
    ]
