"""Kyverno's admission controller on the real node, out of cluster, as its own flags allow.

Kyverno (github.com/kyverno/kyverno, ``KYVERNO_VERSION`` in e2e/versions.env) is built by
``e2e/build.sh kyverno`` from its Go module (``cmd/kyverno``, the admission controller) into
``~/.cache/preflight-webhook/kyverno-<version>/`` with its CRDs (``config/crds``). :class:`Kyverno`
runs it the way its ``serverIP`` flag is for ("IP address where Kyverno controller runs. Only
required if out-of-cluster", ``cmd/kyverno/main.go``):

* the CRDs from the module, applied server-side (they are too large for a client-side apply's
  annotation), each Established first;
* the namespace ``kyverno`` and the ConfigMap ``kyverno`` as the chart renders it by default
  (``charts/kyverno/templates/config/configmap.yaml`` from ``values.yaml``'s ``config``: the
  resource filters that do not name the chart's own objects, ``excludeGroups: system:nodes``, the
  webhooks' namespaceSelector without kube-system and the kyverno namespace,
  ``excludeKyvernoNamespace``);
* the process with the chart's admission-controller arguments
  (``charts/kyverno/templates/admission-controller/deployment.yaml``: ``--caSecretName``,
  ``--tlsSecretName`` named after the Service, ``--servicePort``, ``--webhookServerPort``) plus
  ``--serverIP=127.0.0.1:<port>`` and ``--kubeconfig``. With ``serverIP`` set Kyverno
  (``pkg/utils/runtime/utils.go``: ``IsDebug``) needs no Deployment of its own; its certificate
  renewer (``pkg/tls/renewer.go``, ``keypair.go``) writes its self-signed CA and serving pair
  into the two Secrets with ``127.0.0.1`` as an IP SAN, and its webhook controller
  (``pkg/controllers/webhook``, ``newClientConfig``) registers every webhook configuration
  with ``url: https://127.0.0.1:<port>/...`` and that CA: the ``kyverno-resource-validating-webhook-cfg``
  gets one webhook per failure policy, with the rules of the policies' kinds, as in a user's
  cluster (a ClusterPolicy's ``failurePolicy`` defaults to ``Fail``; ``sideEffects: NoneOnDryRun``);
* start-up ends only once Kyverno's own webhook **answers** (:meth:`Kyverno._answers`), not once
  its configurations exist: the webhook controller registers them as soon as the CA Secret is
  there, while the server's ``GetCertificate`` (``pkg/webhooks/server.go``) reads the serving pair
  from its Secret at each handshake ("TLS handshake error ... secret ... not found" until the
  renewer wrote it), so a ClusterPolicy applied in between is refused by the apiserver (the policy
  webhooks' ``failurePolicy: Fail``). The condition, polled with a deadline: the CA Secret holds a
  certificate (``pkg/tls/reader.go`` ``ReadRootCASecret``: ``tls.crt``), the policy webhook
  configurations carry that CA, ``GET /health/readiness`` over TLS verified with it answers 200
  (``runtime.IsReady``: the certificates validate), and a server-side dry run of a ClusterPolicy
  passes through both policy webhooks (``kyverno-policy-mutating-webhook-cfg`` and
  ``kyverno-policy-validating-webhook-cfg``, ``failurePolicy: Fail``, ``sideEffects:
  NoneOnDryRun``: a dry run is sent to them, and allowed only if they answered);
* :meth:`Kyverno.wait_policies`: each ClusterPolicy ``Ready`` (the webhook controller sets it
  once the policy is in the registered webhooks, ``updatePolicyStatuses``).

Dry runs: ``pkg/webhooks/resource/handlers.go`` validates a dry-run request like any other
(``HandleValidationEnforce``); only background work and reports are skipped for it
(``validation/utils.go`` ``NeedsReports``). So a policy in Enforce refuses a dry-run object with
the message it refuses the real one with.

The harness talks to the apiserver with the admin kubeconfig (like ``RunningWebhook``); the
chart's RBAC is not what these tests judge. Use::

    with Node() as node, Kyverno(node.cp) as kyverno:
        node.cp.apply(cluster_policy)
        kyverno.wait_policies(["disallow-privileged"])
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from e2e.harness.controlplane import ControlPlane, _die_with_parent, free_ports, stop_pid
from e2e.harness.managed import Managed
from e2e.harness.node import NodeError, poll_until

BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "build.sh"
VERSIONS_FILE = Path(__file__).resolve().parents[1] / "versions.env"
NAMESPACE = "kyverno"
#: the chart's admission-controller Service name (kyverno.admission-controller.serviceName)
SERVICE = "kyverno-svc"
#: the webhook configuration Kyverno's webhook controller keeps for validate rules
#: (pkg/config/config.go ValidatingWebhookConfigurationName)
RESOURCE_VWC = "kyverno-resource-validating-webhook-cfg"
#: the webhook configurations that judge a ClusterPolicy (pkg/config/config.go), both failurePolicy Fail
POLICY_WEBHOOKS = (
    ("mutatingwebhookconfiguration", "kyverno-policy-mutating-webhook-cfg"),
    ("validatingwebhookconfiguration", "kyverno-policy-validating-webhook-cfg"),
)
#: the Secret with Kyverno's self-signed CA (--caSecretName)
CA_SECRET = f"{SERVICE}.{NAMESPACE}.svc.kyverno-tls-ca"
#: pkg/config/config.go ReadinessServicePath, served by the webhook server over TLS
READINESS_PATH = "/health/readiness"
#: the ClusterPolicy sent as a server-side dry run until Kyverno's policy webhooks judge it (stored: never)
PROBE_POLICY: dict[str, Any] = {
    "apiVersion": "kyverno.io/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "preflight-kyverno-answers"},
    "spec": {
        "background": False,
        "rules": [
            {
                "name": "answers",
                "match": {"any": [{"resources": {"kinds": ["ConfigMap"], "names": ["preflight-kyverno-answers"]}}]},
                "validate": {"failureAction": "Audit", "message": "probe", "pattern": {"metadata": {"name": "?*"}}},
            }
        ],
    },
}
#: the chart's default config.resourceFilters that do not name the chart's own objects
RESOURCE_FILTERS = [
    "[Event,*,*]",
    "[*/*,kube-system,*]",
    "[*/*,kube-public,*]",
    "[*/*,kube-node-lease,*]",
    "[Node,*,*]",
    "[Node/?*,*,*]",
    "[APIService,*,*]",
    "[APIService/?*,*,*]",
    "[TokenReview,*,*]",
    "[SubjectAccessReview,*,*]",
    "[SelfSubjectAccessReview,*,*]",
    "[Binding,*,*]",
    "[Pod/binding,*,*]",
    "[ReplicaSet,*,*]",
    "[ReplicaSet/?*,*,*]",
    "[EphemeralReport,*,*]",
    "[ClusterEphemeralReport,*,*]",
]


def kyverno_version() -> str:
    for line in VERSIONS_FILE.read_text().splitlines():
        if line.startswith("KYVERNO_VERSION="):
            return line.split("=", 1)[1].strip()
    raise NodeError(f"{VERSIONS_FILE}: no KYVERNO_VERSION")


def build() -> Path:
    """``e2e/build.sh kyverno`` (a stamp check when warm); returns the directory with bin/ and crds/."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), "kyverno"], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise NodeError(f"e2e/build.sh kyverno failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "preflight-webhook"
    out = root / f"kyverno-{kyverno_version()}"
    if not (out / "bin" / "kyverno").is_file():
        raise NodeError(f"e2e/build.sh kyverno left no {out / 'bin' / 'kyverno'}")
    return out


