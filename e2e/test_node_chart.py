"""The product as users run it: our Dockerfile's image, `helm install` of the chart with its
default values (only the image repository, tag and pull policy overridden), the webhook
serving from its pods on a real node (e2e/harness/node.py), called by the apiserver through its Service.

Marked ``node`` (``pytest e2e -m "not node"`` skips it; ``make test`` runs it).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.fidelity.scenarios_base import secret_env, trainjob
from e2e.harness.legacychart import legacy_chart
from e2e.harness.node import CHART_DIR, CHART_NAMESPACE, CHART_RELEASE, Node
from webhook.quantity import format_cpu, parse_quantity

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[1]
CHART = CHART_DIR
SAMPLES = ROOT / "e2e" / "samples"
NS = CHART_NAMESPACE
RELEASE = CHART_RELEASE
NAME = "preflight-webhook"


class Installed:
    def __init__(self, node: Node, image: str) -> None:
        self.node = node
        self.cp = node.cp
        self.image = image

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl(*args, check=check, input=input)  # type: ignore[union-attr]

    def helm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return self.node.helm(*args, timeout=timeout)

    def pods(self) -> list[dict]:
        # not the certificate pod, not the audit controller; a chart 0.1.0 pod has no component label at all
        sel = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component notin (certs,audit)"
        items = json.loads(self.kubectl("get", "pods", "-n", NS, "-l", sel, "-o", "json").stdout)["items"]
        return items


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    node = Node(start_timeout=180)
    node.start()
    try:
        t0 = time.monotonic()
        inst = Installed(node, "")
        # the samples declare no ServiceAccount: this waits for the controller-manager's
        node.cp.apply_samples_prerequisites(SAMPLES)  # type: ignore[union-attr]
        inst.image = node.install_webhook_chart(RELEASE, NS)
        print(f"==> helm install to the webhook answering: {time.monotonic() - t0:.0f}s")
        yield inst
    finally:
        left = node.stop()
        assert left == [], left


def test_two_webhook_pods_ready_running_the_dockerfile_image_restricted(installed: Installed) -> None:
    pods = installed.pods()
    assert len(pods) == 2
    for pod in pods:
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True", pod["metadata"]["name"]
        (c,) = pod["spec"]["containers"]
        assert c["image"] == installed.image
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        # the process really runs as the non-root UID on a read-only root
        name = pod["metadata"]["name"]
        out = installed.kubectl(
            "exec",
            "-n",
            NS,
            name,
            "--",
            "python",
            "-c",
            "import os\ntry:\n open('/x','w')\nexcept OSError as e:\n print(os.getuid(), e.errno)",
        ).stdout.split()
        assert out == ["65532", "30"]  # EROFS
        # the image carries the `fast` extra: the server runs on uvloop (Dockerfile EXTRAS)
        logs = installed.kubectl("logs", "-n", NS, name).stdout
        assert "event loop: uvloop" in logs, logs[-2000:]


def test_certificate_pod_made_the_secret_and_injected_the_ca_bundle(installed: Installed) -> None:
    vwc = json.loads(installed.kubectl("get", "validatingwebhookconfiguration", NAME, "-o", "json").stdout)
    for hook in vwc["webhooks"]:
        assert hook["clientConfig"].get("caBundle")
        assert hook["clientConfig"]["service"]["namespace"] == NS
        svc = hook["clientConfig"]["service"]["name"]
    service = json.loads(installed.kubectl("get", "svc", "-n", NS, svc, "-o", "json").stdout)
    assert service["spec"]["clusterIP"]
    slices = json.loads(
        installed.kubectl(
            "get", "endpointslices", "-n", NS, "-l", f"kubernetes.io/service-name={svc}", "-o", "json"
        ).stdout
    )
    # (the certificate pod matches the Service's selector too, but has no `https` port: it lands
    # in a slice without ports, which kube-proxy never routes to)
    ips = {
        a
        for s in slices["items"]
        if any(p.get("name") == "https" for p in s.get("ports") or [])
        for e in s.get("endpoints") or []
        for a in e["addresses"]
    }
    assert ips == {p["status"]["podIP"] for p in installed.pods()}


def test_samples_get_the_demo_verdicts(installed: Installed) -> None:
    good = installed.kubectl("apply", "-f", str(SAMPLES / "trainjob-good.yaml"))
    assert "created" in good.stdout
    # Every sample AIPerfJob's workers ask for 3350m CPU each (AIPerf's defaults). Per-Node
    # Schedulability denies a pod no node can hold when nothing could add a node: on this single
    # node (allocatable = the machine's cores; no Karpenter, autoscaler or Kueue flavor) that is
    # their verdict unless the machine has the cores; the other findings still come as warnings.
    node = json.loads(installed.kubectl("get", "node", "-o", "json").stdout)["items"][0]
    cpu = parse_quantity(node["status"]["allocatable"]["cpu"])
    fits = cpu >= parse_quantity("3350m")
    unschedulable = (
        "[Per-Node Schedulability] No single node can fit a workers pod (cpu 3350m, memory 6Gi): the most any "
        f"of the 1 eligible node offers is cpu {format_cpu(cpu)} ({node['metadata']['name']}), and nothing could "
        "add one"
    )

    def placed(proc: subprocess.CompletedProcess[str]) -> bool:
        if fits:
            return proc.returncode == 0
        return proc.returncode != 0 and unschedulable in proc.stderr and "denied the request" in proc.stderr

    aiperf = installed.kubectl("apply", "-f", str(SAMPLES / "aiperfjob-good.yaml"), check=False)
    assert placed(aiperf), aiperf.stderr
    assert ("created" in aiperf.stdout) is fits
    broken = installed.kubectl("apply", "-f", str(SAMPLES / "trainjob-broken.yaml"), check=False)
    assert broken.returncode != 0
    assert 'admission webhook "' in broken.stderr and "denied the request" in broken.stderr
    assert "hf_token" in broken.stderr
    warns = installed.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES / "aiperfjob-warns.yaml"), check=False)
    assert placed(warns) and 'Warning: [Image Reference] Image "nvcr.io/nvidia/aiperf:latest"' in warns.stderr, (
        warns.stderr
    )
    # nvcr.io is private only when declared (privateRegistries, empty by default): with the
    # chart's defaults the missing pull Secret warns instead of denying (make demo declares it).
    ngc = installed.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES / "aiperfjob-broken.yaml"), check=False)
    assert placed(ngc) and "Warning: [Secrets]" in ngc.stderr and '"ngc"' in ngc.stderr, ngc.stderr
    # the guard chain saw nothing addressed to the pod/Service ranges leave by the default route
    assert sum(installed.node.guard_counters().values()) == 0


def test_capabilities_from_the_pod_lower_nothing_for_a_missing_permission(installed: Installed) -> None:
    svc = f"/api/v1/namespaces/{NS}/services/https:{NAME}:443/proxy/capabilities"
    status, body = installed.cp.get_raw(svc)  # type: ignore[union-attr]
    assert status == 200, body
    caps = json.loads(body)
    # every check is fully available: the chart's RBAC grants all each probe needs
    lowered = [c for c in caps if c["value"] != "yes"]
    assert lowered == []
    assert {c["source"] for c in caps} <= {"declared", "probed"}
    assert any(c["source"] == "probed" for c in caps)


# --------------------------------------------------------------------------- reliability on the node
# Each test runs a bounded stream of server-side dry-run applies from a client beside the
# node while the webhook is disturbed, and counts the applies that failed.


class ApplyStream:
    """``kubectl apply --dry-run=server`` of the good TrainJob, back to back, in a thread."""

    def __init__(self, inst: Installed, sample: str = "trainjob-good.yaml", limit: int = 2000) -> None:
        import threading

        self.inst, self.sample, self.limit = inst, sample, limit
        self.ok = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set() and self.ok + len(self.failures) < self.limit:
            proc = self.inst.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES / self.sample), check=False)
            if proc.returncode == 0:
                self.ok += 1
            else:
                self.failures.append(proc.stderr.strip()[-400:])

    def __enter__(self) -> ApplyStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # a few more applies after the disturbance settled, then stop
        settled = self.ok + len(self.failures) + 5
        deadline = time.monotonic() + 60
        while self.ok + len(self.failures) < settled and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.1)
        self._stop.set()
        self._thread.join(timeout=60)

    @property
    def total(self) -> int:
        return self.ok + len(self.failures)


def _wait_rollout(inst: Installed) -> None:
    inst.kubectl("rollout", "status", f"deployment/{NAME}", "-n", NS, "--timeout=300s")
    inst.node._wait(
        "two Ready webhook pods",
        ["kubelet"],
        lambda: (
            sum(
                1
                for p in inst.pods()
                if not p["metadata"].get("deletionTimestamp")
                and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
            )
            == 2
        ),
        300,
    )


def test_rollout_restart_fails_no_apply(installed: Installed) -> None:
    with ApplyStream(installed) as stream:
        installed.kubectl("rollout", "restart", f"deployment/{NAME}", "-n", NS)
        _wait_rollout(installed)
    print(f"==> rollout restart: {stream.total} applies, {len(stream.failures)} failed")
    assert stream.failures == []
    assert stream.ok > 0


def test_deleting_a_webhook_pod_fails_no_apply(installed: Installed) -> None:
    victim = installed.pods()[0]["metadata"]["name"]
    with ApplyStream(installed) as stream:
        installed.kubectl("delete", "pod", victim, "-n", NS, "--wait=true", "--timeout=120s")
        _wait_rollout(installed)
    print(f"==> deleting pod {victim}: {stream.total} applies, {len(stream.failures)} failed")
    assert stream.failures == []
    assert stream.ok > 0


def _secret_data(inst: Installed) -> dict[str, str]:
    return json.loads(inst.kubectl("get", "secret", "-n", NS, f"{NAME}-tls", "-o", "json").stdout)["data"]


def _pods_serve_cert_of(inst: Installed, ca_pem: bytes) -> bool | str:
    """Every webhook pod's TLS handshake verifies against ``ca_pem`` (pod IPs are on the bridge)."""
    import socket
    import ssl

    for pod in inst.pods():
        ctx = ssl.create_default_context(cadata=ca_pem.decode())
        ctx.check_hostname = False
        try:
            with socket.create_connection((pod["status"]["podIP"], 8443), timeout=5) as raw:
                with ctx.wrap_socket(raw):
                    pass
        except (ssl.SSLError, OSError) as e:
            return f"{pod['metadata']['name']}: {e}"
    return True


