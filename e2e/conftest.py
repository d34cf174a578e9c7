"""Fixtures for the end-to-end tests: one real control plane per test session.

The control plane (etcd + kube-apiserver + CRDs) is started once per session and torn
down by PID at the end, even when tests fail. A cold cache makes the first session build
the binaries (e2e/build.sh; docs/benchmarks/build-and-test-times.md; its progress lines are shown live);
a missing or broken build fails the session loudly instead of skipping it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness.controlplane import ControlPlane, ensure_built
from e2e.harness.runner import RunningWebhook
from e2e.harness.stack import SharedStack
from e2e.harness.standins import sample_endpoints
from e2e.tiers import is_conformance
from webhook.checks import all_checks
from webhook.cluster.live import LiveClusterView, open_cluster_view
from webhook.config import Settings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under e2e/ carries the ``e2e`` marker (``-m "not e2e"`` deselects them), and those of
    the modules e2e/tiers.py lists the ``conformance`` marker (`make conformance`; `make test` deselects
    them). The
    modules on the shared node (:func:`shared_stack`) run one after the other, where the first of them
    was: one node and stack start for all of them (each module keeps its own order)."""
    for item in items:
        path = str(item.fspath).replace("\\", "/")
        if "/e2e/" in path:
            item.add_marker(pytest.mark.e2e)
            if is_conformance(path):
                item.add_marker(pytest.mark.conformance)
    shared = [i for i in items if SHARED_STACK in getattr(i, "fixturenames", ())]
    if shared:
        first = items.index(shared[0])
        rest = [i for i in items if SHARED_STACK not in getattr(i, "fixturenames", ())]
        items[:] = rest[:first] + shared + rest[first:]


#: the session fixture the node modules share (e2e/test_audit_stack.py, test_audit_quota_node.py,
#: test_dryrun_stack.py, test_jobset_node.py, test_kueue_visibility_node.py)
SHARED_STACK = "shared_stack"


@pytest.fixture(scope="session")
def shared_stack() -> Iterator[SharedStack]:
    """One node with ``Stack(node, dns=False)`` for the modules that ask for it: started by the first,
    each module cleans what it made; stopped after the last of them (:func:`pytest_runtest_teardown`),
    so the machine's one node is free for the next module that starts its own."""
    shared = SharedStack(dns=False)
    _shared.append(shared)
    try:
        yield shared
    finally:
        shared.stop()


_shared: list[SharedStack] = []  # the session's shared_stack, once made: the hook below stops it


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test on the shared node (its module's fixtures torn down first): stop the node."""
    yield
    if SHARED_STACK in getattr(item, "fixturenames", ()) and SHARED_STACK not in getattr(nextitem, "fixturenames", ()):
        for shared in _shared:
            shared.stop()


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


# --------------------------------------------------------------------------- the webhook, registered
# (e2e/harness/runner.py: RunningWebhook is the one registration helper)

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"
#: the label the sample namespaces carry; the samples webhook's namespaceSelector matches it
SAMPLES_LABEL = {"preflight-webhook/samples": "true"}


@pytest.fixture(scope="session")
def samples_cluster(control_plane: ControlPlane) -> ControlPlane:
    """The control plane with e2e/samples' prerequisites (namespaces and their default
    ServiceAccounts, Service, Secrets), runtime, and the stand-in EndpointSlice."""
    control_plane.apply_samples_prerequisites(SAMPLES_DIR)
    control_plane.apply(sample_endpoints())  # what the endpoint slice controller would write (none runs here)
    return control_plane


@pytest.fixture(scope="module")
def webhook_setup(samples_cluster: ControlPlane) -> None:
    """Objects a test module needs before the webhook starts (override it in the module).

    The webhook's watch caches list them at start-up, so checks see them without waiting.
    """


@pytest.fixture(scope="module")
def sample_webhook(samples_cluster: ControlPlane, webhook_setup: None) -> Iterator[RunningWebhook]:
    """The webhook (enforce, failurePolicy Fail, timeoutSeconds 10) for namespaces labelled SAMPLES_LABEL."""
    with RunningWebhook(
        samples_cluster,
        vwc_name="preflight-webhook-samples",
        # nvcr.io declared private: the missing pull Secret of aiperfjob-broken denies (else it only warns)
        config={"mode": "enforce", "secretTtlSeconds": 0, "privateRegistries": ["nvcr.io"]},
        namespace_selector={"matchLabels": SAMPLES_LABEL},
        probe_namespace="demo-bench",
    ) as hook:
        yield hook


@pytest.fixture
def start_webhook(control_plane: ControlPlane) -> Iterator[Callable[..., RunningWebhook]]:
    """Factory: ``hook = start_webhook(vwc_name=..., failure_policy=..., ...)``; stopped at teardown."""
    hooks: list[RunningWebhook] = []

    def start(**kw: Any) -> RunningWebhook:
        hook = RunningWebhook(control_plane, **kw)
        hooks.append(hook)
        return hook.start()

    yield start
    for hook in reversed(hooks):
        hook.stop()


@pytest.fixture
async def open_view(control_plane: ControlPlane) -> AsyncIterator[Callable[..., Awaitable[LiveClusterView]]]:
    """Factory: `view = await open_view(settings, kubeconfig)`, a synced live cluster view (admin
    kubeconfig by default); every view it opened is closed at teardown."""
    views: list[LiveClusterView] = []

    async def make(settings: Settings | None = None, kubeconfig: Path | str | None = None) -> LiveClusterView:
        view = await open_cluster_view(
            settings or Settings(),
            kubeconfig=str(kubeconfig or control_plane.kubeconfig),
            checks=all_checks(),
            wait_seconds=60,
        )
        views.append(view)
        assert await view.wait_synced(60), view.ready_reason
        return view

    yield make
    for v in views:
        await v.close()
