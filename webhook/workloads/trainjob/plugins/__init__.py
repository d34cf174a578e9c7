"""Trainer's ML policy plugins, one module each as in T:pkg/runtime/framework/plugins/
(plainml has no module: no policy is its rule, applied by the JobSet renderer)."""

from __future__ import annotations

from webhook.workloads.trainjob.plugins.flux import FLUX_INSTALLER_IMAGE, flux_policy
from webhook.workloads.trainjob.plugins.jax import jax_env
from webhook.workloads.trainjob.plugins.mpi import MPI_SSH_SECRET_SUFFIX, hostfile, mpi_policy, mpi_slots
from webhook.workloads.trainjob.plugins.torch import torch_env
from webhook.workloads.trainjob.plugins.xgboost import xgboost_env

__all__ = [
    "FLUX_INSTALLER_IMAGE",
    "MPI_SSH_SECRET_SUFFIX",
    "flux_policy",
    "hostfile",
    "mpi_policy",
    "mpi_slots",
    "jax_env",
    "torch_env",
    "xgboost_env",
]
