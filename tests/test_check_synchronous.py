"""Checks declared `synchronous` never await: the engine runs them in the request's own task,
where an await would hold up the other checks and escape the deadline."""

from __future__ import annotations

import ast
import inspect

import pytest

from webhook.checks import all_checks


def _awaits(cls: type) -> list[int]:
    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    return [n.lineno for n in ast.walk(node) if isinstance(n, (ast.Await, ast.AsyncFor, ast.AsyncWith))]


@pytest.mark.parametrize("check", [c for c in all_checks() if c.synchronous], ids=lambda c: c.name)
def test_synchronous_check_never_awaits(check) -> None:
    assert _awaits(type(check)) == []


def test_checks_that_do_io_stay_tasks() -> None:
    assert {c.name for c in all_checks() if not c.synchronous} == {
        "Secrets",
        "Kueue Admission Checks",
        "Kueue Capacity",  # a job that waits: Kueue's visibility API pendingworkloads (models/kueue/wait.py)
        "Dry Run",
        # a group no node takes: the cluster-autoscaler status ConfigMap is read (models/provisioning.py)
        "Node Selector Match",
        "Per-Node Schedulability",
        "Endpoint Service",  # the Service's EndpointSlices, listed on demand
        "Controllers",  # Deployments and Leases, read on demand
        "Volume Claims",  # PersistentVolumeClaims, read by name on demand
        "Device Allocation",  # no node allocates the claims: could one be added (models/provisioning.py)
        "Image Pull",  # pull Secrets read on demand, and the registries asked
        "ConfigMap Size",  # no I/O: the largest parts of a ConfigMap over 1 MiB are measured in a worker thread
    }
