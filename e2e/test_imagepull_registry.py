"""Image Pull against the real CNCF distribution registry (TLS, htpasswd or token auth) and the real apiserver.

The registry is distribution's own binary (e2e/harness/registry.py); the pull Secrets are real
kubernetes.io/dockerconfigjson Secrets made by `kubectl create secret docker-registry`, read by the
live cluster view; the check runs through the webhook's whole path (live_evaluate) and, once, through
the webhook server at `kubectl apply --dry-run=server`. Every verdict the check can give is met here:
present (tag, digest, multi-arch with the nodes' platform), manifest unknown (with nearby tags),
refused without and with wrong credentials (naming the Secret), an index without the nodes' platform,
unreachable and slower than the budget (a warning, within the deadline), and the Bearer token flow.
A hostile registry (e2e/harness/hostile_registry.py, issue 33) meets the webhook server and the CLI:
its token realm on an internal plain-HTTP service gets nothing, an unlisted loopback registry is not
asked, and a JobSet of 2,000 images on a registry that never answers is still denied.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from e2e.harness.controlplane import ControlPlane, free_ports
from e2e.harness.delayproxy import DelayProxy
from e2e.harness.hostile_registry import HostileServer, Reply, json_reply
from e2e.harness.live import live_evaluate, result_of
from e2e.harness.registry import Registry, push_image, push_index
from e2e.harness.runner import RULES, RunningWebhook, chart_jobset_hook
from webhook.config import Settings
from webhook.imageref import parse
from webhook.registry import client as registry
from webhook.registry.keyring import Credential
from webhook.results import Status

ROOT = Path(__file__).resolve().parents[1]
NS = "imgpull"
USER, PASSWORD = "puller", "pull-pass-7f3a9c"
WRONG = "wrong-pass-0b1d2e"
ARCH_LABEL = "e2e.preflight/imgpull-pool"


@pytest.fixture(scope="module")
def reg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(tmp_path_factory.mktemp("registry"), trustme.CA(), {USER: PASSWORD}) as r:
        push_image(r, "team/app", "1.0")
        push_image(r, "team/app", "1.1")
        push_image(r, "team/app", "2.0-rc1")
        push_index(r, "team/multi", "1.0", [("linux", "amd64"), ("linux", "arm64")])
        push_index(r, "team/armonly", "1.0", [("linux", "arm64"), ("linux", "s390x")])
        yield r


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane, reg: Registry) -> Iterator[ControlPlane]:
    cp = control_plane
    cp.ensure_namespace(NS)
    for name, password in (("regcred", PASSWORD), ("badcred", WRONG)):
        cp.kubectl("delete", "secret", name, "-n", NS, "--ignore-not-found")
        cp.kubectl(
            "create", "secret", "docker-registry", name, "-n", NS, f"--docker-server={reg.address}",
            f"--docker-username={USER}", f"--docker-password={password}",
        )  # fmt: skip
    # one node per platform, in a pool of their own (the jobs select it: no other test's nodes count)
    nodes = [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": f"imgpull-{arch}", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
                                                            ARCH_LABEL: "yes"}}}
        for arch in ("amd64",)
    ]  # fmt: skip
    cp.apply(nodes)
    yield cp
    cp.kubectl("delete", "node", "imgpull-amd64", "--ignore-not-found", "--wait=false", check=False)


def _settings(reg: Registry, **extra: Any) -> Settings:
    # the registry listens on 127.0.0.1, an internal address: listed, as a cluster lists its in-cluster registry
    ra = {"mode": "all", "caFile": str(reg.ca_file), "timeoutSeconds": 2, "internalRegistries": [reg.address], **extra}
    return Settings(registryAccess=ra)


def _job(image: str, secrets: list[str] | None = None, name: str = "imgpull") -> dict[str, Any]:
    job = yaml.safe_load((ROOT / "e2e" / "samples" / "aiperfjob-good.yaml").read_text())
    job["metadata"].update(name=name, namespace=NS)
    job["spec"]["image"] = image
    tmpl: dict[str, Any] = {"nodeSelector": {ARCH_LABEL: "yes"}}
    if secrets is not None:
        tmpl["imagePullSecrets"] = [{"name": s} for s in secrets]
    job["spec"]["podTemplate"] = tmpl
    return job


async def _judge(view: Any, reg: Registry, image: str, secrets: list[str] | None = None, **extra: Any) -> Any:
    ev = await live_evaluate(_job(image, secrets), view, _settings(reg, **extra))
    return ev, result_of(ev, "Image Pull")


async def test_present_by_tag_and_by_digest(cluster: ControlPlane, reg: Registry, open_view: Any) -> None:
    view = await open_view()
    _, r = await _judge(view, reg, f"{reg.address}/team/app:1.0", ["regcred"])
    assert (r.status, r.message) == (Status.PASS, "The image is in its registry and can be pulled")
    digest = push_image(reg, "team/app", "1.0-again")
    _, r = await _judge(view, reg, f"{reg.address}/team/app@{digest}", ["regcred"])
    assert r.status == Status.PASS, r.message


async def test_manifest_unknown_names_image_registry_and_nearby_tags(
    cluster: ControlPlane, reg: Registry, open_view: Any
) -> None:
    view = await open_view()
    image = f"{reg.address}/team/app:1.2"
    ev, r = await _judge(view, reg, image, ["regcred"])
    assert (r.status, r.message) == (
        Status.FAIL,
        f'Image "{image}" not found: registry "{reg.address}" has no manifest for tag "1.2" of repository '
        f'"team/app" (pod groups "controller", "workers"); nearby tags: 1.0, 1.1, 1.0-again. '
        'Fix: use a tag that exists, e.g. "1.0".',
    ) or r.message
    assert not ev.decision.allowed and "Image Pull" in ev.decision.denied_checks
    missing = "sha256:" + "0" * 64
    _, r = await _judge(view, reg, f"{reg.address}/team/app@{missing}", ["regcred"])
    assert r.status == Status.FAIL
    assert f'has no manifest for digest "{missing}" of repository "team/app"' in r.message
    _, r = await _judge(view, reg, f"{reg.address}/team/nothing:1.0", ["regcred"])
    assert r.status == Status.FAIL and r.message.endswith(
        "; the repository has no tags. Fix: push the image, or correct the repository name."
    )


async def test_refused_without_and_with_wrong_credentials_names_the_secret(
    cluster: ControlPlane, reg: Registry, open_view: Any
) -> None:
    view = await open_view()
    image = f"{reg.address}/team/app:1.0"
    _, r = await _judge(view, reg, image)
    assert r.status == Status.FAIL
    assert r.message.startswith(
        f'Registry "{reg.address}" refused anonymous access to image "{image}" (pod groups "controller", "workers") '
        '(HTTP 401), and the pods have no imagePullSecrets (nor has ServiceAccount "default")'
    ), r.message
    _, r = await _judge(view, reg, image, ["badcred"])
    assert r.status == Status.FAIL
    assert r.message.startswith(
        f'Registry "{reg.address}" refused image "{image}" (pod groups "controller", "workers") (HTTP 401) '
        'with the credentials of Secret "badcred" (from imagePullSecrets); the kubelet would fail the pull.'
    ), r.message
    assert WRONG not in r.message and PASSWORD not in r.message
    # the kubelet tries each matching credential: a wrong one first and a right one after pulls
    _, r = await _judge(view, reg, image, ["badcred", "regcred"])
    assert r.status == Status.PASS, r.message
    # a Secret that does not exist is skipped, as the kubelet skips it: anonymous, refused
    _, r = await _judge(view, reg, image, ["no-such-secret"])
    assert r.status == Status.FAIL and "have no entry for it" in r.message
    # registries the nodes authenticate to themselves only warn
    _, r = await _judge(view, reg, image, nodeCredentials=[reg.address])
    assert r.status == Status.WARN and "registryAccess.nodeCredentials" in r.message


async def test_multi_arch_index_and_the_nodes_platform(cluster: ControlPlane, reg: Registry, open_view: Any) -> None:
    view = await open_view()
    assert await view.wait_for("nodes", lambda v: v.get_cached("nodes", None, "imgpull-amd64") is not None, 30)
    _, r = await _judge(view, reg, f"{reg.address}/team/multi:1.0", ["regcred"])
    assert r.status == Status.PASS, r.message
    image = f"{reg.address}/team/armonly:1.0"
    ev, r = await _judge(view, reg, image, ["regcred"])
    assert (r.status, r.message) == (
        Status.FAIL,
        f'Image "{image}" has no manifest for the platform of the nodes pod group "controller" can run on '
        "(linux/amd64); its index offers linux/arm64, linux/s390x. Fix: push the image for linux/amd64, "
        "or select nodes of a platform the index offers (nodeSelector kubernetes.io/arch).",
    )


async def test_unreachable_and_slow_registries_warn_within_the_deadline(
    cluster: ControlPlane, reg: Registry, open_view: Any
) -> None:
    view = await open_view()
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    image = f"{dead}/team/app:1.0"
    ev, r = await _judge(view, reg, image, ["regcred"], internalRegistries=[reg.address, dead])
    assert (r.status, r.message) == (
        Status.WARN,
        f'Cannot verify image "{image}" (pod groups "controller", "workers"): registry "{dead}" could not be '
        "reached or did not answer within 2.0s.",
    )
    assert "Image Pull" not in ev.decision.denied_checks  # (the job has no endpoint Service: that denies)
    with DelayProxy(("127.0.0.1", reg.port)) as proxy:
        proxy.set_delay(3.0, 3.0)  # past timeoutSeconds 2
        slow = f"127.0.0.1:{proxy.port}/team/app:1.0"
        started = time.monotonic()
        ev, r = await _judge(view, reg, slow, ["regcred"], internalRegistries=[f"127.0.0.1:{proxy.port}"])
        took = time.monotonic() - started
    # the same words as a closed port: messages tell no port scan
    assert r.status == Status.WARN and "could not be reached or did not answer within 2.0s." in r.message, r.message
    assert "Image Pull" not in ev.decision.denied_checks  # (the job has no endpoint Service: that denies)
    assert took < 15  # the evaluation's own 15 s budget was never the bound: the check gave up first


async def test_a_registry_whose_ca_is_not_given_warns_how_to_trust_it(
    cluster: ControlPlane, reg: Registry, open_view: Any
) -> None:
    """The registry's CA is the harness's own (not the system's): without registryAccess.caFile the
    handshake fails, which is "cannot verify" (a warning naming the fix), never a deny; with it, the
    registry's own verdict."""
    view = await open_view()
    image = f"{reg.address}/team/app:1.0"
    ev, r = await _judge(view, reg, image, ["regcred"], caFile=None)
    assert (r.status, r.message) == (
        Status.WARN,
        f'Cannot verify image "{image}" (pod groups "controller", "workers"): the TLS certificate of '
        f'"{reg.address}" is not trusted; add its CA (registryAccess.caFile; chart: registryCA).',
    )
    assert "Image Pull" not in ev.decision.denied_checks
    missing = f"{reg.address}/team/app:7.7"
    ev, r = await _judge(view, reg, missing, ["regcred"], caFile=None)
    assert r.status == Status.WARN and "is not trusted" in r.message  # not even a missing tag denies
    assert "Image Pull" not in ev.decision.denied_checks
    # the same bundle the chart mounts (registryCA → /etc/preflight-webhook/registry-ca/ca.crt)
    _, r = await _judge(view, reg, image, ["regcred"])
    assert r.status == Status.PASS, r.message
    _, r = await _judge(view, reg, missing, ["regcred"])
    assert r.status == Status.FAIL and 'has no manifest for tag "7.7"' in r.message


async def test_coalescing_cache_and_breaker_against_the_real_registry(reg: Registry) -> None:
    dead = parse(f"127.0.0.1:{free_ports(1)[0]}/team/app:1.0")
    assert dead is not None
    c = registry.RegistryClient(timeout=2, cache_seconds=30, breaker_failures=2, breaker_open_seconds=60,
                                ssl_context=registry.make_ssl_context(str(reg.ca_file)),
                                internal_registries=[reg.address, dead.registry])  # fmt: skip
    ref = parse(f"{reg.address}/team/app:1.0")
    assert ref is not None
    cred = Credential("regcred", USER, PASSWORD)
    answers = await asyncio.gather(*(c.manifest(ref, cred, 5) for _ in range(8)))
    assert {a.outcome for a in answers} == {registry.FOUND}
    assert c.requests == 2  # one HEAD refused with a Basic challenge, one with the credential: for all 8
    await c.manifest(ref, cred, 5)
    assert c.requests == 2  # cached
    other = await c.manifest(ref, Credential("badcred", USER, WRONG), 5)
    assert other.outcome == registry.UNAUTHORIZED and c.requests == 4  # another credential: its own entry
    for _ in range(2):
        assert (await c.manifest(dead, None, 5)).detail == "could not be reached or did not answer within 2.0s"
    sent = c.requests
    tripped = await c.manifest(dead, None, 5)
    assert tripped.outcome == registry.UNREACHABLE
    assert tripped.detail.startswith("was not asked: 2 failures in a row, asked again in "), tripped.detail
    assert c.requests == sent
    await c.close()


async def test_bearer_token_flow(tmp_path: Path, cluster: ControlPlane, open_view: Any) -> None:
    """auth: token: the registry answers 401 with a Bearer challenge naming the token server; the check
    gets a token there with the Secret's credentials (distribution docs/spec/auth/token.md)."""
    with Registry(tmp_path / "token-registry", trustme.CA(), {USER: PASSWORD}, auth="token") as treg:
        push_image(treg, "team/app", "1.0")
        assert treg.token_server is not None
        cp = cluster
        cp.kubectl("delete", "secret", "tokencred", "-n", NS, "--ignore-not-found")
        cp.kubectl("create", "secret", "docker-registry", "tokencred", "-n", NS, f"--docker-server={treg.address}",
                   f"--docker-username={USER}", f"--docker-password={PASSWORD}")  # fmt: skip
        cp.kubectl("delete", "secret", "tokenbad", "-n", NS, "--ignore-not-found")
        cp.kubectl("create", "secret", "docker-registry", "tokenbad", "-n", NS, f"--docker-server={treg.address}",
                   f"--docker-username={USER}", f"--docker-password={WRONG}")  # fmt: skip
        view = await open_view()
        issued = treg.token_server.issued
        _, r = await _judge(view, treg, f"{treg.address}/team/app:1.0", ["tokencred"])
        assert r.status == Status.PASS, r.message
        assert treg.token_server.issued == issued + 1
        _, r = await _judge(view, treg, f"{treg.address}/team/app:1.1", ["tokencred"])
        assert r.status == Status.FAIL and "nearby tags: 1.0" in r.message
        _, r = await _judge(view, treg, f"{treg.address}/team/app:1.0", ["tokenbad"])
        assert r.status == Status.FAIL and 'with the credentials of Secret "tokenbad"' in r.message


def test_through_the_webhook_server(cluster: ControlPlane, reg: Registry, tmp_path: Path) -> None:
    """kubectl apply --dry-run=server: the apiserver calls the webhook, which asks the registry."""
    cp = cluster
    label = {"e2e.preflight/imgpull": "yes"}
    cp.kubectl("label", "namespace", NS, "e2e.preflight/imgpull=yes", "--overwrite")
    with RunningWebhook(
        cp,
        vwc_name="preflight-webhook-imgpull",
        name="imgpull.preflight.webhook.io",
        # the sample's endpoint Service is not in this namespace: that check is not what is tested here
        config={
            "mode": "enforce",
            "checks": {"Endpoint Service": "off"},
            "registryAccess": {"mode": "all", "caFile": str(reg.ca_file), "internalRegistries": [reg.address]},
        },
        namespace_selector={"matchLabels": label},
        probe_namespace=NS,
        workdir=tmp_path / "hook",
    ):
        bad = _job(f"{reg.address}/team/app:9.9", ["regcred"], name="imgpull-server")
        proc = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(bad), check=False)
        assert proc.returncode != 0
        assert f'[Image Pull] Image "{reg.address}/team/app:9.9" not found: registry "{reg.address}"' in proc.stderr
        good = _job(f"{reg.address}/team/app:1.0", ["regcred"], name="imgpull-server")
        proc = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(good), check=False)
        assert proc.returncode == 0, proc.stderr
        assert "[Image Pull]" not in proc.stderr


