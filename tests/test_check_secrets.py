"""Secrets: every reference kind, optional honoured, unmounted volumes never read, a missing
pull Secret warns unless the image is on a private registry, missing Secret/key, 403 and
transient as "cannot verify" without hiding other findings, managed secrets skipped, exact wording."""

from __future__ import annotations

import asyncio

from tests.fakeview import FakeView, container, pod, run_check, run_check_all, workload
from webhook.checks.secrets import Secrets, private_registry
from webhook.cluster.view import ApiError
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.results import Status
from webhook.workloads.base import PodGroup

#: the fix of a 403: the chart grants `get secrets` per job namespace
GRANT_FIX = (
    'Fix: add "team-a" to the chart\'s rbac.jobNamespaces and run helm upgrade '
    "(the webhook may get Secrets only in the namespaces listed there)"
)


def _env(name: str, secret: str, key: str, optional: bool = False) -> dict:
    ref = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def _trainjob(**extra) -> object:
    node = pod(
        container("node", env=[_env("HF_TOKEN", "hf-token", "token")]),
        imagePullSecrets=[{"name": "ghcr-pull"}],
    )
    init = pod(container("model-initializer", envFrom=[{"secretRef": {"name": "hf-token"}}]))
    return workload([PodGroup("model-initializer", 1, init), PodGroup("node", 4, node)], **extra)


async def test_no_references_skips() -> None:
    r = await run_check(Secrets(), workload([PodGroup("node", 1, pod(container("node")))]), FakeView())
    assert (r.status, r.message) == (Status.SKIP, "No Secrets referenced")


async def test_all_present_passes() -> None:
    view = FakeView(secrets={("team-a", "hf-token"): {"token"}, ("team-a", "ghcr-pull"): {".dockerconfigjson"}})
    r = await run_check(Secrets(), _trainjob(), view)
    assert (r.status, r.message) == (Status.PASS, "2 Secrets exist with the keys used: ghcr-pull, hf-token")
    assert sorted(view.secret_reads) == [("team-a", "ghcr-pull"), ("team-a", "hf-token")]  # one read per Secret


async def test_missing_secret_names_every_reference_and_the_fix() -> None:
    view = FakeView(secrets={("team-a", "ghcr-pull"): {".dockerconfigjson"}})
    r = await run_check(Secrets(), _trainjob(), view)
    assert r.status is Status.FAIL
    assert r.message == (
        'Secret "hf-token" not found in namespace "team-a" (referenced by envFrom of container model-initializer, '
        "env HF_TOKEN of container node). Fix: kubectl create secret generic hf-token -n team-a --from-literal=token=…"
    )


async def test_missing_pull_secret_warns_by_default() -> None:
    """The kubelet records FailedToRetrieveImagePullSecret and pulls anonymously: public images still start."""
    view = FakeView(secrets={("team-a", "hf-token"): {"token"}})
    r = await run_check(Secrets(), _trainjob(), view)
    assert r.status is Status.WARN
    assert r.message == (
        'Secret "ghcr-pull" not found in namespace "team-a" (referenced by imagePullSecrets of the node pods); '
        "the kubelet pulls without it, which works only for public images. "
        "Fix: kubectl create secret docker-registry ghcr-pull -n team-a --docker-server=<registry> "
        "--docker-username=<user> --docker-password=…"
    )


async def test_missing_pull_secret_denies_for_a_private_registry() -> None:
    view = FakeView(secrets={("team-a", "hf-token"): {"token"}})
    settings = Settings(privateRegistries=["ghcr.io/acme"])
    r = await run_check(Secrets(), _trainjob(), view, settings)
    assert r.status is Status.FAIL
    assert r.message == (
        'Secret "ghcr-pull" not found in namespace "team-a" (referenced by imagePullSecrets of the node pods); '
        'private registry "ghcr.io/acme" needs it for image "ghcr.io/acme/x:1". '
        "Fix: kubectl create secret docker-registry ghcr-pull -n team-a --docker-server=ghcr.io "
        "--docker-username=<user> --docker-password=…"
    )
    # another registry declared private: this image may be public, so it only warns
    r = await run_check(Secrets(), _trainjob(), view, Settings(privateRegistries=["nvcr.io"]))
    assert r.status is Status.WARN


