"""The MPI plugin (T:pkg/runtime/framework/plugins/mpi/mpi.go EnforceMLPolicy and
buildHostFileConfigMap): hostfile slots, the SSH Secret and hostfile volumes, OpenMPI's env on
the launcher, and the hostfile's content."""

from __future__ import annotations

from typing import Any

from webhook.workloads.trainjob.merge import upsert_env, upsert_mounts, upsert_volumes
from webhook.workloads.trainjob.runtime import container, gpus, node_resources, pod_spec

MPI_SSH_SECRET_SUFFIX = "-mpi-ssh-auth"


def mpi_slots(
    ordered: list[dict[str, Any]], mpi: dict[str, Any], trainer: dict[str, Any], res_per_node: dict[str, Any] | None
) -> int:
    """Processes per node (hostfile slots): trainer.numProcPerNode, else the runtime's; a runtime value
    of 1 becomes the GPUs per node when there are more (T:…/plugins/mpi/mpi.go EnforceMLPolicy)."""
    if trainer.get("numProcPerNode") is not None:
        try:
            return int(trainer["numProcPerNode"])
        except (TypeError, ValueError):
            pass
    nproc: Any = mpi.get("numProcPerNode") if mpi.get("numProcPerNode") is not None else 1
    if nproc == 1:
        n_gpus = gpus(res_per_node if res_per_node is not None else node_resources(ordered))
        if n_gpus > 1:
            return n_gpus
    return int(nproc)


def mpi_policy(name: str, ordered: list[dict[str, Any]], mpi: dict[str, Any]) -> None:
    """The SSH Secret volume on the jobs named `launcher` and `node`, the hostfile on `launcher`, and
    OpenMPI's env on the launcher's `node` container (T:…/plugins/mpi/mpi.go EnforceMLPolicy)."""
    ssh_path = mpi.get("sshAuthMountPath") or "/root/.ssh"
    ssh_volume = {
        "name": "mpi-ssh-auth",
        "secret": {
            "secretName": f"{name}{MPI_SSH_SECRET_SUFFIX}",
            "defaultMode": 0o400,
            "items": [
                {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
            ],
        },
    }
    hostfile_volume = {
        "name": "mpi-hostfile",
        "configMap": {
            "name": f"{name}-mpi-hostfile",
            "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
        },
    }
    nproc = mpi.get("numProcPerNode") if mpi.get("numProcPerNode") is not None else 1
    for rj in ordered:
        rname = rj.get("name")
        if rname not in ("node", "launcher"):
            continue
        pod = pod_spec(rj)
        upsert_volumes(pod, [ssh_volume] + ([hostfile_volume] if rname == "launcher" else []))
        node = container(pod, "node")
        if node is None:
            continue
        upsert_mounts(node, [{"name": "mpi-ssh-auth", "mountPath": ssh_path}])
        if rname == "launcher":
            upsert_mounts(node, [{"name": "mpi-hostfile", "mountPath": "/etc/mpi"}])
            upsert_env(
                node,
                [
                    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                    {"name": "OMPI_MCA_orte_set_default_slots", "value": str(nproc)},
                    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
                ],
            )


def hostfile(
    name: str, ordered: list[dict[str, Any]], counts: dict[str, int], launcher_as_node: bool, mpi: dict[str, Any]
) -> str:
    """The hostfile ConfigMap's content (T:…/plugins/mpi/mpi.go buildHostFileConfigMap), for its size."""
    slots = mpi.get("numProcPerNode") if mpi.get("numProcPerNode") is not None else 1
    lines = []
    for rj in ordered:
        rname = str(rj.get("name"))
        if rname == "node" or (launcher_as_node and rname == "launcher"):
            replicas = 1 if rj.get("replicas") is None else int(rj["replicas"])
            for r in range(replicas):
                for i in range(counts[rname]):
                    lines.append(f"{name}-{rname}-{r}-{i}.{name} slots={slots}\n")
    return "".join(lines)
