"""The serving ClusterRole is exactly what the capability probe asks for: no more, no less.

`webhook.cluster.capabilities.required_permissions(all_checks())` is the union of every check's declared
permissions and what the caches need; the chart's rules are generated from it by
charts/preflight-webhook/gen-rbac.py. A check that gains a permission without regenerating
the chart fails here (its check would be lowered to skip in production); a rule that no
check needs fails here too.

The named single-object reads (`named_permissions(checks, settings)`) are not in the ClusterRole:
the chart renders a Role with `resourceNames` per namespace from its config values
(templates/_named-reads.tpl), and the Roles must equal `rbac_roles(named_permissions(...))` of the
Settings the webhook loads from the ConfigMap of the same render.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_chart import CHART, FULL, NS, ROOT, helm, one, render

from webhook.checks import all_checks
from webhook.cluster.capabilities import named_permissions, rbac_roles, required_permissions
from webhook.config import Settings


def _flatten(rules: list[dict]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for r in rules:
        assert "resourceNames" not in r and "nonResourceURLs" not in r, r
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for verb in r["verbs"]:
                    out.add((verb, g, res))
    return out


def test_serving_cluster_role_equals_required_permissions() -> None:
    """The serving ClusterRole plus `<name>-jobs` (bound only where jobs live) are exactly the required permissions."""
    docs = render()
    rules = one(docs, "ClusterRole", FULL)["rules"]
    cluster_wide = _flatten(rules)
    jobs = _flatten(one(docs, "ClusterRole", f"{FULL}-jobs")["rules"])
    assert jobs == {("get", "", "secrets")} and not (cluster_wide & jobs)
    granted = cluster_wide | jobs
    wanted = {
        (p.verb, p.group, f"{p.resource}/{p.subresource}" if p.subresource else p.resource)
        for p in required_permissions(all_checks())
    }
    assert not (granted - wanted), f"the chart grants more than the checks need: {sorted(granted - wanted)}"
    assert not (wanted - granted), f"the chart lacks what the checks need: {sorted(wanted - granted)}"
    assert not any("*" in x for rule in granted for x in rule), "no wildcards"


def _bindings(docs: list[dict]) -> list[tuple[str, str, str]]:
    sa = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["serviceAccountName"]
    return [
        (d["kind"], d["metadata"].get("namespace", ""), d["roleRef"]["name"])
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(s["kind"] == "ServiceAccount" and s["name"] == sa for s in d["subjects"])
    ]


def test_serving_account_has_no_other_binding() -> None:
    assert _bindings(render()) == [("ClusterRoleBinding", "", FULL)]
    # with the named reads' namespaces listed: one RoleBinding to the Role of each
    docs = render("--set", "rbac.namedReadNamespaces={kube-system,jobset-system}")
    assert _bindings(docs) == [
        ("ClusterRoleBinding", "", FULL),
        ("RoleBinding", "jobset-system", f"{FULL}-reads"),
        ("RoleBinding", "kube-system", f"{FULL}-reads"),
    ]
    for ns in ("jobset-system", "kube-system"):
        rb = one([d for d in docs if d["metadata"].get("namespace") == ns], "RoleBinding", f"{FULL}-reads")
        assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{FULL}-reads"}
        assert rb["subjects"] == [{"kind": "ServiceAccount", "name": FULL, "namespace": NS}]


# --- the named reads: a Role with resourceNames per namespace, from the same config the webhook reads ---

ALL_NAMESPACES = "rbac.namedReadNamespaces={aiperf-system,jobset-system,kube-system,kubeflow-system,kueue-system}"


def _roles(docs: list[dict]) -> list[dict]:
    return [
        {"namespace": d["metadata"]["namespace"], "rules": d["rules"]}
        for d in docs
        if d["kind"] == "Role" and d["metadata"]["name"] == f"{FULL}-reads"
    ]


def _served_settings(docs: list[dict]) -> Settings:
    """The Settings the webhook loads from the ConfigMap this render holds."""
    return Settings.model_validate(yaml.safe_load(one(docs, "ConfigMap", f"{FULL}-config")["data"]["config.yaml"]))


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--set", "config.nodeProvisioning.clusterAutoscalerStatus=autoscaling/ca-status"],
        ["--set", "config.nodeProvisioning.clusterAutoscalerStatus="],
        [
            "--set",
            "config.controllers.aiperf.namespace=jobset-system",
            "--set",
            "config.controllers.aiperf.lease=aiperf-lock",
            "--set",
            "config.controllers.trainer.deployment=",
            "--set",
            "config.kueue.admissionLease=kueue-system/provreq-lock",
        ],
    ],
    ids=["defaults", "autoscaler-moved", "no-autoscaler", "controllers-moved"],
)
def test_named_read_roles_equal_the_webhooks_named_permissions(args: list[str]) -> None:
    """Every namespace listed: the Roles are exactly rbac_roles(named_permissions(...)) of the
    Settings the webhook loads from the rendered ConfigMap, so the chart and the webhook agree."""
    docs = render(*args)
    wanted = rbac_roles(named_permissions(all_checks(), _served_settings(docs)))
    listed = ",".join(r["namespace"] for r in wanted)
    docs = render(*args, "--set", f"rbac.namedReadNamespaces={{{listed}}}")
    assert _roles(docs) == wanted
    for role in _roles(docs):
        for rule in role["rules"]:
            assert rule["verbs"] == ["get"] and rule["resourceNames"], rule
    # the ClusterRole grants none of these kinds cluster-wide
    granted = _flatten(one(docs, "ClusterRole", FULL)["rules"])
    assert not [g for g in granted if g[2] in ("configmaps", "leases", "deployments")]


def test_default_roles_are_the_documented_ones() -> None:
    roles = {r["namespace"]: r["rules"] for r in _roles(render("--set", ALL_NAMESPACES))}
    assert roles["kube-system"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["cluster-autoscaler-status"],
            "verbs": ["get"],
        }
    ]
    assert roles["jobset-system"] == [
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
    ]
    assert sorted(roles) == ["aiperf-system", "jobset-system", "kube-system", "kubeflow-system", "kueue-system"]


def test_without_a_cluster_and_without_a_list_no_role_is_rendered() -> None:
    """rbac.namedReadNamespaces empty: only namespaces that exist (Helm's lookup) get a Role, and
    `helm template` sees no cluster: none. The install of the default chart never fails on a missing
    namespace (e2e/test_chart_rbac_live.py installs it on a real apiserver)."""
    docs = render()
    assert _roles(docs) == []
    assert not [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] != NS]


def test_listing_a_namespace_no_setting_names_is_refused() -> None:
    proc = helm(
        "template", "t", str(CHART), "--namespace", NS, "--set", "rbac.namedReadNamespaces={team-a}", check=False
    )
    assert proc.returncode != 0
    assert (
        'rbac.namedReadNamespaces lists "team-a", which no setting names (the namespaces of config.controllers, '
        "config.nodeProvisioning.clusterAutoscalerStatus and config.kueue.admissionLease: aiperf-system, "
        "jobset-system, kube-system, kubeflow-system, kueue-system)"
    ) in proc.stderr


def test_only_dry_run_writes_are_granted() -> None:
    """The only write verb is create, on pods, jobs and jobsets: the dry runs the VAP confines to dryRun=All."""
    granted = _flatten(one(render(), "ClusterRole", FULL)["rules"])
    writes = sorted((v, g, r) for v, g, r in granted if v not in ("get", "list", "watch"))
    assert writes == [
        ("create", "", "pods"),
        ("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
        ("create", "batch", "jobs"),
        ("create", "jobset.x-k8s.io", "jobsets"),
    ]


def test_generated_template_is_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(CHART / "gen-rbac.py"), "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr


def test_secrets_are_only_ever_got_by_name() -> None:
    """`get` by name, never `list`/`watch`: a LIST would hand over every value of a namespace. And never
    cluster-wide: the serving ClusterRole has no Secret at all; `<name>-jobs` grants the `get`, bound where
    jobs live (tests/test_chart_privileges.py). The self-managed certificate Secret holds no CA key."""
    docs = render()
    assert not [r for r in one(docs, "ClusterRole", FULL)["rules"] if "secrets" in r["resources"]]
    granted = _flatten(one(docs, "ClusterRole", f"{FULL}-jobs")["rules"])
    assert sorted(v for v, g, r in granted if (g, r) == ("", "secrets")) == ["get"]


def test_capabilities_rbac_prints_the_rules_and_the_roles_of_the_config(tmp_path: Path) -> None:
    """`preflight-webhook capabilities --rbac --config F`: what the chart renders for the same config."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text("nodeProvisioning:\n  clusterAutoscalerStatus: autoscaling/ca-status\n")
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "capabilities", "--rbac", "--config", str(cfg), "-o", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # the serving ClusterRole and <name>-jobs (what is bound only where jobs live) together
    rendered = render()
    chart_rules = one(rendered, "ClusterRole", FULL)["rules"] + one(rendered, "ClusterRole", f"{FULL}-jobs")["rules"]
    by_rule = lambda r: (r["apiGroups"], r["resources"])  # noqa: E731
    assert doc["rules"] == sorted(chart_rules, key=by_rule)
    docs = render(
        "--set",
        "config.nodeProvisioning.clusterAutoscalerStatus=autoscaling/ca-status",
        "--set",
        "rbac.namedReadNamespaces={aiperf-system,autoscaling,jobset-system,kubeflow-system,kueue-system}",
    )
    assert doc["roles"] == _roles(docs)
    assert "get configmaps autoscaling/ca-status" in doc["namedPermissions"]
