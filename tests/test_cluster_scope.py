"""What the live view may read: names are validated before they go into a URL, and Secrets in
never-read namespaces (kube-system, the webhook's own, the chart's exclusions) are never requested."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from webhook.checks import all_checks
from webhook.cluster.client import KubeClient, check_path
from webhook.cluster.live import LiveClusterView
from webhook.cluster.names import is_dns1123_label, is_dns1123_subdomain
from webhook.cluster.reads import never_read_namespaces, own_namespace
from webhook.cluster.view import ApiError
from webhook.config import Settings
from webhook.deadline import Deadline


class RecordingClient:
    """Stands in for KubeClient: records every request, answers a Secret with one key."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.paths.append(path)
        if "/secrets" in path:
            return {"kind": "Secret", "data": {"token": "c2VjcmV0"}}
        return {"kind": "Lease", "metadata": {"name": path.rsplit("/", 1)[-1]}}

    async def close(self) -> None:
        pass


#: the Kueue admission Lease read by name: a declared named read of the registered checks
LOCK = Settings(kueue={"admissionLease": "kueue-system/lock"})


def view(settings: Settings | None = None, own_ns: str = "preflight-system") -> tuple[LiveClusterView, RecordingClient]:
    rc = RecordingClient()
    v = LiveClusterView(settings or LOCK, rc, checks=all_checks(), own_ns=own_ns)  # type: ignore[arg-type]
    return v, rc


@pytest.mark.parametrize("name", [".", "..", "", "a/b", "Upper", "x" * 254, "-lead", "a..b", "%2e"])
async def test_a_secret_name_no_object_can_have_is_not_found_and_never_requested(name: str) -> None:
    v, rc = view()
    assert await v.secret_keys("team-a", name, Deadline(5)) is None
    assert rc.paths == []


@pytest.mark.parametrize("namespace", [".", "..", "", "a.b", "Team", "x" * 64])
async def test_a_namespace_that_cannot_exist_is_never_requested(namespace: str) -> None:
    v, rc = view()
    assert await v.secret_keys(namespace, "hf-token", Deadline(5)) is None
    if namespace:  # "" is a cluster-scoped read for get_object
        assert await v.get_object("coordination.k8s.io/v1", "leases", namespace, "l", Deadline(5)) is None
    with pytest.raises(ApiError) as exc:
        await v.dry_run_create("v1", "Pod", namespace, {"kind": "Pod"}, Deadline(5))
    assert exc.value.status == 404
    assert rc.paths == []


async def test_valid_names_are_read() -> None:
    v, rc = view()
    assert await v.secret_keys("team-a", "hf-token.v2", Deadline(5)) == {"token"}
    assert rc.paths == ["/api/v1/namespaces/team-a/secrets/hf-token.v2"]
    assert await v.get_object("coordination.k8s.io/v1", "leases", "kueue-system", "..", Deadline(5)) is None
    assert await v.get_object("coordination.k8s.io/v1", "leases", "kueue-system", "lock", Deadline(5)) is not None
    assert rc.paths[-1] == "/apis/coordination.k8s.io/v1/namespaces/kueue-system/leases/lock"


async def test_named_reads_of_the_settings_are_sent() -> None:
    """The defaults name the controllers' Deployments and Leases and the cluster-autoscaler status ConfigMap."""
    v, rc = view(Settings())
    reads = [
        ("v1", "configmaps", "kube-system", "cluster-autoscaler-status"),
        ("apps/v1", "deployments", "jobset-system", "jobset-controller-manager"),
        ("coordination.k8s.io/v1", "leases", "jobset-system", "6d4f6a47.jobset.x-k8s.io"),
        ("coordination.k8s.io/v1", "leases", "kueue-system", "c1f6bfd2.kueue.x-k8s.io"),
        ("apps/v1", "deployments", "aiperf-system", "aiperf-operator"),
    ]
    for api, res, ns, name in reads:
        assert await v.get_object(api, res, ns, name, Deadline(5)) is not None
    assert rc.paths[0] == "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status"
    assert rc.paths[1] == "/apis/apps/v1/namespaces/jobset-system/deployments/jobset-controller-manager"
    assert len(rc.paths) == len(reads)


