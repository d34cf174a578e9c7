"""Issue 33, "Privileges": what each of the chart's identities may do, as rendered (docs/security.md,
"What each identity may do"). The same RBAC and policies on the real apiserver, by impersonation:
e2e/test_chart_privileges_live.py.

* The NetworkPolicy admits the apiserver only: its addresses (networkPolicy.apiserverCIDRs, or the
  `kubernetes` Service's endpoints `helm install` reads); none known is an install error, never 0.0.0.0/0.
* Secrets (the webhook's `get`, the audit controller's reads) and the audit's Event writes are granted
  only where jobs live: a RoleBinding per rbac.jobNamespaces, never in a namespace the webhook does not
  judge; rbac.clusterWide is the named opt-in to everywhere.
* The certificate manager may change only the caBundle of its own webhook configuration (a
  ValidatingAdmissionPolicy), and RBAC pins it to that one object.
* The capability probe asks `get secrets` in the job namespaces, and a check that needs it is not
  lowered because the cluster-wide answer is "no".
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from test_chart import APISERVER, CHART, FULL, NS, helm, one, render

from webhook.checks import all_checks
from webhook.cluster.capabilities import (
    JOB_NAMESPACE_PROBES,
    NO,
    UNKNOWN,
    YES,
    PermissionResult,
    capability_of,
    probed_permissions,
    required_permissions,
)
from webhook.config import Settings
from webhook.kube import Permission

AUDIT = f"{FULL}-audit"
CERTS = f"{FULL}-certs"
EXCLUDED = ["kube-system", "kube-node-lease", "kube-public", NS]


def _template(*args: str) -> Any:
    return helm("template", "pf", str(CHART), "--namespace", NS, *args, check=False)


def _config(docs: list[dict[str, Any]]) -> Settings:
    return Settings.model_validate(yaml.safe_load(one(docs, "ConfigMap", f"{FULL}-config")["data"]["config.yaml"]))


# --------------------------------------------------------------------------- NetworkPolicy: the apiserver only


def test_no_known_apiserver_address_is_an_install_error_not_every_address() -> None:
    """Reproduction: the NetworkPolicy admitted 0.0.0.0/0 unless podCIDRs was set."""
    proc = _template()
    assert proc.returncode != 0
    assert (
        "networkPolicy.enabled needs the apiserver's address, and none is known: set networkPolicy.apiserverCIDRs "
        "(e.g. --set networkPolicy.apiserverCIDRs={10.0.0.5/32}; kubeadm/kind: the endpoints of "
        "`kubectl get endpointslice -n default -l kubernetes.io/service-name=kubernetes`; EKS, GKE, AKS: "
        'docs/install.md, "The apiserver\'s address"), or networkPolicy.allowKubeSystemPods=true where konnectivity '
        "agents relay its calls (GKE, AKS), or networkPolicy.allowAllSources=true to admit every address (not "
        "recommended), or networkPolicy.enabled=false. `helm install` finds the endpoints itself; `helm template` "
        "cannot"
    ) in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "peers"),
    [
        (APISERVER, [{"ipBlock": {"cidr": "10.0.0.5/32"}}]),
        (
            ["--set", "networkPolicy.apiserverCIDRs={10.0.0.5/32,fd00::5/128}"],
            [{"ipBlock": {"cidr": "10.0.0.5/32"}}, {"ipBlock": {"cidr": "fd00::5/128"}}],
        ),
        (
            ["--set", "networkPolicy.allowKubeSystemPods=true"],
            [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
        ),
        (
            ["--set", "networkPolicy.allowAllSources=true"],
            [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}],
        ),
    ],
    ids=["apiserver", "dual-stack", "konnectivity", "named-opt-out"],
)
def test_the_webhook_port_admits_exactly_the_named_peers(args: list[str], peers: list[dict[str, Any]]) -> None:
    proc = _template(*args)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    [rule] = one(docs, "NetworkPolicy", FULL)["spec"]["ingress"]
    assert rule == {"ports": [{"port": 8443, "protocol": "TCP"}], "from": peers}


def test_a_disabled_network_policy_needs_no_address() -> None:
    proc = _template("--set", "networkPolicy.enabled=false")
    assert proc.returncode == 0, proc.stderr
    assert "kind: NetworkPolicy" not in proc.stdout


def test_a_malformed_cidr_is_refused_by_the_schema() -> None:
    proc = _template("--set", "networkPolicy.apiserverCIDRs={10.0.0.5}")
    assert proc.returncode != 0 and "apiserverCIDRs" in proc.stderr


# --------------------------------------------------------------------------- Secrets and Events where jobs live


def _bindings(docs: list[dict[str, Any]], sa: str) -> list[tuple[str, str, str]]:
    return sorted(
        (d["kind"], d["metadata"].get("namespace", ""), d["roleRef"]["name"])
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding") and any(s["name"] == sa for s in d["subjects"])
    )


def _secret_verbs(docs: list[dict[str, Any]], role: str) -> list[str]:
    return sorted(v for r in one(docs, "ClusterRole", role)["rules"] if "secrets" in r["resources"] for v in r["verbs"])


def test_secrets_and_event_writes_are_bound_only_in_the_job_namespaces() -> None:
    """Reproduction: the webhook's ServiceAccount could get any Secret cluster-wide, the audit's list them and
    write Events in kube-system. Now neither ClusterRole names Secrets or Event writes; `<name>-jobs` and
    `<name>-audit-jobs` hold them, bound by a RoleBinding in each job namespace only."""
    docs = render("--set", "rbac.jobNamespaces={team-b,team-a}")
    assert _secret_verbs(docs, f"{FULL}-jobs") == ["get"]
    assert _secret_verbs(docs, f"{AUDIT}-jobs") == ["get", "list", "watch"]
    for role in (FULL, AUDIT):
        assert not [r for r in one(docs, "ClusterRole", role)["rules"] if "secrets" in r["resources"]]
    audit_events = [r for r in one(docs, "ClusterRole", AUDIT)["rules"] if "events" in r["resources"]]
    assert audit_events == [{"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]
    assert _bindings(docs, FULL) == [
        ("ClusterRoleBinding", "", FULL),
        ("RoleBinding", "team-a", f"{FULL}-jobs"),
        ("RoleBinding", "team-b", f"{FULL}-jobs"),
    ]
    assert _bindings(docs, AUDIT) == [
        ("ClusterRoleBinding", "", AUDIT),
        ("RoleBinding", NS, f"{AUDIT}-lease"),
        ("RoleBinding", "team-a", f"{AUDIT}-jobs"),
        ("RoleBinding", "team-b", f"{AUDIT}-jobs"),
    ]
    rb = one([d for d in docs if d["metadata"].get("namespace") == "team-a"], "RoleBinding", f"{FULL}-jobs")
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{FULL}-jobs"}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": FULL, "namespace": NS}]
    # the webhook's capability probe is told where it was granted
    assert _config(docs).job_namespaces == ["team-a", "team-b"]


def test_without_a_cluster_no_namespace_is_granted_and_the_webhook_is_told() -> None:
    """`helm template` cannot list namespaces: no RoleBinding, and the config says so (the Secrets check is then
    lowered, "not permitted to get secrets", never reading with a wider grant)."""
    docs = render()
    assert not [
        d for d in docs if d["metadata"]["name"] in (f"{FULL}-jobs", f"{AUDIT}-jobs") and "Binding" in d["kind"]
    ]
    assert _config(docs).job_namespaces == []


@pytest.mark.parametrize("ns", ["kube-system", "kube-public", NS, "tenant-x"])
def test_a_namespace_the_webhook_never_judges_is_refused_as_a_job_namespace(ns: str) -> None:
    proc = _template(
        *APISERVER, "--set", "webhook.excludeNamespaces={tenant-x}", "--set", f"rbac.jobNamespaces={{{ns}}}"
    )
    assert proc.returncode != 0
    assert (
        f'rbac.jobNamespaces lists "{ns}", a namespace the webhook never judges (kube-system, kube-node-lease, '
        f"kube-public, {NS}, tenant-x): its Secrets are never read and no Event is written there"
    ) in proc.stderr, proc.stderr


def test_cluster_wide_is_a_named_opt_in() -> None:
    docs = render("--set", "rbac.clusterWide=true", "--set", "rbac.jobNamespaces={team-a}")
    assert _bindings(docs, FULL) == [("ClusterRoleBinding", "", FULL), ("ClusterRoleBinding", "", f"{FULL}-jobs")]
    assert ("ClusterRoleBinding", "", f"{AUDIT}-jobs") in _bindings(docs, AUDIT)
    assert not [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"].endswith("-jobs")]
    assert _config(docs).job_namespaces is None  # probed cluster-wide


def test_the_audit_events_are_refused_outside_judged_namespaces_even_cluster_wide() -> None:
    docs = render("--set", "rbac.clusterWide=true")
    vap = one(docs, "ValidatingAdmissionPolicy", f"{AUDIT}-events-where-jobs-live")["spec"]
    assert vap["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["", "events.k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["events"],
        }
    ]
    assert vap["matchConditions"] == [
        {
            "name": "from-the-audit-serviceaccount",
            "expression": f"request.userInfo.username == 'system:serviceaccount:{NS}:{AUDIT}'",
        }
    ]
    [v] = vap["validations"]
    assert v["expression"] == "!(request.namespace in " + "[" + ",".join(f"'{n}'" for n in EXCLUDED) + "]" + ")"
    binding = one(docs, "ValidatingAdmissionPolicyBinding", f"{AUDIT}-events-where-jobs-live")["spec"]
    assert binding == {"policyName": f"{AUDIT}-events-where-jobs-live", "validationActions": ["Deny"]}


# --------------------------------------------------------------------------- the certificate manager


def test_the_certs_account_is_pinned_to_its_own_webhook_configuration_and_guarded() -> None:
    """Reproduction: the certs ServiceAccount could rewrite its webhook configuration at will. RBAC pins it to
    one object by name; the policy lets an update change only the caBundle (proven live by impersonation)."""
    docs = render()
    [rule] = one(docs, "ClusterRole", CERTS)["rules"]
    assert rule["resourceNames"] == [FULL] and rule["verbs"] == ["get", "update"]
    vap = one(docs, "ValidatingAdmissionPolicy", f"{CERTS}-cabundle-only")["spec"]
    assert vap["failurePolicy"] == "Fail"
    assert vap["matchConditions"] == [
        {
            "name": "from-the-certs-serviceaccount",
            "expression": f"request.userInfo.username == 'system:serviceaccount:{NS}:{CERTS}'",
        }
    ]
    assert vap["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"],
         "resources": ["*/*"]}
    ]  # fmt: skip
    exprs = [v["expression"] for v in vap["validations"]]
    assert exprs[0] == "variables.isWebhookConfig || variables.isSecret"
    assert exprs[1] == f"!variables.isWebhookConfig || (request.name == '{FULL}' && variables.onlyCaBundle)"
    assert f"object.metadata.name == '{FULL}-tls'" in exprs[2]
    only = {v["name"]: v["expression"] for v in vap["variables"]}["onlyCaBundle"]
    # every field of a webhook but caBundle is compared
    for field in ("rules", "matchConditions", "namespaceSelector", "objectSelector", "failurePolicy", "timeoutSeconds",
                  "clientConfig.url", "clientConfig.service", "sideEffects", "matchPolicy", "admissionReviewVersions"):  # fmt: skip
        assert f"w.{field} == o.{field}" in only, field
    assert "caBundle" not in only
    binding = one(docs, "ValidatingAdmissionPolicyBinding", f"{CERTS}-cabundle-only")["spec"]
    assert binding == {"policyName": f"{CERTS}-cabundle-only", "validationActions": ["Deny"]}
    # cert-manager and provided certificates have no certs account to guard
    for mode in (["--set", "certificates.mode=certManager"],):
        assert not [d for d in render(*mode) if d["metadata"]["name"] == f"{CERTS}-cabundle-only"]


# --------------------------------------------------------------------------- the capability probe


def test_the_probe_asks_secrets_in_the_job_namespaces_instead_of_cluster_wide() -> None:
    checks = all_checks()
    cluster = probed_permissions(checks, Settings())
    assert Permission("get", "secrets") in cluster
    scoped = probed_permissions(checks, Settings(jobNamespaces=["team-b", "team-a"]))
    assert Permission("get", "secrets") not in scoped
    assert [p for p in scoped if p.resource == "secrets"] == [
        Permission("get", "secrets", namespace="team-a"),
        Permission("get", "secrets", namespace="team-b"),
    ]
    # everything else is asked as before
    assert [p for p in scoped if p.resource != "secrets"] == [p for p in cluster if p.resource != "secrets"]
    # granted nowhere (`helm template`: no namespace seen): asked cluster-wide, so the answer is a plain "no"
    assert Permission("get", "secrets") in probed_permissions(checks, Settings(jobNamespaces=[]))
    many = probed_permissions(checks, Settings(jobNamespaces=[f"ns-{i:04d}" for i in range(500)]))
    assert len([p for p in many if p.resource == "secrets"]) == JOB_NAMESPACE_PROBES


def _secrets_check() -> Any:
    [check] = [c for c in all_checks() if c.name == "Secrets"]
    return check


def _answers(secrets: dict[str, bool | None]) -> dict[Permission, PermissionResult]:
    perms = {p: PermissionResult(True) for p in required_permissions(all_checks()) if p.resource != "secrets"}
    for ns, allowed in secrets.items():
        perms[Permission("get", "secrets", namespace=ns)] = PermissionResult(allowed, "" if allowed else "no binding")
    return perms


def test_a_check_granted_only_in_job_namespaces_is_not_lowered() -> None:
    cap = capability_of(_secrets_check(), served=lambda gv: True, perms=_answers({"team-a": True, "team-b": True}))
    assert (cap.value, cap.reason) == (
        YES,
        "get secrets only in the job namespaces (team-a, team-b; rbac.jobNamespaces)",
    )
    some = {f"t{i}": True for i in range(5)} | {"t9": False}
    cap = capability_of(_secrets_check(), served=lambda gv: True, perms=_answers(some))
    assert cap.reason == "get secrets only in the job namespaces (t0, t1, t2 and 2 more; rbac.jobNamespaces)"


def test_a_check_granted_in_no_job_namespace_is_lowered_with_the_permission() -> None:
    cap = capability_of(_secrets_check(), served=lambda gv: True, perms=_answers({"team-a": False}))
    assert (cap.value, cap.reason) == (NO, "not permitted to get secrets")
    nowhere = _answers({}) | {Permission("get", "secrets"): PermissionResult(False)}  # jobNamespaces: []
    cap = capability_of(_secrets_check(), served=lambda gv: True, perms=nowhere)
    assert (cap.value, cap.reason) == (NO, "not permitted to get secrets")
    not_asked = capability_of(_secrets_check(), served=lambda gv: True, perms=_answers({}))
    assert not_asked.value == UNKNOWN  # the check runs and reports what it meets


def test_the_install_notes_say_where_secrets_are_read_and_who_may_call() -> None:
    def notes(*args: str) -> str:
        proc = helm("install", "pf", str(CHART), "--namespace", NS, "--dry-run", *args)
        return proc.stdout.split("NOTES:", 1)[1]

    text = notes(*APISERVER, "--set", "rbac.jobNamespaces={team-a,team-b}")
    assert "Secrets (and the audit controller's Events) in: team-a, team-b\n" in text
    assert "Another namespace: add it to rbac.jobNamespaces and `helm upgrade` (docs/security.md)." in text
    assert "NetworkPolicy: the webhook port admits 10.0.0.5/32\n" in text
    text = notes("--set", "networkPolicy.allowKubeSystemPods=true")
    assert (
        "Secrets (and the audit controller's Events) in: none: the Secrets check is skipped "
        '("not permitted to get secrets"); set rbac.jobNamespaces\n'
    ) in text
    assert "NetworkPolicy: the webhook port admits the pods of kube-system\n" in text
    text = notes(*APISERVER, "--set", "rbac.clusterWide=true")
    assert (
        "Secrets (and the audit controller's Events): every namespace (rbac.clusterWide; kube-system's Secrets too)"
        in text
    )
