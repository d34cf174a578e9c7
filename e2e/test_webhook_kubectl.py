"""The webhook as a user meets it: `kubectl` against the real kube-apiserver, which calls
`preflight-webhook serve` through a ValidatingWebhookConfiguration (e2e/harness/runner.py).

Assertions are on kubectl's real output (stdout, stderr with `Warning:` lines and
`admission webhook "…" denied the request: …`), the apiserver's audit log, and the
webhook's own /metrics. Cases are data: add a sample manifest to e2e/samples/ and a row
to CASES (or a namespace to NAMESPACES) to cover another check end to end.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from e2e.conftest import SAMPLES_DIR, SAMPLES_LABEL
from e2e.harness.controlplane import ControlPlane
from e2e.harness.runner import RunningWebhook, warnings_of
from e2e.harness.runner import stored as exists

HOOK = "preflight.webhook.io"
MODE_LABEL = "preflight.webhook.io/mode"
WARN_NS, AUDIT_NS, RATCHET_NS = "e2e-webhook-warn", "e2e-webhook-audit", "e2e-webhook-ratchet"

#: namespaces the module needs (created before the webhook starts, so its caches hold them)
NAMESPACES: dict[str, dict[str, str]] = {
    WARN_NS: {**SAMPLES_LABEL, MODE_LABEL: "warn"},
    AUDIT_NS: {**SAMPLES_LABEL, MODE_LABEL: "audit"},
    RATCHET_NS: dict(SAMPLES_LABEL),
}


def sample(name: str, namespace: str | None = None, job_name: str | None = None) -> dict[str, Any]:
    """A sample manifest from e2e/samples/, optionally moved to another namespace / renamed."""
    obj = yaml.safe_load((SAMPLES_DIR / f"{name}.yaml").read_text())
    if namespace:
        obj["metadata"]["namespace"] = namespace
    if job_name:
        obj["metadata"]["name"] = job_name
    return obj


def kubectl_apply(cp: ControlPlane, obj: dict[str, Any], *args: str) -> Any:
    """`kubectl apply -f -` (kubectl names the source "STDIN"); never raises."""
    return cp.kubectl("apply", "-f", "-", *args, input=yaml.safe_dump(obj, sort_keys=False), check=False)


def denial(verb: str, text: str) -> str:
    """kubectl's stderr for a request our webhook denied: the message, unchanged."""
    return f'Error from server (Forbidden): error when {verb} "STDIN": admission webhook "{HOOK}" denied the request: {text}\n'


def audit_event(cp: ControlPlane, resource: str, ns: str, name: str, verb: str = "create") -> dict[str, Any]:
    """The (ResponseComplete) audit event of one request; the log is written before kubectl returns."""
    found = [
        e
        for e in cp.audit_events()
        if e.get("stage") == "ResponseComplete"
        and e.get("verb") == verb
        and (e.get("objectRef") or {}).get("resource") == resource
        and (e.get("objectRef") or {}).get("namespace") == ns
        and (e.get("objectRef") or {}).get("name") == name
    ]
    assert len(found) == 1, f"{len(found)} audit events for {verb} {resource} {ns}/{name}"
    return found[0]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def webhook_setup(samples_cluster: ControlPlane) -> None:
    """The mode / ratchet namespaces, before the webhook starts (overrides conftest's no-op)."""
    cp = samples_cluster
    for ns, labels in NAMESPACES.items():
        cp.ensure_namespace(ns)
        cp.kubectl("label", "namespace", ns, *[f"{k}={v}" for k, v in labels.items()], "--overwrite")


@pytest.fixture
def hook(sample_webhook: RunningWebhook) -> RunningWebhook:
    assert sample_webhook.proc is not None and sample_webhook.proc.poll() is None, sample_webhook.log_tail()
    return sample_webhook


# --------------------------------------------------------------------------- verdicts through kubectl


@dataclass(frozen=True)
class Case:
    """One sample applied in enforce mode: `denied` with `message`, or allowed with `warnings`."""

    sample: str
    denied: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)


