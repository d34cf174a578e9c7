"""Install as users do: the release path (scripts/release.sh, `make release`) pushes our image and the
`helm package`d chart to a registry; `helm install oci://...` installs it; containerd pulls the image.

The registry is the CNCF distribution registry on the node's bridge, where both containerd (on the
host) and the webhook's pods reach it (e2e/harness/registry.py: TLS from a trustme CA that is not the
system's, htpasswd auth). The image is the one e2e/images.sh built from
our Dockerfile (buildah's e2e store), pushed by buildah; the chart names it by digest. On the real
node (e2e/harness/node.py), containerd trusts the registry's CA (``<address>/ca.crt``), and the pods
pull with the release's imagePullSecret: nothing is loaded into containerd beforehand. Then the
installed webhook's Image Pull check (registryAccess.mode=all) asks the same registry for an
AIPerfJob's image: without the registry's CA, a warning naming registryAccess.caFile and the chart's
registryCA, never a deny; with registryCA (a Secret the chart mounts) the registry's own verdict: a
missing tag denied with its message, the released tag passing silently.

Marked ``node``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from e2e.harness.node import CHART_NAMESPACE, CHART_RELEASE, SAMPLES_DIR, Node
from e2e.harness.oci_install import helm_registry_flags, install, publish
from e2e.harness.registry import OCI_MANIFEST, Registry

pytestmark = pytest.mark.node

USER, PASSWORD = "releaser", "release-e2e-7c41d2"
VERSION = "0.0.0-e2e.1"
NS, RELEASE = CHART_NAMESPACE, CHART_RELEASE


def test_helm_install_from_the_oci_registry_with_the_image_pulled_from_it(tmp_path: Path) -> None:
    """Then the installed webhook's Image Pull check asks that registry (registryAccess.mode=all): without
    its CA a warning naming the fix; with registryCA (a Secret mounted by the chart) the registry's verdict."""
    with Node(start_timeout=180) as node:
        assert node.cp is not None
        # on the node's bridge: containerd (on the host) and the webhook's pods both reach it there
        with Registry(tmp_path / "registry", trustme.CA(), {USER: PASSWORD}, host=node.bridge_ip) as reg:
            _install_and_ask(node, reg)


