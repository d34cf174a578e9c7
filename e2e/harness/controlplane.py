"""A real, local Kubernetes control plane (etcd + kube-apiserver) for end-to-end tests.

The binaries come from ``e2e/build.sh`` (cached under ``~/.cache/preflight-webhook/``);
this module only runs them. Everything listens on 127.0.0.1, on free ports, with fresh
certificates made here, so several control planes can run side by side.

What you get, and what you do not:

* etcd and kube-apiserver with client-certificate authentication, ``Node,RBAC``
  authorization, a service-account signing key, an audit policy that records the
  request bodies of aiperfjobs/trainjobs/jobsets (so webhook ``auditAnnotations`` show
  up), and the CRDs from ``e2e/build.sh`` plus ``e2e/crds/*.yaml`` established.
* an admin kubeconfig (``O=system:masters``) and a non-admin user ``dev`` (no groups,
  so RBAC denies it everything beyond discovery until :meth:`ControlPlane.grant`).
* **no** kube-controller-manager, scheduler or kubelet. So: namespaces other than the
  apiserver's own (default, kube-system, kube-public, kube-node-lease) must be created
  explicitly; the ``default`` ServiceAccount is **not** created automatically (use
  :meth:`ControlPlane.ensure_namespace`, which creates both, before creating pods or
  dry-running them: the ServiceAccount admission plugin wants it); no token controller,
  no garbage collection, no quota controller (a ResourceQuota's ``status.hard`` stays
  empty, and the ResourceQuota admission plugin then rejects objects it counts until
  the test patches the status); pods are never scheduled or run.

Library use::

    with ControlPlane() as cp:
        cp.kubectl("get", "crds")
        cp.kubectl("get", "secrets", kubeconfig=cp.dev_kubeconfig, check=False)

Command line (used by ``make demo`` / ``make demo-down``)::

    python -m e2e.harness.controlplane up --state-dir .demo/cluster     # prints export KUBECONFIG=...
    python -m e2e.harness.controlplane down --state-dir .demo/cluster

Only the standard library, PyYAML, cryptography and the project's own certificate code (webhook/tls.py) are used.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from webhook.tls import KeyPair, generate_ca, issue_cert

E2E_DIR = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = E2E_DIR / "build.sh"
VERSIONS_FILE = E2E_DIR / "versions.env"
LOCAL_CRDS_DIR = E2E_DIR / "crds"

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
STATE_FILE = "controlplane.json"

#: Audit policy: request bodies (and so webhook auditAnnotations, which every level but
#: None carries) for the kinds the webhook judges; metadata for every other write; no
#: reads. Blocking mode (the log backend's default) makes events visible once kubectl returns.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "resources": [
                {"group": "aiperf.nvidia.com", "resources": ["aiperfjobs", "aiperfsweeps"]},
                {"group": "trainer.kubeflow.org", "resources": ["trainjobs"]},
                {"group": "jobset.x-k8s.io", "resources": ["jobsets"]},
            ],
        },
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "None", "nonResourceURLs": ["/*"]},
        {"level": "Metadata"},
    ],
}

#: the name on the client certificate the apiserver presents to admission webhooks
WEBHOOK_CLIENT_NAME = "kube-apiserver-webhook-client"

ADMISSION_PLUGINS = ",".join(
    [
        "NamespaceLifecycle",
        "LimitRanger",
        "ServiceAccount",
        "DefaultStorageClass",
        "ResourceQuota",
        "NodeRestriction",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionWebhook",
    ]
)


#: the name on the aggregation layer's client certificate (kubeadm's FrontProxyClientCertCommonName)
FRONT_PROXY_CLIENT = "front-proxy-client"


def aggregation_layer_flags(pki: Path) -> list[str]:
    """kube-apiserver's aggregation-layer flags, each as kubeadm sets it (cmd/kubeadm/app/phases/controlplane/
    manifests.go ``getAPIServerCommand``; the Kubernetes task "Configure the Aggregation Layer"): the CA
    and name that authenticate a front proxy's X-Remote-* headers, and the client certificate the
    apiserver proxies with. No ``--enable-aggregator-routing``: the apiserver reaches an APIService's
    Service by its ClusterIP through kube-proxy, the path its calls to webhooks take on the node."""
    return [
        f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-username-headers=X-Remote-User",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
    ]


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or used."""