CASES = [
    Case("aiperfjob-good", denied=False),
    Case("trainjob-good", denied=False),
    Case(
        "aiperfjob-broken",
        denied=True,
        message=(
            'AIPerfJob "llama-bench-ngc" in namespace "demo-bench" failed 1 preflight check:\n'
            '[Secrets] Secret "ngc" not found in namespace "demo-bench" (referenced by imagePullSecrets of the '
            'controller, workers pods); private registry "nvcr.io" needs it for image "nvcr.io/nvidia/aiperf:0.13.0". '
            "Fix: kubectl create secret docker-registry ngc -n demo-bench "
            "--docker-server=nvcr.io --docker-username=<user> --docker-password=…"
        ),
    ),
    Case(
        "trainjob-broken",
        denied=True,
        message=(
            'TrainJob "mnist-ft-typo" in namespace "demo-train" failed 1 preflight check:\n'
            '[Secrets] Secret "hf-token" in namespace "demo-train" has no key "hf_token" (referenced by env HF_TOKEN '
            "of container node). Fix: kubectl patch secret hf-token -n demo-train --type merge "
            '-p \'{"stringData":{"hf_token":"…"}}\''
        ),
    ),
    Case(
        "aiperfjob-warns",
        denied=False,
        warnings=[  # one finding per warning, ≤ 256 characters each; a longer one goes on word for word
            '[Image Reference] Image "nvcr.io/nvidia/aiperf:latest" uses the moving tag "latest"; pods can start different builds '
            '(used by containers "event-bus-proxy", "control-plane" and 7 more in pod group "controller"; containers '
            '"worker-group-manager", "worker-0",',
            '[Image Reference] … "record-processor-0" in pod group "workers"). Fix: pin a version tag or a digest',
            '[Endpoint Service] Service "llm" in "demo-bench" exposes port 8000, not 8080 '
            "(http://llm.demo-bench.svc.cluster.local:8080). Fix: use port 8000 in spec.benchmark.endpoint.urls, "
            "or expose 8080 on the Service",
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.sample for c in CASES])
def test_sample_verdict_reaches_kubectl_unchanged(hook: RunningWebhook, case: Case) -> None:
    cp = hook.cp
    obj = sample(case.sample)
    before = hook.requests_total(kind=obj["kind"], operation="CREATE")
    proc = kubectl_apply(cp, obj)
    assert hook.requests_total(kind=obj["kind"], operation="CREATE") == before + 1, hook.log_tail()
    if case.denied:
        assert proc.returncode == 1
        assert proc.stderr == denial("creating", case.message)
        assert proc.stdout == ""
        assert not exists(cp, obj)
    else:
        assert proc.returncode == 0, proc.stderr
        assert (
            proc.stdout
            == f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}/{obj['metadata']['name']} created\n"
        )
        assert warnings_of(proc.stderr) == case.warnings
        assert proc.stderr == "".join(f"Warning: {w}\n" for w in case.warnings)
        assert exists(cp, obj)


def test_dry_run_server_calls_the_webhook_and_stores_nothing(hook: RunningWebhook) -> None:
    cp = hook.cp
    obj = sample("aiperfjob-good", job_name="llama-bench-dry")
    before = hook.requests_total(kind="AIPerfJob", operation="CREATE")
    proc = kubectl_apply(cp, obj, "--dry-run=server")
    assert (proc.returncode, proc.stdout) == (
        0,
        "aiperfjob.aiperf.nvidia.com/llama-bench-dry created (server dry run)\n",
    )
    assert hook.requests_total(kind="AIPerfJob", operation="CREATE") == before + 1
    assert not exists(cp, obj)

    broken = sample("trainjob-broken", job_name="mnist-ft-typo-dry")
    proc = kubectl_apply(cp, broken, "--dry-run=server")
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        denial("creating", 'TrainJob "mnist-ft-typo-dry" in namespace "demo-train" failed')[:-1]
    )
    # the AdmissionReview said dryRun: the decision log records it
    assert "name=mnist-ft-typo-dry operation=CREATE dryRun=True" in hook.log_text()
    assert not exists(cp, broken)


# --------------------------------------------------------------------------- modes


