"""Fixtures for the end-to-end tests: one real control plane per test session.

The control plane (etcd + kube-apiserver + CRDs) is started once per session and torn
down by PID at the end, even when tests fail. A cold cache makes the first session build
the binaries (e2e/build.sh, ~12-15 min on 2 cores; its progress lines are shown live);
a missing or broken build fails the session loudly instead of skipping it.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from e2e.controlplane import ControlPlane, ensure_built


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under e2e/ carries the ``e2e`` marker (``-m "not e2e"`` deselects them)."""
    for item in items:
        if "/e2e/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A started :class:`ControlPlane`: admin ``.kubeconfig``, non-admin ``.dev_kubeconfig``."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    # Show build.sh's progress lines live: a cold build takes minutes.
    quiet = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    with quiet:
        ensure_built()
    with ControlPlane(build=False) as cp:
        yield cp
