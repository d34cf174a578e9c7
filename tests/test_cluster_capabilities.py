"""Capability computation from SSAR answers and discovery; the RBAC list the chart uses."""

from __future__ import annotations

from typing import ClassVar

from webhook.checks.base import Check, Permission
from webhook.cluster.cache import SPECS_BY_RESOURCE
from webhook.cluster.capabilities import (
    VIEW_PERMISSIONS,
    PermissionResult,
    cache_absence_reason,
    capability_of,
    fatal_reason,
    parse_ssar,
    rbac_rules,
    required_permissions,
    ssar_body,
)
from webhook.cluster.discovery import parse_group_versions, parse_resources, parse_version

LIST_RQ = Permission("list", "resourcequotas")
WATCH_RQ = Permission("watch", "resourcequotas")
CREATE_JS = Permission("create", "jobsets", "jobset.x-k8s.io")


class Quotas(Check):
    name = "Resource Quotas"
    needs_cluster = True
    permissions: ClassVar[tuple[Permission, ...]] = (LIST_RQ,)


class Kueue(Check):
    name = "Kueue"
    needs_cluster = True
    permissions: ClassVar[tuple[Permission, ...]] = (Permission("list", "localqueues", "kueue.x-k8s.io"),)
    apis: ClassVar[tuple[str, ...]] = ("kueue.x-k8s.io/v1beta2",)


class DryRun(Check):
    name = "Dry Run"
    needs_cluster = True
    permissions: ClassVar[tuple[Permission, ...]] = (CREATE_JS, Permission("create", "pods"))


class Offline(Check):
    name = "Image Reference"


class Basics(Check):
    name = "Cluster Basics"
    needs_cluster = True


def served_all(gv: str) -> bool:
    return True


def granted(*perms: Permission, denied: tuple[Permission, ...] = (), unknown: tuple[Permission, ...] = ()) -> dict:
    out = {p: PermissionResult(True) for p in perms}
    out.update({p: PermissionResult(False) for p in denied})
    out.update({p: PermissionResult(None, "SelfSubjectAccessReview failed: timed out") for p in unknown})
    return out


def test_permitted_and_served_is_yes_probed() -> None:
    cap = capability_of(Quotas(), served=served_all, perms=granted(LIST_RQ, WATCH_RQ))
    assert cap.as_dict() == {"check": "Resource Quotas", "value": "yes", "source": "probed", "reason": ""}


def test_missing_list_permission_gives_the_users_reason() -> None:
    cap = capability_of(Quotas(), served=served_all, perms=granted(WATCH_RQ, denied=(LIST_RQ,)))
    assert (cap.value, cap.source, cap.reason) == ("no", "probed", "not permitted to list resourcequotas")


def test_missing_watch_lowers_a_check_that_reads_the_cache() -> None:
    cap = capability_of(Quotas(), served=served_all, perms=granted(LIST_RQ, denied=(WATCH_RQ,)))
    assert cap.reason == "not permitted to watch resourcequotas"


def test_api_not_served_wins_over_permissions() -> None:
    cap = capability_of(Kueue(), served=lambda gv: gv != "kueue.x-k8s.io/v1beta2", perms=granted())
    assert (cap.value, cap.reason) == ("no", "kueue.x-k8s.io/v1beta2 is not served")


def test_several_missing_permissions_are_all_named_with_group() -> None:
    perms = granted(denied=(CREATE_JS, Permission("create", "pods")))
    cap = capability_of(DryRun(), served=served_all, perms=perms)
    assert cap.reason == "not permitted to create jobsets.jobset.x-k8s.io, create pods"


def test_unverifiable_permission_is_unknown_and_says_why() -> None:
    cap = capability_of(DryRun(), served=served_all, perms=granted(Permission("create", "pods"), unknown=(CREATE_JS,)))
    assert cap.value == "unknown"
    assert cap.reason == "could not verify create jobsets.jobset.x-k8s.io: SelfSubjectAccessReview failed: timed out"


