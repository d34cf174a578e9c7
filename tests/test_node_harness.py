"""The real node harness's pure parts (e2e/harness/node.py): range choice and the teardown comparison."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness import node


def _snap(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "links": ["eth0", "lo"],
        "iptables": {"filter": [":INPUT", ":FORWARD", ":OUTPUT"]},
        "ip6tables": {},
        "nft_tables": ["ip filter"],
        "mounts": ["/"],
        "paths": [],
        "sysctls": {"vm/overcommit_memory": "0"},
        "routes": ['{"dst": "default"}'],
    }
    base.update(over)
    return base


def test_pick_cidrs_skips_a_pair_that_overlaps_a_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        node, "routes", lambda: [{"dst": "default", "dev": "eth0"}, {"dst": "10.96.0.0/12", "dev": "eth1"}]
    )
    assert node.pick_cidrs() == node.CIDR_CANDIDATES[1]


def test_pick_cidrs_refuses_when_every_pair_collides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node, "routes", lambda: [{"dst": "0.0.0.0/1"}, {"dst": "128.0.0.0/1"}])
    with pytest.raises(node.NodeError, match="collides with a route here"):
        node.pick_cidrs()


def test_a_clean_teardown_differs_in_nothing() -> None:
    assert node.diff_snapshots(_snap(), _snap()) == []


def test_leftovers_are_named() -> None:
    after = _snap(
        links=["eth0", "lo", "pfnode1"],
        iptables={"filter": [":INPUT", ":FORWARD", ":OUTPUT", ":KUBE-FIREWALL", "-A INPUT -j KUBE-FIREWALL"]},
        nft_tables=["ip filter", "ip nat"],
        mounts=["/", "/run/netns/cni-1"],
        sysctls={"vm/overcommit_memory": "1"},
    )
    assert node.diff_snapshots(_snap(), after) == [
        "links: pfnode1 left behind",
        "mounts: /run/netns/cni-1 left behind",
        "nft_tables: ip nat left behind",
        "iptables filter: -A INPUT -j KUBE-FIREWALL left behind",
        "iptables filter: :KUBE-FIREWALL left behind",
        "sysctl vm/overcommit_memory: 0 at start, 1 now",
    ]


def test_a_new_table_with_only_builtin_chains_is_reported_once_as_its_nft_table() -> None:
    after = _snap(ip6tables={"nat": [":PREROUTING", ":OUTPUT"]}, nft_tables=["ip filter", "ip6 nat"])
    assert node.diff_snapshots(_snap(), after) == ["nft_tables: ip6 nat left behind"]


@pytest.mark.parametrize(
    ("version", "has_field"), [((1, 30, 14), False), ((1, 31, 0), True), ((1, 35, 4), True), ((1, 37, 2), True)]
)
def test_kubelet_config_names_fail_cgroup_v1_only_where_the_release_has_it(
    version: tuple[int, int, int], has_field: bool
) -> None:
    cfg = node.kubelet_config(version, {"kind": "KubeletConfiguration", "failSwapOn": False})
    assert cfg["failSwapOn"] is False and cfg["kind"] == "KubeletConfiguration"
    assert ("failCgroupV1" in cfg) is has_field
    if has_field:
        assert cfg["failCgroupV1"] is False  # this VM has cgroup v1 hierarchies


def test_binary_version_reads_the_release_from_version_output(tmp_path: Any) -> None:
    fake = tmp_path / "kubelet"
    fake.write_text("#!/bin/sh\necho Kubernetes v1.37.2\n")
    fake.chmod(0o755)
    assert node.binary_version(fake) == (1, 37, 2)
    fake.write_text("#!/bin/sh\necho Kubernetes v1.38.0-rc.1\n")
    assert node.binary_version(fake) == (1, 38, 0)
