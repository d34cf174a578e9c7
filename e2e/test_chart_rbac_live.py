"""The chart's RBAC on the real kube-apiserver: the named reads are granted by name, in their namespace, only.

The chart is `helm install`ed (no pods run here: no scheduler or kubelet), then the webhook's own
identity — a token of its ServiceAccount from the TokenRequest API, and the webhook's own client
opened with it and with the config the chart rendered — proves what it may read:

* the cluster-autoscaler status ConfigMap in kube-system, and the Lease and Deployment of the
  controller whose namespace exists: yes;
* another ConfigMap in kube-system, that ConfigMap's name in a user namespace, any LIST of
  ConfigMaps, another Lease: no (RBAC), and the webhook's client does not even ask (refused);
* a namespace the config names that does not exist at install: skipped (no Role), the install
  succeeds, the capability probe reports those reads as not permitted, and a read there is "not
  found" while the namespace does not exist (nothing can be in it) and "not permitted" once it
  does (created after the install: `helm upgrade` grants it); listed explicitly in
  rbac.namedReadNamespaces, a missing namespace fails the install.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane
from webhook.checks import all_checks
from webhook.cluster.live import open_cluster_view
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.kube import ApiError

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "preflight-webhook"
NS = "pf-rbac-e2e"
RELEASE = "pfrbac"
FULL = f"{RELEASE}-preflight-webhook"
SA_USER = f"system:serviceaccount:{NS}:{FULL}"
CTRL_NS = "pf-rbac-ctrl"  # exists: the (pretend) JobSet controller runs here
MISSING = "pf-rbac-missing"  # named by the config, never created
LATE = "pf-rbac-late"  # named by the config, created after the install (so it has no Role)
USER_NS = "pf-rbac-user"
VALUES = [
    # keep the (fail-closed, never-running) webhook away from every other test's namespaces
    "--set",
    "webhook.namespaceSelectorExpressions[0].key=pf-rbac-e2e",
    "--set",
    "webhook.namespaceSelectorExpressions[0].operator=Exists",
    "--set",
    f"config.controllers.jobset.namespace={CTRL_NS}",
    "--set",
    "config.controllers.jobset.deployment=js-ctrl",
    "--set",
    "config.controllers.jobset.lease=js-lock",
    *[a for key in ("trainer", "aiperf") for a in ("--set", f"config.controllers.{key}.namespace={MISSING}")],
    "--set",
    f"config.controllers.kueue.namespace={LATE}",
    # this apiserver runs no endpoint reconciler (loopback only): the NetworkPolicy is told its address
    "--set",
    "networkPolicy.apiserverCIDRs={127.0.0.1/32}",
]


INSTALL_OUTPUT: list[str] = []


def helm(cp: ControlPlane, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cp.helm(*args, check=check)


def _objects() -> list[dict[str, Any]]:
    cm = lambda ns, name: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}  # noqa: E731
    lease = lambda name: {  # noqa: E731
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": CTRL_NS},
        "spec": {"holderIdentity": "js-ctrl-0", "leaseDurationSeconds": 15},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "js-ctrl", "namespace": CTRL_NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "js"}},
            "template": {
                "metadata": {"labels": {"app": "js"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    return [
        cm("kube-system", "cluster-autoscaler-status"),
        cm("kube-system", "pf-rbac-other"),
        cm(USER_NS, "cluster-autoscaler-status"),
        cm(USER_NS, "app-config"),
        lease("js-lock"),
        lease("other-lock"),
        deployment,
    ]


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    for ns in (NS, CTRL_NS, USER_NS):
        cp.ensure_namespace(ns)
    cp.apply(_objects())
    cp.kubectl("delete", "namespace", LATE, "--ignore-not-found", "--wait=false")
    INSTALL_OUTPUT.append(helm(cp, "install", RELEASE, str(CHART), "--namespace", NS, *VALUES).stdout)
    cp.ensure_namespace(LATE)
    try:
        yield cp
    finally:
        helm(cp, "uninstall", RELEASE, "--namespace", NS, check=False)
        cp.kubectl(
            "delete", "configmap", "cluster-autoscaler-status", "pf-rbac-other", "-n", "kube-system", check=False
        )


@pytest.fixture(scope="module")
def sa_kubeconfig(installed: ControlPlane) -> Path:
    """A kubeconfig holding a token of the webhook's ServiceAccount (TokenRequest API)."""
    cp = installed
    token = cp.kubectl("create", "token", FULL, "-n", NS, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(cp.kubeconfig).read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "webhook", "user": {"token": token}}],
        "contexts": [{"name": "webhook", "context": {"cluster": cluster["name"], "user": "webhook"}}],
        "current-context": "webhook",
    }
    path = cp.state_dir / "pf-rbac-webhook.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def test_the_install_succeeds_and_renders_roles_only_where_the_namespace_exists(installed: ControlPlane) -> None:
    cp = installed
    manifest = [d for d in yaml.safe_load_all(helm(cp, "get", "manifest", RELEASE, "-n", NS).stdout) if d]
    roles = {
        d["metadata"]["namespace"]: d["rules"]
        for d in manifest
        if d["kind"] == "Role" and d["metadata"]["name"] == f"{FULL}-reads"
    }
    assert roles == {
        "kube-system": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["cluster-autoscaler-status"],
                "verbs": ["get"],
            }
        ],
        CTRL_NS: [
            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["js-ctrl"], "verbs": ["get"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["js-lock"],
                "verbs": ["get"],
            },
        ],
    }
    bindings = sorted(
        d["metadata"]["namespace"]
        for d in manifest
        if d["kind"] == "RoleBinding" and d["metadata"]["name"] == f"{FULL}-reads"
    )
    assert bindings == sorted(["kube-system", CTRL_NS])
    cp.kubectl("get", "role,rolebinding", f"{FULL}-reads", "-n", CTRL_NS)
    # and the install says so
    notes = INSTALL_OUTPUT[-1]
    assert f"Named reads (Role {FULL}-reads) in: kube-system, {CTRL_NS}\n" in notes, notes
    assert (
        f"Not granted (namespace missing at install, or not in rbac.namedReadNamespaces): {LATE}, {MISSING}.\n"
        '  Those reads are "not found" while the namespace is missing; once it exists, `helm upgrade` grants them.'
    ) in notes, notes


