"""The Image Pull check with a pull Secret the webhook may not get: the chart grants `get secrets` only in the
job namespaces (rbac.jobNamespaces), so the warning tells where to add the namespace (as the Secrets check's)."""

from __future__ import annotations

from typing import Any

from e2e.harness.hostile_registry import HostileServer, Reply
from tests.fakeview import FakeView
from tests.test_registry_hostile import MANIFEST, _ca_file, ca, reg
from webhook.checks.base import CheckContext
from webhook.checks.imagepull import ImagePull
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.kube import ApiError
from webhook.results import Status
from webhook.workloads.base import PodGroup, Workload

__all__ = ["ca", "reg"]  # the hostile registry harness's fixtures (a real TLS server on 127.0.0.1)


async def _warning(reg: HostileServer, denial: ApiError) -> Any:
    image = f"{reg.address}/team/app:1.0"
    spec = {"containers": [{"name": "c", "image": image}], "imagePullSecrets": [{"name": "regcred"}]}
    view = FakeView()
    view.pull_secrets[("team-a", "regcred")] = denial
    wl = Workload(kind="AIPerfJob", api_version="aiperf.nvidia.com/v1alpha1", name="j", namespace="team-a", obj={},
                  pod_groups=[PodGroup(name="g", pods=1, pod_spec=spec)])  # fmt: skip
    settings = Settings(registryAccess={"mode": "all", "internalRegistries": [reg.address],
                                        "caFile": str(_ca_file(reg)), "cacheSeconds": 0})  # fmt: skip
    check = ImagePull()
    try:
        [r] = await check.run(CheckContext(wl, Deadline(5), settings, view))
    finally:
        for c in check._clients.values():
            await c.close()
    return image, r


async def test_a_pull_secret_not_granted_tells_the_fix(reg: HostileServer) -> None:
    reg.route("HEAD", MANIFEST, Reply(401, {"WWW-Authenticate": 'Basic realm="hostile"'}))
    image, r = await _warning(reg, ApiError(403, 'secrets "regcred" is forbidden', "Forbidden"))
    assert (r.status, r.message) == (
        Status.WARN,
        f'Cannot verify image "{image}" (pod group "g"): registry "{reg.address}" needs a login; Secret "regcred" '
        'could not be read (not permitted to get secrets). Fix: add "team-a" to the chart\'s rbac.jobNamespaces and '
        "run helm upgrade (the webhook may get Secrets only in the namespaces listed there).",
    )


async def test_a_never_read_namespace_asks_for_no_grant(reg: HostileServer) -> None:
    reg.route("HEAD", MANIFEST, Reply(401, {"WWW-Authenticate": 'Basic realm="hostile"'}))
    never = ApiError(403, 'the webhook does not read Secrets in namespace "team-a" (never-read namespace)', "Forbidden")
    image, r = await _warning(reg, never)
    assert (r.status, r.message) == (
        Status.WARN,
        f'Cannot verify image "{image}" (pod group "g"): registry "{reg.address}" needs a login; Secret "regcred" '
        "could not be read.",
    )
