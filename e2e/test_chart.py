"""The Helm chart against the real kube-apiserver: accepted, guarded, and uninstalled in a safe order.

* every certificate mode's manifests pass a server-side-apply dry run (cert-manager's own
  kinds excepted: the harness has no cert-manager CRDs);
* `helm install` of the default chart creates everything, CEL in matchConditions and the
  ValidatingAdmissionPolicy included;
* the ValidatingAdmissionPolicy refuses a real create by the webhook's ServiceAccount and
  lets its dry run through (kubectl --as=system:serviceaccount:NS:NAME);
* `helm uninstall` deletes the ValidatingWebhookConfiguration before the Deployment (read
  from the apiserver's audit log).

No pods run here (no scheduler/kubelet); what is tested is what the apiserver accepts.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.harness.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "preflight-webhook"
NS = "preflight-chart-e2e"
RELEASE = "pfe2e"
FULL = f"{RELEASE}-preflight-webhook"
SA_USER = f"system:serviceaccount:{NS}:{FULL}"
WORKLOAD_NS = "preflight-chart-workloads"
CERT_MANAGER_KINDS = {"Certificate", "Issuer"}
# keep the (fail-closed, never-running) webhook away from every other test's namespaces
SCOPE = [
    "--set",
    "webhook.namespaceSelectorExpressions[0].key=preflight-chart-e2e",
    "--set",
    "webhook.namespaceSelectorExpressions[0].operator=Exists",
    # this apiserver runs no endpoint reconciler (loopback only): the NetworkPolicy is told its address
    "--set",
    "networkPolicy.apiserverCIDRs={127.0.0.1/32}",
]
MODE_ARGS = {
    "selfManaged": [],
    "certManager": ["--set", "certificates.mode=certManager"],
    "provided": [
        "--set",
        "certificates.mode=provided",
        "--set",
        "certificates.secretName=my-tls",
        "--set-string",
        "certificates.provided.caBundle=-----BEGIN CERTIFICATE-----",
    ],
}


def helm(cp: ControlPlane, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cp.helm(*args, check=check)


def rendered(cp: ControlPlane, *args: str) -> list[dict[str, Any]]:
    out = helm(cp, "template", RELEASE, str(CHART), "--namespace", NS, *SCOPE, *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize("mode", sorted(MODE_ARGS))
def test_server_side_apply_dry_run_accepts_every_mode(control_plane: ControlPlane, mode: str) -> None:
    cp = control_plane
    cp.ensure_namespace(NS)
    docs = [d for d in rendered(cp, *MODE_ARGS[mode]) if d["kind"] not in CERT_MANAGER_KINDS]
    proc = cp.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=helm",
        "-f",
        "-",
        input=yaml.safe_dump_all(docs),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    applied = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(applied) == len(docs), proc.stdout


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    cp.ensure_namespace(NS)
    cp.ensure_namespace(WORKLOAD_NS)
    helm(cp, "install", RELEASE, str(CHART), "--namespace", NS, *SCOPE)
    try:
        yield cp
    finally:
        helm(cp, "uninstall", RELEASE, "--namespace", NS, check=False)


def test_install_creates_every_object(installed: ControlPlane) -> None:
    cp = installed
    vwc = json.loads(cp.kubectl("get", "validatingwebhookconfiguration", FULL, "-o", "json").stdout)
    hook = vwc["webhooks"][0]
    assert [c["name"] for c in hook["matchConditions"]] == [
        "not-the-webhook-itself",
        "not-kube-system-serviceaccounts",
        "changed-on-update",
    ]
    assert hook["timeoutSeconds"] == 5 and hook["sideEffects"] == "None"
    for kind, name, ns in [
        ("deployment", FULL, NS),
        ("deployment", f"{FULL}-certs", NS),
        ("service", FULL, NS),
        ("pdb", FULL, NS),
        ("configmap", f"{FULL}-config", NS),
        ("clusterrole", FULL, None),
        ("validatingadmissionpolicy", f"{FULL}-dry-run-only", None),
        ("validatingadmissionpolicybinding", f"{FULL}-dry-run-only", None),
        ("validatingadmissionpolicy", f"{FULL}-certs-cabundle-only", None),
        ("validatingadmissionpolicy", f"{FULL}-audit-events-where-jobs-live", None),
    ]:
        cp.kubectl("get", kind, name, *(["-n", ns] if ns else []))


def _pod(name: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": WORKLOAD_NS},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }
    )


def test_dry_run_guard_refuses_real_writes_of_the_webhook_account(installed: ControlPlane) -> None:
    cp = installed
    dry = cp.kubectl("create", "--dry-run=server", f"--as={SA_USER}", "-f", "-", input=_pod("guard-dry"), check=False)
    assert dry.returncode == 0, dry.stderr
    assert "pod/guard-dry created (server dry run)" in dry.stdout

    # the apiserver's policy informer may lag the policy's creation by a moment (and the harness
    # has no controller-manager to report type-checking): a create that slipped through is
    # deleted and retried; the assertion is on the refusal, with its exact reason
    deadline = time.monotonic() + 30
    while True:
        real = cp.kubectl("create", f"--as={SA_USER}", "-f", "-", input=_pod("guard-real"), check=False)
        if real.returncode != 0:
            break
        cp.kubectl("delete", "pod", "guard-real", "-n", WORKLOAD_NS, "--wait=false")
        assert time.monotonic() < deadline, "the webhook's ServiceAccount could create a real pod"
        time.sleep(0.2)
    assert (
        f"pods \"guard-real\" is forbidden: ValidatingAdmissionPolicy '{FULL}-dry-run-only' with binding "
        f"'{FULL}-dry-run-only' denied request: {SA_USER} may only send dry-run requests; refused CREATE of pods"
    ) in real.stderr, real.stderr
    got = cp.kubectl("get", "pod", "guard-real", "-n", WORKLOAD_NS, check=False)
    assert got.returncode != 0 and "NotFound" in got.stderr

    # jobsets too (the other dry-run permission); and an access review is still a question it may ask
    jobset = yaml.safe_dump(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "guard", "namespace": WORKLOAD_NS},
            "spec": {"replicatedJobs": []},
        }
    )
    js = cp.kubectl("create", f"--as={SA_USER}", "-f", "-", input=jobset, check=False)
    assert "may only send dry-run requests; refused CREATE of jobsets" in js.stderr, js.stderr
    can = cp.kubectl("auth", "can-i", "create", "pods", f"--as={SA_USER}", "-n", WORKLOAD_NS, check=False)
    assert can.stdout.strip() == "yes", can.stderr
    # and RBAC still refuses what no check needs
    cm = cp.kubectl("create", "configmap", "x", "-n", WORKLOAD_NS, f"--as={SA_USER}", check=False)
    assert f'User "{SA_USER}" cannot create resource "configmaps"' in cm.stderr, cm.stderr


def _ts(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def test_uninstall_removes_the_webhook_configuration_before_the_deployment(control_plane: ControlPlane) -> None:
    cp = control_plane
    release = "pford"
    full = f"{release}-preflight-webhook"
    cp.ensure_namespace(NS)
    helm(cp, "install", release, str(CHART), "--namespace", NS, *SCOPE)
    started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    helm(cp, "uninstall", release, "--namespace", NS)

    deletes: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in cp.audit_events():
        ref = ev.get("objectRef") or {}
        if (
            ev.get("verb") == "delete"
            and ev.get("stage") == "ResponseComplete"
            and ref.get("name", "").startswith(full)
            and _ts(ev["requestReceivedTimestamp"]) >= started
        ):
            deletes[(ref["resource"], ref["name"])] = ev
    vwc = deletes[("validatingwebhookconfigurations", full)]
    assert vwc["responseStatus"]["code"] == 200
    for dep in (full, f"{full}-certs"):
        d = deletes[("deployments", dep)]
        assert _ts(vwc["stageTimestamp"]) <= _ts(d["requestReceivedTimestamp"]), (
            f"Deployment {dep} deletion began before the webhook configuration was gone"
        )
    gone = cp.kubectl("get", "validatingwebhookconfiguration", full, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_upgrade_of_a_0_1_0_release_is_refused_with_the_commands_that_move_it(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A Deployment's selector is immutable: instead of the apiserver's "field is immutable"
    half-way through the upgrade, the chart refuses before changing anything and prints the two
    commands (e2e/test_node_chart.py runs them on the real node; no controller-manager here)."""
    from e2e.harness.legacychart import legacy_chart

    cp = control_plane
    release = "pfold"
    full = f"{release}-preflight-webhook"
    cp.ensure_namespace(NS)
    helm(cp, "install", release, str(legacy_chart(tmp_path)), "--namespace", NS, *SCOPE)
    try:
        before = json.loads(cp.kubectl("get", "deployment", full, "-n", NS, "-o", "json").stdout)
        refused = helm(cp, "upgrade", release, str(CHART), "--namespace", NS, "--reuse-values", check=False)
        assert refused.returncode != 0
        assert (
            f"Deployment {NS}/{full} was installed by a chart before 0.2.0: its selector lacks "
            "app.kubernetes.io/component=webhook, and a Deployment's selector is immutable. Move it over "
            "without a failed request, then run this helm upgrade again:\n"
            f"  kubectl -n {NS} label replicasets,pods -l 'app.kubernetes.io/instance={release},"
            "app.kubernetes.io/name=preflight-webhook,!app.kubernetes.io/component' app.kubernetes.io/component=webhook\n"
            f"  kubectl -n {NS} delete deployment {full} --cascade=orphan\n"
            "(the new Deployment adopts the labelled ReplicaSet and replaces its pods one by one; "
            'docs/install.md, "Upgrading from chart 0.1.0")'
        ) in refused.stderr, refused.stderr
        assert "field is immutable" not in refused.stderr
        after = json.loads(cp.kubectl("get", "deployment", full, "-n", NS, "-o", "json").stdout)
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        service = json.loads(cp.kubectl("get", "service", full, "-n", NS, "-o", "json").stdout)
        assert "app.kubernetes.io/component" not in service["spec"]["selector"]  # nothing was changed
        status = helm(cp, "status", release, "--namespace", NS).stdout
        assert "STATUS: failed" in status or "STATUS: deployed" in status
    finally:
        helm(cp, "uninstall", release, "--namespace", NS, check=False)