def test_offline_check_is_declared_yes() -> None:
    cap = capability_of(Offline(), served=None, perms=None)
    assert (cap.value, cap.source, cap.reason) == ("yes", "declared", "needs no cluster access")


def test_cluster_check_without_probe_is_unknown() -> None:
    cap = capability_of(Quotas(), served=None, perms=None, discovery_error="cannot read the apiserver's discovery: x")
    assert (cap.value, cap.reason) == ("unknown", "cannot read the apiserver's discovery: x")


def test_cluster_check_needing_only_discovery_is_declared_yes() -> None:
    cap = capability_of(Basics(), served=served_all, perms=granted())
    assert (cap.value, cap.source) == ("yes", "declared")


def test_cache_absence_reasons() -> None:
    spec = SPECS_BY_RESOURCE["clusterqueues"]
    assert cache_absence_reason(spec, lambda gv: False, {}) == "kueue.x-k8s.io/v1beta2 is not served"
    denied = {Permission("watch", "clusterqueues", "kueue.x-k8s.io"): PermissionResult(False)}
    assert cache_absence_reason(spec, served_all, denied) == "not permitted to watch clusterqueues.kueue.x-k8s.io"
    assert cache_absence_reason(spec, served_all, {}) == ""  # unknown counts as granted


def test_required_permissions_is_sorted_union_and_deterministic() -> None:
    perms = required_permissions([DryRun(), Quotas(), Kueue()])
    assert perms == required_permissions([Kueue(), Quotas(), DryRun()])
    assert set(VIEW_PERMISSIONS) <= set(perms)
    assert {CREATE_JS, Permission("create", "pods"), LIST_RQ} <= set(perms)
    assert Permission("get", "secrets") in perms
    assert len(perms) == len(set(perms))
    keys = [(p.group, p.resource, p.subresource, p.verb) for p in perms]
    assert keys == sorted(keys)


def test_required_permissions_default_uses_the_registry() -> None:
    from webhook.checks import all_checks

    expected = set(VIEW_PERMISSIONS)
    for c in all_checks():
        expected.update(c.permissions)
        expected.update(c.optional_permissions)
    assert set(required_permissions(all_checks())) == expected
    # single objects are read by name in their namespace (named_permissions), never granted cluster-wide
    for what in (("configmaps", ""), ("leases", "coordination.k8s.io"), ("deployments", "apps")):
        assert Permission("get", *what) not in expected
    assert all(not p.namespace and not p.name for p in expected)


def test_rbac_rules_group_verbs_per_resource() -> None:
    rules = rbac_rules([LIST_RQ, WATCH_RQ, CREATE_JS, Permission("get", "pods", subresource="log")])
    assert rules == [
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list", "watch"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["create"]},
    ]


def test_ssar_round_trip() -> None:
    body = ssar_body(Permission("get", "pods", subresource="log"))
    assert body["spec"]["resourceAttributes"] == {"verb": "get", "resource": "pods", "group": "", "subresource": "log"}
    assert parse_ssar({"status": {"allowed": True}}) == PermissionResult(True, "")
    assert parse_ssar({"status": {"allowed": False, "reason": "no RBAC"}}) == PermissionResult(False, "no RBAC")
    assert parse_ssar({"status": {"allowed": True, "denied": True}}).allowed is False


def test_discovery_parsing() -> None:
    gvs = parse_group_versions(
        {"versions": ["v1"]},
        {
            "groups": [
                {"versions": [{"groupVersion": "kueue.x-k8s.io/v1beta2"}, {"groupVersion": "kueue.x-k8s.io/v1beta1"}]}
            ]
        },
    )
    assert gvs == {"v1", "kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"}
    res = parse_resources(
        {
            "resources": [
                {"name": "pods", "kind": "Pod", "namespaced": True, "verbs": ["create"]},
                {"name": "pods/log", "kind": "Pod", "namespaced": True},
                {"name": "nodes", "kind": "Node", "namespaced": False},
            ]
        }
    )
    assert res["Pod"].name == "pods" and res["Pod"].namespaced
    assert res["Node"].namespaced is False
    assert parse_version({"major": "1", "minor": "27+", "gitVersion": "v1.27.3-eks"}) == (1, 27)
    assert parse_version({"major": "", "minor": "", "gitVersion": "v1.34.4"}) == (1, 34)
    assert parse_version({}) is None