@pytest.mark.parametrize(
    ("api", "resource", "namespace", "name", "message"),
    [
        (
            "v1",
            "configmaps",
            "kube-system",
            "kubeadm-config",
            'the webhook does not read configmaps "kubeadm-config" in namespace "kube-system" (not a declared read)',
        ),
        (
            "v1",
            "configmaps",
            "team-a",
            "cluster-autoscaler-status",
            'the webhook does not read configmaps "cluster-autoscaler-status" in namespace "team-a" (not a declared read)',
        ),
        (
            "coordination.k8s.io/v1",
            "leases",
            "jobset-system",
            "other",
            'the webhook does not read leases.coordination.k8s.io "other" in namespace "jobset-system" (not a declared read)',
        ),
        (
            "apps/v1",
            "deployments",
            "kueue-system",
            "jobset-controller-manager",
            'the webhook does not read deployments.apps "jobset-controller-manager" in namespace "kueue-system" '
            "(not a declared read)",
        ),
        ("v1", "nodes", None, "node-1", 'the webhook does not read nodes "node-1" (not a declared read)'),
    ],
)
async def test_a_get_outside_the_declared_reads_is_refused_without_a_request(
    api: str, resource: str, namespace: str | None, name: str, message: str
) -> None:
    v, rc = view(Settings())
    with pytest.raises(ApiError) as exc:
        await v.get_object(api, resource, namespace, name, Deadline(5))
    assert exc.value.forbidden and exc.value.reason == "Forbidden"
    assert exc.value.message == message
    assert rc.paths == []


async def test_a_read_follows_the_settings_not_the_defaults() -> None:
    """controllers.jobset moved: its new Lease is read, the default one no longer."""
    moved = Settings(controllers={"jobset": {"namespace": "batch", "deployment": "", "lease": "js-lock"}})
    v, rc = view(moved)
    assert await v.get_object("coordination.k8s.io/v1", "leases", "batch", "js-lock", Deadline(5)) is not None
    with pytest.raises(ApiError) as exc:
        await v.get_object("coordination.k8s.io/v1", "leases", "jobset-system", "6d4f6a47.jobset.x-k8s.io", Deadline(5))
    assert exc.value.message == (
        'the webhook does not read leases.coordination.k8s.io "6d4f6a47.jobset.x-k8s.io" in namespace '
        '"jobset-system" (not a declared read)'
    )
    none = Settings(nodeProvisioning={"clusterAutoscalerStatus": ""})
    v, rc = view(none)
    with pytest.raises(ApiError):
        await v.get_object("v1", "configmaps", "kube-system", "cluster-autoscaler-status", Deadline(5))
    assert rc.paths == []


async def test_a_list_outside_the_declared_reads_is_refused_without_a_request() -> None:
    v, rc = view(Settings())
    assert await v.list_objects("discovery.k8s.io/v1", "endpointslices", "team-a", "a=b", Deadline(5)) == []
    assert rc.paths == ["/apis/discovery.k8s.io/v1/namespaces/team-a/endpointslices"]
    with pytest.raises(ApiError) as exc:
        await v.list_objects("v1", "configmaps", "team-a", "a=b", Deadline(5))
    assert exc.value.forbidden
    assert exc.value.message == "the webhook does not list configmaps (not a declared read)"
    assert len(rc.paths) == 1


async def test_get_object_never_reads_secrets() -> None:
    v, _ = view()
    with pytest.raises(ValueError):
        await v.get_object("v1", "secrets", "team-a", "hf-token", Deadline(5))


