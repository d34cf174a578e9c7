"""Cluster DNS on the real node, as users have it: the kubelet's ``clusterDNS`` (the Service
range's .10 address) answered by CoreDNS deployed from Kubernetes' own addon manifest
(e2e/harness/stack.py ``Stack.deploy_dns``).

What the AIPerf operator's pods need: a Service name resolves to its ClusterIP, and a JobSet
pod's hostname (``enableDNSHostnames``: ``<jobset>-<job>-0-0.<jobset>``, the headless Service
JobSet makes) resolves from another pod, short and fully qualified. Names are resolved inside a
pod by the workload image's ``getent hosts`` (e2e/nodeimage/workload: Go's resolver on the pod's
own /etc/resolv.conf). A name outside ``cluster.local`` does not resolve (no ``forward``: no
query leaves the node; the guard counters stay 0).

Marked ``node`` (``pytest e2e -m "not node"`` skips it; ``make test`` runs it).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.harness.node import CLUSTER_DOMAIN, Node
from e2e.harness.stack import DNS_NAMESPACE, DNS_SERVICE, WORKLOAD_IMAGE, Stack

pytestmark = pytest.mark.node

NS = "dns-live"
JOBSET = "dnsjs"


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    node = Node(start_timeout=180)
    node.start()
    try:
        # JobSet only: its headless Service is what the hostnames resolve through
        Stack(node, components=("jobset",), runtimes=False).start()
        assert node.cp is not None
        node.cp.kubectl("create", "namespace", NS)
        node.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(_pod("prober")))
        node.cp.kubectl("wait", "-n", NS, "pod/prober", "--for=condition=Ready", "--timeout=120s", timeout=150)
        yield node
    finally:
        left = node.stop()
        assert left == [], left


def _container(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": WORKLOAD_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "WORKLOAD_SLEEP_SECONDS", "value": "1800"}],
    }


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {"containers": [_container("c")], "terminationGracePeriodSeconds": 1},
    }


def _getent(node: Node, name: str) -> subprocess.CompletedProcess[str]:
    assert node.cp is not None
    return node.cp.kubectl("exec", "-n", NS, "prober", "--", "getent", "hosts", name, check=False, timeout=60)


def _resolve(node: Node, name: str, want: set[str], timeout: float = 90) -> set[str]:
    """The addresses ``name`` resolves to in the prober pod, polled until they are ``want``
    (a Service's EndpointSlice reaches CoreDNS's watch a moment after the object exists)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        proc = _getent(node, name)
        got = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
        if proc.returncode == 0 and got == want:
            return got
        last = f"exit {proc.returncode}: {proc.stdout.strip()} {proc.stderr.strip()}"
        time.sleep(1)  # polling a condition with a deadline
    raise AssertionError(f"{name} did not resolve to {sorted(want)} within {timeout:.0f}s: {last}")


def _cluster_ip(node: Node, ns: str, svc: str) -> str:
    assert node.cp is not None
    return str(json.loads(node.cp.kubectl("get", "service", svc, "-n", ns, "-o", "json").stdout)["spec"]["clusterIP"])


def test_the_kubelet_points_pods_at_the_dns_service(node: Node) -> None:
    """The kube-dns Service holds the kubelet's clusterDNS address (the Service range's .10)."""
    assert node.dns_ip.endswith(".10")
    assert _cluster_ip(node, DNS_NAMESPACE, DNS_SERVICE) == node.dns_ip


def test_a_pod_resolves_the_kubernetes_service(node: Node) -> None:
    ip = _cluster_ip(node, "default", "kubernetes")
    assert _resolve(node, f"kubernetes.default.svc.{CLUSTER_DOMAIN}", {ip}) == {ip}
    assert _resolve(node, "kubernetes.default", {ip}) == {ip}  # the pod's search list


def test_a_jobset_pods_hostname_resolves_from_another_pod(node: Node) -> None:
    assert node.cp is not None
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": JOBSET, "namespace": NS},
        "spec": {
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {
                    "name": "controller",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "terminationGracePeriodSeconds": 1,
                                    "containers": [_container("controller")],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    node.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(jobset))
    selector = f"jobset.sigs.k8s.io/jobset-name={JOBSET}"
    deadline = time.monotonic() + 120
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        items = json.loads(node.cp.kubectl("get", "pods", "-n", NS, "-l", selector, "-o", "json").stdout)["items"]
        if items and (items[0].get("status") or {}).get("podIP") and items[0]["status"].get("phase") == "Running":
            pod = items[0]
            break
        time.sleep(1)  # polling a condition with a deadline
    assert pod, node.describe(NS)
    assert pod["spec"]["hostname"] == f"{JOBSET}-controller-0-0"
    assert pod["spec"]["subdomain"] == JOBSET
    ip = pod["status"]["podIP"]
    # the name AIPerf's workers use for their controller, and its short form through the search list
    fqdn = f"{JOBSET}-controller-0-0.{JOBSET}.{NS}.svc.{CLUSTER_DOMAIN}"
    assert _resolve(node, fqdn, {ip}) == {ip}
    assert _resolve(node, f"{JOBSET}-controller-0-0.{JOBSET}", {ip}) == {ip}

    # and a Service by its name (how a benchmark reaches its endpoint)
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "bench", "namespace": NS},
        "spec": {"selector": {"jobset.sigs.k8s.io/jobset-name": JOBSET}, "ports": [{"port": 8000}]},
    }
    node.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(svc))
    bench = _cluster_ip(node, NS, "bench")
    assert _resolve(node, "bench", {bench}) == {bench}


def test_a_name_outside_the_cluster_does_not_resolve_and_nothing_leaves(node: Node) -> None:
    """No ``forward`` in the Corefile: CoreDNS answers only for cluster.local and the reverse
    zones; a query for any other name fails in the pod, asked of the cluster DNS alone (the
    pod's only nameserver), which sends it nowhere."""
    assert node.cp is not None
    corefile = json.loads(node.cp.kubectl("get", "configmap", "coredns", "-n", DNS_NAMESPACE, "-o", "json").stdout)
    assert "forward" not in corefile["data"]["Corefile"]
    proc = _getent(node, "preflight-dns-test.example")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"on {node.dns_ip}:53" in proc.stderr, proc.stderr  # Go's resolver names the server it asked