class KubectlError(subprocess.CalledProcessError):
    """kubectl exited non-zero; ``str()`` carries its stderr, so pytest shows why."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.stdout}\nstderr: {self.stderr}"


# --------------------------------------------------------------------------- versions, build


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse e2e/versions.env (KEY=VALUE lines; # comments)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip().strip('"').strip("'")
    return out


_RULE_KEY = re.compile(r"^(\s*(?:- )?)rule: ")


def escape_cel_namespace(text: str) -> str:
    """``x.namespace`` → ``x.__namespace__`` inside every ``rule:`` of a CRD's YAML (a rule may
    go on over more deeply indented lines); descriptions and everything else stay as they are."""
    lines = text.split("\n")
    column: int | None = None  # the column of the current rule's key, while inside one
    for i, line in enumerate(lines):
        m = _RULE_KEY.match(line)
        if m:
            column = len(m.group(1))
        elif column is None or not line.strip() or len(line) - len(line.lstrip()) <= column:
            column = None
            continue
        lines[i] = re.sub(r"\.namespace\b", ".__namespace__", line)
    return "\n".join(lines)


def kubernetes_version() -> str:
    """The Kubernetes release this run uses: ``PREFLIGHT_KUBERNETES_VERSION``, else the pin in
    e2e/versions.env (same rule as build.sh), e.g. ``v1.37.2``."""
    return os.environ.get("PREFLIGHT_KUBERNETES_VERSION") or read_versions()["KUBERNETES_VERSION"]


def kubernetes_minor() -> tuple[int, int]:
    """``(1, 37)`` of :func:`kubernetes_version`."""
    major, minor = kubernetes_version().lstrip("v").split(".")[:2]
    return int(major), int(minor)


def cache_dir() -> Path:
    """The cache dir build.sh fills (same rule as build.sh)."""
    if os.environ.get("PREFLIGHT_E2E_CACHE"):
        return Path(os.environ["PREFLIGHT_E2E_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "preflight-webhook" / kubernetes_version()


def ensure_built(quiet: bool = False, what: str = "test") -> Path:
    """Run e2e/build.sh `what` (seconds when warm; builds on a cold cache) and return the cache dir.

    `what="test"` (the default) builds what `make test` runs, never Kyverno nor the Prometheus server
    (`make conformance` builds `all` before its tests start; docs/development.md, "Test tiers");
    `what="control-plane"` builds only etcd, kube-apiserver, kubectl and the CRDs (`make demo`).

    Raises ControlPlaneError when the build fails: a missing control plane is an error,
    never a reason to skip.
    """
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), what],
        stdout=subprocess.PIPE if quiet else sys.stderr,
        stderr=subprocess.STDOUT if quiet else sys.stderr,
        text=True,
    )
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"e2e/build.sh failed (exit {proc.returncode})" + (f":\n{proc.stdout}" if quiet else "")
        )
    return cache_dir()


def cached_binary(name: str) -> Path:
    """bin/``name`` of the cache, built first by ``e2e/build.sh <name>`` when it is not there (a
    warm cache: a stat). Raises ControlPlaneError with the build's output when it cannot be made."""
    binary = cache_dir() / "bin" / name
    if not binary.is_file():
        ensure_built(quiet=True, what=name)
    if not binary.is_file():
        raise ControlPlaneError(f"{binary} is missing after `bash e2e/build.sh {name}` succeeded: see its output")
    return binary


# --------------------------------------------------------------------------- certificates