def _install_and_ask(node: Node, reg: Registry) -> None:
    assert node.cp is not None
    cp = node.cp
    path = f"{reg.address}/preflight"
    t0 = time.monotonic()
    published = publish(node, reg, USER, PASSWORD, VERSION)
    print(f"==> scripts/release.sh (image + chart pushed): {time.monotonic() - t0:.0f}s")
    assert PASSWORD not in published.stdout + published.stderr
    image, repo, digest = published.image, published.repository, published.digest
    assert repo == f"{path}/preflight-webhook"
    assert f"chart: oci://{path}/charts/preflight-webhook --version {VERSION}" in published.stdout.splitlines()
    assert published.chart == f"oci://{path}/charts/preflight-webhook"
    # the registry serves the image's manifest under the version's tag, with the digest the chart names
    status, headers, _ = reg.request(
        "HEAD", f"/v2/preflight/preflight-webhook/manifests/{VERSION}", headers={"Accept": OCI_MANIFEST}
    )
    assert status == 200 and headers.get("Docker-Content-Digest") == digest, (status, headers)
    # ... and only with credentials
    assert reg.request("HEAD", f"/v2/preflight/preflight-webhook/manifests/{VERSION}", auth=False)[0] == 401
    assert digest not in node.ctr("images", "ls").stdout  # nothing loaded: containerd must pull it

    cp.apply_samples_prerequisites(SAMPLES_DIR)
    t0 = time.monotonic()
    install(node, reg, published, USER, PASSWORD)
    print(f"==> helm install oci://...: {time.monotonic() - t0:.0f}s")
    listed = json.loads(node.helm("list", "-n", NS, "-o", "json").stdout)
    assert [(r["name"], r["chart"], r["app_version"]) for r in listed] == [
        (RELEASE, f"preflight-webhook-{VERSION}", VERSION)
    ]

    sel = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=webhook"
    pods = json.loads(cp.kubectl("get", "pods", "-n", NS, "-l", sel, "-o", "json").stdout)["items"]
    assert len(pods) == 2
    for pod in pods:
        (c,) = pod["spec"]["containers"]
        assert c["image"] == image
        (st,) = pod["status"]["containerStatuses"]
        assert st["ready"] is True and st["imageID"].endswith(digest), st
    # the kubelet pulled it (pullPolicy IfNotPresent, and containerd did not have it)
    events = json.loads(cp.kubectl("get", "events", "-n", NS, "-o", "json").stdout)["items"]
    pulled = [e["message"] for e in events if e.get("reason") == "Pulled" and e["involvedObject"]["kind"] == "Pod"]
    assert any(f'Successfully pulled image "{image}"' in m for m in pulled), pulled
    assert digest in node.ctr("images", "ls").stdout

    # the webhook answers: the apiserver calls it through its Service, and it denies a broken job
    sample = SAMPLES_DIR / "trainjob-broken.yaml"
    deadline = time.monotonic() + 180
    while True:
        broken = cp.kubectl("apply", "--dry-run=server", "-f", str(sample), check=False)
        if 'admission webhook "' in broken.stderr and "denied the request" in broken.stderr:
            break
        assert time.monotonic() < deadline, broken.stderr[-1000:]
        time.sleep(0.5)  # polling the apiserver for a condition, bounded by the deadline
    assert broken.returncode != 0 and "hf_token" in broken.stderr

    # --- the Image Pull check from the installed pods, against the same registry (its CA is not the system's)
    chart = [published.chart, "--version", VERSION, *helm_registry_flags(node, reg, USER, PASSWORD),
             "--namespace", NS, "--reuse-values"]  # fmt: skip
    job = yaml.safe_load((SAMPLES_DIR / "aiperfjob-good.yaml").read_text())
    job_ns = job["metadata"]["namespace"]
    cp.kubectl("create", "secret", "docker-registry", "regcred", "-n", job_ns, f"--docker-server={reg.address}",
               f"--docker-username={USER}", f"--docker-password={PASSWORD}")  # fmt: skip
    job["spec"]["podTemplate"] = {"imagePullSecrets": [{"name": "regcred"}]}

    def apply(tag: str) -> str:
        job["spec"]["image"] = f"{repo}:{tag}"
        proc = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False)
        return proc.stderr

    def until(tag: str, ok: Any, what: str) -> str:
        deadline = time.monotonic() + 180
        while True:  # the rollout's old pods answer until they are gone
            err = apply(tag)
            if ok(err):
                return err
            assert time.monotonic() < deadline, f"{what}: {err[-1500:]}"
            time.sleep(0.5)  # polling the apiserver for a condition, bounded by the deadline

    # the registry is on the node's bridge, a private address: listed, as a cluster lists its in-cluster registry
    node.helm("upgrade", RELEASE, *chart, "--set", "config.registryAccess.mode=all",
              "--set", f"config.registryAccess.internalRegistries={{{reg.address}}}", "--wait", "--timeout", "5m")  # fmt: skip
    err = until(VERSION, lambda e: "[Image Pull]" in e, "no Image Pull result after registryAccess.mode=all")
    assert (
        f'Warning: [Image Pull] Cannot verify image "{repo}:{VERSION}" (pod groups "controller", "workers"): '
        f'the TLS certificate of "{reg.address}" is not trusted; add its CA (registryAccess.caFile; chart: '
        "registryCA)." in err
    ), err
    assert "[Image Pull] Image" not in err  # never a deny
    cp.kubectl("create", "secret", "generic", "registry-ca", "-n", NS, f"--from-file=ca.crt={reg.ca_file}")
    node.helm("upgrade", RELEASE, *chart, "--set", "registryCA.secretName=registry-ca", "--wait", "--timeout", "5m")

    # a new pod's first lookups may time out while it starts (a warning, "Cannot verify", and the
    # registry's circuit breaker opens for a while): wait for the registry's own answer
    def answered(e: str) -> bool:
        return "not trusted" not in e and "Cannot verify" not in e

    err = until("9.9.9", lambda e: answered(e) and "[Image Pull]" in e, "CA not used")
    assert f'[Image Pull] Image "{repo}:9.9.9" not found: registry "{reg.address}" has no manifest' in err, err
    err = until(VERSION, answered, "CA not used")
    assert "[Image Pull]" not in err, err  # found, and pullable with regcred: a pass says nothing
