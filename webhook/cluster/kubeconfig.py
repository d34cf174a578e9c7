"""Where the apiserver is and how to authenticate to it, without importing kubernetes_asyncio.

`import kubernetes_asyncio` (any part of it, `config` included) runs the package `__init__`, which
imports every generated API and model module: 34 MiB of RSS over what `serve` loads anyway, of an
idle webhook's 123 MiB (docs/benchmarks/import-weight.md). The webhook uses the library for its
configuration and transport only, so that part is here, following the library's behaviour
(kubernetes_asyncio 36.1.0 config/kube_config.py, config/incluster_config.py, config/exec_provider.py,
client/rest.py) and client-go's where they differ, as named below:

* in cluster: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT` (an IPv6 address bracketed),
  the ServiceAccount CA, and its token re-read from the file at most once a minute (the projected token
  rotates): kubernetes_asyncio incluster_config.py `TOKEN_REFRESH_PERIOD`, client-go
  rest/config.go `InClusterConfig` with transport/token_source.go `NewCachedFileTokenSource`;
* a kubeconfig, one file or a `$KUBECONFIG` list: clusters, users and contexts merged by name, the
  first file to name one wins, and so for `current-context` (client-go tools/clientcmd/loader.go
  `LoadingRules.Load`; kubernetes_asyncio took the last file's current-context). Relative file paths
  are relative to the file that names them. The user's credentials, tried in the library's order
  (kube_config.py `_load_authentication`): an exec plugin (client.authentication.k8s.io ExecCredential:
  a token, refreshed when its expirationTimestamp passes as client-go's exec authenticator does
  (plugin/pkg/client/auth/exec/exec.go), or a client certificate and key), then `token` /
  `tokenFile` (the file re-read once a minute, as client-go does), then username/password (Basic);
  and the cluster's `certificate-authority(-data)`, the user's `client-certificate(-data)` /
  `client-key(-data)`, `insecure-skip-tls-verify`, `tls-server-name` and `proxy-url`;
* a user with an `auth-provider` (the deprecated gcp and oidc providers): `load_configuration` hands
  that kubeconfig to kubernetes_asyncio itself (imported then, for that process only) and reads the
  result through `from_library`, so those users keep exactly what the library did for them.

Key material given as data is never written to a lingering file: a CA goes to the TLS context as
data, a client certificate and key through a private temporary directory removed at once (the library
kept such files in /tmp until the process exited).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import json
import logging
import os
import ssl
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

log = logging.getLogger(__name__)

SERVICE_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
#: a token file is read again after this long (kubernetes_asyncio TOKEN_REFRESH_PERIOD, client-go's cached file token source)
TOKEN_FILE_REFRESH_SECONDS = 60.0


class KubeconfigError(ValueError):
    """The configuration cannot give a cluster to talk to (kubernetes_asyncio's ConfigException)."""


class Credentials(Protocol):
    async def header(self) -> str | None:
        """The value of the Authorization header ("Bearer …", "Basic …"), or None."""


@dataclass
class StaticHeader:
    value: str

    async def header(self) -> str | None:
        return self.value


@dataclass
class TokenFile:
    """A bearer token read from a file, read again once it is older than `refresh` seconds."""

    path: str
    refresh: float = TOKEN_FILE_REFRESH_SECONDS
    _token: str = ""
    _read_at: float = field(default=-1e18)

    def read(self) -> str:
        token = Path(self.path).read_text()
        if not token:
            raise KubeconfigError(f"the token file {self.path} is empty")
        self._token, self._read_at = token, time.monotonic()
        return token

    async def header(self) -> str | None:
        if time.monotonic() - self._read_at >= self.refresh:
            self.read()
        return f"Bearer {self._token}"


@dataclass
class ExecPlugin:
    """A kubeconfig `exec` credential plugin (client.authentication.k8s.io ExecCredential).

    Run the way kubernetes_asyncio config/exec_provider.py runs it: the command with its args, the
    environment plus `env` and KUBERNETES_EXEC_INFO; a non-zero exit, output that is not JSON, or an
    apiVersion other than the one asked for is an error. Its token is kept until its
    `expirationTimestamp` and then asked for again (client-go's exec authenticator).
    """

    spec: Mapping[str, Any]
    _token: str | None = None
    _expiry: datetime.datetime | None = None
    _lock: asyncio.Lock | None = None

    def __post_init__(self) -> None:
        for key in ("command", "apiVersion"):
            if key not in self.spec:
                raise KubeconfigError(f"exec: malformed request. missing key '{key}'")
        args = self.spec.get("args")
        if args is not None and not isinstance(args, list):
            raise KubeconfigError(f"exec: malformed request. invalid args list '{args}'")

    async def run(self) -> dict[str, Any]:
        """The plugin's `status`: token (and expirationTimestamp), or clientCertificateData and clientKeyData."""
        api_version = self.spec["apiVersion"]
        env = dict(os.environ)
        env.update({str(e["name"]): str(e["value"]) for e in self.spec.get("env") or []})
        info = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": sys.stdout.isatty()}}
        env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
        argv = [str(self.spec["command"]), *(str(a) for a in self.spec.get("args") or [])]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, env=env, stdin=None, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
        except OSError as exc:
            raise KubeconfigError(f"exec: cannot run {argv[0]}: {exc.strerror or exc}") from None
        stdout, stderr = await proc.communicate()
        if proc.returncode != 0:
            msg = f"exec: process returned {proc.returncode}"
            if stderr.strip():
                msg += f". {stderr.strip().decode('utf-8', 'replace')}"
            raise KubeconfigError(msg)
        try:
            data = json.loads(stdout)
        except ValueError as exc:
            raise KubeconfigError(f"exec: failed to decode process output: {exc}") from None
        if not isinstance(data, dict):
            raise KubeconfigError("exec: malformed response: not an ExecCredential")
        for key in ("apiVersion", "kind", "status"):
            if key not in data:
                raise KubeconfigError(f"exec: malformed response. missing key '{key}'")
        if data["apiVersion"] != api_version:
            raise KubeconfigError(f"exec: plugin api version {data['apiVersion']} does not match {api_version}")
        status = data["status"]
        return status if isinstance(status, dict) else {}

    def take_token(self, status: Mapping[str, Any]) -> None:
        self._token = str(status["token"])
        stamp = status.get("expirationTimestamp")
        self._expiry = parse_rfc3339(str(stamp)) if stamp else None

    def _expired(self) -> bool:
        return self._expiry is not None and self._expiry <= datetime.datetime.now(datetime.UTC)

    async def header(self) -> str | None:
        if self._token is None or self._expired():
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:  # concurrent requests run the plugin once
                if self._token is None or self._expired():
                    status = await self.run()
                    if "token" not in status:
                        raise KubeconfigError("exec: the plugin's new credential has no token")
                    self.take_token(status)
        return f"Bearer {self._token}"


def parse_rfc3339(text: str) -> datetime.datetime:
    """An RFC 3339 time ("2026-12-05T16:00:00Z", fractions and offsets allowed), timezone-aware."""
    try:
        stamp = datetime.datetime.fromisoformat(text.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise KubeconfigError(f"exec: expirationTimestamp {text!r} is not an RFC 3339 time") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.UTC)


@dataclass
class ClusterConfig:
    """An apiserver and how to reach it: what KubeClient needs, and nothing of kubernetes_asyncio's."""

    host: str
    ca_file: str | None = None
    ca_data: bytes | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM
    key_data: bytes | None = None  # PEM
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    credentials: Credentials | None = None
    #: set by KubeClient: its requests' concurrency plus its watch connections
    connection_pool_maxsize: int = 100

    async def authorization(self) -> str | None:
        return await self.credentials.header() if self.credentials is not None else None

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context (kubernetes_asyncio client/rest.py `RESTClientObject`): the cluster's CA,
        else the system's; the client certificate; no verification when insecure-skip-tls-verify."""
        ctx = ssl.create_default_context(
            cafile=self.ca_file, cadata=self.ca_data.decode("ascii", "replace") if self.ca_data else None
        )
        if self.cert_data is not None and self.key_data is not None:
            with tempfile.TemporaryDirectory(prefix="preflight-client-cert-") as tmp:  # mode 0700
                cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
                cert.write_bytes(self.cert_data)
                fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(self.key_data)
                ctx.load_cert_chain(str(cert), str(key))
        elif self.cert_file:
            ctx.load_cert_chain(self.cert_file, keyfile=self.key_file)
        if not self.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


# --------------------------------------------------------------------------- in cluster


def _join_host_port(host: str, port: str) -> str:
    """Go's net.JoinHostPort: an IPv6 address (or one with a zone) is bracketed."""
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


def in_cluster(
    environ: Mapping[str, str] = os.environ, token_file: str = SERVICE_TOKEN_FILE, ca_file: str = SERVICE_CA_FILE
) -> ClusterConfig:
    """The pod's ServiceAccount (kubernetes_asyncio incluster_config.py `InClusterConfigLoader`)."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if host is None or port is None:
        raise KubeconfigError("Service host/port is not set.")
    if not host or not port:
        raise KubeconfigError("Service host/port is set but empty.")
    if not os.path.isfile(token_file):
        raise KubeconfigError("Service token file does not exist.")
    token = TokenFile(token_file)
    token.read()
    if not os.path.isfile(ca_file):
        raise KubeconfigError("Service certification file does not exists.")
    if not Path(ca_file).read_text():
        raise KubeconfigError("Cert file exists but empty.")
    return ClusterConfig(host="https://" + _join_host_port(host, port), ca_file=ca_file, credentials=token)


# --------------------------------------------------------------------------- kubeconfig


@dataclass
class _Entry:
    """A named cluster, user or context, with the directory its relative paths are relative to."""

    body: dict[str, Any]
    base: Path


def _read_kubeconfigs(paths: str) -> list[tuple[Path, dict[str, Any]]]:
    docs = []
    for part in paths.split(os.pathsep):
        if not part:
            continue
        path = Path(os.path.expanduser(part))
        if not path.exists():
            continue
        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise KubeconfigError(f"the kubeconfig {path} is not valid YAML: {exc}") from None
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise KubeconfigError(f"the kubeconfig {path} is not a mapping")
        docs.append((path, doc))
    if not docs:
        raise KubeconfigError(f"no kubeconfig found: {paths}")
    return docs


def _merged(docs: list[tuple[Path, dict[str, Any]]], item: str, inner: str) -> dict[str, _Entry]:
    """`item` (clusters, users, contexts) by name, the first file's entry winning (client-go's loader)."""
    out: dict[str, _Entry] = {}
    for path, doc in docs:
        for entry in doc.get(item) or []:
            if isinstance(entry, dict) and "name" in entry and str(entry["name"]) not in out:
                body = entry.get(inner)
                out[str(entry["name"])] = _Entry(body if isinstance(body, dict) else {}, path.resolve().parent)
    return out


def _file_or_data(obj: Mapping[str, Any], file_key: str, base: Path) -> tuple[str | None, bytes | None]:
    """(file path, decoded data) of a `KEY` / `KEY-data` pair; the data wins (kube_config.py `FileOrData`)."""
    data = obj.get(f"{file_key}-data")
    if data:
        try:
            return None, base64.standard_b64decode(data.encode() if isinstance(data, str) else data)
        except (binascii.Error, ValueError, AttributeError):
            raise KubeconfigError(f"{file_key}-data is not base64") from None
    name = obj.get(file_key)
    if name:
        path = os.path.normpath(os.path.join(base, os.path.expanduser(str(name))))
        if not os.path.isfile(path):
            raise KubeconfigError(f"File does not exists: {path}")
        return path, None
    return None, None


def uses_auth_provider(paths: str, context: str | None = None) -> bool:
    """Whether the chosen context's user authenticates with an `auth-provider` (left to kubernetes_asyncio)."""
    docs = _read_kubeconfigs(paths)
    _, _, user = _choose(docs, context)
    return user is not None and isinstance(user.body.get("auth-provider"), dict)