def test_fatal_when_namespaces_cannot_be_read() -> None:
    perms = granted(denied=(Permission("list", "namespaces"), Permission("watch", "namespaces")))
    assert fatal_reason([Quotas()], served_all, perms) == (
        "cannot decide anything: not permitted to list namespaces, watch namespaces (namespace mode labels cannot be read)"
    )


def test_fatal_when_every_cluster_check_is_lowered_but_not_when_one_remains() -> None:
    ns = (Permission("list", "namespaces"), Permission("watch", "namespaces"))
    perms = granted(*ns, denied=(LIST_RQ, WATCH_RQ))
    assert fatal_reason([Quotas(), Offline()], served_all, perms) == (
        "cannot decide anything: every cluster check is lowered "
        "(Resource Quotas: not permitted to list resourcequotas, watch resourcequotas)"
    )
    assert fatal_reason([Quotas(), Basics()], served_all, perms) == ""
    assert fatal_reason([Offline()], served_all, granted(*ns)) == ""


def test_capabilities_table_rendering() -> None:
    from webhook.cli.capabilities import render_table

    text = render_table(
        {
            "ready": False,
            "reason": "starting",
            "serverVersion": "1.34",
            "checks": [
                {
                    "check": "Resource Quotas",
                    "value": "no",
                    "source": "probed",
                    "reason": "not permitted to list resourcequotas",
                },
                {"check": "Image Reference", "value": "yes", "source": "declared", "reason": "needs no cluster access"},
            ],
            "caches": [
                {"resource": "resourcequotas", "cached": False, "reason": "not permitted to list resourcequotas"}
            ],
            "missingPermissions": ["list resourcequotas"],
        }
    )
    assert text.splitlines() == [
        "CHECK            VALUE  SOURCE    REASON",
        "Resource Quotas  no     probed    not permitted to list resourcequotas",
        "Image Reference  yes    declared  needs no cluster access",
        "",
        "Kubernetes 1.34; not ready: starting",
        "Missing permissions: list resourcequotas",
        "Not cached: resourcequotas (not permitted to list resourcequotas)",
    ]


# --- named reads: one object in one namespace, from the settings ----------------------------

from webhook.checks import all_checks  # noqa: E402
from webhook.checks.controllers import Controllers  # noqa: E402
from webhook.checks.nodes import NodeSelectorMatch  # noqa: E402
from webhook.cluster.capabilities import named_permissions, rbac_roles  # noqa: E402
from webhook.config import Settings  # noqa: E402

JOBSET_LEASE = Permission(
    "get", "leases", "coordination.k8s.io", namespace="jobset-system", name="6d4f6a47.jobset.x-k8s.io"
)
AUTOSCALER = Permission("get", "configmaps", namespace="kube-system", name="cluster-autoscaler-status")