def test_certificate_rotation_causes_no_tls_error(installed: Installed) -> None:
    """A rotation requested by annotation, run by the certificate Deployment, under the stream.

    The propagation waits are shortened (values the chart exposes) to keep the test short;
    certPropagationSeconds stays above the kubelet's refresh of mounted Secrets (~60-90 s).
    """
    import base64

    installed.helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        NS,
        "--reuse-values",
        "--set",
        "certificates.selfManaged.bundlePropagationSeconds=10",
        "--set",
        "certificates.selfManaged.certPropagationSeconds=120",
        "--set",
        "certificates.selfManaged.checkIntervalSeconds=5",
    )
    installed.kubectl("rollout", "status", f"deployment/{NAME}-certs", "-n", NS, "--timeout=300s")
    _wait_rollout(installed)
    ca0 = _secret_data(installed)["ca.crt"]

    def steady() -> bool | str:
        data = _secret_data(installed)
        if data["ca.crt"] == ca0 or "ca-prev.crt" in data or "ca-next.crt" in data:
            return f"keys {sorted(data)}"
        return _pods_serve_cert_of(installed, base64.b64decode(data["ca.crt"]))

    t0 = time.monotonic()
    with ApplyStream(installed) as stream:
        installed.kubectl("annotate", "secret", "-n", NS, f"{NAME}-tls", "preflight.webhook.io/rotate=now")
        installed.node._wait(
            "the rotation back to steady with the pods serving the new CA's certificate", ["kubelet"], steady, 600
        )
    print(
        f"==> certificate rotation: {time.monotonic() - t0:.0f}s, {stream.total} applies, {len(stream.failures)} failed"
    )
    assert stream.failures == []
    assert stream.ok > 0