def _kubectl_as_webhook(cp: ControlPlane, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cp.kubectl(*args, kubeconfig=kubeconfig, check=False)


def test_the_webhooks_token_reads_the_named_objects_and_nothing_else(
    installed: ControlPlane, sa_kubeconfig: Path
) -> None:
    cp = installed
    ok = [
        ("configmap", "cluster-autoscaler-status", "kube-system"),
        ("lease", "js-lock", CTRL_NS),
        ("deployment", "js-ctrl", CTRL_NS),
    ]
    for kind, name, ns in ok:
        got = _kubectl_as_webhook(cp, sa_kubeconfig, "get", kind, name, "-n", ns, "-o", "name")
        assert got.returncode == 0, got.stderr
    refused = [
        (
            ("get", "configmap", "pf-rbac-other", "-n", "kube-system"),
            f'configmaps "pf-rbac-other" is forbidden: User "{SA_USER}" cannot get resource "configmaps" in API group "" in the namespace "kube-system"',
        ),
        (
            ("get", "configmap", "cluster-autoscaler-status", "-n", USER_NS),
            f'configmaps "cluster-autoscaler-status" is forbidden: User "{SA_USER}" cannot get resource "configmaps" in API group "" in the namespace "{USER_NS}"',
        ),
        (
            ("get", "configmap", "app-config", "-n", USER_NS),
            f'configmaps "app-config" is forbidden: User "{SA_USER}" cannot get resource "configmaps" in API group "" in the namespace "{USER_NS}"',
        ),
        (
            ("get", "configmaps", "-n", "kube-system"),
            f'configmaps is forbidden: User "{SA_USER}" cannot list resource "configmaps" in API group "" in the namespace "kube-system"',
        ),
        (
            ("get", "lease", "other-lock", "-n", CTRL_NS),
            f'leases.coordination.k8s.io "other-lock" is forbidden: User "{SA_USER}" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "{CTRL_NS}"',
        ),
        (
            ("get", "deployment", "js-ctrl", "-n", USER_NS),
            f'deployments.apps "js-ctrl" is forbidden: User "{SA_USER}" cannot get resource "deployments" in API group "apps" in the namespace "{USER_NS}"',
        ),
    ]
    for args, message in refused:
        got = _kubectl_as_webhook(cp, sa_kubeconfig, *args)
        assert got.returncode != 0 and message in got.stderr, (args, got.stderr)
    # impersonation agrees with the token (the same identity, as `kubectl --as` sees it)
    can = cp.kubectl("auth", "can-i", "get", "configmaps", f"--as={SA_USER}", "-n", USER_NS, check=False)
    assert can.stdout.strip() == "no"
    can = cp.kubectl(
        "auth",
        "can-i",
        "get",
        "configmap/cluster-autoscaler-status",
        f"--as={SA_USER}",
        "-n",
        "kube-system",
        check=False,
    )
    assert can.stdout.strip() == "yes"


async def test_the_webhooks_client_probes_and_reads_exactly_the_named_objects(
    installed: ControlPlane, sa_kubeconfig: Path
) -> None:
    cp = installed
    rendered = json.loads(cp.kubectl("get", "configmap", f"{FULL}-config", "-n", NS, "-o", "json").stdout)
    settings = Settings.model_validate(yaml.safe_load(rendered["data"]["config.yaml"]))
    # `helm install` read the apiserver's ServiceCIDR objects: the Service range is internal to the registry client
    assert cp.service_cidr in settings.registry_access.cluster_networks
    view = await open_cluster_view(settings, kubeconfig=str(sa_kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert await view.wait_probed(60)
        summary = view.capability_summary()
        missing = set(summary["missingPermissions"])
        # the reads in the namespace that did not exist at install: no Role, so not permitted
        assert missing == {
            f"get deployments.apps {MISSING}/kubeflow-trainer-controller-manager",
            f"get leases.coordination.k8s.io {MISSING}/trainer.kubeflow.org",
            f"get deployments.apps {LATE}/kueue-controller-manager",
            f"get leases.coordination.k8s.io {LATE}/c1f6bfd2.kueue.x-k8s.io",
            f"get deployments.apps {MISSING}/aiperf-operator",
        }
        # the granted ones are not missing, and nothing cluster-wide is (the ClusterRole is generated)
        caps = {c["check"]: c for c in summary["checks"]}
        assert (caps["Controllers"]["value"], caps["Controllers"]["reason"]) == ("yes", "")
        assert caps["Node Selector Match"]["value"] == "yes"

        cm = await view.get_object("v1", "configmaps", "kube-system", "cluster-autoscaler-status", Deadline(10))
        assert cm is not None and cm["metadata"]["name"] == "cluster-autoscaler-status"
        lease = await view.get_object("coordination.k8s.io/v1", "leases", CTRL_NS, "js-lock", Deadline(10))
        assert lease is not None and lease["spec"]["holderIdentity"] == "js-ctrl-0"
        assert await view.get_object("apps/v1", "deployments", CTRL_NS, "js-ctrl", Deadline(10)) is not None
        # a declared read RBAC does not grant: in a namespace that does not exist, "not found" (the
        # apiserver's 403 is all it says, but nothing can be there); in one created after the install, the 403
        assert (
            await view.get_object("coordination.k8s.io/v1", "leases", MISSING, "trainer.kubeflow.org", Deadline(10))
            is None
        )
        assert await view.wait_for("namespaces", lambda v: v.get_cached("namespaces", None, LATE) is not None, 30)
        with pytest.raises(ApiError) as exc:
            await view.get_object("coordination.k8s.io/v1", "leases", LATE, "c1f6bfd2.kueue.x-k8s.io", Deadline(10))
        assert exc.value.forbidden and f'User "{SA_USER}" cannot get resource "leases"' in exc.value.message
        sent = dict(view.client.requests)
        # undeclared reads: refused by the client, never sent
        for ns, name in (("kube-system", "pf-rbac-other"), (USER_NS, "cluster-autoscaler-status")):
            with pytest.raises(ApiError) as exc:
                await view.get_object("v1", "configmaps", ns, name, Deadline(10))
            assert (
                exc.value.message
                == f'the webhook does not read configmaps "{name}" in namespace "{ns}" (not a declared read)'
            )
        assert dict(view.client.requests) == sent
    finally:
        await view.close()


async def test_controllers_is_lowered_only_for_reads_in_namespaces_that_exist(
    installed: ControlPlane, sa_kubeconfig: Path
) -> None:
    """Every controller moved where the webhook has no Role: the reads in the namespace that exists (created
    after the install) lower the check, with exactly those reads as the reason; those in a missing one do not."""
    elsewhere = {"namespace": MISSING, "deployment": "x", "lease": "y"}
    settings = Settings.model_validate(
        {
            "controllers": {
                "jobset": {"namespace": LATE, "deployment": "js-ctrl", "lease": "js-lock"},
                "trainer": elsewhere,
                "kueue": elsewhere,
                "aiperf": elsewhere,
            }
        }
    )
    view = await open_cluster_view(settings, kubeconfig=str(sa_kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert await view.wait_synced(60), view.ready_reason
        assert await view.wait_for("namespaces", lambda v: v.get_cached("namespaces", None, LATE) is not None, 30)
        caps = {c["check"]: c for c in view.capabilities()}
        assert (caps["Controllers"]["value"], caps["Controllers"]["reason"]) == (
            "no",
            f"not permitted to get deployments.apps {LATE}/js-ctrl, get leases.coordination.k8s.io {LATE}/js-lock",
        )
    finally:
        await view.close()


def test_a_listed_namespace_that_does_not_exist_fails_the_install(control_plane: ControlPlane) -> None:
    cp = control_plane
    cp.ensure_namespace(NS)
    release = "pfrbac-missing"
    proc = helm(
        cp,
        "install",
        release,
        str(CHART),
        "--namespace",
        NS,
        *VALUES,
        "--set",
        f"rbac.namedReadNamespaces={{kube-system,{MISSING}}}",
        check=False,
    )
    try:
        assert proc.returncode != 0
        assert f'namespaces "{MISSING}" not found' in proc.stderr, proc.stderr
    finally:
        helm(cp, "uninstall", release, "--namespace", NS, check=False)