def config_map() -> dict[str, Any]:
    """The ConfigMap ``kyverno`` as the chart renders it with its default values (see the module docstring)."""
    webhooks = {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}
            ]
        }
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kyverno", "namespace": NAMESPACE},
        "data": {
            "enableDefaultRegistryMutation": "true",
            "defaultRegistry": "docker.io",
            "generateSuccessEvents": "false",
            "excludeGroups": "system:nodes",
            # excludeKyvernoNamespace prepends the namespace's own filter; `resourceFilters: >-` folds
            # the chart's one-a-line list into one line (Kyverno's parseKinds reads each [...])
            "resourceFilters": " ".join([f"[*/*,{NAMESPACE},*]", *RESOURCE_FILTERS]),
            "webhooks": json.dumps(webhooks),
        },
    }


class Kyverno(Managed):
    """Kyverno's admission controller against ``cp``; see the module docstring."""

    def __init__(self, cp: ControlPlane, *, timeout: float = 300.0, workdir: Path | None = None) -> None:
        self.cp = cp
        self.timeout = timeout
        self.workdir = workdir
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.timings: dict[str, float] = {}
        self._log: Any = None

    def _say(self, msg: str) -> None:
        print(f"==> kyverno: {msg}", file=sys.stderr, flush=True)

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def start(self) -> Kyverno:
        t0 = time.monotonic()
        home = build()
        self.timings["build"] = time.monotonic() - t0
        self.install_crds(home / "crds")
        self.cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, config_map()])
        self.workdir = self.workdir or Path(tempfile.mkdtemp(prefix="preflight-kyverno-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port, metrics_port = free_ports(2)
        self.log_path = self.workdir / "kyverno.log"
        self._log = open(self.log_path, "ab")
        argv = [
            str(home / "bin" / "kyverno"),
            f"--kubeconfig={self.cp.kubeconfig}",
            f"--serverIP=127.0.0.1:{self.port}",
            "--webhookServerHost=127.0.0.1",
            f"--webhookServerPort={self.port}",
            f"--caSecretName={CA_SECRET}",
            f"--tlsSecretName={SERVICE}.{NAMESPACE}.svc.kyverno-tls-pair",
            "--servicePort=443",
            # nothing else listens beyond loopback: metrics export off, but Kyverno v1.19.1 starts its
            # Prometheus server whatever --disableMetrics says (cmd/internal/metrics.go SetupMetrics, otel
            # "prometheus"), on [metricsHost]:metricsPort, all interfaces and 8000 by default: so on loopback and
            # a free port (two Kyvernos on one machine collided on 8000); no controller-runtime metrics or
            # profiling server
            "--disableMetrics=true",
            "--metricsHost=127.0.0.1",
            f"--metricsPort={metrics_port}",
            "--controllerRuntimeMetricsAddress=0",
            "--loggingFormat=text",
            "--disableLogColor=true",
        ]
        env = {
            **os.environ,
            "KYVERNO_NAMESPACE": NAMESPACE,
            "KYVERNO_SVC": SERVICE,
            "KYVERNO_DEPLOYMENT": "kyverno-admission-controller",
            "KYVERNO_POD_NAME": "kyverno-admission-controller-local",
            "KYVERNO_SERVICEACCOUNT_NAME": "kyverno-admission-controller",
            "INIT_CONFIG": "kyverno",
            "METRICS_CONFIG": "kyverno-metrics",
        }
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        t1 = time.monotonic()
        poll_until(
            f"Kyverno's {RESOURCE_VWC} registered at https://127.0.0.1:{self.port}",
            self._registered,
            self.timeout,
            context=self.log_tail,
        )
        poll_until(
            f"Kyverno's webhook answering at https://127.0.0.1:{self.port} (TLS, readiness, a dry-run ClusterPolicy)",
            self._answers,
            self.timeout,
            context=self.log_tail,
        )
        self.timings["start"] = time.monotonic() - t1
        self._say(f"admission controller up (pid {self.proc.pid}, port {self.port}) in {self.timings['start']:.0f}s")
        return self

    def install_crds(self, crds: Path) -> None:
        files = sorted(crds.glob("*.yaml"))
        if not files:
            raise NodeError(f"no CRDs in {crds}")
        docs = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]
        self.cp.apply(docs, "--server-side", "--force-conflicts", "--field-manager=preflight-kyverno", timeout=180)
        names = [d["metadata"]["name"] for d in docs if d.get("kind") == "CustomResourceDefinition"]
        self.cp.kubectl("wait", "--for=condition=Established", "--timeout=120s", *(f"crd/{n}" for n in names))

    def _alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise NodeError(f"kyverno exited with {self.proc.returncode}:\n{self.log_tail()}")

    def _registered(self) -> bool | str:
        self._alive()
        proc = self.cp.kubectl("get", "validatingwebhookconfiguration", RESOURCE_VWC, "-o", "json", check=False)
        if proc.returncode != 0:
            return proc.stderr.strip()[-200:]
        return True

    def _ca(self) -> bytes | str:
        """Kyverno's CA certificate (PEM) from its Secret, or why not yet."""
        proc = self.cp.kubectl("get", "secret", CA_SECRET, "-n", NAMESPACE, "-o", "json", check=False)
        if proc.returncode != 0:
            return proc.stderr.strip()[-200:]
        data = json.loads(proc.stdout).get("data") or {}
        pem = data.get("tls.crt") or data.get("rootCA.crt")
        return base64.b64decode(pem) if pem else f"no tls.crt in Secret {NAMESPACE}/{CA_SECRET} yet"

    def _answers(self) -> bool | str:
        """True once Kyverno's webhook answers the apiserver (see the module docstring), else why not."""
        self._alive()
        ca = self._ca()
        if isinstance(ca, str):
            return ca
        for kind, name in POLICY_WEBHOOKS:
            proc = self.cp.kubectl("get", kind, name, "-o", "json", check=False)
            if proc.returncode != 0:
                return proc.stderr.strip()[-200:]
            bundles = {
                base64.b64decode(w["clientConfig"].get("caBundle") or "") for w in json.loads(proc.stdout)["webhooks"]
            }
            if bundles != {ca}:
                return f"{name} does not carry the CA of Secret {CA_SECRET} yet"
        status = self._readiness(ca)
        if status != 200:
            return f"GET {READINESS_PATH}: {status}"
        proc = self.cp.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(PROBE_POLICY), check=False, timeout=60
        )
        if proc.returncode != 0:
            return "a dry-run ClusterPolicy: " + proc.stderr.strip()[-300:]
        return True

    def _readiness(self, ca: bytes) -> int | str:
        """The status of ``GET /health/readiness`` over TLS verified with Kyverno's CA (127.0.0.1 is an IP SAN)."""
        assert self.port is not None
        ctx = ssl.create_default_context(cadata=ca.decode())
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=5)
        try:
            conn.request("GET", READINESS_PATH)
            return conn.getresponse().status
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            return f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    def wait_policies(self, names: Iterable[str]) -> None:
        """Each ClusterPolicy ``Ready``: in the webhook configuration Kyverno registered."""
        for name in names:
            poll_until(
                f"Kyverno ClusterPolicy {name} Ready",
                lambda n=name: self._policy_ready(n),
                self.timeout,
                context=self.log_tail,
            )

    def _policy_ready(self, name: str) -> bool | str:
        self._alive()
        proc = self.cp.kubectl("get", "clusterpolicy.kyverno.io", name, "-o", "json", check=False)
        if proc.returncode != 0:
            return proc.stderr.strip()[-200:]
        for c in (json.loads(proc.stdout).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready":
                return True if c.get("status") == "True" else f"Ready={c.get('status')}: {c.get('message')}"
        return "no Ready condition yet"

    def stop(self) -> None:
        """Stop the process (by PID), then remove the webhook configurations it registered (label
        ``webhook.kyverno.io/managed-by=kyverno``, ``pkg/controllers/webhook/utils.go``): with
        nobody answering, their ``failurePolicy: Fail`` would refuse what they match."""
        if self.proc is not None and self.proc.poll() is None:
            stop_pid(self.proc.pid, proc=self.proc)
        if self.proc is not None:
            self.cp.kubectl(
                "delete", "validatingwebhookconfigurations,mutatingwebhookconfigurations",
                "-l", "webhook.kyverno.io/managed-by=kyverno", "--ignore-not-found", check=False,
            )  # fmt: skip
        if self._log is not None:
            self._log.close()
            self._log = None