def test_named_permissions_follow_the_settings() -> None:
    perms = named_permissions(all_checks(), Settings())
    assert [str(p) for p in perms] == [
        "get deployments.apps aiperf-system/aiperf-operator",
        "get deployments.apps jobset-system/jobset-controller-manager",
        "get leases.coordination.k8s.io jobset-system/6d4f6a47.jobset.x-k8s.io",
        "get configmaps kube-system/cluster-autoscaler-status",
        "get deployments.apps kubeflow-system/kubeflow-trainer-controller-manager",
        "get leases.coordination.k8s.io kubeflow-system/trainer.kubeflow.org",
        "get deployments.apps kueue-system/kueue-controller-manager",
        "get leases.coordination.k8s.io kueue-system/c1f6bfd2.kueue.x-k8s.io",
    ]
    assert perms == named_permissions(list(reversed(all_checks())), Settings())
    assert AUTOSCALER in perms and JOBSET_LEASE in perms
    moved = Settings(
        nodeProvisioning={"clusterAutoscalerStatus": "autoscaler/ca-status"},
        controllers={"aiperf": {"namespace": "bench-ops", "deployment": "op", "lease": "op-lock"}},
        kueue={"admissionLease": "provreq"},
    )
    got = {str(p) for p in named_permissions(all_checks(), moved)}
    assert {
        "get configmaps autoscaler/ca-status",
        "get deployments.apps bench-ops/op",
        "get leases.coordination.k8s.io bench-ops/op-lock",
        "get leases.coordination.k8s.io kube-system/provreq",  # a bare name is in kube-system
    } <= got
    assert "get configmaps kube-system/cluster-autoscaler-status" not in got
    assert not any("aiperf-system" in p for p in got)
    off = Settings(nodeProvisioning={"clusterAutoscalerStatus": ""})
    assert not [p for p in named_permissions(all_checks(), off) if p.resource == "configmaps"]