def _sa_keypair() -> tuple[bytes, bytes]:
    """The service-account token signing key pair (private PKCS8 PEM, public SPKI PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


# --------------------------------------------------------------------------- helpers


def free_ports(count: int) -> list[int]:
    """Ports the kernel says are free on 127.0.0.1 (held open together, so distinct)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _write(path: Path, data: bytes | str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _pid_runs(pid: int, exe: str) -> bool:
    """True if ``pid`` is alive and its command line starts with ``exe`` (guards PID reuse)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return False
    return argv0 == exe and _pid_alive(pid)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGKILL us when the parent goes away.

    SIGKILL, not SIGTERM: kube-apiserver whose etcd went away at the same time hangs in
    its graceful shutdown. (A temp state dir is then left behind in /tmp.)
    """
    with contextlib.suppress(Exception):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def stop_pid(pid: int, timeout: float = 15.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM, wait up to ``timeout`` (polling), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc is not None:
                if proc.poll() is not None:
                    return
            elif not _pid_alive(pid):
                return
            time.sleep(0.05)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)


# --------------------------------------------------------------------------- the control plane


class ControlPlane:
    """etcd + kube-apiserver on 127.0.0.1 with fresh certs, RBAC, audit log and CRDs.

    ``state_dir``: where certs, kubeconfigs, logs and etcd data go. When None (tests) a
    temp dir is made and removed by :meth:`stop`; when given (the CLI) it is kept until
    ``down``. ``crds``: extra CRD files/dirs to install besides the cached upstream CRDs
    and ``e2e/crds/*.yaml`` (``install_crds=False``: none at all, e.g. to test a cluster
    that lacks an API). ``build``: run e2e/build.sh first (seconds when warm).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        build: bool = True,
        crds: Iterable[str | os.PathLike[str]] = (),
        install_crds: bool = True,
        start_timeout: float = 180.0,
        extra_apiserver_args: Sequence[str] = (),
        verbose: bool = True,
        bind_address: str = "127.0.0.1",
        service_cidr: str = SERVICE_CLUSTER_IP_RANGE,
        kubelet_client: bool = False,
        aggregation_layer: bool = False,
        die_with_parent: bool | None = None,
    ) -> None:
        self._given_state_dir = Path(state_dir).resolve() if state_dir is not None else None
        self._build = build
        self._extra_crds = [Path(c) for c in crds]
        self._install_crds = install_crds
        self.start_timeout = start_timeout
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.verbose = verbose
        # e2e/harness/node.py: the apiserver listens on (and advertises) its bridge address, so pods
        # reach it through the `kubernetes` Service; that address is local to this machine.
        self.bind_address = bind_address
        self.service_cidr = service_cidr
        # e2e/harness/node.py: a client certificate for the apiserver's calls to kubelets (logs, exec)
        self.kubelet_client = kubelet_client
        # e2e/harness/node.py: the aggregation layer's front-proxy certificates and flags, as kubeadm
        # configures them (:data:`FRONT_PROXY_CLIENT`), so an extension apiserver a pod serves
        # (Kueue's visibility API) is proxied to with the caller's identity
        self.aggregation_layer = aggregation_layer
        # None: only a temp control plane dies with its parent; e2e/harness/node.py's temp node asks for it explicitly
        self._die_with_parent = die_with_parent
        #: e2e/harness/node.py sets it: a kube-controller-manager runs beside this apiserver, so its
        #: ServiceAccount controller makes every namespace's `default` ServiceAccount (never us)
        self.controller_manager = False

        self.state_dir: Path | None = None
        self.bin_dir: Path | None = None
        self.crds_dir: Path | None = None
        self.kubeconfig: Path | None = None
        self.dev_kubeconfig: Path | None = None
        self.audit_log_path: Path | None = None
        self.audit_policy_path: Path | None = None
        self.server_url: str | None = None
        self.etcd_url: str | None = None
        self.ca_pem: bytes | None = None
        self.ca_path: Path | None = None
        self.log_dir: Path | None = None
        #: the apiserver presents a client certificate (CN=WEBHOOK_CLIENT_NAME, signed by the CA
        #: in webhook_client_ca_path) to a webhook at https://127.0.0.1:<webhook_client_port>:
        #: its AdmissionConfiguration's kubeConfigFile names that host:port (apiserver
        #: pkg/util/webhook/authentication.go matches host:port exactly, so the port is reserved here)
        self.webhook_client_port: int | None = None
        self.webhook_client_ca_path: Path | None = None
        self.admission_config_path: Path | None = None
        self._ca: KeyPair | None = None
        self._procs: dict[str, subprocess.Popen] = {}
        self._logfiles: list[Any] = []
        self._ssl_ctx: ssl.SSLContext | None = None
        self._wrote_state = False
        self._started = False

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self._procs.items()}

    @property
    def kubectl_path(self) -> Path:
        assert self.bin_dir is not None, "start() first"
        return self.bin_dir / "kubectl"

    @property
    def helm_path(self) -> Path:
        assert self.bin_dir is not None, "start() first"
        return self.bin_dir / "helm"

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The cached helm against this control plane, with its caches in the state dir; `check`: assert it succeeded."""
        env = self.env()
        home = str(self.state_dir / "helm")  # type: ignore[operator]
        env.update(HELM_CACHE_HOME=home, HELM_CONFIG_HOME=home, HELM_DATA_HOME=home)
        proc = subprocess.run([str(self.helm_path), *args], capture_output=True, text=True, env=env, timeout=180)
        if check:
            assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        """os.environ plus KUBECONFIG (admin unless given) and the cached bin dir on PATH."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(kubeconfig or self.kubeconfig)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["KUBECACHEDIR"] = str(self.state_dir / "kubectl-cache")  # type: ignore[operator]
        return env

    def start(self) -> ControlPlane:
        if self._started:
            return self
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self._started = True
        if self._given_state_dir is None:
            atexit.register(self.stop)  # a safety net for callers that forget stop()
        return self

    def _start(self) -> None:
        cache = ensure_built() if self._build else cache_dir()
        self.bin_dir = cache / "bin"
        self.crds_dir = cache / "crds"
        for tool in ("etcd", "kube-apiserver", "kubectl"):
            if not (self.bin_dir / tool).is_file():
                raise ControlPlaneError(f"{self.bin_dir / tool} missing: run e2e/build.sh")

        if self._given_state_dir is not None:
            self.state_dir = self._given_state_dir
            self.state_dir.mkdir(parents=True, exist_ok=True)
            if (self.state_dir / STATE_FILE).exists():
                raise ControlPlaneError(
                    f"{self.state_dir} already holds a control plane; run "
                    f"'python -m e2e.harness.controlplane down --state-dir {self.state_dir}' first"
                )
        else:
            self.state_dir = Path(tempfile.mkdtemp(prefix="preflight-e2e-"))
        self.log_dir = self.state_dir / "logs"
        self.log_dir.mkdir(exist_ok=True)

        t0 = time.monotonic()
        self._write_pki()
        self._start_etcd()
        self._say(f"etcd ready at {self.etcd_url} ({time.monotonic() - t0:.1f}s)")
        self._start_apiserver()
        self._say(f"kube-apiserver ready at {self.server_url} ({time.monotonic() - t0:.1f}s)")
        self._write_state()
        if self._install_crds:
            self.install_crds()
            self._say(f"CRDs established and discoverable ({time.monotonic() - t0:.1f}s)")

    def _say(self, msg: str) -> None:
        if self.verbose:
            print(f"==> {msg}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        """Stop the processes (apiserver first) and remove a temp state dir. Idempotent."""
        atexit.unregister(self.stop)
        for name in ("kube-apiserver", "etcd"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                stop_pid(proc.pid, proc=proc)
        for proc in self._procs.values():
            stop_pid(proc.pid, proc=proc)
        self._procs.clear()
        for f in self._logfiles:
            with contextlib.suppress(OSError):
                f.close()
        self._logfiles = []
        if self.state_dir is not None:
            if self._given_state_dir is None:
                shutil.rmtree(self.state_dir, ignore_errors=True)
            elif self._wrote_state:
                with contextlib.suppress(FileNotFoundError):
                    (self.state_dir / STATE_FILE).unlink()
        self._wrote_state = False
        self._started = False

    # ----------------------------------------------------------------- pki + config files

    def _write_pki(self) -> None:
        assert self.state_dir is not None
        pki = self.state_dir / "pki"
        pki.mkdir(exist_ok=True)
        # the same certificate code the webhook ships (webhook/tls.py), with client certs for users
        self._ca = ca = generate_ca("preflight-e2e-ca", days=30)
        self.ca_pem = ca.cert_pem
        self.ca_path = _write(pki / "ca.crt", ca.cert_pem, 0o644)
        svc_ip = str(next(ipaddress.ip_network(self.service_cidr).hosts()))
        apiserver = issue_cert(
            ca,
            "kube-apiserver",
            dns_names=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ip_addresses=sorted({"127.0.0.1", self.bind_address, svc_ip}),
            days=30,
        )
        _write(pki / "apiserver.crt", apiserver.cert_pem, 0o644)
        _write(pki / "apiserver.key", apiserver.key_pem)
        sa_private, sa_public = _sa_keypair()
        _write(pki / "sa.key", sa_private)
        _write(pki / "sa.pub", sa_public, 0o644)
        if self.kubelet_client:
            kc = issue_cert(
                ca,
                "kube-apiserver-kubelet-client",
                organizations=["system:masters"],
                server=False,
                client=True,
                days=30,
            )
            _write(pki / "kubelet-client.crt", kc.cert_pem, 0o644)
            _write(pki / "kubelet-client.key", kc.key_pem)
        if self.aggregation_layer:
            self._write_front_proxy_pki(pki)
        self.audit_policy_path = _write(
            self.state_dir / "audit-policy.yaml", yaml.safe_dump(AUDIT_POLICY, sort_keys=False), 0o644
        )
        self.audit_log_path = self.state_dir / "audit" / "audit.log"
        self.audit_log_path.parent.mkdir(exist_ok=True)
        self._write_admission_config(pki)
        with contextlib.suppress(FileNotFoundError):
            self.audit_log_path.unlink()  # a reused state dir: no events from an earlier cluster

    def _write_front_proxy_pki(self, pki: Path) -> None:
        """The aggregation layer's certificates as kubeadm makes them (cmd/kubeadm/app/phases/certs/certlist.go
        ``KubeadmCertFrontProxyCA``, ``KubeadmCertFrontProxyClient``): a CA of its own, ``front-proxy-ca``,
        which the apiserver and every extension apiserver trust for requests carrying X-Remote-* headers,
        and the client certificate ``front-proxy-client`` the apiserver presents when it proxies a request
        to an APIService. A CA apart from the cluster's: no user's client certificate may assert headers."""
        ca = generate_ca("front-proxy-ca", days=30)
        client = issue_cert(ca, FRONT_PROXY_CLIENT, server=False, client=True, days=30)
        _write(pki / "front-proxy-ca.crt", ca.cert_pem, 0o644)
        _write(pki / "front-proxy-client.crt", client.cert_pem, 0o644)
        _write(pki / "front-proxy-client.key", client.key_pem)

    def _write_admission_config(self, pki: Path) -> None:
        """An AdmissionConfiguration whose kubeConfigFile gives the apiserver a client certificate
        for the webhook host 127.0.0.1:<webhook_client_port> (docs/security.md, "Turning on caller authentication")."""
        assert self.state_dir is not None
        client_ca = generate_ca("preflight-e2e-webhook-client-ca", days=30)
        client = issue_cert(client_ca, WEBHOOK_CLIENT_NAME, server=False, client=True, days=30)
        self.webhook_client_ca_path = _write(pki / "webhook-client-ca.crt", client_ca.cert_pem, 0o644)
        crt = _write(pki / "webhook-client.crt", client.cert_pem, 0o644)
        key = _write(pki / "webhook-client.key", client.key_pem)
        if self.webhook_client_port is None:  # kept across restarts of a reused state dir's cluster
            (self.webhook_client_port,) = free_ports(1)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "users": [
                {
                    "name": f"127.0.0.1:{self.webhook_client_port}",
                    "user": {"client-certificate": str(crt), "client-key": str(key)},
                }
            ],
        }
        kc = _write(self.state_dir / "admission-webhook.kubeconfig", yaml.safe_dump(kubeconfig, sort_keys=False))
        webhook_cfg = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(kc),
        }
        admission = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AdmissionConfiguration",
            "plugins": [
                {"name": "ValidatingAdmissionWebhook", "configuration": webhook_cfg},
                {"name": "MutatingAdmissionWebhook", "configuration": webhook_cfg},
            ],
        }
        self.admission_config_path = _write(
            self.state_dir / "admission-config.yaml", yaml.safe_dump(admission, sort_keys=False), 0o644
        )

    def write_user_kubeconfig(self, user: str, groups: Sequence[str] = (), path: Path | None = None) -> Path:
        """Issue a client cert for ``user`` (``groups`` become O=) and write a kubeconfig for it.

        Call after start() (the server URL is baked in). Useful for giving the webhook an
        identity of its own with exactly the RBAC it asks for.
        """
        assert self._ca is not None and self.state_dir is not None and self.server_url, "start() first"
        pair = issue_cert(self._ca, user, organizations=groups, server=False, client=True, days=30)
        cert, key = pair.cert_pem, pair.key_pem
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "preflight-e2e",
                    "cluster": {"server": self.server_url, "certificate-authority-data": b64(self._ca.cert_pem)},
                }
            ],
            "users": [{"name": user, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}],
            "contexts": [{"name": f"{user}@preflight-e2e", "context": {"cluster": "preflight-e2e", "user": user}}],
            "current-context": f"{user}@preflight-e2e",
            "preferences": {},
        }
        path = path or self.state_dir / f"{user}.kubeconfig"
        return _write(path, yaml.safe_dump(config, sort_keys=False))

    # ----------------------------------------------------------------- processes

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        assert self.log_dir is not None
        log = open(self.log_dir / f"{name}.log", "ab")
        self._logfiles.append(log)
        # A session of its own: Ctrl-C in the terminal reaches us, not the servers, so the
        # teardown (by PID) stays in charge; and `up` can leave them running after it exits.
        # A temporary control plane also dies with its parent, even one killed by SIGKILL.
        wanted = self._given_state_dir is None if self._die_with_parent is None else self._die_with_parent
        die_with_parent = wanted and threading.current_thread() is threading.main_thread()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
        self._procs[name] = proc
        return proc

    def _wait_ready(self, name: str, url: str, ctx: ssl.SSLContext | None, ok: Any) -> None:
        """Poll ``url`` until ``ok(status, body)`` or the process dies or the deadline passes."""
        proc = self._procs[name]
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with {proc.returncode} before it was ready; log tail:\n"
                    f"{_tail(self.log_dir / f'{name}.log')}"  # type: ignore[operator]
                )
            try:
                with urllib.request.urlopen(url, timeout=5, context=ctx) as resp:
                    body = resp.read().decode(errors="replace")
                    if ok(resp.status, body):
                        return
                    last = f"HTTP {resp.status}: {body[:300]}"
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}: {e.read().decode(errors='replace')[:300]}"
            except (urllib.error.URLError, OSError) as e:
                last = str(e)
            time.sleep(0.1)
        raise ControlPlaneError(
            f"{name} not ready at {url} within {self.start_timeout:.0f}s (last: {last}); log tail:\n"
            f"{_tail(self.log_dir / f'{name}.log')}"  # type: ignore[operator]
        )

    def _start_etcd(self, attempts: int = 3) -> None:
        assert self.state_dir is not None and self.bin_dir is not None
        for attempt in range(attempts):
            client, peer = free_ports(2)
            data = self.state_dir / "etcd-data"
            shutil.rmtree(data, ignore_errors=True)
            self.etcd_url = f"http://127.0.0.1:{client}"
            peer_url = f"http://127.0.0.1:{peer}"
            self._spawn(
                "etcd",
                [
                    str(self.bin_dir / "etcd"),
                    "--name=e2e",
                    f"--data-dir={data}",
                    f"--listen-client-urls={self.etcd_url}",
                    f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=e2e={peer_url}",
                    "--initial-cluster-state=new",
                    "--unsafe-no-fsync",  # a throwaway test store: speed over durability
                    "--log-level=warn",
                ],
            )
            try:
                self._wait_ready("etcd", f"{self.etcd_url}/health", None, lambda s, b: '"health":"true"' in b)
                return
            except ControlPlaneError as e:
                proc = self._procs.pop("etcd")
                stop_pid(proc.pid, proc=proc)
                if attempt + 1 < attempts and "address already in use" in str(e):
                    continue
                raise

    def _start_apiserver(self, attempts: int = 3) -> None:
        assert self.state_dir is not None and self.bin_dir is not None and self.ca_path is not None
        pki = self.state_dir / "pki"
        for attempt in range(attempts):
            (port,) = free_ports(1)
            self.server_url = f"https://{self.bind_address}:{port}"
            argv = [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={self.bind_address}",
                f"--advertise-address={self.bind_address}",
                f"--secure-port={port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={self.ca_path}",
                "--authorization-mode=Node,RBAC",
                "--anonymous-auth=false",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={self.service_cidr}",
                f"--enable-admission-plugins={ADMISSION_PLUGINS}",
                f"--admission-control-config-file={self.admission_config_path}",
                f"--audit-policy-file={self.audit_policy_path}",
                f"--audit-log-path={self.audit_log_path}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--allow-privileged=true",
                "--profiling=false",
                # A loopback address cannot go into the `kubernetes` Service's Endpoints (API
                # validation refuses 127.0.0.0/8), so the default lease reconciler could never
                # publish it; from 1.37 the apiserver refuses to start with one ("cannot use public
                # IP 127.0.0.1 with endpoint reconciler", k8s.io/kubernetes pkg/controlplane/instance.go
                # ValidateIP). Nothing here reaches the apiserver through that Service (no pods
                # run): no reconciler. The real node advertises its bridge address and keeps it.
                *(["--endpoint-reconciler-type=none"] if ipaddress.ip_address(self.bind_address).is_loopback else []),
                "--v=1",
                *(
                    [
                        f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
                        f"--kubelet-client-key={pki / 'kubelet-client.key'}",
                        "--kubelet-preferred-address-types=InternalIP",
                    ]
                    if self.kubelet_client
                    else []
                ),
                *(aggregation_layer_flags(pki) if self.aggregation_layer else []),
                *self.extra_apiserver_args,
            ]
            self._spawn("kube-apiserver", argv)
            # An admin kubeconfig first: /readyz needs an authenticated caller (anonymous is off).
            self.kubeconfig = self.write_user_kubeconfig(
                "admin", ["system:masters"], self.state_dir / "admin.kubeconfig"
            )
            self.dev_kubeconfig = self.write_user_kubeconfig("dev", (), self.state_dir / "dev.kubeconfig")
            self._ssl_ctx = None
            try:
                self._wait_ready(
                    "kube-apiserver", f"{self.server_url}/readyz", self._admin_ssl(), lambda s, b: s == 200
                )
                return
            except ControlPlaneError as e:
                proc = self._procs.pop("kube-apiserver")
                stop_pid(proc.pid, proc=proc)
                if attempt + 1 < attempts and "address already in use" in str(e):
                    continue
                raise

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver by its PID and start it again with the same argv (port, certs).

        etcd keeps running, so the cluster's state survives: clients see the apiserver go
        away (refused connections, cut watches) and come back at the same URL.
        """
        old = self._procs.pop("kube-apiserver", None)
        if old is None:
            raise ControlPlaneError("kube-apiserver is not running: start() first")
        argv = [str(a) for a in old.args]  # type: ignore[union-attr]
        stop_pid(old.pid, proc=old)
        self._spawn("kube-apiserver", argv)
        self._wait_ready("kube-apiserver", f"{self.server_url}/readyz", self._admin_ssl(), lambda s, b: s == 200)
        if self._wrote_state:
            self._write_state()  # `down` must find the new PID

    def _admin_cert_files(self) -> tuple[Path, Path]:
        """The admin client cert/key as files (for urllib), taken from the admin kubeconfig."""
        assert self.kubeconfig is not None and self.state_dir is not None
        user = yaml.safe_load(self.kubeconfig.read_text())["users"][0]["user"]
        pki = self.state_dir / "pki"
        cert = _write(pki / "admin.crt", base64.b64decode(user["client-certificate-data"]), 0o644)
        key = _write(pki / "admin.key", base64.b64decode(user["client-key-data"]))
        return cert, key

    def _write_state(self) -> None:
        assert self.state_dir is not None
        state = {
            "pids": {name: {"pid": p.pid, "exe": p.args[0]} for name, p in self._procs.items()},  # type: ignore[index]
            "server_url": self.server_url,
            "etcd_url": self.etcd_url,
            "kubeconfig": str(self.kubeconfig),
            "dev_kubeconfig": str(self.dev_kubeconfig),
            "audit_log_path": str(self.audit_log_path),
            "bin_dir": str(self.bin_dir),
        }
        _write(self.state_dir / STATE_FILE, json.dumps(state, indent=2) + "\n", 0o644)
        self._wrote_state = True

    # ----------------------------------------------------------------- kubectl and friends

    def kubectl(
        self,
        *args: str,
        kubeconfig: str | os.PathLike[str] | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl (admin unless ``kubeconfig``); text output captured.

        With ``check`` a non-zero exit raises :class:`KubectlError` carrying stderr.
        """
        argv = [
            str(self.kubectl_path),
            f"--kubeconfig={kubeconfig or self.kubeconfig}",
            f"--cache-dir={self.state_dir / 'kubectl-cache'}",  # not ~/.kube/cache: ports change every run
            *args,
        ]
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc

    def apply(self, objects: dict | Sequence[dict] | str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        """``kubectl apply -f -`` of a dict, a list of dicts, or YAML text."""
        if isinstance(objects, dict):
            objects = [objects]
        text = objects if isinstance(objects, str) else yaml.safe_dump_all(list(objects), sort_keys=False)
        return self.kubectl("apply", "-f", "-", *args, input=text, **kw)

    def server_minor(self) -> tuple[int, int]:
        """``(1, 37)`` from the running apiserver's ``/version``."""
        status, body = self.get_raw("/version")
        if status != 200:
            raise ControlPlaneError(f"GET /version: HTTP {status}: {body[:200]}")
        info = json.loads(body)
        return int(info["major"]), int("".join(ch for ch in info["minor"] if ch.isdigit()))

    def _crds_for_server(self, files: list[Path]) -> list[Path]:
        """The CRD files as this apiserver accepts them (the one version-dependent rewrite).

        JobSet v0.12.0 and Trainer v2.3.0 validate ``volumeClaimPolicies`` with the CEL rule
        ``self.templates.all(t, !has(t.metadata.namespace) || …)``. ``namespace`` is a CEL reserved
        word; the apiserver reads it as a field name only in CEL environments of compatibility
        version 1.31 or later (k8s.io/apiserver pkg/cel/environment/environment.go,
        SetRecognizeKeywordAsFieldName), i.e. from kube-apiserver 1.32, whose default
        compatibility version is the previous minor. Older apiservers refuse the CRDs ("compilation
        failed: undefined field 'namespace'"; kubeflow/trainer issue 3154). For them the harness
        writes the escaped identifier ``__namespace__`` (valid on every version, the same rule,
        docs "CEL escaping") into copies under the state dir; 1.32+ get the files unchanged.
        """
        if self.server_minor() >= (1, 32) or self.state_dir is None:
            return files
        out_dir = self.state_dir / "crds-cel-escaped"
        out_dir.mkdir(exist_ok=True)
        out: list[Path] = []
        for f in files:
            text = f.read_text()
            fixed = escape_cel_namespace(text)
            if fixed == text:
                out.append(f)
                continue
            dest = out_dir / f.name
            dest.write_text(fixed)
            out.append(dest)
        return out

    def install_crds(self, timeout: float = 120.0) -> None:
        """Server-side apply the cached upstream CRDs, e2e/crds/*.yaml and extras; wait Established."""
        assert self.crds_dir is not None
        sources = [self.crds_dir, LOCAL_CRDS_DIR, *self._extra_crds]
        files: list[Path] = []
        for src in sources:
            files += sorted(src.glob("*.yaml")) if src.is_dir() else [src]
        if not files:
            raise ControlPlaneError(f"no CRDs found in {sources}")
        files = self._crds_for_server(files)
        args: list[str] = ["apply", "--server-side", "--force-conflicts", "--field-manager=preflight-e2e"]
        for f in files:
            args += ["-f", str(f)]
        # `-o name` gives the CRD names without parsing megabytes of YAML in Python.
        out = self.kubectl(*args, "-o", "name", timeout=timeout).stdout
        prefix = "customresourcedefinition.apiextensions.k8s.io/"
        names = [line[len(prefix) :] for line in out.split() if line.startswith(prefix)]
        if not names:
            raise ControlPlaneError(f"kubectl apply of {len(files)} CRD files named no CRD:\n{out}")
        self.wait_for_crds(names, timeout=timeout)

    def wait_for_crds(self, names: Iterable[str] | None = None, timeout: float = 120.0) -> None:
        """Poll until the CRDs (all when ``names`` is None) are Established and in discovery.

        (``kubectl wait --for=condition=Established crd --all`` errors out on a CRD whose
        status has no conditions yet, hence a poll of our own.)
        """
        deadline = time.monotonic() + timeout
        if names is None:
            names = [
                c["metadata"]["name"] for c in json.loads(self.kubectl("get", "crd", "-o", "json").stdout)["items"]
            ]
        pending = set(names)
        crds: list[dict[str, Any]] = []
        while pending and time.monotonic() < deadline:
            for name in sorted(pending):
                status, body = self.get_raw(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                if status != 200:
                    continue
                crd = json.loads(body)
                conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
                if conds.get("Established") == "True":
                    pending.discard(name)
                    crds.append(crd)
            if pending:
                time.sleep(0.1)
        if pending:
            raise ControlPlaneError(f"CRDs not Established after {timeout:.0f}s: {sorted(pending)}")
        self._wait_for_discovery(crds, max(deadline - time.monotonic(), 1.0))

    def _admin_ssl(self) -> ssl.SSLContext:
        """An SSL context trusting our CA and presenting the admin client cert."""
        if self._ssl_ctx is None:
            ctx = ssl.create_default_context(cadata=self.ca_pem.decode())  # type: ignore[union-attr]
            ctx.load_cert_chain(*self._admin_cert_files())
            self._ssl_ctx = ctx
        return self._ssl_ctx

    def get_raw(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        """GET ``path`` from the apiserver as admin, without kubectl: (status, body)."""
        try:
            with urllib.request.urlopen(f"{self.server_url}{path}", timeout=timeout, context=self._admin_ssl()) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def _wait_for_discovery(self, crds: list[dict[str, Any]], timeout: float) -> None:
        """Poll until every served version of every CRD lists its resource in discovery."""
        missing = {
            (f"/apis/{c['spec']['group']}/{v['name']}", c["spec"]["names"]["plural"])
            for c in crds
            for v in c["spec"]["versions"]
            if v.get("served")
        }
        deadline = time.monotonic() + timeout
        while missing and time.monotonic() < deadline:
            for path, plural in sorted(missing):
                status, body = self.get_raw(path)
                if status == 200 and any(r.get("name") == plural for r in json.loads(body).get("resources", [])):
                    missing.discard((path, plural))
            if missing:
                time.sleep(0.1)
        if missing:
            raise ControlPlaneError(f"CRDs not in discovery after {timeout:.0f}s: {sorted(missing)[:10]}")

    def ensure_namespace(self, name: str) -> None:
        """Create a namespace; once this returns its ``default`` ServiceAccount exists."""
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.default_service_accounts([name])

    def default_service_accounts(self, namespaces: Iterable[str], timeout: float = 60.0) -> None:
        """Make sure each namespace's ``default`` ServiceAccount exists before a job is applied there.

        In a cluster the controller-manager's ServiceAccount controller creates it
        (k8s.io/kubernetes pkg/controller/serviceaccount/serviceaccounts_controller.go) a moment
        after the namespace; the ServiceAccount admission plugin refuses pods (dry-run ones too)
        without it. With a controller-manager (``controller_manager``, the real node) this waits
        for that controller, so nothing races it (declaring the ServiceAccount ourselves would:
        kubectl's get-then-create then meets AlreadyExists); without one (this bare control
        plane) it creates them, as that controller would.
        """
        names = list(dict.fromkeys(namespaces))
        if not self.controller_manager:
            if names:
                self.apply(
                    [
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": n}}
                        for n in names
                    ]
                )
            return
        deadline = time.monotonic() + timeout
        missing = names
        while True:
            missing = [n for n in missing if self.get_raw(f"/api/v1/namespaces/{n}/serviceaccounts/default")[0] != 200]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"the controller-manager made no default ServiceAccount in {missing} within {timeout:.0f}s"
                )
            time.sleep(0.2)

    def apply_samples_prerequisites(
        self, samples_dir: Path, *, show: Callable[..., subprocess.CompletedProcess[str]] | None = None
    ) -> None:
        """``kubectl apply`` of ``00-prerequisites.yaml`` and ``01-clustertrainingruntime.yaml`` from
        ``samples_dir``, then :meth:`default_service_accounts` of the namespaces the first declares.
        ``show``: run kubectl through it instead (the demos print kubectl's real output)."""
        prereq = samples_dir / "00-prerequisites.yaml"
        args = ("apply", "-f", str(prereq), "-f", str(samples_dir / "01-clustertrainingruntime.yaml"))
        proc = show(self, *args) if show is not None else self.kubectl(*args, check=False)
        if proc.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed:\n{proc.stdout}{proc.stderr or ''}")
        docs = [d for d in yaml.safe_load_all(prereq.read_text()) if isinstance(d, dict)]
        self.default_service_accounts(d["metadata"]["name"] for d in docs if d.get("kind") == "Namespace")

    def grant(
        self,
        rules: Sequence[dict[str, Any]],
        *,
        user: str = "dev",
        namespace: str | None = None,
        name: str | None = None,
    ) -> str:
        """Give ``user`` the RBAC ``rules`` (Role+RoleBinding in ``namespace``, else cluster-wide).

        ``rules`` are RBAC PolicyRules, e.g. ``[{"apiGroups": [""], "resources": ["secrets"],
        "verbs": ["list"]}]``. Returns the Role/ClusterRole (and binding) name for :meth:`revoke`.
        """
        digest = hashlib.sha256(json.dumps(list(rules), sort_keys=True).encode()).hexdigest()[:8]
        name = name or f"e2e-{user}-{digest}"
        kind = "Role" if namespace else "ClusterRole"
        meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
        self.apply(
            [
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": list(rules)},
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": f"{kind}Binding",
                    "metadata": meta,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
                },
            ]
        )
        return name

    def revoke(self, name: str, *, namespace: str | None = None) -> None:
        """Delete what :meth:`grant` created."""
        kind = "role,rolebinding" if namespace else "clusterrole,clusterrolebinding"
        ns = ["-n", namespace] if namespace else []
        self.kubectl("delete", kind, name, *ns, "--ignore-not-found", "--wait=false")

    def audit_events(self) -> list[dict[str, Any]]:
        """Parsed audit log events so far (JSON lines)."""
        assert self.audit_log_path is not None
        if not self.audit_log_path.exists():
            return []
        events = []
        for line in self.audit_log_path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                events.append(json.loads(line))
        return events


# --------------------------------------------------------------------------- CLI


def _stop_recorded(state_dir: Path) -> list[str]:
    """Stop the processes recorded in ``state_dir`` (apiserver first); return what was done."""
    state_file = state_dir / STATE_FILE
    done = []
    if not state_file.exists():
        return done
    state = json.loads(state_file.read_text())
    pids = state.get("pids", {})
    for name in ("kube-apiserver", "etcd", *[n for n in pids if n not in ("kube-apiserver", "etcd")]):
        info = pids.get(name)
        if not info:
            continue
        pid, exe = int(info["pid"]), info["exe"]
        if _pid_runs(pid, exe):
            stop_pid(pid)
            done.append(f"stopped {name} (pid {pid})")
        else:
            done.append(f"{name} (pid {pid}) was not running")
    state_file.unlink()
    return done


def _cmd_up(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).resolve()
    if (state_dir / STATE_FILE).exists():
        state = json.loads((state_dir / STATE_FILE).read_text())
        alive = all(_pid_runs(int(i["pid"]), i["exe"]) for i in state.get("pids", {}).values())
        if alive:
            print(f"# control plane already up ({state['server_url']})", file=sys.stderr)
            print(f"export KUBECONFIG={state['kubeconfig']}")
            return 0
        _stop_recorded(state_dir)  # stale: clean up what is left, then start afresh
    cp = ControlPlane(state_dir, start_timeout=args.timeout)
    print(f"==> starting etcd + kube-apiserver in {state_dir} ...", file=sys.stderr)
    t0 = time.monotonic()
    cp.start()
    print(
        f"==> control plane up at {cp.server_url} in {time.monotonic() - t0:.1f}s "
        f"(pids: {cp.pids}); stop with: python -m e2e.harness.controlplane down --state-dir {state_dir}",
        file=sys.stderr,
    )
    print(f"export KUBECONFIG={cp.kubeconfig}")
    print(f"export PATH={cp.bin_dir}:$PATH")
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).resolve()
    if not (state_dir / STATE_FILE).exists():
        print(f"==> no control plane recorded in {state_dir}", file=sys.stderr)
        return 0
    for line in _stop_recorded(state_dir):
        print(f"==> {line}", file=sys.stderr)
    # Remove only what `up` wrote, never the directory's other contents.
    for entry in (
        "pki",
        "etcd-data",
        "logs",
        "audit",
        "kubectl-cache",
        "crds-cel-escaped",  # (only for an apiserver older than 1.32: ControlPlane._crds_for_server)
        "audit-policy.yaml",
        "admin.kubeconfig",
        "dev.kubeconfig",
        "admission-config.yaml",
        "admission-webhook.kubeconfig",
    ):
        p = state_dir / entry
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
    with contextlib.suppress(OSError):
        state_dir.rmdir()  # only if now empty
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state_file = Path(args.state_dir).resolve() / STATE_FILE
    if not state_file.exists():
        print("down")
        return 1
    state = json.loads(state_file.read_text())
    alive = {n: _pid_runs(int(i["pid"]), i["exe"]) for n, i in state["pids"].items()}
    print(
        json.dumps({"server_url": state["server_url"], "kubeconfig": state["kubeconfig"], "running": alive}, indent=2)
    )
    return 0 if all(alive.values()) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.controlplane", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build if needed, start etcd + kube-apiserver, print export KUBECONFIG=...")
    up.add_argument("--state-dir", required=True, help="where certs, kubeconfigs, logs, etcd data and PIDs go")
    up.add_argument("--timeout", type=float, default=180.0, help="readiness deadline per server (s)")
    down = sub.add_parser("down", help="stop the processes recorded in --state-dir and remove its files")
    down.add_argument("--state-dir", required=True)
    status = sub.add_parser("status", help="show whether the recorded processes run")
    status.add_argument("--state-dir", required=True)
    args = parser.parse_args(argv)
    try:
        return {"up": _cmd_up, "down": _cmd_down, "status": _cmd_status}[args.cmd](args)
    except ControlPlaneError as e:
        print(f"e2e/harness/controlplane.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
