"""Self-managed certificate rotation against the real kube-apiserver, while applies run.

`preflight-webhook certs manage` keeps the CA + serving pair in a Secret, injects the
caBundle into a real ValidatingWebhookConfiguration and mirrors the pair into a directory
(`--write-dir`, swapped atomically like a kubelet Secret volume). `preflight-webhook serve`
serves from those files and reloads them into its live TLS context. The apiserver calls
the webhook (url: https://127.0.0.1:PORT) for every AIPerfJob apply in the test namespace.

A rotation is requested with the Secret annotation; the test then watches the three steps
(both CAs in the bundle → serving cert from the new CA → only the new CA) while a thread
applies AIPerfJobs in a loop, and asserts: no apply failed, the apiserver recorded no
webhook calling error, and the bundle held exactly [old, new] during the overlap and
exactly [new] afterwards.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from e2e.harness.controlplane import ControlPlane, free_ports, stop_pid
from e2e.harness.runner import validating_webhook_configuration
from e2e.harness.runner import wait_until as wait_for

NS = "preflight-rotation"
SECRET = "preflight-rotation-tls"
VWC = "preflight-rotation-e2e"
HOOK = "rotation.preflight.webhook.io"
ROOT = Path(__file__).resolve().parents[1]
BUNDLE_WAIT, CERT_WAIT = 3.0, 6.0


def bundle_ids(cp: ControlPlane) -> list[str]:
    vwc = json.loads(cp.kubectl("get", "validatingwebhookconfiguration", VWC, "-o", "json").stdout)
    b64 = vwc["webhooks"][0]["clientConfig"].get("caBundle")
    if not b64:
        return []
    return [f"{c.serial_number:x}" for c in x509.load_pem_x509_certificates(base64.b64decode(b64))]


def secret_data(cp: ControlPlane) -> dict[str, bytes]:
    s = json.loads(cp.kubectl("get", "secret", SECRET, "-n", NS, "-o", "json").stdout)
    return {k: base64.b64decode(v) for k, v in (s.get("data") or {}).items()}


def serial(pem: bytes) -> str:
    return f"{x509.load_pem_x509_certificate(pem).serial_number:x}"


def served_issuer_serial(port: int, bundle_file: Path) -> str:
    """The serial of the CA that signed the certificate the webhook presents right now."""
    ctx = ssl.create_default_context(cafile=str(bundle_file))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    leaf = x509.load_der_x509_certificate(der)  # type: ignore[arg-type]
    akid = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
    for ca in x509.load_pem_x509_certificates(bundle_file.read_bytes()):
        if ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest == akid:
            return f"{ca.serial_number:x}"
    return ""


def webhook_errors(cp: ControlPlane) -> float:
    """calling_webhook_error rejections + fail-open calls the apiserver counted for our webhook."""
    status, body = cp.get_raw("/metrics")
    assert status == 200
    total = 0.0
    for line in body.splitlines():
        if (
            line.startswith(
                ("apiserver_admission_webhook_rejection_count", "apiserver_admission_webhook_fail_open_count")
            )
            and f'name="{HOOK}"' in line
            and ("calling_webhook_error" in line or "fail_open" in line)
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture
def rotation_env(control_plane: ControlPlane, tmp_path: Path) -> Iterator[dict[str, Any]]:
    cp = control_plane
    cp.ensure_namespace(NS)
    cp.kubectl("label", "namespace", NS, "preflight-e2e=rotation", "--overwrite")
    cp.kubectl("delete", "secret", SECRET, "-n", NS, "--ignore-not-found")
    (port,) = free_ports(1)
    # no caBundle: `certs manage` injects it (the registration shape is e2e/harness/runner.py's, like every e2e webhook)
    cp.apply(
        validating_webhook_configuration(
            VWC,
            HOOK,
            f"https://127.0.0.1:{port}/validate",
            failure_policy="Fail",
            timeout_seconds=5,
            namespace_selector={"matchLabels": {"preflight-e2e": "rotation"}},
            rules=[
                {
                    "apiGroups": ["aiperf.nvidia.com"],
                    "apiVersions": ["*"],
                    "resources": ["aiperfjobs"],
                    "operations": ["CREATE", "UPDATE"],
                    "scope": "Namespaced",
                }
            ],
        )
    )
    certs_dir = tmp_path / "certs"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"mode": "audit"}))  # every request is answered "allowed"
    procs: list[subprocess.Popen[bytes]] = []
    logs = []

    def spawn(name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"{name}.log", "wb")
        logs.append(log)
        p = subprocess.Popen([sys.executable, "-m", "webhook", *args], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        procs.append(p)
        return p

    try:
        manager = spawn(
            "certs-manage",
            "certs",
            "manage",
            f"--secret={NS}/{SECRET}",
            f"--webhook-config={VWC}",
            "--service=localhost",
            f"--namespace={NS}",
            "--ip-address=127.0.0.1",
            f"--write-dir={certs_dir}",
            f"--kubeconfig={cp.kubeconfig}",
            "--check-interval=1",
            f"--bundle-propagation-seconds={BUNDLE_WAIT}",
            f"--cert-propagation-seconds={CERT_WAIT}",
        )
        wait_for(
            "the manager to write the serving pair",
            lambda: (certs_dir / "tls.key").exists() or manager.poll() is not None,
        )
        assert manager.poll() is None and (certs_dir / "tls.key").exists(), (tmp_path / "certs-manage.log").read_text()
        server = spawn(
            "serve",
            "serve",
            "--host=127.0.0.1",
            f"--port={port}",
            f"--tls-cert={certs_dir / 'tls.crt'}",
            f"--tls-key={certs_dir / 'tls.key'}",
            "--cert-reload-seconds=0.2",
            "--offline",
            f"--config={config}",
        )

        def ready() -> bool:
            if server.poll() is not None:
                raise AssertionError((tmp_path / "serve.log").read_text())
            try:
                served_issuer_serial(port, certs_dir / "ca.crt")
                return True
            except OSError:
                return False

        wait_for("the webhook to listen", ready)
        yield {"cp": cp, "port": port, "certs_dir": certs_dir, "logs": tmp_path}
    finally:
        for p in procs:
            stop_pid(p.pid, proc=p)
        for log in logs:
            log.close()
        cp.kubectl("delete", "validatingwebhookconfiguration", VWC, "--ignore-not-found")
        cp.kubectl("delete", "secret", SECRET, "-n", NS, "--ignore-not-found")


class ApplyLoop(threading.Thread):
    """kubectl apply of one AIPerfJob, changed every time (so each apply is a judged UPDATE)."""

    def __init__(self, cp: ControlPlane) -> None:
        super().__init__(daemon=True)
        self.cp = cp
        self.stop = threading.Event()
        self.ok = 0
        self.failures: list[str] = []
        self.phase = "before"
        self.by_phase: dict[str, int] = {}

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            job = {
                "apiVersion": "aiperf.nvidia.com/v1alpha1",
                "kind": "AIPerfJob",
                "metadata": {"name": "rotation-loop", "namespace": NS, "annotations": {"e2e/iteration": str(i)}},
                "spec": {
                    "image": "nvcr.io/nvidia/aiperf:0.13.0",
                    "benchmark": {
                        "models": ["m"],
                        "endpoint": {"urls": ["http://llm.models.svc:8000"]},
                        "datasets": [{"name": "main", "type": "synthetic", "entries": 10}],
                        "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 10, "requests": 10}],
                    },
                },
            }
            proc = self.cp.apply(job, check=False)
            if proc.returncode == 0:
                self.ok += 1
                self.by_phase[self.phase] = self.by_phase.get(self.phase, 0) + 1
            else:
                self.failures.append(proc.stderr.strip())


def test_rotation_under_load_has_no_tls_error(rotation_env: dict[str, Any]) -> None:
    cp: ControlPlane = rotation_env["cp"]
    port: int = rotation_env["port"]
    bundle_file: Path = rotation_env["certs_dir"] / "ca.crt"

    old_ca = serial(secret_data(cp)["ca.crt"])
    wait_for("the initial caBundle", lambda: bundle_ids(cp) == [old_ca])
    errors_before = webhook_errors(cp)

    loop = ApplyLoop(cp)
    loop.start()
    try:
        wait_for("applies to go through", lambda: loop.ok >= 3 or loop.failures)
        assert not loop.failures, loop.failures

        cp.kubectl("annotate", "secret", SECRET, "-n", NS, "preflight.webhook.io/rotate=e2e", "--overwrite")
        # step 1: both CAs in the bundle, the webhook still serves the old certificate
        ids = wait_for("the new CA to join the bundle", lambda: (b := bundle_ids(cp)) and len(b) == 2 and b)
        assert ids[0] == old_ca and ids[1] != old_ca
        new_ca = ids[1]
        loop.phase = "overlap"
        # step 2: the serving certificate switches to the new CA; the bundle still holds both
        wait_for(
            "the webhook to serve a certificate from the new CA",
            lambda: served_issuer_serial(port, bundle_file) == new_ca,
            timeout=BUNDLE_WAIT + 30,
        )
        assert bundle_ids(cp) == [old_ca, new_ca], "the old CA must stay while replicas may still serve the old cert"
        data = secret_data(cp)
        assert serial(data["ca.crt"]) == new_ca and serial(data["ca-prev.crt"]) == old_ca
        ok_mid = loop.ok
        wait_for("applies against the new certificate", lambda: loop.ok >= ok_mid + 3 or loop.failures)
        # step 3: after the propagation window, only the new CA remains
        wait_for("the old CA to leave the bundle", lambda: bundle_ids(cp) == [new_ca], timeout=CERT_WAIT + 30)
        loop.phase = "after"
        ok_end = loop.ok
        wait_for("applies after the rotation", lambda: loop.ok >= ok_end + 3 or loop.failures)
    finally:
        loop.stop.set()
        loop.join(timeout=60)

    print(f"applies by phase: {loop.by_phase}, failed: {len(loop.failures)}")
    assert not loop.failures, f"{len(loop.failures)} failed applies, first: {loop.failures[0]}"
    assert all(loop.by_phase.get(p, 0) >= 3 for p in ("before", "overlap", "after")), loop.by_phase
    assert webhook_errors(cp) == errors_before, "the apiserver recorded webhook calling errors during rotation"
    assert "preflight.webhook.io/rotate" not in json.loads(
        cp.kubectl("get", "secret", SECRET, "-n", NS, "-o", "json").stdout
    )["metadata"].get("annotations", {})
    assert "ca-prev.crt" not in secret_data(cp)


def test_drifted_ca_bundle_is_repaired(rotation_env: dict[str, Any]) -> None:
    cp: ControlPlane = rotation_env["cp"]
    ca = serial(secret_data(cp)["ca.crt"])
    wait_for("the initial caBundle", lambda: bundle_ids(cp) == [ca])
    stale = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": stale}]
    cp.kubectl("patch", "validatingwebhookconfiguration", VWC, "--type=json", f"-p={json.dumps(patch)}")
    wait_for("the manager to repair the caBundle", lambda: bundle_ids_safe(cp) == [ca], timeout=30)
    log = (rotation_env["logs"] / "certs-manage.log").read_text()
    assert re.search(rf"ValidatingWebhookConfiguration {VWC}: caBundle set \(1 CA\)", log), log
    assert "PRIVATE KEY" not in log


def bundle_ids_safe(cp: ControlPlane) -> list[str]:
    try:
        return bundle_ids(cp)
    except ValueError:
        return []