@pytest.mark.parametrize("namespace", ["kube-system", "preflight-system", "kube-public", "tenant-x"])
async def test_secrets_in_never_read_namespaces_are_refused_without_a_request(namespace: str) -> None:
    v, rc = view(Settings(excludedNamespaces=["kube-public", "tenant-x"]))
    with pytest.raises(ApiError) as exc:
        await v.secret_keys(namespace, "hf-token", Deadline(5))
    assert exc.value.forbidden
    assert exc.value.message == f'the webhook does not read Secrets in namespace "{namespace}" (never-read namespace)'
    assert rc.paths == []


def test_never_read_always_holds_kube_system_and_the_own_namespace() -> None:
    assert never_read_namespaces(Settings(), None) == {"kube-system"}
    assert never_read_namespaces(Settings(excludedNamespaces=["a"]), "pw") == {"kube-system", "a", "pw"}


def test_own_namespace_from_env_then_serviceaccount_file(tmp_path: Any) -> None:
    f = tmp_path / "namespace"
    f.write_text("from-file\n")
    assert own_namespace({"POD_NAMESPACE": "from-env"}, str(f)) == "from-env"
    assert own_namespace({}, str(f)) == "from-file"
    assert own_namespace({}, str(tmp_path / "missing")) is None


def test_name_rules_follow_apimachinery() -> None:
    assert is_dns1123_label("team-a") and not is_dns1123_label("team.a") and not is_dns1123_label("x" * 64)
    assert is_dns1123_subdomain("a.b-c") and is_dns1123_subdomain("x" * 253)
    for bad in (".", "..", "", "A", "a_b", "a/b", "x" * 254, None):
        assert not is_dns1123_subdomain(bad)


@pytest.mark.parametrize(
    "path", ["/api/v1/namespaces/ns/secrets/.", "/api/v1/namespaces/ns/secrets/..", "/api/v1//secrets", "api/v1"]
)
def test_check_path_refuses_dot_and_empty_segments(path: str) -> None:
    with pytest.raises(ValueError):
        check_path(path)


async def test_kube_client_never_sends_a_dot_segment() -> None:
    """Without the guard, `.../secrets/.` reaches the apiserver as `.../secrets/` (a LIST, values included)."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({"kind": "SecretList", "items": []})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    cfg = k8s_client.Configuration()
    cfg.host = f"http://127.0.0.1:{site.port}"
    kc = KubeClient(cfg, 2)
    try:
        await kc.request("GET", "/api/v1/namespaces/ns/secrets/ok", timeout=5)
        assert seen == ["/api/v1/namespaces/ns/secrets/ok"]
        for name in (".", ".."):
            with pytest.raises(ValueError):
                await kc.request("GET", f"/api/v1/namespaces/ns/secrets/{name}", timeout=5)
        assert seen == ["/api/v1/namespaces/ns/secrets/ok"]
    finally:
        await kc.close()
        await runner.cleanup()


# --------------------------------------------------------------------------- the Secrets check on such names


async def test_an_env_reference_to_an_invalid_secret_name_fails_as_the_apiserver_would() -> None:
    from tests.fakeview import FakeView, container, pod, run_check, workload
    from webhook.checks.secrets import Secrets
    from webhook.results import Status
    from webhook.workloads.base import PodGroup

    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": ".", "key": "token"}}}]
    wl = workload([PodGroup("node", 1, pod(container("node", env=env)))])
    r = await run_check(Secrets(), wl, FakeView())
    assert r.status is Status.FAIL
    assert r.message == (
        '"." is not a valid Secret name (referenced by env TOKEN of container node): the apiserver refuses pods '
        "that reference it in env. Fix: reference the Secret by its real name (a lowercase RFC 1123 subdomain)"
    )


async def test_a_volume_reference_to_an_invalid_secret_name_fails_as_the_kubelet_would() -> None:
    from tests.fakeview import FakeView, container, pod, run_check, workload
    from webhook.checks.secrets import Secrets
    from webhook.results import Status
    from webhook.workloads.base import PodGroup

    mounts = [{"name": "creds", "mountPath": "/creds"}]  # an unmounted volume is never resolved at all
    spec = pod(container("node", volumeMounts=mounts), volumes=[{"name": "creds", "secret": {"secretName": ".."}}])
    r = await run_check(Secrets(), workload([PodGroup("node", 1, spec)]), FakeView())
    assert r.status is Status.FAIL
    assert r.message.startswith('".." is not a valid Secret name (referenced by ')
    assert "the kubelet will never find it" in r.message


class ForbiddingClient(RecordingClient):
    """RBAC's answer where no Role grants the read."""

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.paths.append(path)
        raise ApiError(
            403, 'leases.coordination.k8s.io "l" is forbidden: User "u" cannot get resource "leases"', "Forbidden"
        )