HOSTILE_REALM = 'Bearer realm="http://127.0.0.1:{port}/token",service="hostile",scope="repository:team/app:pull"'


def _unwrapped(stderr: str) -> str:
    """kubectl's warnings as one text: a finding longer than a warning goes on in the next one,
    `Warning: [Image Pull] … rest` (webhook/policy.py wrap)."""
    return re.sub(r"\s*Warning: \[[^\]]+\] … ", " ", stderr).replace("\n", " ")


def _jobset(name: str, images: list[str], secrets: list[str]) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
            "containers": containers, "imagePullSecrets": [{"name": s} for s in secrets]}}}}}]},
    }  # fmt: skip


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[tuple[HostileServer, HostileServer, HostileServer, Path]]:
    """A hostile registry (listed: it is on loopback), an unlisted one, and the internal plain-HTTP
    service the first one's token realm points at (it would answer a token to anyone)."""
    ca = trustme.CA()
    with HostileServer(ca) as listed, HostileServer(ca) as unlisted, HostileServer(tls=False) as internal:
        internal.route("GET", "/token", json_reply({"token": "INTERNAL-SECRET-4f1c"}))
        listed.route(
            "HEAD",
            "/v2/team/app/manifests/1.0",
            Reply(401, {"WWW-Authenticate": HOSTILE_REALM.format(port=internal.port)}),
        )
        unlisted.route("HEAD", "/v2/team/app/manifests/1.0", Reply(200))
        yield listed, unlisted, internal, listed.write_ca(tmp_path / "hostile-ca.pem")