def test_named_permissions_render_as_one_role_per_namespace_with_resource_names() -> None:
    roles = rbac_roles(named_permissions(all_checks(), Settings()))
    assert roles == [
        {
            "namespace": "aiperf-system",
            "rules": [
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments"],
                    "resourceNames": ["aiperf-operator"],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "namespace": "jobset-system",
            "rules": [
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments"],
                    "resourceNames": ["jobset-controller-manager"],
                    "verbs": ["get"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": ["6d4f6a47.jobset.x-k8s.io"],
                    "verbs": ["get"],
                },
            ],
        },
        {
            "namespace": "kube-system",
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["cluster-autoscaler-status"],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "namespace": "kubeflow-system",
            "rules": [
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments"],
                    "resourceNames": ["kubeflow-trainer-controller-manager"],
                    "verbs": ["get"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": ["trainer.kubeflow.org"],
                    "verbs": ["get"],
                },
            ],
        },
        {
            "namespace": "kueue-system",
            "rules": [
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments"],
                    "resourceNames": ["kueue-controller-manager"],
                    "verbs": ["get"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": ["c1f6bfd2.kueue.x-k8s.io"],
                    "verbs": ["get"],
                },
            ],
        },
    ]


def test_a_named_permission_is_asked_for_that_object_in_its_namespace() -> None:
    assert ssar_body(AUTOSCALER)["spec"]["resourceAttributes"] == {
        "verb": "get",
        "resource": "configmaps",
        "group": "",
        "namespace": "kube-system",
        "name": "cluster-autoscaler-status",
    }
    assert str(AUTOSCALER) == "get configmaps kube-system/cluster-autoscaler-status"


def _controller_perms(settings: Settings) -> list[Permission]:
    return [p for p in named_permissions([Controllers()], settings)]


def test_controllers_is_lowered_only_when_none_of_its_named_reads_is_permitted() -> None:
    s = Settings()
    mine = _controller_perms(s)
    assert len(mine) == 7  # four Deployments, three Leases (the AIPerf operator elects none)
    # only JobSet's namespace granted (the others not installed): the check runs
    perms = granted(
        *[p for p in mine if p.namespace == "jobset-system"],
        denied=tuple(p for p in mine if p.namespace != "jobset-system"),
    )
    cap = capability_of(Controllers(), served=served_all, perms=perms, settings=s)
    assert (cap.value, cap.source, cap.reason) == ("yes", "probed", "")
    # the cluster-wide get is denied, as the chart no longer grants it: irrelevant to the named reads
    perms[Permission("get", "leases", "coordination.k8s.io")] = PermissionResult(False)
    assert capability_of(Controllers(), served=served_all, perms=perms, settings=s).value == "yes"
    # none granted: lowered, naming every named read
    cap = capability_of(Controllers(), served=served_all, perms=granted(denied=tuple(mine)), settings=s)
    assert cap.value == "no"
    assert cap.reason == "not permitted to " + ", ".join(str(p) for p in mine)
    assert cap.reason.startswith(
        "not permitted to get deployments.apps aiperf-system/aiperf-operator, "
        "get deployments.apps jobset-system/jobset-controller-manager, "
        "get leases.coordination.k8s.io jobset-system/6d4f6a47.jobset.x-k8s.io, "
    )
    # not asked at all (SSAR failed): unknown, the check runs and reports what it meets
    cap = capability_of(Controllers(), served=served_all, perms={}, settings=s)
    assert cap.value == "unknown" and cap.reason == f"could not verify {mine[0]}: not asked"


def test_an_optional_named_read_never_lowers_its_check() -> None:
    nodes = (Permission("list", "nodes"), Permission("watch", "nodes"))
    perms = granted(*nodes, denied=(AUTOSCALER,))
    cap = capability_of(NodeSelectorMatch(), served=served_all, perms=perms, settings=Settings())
    assert cap.value == "yes"


def test_named_reads_in_namespaces_that_do_not_exist_do_not_lower_controllers() -> None:
    """Nothing installed (no controller namespace exists, so the chart rendered no Role): the check runs
    and reports "not found"; one namespace exists but may not be read: lowered, naming only its reads."""
    s = Settings()
    mine = _controller_perms(s)
    perms = granted(denied=tuple(mine))
    cap = capability_of(Controllers(), served=served_all, perms=perms, settings=s, namespace_exists=lambda ns: False)
    assert (cap.value, cap.reason) == ("yes", "")
    cap = capability_of(
        Controllers(), served=served_all, perms=perms, settings=s, namespace_exists=lambda ns: ns == "kueue-system"
    )
    assert (cap.value, cap.reason) == (
        "no",
        "not permitted to get deployments.apps kueue-system/kueue-controller-manager, "
        "get leases.coordination.k8s.io kueue-system/c1f6bfd2.kueue.x-k8s.io",
    )


def test_the_view_remembers_a_capability_until_the_namespaces_it_depends_on_change() -> None:
    """LiveClusterView computes a capability once per discovery snapshot and permission probe; for
    Controllers (lowered by its named reads, which count only in namespaces that exist) also once
    per state of the namespaces cache: a namespace created or deleted is seen by the next review."""
    from types import SimpleNamespace

    from webhook.cluster.cache import ResourceCache
    from webhook.cluster.discovery import DiscoverySnapshot
    from webhook.cluster.live import LiveClusterView

    s = Settings()
    view = LiveClusterView(s, object(), checks=[Controllers()], own_ns="preflight-system")  # type: ignore[arg-type]
    view.discovery.snapshot = DiscoverySnapshot(group_versions={"v1", "apps/v1", "coordination.k8s.io/v1"})
    view.permissions = granted(denied=tuple(_controller_perms(s)))
    namespaces = ResourceCache("namespaces")
    namespaces.replace([], "1")
    view.reflectors["namespaces"] = SimpleNamespace(cache=namespaces, denied="")  # type: ignore[assignment]
    assert view.check_capability(Controllers()) == (True, "")
    assert view.check_capability(Controllers()) == (True, "")
    namespaces.apply("ADDED", {"metadata": {"name": "kueue-system", "resourceVersion": "2"}})
    ok, reason = view.check_capability(Controllers())
    assert not ok and reason.startswith("not permitted to get deployments.apps kueue-system/kueue-controller-manager")
    namespaces.apply("BOOKMARK", {"metadata": {"resourceVersion": "3"}})
    assert view.check_capability(Controllers())[0] is False
    namespaces.apply("DELETED", {"metadata": {"name": "kueue-system", "resourceVersion": "4"}})
    assert view.check_capability(Controllers()) == (True, "")
