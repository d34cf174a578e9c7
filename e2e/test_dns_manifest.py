"""Kubernetes' CoreDNS addon manifest as the Stack renders it (e2e/harness/stack.py
``dns_manifests``), from the template ``e2e/stack.sh manifests`` copies out of the
k8s.io/kubernetes module; no node needed (e2e/test_dns_live.py runs it on one)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from e2e.harness.node import NodeError, cluster_dns_ip
from e2e.harness.stack import STACK_SCRIPT, dns_manifests, image_ref


@pytest.fixture(scope="module")
def template() -> str:
    proc = subprocess.run(["bash", str(STACK_SCRIPT), "manifests"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = subprocess.run(["bash", str(STACK_SCRIPT), "path"], capture_output=True, text=True, check=True)
    return (Path(out.stdout.strip()) / "manifests" / "coredns.yaml.base").read_text()


def test_the_dns_ip_is_the_service_ranges_tenth_address() -> None:
    assert cluster_dns_ip("10.96.0.0/24") == "10.96.0.10"
    assert cluster_dns_ip("172.30.96.0/24") == "172.30.96.10"


def test_rendered_as_kube_up_with_only_the_image_and_the_forward_changed(template: str) -> None:
    assert "forward . /etc/resolv.conf" in template  # upstream still forwards: we remove it
    docs = dns_manifests(template, server="10.96.0.10", domain="cluster.local", image=image_ref("coredns"))
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service"}
    corefile = by_kind["ConfigMap"]["data"]["Corefile"]
    assert "forward" not in corefile
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa {" in corefile
    assert by_kind["Service"]["spec"]["clusterIP"] == "10.96.0.10"
    (c,) = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert c["image"] == image_ref("coredns") and c["image"].startswith("localhost/preflight/coredns:v")
    assert c["resources"]["limits"]["memory"] == "170Mi"
    assert c["securityContext"]["capabilities"] == {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}


def test_a_template_that_changed_under_us_fails_loudly(template: str) -> None:
    with pytest.raises(NodeError, match="forward"):
        dns_manifests(
            template.replace("forward . /etc/resolv.conf", "forward . 10.0.0.1"),
            server="10.96.0.10",
            domain="cluster.local",
            image="x",
        )
    with pytest.raises(NodeError, match="template variable"):
        dns_manifests(template + "\n# x\n---\nkind: X\nv: __NEW__VAR__\n", server="1", domain="d", image="x")
