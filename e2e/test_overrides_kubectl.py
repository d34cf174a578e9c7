"""Scoped enforcement end to end, through `kubectl` against the real kube-apiserver.

* the namespace label `preflight.webhook.io/mode` (enforce|warn|audit) overrides the global
  mode for one namespace, and a label set *while the webhook runs* takes effect once the
  webhook's namespace watch cache has it (polled with dry-run applies, never slept on);
* the object annotation `preflight.webhook.io/skip-checks` skips only the checks the config
  lists in `skippableChecks`; a refused skip is said so and the job stays denied;
* a TrainJob with `spec.managedBy: kueue.x-k8s.io/multikueue` runs in another cluster, so
  the local-capacity checks (Resource Quotas, the node checks, Dry Run) are skipped with
  that reason.

Every override is visible: one `Warning:` line in kubectl's output and the `overrides`
audit annotation (keys prefixed by the webhook's name) in the apiserver's audit log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR
from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import ROOT, RunningWebhook, stored, wait_until, warnings_of
from e2e.harness.trainer_manifests import train_job

HOOK = "preflight.webhook.io"
MODE_LABEL = "preflight.webhook.io/mode"
SKIP_ANNOTATION = "preflight.webhook.io/skip-checks"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"

#: this module's webhook judges only namespaces carrying this label
SCOPE_LABEL = {"preflight-webhook/overrides": "true"}
WARN_NS, ENFORCED_NS, AUDIT_NS = "e2e-ovr-team-a", "e2e-ovr-team-b", "e2e-ovr-team-c"
SKIP_NS, QUOTA_NS = "e2e-ovr-skip", "e2e-ovr-quota"

CONFIG: dict[str, Any] = {
    "mode": "enforce",
    "secretTtlSeconds": 0,
    "skippableChecks": ["Secrets"],
    "privateRegistries": ["nvcr.io"],
    # no controller runs in the control plane: Controllers would warn on every job (RunningWebhook sets the same)
    "checks": {"Controllers": "off"},
}

#: the one quota of QUOTA_NS: 1 CPU, while the TrainJob's 2 nodes request 1 CPU each
QUOTA: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "team-quota", "namespace": QUOTA_NS},
    "spec": {"hard": {"requests.cpu": "1"}},
}


def secrets_message(ns: str) -> str:
    return (
        f'Secret "ngc" not found in namespace "{ns}" (referenced by imagePullSecrets of the controller, workers pods); '
        'private registry "nvcr.io" needs it for image "nvcr.io/nvidia/aiperf:0.13.0". '
        f"Fix: kubectl create secret docker-registry ngc -n {ns} --docker-server=nvcr.io "
        "--docker-username=<user> --docker-password=…"
    )


def quota_message() -> str:
    """The Resource Quotas failure of a 2-node TrainJob (1 CPU each) against QUOTA."""
    return (
        'ResourceQuota "team-quota": requests.cpu would be 2 (used 0 + job 2) but hard is 1. Fix: raise hard '
        f"requests.cpu to at least 2 (kubectl edit resourcequota team-quota -n {QUOTA_NS}), or reduce the job's "
        "pods or requests."
    )


def broken_job(ns: str, name: str = "llama-bench-ngc", skip: str | None = None) -> dict[str, Any]:
    """e2e/samples/aiperfjob-broken.yaml (pulls with the missing Secret "ngc") in `ns`."""
    obj = yaml.safe_load((SAMPLES_DIR / "aiperfjob-broken.yaml").read_text())
    obj["metadata"].update(namespace=ns, name=name)
    if skip is not None:
        obj["metadata"]["annotations"] = {SKIP_ANNOTATION: skip}
    return obj


def trainjob(name: str, *, managed_by: str | None = None, skip: str | None = None) -> dict[str, Any]:
    """A 2-node TrainJob on the samples' runtime (1 CPU per node), no Secrets, in QUOTA_NS."""
    obj = train_job(name, "torch-distributed", namespace=QUOTA_NS, image="ghcr.io/acme/mnist-ft:1.0.0", num_nodes=2)
    if managed_by is not None:
        obj["spec"]["managedBy"] = managed_by
    if skip is not None:
        obj["metadata"]["annotations"] = {SKIP_ANNOTATION: skip}
    return obj


