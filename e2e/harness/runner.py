"""The webhook, running for real against a :class:`~e2e.harness.controlplane.ControlPlane`.

:class:`RunningWebhook` is the ONE place that starts ``python -m webhook serve`` for the
end-to-end tests and the demo, and registers it with the apiserver:

1. a CA and a serving certificate for 127.0.0.1 (``webhook.tls``) into a directory;
2. a config file (``mode``, ``secretTtlSeconds`` ... whatever the caller passes);
3. ``serve`` as a subprocess on a free 127.0.0.1 port with the control plane's kubeconfig;
   ``/readyz`` is polled until it answers 200 (the cluster view's caches are synced);
4. a ValidatingWebhookConfiguration: ``clientConfig.url: https://127.0.0.1:PORT/validate``,
   the caBundle, ``sideEffects: None``, ``timeoutSeconds``, ``admissionReviewVersions: [v1]``,
   ``failurePolicy``, CREATE/UPDATE of aiperfjobs and trainjobs;
5. a probe (``kubectl apply --dry-run=server`` of an AIPerfJob) repeated until the
   webhook's own request counter moves: the apiserver picks a new VWC up asynchronously,
   so this is the condition that says "the apiserver calls us now".

On exit the process is stopped by PID and the VWC deleted, even when the test failed.
Objects the checks read should exist before :meth:`RunningWebhook.start`: the initial
list of the watch-backed caches then holds them (no waiting on watch events).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.controlplane import ControlPlane, _tail, free_ports, stop_pid
from e2e.harness.managed import Managed
from webhook.tls import ca_bundle, generate_ca, generate_serving_cert, write_cert_files

ROOT = Path(__file__).resolve().parents[2]

#: what the webhook judges; everything else must never reach it
RULES: list[dict[str, Any]] = [
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

CHART = ROOT / "charts" / "preflight-webhook"
#: the chart's webhook entry for JobSets applied directly (templates/validatingwebhookconfiguration.yaml)
CHART_JOBSET_HOOK = "validate-jobsets.preflight.webhook.io"


def chart_jobset_hook(cp: ControlPlane) -> dict[str, Any]:
    """The chart's JobSet webhook entry, as `helm template` renders it with the defaults: its rules and
    its matchCondition ``not-owned-by-a-judged-job`` (a JobSet a TrainJob or AIPerfJob owns is skipped)."""
    out = subprocess.run(
        # the NetworkPolicy needs the apiserver's address, which `helm template` cannot read (any will do here)
        [str(cp.helm_path), "template", "t", str(CHART), "--namespace", "pw", "--set", "networkPolicy.enabled=false"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    [vwc] = [d for d in yaml.safe_load_all(out) if d and d.get("kind") == "ValidatingWebhookConfiguration"]
    [hook] = [h for h in vwc["webhooks"] if h["name"] == CHART_JOBSET_HOOK]
    return dict(hook)


#: the smallest AIPerfJob the adapter reads; used to prove the apiserver calls the webhook
PROBE_JOB: dict[str, Any] = {
    "apiVersion": "aiperf.nvidia.com/v1alpha1",
    "kind": "AIPerfJob",
    "metadata": {"name": "preflight-registration-probe"},
    "spec": {
        "image": "nvcr.io/nvidia/aiperf:0.13.0",
        "benchmark": {
            "models": ["probe"],
            "endpoint": {"urls": ["http://probe.example.com:8000"]},
            "datasets": [{"name": "main", "type": "synthetic", "entries": 10}],
            "phases": [{"name": "profiling", "type": "concurrency", "concurrency": 1, "requests": 1}],
        },
    },
}

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def validating_webhook_configuration(
    vwc_name: str,
    name: str,
    url: str,
    *,
    ca_bundle_b64: str | None = None,
    failure_policy: str = "Fail",
    timeout_seconds: int = 10,
    namespace_selector: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    match_conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The one ValidatingWebhookConfiguration shape the e2e tests register (url-based, v1 reviews).

    ``ca_bundle_b64`` None leaves the caBundle out (for a manager that injects it).
    """
    client: dict[str, Any] = {"url": url}
    if ca_bundle_b64:
        client["caBundle"] = ca_bundle_b64
    hook: dict[str, Any] = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": failure_policy,
        "timeoutSeconds": timeout_seconds,
        "clientConfig": client,
        "rules": RULES if rules is None else rules,
    }
    if namespace_selector:
        hook["namespaceSelector"] = namespace_selector
    if match_conditions:
        hook["matchConditions"] = match_conditions
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": vwc_name},
        "webhooks": [hook],
    }


class WebhookError(RuntimeError):
    """The webhook did not start, or the apiserver never called it."""


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text exposition → {(sample name, labels): value}."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = frozenset(_LABEL.findall(m.group("labels") or ""))
            out[(m.group("name"), labels)] = float(m.group("value"))
    return out