def _choose(docs: list[tuple[Path, dict[str, Any]]], context: str | None) -> tuple[str, _Entry, _Entry | None]:
    contexts = _merged(docs, "contexts", "context")
    name = context or next((str(d["current-context"]) for _, d in docs if d.get("current-context")), None)
    if not name:
        raise KubeconfigError("Invalid kube-config file. Expected key current-context")
    if name not in contexts:
        raise KubeconfigError(f"Invalid kube-config file. Expected object with name {name} in contexts list")
    ctx = contexts[name].body
    clusters, users = _merged(docs, "clusters", "cluster"), _merged(docs, "users", "user")
    cluster_name = ctx.get("cluster")
    if cluster_name is None or str(cluster_name) not in clusters:
        raise KubeconfigError(f"Invalid kube-config file. Expected object with name {cluster_name} in clusters list")
    user_name = ctx.get("user")
    return name, clusters[str(cluster_name)], users.get(str(user_name)) if user_name is not None else None


async def from_kubeconfig(paths: str, context: str | None = None) -> ClusterConfig:
    """The cluster and credentials of `context` (else the current-context) in the kubeconfig file(s) `paths`."""
    docs = _read_kubeconfigs(paths)
    name, cluster, user = _choose(docs, context)
    server = cluster.body.get("server")
    if not server:
        raise KubeconfigError(f"the kubeconfig's cluster of context {name!r} has no server")
    cfg = ClusterConfig(host=str(server).rstrip("/"))
    exec_certs = False
    if user is not None:
        exec_certs = await _load_user(cfg, user)
    if cfg.host.startswith("https"):
        cfg.ca_file, cfg.ca_data = _file_or_data(cluster.body, "certificate-authority", cluster.base)
        if user is not None and not exec_certs:
            cfg.cert_file, cfg.cert_data = _file_or_data(user.body, "client-certificate", user.base)
            cfg.key_file, cfg.key_data = _file_or_data(user.body, "client-key", user.base)
    if "insecure-skip-tls-verify" in cluster.body:
        cfg.verify_ssl = not cluster.body["insecure-skip-tls-verify"]
    if cluster.body.get("tls-server-name"):
        cfg.tls_server_name = str(cluster.body["tls-server-name"])
    if cluster.body.get("proxy-url"):
        cfg.proxy = str(cluster.body["proxy-url"])
    return cfg