def test_a_hostile_registry_through_the_webhook_server_and_the_cli(
    cluster: ControlPlane, hostile: tuple[HostileServer, HostileServer, HostileServer, Path], tmp_path: Path
) -> None:
    """Issue 33, reproduced through `serve` with a cluster pull Secret and through the CLI: the realm
    sent the Secret's credentials to an internal plain-HTTP URL and its token back to the registry.
    Now nothing reaches the internal service, the unlisted loopback registry is never connected to,
    and a JobSet of 2,000 images on a registry that never answers is denied for its missing Secret
    (it was admitted: the review ran out of its budget and timeoutAction warn let it through)."""
    listed, unlisted, internal, ca_file = hostile
    cp = cluster
    for i in range(2000):
        listed.route("HEAD", f"/v2/team/app{i}/manifests/1.0", Reply(hang=True))
    cp.kubectl("delete", "secret", "hostilecred", "-n", NS, "--ignore-not-found")
    cp.kubectl("create", "secret", "docker-registry", "hostilecred", "-n", NS, f"--docker-server={listed.address}",
               f"--docker-username={USER}", f"--docker-password={PASSWORD}")  # fmt: skip
    label = {"e2e.preflight/imgpull-hostile": "yes"}
    cp.kubectl("label", "namespace", NS, "e2e.preflight/imgpull-hostile=yes", "--overwrite")
    config = {
        "mode": "enforce",
        "timeoutAction": "warn",
        "checks": {"Endpoint Service": "off"},
        "privateRegistries": [listed.address],
        "registryAccess": {"mode": "all", "caFile": str(ca_file), "internalRegistries": [listed.address]},
    }
    chart = chart_jobset_hook(cp)
    with RunningWebhook(
        cp,
        vwc_name="preflight-webhook-imgpull-hostile",
        name="imgpull-hostile.preflight.webhook.io",
        config=config,
        namespace_selector={"matchLabels": label},
        probe_namespace=NS,
        workdir=tmp_path / "hook",
        rules=[*RULES, *chart["rules"]],
    ):
        image = f"{listed.address}/team/app:1.0"
        job = _job(image, ["hostilecred"], name="imgpull-hostile")
        proc = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False)
        assert proc.returncode == 0, proc.stderr
        assert (
            f'registry "{listed.address}" names a plain-HTTP token realm; it was not asked and no credential was '
            "sent (token realms must be https)." in _unwrapped(proc.stderr)
        ), proc.stderr
        assert internal.seen == []
        assert [s.authorization for s in listed.seen] == [None]

        other = f"{unlisted.address}/team/app:1.0"
        proc = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(_job(other, name="imgpull-unlisted")),
                          check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert f'registry "{unlisted.address}" was not asked: its address is not allowed' in _unwrapped(proc.stderr)
        assert unlisted.seen == []

        listed.seen.clear()
        images = [f"{listed.address}/team/app{i}:1.0" for i in range(2000)]
        big = _jobset("imgpull-fanout", images, ["missing-pull"])
        proc = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(big), check=False)
        assert proc.returncode != 0, proc.stderr[-2000:]
        assert f'Secret "missing-pull" not found in namespace "{NS}"' in proc.stderr, proc.stderr[-2000:]
        assert len(listed.seen) <= 20

    # the CLI: the same path, with the cluster's pull Secret read through the kubeconfig
    listed.seen.clear()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    jobfile = tmp_path / "job.yaml"
    jobfile.write_text(yaml.safe_dump(_job(f"{listed.address}/team/app:1.0", ["hostilecred"], name="imgpull-cli")))
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "check", "-f", str(jobfile), "--config", str(cfg),
         "--kubeconfig", str(cp.kubeconfig)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    out = " ".join(proc.stdout.split())
    assert "names a plain-HTTP token realm; it was not asked and no credential was sent" in out, proc.stdout
    assert internal.seen == [] and [s.authorization for s in listed.seen] == [None]