def test_warn_mode_allows_and_prints_every_finding_as_a_warning(hook: RunningWebhook) -> None:
    cp = hook.cp
    obj = sample("aiperfjob-broken", namespace=WARN_NS)
    proc = kubectl_apply(cp, obj)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "aiperfjob.aiperf.nvidia.com/llama-bench-ngc created\n"
    assert warnings_of(proc.stderr) == [
        f"mode warn for namespace {WARN_NS} (label {MODE_LABEL})",
        # a finding longer than one warning (256 characters) goes on, word for word, in the next
        '[Secrets] Secret "ngc" not found in namespace "e2e-webhook-warn" (referenced by imagePullSecrets of the controller, '
        'workers pods); private registry "nvcr.io" needs it for image "nvcr.io/nvidia/aiperf:0.13.0". '
        "Fix: kubectl create secret docker-registry ngc",
        "[Secrets] … -n e2e-webhook-warn --docker-server=nvcr.io --docker-username=<user> --docker-password=…",
    ]
    assert exists(cp, obj)


def test_audit_mode_allows_and_the_audit_log_holds_the_findings(hook: RunningWebhook) -> None:
    cp = hook.cp
    obj = sample("aiperfjob-broken", namespace=AUDIT_NS)
    proc = kubectl_apply(cp, obj)
    assert proc.returncode == 0, proc.stderr
    assert warnings_of(proc.stderr) == [f"mode audit for namespace {AUDIT_NS} (label {MODE_LABEL})"]
    ann = audit_event(cp, "aiperfjobs", AUDIT_NS, "llama-bench-ngc")["annotations"]
    ours = {k.removeprefix(f"{HOOK}/"): v for k, v in ann.items() if k.startswith(f"{HOOK}/")}
    assert ours.keys() == {"decision", "mode", "failed-checks", "findings", "overrides"}, ann
    assert (ours["decision"], ours["mode"], ours["failed-checks"]) == ("allowed", "audit", "Secrets")
    assert ours["overrides"] == f"mode audit for namespace {AUDIT_NS} (label {MODE_LABEL})"
    assert json.loads(ours["findings"]) == [
        {
            "check": "Secrets",
            "status": "fail",
            "message": f'Secret "ngc" not found in namespace "{AUDIT_NS}" (referenced by imagePullSecrets of the controller, '
            'workers pods); private registry "nvcr.io" needs it for image "nvcr.io/nvidia/aiperf:0.13.0". '
            f"Fix: kubectl create secret docker-registry ngc -n {AUDIT_NS} "
            "--docker-server=nvcr.io --docker-username=<user> --docker-password=…",
        }
    ]


# --------------------------------------------------------------------------- scope and UPDATE


def test_other_kinds_never_reach_the_webhook(hook: RunningWebhook) -> None:
    cp = hook.cp
    before = hook.requests_total()
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "e2e-untouched", "namespace": "demo-bench"},
        "data": {"k": "v"},
    }
    assert kubectl_apply(cp, cm).returncode == 0
    cm["data"]["k"] = "v2"
    assert kubectl_apply(cp, cm).returncode == 0
    assert cp.kubectl("delete", "configmap", "e2e-untouched", "-n", "demo-bench").returncode == 0
    assert hook.requests_total() == before
    hook.probe()  # and the webhook is reachable: a judged kind moves the counter
    assert hook.requests_total() == before + 1


def test_update_ratchet_lets_a_label_change_through(hook: RunningWebhook) -> None:
    """Stored while its Secret existed; the Secret is deleted; the job must stay editable."""
    cp = hook.cp
    ns = RATCHET_NS
    cp.kubectl(
        "create",
        "secret",
        "docker-registry",
        "ngc",
        "-n",
        ns,
        "--docker-server=nvcr.io",
        "--docker-username=$oauthtoken",
        "--docker-password=not-a-real-key",
    )
    obj = sample("aiperfjob-broken", namespace=ns)
    created = kubectl_apply(cp, obj)
    assert (created.returncode, created.stderr) == (0, ""), created.stderr
    cp.kubectl("delete", "secret", "ngc", "-n", ns)

    fresh = kubectl_apply(cp, sample("aiperfjob-broken", namespace=ns, job_name="llama-bench-ngc-2"))
    assert fresh.returncode == 1 and f'[Secrets] Secret "ngc" not found in namespace "{ns}"' in fresh.stderr, (
        fresh.stderr
    )

    before = hook.requests_total(kind="AIPerfJob", operation="UPDATE")
    labelled = cp.kubectl("label", "aiperfjob", "llama-bench-ngc", "-n", ns, "team=bench", check=False)
    assert (labelled.returncode, labelled.stdout, labelled.stderr) == (
        0,
        "aiperfjob.aiperf.nvidia.com/llama-bench-ngc labeled\n",
        "",
    )
    assert hook.requests_total(kind="AIPerfJob", operation="UPDATE") == before + 1

    changed = copy.deepcopy(obj)
    changed["spec"]["benchmark"]["phases"][0]["requests"] = 200
    proc = kubectl_apply(cp, changed)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "aiperfjob.aiperf.nvidia.com/llama-bench-ngc configured\n"
    assert warnings_of(proc.stderr) == [  # a spec change: checked, but the old failure no longer blocks
        'pre-existing: [Secrets] Secret "ngc" not found in namespace "e2e-webhook-ratchet" (referenced by imagePullSecrets of the '
        'controller, workers pods); private registry "nvcr.io" needs it for image "nvcr.io/nvidia/aiperf:0.13.0". '
        "Fix: kubectl create secret",
        "pre-existing: [Secrets] … docker-registry ngc -n e2e-webhook-ratchet --docker-server=nvcr.io --docker-username=<user> "
        "--docker-password=…",
    ]