async def test_a_pull_secret_also_used_by_env_still_denies() -> None:
    spec = pod(container("c", env=[_env("T", "both", "token")]), imagePullSecrets=[{"name": "both"}])
    r = await run_check(Secrets(), workload([PodGroup("node", 1, spec)]), FakeView())
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'Secret "both" not found in namespace "team-a" (referenced by imagePullSecrets of the node pods, env T of container c). '
    )


def test_private_registry_matching() -> None:
    private = ["nvcr.io", "ghcr.io/acme", "docker.io/corp", "registry.local:5000"]
    assert private_registry("nvcr.io/nvidia/aiperf:0.13.0", private) == "nvcr.io"
    assert private_registry("ghcr.io/acme/x:1", private) == "ghcr.io/acme"
    assert private_registry("ghcr.io/acmeco/x:1", private) is None  # a path prefix ends at a /
    assert private_registry("corp/trainer:2", private) == "docker.io/corp"  # Docker Hub names are normalised
    assert private_registry("python:3.12", private) is None
    assert private_registry("registry.local:5000/x", private) == "registry.local:5000"
    assert private_registry("Not An Image", private) is None
    assert private_registry("nvcr.io/x", []) is None


def test_private_registries_setting_is_validated() -> None:
    assert Settings(privateRegistries=[" NVCR.io/ ", "ghcr.io/acme"]).private_registries == ["nvcr.io", "ghcr.io/acme"]
    assert Settings().private_registries == []
    import pytest

    for bad in ("https://nvcr.io", "", "a b"):
        with pytest.raises(ValueError, match="is not a registry host"):
            Settings(privateRegistries=[bad])


async def test_missing_key() -> None:
    view = FakeView(secrets={("team-a", "hf-token"): {"hf_token"}, ("team-a", "ghcr-pull"): {".dockerconfigjson"}})
    r = await run_check(Secrets(), _trainjob(), view)
    assert r.status is Status.FAIL
    assert r.message == (
        'Secret "hf-token" in namespace "team-a" has no key "token" (referenced by env HF_TOKEN of container node). '
        'Fix: kubectl patch secret hf-token -n team-a --type merge -p \'{"stringData":{"token":"…"}}\''
    )


