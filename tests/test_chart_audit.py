"""The chart's audit controller: its Deployment, its own ServiceAccount, RBAC generated from
webhook.audit.rbac exactly (no more, no less), the openreports.io CRDs verbatim from reports-api
v0.2.1, and the values that turn each off. `helm template` only; e2e/test_chart.py installs the chart."""

from __future__ import annotations

import yaml
from test_chart import CHART, FULL, NS, kinds, one, render
from test_chart_rbac import _flatten

from webhook.audit.rbac import (
    audit_lease_permissions,
    audit_permissions,
    cluster_permissions,
    job_namespace_permissions,
)
from webhook.checks import all_checks

AUDIT = f"{FULL}-audit"
CRDS = ("reports.openreports.io", "clusterreports.openreports.io")
OPENREPORTS = CHART / "files" / "openreports"


def _wanted(perms: list) -> set[tuple[str, str, str]]:  # type: ignore[type-arg]
    return {(p.verb, p.group, f"{p.resource}/{p.subresource}" if p.subresource else p.resource) for p in perms}


def test_the_audit_cluster_role_is_exactly_the_generated_permissions() -> None:
    """The audit ClusterRole plus `<name>-audit-jobs` (bound only where jobs live) are exactly audit_permissions."""
    docs = render()
    cluster_wide = _flatten(one(docs, "ClusterRole", AUDIT)["rules"])
    jobs = _flatten(one(docs, "ClusterRole", f"{AUDIT}-jobs")["rules"])
    assert jobs == _wanted(job_namespace_permissions()) and not (cluster_wide & jobs)
    assert cluster_wide == _wanted(cluster_permissions(all_checks()))
    # no Secret and no Event write cluster-wide: reading the Events back (a new leader) is the only cluster-wide verb
    assert not [r for v, g, r in cluster_wide if r == "secrets"]
    assert sorted(v for v, g, r in cluster_wide if (g, r) == ("", "events")) == ["list"]
    assert sorted(v for v, g, r in jobs if (g, r) == ("", "events")) == ["create", "patch"]
    assert sorted(v for v, g, r in jobs if (g, r) == ("", "secrets")) == ["get", "list", "watch"]
    granted = cluster_wide | jobs
    wanted = _wanted(audit_permissions(all_checks()))
    assert not (granted - wanted), f"the chart grants more: {sorted(granted - wanted)}"
    assert not (wanted - granted), f"the chart lacks: {sorted(wanted - granted)}"
    assert not any("*" in x for rule in granted for x in rule), "no wildcards"
    # its writes beyond the checks' dry runs: Events and reports, with these verbs only
    # list: the read-back of the last Events when it starts leading (without it a failover repeats every Event)
    assert sorted(v for v, g, r in granted if (g, r) == ("", "events")) == ["create", "list", "patch"]
    assert sorted(v for v, g, r in granted if g == "openreports.io") == ["create", "get", "list", "patch", "update"]
    assert not any(v == "delete" or v == "deletecollection" for v, _, _ in granted)
    assert {(v, r) for v, g, r in granted if g == "aiperf.nvidia.com"} == {
        ("list", "aiperfjobs"),
        ("watch", "aiperfjobs"),
        ("list", "aiperfsweeps"),
        ("watch", "aiperfsweeps"),
    }


def test_the_lease_is_granted_in_one_namespace_and_the_account_has_no_other_binding() -> None:
    docs = render()
    role = one(docs, "Role", f"{AUDIT}-lease")
    assert role["metadata"]["namespace"] == NS
    assert _flatten(role["rules"]) == _wanted(audit_lease_permissions())
    sa = one(docs, "Deployment", AUDIT)["spec"]["template"]["spec"]["serviceAccountName"]
    assert sa == AUDIT and one(docs, "ServiceAccount", AUDIT)
    bindings = sorted(
        (d["kind"], d["metadata"].get("namespace", ""), d["roleRef"]["name"])
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding") and any(s["name"] == sa for s in d["subjects"])
    )
    assert bindings == [("ClusterRoleBinding", "", AUDIT), ("RoleBinding", NS, f"{AUDIT}-lease")]
    # the webhook's own account is not given any of it
    webhook_sa = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["serviceAccountName"]
    assert webhook_sa != sa


def test_the_named_reads_roles_are_bound_to_the_audit_account_too() -> None:
    docs = render("--set", "rbac.namedReadNamespaces={kube-system}")
    rb = one([d for d in docs if d["metadata"].get("namespace") == "kube-system"], "RoleBinding", f"{AUDIT}-reads")
    assert rb["roleRef"]["name"] == f"{FULL}-reads"
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": AUDIT, "namespace": NS}]


def test_the_audit_deployment_runs_the_audit_command_with_the_webhook_config() -> None:
    docs = render("--set", "audit.replicaCount=2")
    dep = one(docs, "Deployment", AUDIT)
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["preflight-webhook", "audit"]
    assert c["args"][0] == "--config=/etc/preflight-webhook/config.yaml"
    assert {e["name"] for e in c["env"]} == {"POD_NAME", "POD_NAMESPACE"}
    assert pod["volumes"][0]["configMap"]["name"] == f"{FULL}-config"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert "--metrics-port=9090" in c["args"] and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # the initial lists may take the whole 60 s sync timeout: liveness waits for the startup probe (150 s)
    assert c["startupProbe"]["httpGet"]["path"] == c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] > 60
    assert dep["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "audit"


def test_the_crds_are_reports_api_v0_2_1_verbatim_and_each_value_turns_its_part_off() -> None:
    docs = render()
    for name in CRDS:
        crd = one(docs, "CustomResourceDefinition", name)
        upstream = yaml.safe_load((OPENREPORTS / f"openreports.io_{name.split('.')[0]}.yaml").read_text())
        # the upstream CRD plus one annotation: an uninstall keeps it (and the reports)
        assert crd["metadata"]["annotations"].pop("helm.sh/resource-policy") == "keep"
        assert crd == upstream
    no_crds = kinds(render("--set", "audit.reports.installCRDs=false"))
    assert not any(k == "CustomResourceDefinition" for k, _ in no_crds)
    no_reports = render("--set", "audit.reports.enabled=false")
    # the controller is told too, and says at start that it writes no report (webhook/audit/reports.py)
    cfg = yaml.safe_load(one(no_reports, "ConfigMap", f"{FULL}-config")["data"]["config.yaml"])
    assert cfg["audit"]["reports"] is False
    assert not any(d["kind"] == "CustomResourceDefinition" for d in no_reports)
    granted = _flatten(one(no_reports, "ClusterRole", AUDIT)["rules"])
    assert not any(g == "openreports.io" for _, g, _ in granted)
    off = render("--set", "audit.enabled=false")
    assert not any("audit" in name for _, name in kinds(off)), kinds(off)
    assert not any(d["kind"] == "CustomResourceDefinition" for d in off)


def test_the_audit_account_may_write_only_what_it_owns_for_real() -> None:
    vap = one(render(), "ValidatingAdmissionPolicy", f"{AUDIT}-dry-run-only")
    conds = {c["name"]: c["expression"] for c in vap["spec"]["matchConditions"]}
    assert (
        conds["from-the-audit-serviceaccount"] == f"request.userInfo.username == 'system:serviceaccount:{NS}:{AUDIT}'"
    )
    assert "'events'" in conds["not-what-it-owns"] and "'reports'" in conds["not-what-it-owns"]
    assert vap["spec"]["validations"][0]["expression"] == "request.dryRun == true"
    assert not any(d["kind"] == "ValidatingAdmissionPolicy" for d in render("--set", "dryRunGuard.enabled=false"))