def wait_until(what: str, cond: Any, timeout: float = 60.0, every: float = 0.1) -> Any:
    """Poll ``cond()`` until it returns something truthy; a condition wait, not a sleep."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(every)
    raise WebhookError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


class RunningWebhook(Managed):
    """``serve`` + its ValidatingWebhookConfiguration; a context manager.

    ``namespace_selector`` scopes the VWC (keep a fail-closed test webhook away from other
    tests' namespaces); ``probe_namespace`` must exist and match it. ``config`` is the
    webhook's YAML config as a dict. ``port``: listen there instead of on a free port (e.g.
    ``cp.webhook_client_port``, the one host:port the apiserver presents its client
    certificate to). ``workdir``: where certs, config and the log go (a
    temp dir, removed on stop, when None).
    """

    def __init__(
        self,
        cp: ControlPlane,
        *,
        name: str = "preflight.webhook.io",
        vwc_name: str = "preflight-webhook-e2e",
        config: dict[str, Any] | None = None,
        failure_policy: str = "Fail",
        timeout_seconds: int = 10,
        namespace_selector: dict[str, Any] | None = None,
        probe_namespace: str = "default",
        workdir: str | os.PathLike[str] | None = None,
        log_level: str = "info",
        ready_timeout: float = 120.0,
        port: int | None = None,
        rules: list[dict[str, Any]] | None = None,
        match_conditions: list[dict[str, Any]] | None = None,
    ) -> None:
        self.cp = cp
        self.rules = rules
        self.match_conditions = match_conditions
        self.name = name
        self.vwc_name = vwc_name
        self.config = dict(config or {})
        # the apiserver keeps an idle kept-alive connection to the webhook, which a SIGTERM drain
        # leaves open for one more request until drainSeconds: keep stopping quick in tests
        self.config.setdefault("drainSeconds", 1)
        # the control plane runs no controller (no JobSet, Trainer, Kueue or AIPerf operator), so
        # Controllers would warn on every job: off unless a test configures it (e2e/test_controllers_live.py)
        self.config["checks"] = {"Controllers": "off", **(self.config.get("checks") or {})}
        self.failure_policy = failure_policy
        self.timeout_seconds = timeout_seconds
        self.namespace_selector = namespace_selector or {}
        self.probe_namespace = probe_namespace
        self.log_level = log_level
        self.ready_timeout = ready_timeout
        self._given_workdir = Path(workdir) if workdir is not None else None
        self.workdir: Path | None = None
        self._given_port = port
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.ca_file: Path | None = None
        self._ctx: ssl.SSLContext | None = None
        self._log: Any = None
        self._registered = False

    # ----------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> RunningWebhook:
        """Certificates, config, ``serve``, /readyz, the VWC, and the probe: in that order."""
        if self._given_workdir is not None:
            self.workdir = self._given_workdir
            self.workdir.mkdir(parents=True, exist_ok=True)
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="preflight-webhook-e2e-"))
        ca = generate_ca()
        files = write_cert_files(self.workdir / "certs", ca, generate_serving_cert(ca, ["localhost"], ["127.0.0.1"]))
        self.ca_file = files.ca_cert
        self._ca_pem = ca.cert_pem
        config_path = self.workdir / "config.yaml"
        config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        self.start_process(files.cert, files.key, config_path)
        self.register()
        self.wait_called()
        return self

    def start_process(self, cert: Path, key: Path, config: Path) -> None:
        assert self.workdir is not None
        (self.port,) = (self._given_port,) if self._given_port else free_ports(1)
        self.log_path = self.workdir / "webhook.log"
        self._log = open(self.log_path, "ab")
        argv = [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--host=127.0.0.1",
            f"--port={self.port}",
            f"--tls-cert={cert}",
            f"--tls-key={key}",
            f"--config={config}",
            f"--kubeconfig={self.cp.kubeconfig}",
            f"--log-level={self.log_level}",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the caller, who stops us by PID
        )
        wait_until("the webhook's /readyz", self._ready, timeout=self.ready_timeout)

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise WebhookError(f"webhook exited with {self.proc.returncode}; log tail:\n{self.log_tail()}")
        try:
            status, _ = self.get("/readyz", timeout=5)
        except (urllib.error.URLError, OSError):
            return False
        return status == 200

    def stop_process(self) -> None:
        """Stop ``serve`` by PID (SIGTERM, then SIGKILL); the VWC stays registered."""
        if self.proc is not None:
            stop_pid(self.proc.pid, proc=self.proc)
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def stop(self) -> None:
        """Delete the VWC first (nothing calls a dead webhook), then stop the process. Idempotent."""
        if self._registered:
            with contextlib.suppress(Exception):
                self.cp.kubectl(
                    "delete", "validatingwebhookconfiguration", self.vwc_name, "--ignore-not-found", check=False
                )
            self._registered = False
        self.stop_process()
        self.proc = None
        if self.workdir is not None and self._given_workdir is None:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)

    # ----------------------------------------------------------------- registration

    def vwc(self) -> dict[str, Any]:
        """The ValidatingWebhookConfiguration that sends aiperfjobs and trainjobs here."""
        return validating_webhook_configuration(
            self.vwc_name,
            self.name,
            f"{self.url}/validate",
            ca_bundle_b64=ca_bundle(self._ca_pem),
            failure_policy=self.failure_policy,
            timeout_seconds=self.timeout_seconds,
            namespace_selector=self.namespace_selector,
            rules=self.rules,
            match_conditions=self.match_conditions,
        )

    def register(self) -> None:
        self._registered = True  # before apply: a half-done apply is still cleaned up
        self.cp.apply(self.vwc())

    def patch(self, **fields: Any) -> None:
        """Change fields of the (only) webhook in the VWC, e.g. ``failurePolicy="Ignore"``."""
        ops = [{"op": "replace", "path": f"/webhooks/0/{k}", "value": v} for k, v in fields.items()]
        self.cp.kubectl(
            "patch", "validatingwebhookconfiguration", self.vwc_name, "--type=json", f"-p={json.dumps(ops)}"
        )
        if "failurePolicy" in fields:
            self.failure_policy = fields["failurePolicy"]
        if "timeoutSeconds" in fields:
            self.timeout_seconds = fields["timeoutSeconds"]

    def probe(self) -> subprocess.CompletedProcess[str]:
        """``kubectl apply --dry-run=server`` of the probe AIPerfJob in ``probe_namespace``."""
        job = json.loads(json.dumps(PROBE_JOB))
        job["metadata"]["namespace"] = self.probe_namespace
        return self.cp.apply(job, "--dry-run=server", check=False)

    def wait_called(self, timeout: float = 60.0) -> None:
        """Probe until the webhook's request counter moves: the apiserver now calls us."""
        before = self.requests_total()

        def called() -> bool:
            self.probe()
            return self.requests_total() > before

        wait_until(f"the apiserver to call webhook {self.name}", called, timeout=timeout, every=0.2)

    def wait_not_called(self, timeout: float = 60.0) -> None:
        """Probe until an apply no longer reaches the webhook (after a VWC change to another target)."""

        def quiet() -> bool:
            before = self.requests_total()
            self.probe()
            return self.requests_total() == before

        wait_until(f"the apiserver to stop calling webhook {self.name}", quiet, timeout=timeout, every=0.2)

    # ----------------------------------------------------------------- observing the webhook

    def _ssl(self) -> ssl.SSLContext:
        if self._ctx is None:
            assert self.ca_file is not None
            self._ctx = ssl.create_default_context(cafile=str(self.ca_file))
        return self._ctx

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        """GET ``path`` from the webhook over TLS (verifying its certificate): (status, body)."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=timeout, context=self._ssl()) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        status, body = self.get("/metrics")
        if status != 200:
            raise WebhookError(f"/metrics answered {status}: {body[:200]}")
        return parse_metrics(body)

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples called ``name`` whose labels include ``labels``."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.metrics().items() if n == name and want <= ls)

    def requests_total(self, **labels: str) -> float:
        """AdmissionReviews answered so far (``preflight_webhook_requests_total``)."""
        return self.metric("preflight_webhook_requests_total", **labels)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines) if self.log_path else "(no log)"


@contextlib.contextmanager
def running_webhook(cp: ControlPlane, **kw: Any) -> Iterator[RunningWebhook]:
    """``with running_webhook(cp, config={"mode": "warn"}) as hook: ...``"""
    with RunningWebhook(cp, **kw) as hook:
        yield hook


def warnings_of(stderr: str) -> list[str]:
    """The `Warning: …` lines kubectl printed, without the prefix, in order."""
    return [line.removeprefix("Warning: ") for line in stderr.splitlines() if line.startswith("Warning: ")]


_CONTINUATION = re.compile(r"^(?:pre-existing: )?\[[^\]]+\] … ")


def findings_of(stderr: str) -> list[str]:
    """kubectl's warnings with each finding's continuation lines (`[Check] … rest`) joined back."""
    out: list[str] = []
    for w in warnings_of(stderr):
        m = _CONTINUATION.match(w)
        if m and out:
            out[-1] = f"{out[-1]} {w[m.end() :]}"
        else:
            out.append(w)
    return out


_PLURALS = {
    "AIPerfJob": "aiperfjobs.aiperf.nvidia.com",
    "AIPerfSweep": "aiperfsweeps.aiperf.nvidia.com",
    "TrainJob": "trainjobs.trainer.kubeflow.org",
}


def stored(cp: ControlPlane, obj: dict[str, Any]) -> bool:
    """Whether the apiserver holds `obj` (an AIPerfJob or TrainJob) now."""
    meta = obj["metadata"]
    proc = cp.kubectl("get", _PLURALS[obj["kind"]], meta["name"], "-n", meta["namespace"], "-o", "name", check=False)
    if proc.returncode != 0:
        assert "NotFound" in proc.stderr, proc.stderr
    return proc.returncode == 0