@pytest.mark.parametrize(("exists", "found"), [(False, "not found"), (True, "forbidden")])
async def test_a_forbidden_named_read_in_a_namespace_that_does_not_exist_is_not_found(exists: bool, found: str) -> None:
    """No namespace, no Role (the chart renders none there): nothing can be in it, so "not found";
    an existing namespace without a Role stays "not permitted"."""
    fc = ForbiddingClient()
    v = LiveClusterView(LOCK, fc, checks=all_checks(), own_ns="preflight-system")  # type: ignore[arg-type]
    v._namespace_exists = lambda ns: exists  # type: ignore[method-assign]
    read = v.get_object("coordination.k8s.io/v1", "leases", "kueue-system", "lock", Deadline(5))
    if found == "not found":
        assert await read is None
    else:
        with pytest.raises(ApiError) as exc:
            await read
        assert exc.value.forbidden
    assert fc.paths == ["/apis/coordination.k8s.io/v1/namespaces/kueue-system/leases/lock"]


class VersionedClient(RecordingClient):
    """A Secret at a resourceVersion the test sets; one key per version, to see which version was read."""

    def __init__(self) -> None:
        super().__init__()
        self.version = "1"

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.paths.append(path)
        return {"kind": "Secret", "metadata": {"resourceVersion": self.version}, "data": {f"k{self.version}": "dg=="}}


async def test_with_a_watch_a_secrets_keys_are_read_once_a_version() -> None:
    """The audit controller's metadata watch tells the current version (issue 33: 1,000 jobs reading a
    re-created Secret sent 1,000 GETs at qps 20, 90 s until the Reports said pass)."""
    rc = VersionedClient()
    v = LiveClusterView(LOCK.model_copy(update={"secret_ttl_seconds": 0.0}), rc, checks=all_checks(), own_ns="pw")  # type: ignore[arg-type]
    watched: dict[tuple[str, str], str | None] = {("team-a", "hf"): "1"}
    v.secret_version = lambda ns, name: watched.get((ns, name))
    for _ in range(3):
        assert await v.secret_keys("team-a", "hf", Deadline(5)) == {"k1"}
    assert len(rc.paths) == 1
    rc.version = watched["team-a", "hf"] = "2"  # changed: read again, once
    for _ in range(2):
        assert await v.secret_keys("team-a", "hf", Deadline(5)) == {"k2"}
    assert len(rc.paths) == 2
    for state in ("", None):  # the watch says absent, or does not know: never answered from memory
        watched["team-a", "hf"] = state
        await v.secret_keys("team-a", "hf", Deadline(5))
    assert len(rc.paths) == 4


async def test_without_a_watch_no_secret_is_kept_past_its_ttl() -> None:
    rc = VersionedClient()
    v = LiveClusterView(LOCK.model_copy(update={"secret_ttl_seconds": 0.0}), rc, checks=all_checks(), own_ns="pw")  # type: ignore[arg-type]
    for _ in range(2):
        assert await v.secret_keys("team-a", "hf", Deadline(5)) == {"k1"}
    assert len(rc.paths) == 2