# --------------------------------------------------------------------------- budget and failure policy


@pytest.mark.parametrize(("timeout_seconds", "budget"), [(2, 1.5), (3, 2.5), (10, 4.0)])
def test_apiserver_timeout_bounds_the_budget(
    samples_cluster: ControlPlane, start_webhook: Callable[..., RunningWebhook], timeout_seconds: int, budget: float
) -> None:
    """timeoutSeconds → `?timeout=Ns` → budget = min(budgetSeconds 4, N − safetyMargin 0.5)."""
    hook = start_webhook(
        vwc_name=f"preflight-webhook-timeout-{timeout_seconds}",
        name=f"timeout-{timeout_seconds}.preflight.webhook.io",
        failure_policy="Ignore",
        timeout_seconds=timeout_seconds,
        config={"budgetSeconds": 4, "safetyMarginSeconds": 0.5},
        namespace_selector={"matchLabels": SAMPLES_LABEL},
        probe_namespace="demo-bench",
    )
    kubectl_apply(samples_cluster, sample("trainjob-good", job_name="mnist-ft-budget"), "--dry-run=server")
    count = hook.metric("preflight_webhook_budget_seconds_count")
    assert count >= 2  # the registration probe(s) and the TrainJob, all under this timeoutSeconds
    assert hook.metric("preflight_webhook_budget_seconds_sum") == pytest.approx(budget * count)
    assert hook.metric("preflight_webhook_budget_seconds_bucket", le=str(budget)) == count
    below = max([b for b in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0) if b < budget], default=None)
    if below is not None:
        assert hook.metric("preflight_webhook_budget_seconds_bucket", le=str(below)) == 0


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_failure_policy_decides_when_the_webhook_is_down(
    control_plane: ControlPlane, start_webhook: Callable[..., RunningWebhook], policy: str
) -> None:
    cp = control_plane
    ns = f"e2e-webhook-down-{policy.lower()}"
    cp.ensure_namespace(ns)
    cp.kubectl("label", "namespace", ns, f"preflight-webhook/down={policy}", "--overwrite")
    name = f"down-{policy.lower()}.preflight.webhook.io"
    hook = start_webhook(
        vwc_name=f"preflight-webhook-down-{policy.lower()}",
        name=name,
        failure_policy=policy,
        timeout_seconds=5,
        namespace_selector={"matchLabels": {"preflight-webhook/down": policy}},
        probe_namespace=ns,
    )
    port = hook.port
    hook.stop_process()  # the VWC stays: the apiserver keeps calling a webhook that is gone

    obj = sample("aiperfjob-good", namespace=ns)
    proc = kubectl_apply(cp, obj)
    if policy == "Fail":
        assert proc.returncode == 1
        assert proc.stderr == (
            f'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling '
            f'webhook "{name}": failed to call webhook: Post "https://127.0.0.1:{port}/validate?timeout=5s": '
            f"dial tcp 127.0.0.1:{port}: connect: connection refused\n"
        )
        assert not exists(cp, obj)
    else:
        assert (proc.returncode, proc.stdout) == (0, "aiperfjob.aiperf.nvidia.com/llama-bench created\n"), proc.stderr
        assert exists(cp, obj)
        ann = audit_event(cp, "aiperfjobs", ns, "llama-bench")["annotations"]
        assert ann.get("failed-open.validating.webhook.admission.k8s.io/round_0_index_0") == name, ann