async def test_forbidden_warns_and_never_hides_a_missing_key() -> None:
    view = FakeView(
        secrets={
            ("team-a", "hf-token"): {"other"},
            ("team-a", "ghcr-pull"): ApiError(403, 'secrets "ghcr-pull" is forbidden'),
        }
    )
    fail, warn = await run_check_all(Secrets(), _trainjob(), view)
    assert fail.status is Status.FAIL
    assert fail.message.startswith('Secret "hf-token" in namespace "team-a" has no key "token"')
    assert (warn.status, warn.message) == (
        Status.WARN,
        'Cannot verify Secret "ghcr-pull" in namespace "team-a" (not permitted to get secrets). ' + GRANT_FIX,
    )
    # only the 403
    view = FakeView(secrets={("team-a", "hf-token"): {"token"}, ("team-a", "ghcr-pull"): ApiError(403, "forbidden")})
    r = await run_check(Secrets(), _trainjob(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify Secret "ghcr-pull" in namespace "team-a" (not permitted to get secrets). ' + GRANT_FIX,
    )


async def test_a_never_read_namespace_is_no_grant_to_ask_for() -> None:
    """The chart grants `get secrets` per namespace (rbac.jobNamespaces): a 403 of RBAC tells where to add
    the namespace; a namespace the webhook never reads (kube-system, its own) is refused without a request
    and no grant is due there."""
    never = ApiError(403, 'the webhook does not read Secrets in namespace "team-a" (never-read namespace)', "Forbidden")
    view = FakeView(secrets={("team-a", "hf-token"): {"token"}, ("team-a", "ghcr-pull"): never})
    r = await run_check(Secrets(), _trainjob(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify Secret "ghcr-pull" in namespace "team-a" (not permitted to get secrets)',
    )
    both = ApiError(403, 'secrets "hf-token" is forbidden')
    view = FakeView(secrets={("team-a", "hf-token"): both, ("team-a", "ghcr-pull"): ApiError(403, "forbidden")})
    r = await run_check(Secrets(), _trainjob(), view)
    assert r.message == (
        'Cannot verify Secret "ghcr-pull" in namespace "team-a" (not permitted to get secrets); '
        'Cannot verify Secret "hf-token" in namespace "team-a" (not permitted to get secrets). ' + GRANT_FIX
    )


async def test_transient_error_warns() -> None:
    view = FakeView(
        secrets={
            ("team-a", "hf-token"): {"token"},
            ("team-a", "ghcr-pull"): ApiError(503, "etcdserver: leader changed"),
        }
    )
    r = await run_check(Secrets(), _trainjob(), view)
    assert (r.status, r.message) == (
        Status.WARN,
        'Cannot verify Secret "ghcr-pull" in namespace "team-a" (etcdserver: leader changed)',
    )


async def test_404_error_is_a_missing_secret() -> None:
    view = FakeView(secrets={("team-a", "hf-token"): ApiError(404, "not found"), ("team-a", "ghcr-pull"): {"x"}})
    r = await run_check(Secrets(), _trainjob(), view)
    assert r.status is Status.FAIL and r.message.startswith('Secret "hf-token" not found in namespace "team-a"')


async def test_optional_references_are_honoured() -> None:
    spec = pod(
        container("c", env=[_env("A", "opt", "k", optional=True)]),
        volumes=[
            {"name": "v1", "secret": {"secretName": "opt-vol", "optional": True}},
            {
                "name": "v2",
                "projected": {"sources": [{"secret": {"name": "proj", "items": [{"key": "ca.crt", "path": "ca"}]}}]},
            },
        ],
    )
    spec["containers"][0]["volumeMounts"] = [{"name": "v1", "mountPath": "/a"}, {"name": "v2", "mountPath": "/b"}]
    wl = workload([PodGroup("workers", 2, spec)])
    view = FakeView(secrets={("team-a", "proj"): {"tls.crt"}})
    r = await run_check(Secrets(), wl, view)
    assert view.secret_reads == [("team-a", "proj")]  # optional ones are not read
    assert r.status is Status.FAIL
    assert r.message.startswith(
        'Secret "proj" in namespace "team-a" has no key "ca.crt" (referenced by volume v2 of the workers pods)'
    )


async def test_only_optional_passes_without_reads() -> None:
    wl = workload([PodGroup("workers", 1, pod(container("c", env=[_env("A", "opt", "k", optional=True)])))])
    view = FakeView()
    r = await run_check(Secrets(), wl, view)
    assert (r.status, r.message) == (Status.PASS, "Only optional Secret references (opt)")
    assert view.secret_reads == []


async def test_init_containers_extra_refs_and_managed_secrets() -> None:
    spec = pod(container("c"), initContainers=[container("fetch", env=[_env("S3_KEY", "s3", "key")])])
    wl = workload(
        [PodGroup("launcher", 1, spec)],
        extra_secret_refs=[("hf", None, False, "spec.initializer.model.secretRef")],
        managed_secrets={"llama-ft-mpi-ssh-auth"},
    )
    wl.pod_groups[0].pod_spec["volumes"] = [{"name": "ssh", "secret": {"secretName": "llama-ft-mpi-ssh-auth"}}]
    view = FakeView(secrets={("team-a", "s3"): {"key"}})
    r = await run_check(Secrets(), wl, view)
    assert ("team-a", "llama-ft-mpi-ssh-auth") not in view.secret_reads
    assert r.status is Status.FAIL
    assert r.message == (
        'Secret "hf" not found in namespace "team-a" (referenced by spec.initializer.model.secretRef). '
        "Fix: kubectl create secret generic hf -n team-a --from-literal=<key>=…"
    )


class _SlowView(FakeView):
    async def secret_keys(self, namespace: str, name: str, deadline: Deadline) -> set[str] | None:
        if name == "slow":
            await asyncio.Event().wait()  # never answers; the deadline must end it
        return await super().secret_keys(namespace, name, deadline)


async def test_reads_are_bounded_by_the_deadline_and_findings_kept() -> None:
    spec = pod(container("c", env=[_env("A", "slow", "k"), _env("B", "gone", "k")]))
    wl = workload([PodGroup("workers", 1, spec)])
    fail, warn = await run_check_all(Secrets(), wl, _SlowView(), budget=0.3)
    assert fail.status is Status.FAIL
    assert fail.message.startswith('Secret "gone" not found in namespace "team-a"')
    assert (warn.status, warn.message) == (Status.WARN, 'Cannot verify Secret "slow" in namespace "team-a" (timed out)')


async def test_same_field_in_several_groups_is_named_once() -> None:
    spec = pod(container("c"), imagePullSecrets=[{"name": "ngc"}])
    wl = workload(
        [PodGroup("controller", 1, spec), PodGroup("workers", 2, dict(spec))], kind="AIPerfJob", namespace="bench"
    )
    r = await run_check(Secrets(), wl, FakeView())
    assert r.message.startswith(
        'Secret "ngc" not found in namespace "bench" (referenced by imagePullSecrets of the controller, workers pods); '
    )


async def test_volumes_no_container_mounts_are_never_read() -> None:
    """The kubelet sets up only mounted volumes (GetPodVolumeNames): an unmounted Secret volume never blocks."""
    spec = pod(
        container("c", volumeMounts=[{"name": "creds", "mountPath": "/creds"}]),
        volumes=[
            {
                "name": "creds",
                "csi": {"driver": "secrets-store.csi.k8s.io", "nodePublishSecretRef": {"name": "vault-creds"}},
            },
            {"name": "spare", "secret": {"secretName": "spare-tls"}},
            {"name": "idle", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "idle-creds"}}},
        ],
    )
    wl = workload([PodGroup("node", 2, spec)])
    view = FakeView()
    r = await run_check(Secrets(), wl, view)
    assert view.secret_reads == [("team-a", "vault-creds")]
    assert (r.status, r.message) == (
        Status.FAIL,
        'Secret "vault-creds" not found in namespace "team-a" (referenced by volume creds of the node pods). '
        "Fix: kubectl create secret generic vault-creds -n team-a --from-literal=<key>=…",
    )
    view = FakeView(secrets={("team-a", "vault-creds"): {"token"}})
    r = await run_check(Secrets(), wl, view)
    assert (r.status, r.message) == (Status.PASS, "1 Secret exists with the keys used: vault-creds")
    assert r.details == [
        'Secret "idle-creds" is not read: volume idle is mounted by no container',
        'Secret "spare-tls" is not read: volume spare is mounted by no container',
    ]