def kubectl_apply(cp: ControlPlane, obj: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl apply -f -` (kubectl names the source "STDIN"); never raises."""
    return cp.kubectl("apply", "-f", "-", *args, input=yaml.safe_dump(obj, sort_keys=False), check=False)


def denial(text: str, warnings: Sequence[str] = ()) -> str:
    """kubectl's stderr for a create our webhook denied: its warnings, then the message unchanged."""
    return "".join(f"Warning: {w}\n" for w in warnings) + (
        f'Error from server (Forbidden): error when creating "STDIN": admission webhook "{HOOK}" denied the request: {text}\n'
    )


def created(obj: dict[str, Any]) -> str:
    group = obj["apiVersion"].split("/")[0]
    return f"{obj['kind'].lower()}.{group}/{obj['metadata']['name']} created\n"


def our_audit_annotations(cp: ControlPlane, resource: str, ns: str, name: str) -> dict[str, str]:
    """This webhook's annotations on the one (ResponseComplete) create event of ns/name, prefix removed."""
    events = [
        e
        for e in cp.audit_events()
        if e.get("stage") == "ResponseComplete"
        and e.get("verb") == "create"
        and (e.get("objectRef") or {}).get("resource") == resource
        and (e.get("objectRef") or {}).get("namespace") == ns
        and (e.get("objectRef") or {}).get("name") == name
    ]
    assert len(events) == 1, f"{len(events)} audit events for create {resource} {ns}/{name}"
    ann = events[0].get("annotations") or {}
    return {k.removeprefix(f"{HOOK}/"): v for k, v in ann.items() if k.startswith(f"{HOOK}/")}


def label_and_wait(hook: RunningWebhook, ns: str, mode: str) -> None:
    """Label `ns` with the mode, then dry-run a broken job until the webhook stops denying it.

    The webhook reads namespace labels from its watch cache: the label is live once the
    watch event arrived, which only an admission outcome can show from outside.
    """
    cp = hook.cp
    cp.kubectl("label", "namespace", ns, f"{MODE_LABEL}={mode}", "--overwrite")
    probe = broken_job(ns, name="mode-probe")

    def allowed() -> bool:
        proc = kubectl_apply(cp, probe, "--dry-run=server")
        assert proc.returncode == 0 or "denied the request" in proc.stderr, proc.stderr
        return proc.returncode == 0

    wait_until(f"the webhook to see {MODE_LABEL}={mode} on namespace {ns}", allowed, timeout=60, every=0.2)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def overrides_webhook(samples_cluster: ControlPlane) -> Iterator[RunningWebhook]:
    """Global enforce, `skippableChecks: [Secrets]`, for the namespaces labelled SCOPE_LABEL.

    The namespaces (without a mode label) and the quota exist before the webhook starts.
    """
    cp = samples_cluster
    for ns in (WARN_NS, ENFORCED_NS, AUDIT_NS, SKIP_NS, QUOTA_NS):
        cp.ensure_namespace(ns)
        cp.kubectl(
            "label", "namespace", ns, *[f"{k}={v}" for k, v in SCOPE_LABEL.items()], f"{MODE_LABEL}-", "--overwrite"
        )
    cp.apply(QUOTA)
    # no quota controller here: publish status.hard and status.used as it would
    status = {"status": {"hard": QUOTA["spec"]["hard"], "used": {"requests.cpu": "0"}}}
    cp.kubectl(
        "patch",
        "resourcequota",
        "team-quota",
        "-n",
        QUOTA_NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    with RunningWebhook(
        cp,
        vwc_name="preflight-webhook-overrides",
        config=CONFIG,
        namespace_selector={"matchLabels": SCOPE_LABEL},
        probe_namespace=ENFORCED_NS,
    ) as hook:
        yield hook


@pytest.fixture
def hook(overrides_webhook: RunningWebhook) -> RunningWebhook:
    assert overrides_webhook.proc is not None and overrides_webhook.proc.poll() is None, overrides_webhook.log_tail()
    return overrides_webhook


# --------------------------------------------------------------------------- namespace mode label


def test_namespace_label_warn_lets_one_team_through_while_the_rest_enforce(hook: RunningWebhook) -> None:
    cp = hook.cp
    label_and_wait(hook, WARN_NS, "warn")

    job = broken_job(WARN_NS)
    proc = kubectl_apply(cp, job)
    assert (proc.returncode, proc.stdout) == (0, created(job)), proc.stderr
    assert warnings_of(proc.stderr) == [
        f"mode warn for namespace {WARN_NS} (label {MODE_LABEL})",
        # a finding longer than one warning (256 characters) goes on, word for word, in the next
        '[Secrets] Secret "ngc" not found in namespace "e2e-ovr-team-a" (referenced by imagePullSecrets of the controller, '
        'workers pods); private registry "nvcr.io" needs it for image "nvcr.io/nvidia/aiperf:0.13.0". '
        "Fix: kubectl create secret docker-registry ngc -n",
        "[Secrets] … e2e-ovr-team-a --docker-server=nvcr.io --docker-username=<user> --docker-password=…",
    ]
    assert proc.stderr == "".join(f"Warning: {w}\n" for w in warnings_of(proc.stderr))
    assert stored(cp, job)
    ours = our_audit_annotations(cp, "aiperfjobs", WARN_NS, "llama-bench-ngc")
    assert (ours["decision"], ours["mode"]) == ("allowed", "warn")
    assert ours["overrides"] == f"mode warn for namespace {WARN_NS} (label {MODE_LABEL})"

    same = broken_job(ENFORCED_NS)  # the same job where nobody set a mode: the global enforce
    proc = kubectl_apply(cp, same)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == denial(
        f'AIPerfJob "llama-bench-ngc" in namespace "{ENFORCED_NS}" failed 1 preflight check:\n'
        f"[Secrets] {secrets_message(ENFORCED_NS)}"
    )
    assert not stored(cp, same)
    ours = our_audit_annotations(cp, "aiperfjobs", ENFORCED_NS, "llama-bench-ngc")
    assert (ours["decision"], ours["mode"], ours["failed-checks"]) == ("denied", "enforce", "Secrets")
    assert "overrides" not in ours


def test_namespace_label_audit_records_without_a_finding_warning(hook: RunningWebhook) -> None:
    cp = hook.cp
    label_and_wait(hook, AUDIT_NS, "audit")

    job = broken_job(AUDIT_NS)
    proc = kubectl_apply(cp, job)
    assert (proc.returncode, proc.stdout) == (0, created(job)), proc.stderr
    # no finding reaches the user; the override itself is never silent
    assert proc.stderr == f"Warning: mode audit for namespace {AUDIT_NS} (label {MODE_LABEL})\n"
    assert stored(cp, job)
    ours = our_audit_annotations(cp, "aiperfjobs", AUDIT_NS, "llama-bench-ngc")
    findings = json.loads(ours.pop("findings"))
    assert ours == {
        "decision": "allowed",
        "mode": "audit",
        "failed-checks": "Secrets",
        "overrides": f"mode audit for namespace {AUDIT_NS} (label {MODE_LABEL})",
    }
    assert findings == [{"check": "Secrets", "status": "fail", "message": secrets_message(AUDIT_NS)}]


# --------------------------------------------------------------------------- skip annotation


def test_annotation_skips_a_skippable_check(hook: RunningWebhook) -> None:
    cp = hook.cp
    job = broken_job(SKIP_NS, skip="Secrets")
    proc = kubectl_apply(cp, job)
    assert (proc.returncode, proc.stdout) == (0, created(job)), proc.stderr
    assert proc.stderr == f"Warning: check 'Secrets' skipped by annotation {SKIP_ANNOTATION}\n"
    assert stored(cp, job)
    ours = our_audit_annotations(cp, "aiperfjobs", SKIP_NS, "llama-bench-ngc")
    assert ours == {
        "decision": "allowed",
        "mode": "enforce",
        "findings": "[]",
        "overrides": f"check 'Secrets' skipped by annotation {SKIP_ANNOTATION}",
    }


def test_annotation_cannot_skip_a_check_outside_skippable_checks(hook: RunningWebhook) -> None:
    cp = hook.cp
    job = trainjob("mnist-over-quota", skip="Resource Quotas")
    proc = kubectl_apply(cp, job)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    refused = f"annotation {SKIP_ANNOTATION} cannot skip 'Resource Quotas': not in skippableChecks"
    assert proc.stderr == denial(
        f'TrainJob "mnist-over-quota" in namespace "{QUOTA_NS}" failed 1 preflight check:\n'
        f"[Resource Quotas] {quota_message()}",
        [refused],
    )
    assert not stored(cp, job)
    ours = our_audit_annotations(cp, "trainjobs", QUOTA_NS, "mnist-over-quota")
    assert (ours["decision"], ours["overrides"]) == ("denied", refused)


# --------------------------------------------------------------------------- MultiKueue


def test_multikueue_trainjob_skips_local_capacity_checks(hook: RunningWebhook, tmp_path: Path) -> None:
    cp = hook.cp
    local = trainjob("mnist-local")  # run here, the job does not fit the namespace's quota
    proc = kubectl_apply(cp, local, "--dry-run=server")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == denial(
        f'TrainJob "mnist-local" in namespace "{QUOTA_NS}" failed 1 preflight check:\n[Resource Quotas] {quota_message()}'
    )

    job = trainjob("mnist-multikueue", managed_by=MULTIKUEUE)
    proc = kubectl_apply(cp, job)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, created(job), "")
    assert stored(cp, job)

    manifest = tmp_path / "trainjob.yaml"
    manifest.write_text(yaml.safe_dump(job, sort_keys=False))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "check",
            "-f",
            str(manifest),
            "-o",
            "json",
            f"--kubeconfig={cp.kubeconfig}",
            f"--config={config}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    [report] = json.loads(out.stdout)  # an array, one entry per job
    assert (report["passed"], report["has_warnings"]) == (True, False)
    reason = f"Skipped: spec.managedBy is {MULTIKUEUE}, so the job runs in another cluster"
    by_name = {c["name"]: (c["status"], c["message"]) for c in report["checks"]}
    assert by_name["Resource Quotas"] == ("skip", reason)
    # every check of this cluster's capacity, and only those, gives the same reason
    assert sorted(n for n, (_, m) in by_name.items() if m == reason) == [
        "Device Allocation",
        "Dry Run",
        "Node Selector Match",
        "Per-Node Schedulability",
        "Pod Security",
        "Resource Quotas",
        "Tolerations",
        "Volume Claims",
    ]
    assert not [n for n, (st, _) in by_name.items() if st in ("fail", "warn")], report