AUDIT = f"{NAME}-audit"
AUDIT_SEL = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=audit"
AUDIT_NS = "audit-node"
AUDIT_JOB = "waiting-ft"
REPORT = "preflight-webhook"


def _audit_pods(inst: Installed) -> list[str]:
    """The running audit pods' names (a pod being deleted is not one of them)."""
    items = json.loads(inst.kubectl("get", "pods", "-n", NS, "-l", AUDIT_SEL, "-o", "json").stdout)["items"]
    return sorted(
        p["metadata"]["name"]
        for p in items
        if not p["metadata"].get("deletionTimestamp")
        and any(c.get("ready") for c in p.get("status", {}).get("containerStatuses") or [])
    )


def _audit_leader(inst: Installed) -> str:
    """The holder of the audit controller's Lease ("" when none): the one Lease an audit pod holds."""
    items = json.loads(inst.kubectl("get", "leases", "-n", NS, "-o", "json").stdout)["items"]
    pods = set(_audit_pods(inst))
    held = [(lease.get("spec") or {}).get("holderIdentity") or "" for lease in items]
    return next((h for h in held if h in pods), "")


def _audit_metrics(inst: Installed, pod: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """One audit pod's /metrics, through the apiserver's pod proxy, by (name, sorted labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = inst.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}:9090/proxy/metrics").stdout
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _scanned(inst: Installed, pod: str) -> bool:
    return _audit_metrics(inst, pod).get(("preflight_audit_last_full_scan_timestamp_seconds", ()), 0.0) > 0


def _job_events(inst: Installed) -> list[dict[str, Any]]:
    items = json.loads(inst.kubectl("get", "events", "-n", AUDIT_NS, "-o", "json").stdout)["items"]
    return [
        e for e in items
        if e.get("reason") in ("PreflightFailed", "PreflightPassed")
        and (e.get("involvedObject") or {}).get("name") == AUDIT_JOB
    ]  # fmt: skip


def _secrets_fail_in_report(inst: Installed) -> bool | str:
    proc = inst.kubectl("get", "reports.openreports.io", REPORT, "-n", AUDIT_NS, "-o", "json", check=False)
    if proc.returncode != 0:
        return f"no Report: {proc.stderr.strip()}"
    results = json.loads(proc.stdout).get("results") or []
    mine = [
        r for r in results
        if r.get("policy") == "Secrets" and any(x.get("name") == AUDIT_JOB for x in r.get("resources") or [])
    ]  # fmt: skip
    return True if [r.get("result") for r in mine] == ["fail"] else f"the job's Secrets results: {mine}"


def test_the_audit_pods_elect_one_writer_and_a_new_leader_repeats_no_event(installed: Installed) -> None:
    """Issue 20 on the real node, with the chart's own audit Deployment at two replicas: the Lease holder
    alone judges and writes (the standby's /metrics count no job and no Report write); its
    PreflightFailed Event names the deleted Secret. The leader pod is deleted: the standby takes the
    Lease, scans, and writes no second Event. Both pods are replaced after the Report is deleted: the
    new leader rebuilds the Report from its scan, and still writes no second Event."""
    inst = installed
    wait = inst.node._wait
    inst.helm("upgrade", RELEASE, str(CHART), "--namespace", NS, "--reuse-values", "--set", "audit.replicaCount=2")
    try:
        inst.kubectl("rollout", "status", f"deployment/{AUDIT}", "-n", NS, "--timeout=300s")
        # ready: the readinessProbe's /healthz answers, so each serves its /metrics
        wait("two ready audit pods", ["kubelet"], lambda: len(_audit_pods(inst)) == 2 or _audit_pods(inst), 300)
        inst.cp.ensure_namespace(AUDIT_NS)  # type: ignore[union-attr]
        inst.cp.default_service_accounts([AUDIT_NS])  # type: ignore[union-attr]
        inst.kubectl("create", "secret", "generic", "audit-token", "-n", AUDIT_NS, "--from-literal=token=not-logged")
        job = trainjob(
            AUDIT_JOB,
            resources={"requests": {"cpu": "100m", "memory": "64Mi"}},
            env=[secret_env("TOKEN", "audit-token", "token")],
        )
        job["metadata"]["namespace"] = AUDIT_NS
        job["spec"]["suspend"] = True  # waits: the audit controller judges it
        inst.kubectl("apply", "-f", "-", input=json.dumps(job))
        wait("an audit pod holds the Lease", ["kubelet"], lambda: _audit_leader(inst) != "" or "no holder", 120)
        leader = _audit_leader(inst)
        (standby,) = set(_audit_pods(inst)) - {leader}
        wait(f"the leader {leader} finished its first scan", ["kubelet"], lambda: _scanned(inst, leader), 120)

        inst.kubectl("delete", "secret", "audit-token", "-n", AUDIT_NS)
        wait("a PreflightFailed Event on the job", ["kubelet"], lambda: len(_job_events(inst)) > 0, 120)
        (ev,) = _job_events(inst)
        assert ev["reason"] == "PreflightFailed" and ev["reportingInstance"] == leader
        assert f'[Secrets] Secret "audit-token" not found in namespace "{AUDIT_NS}"' in ev["message"]
        assert "not-logged" not in ev["message"]
        wait("the Report's Secrets fail for the job", ["kubelet"], lambda: _secrets_fail_in_report(inst), 120)
        idle = _audit_metrics(inst, standby)
        assert idle[("preflight_audit_jobs_watched", (("state", "judged"),))] == 0
        assert sum(v for (n, _), v in idle.items() if n == "preflight_audit_report_writes_total") == 0
        busy = _audit_metrics(inst, leader)
        assert sum(v for (n, _), v in busy.items() if n == "preflight_audit_report_writes_total") >= 1

        # failover: the leader's pod goes, the standby takes the Lease and judges everything again
        inst.kubectl("delete", "pod", leader, "-n", NS, "--wait=true", "--timeout=120s")
        wait("the standby leads", ["kubelet"], lambda: _audit_leader(inst) == standby or _audit_leader(inst), 120)
        wait(f"the new leader {standby} finished its scan", ["kubelet"], lambda: _scanned(inst, standby), 120)
        assert _job_events(inst) == [ev], "a new leader wrote the same finding again"

        # a restart of every audit pod, with the Report gone: the new leader rebuilds it
        inst.kubectl("delete", "reports.openreports.io", REPORT, "-n", AUDIT_NS)
        inst.kubectl("rollout", "restart", f"deployment/{AUDIT}", "-n", NS)
        inst.kubectl("rollout", "status", f"deployment/{AUDIT}", "-n", NS, "--timeout=300s")
        wait("a new pod leads", ["kubelet"], lambda: _audit_leader(inst) not in ("", leader, standby), 180)
        wait("the rebuilt Report's Secrets fail", ["kubelet"], lambda: _secrets_fail_in_report(inst), 120)
        assert _job_events(inst) == [ev], "a restarted controller wrote the same finding again"
        assert (ev.get("count") or 1) == 1
    finally:
        inst.kubectl("delete", "namespace", AUDIT_NS, "--ignore-not-found", "--wait=false")
        inst.helm("upgrade", RELEASE, str(CHART), "--namespace", NS, "--reuse-values", "--set", "audit.replicaCount=1")


def test_helm_upgrade_to_warn_mode_answers_in_the_new_mode(installed: Installed) -> None:
    def verdict() -> bool | str:
        proc = installed.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES / "trainjob-broken.yaml"), check=False)
        return (
            True if proc.returncode == 0 and "Warning:" in proc.stderr and "hf_token" in proc.stderr else "still denied"
        )

    assert verdict() == "still denied"
    t0 = time.monotonic()
    installed.helm("upgrade", RELEASE, str(CHART), "--namespace", NS, "--reuse-values", "--set", "config.mode=warn")
    installed.node._wait("the broken TrainJob warned instead of denied", ["kubelet"], verdict, 300)
    print(f"==> helm upgrade config.mode=warn: the new mode answered after {time.monotonic() - t0:.0f}s")
    _wait_rollout(installed)


def test_helm_uninstall_leaves_no_webhook_configuration_or_policy(installed: Installed) -> None:
    installed.helm("uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "5m")
    left = installed.kubectl(
        "get",
        "validatingwebhookconfigurations,mutatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings",
        "-o",
        "name",
    ).stdout.split()
    assert [n for n in left if RELEASE in n or "preflight" in n] == []
    cluster_wide = installed.kubectl("get", "clusterroles,clusterrolebindings", "-o", "name").stdout.split()
    assert [n for n in cluster_wide if RELEASE in n] == []
    # without the webhook the broken TrainJob is no longer judged
    proc = installed.kubectl("apply", "--dry-run=server", "-f", str(SAMPLES / "trainjob-broken.yaml"), check=False)
    assert proc.returncode == 0, proc.stderr


def test_upgrade_from_chart_0_1_0_moves_the_selector_without_a_failed_apply(
    installed: Installed, tmp_path: Path
) -> None:
    """A release of the 0.1.0 chart (selectors without the component: they matched the
    certificate pod too) upgraded to this chart: helm refuses with the two commands, which,
    run as printed, move it over while applies keep flowing (docs/install.md)."""
    installed.node.install_webhook_chart(RELEASE, NS, chart=legacy_chart(tmp_path))
    _wait_rollout(installed)
    legacy = {"app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/name": NAME}
    dep = json.loads(installed.kubectl("get", "deployment", NAME, "-n", NS, "-o", "json").stdout)
    assert dep["spec"]["selector"] == {"matchLabels": legacy}
    old_rs = json.loads(
        installed.kubectl("get", "rs", "-n", NS, "-l", "!app.kubernetes.io/component", "-o", "json").stdout
    )["items"]
    assert [r["metadata"]["ownerReferences"][0]["name"] for r in old_rs] == [NAME]
    with ApplyStream(installed) as stream:
        refused = subprocess.run(
            [str(installed.cp.helm_path), f"--kubeconfig={installed.cp.kubeconfig}", "upgrade", RELEASE, str(CHART),
             "--namespace", NS, "--reuse-values"],
            capture_output=True, text=True, timeout=300, env=installed.cp.env(),
        )  # fmt: skip
        assert refused.returncode != 0
        assert (
            f"Deployment {NS}/{NAME} was installed by a chart before 0.2.0: its selector lacks "
            "app.kubernetes.io/component=webhook, and a Deployment's selector is immutable." in refused.stderr
        ), refused.stderr
        commands = [ln.strip() for ln in refused.stderr.splitlines() if ln.strip().startswith("kubectl ")]
        assert [c.split()[3] for c in commands] == ["label", "delete"], commands
        for command in commands:
            installed.kubectl(*shlex.split(command)[1:])
        installed.helm("upgrade", RELEASE, str(CHART), "--namespace", NS, "--reuse-values", "--wait", "--timeout", "5m")
        _wait_rollout(installed)

        old_hash = old_rs[0]["metadata"]["labels"]["pod-template-hash"]

        def old_pods_gone() -> bool | str:
            sel = f"pod-template-hash={old_hash}"
            left = json.loads(installed.kubectl("get", "pods", "-n", NS, "-l", sel, "-o", "json").stdout)["items"]
            return True if not left else f"{len(left)} pods of the 0.1.0 ReplicaSet left"

        installed.node._wait("the pods of the adopted 0.1.0 ReplicaSet gone", ["kubelet"], old_pods_gone, 300)
    print(f"==> upgrade from chart 0.1.0: {stream.total} applies, {len(stream.failures)} failed")
    assert stream.failures == []
    assert stream.ok > 0
    dep = json.loads(installed.kubectl("get", "deployment", NAME, "-n", NS, "-o", "json").stdout)
    assert dep["spec"]["selector"] == {"matchLabels": {**legacy, "app.kubernetes.io/component": "webhook"}}
    # the old ReplicaSet was adopted by the new Deployment (and scaled down), not left behind
    (adopted,) = json.loads(
        installed.kubectl("get", "rs", old_rs[0]["metadata"]["name"], "-n", NS, "-o", "json").stdout
    )["metadata"]["ownerReferences"]
    assert (adopted["kind"], adopted["name"], adopted["uid"]) == ("Deployment", NAME, dep["metadata"]["uid"])
    # the Service's endpoints are exactly the serving pods; the certificate pod is in no slice any more
    slices = json.loads(
        installed.kubectl(
            "get", "endpointslices", "-n", NS, "-l", f"kubernetes.io/service-name={NAME}", "-o", "json"
        ).stdout
    )["items"]
    ips = {a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]}
    assert ips == {p["status"]["podIP"] for p in installed.pods()}