async def _load_user(cfg: ClusterConfig, user: _Entry) -> bool:
    """The user's credentials into `cfg`, in kube_config.py's order; True when an exec plugin gave a client cert."""
    body = user.body
    if isinstance(body.get("exec"), dict):
        plugin = ExecPlugin(body["exec"])
        status = await plugin.run()
        if "token" in status:
            plugin.take_token(status)
            cfg.credentials = plugin
            return False
        if "clientCertificateData" in status:
            if "clientKeyData" not in status:
                log.error("exec: missing clientKeyData field in plugin output")
            else:
                cfg.cert_data = str(status["clientCertificateData"]).encode()
                cfg.key_data = str(status["clientKeyData"]).encode()
                return True
        else:
            log.error("exec: missing token or clientCertificateData field in plugin output")
            return False
    if body.get("token"):
        cfg.credentials = StaticHeader(f"Bearer {body['token']}")
    elif body.get("tokenFile"):
        path = os.path.normpath(os.path.join(user.base, os.path.expanduser(str(body["tokenFile"]))))
        if not os.path.isfile(path):
            raise KubeconfigError(f"File does not exists: {path}")
        token = TokenFile(path)
        token.read()
        cfg.credentials = token
    elif "username" in body and "password" in body:
        basic = base64.b64encode(f"{body['username']}:{body['password']}".encode()).decode()
        cfg.credentials = StaticHeader(f"Basic {basic}")
    return False


# --------------------------------------------------------------------------- kubernetes_asyncio's Configuration


@dataclass
class _LibraryKey:
    """A kubernetes_asyncio Configuration's BearerToken, through its own (refreshing) accessor."""

    configuration: Any

    async def header(self) -> str | None:
        value = await self.configuration.get_api_key_with_prefix("BearerToken")
        return str(value) if value else None


def from_library(configuration: Any) -> ClusterConfig:
    """A ClusterConfig that reads a kubernetes_asyncio `client.Configuration` through its public attributes
    (what client/rest.py and api_client.py read: host, TLS files, verify_ssl, tls_server_name, proxy, and
    the BearerToken api key with its refresh hook)."""
    return ClusterConfig(
        host=str(configuration.host),
        ca_file=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        verify_ssl=bool(configuration.verify_ssl),
        tls_server_name=getattr(configuration, "tls_server_name", None),
        proxy=configuration.proxy,
        credentials=_LibraryKey(configuration) if "BearerToken" in (configuration.api_key or {}) else None,
        connection_pool_maxsize=int(configuration.connection_pool_maxsize),
    )
