"""The chart's part of the security model: who may reach the webhook port, who may call
/validate, and which namespaces' Secrets the webhook may read (docs/security.md)."""

from __future__ import annotations

from typing import Any

import yaml

from tests.test_chart import APISERVER, CHART, FULL, NS, helm, one, render
from webhook.config import Settings

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"


def config(docs: list) -> Settings:
    return Settings.model_validate(yaml.safe_load(one(docs, "ConfigMap", f"{FULL}-config")["data"]["config.yaml"]))


def test_network_policy_admits_only_the_webhook_port_from_the_apiserver() -> None:
    np = one(render(), "NetworkPolicy", FULL)
    spec = np["spec"]
    assert spec["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "preflight-webhook",
        "app.kubernetes.io/instance": "pf",
        "app.kubernetes.io/component": "webhook",  # the serving pods, not the certificate pod
    }
    assert spec["policyTypes"] == ["Ingress"]
    [rule] = spec["ingress"]
    assert rule["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert rule["from"] == [{"ipBlock": {"cidr": "10.0.0.5/32"}}]  # networkPolicy.apiserverCIDRs (tests: APISERVER)


def test_pod_cidrs_are_excepted_per_address_family_when_every_source_is_allowed() -> None:
    np = one(
        render(
            "--set",
            "networkPolicy.allowAllSources=true",
            "--set",
            "networkPolicy.podCIDRs={10.244.0.0/16,fd00:10:244::/56}",
        ),
        "NetworkPolicy",
        FULL,
    )
    assert np["spec"]["ingress"][0]["from"] == [
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.244.0.0/16"]}},
        {"ipBlock": {"cidr": "::/0", "except": ["fd00:10:244::/56"]}},
    ]


def test_explicit_peers_replace_the_default() -> None:
    np = one(render("--set", "networkPolicy.from[0].ipBlock.cidr=172.18.0.0/24"), "NetworkPolicy", FULL)
    assert np["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "172.18.0.0/24"}}]


def test_network_policy_can_be_turned_off() -> None:
    assert not [d for d in render("--set", "networkPolicy.enabled=false") if d["kind"] == "NetworkPolicy"]


def test_secret_reads_exclude_exactly_the_namespaces_the_webhook_is_not_sent() -> None:
    docs = render("--set", "webhook.excludeNamespaces={tenant-x}")
    vwc = one(docs, "ValidatingWebhookConfiguration", FULL)
    [expr] = [
        e
        for e in vwc["webhooks"][0]["namespaceSelector"]["matchExpressions"]
        if e["key"] == "kubernetes.io/metadata.name"
    ]
    assert (
        config(docs).excluded_namespaces
        == expr["values"]
        == ["kube-system", "kube-node-lease", "kube-public", NS, "tenant-x"]
    )
    dep = one(docs, "Deployment", FULL)
    env = dep["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in env


def test_client_auth_mounts_the_ca_and_configures_the_server() -> None:
    docs = render(
        "--set",
        "clientAuth.enabled=true",
        "--set-string",
        f"clientAuth.caBundle={PEM}",
        "--set",
        "clientAuth.allowedNames={kube-apiserver-webhook-client}",
    )
    cm = one(docs, "ConfigMap", f"{FULL}-client-ca")
    assert cm["data"]["ca.crt"].strip() == PEM
    cfg = config(docs)
    assert cfg.client_auth.ca_file == "/etc/preflight-webhook/client-ca/ca.crt"
    assert cfg.client_auth.allowed_names == ["kube-apiserver-webhook-client"]
    pod = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["client-ca"] == "/etc/preflight-webhook/client-ca"
    assert {"name": "client-ca", "configMap": {"name": f"{FULL}-client-ca"}} in pod["volumes"]


def test_client_auth_is_off_by_default() -> None:
    docs = render()
    assert config(docs).client_auth.ca_file is None
    assert not [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("client-ca")]


def test_client_auth_without_a_ca_is_refused() -> None:
    proc = helm("template", "pf", str(CHART), *APISERVER, "--set", "clientAuth.enabled=true", check=False)
    assert proc.returncode != 0
    assert (
        "clientAuth.enabled needs clientAuth.caBundle (PEM of the CA that signs the apiserver's client certificate)"
        in proc.stderr
    )


def test_the_serving_pods_mount_only_the_serving_pair() -> None:
    pod = one(render(), "Deployment", FULL)["spec"]["template"]["spec"]
    [tls] = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["items"] == [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]


def _egress(*args: str) -> list[dict[str, Any]]:
    docs = render("--set", "networkPolicy.egress.enabled=true", *args)
    return one(docs, "NetworkPolicy", f"{FULL}-egress")["spec"]["egress"]


PUBLIC = [
    {"ipBlock": {"cidr": "0.0.0.0/0", "except": [
        "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"]}},
    {"ipBlock": {"cidr": "::/0", "except": ["::1/128", "fc00::/7", "fe80::/10"]}},
]  # fmt: skip


def test_egress_policy_follows_registry_access() -> None:
    """networkPolicy.egress: DNS and the apiserver always; registries only as config.registryAccess allows, and
    by default only public addresses (never the private, CGNAT, link-local or loopback ranges)."""
    assert not [d for d in render() if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == f"{FULL}-egress"]
    base = [
        {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
         "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}]},
        {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}],
         "to": [{"ipBlock": {"cidr": "172.18.0.0/24"}}]},
    ]  # fmt: skip
    api = ["--set", "networkPolicy.egress.apiserver[0].ipBlock.cidr=172.18.0.0/24"]
    assert _egress(*api) == base  # registryAccess off (the default): no registry
    cidrs = [
        "--set",
        "networkPolicy.egress.registryCIDRs={10.9.0.0/16}",
        "--set",
        "networkPolicy.egress.registryPorts={5000}",
    ]
    ports = [{"port": 443, "protocol": "TCP"}, {"port": 5000, "protocol": "TCP"}]
    for mode in ("allowlist", "all"):
        assert _egress(*api, *cidrs, "--set", f"config.registryAccess.mode={mode}") == [
            *base,
            {"ports": ports, "to": [{"ipBlock": {"cidr": "10.9.0.0/16"}}]},
        ]
        assert _egress(*api, "--set", f"config.registryAccess.mode={mode}") == [
            *base,
            {"ports": [{"port": 443, "protocol": "TCP"}], "to": PUBLIC},
        ]


def test_egress_is_on_by_default_whenever_registry_access_is() -> None:
    """Reproduction (issue 33): egress was unrestricted with registryAccess on. Now `auto` renders the egress
    policy, its apiserver peers from networkPolicy.apiserverCIDRs; an explicit false still turns it off."""
    docs = render("--set", "config.registryAccess.mode=all")
    egress = one(docs, "NetworkPolicy", f"{FULL}-egress")["spec"]
    assert egress["policyTypes"] == ["Egress"]
    assert egress["egress"][1]["to"] == [{"ipBlock": {"cidr": "10.0.0.5/32"}}]
    assert egress["egress"][2] == {"ports": [{"port": 443, "protocol": "TCP"}], "to": PUBLIC}
    assert all(r.get("to") for r in egress["egress"])  # no rule open to every address
    # the audit controller runs the same Image Pull check with the same config: the same egress
    audit = one(docs, "NetworkPolicy", f"{FULL}-audit-egress")["spec"]
    assert audit["egress"] == egress["egress"]
    assert audit["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "audit"
    no_audit = render("--set", "config.registryAccess.mode=all", "--set", "audit.enabled=false")
    assert [d["metadata"]["name"] for d in no_audit if d["kind"] == "NetworkPolicy"] == [FULL, f"{FULL}-egress"]
    off = render("--set", "config.registryAccess.mode=all", "--set", "networkPolicy.egress.enabled=false")
    assert not [d for d in off if d["metadata"]["name"] in (f"{FULL}-egress", f"{FULL}-audit-egress")]
    assert not [d for d in render() if d["metadata"]["name"] == f"{FULL}-egress"]  # registryAccess off


def test_egress_policy_refuses_an_empty_apiserver_rather_than_any_address() -> None:
    """Least privilege: no rule of the egress policy opens the apiserver's ports to every address."""
    proc = helm(
        "template", "pf", str(CHART), "--set", "networkPolicy.egress.enabled=true",
        "--set", "networkPolicy.allowKubeSystemPods=true", check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert (
        "the egress NetworkPolicy (on with config.registryAccess, or networkPolicy.egress.enabled=true) needs the "
        "apiserver's address, and none is known: set networkPolicy.apiserverCIDRs" in proc.stderr
    ), proc.stderr
    proc = helm(
        "template", "pf", str(CHART), *APISERVER, "--set", "networkPolicy.egress.enabled=true",
        "--set", "networkPolicy.egress.apiserver[0].ipBlock.cidr=10.0.0.5/32", "--set", "networkPolicy.egress.dns=null",
        check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "the egress NetworkPolicy needs networkPolicy.egress.dns" in proc.stderr
    # NodeLocal DNSCache: its address replaces the default peers; every rule names its peers
    rules = _egress(
        "--set", "networkPolicy.egress.apiserver[0].ipBlock.cidr=10.0.0.6/32",
        "--set", "networkPolicy.egress.dns[0].ipBlock.cidr=169.254.20.10/32",
    )  # fmt: skip
    assert rules[0]["to"] == [{"ipBlock": {"cidr": "169.254.20.10/32"}}]
    assert rules[1]["to"] == [{"ipBlock": {"cidr": "10.0.0.6/32"}}]
    assert all(r.get("to") for r in rules)  # registryAccess off: no rule without peers


def test_registry_ca_is_mounted_and_becomes_the_image_pull_checks_ca_file() -> None:
    """registryCA: a Secret's (or ConfigMap's) key, mounted read-only into the webhook pods only, is
    config.registryAccess.caFile; off by default (no volume, caFile unset)."""
    docs = render()
    assert config(docs).registry_access.ca_file is None
    pod = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]
    assert "registry-ca" not in {v["name"] for v in pod["volumes"]}
    path = "/etc/preflight-webhook/registry-ca/ca.crt"
    for source, kind, ref in (("secretName", "secret", "secretName"), ("configMapName", "configMap", "name")):
        docs = render("--set", f"registryCA.{source}=corp-ca", "--set", "registryCA.key=bundle.pem")
        assert config(docs).registry_access.ca_file == path
        pod = one(docs, "Deployment", FULL)["spec"]["template"]["spec"]
        [vol] = [v for v in pod["volumes"] if v["name"] == "registry-ca"]
        assert vol == {
            "name": "registry-ca",
            kind: {ref: "corp-ca", "items": [{"key": "bundle.pem", "path": "ca.crt"}]},
        }
        [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "registry-ca"]
        assert mount == {"name": "registry-ca", "mountPath": path.rsplit("/", 1)[0], "readOnly": True}
        # the audit controller runs the same checks: it gets the same bundle; the certificate pod does not
        mounted = {
            d["metadata"]["name"]
            for d in docs
            if d["kind"] == "Deployment" and vol in (d["spec"]["template"]["spec"].get("volumes") or [])
        }
        assert mounted == {FULL, f"{FULL}-audit"}
    both = helm("template", "pf", str(CHART), *APISERVER, "--set", "registryCA.secretName=a", "--set",
                "registryCA.configMapName=b", check=False)  # fmt: skip
    assert both.returncode != 0 and "registryCA: set secretName or configMapName, not both" in both.stderr
    twice = helm("template", "pf", str(CHART), *APISERVER, "--set", "registryCA.secretName=a", "--set",
                 "config.registryAccess.caFile=/x.pem", check=False)  # fmt: skip
    assert twice.returncode != 0 and "leave config.registryAccess.caFile empty" in twice.stderr
