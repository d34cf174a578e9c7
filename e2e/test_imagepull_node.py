"""Image Pull against the real outcome: the node's containerd pulls from the distribution registry.

On the real node (kubelet + containerd, e2e/harness/node.py) pods pull the node's pause image, pushed
to the registry on the node's bridge (TLS from the harness CA, given to containerd as <address>/ca.crt; htpasswd auth), with a
pull Secret of their own. What the kubelet does (Running, or ErrImagePull / ImagePullBackOff) is the
judge; the Image Pull check, run on an AIPerfJob with the same image and Secret against the same
cluster, must agree: pass where the pod runs, fail where it cannot pull.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from e2e.harness.live import live_evaluate, result_of
from e2e.harness.node import PAUSE_IMAGE, Node, build_images
from e2e.harness.registry import Registry, containerd_hosts, push_docker_archive
from webhook.checks import all_checks
from webhook.cluster.live import open_cluster_view
from webhook.config import Settings
from webhook.results import Status

ROOT = Path(__file__).resolve().parents[1]
NS = "imgpull-node"
USER, PASSWORD = "puller", "node-pull-5e8d1c"


def _pod(name: str, image: str, secret: str | None, policy: str = "Always") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": image, "imagePullPolicy": policy}],
                            "terminationGracePeriodSeconds": 0}  # fmt: skip
    if secret:
        spec["imagePullSecrets"] = [{"name": secret}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _outcome(node: Node, name: str, timeout: float = 120) -> str:
    """ "Running", or the waiting reason once it is ErrImagePull / ImagePullBackOff (the kubelet's verdict)."""
    assert node.cp is not None
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        pod = json.loads(node.cp.kubectl("get", "pod", name, "-n", NS, "-o", "json").stdout)
        for st in (pod.get("status") or {}).get("containerStatuses") or []:
            state = st.get("state") or {}
            if "running" in state:
                return "Running"
            reason = (state.get("waiting") or {}).get("reason", "")
            if reason in ("ErrImagePull", "ImagePullBackOff"):
                return "ErrImagePull"
            last = reason
        time.sleep(0.5)  # polling the apiserver for a condition, bounded by the deadline
    raise AssertionError(f"pod {name} reached no pull outcome in {timeout}s (last: {last})")


@pytest.mark.node
async def test_the_check_agrees_with_containerd(tmp_path: Path) -> None:
    archive = build_images("pause") / "pause.tar"
    with Node(start_timeout=150) as node:
        assert node.cp is not None and node.bridge_ip is not None
        # on the node's bridge: containerd trusts it through <address>/ca.crt (containerd_hosts)
        with Registry(tmp_path / "registry", trustme.CA(), {USER: PASSWORD}, host=node.bridge_ip) as reg:
            await _agree(node, reg, archive)


async def _agree(node: Node, reg: Registry, archive: Path) -> None:
    assert node.cp is not None
    push_docker_archive(reg, "team/pause", "1.0", archive)
    containerd_hosts(reg, node.registry_hosts_dir)
    cp = node.cp
    cp.ensure_namespace(NS)
    node.wait_default_serviceaccount(NS)
    for name, password in (("regcred", PASSWORD), ("badcred", "wrong-" + PASSWORD)):
        cp.kubectl("create", "secret", "docker-registry", name, "-n", NS, f"--docker-server={reg.address}",
                   f"--docker-username={USER}", f"--docker-password={password}")  # fmt: skip
    rows = [
        ("right-credentials", f"{reg.address}/team/pause:1.0", "regcred", "Running", Status.PASS),
        ("wrong-credentials", f"{reg.address}/team/pause:1.0", "badcred", "ErrImagePull", Status.FAIL),
        ("no-credentials", f"{reg.address}/team/pause:1.0", None, "ErrImagePull", Status.FAIL),
        ("missing-tag", f"{reg.address}/team/pause:9.9", "regcred", "ErrImagePull", Status.FAIL),
    ]
    for name, image, secret, _, _ in rows:
        cp.kubectl("apply", "-f", "-", input=json.dumps(_pod(name, image, secret)))
    # the registry is on the node's bridge, a private address: listed, as a cluster lists its in-cluster registry
    settings = Settings(registryAccess={"mode": "all", "caFile": str(reg.ca_file), "internalRegistries": [reg.address]})
    view = await open_cluster_view(settings, kubeconfig=str(cp.kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert await view.wait_synced(60), view.ready_reason
        seen = []
        for name, image, secret, want_pod, want_check in rows:
            job = yaml.safe_load((ROOT / "e2e" / "samples" / "aiperfjob-good.yaml").read_text())
            job["metadata"].update(name=name, namespace=NS)
            job["spec"]["image"] = image
            if secret:
                job["spec"]["podTemplate"] = {"imagePullSecrets": [{"name": secret}]}
            r = result_of(await live_evaluate(job, view, settings), "Image Pull")
            seen.append((name, _outcome(node, name), r.status))
            assert (name, want_pod, want_check) == seen[-1], r.message
    finally:
        await view.close()
    await _preloaded_still_starts(node)


async def _preloaded_still_starts(node: Node) -> None:
    """The image the archive holds, loaded into containerd under its own name (the node's
    ``PAUSE_IMAGE``), still starts without credentials after "right-credentials" pulled the pushed
    copy with a Secret. The kubelet keys its pull records by image ID (k8s.io/kubernetes v1.37
    pkg/kubelet/images/pullmanager/image_pull_manager.go writePulledRecordIfChanged, MustAttemptImagePull;
    KEP-2535, on by default since 1.35): had the pushed copy the archive's own config, hence its image
    ID, that ID would count as pulled by the kubelet with regcred, no longer preloaded
    (image_pull_policies.go NeverVerifyPreloadedPullPolicy), and this pod would have to pull
    ``localhost/...`` again, where no registry answers (ErrImagePull). push_docker_archive gives the
    pushed copy a config, so an image ID, of its own."""
    assert node.cp is not None
    node.cp.kubectl("apply", "-f", "-", input=json.dumps(_pod("preloaded", PAUSE_IMAGE, None, "IfNotPresent")))
    outcome = _outcome(node, "preloaded")
    assert outcome == "Running", node.describe(NS)
