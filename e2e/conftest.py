"""Fixtures for the end-to-end tests: one real control plane per test session.

The control plane (etcd + kube-apiserver + CRDs) is started once per session and torn
down by PID at the end, even when tests fail. A cold cache makes the first session build
the binaries (e2e/build.sh, ~15 min on 2 cores); a missing or broken build fails the
session loudly instead of skipping it.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from e2e.controlplane import ControlPlane


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under e2e/ carries the ``e2e`` marker (``-m "not e2e"`` deselects them)."""
    for item in items:
        if "/e2e/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """A started :class:`ControlPlane`: admin ``.kubeconfig``, non-admin ``.dev_kubeconfig``."""
    with ControlPlane() as cp:
        yield cp
