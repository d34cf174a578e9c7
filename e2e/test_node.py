"""The real single-node cluster (e2e/harness/node.py): it comes up, keeps its addresses on this
machine, and its teardown leaves nothing behind.

Marked ``node``: ``pytest e2e -m "not node"`` skips them; ``make test`` runs them. On a
machine where the node cannot run (not root, packages missing), they FAIL with the reason.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.harness.node import (
    NODE_NAME,
    Node,
    _cgroup_dirs,
    default_route_devs,
    diff_snapshots,
    snapshot,
    stale_state_dirs,
)

pytestmark = pytest.mark.node


def _route_dev(addr: str) -> str:
    out = subprocess.run(["ip", "-j", "route", "get", addr], capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0].get("dev", "")


def test_node_comes_up_keeps_its_ranges_local_and_tears_down_clean() -> None:
    node = Node(start_timeout=150)
    node.start()
    # taken by start() once it held the machine lock: a snapshot taken here before start() would
    # include another engineer's node that start() waited for, gone by the end
    before = node.start_snapshot
    assert before is not None
    try:
        pids = dict(node.pids)
        assert set(pids) >= {
            "etcd",
            "kube-apiserver",
            "containerd",
            "kubelet",
            "kube-proxy",
            "kube-controller-manager",
            "kube-scheduler",
        }
        nodes = json.loads(node.cp.kubectl("get", "nodes", "-o", "json").stdout)["items"]  # type: ignore[union-attr]
        assert [n["metadata"]["name"] for n in nodes] == [NODE_NAME]
        addrs = {a["type"]: a["address"] for a in nodes[0]["status"]["addresses"]}
        assert addrs["InternalIP"] == node.bridge_ip
        # the apiserver and the node live on the bridge, a local address
        assert ipaddress.ip_address(node.bridge_ip) in ipaddress.ip_network(node.pod_cidr)
        # Every address of the pod and Service ranges is routed into the bridge, never out by the default route.
        default_devs = default_route_devs()
        for cidr in (node.pod_cidr, node.service_cidr):
            net = ipaddress.ip_network(cidr)
            for addr in (net[2], net[10], net[-2]):  # (net[1] of the pod range is the bridge's own, local address)
                dev = _route_dev(str(addr))
                assert dev == node.bridge, f"{addr} ({cidr}) routed via {dev}"
                assert dev not in default_devs
        # the `kubernetes` Service's ClusterIP answers from the host (kube-proxy's rules)
        svc = json.loads(node.cp.kubectl("get", "svc", "kubernetes", "-o", "json").stdout)  # type: ignore[union-attr]
        assert ipaddress.ip_address(svc["spec"]["clusterIP"]) in ipaddress.ip_network(node.service_cidr)
        # nothing addressed to the ranges tried to leave by the default route
        counters = node.guard_counters()
        assert len(counters) == 2 * len(default_devs)
        assert sum(counters.values()) == 0, counters
        cgroup_root = node.cgroup_root
        assert _cgroup_dirs(cgroup_root)
    finally:
        left = node.stop()
    assert left == []
    for name, pid in pids.items():
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z", name
    assert _cgroup_dirs(cgroup_root) == []
    assert diff_snapshots(before, snapshot()) == []


_OWNER = """
import sys
from e2e.harness.node import Node
node = Node(start_timeout=150)
node.start()
print(node.state_dir, flush=True)
sys.stdin.read()  # until the test kills this process: the node is never stopped
"""


def test_a_node_whose_owner_was_killed_is_torn_down_by_the_next_start() -> None:
    """A session or CI run killed with a node up leaves its bridge, guard chain, iptables rules and
    mounts (its processes die with their owner). The next start tears that node down from its
    records and starts, instead of waiting for a guard chain nobody will remove."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    try:
        line = owner.stdout.readline().strip()  # type: ignore[union-attr]
        assert line, f"the owner process did not bring its node up (exit {owner.poll()})"
        dead_dir = Path(line)
        before = json.loads((dead_dir / "snapshot.json").read_text())
        dead = json.loads((dead_dir / "node.json").read_text())
        assert dead["owner_pid"] == owner.pid and dead["detached"] is False
    finally:
        owner.kill()
        owner.wait()
    assert diff_snapshots(before, snapshot()) != []  # the dead node's bridge, chains and mounts are there
    assert dead_dir in stale_state_dirs()

    node = Node(start_timeout=150)
    node.start()
    try:
        assert not dead_dir.exists()
        nodes = json.loads(node.cp.kubectl("get", "nodes", "-o", "json").stdout)["items"]  # type: ignore[union-attr]
        assert [n["metadata"]["name"] for n in nodes] == [NODE_NAME]
    finally:
        left = node.stop()
    assert left == []
    assert diff_snapshots(before, snapshot()) == []
