"""Install as users do: publish our image and the `helm package`d chart to an OCI registry, then
`helm install oci://...` with containerd pulling the image from that registry.

:func:`publish` runs the release path itself (scripts/release.sh, what `make release` runs) with the
image e2e/images.sh built from our Dockerfile (buildah's e2e store): buildah pushes the image, helm
packages the chart (its values naming the image by digest) and pushes it. :func:`install` gives the
node's containerd the registry's CA (``<address>/ca.crt``), creates the pull Secret in the chart's namespace
and runs `helm install oci://<registry>/<path>/charts/preflight-webhook --version X`; nothing is
loaded into containerd beforehand. e2e/test_install_from_registry.py and `make demo-cluster`
(e2e/harness/demo_cluster.py) share both.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from e2e.harness.node import CHART_NAMESPACE, CHART_RELEASE, Node, NodeError, images_dir, webhook_image
from e2e.harness.registry import Registry, containerd_hosts

ROOT = Path(__file__).resolve().parents[2]
RELEASE_SCRIPT = ROOT / "scripts" / "release.sh"
CHART = "preflight-webhook"


@dataclass(frozen=True)
class Published:
    """What :func:`publish` pushed: the image by digest (``<registry>/<path>/preflight-webhook@sha256:…``)
    and the chart's ``oci://`` reference and version."""

    image: str
    chart: str
    version: str
    #: scripts/release.sh's stdout (`image: …`, `chart: …`) and stderr, for tests to inspect
    stdout: str
    stderr: str

    @property
    def repository(self) -> str:
        return self.image.split("@", 1)[0]

    @property
    def digest(self) -> str:
        return self.image.split("@", 1)[1]


def publish(node: Node, reg: Registry, user: str, password: str, version: str, path: str = "preflight") -> Published:
    """scripts/release.sh against ``reg`` (under ``path``): our image of this source and the chart,
    version ``version``; the password goes to it in its environment only."""
    assert node.cp is not None
    store = images_dir() / "storage"
    env = {
        **os.environ,
        "REGISTRY": f"{reg.address}/{path}",
        "VERSION": version,
        "IMAGE": webhook_image().ref,
        "BUILDAH": f"buildah --root {store}/root --runroot {store}/run --storage-driver vfs",
        "HELM": str(node.cp.helm_path),
        "CA_FILE": str(reg.ca_file),
        "REGISTRY_USER": user,
        "REGISTRY_PASSWORD": password,
    }
    proc = subprocess.run(["bash", str(RELEASE_SCRIPT)], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise NodeError(f"scripts/release.sh failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    out = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    return Published(
        image=out["image"],
        chart=f"oci://{reg.address}/{path}/charts/{CHART}",
        version=version,
        stdout=proc.stdout,
        stderr=proc.stderr,
    )


def install(
    node: Node,
    reg: Registry,
    published: Published,
    user: str,
    password: str,
    *,
    pull_secret: str = "regcred",
    namespace: str = CHART_NAMESPACE,
    release: str = CHART_RELEASE,
) -> None:
    """containerd trusts ``reg`` (its CA as ``<address>/ca.crt``), a docker-registry Secret ``pull_secret`` for it in
    ``namespace``, then ``helm install`` of the published chart from the registry, its pods pulling
    the image with that Secret (the chart's ``imagePullSecrets``); waits for the rollout (--wait)."""
    assert node.cp is not None
    cp = node.cp
    containerd_hosts(reg, node.registry_hosts_dir)
    cp.ensure_namespace(namespace)
    cp.kubectl("create", "secret", "docker-registry", pull_secret, "-n", namespace, f"--docker-server={reg.address}",
               f"--docker-username={user}", f"--docker-password={password}")  # fmt: skip
    node.helm(
        "install", release, published.chart, "--version", published.version, *helm_registry_flags(node, reg, user, password),
        "--namespace", namespace, "--set", f"imagePullSecrets[0].name={pull_secret}", "--wait", "--timeout", "5m",
    )  # fmt: skip


def helm_registry_flags(node: Node, reg: Registry, user: str, password: str) -> list[str]:
    """helm's flags to reach ``reg``: its CA, and a registry config of its own (the Docker config.json
    format helm reads, mode 0600 in the node's state dir) holding the login, so that no password is on
    a command line (nor in the error helm's failure raises, which quotes the command)."""
    assert node.state_dir is not None
    config = node.state_dir / f"helm-registry-{reg.port}.json"
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"auths": {reg.address: {"auth": auth}}}, f)
    return ["--ca-file", str(reg.ca_file), "--registry-config", str(config)]