async def test_only_unused_references_pass_without_reads() -> None:
    spec = pod(
        container("c", volumeMounts=[{"name": "lun", "mountPath": "/data"}]),
        volumes=[
            {
                "name": "lun",
                "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x", "lun": 0, "secretRef": {"name": "chap"}},
            },
            {"name": "spare", "secret": {"secretName": "spare-tls", "optional": True}},
        ],
    )
    view = FakeView()
    r = await run_check(Secrets(), workload([PodGroup("node", 1, spec)]), view)
    assert view.secret_reads == []
    assert (r.status, r.message) == (
        Status.PASS,
        'No referenced Secret is required: Secret "chap" is not read: iscsi volume lun uses no CHAP authentication; optional: spare-tls',
    )


async def test_the_references_of_a_render_are_collected_once(monkeypatch) -> None:
    """A render's Secret references stand on its pod specs alone (a render cache hit fills in only the uid and the
    run epoch): every create of it gets the first one's, walked once; a Workload of no cached render (the pods as
    admitted, a render cut short) is walked each time."""
    from dataclasses import replace

    from webhook.checks import secrets
    from webhook.workloads.render_cache import PerRender

    monkeypatch.setattr(secrets, "_USES", PerRender(256))
    walked = []
    plain = secrets.collect
    monkeypatch.setattr(secrets, "collect", lambda wl: walked.append(wl.render_id) or plain(wl))
    view = FakeView(secrets={("team-a", "hf-token"): {"token"}, ("team-a", "ghcr-pull"): {".dockerconfigjson"}})
    first, second = (replace(_trainjob(), render_id=41) for _ in range(2))
    results = [await run_check(Secrets(), wl, view) for wl in (first, second, replace(first, render_id=None))]
    assert [(r.status, r.message) for r in results] == [
        (Status.PASS, "2 Secrets exist with the keys used: ghcr-pull, hf-token")
    ] * 3
    assert walked == [41, None, None]  # run_check runs each twice: kept-only first (tests/fakeview.py)
