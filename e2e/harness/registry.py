"""A real container registry for the image tests: the CNCF distribution registry, with TLS and auth.

The binary is distribution's own ``cmd/registry`` (github.com/distribution/distribution/v3, built by
``e2e/build.sh registry`` into the e2e cache). :class:`Registry` runs it on 127.0.0.1 (or another
address of this machine, e.g. the node's bridge) with

* TLS from a trustme CA (the tests hand that CA to the client under test, as a cluster hands a
  private registry's CA to containerd and to the webhook's ``registryAccess.caFile``);
* ``auth: htpasswd`` (distribution's registry/auth/htpasswd: bcrypt entries only, realm in a
  ``Basic`` challenge), or ``auth: token`` (registry/auth/token: the registry answers a ``Bearer``
  challenge naming our :class:`TokenServer`, and verifies the JWT it issues against the CA bundle
  ``rootcertbundle`` through the token's ``x5c`` chain, accesscontroller.go / token.go).

:func:`push_image` and :func:`push_index` speak the OCI distribution API (spec.md "Pushing blobs":
POST then PUT ``?digest=``; "Pushing manifests": PUT by tag or digest) to put small, valid images
in it: a config blob, one layer (a gzipped tar with one file) and an OCI image manifest; an OCI
image index over several such manifests for a multi-arch image.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import secrets
import signal
import ssl
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import bcrypt
import trustme
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from e2e.harness.controlplane import cache_dir, ensure_built, free_ports

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
#: the service name the registry and the token server agree on (the token's audience)
SERVICE = "preflight-e2e-registry"
ISSUER = "preflight-e2e-token-server"


class RegistryError(RuntimeError):
    pass


def registry_binary(build: bool = True) -> Path:
    """The distribution registry binary (built by e2e/build.sh registry when `build`; seconds when warm)."""
    if build:
        ensure_built(quiet=True, what="registry")
    path = cache_dir() / "bin" / "registry"
    if not path.is_file():
        raise RegistryError(f"{path} missing: run e2e/build.sh registry")
    return path


def htpasswd_line(user: str, password: str) -> str:
    """One htpasswd entry as distribution reads it (bcrypt, $2y$ like `htpasswd -B`)."""
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
    return f"{user}:{hashed.replace('$2b$', '$2y$', 1)}"


# --------------------------------------------------------------------------- the token server


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """A Docker token server (distribution docs/spec/auth/token.md) on 127.0.0.1, over TLS.

    GET ?service=&scope=repository:<name>:<actions> with Basic credentials from `users`: a JWT
    (ES256) granting the asked actions on that repository, signed by a key whose certificate the
    CA issued (sent as the x5c chain the registry verifies against its rootcertbundle). Wrong or
    missing credentials when `anonymous` is False: 401. It counts the tokens it issued."""

    def __init__(self, ca: trustme.CA, users: dict[str, str], *, anonymous: bool = False) -> None:
        self.users = users
        self.anonymous = anonymous
        self.issued = 0
        self.refused = 0
        self._key = ec.generate_private_key(ec.SECP256R1())
        signer = ca.issue_cert("token-signer.preflight.invalid")
        # the signing certificate: the same subject, our own key, signed by the CA
        leaf = x509.load_pem_x509_certificate(signer.cert_chain_pems[0].bytes())
        ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), None)
        cert = (
            x509.CertificateBuilder()
            .subject_name(leaf.subject)
            .issuer_name(leaf.issuer)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(leaf.not_valid_before_utc)
            .not_valid_after(leaf.not_valid_after_utc)
            .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        )
        self._x5c = [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()]
        self._server_cert = ca.issue_cert("127.0.0.1", "localhost")
        self._httpd: ThreadingHTTPServer | None = None
        self.url = ""

    def token(self, user: str, scope: str) -> str:
        access = []
        parts = scope.split(":")
        if len(parts) == 3 and parts[0] == "repository":
            access.append({"type": "repository", "name": parts[1], "actions": parts[2].split(",")})
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": user,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        header = {"typ": "JWT", "alg": "ES256", "x5c": self._x5c}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def start(self) -> TokenServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                user = ""
                header = self.headers.get("Authorization", "")
                ok = server.anonymous
                if header.startswith("Basic "):
                    try:
                        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                    except ValueError:
                        user, password = "", ""
                    ok = server.users.get(user) == password
                if not ok or query.get("service", [""])[0] != SERVICE:
                    server.refused += 1
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                server.issued += 1
                body = json.dumps({"token": server.token(user, query.get("scope", [""])[0]), "expires_in": 300})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_cert.configure_cert(ctx)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        self.url = f"https://127.0.0.1:{httpd.server_address[1]}/token"
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


# --------------------------------------------------------------------------- the registry


@dataclass
class Registry:
    """One distribution registry process (see the module docstring). Use as a context manager."""

    workdir: Path
    ca: trustme.CA
    users: dict[str, str] = field(default_factory=dict)
    auth: str = "htpasswd"  # "htpasswd" | "token" | "none"
    host: str = "127.0.0.1"
    port: int = 0
    token_server: TokenServer | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """host:port, as an image reference names the registry."""
        return f"{self.host}:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "ca.pem"

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        return ctx

    def start(self, timeout: float = 30.0) -> Registry:
        binary = registry_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_ports(1)[0]
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        cert = self.ca.issue_cert(self.host, "localhost", "127.0.0.1")
        cert.cert_chain_pems[0].write_to_path(str(self.workdir / "tls.crt"))
        cert.private_key_pem.write_to_path(str(self.workdir / "tls.key"))
        config: dict[str, Any] = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.workdir / "data")}, "delete": {"enabled": True}},
            "http": {
                "addr": self.address,
                "secret": secrets.token_hex(16),
                "tls": {"certificate": str(self.workdir / "tls.crt"), "key": str(self.workdir / "tls.key")},
            },
        }
        if self.auth == "htpasswd":
            (self.workdir / "htpasswd").write_text(
                "\n".join(htpasswd_line(u, p) for u, p in self.users.items()) + "\n", encoding="utf-8"
            )
            config["auth"] = {"htpasswd": {"realm": "preflight-e2e", "path": str(self.workdir / "htpasswd")}}
        elif self.auth == "token":
            self.token_server = TokenServer(self.ca, self.users).start()
            config["auth"] = {
                "token": {
                    "realm": self.token_server.url,
                    "service": SERVICE,
                    "issuer": ISSUER,
                    "rootcertbundle": str(self.ca_file),
                }
            }
        (self.workdir / "config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
        log = open(self.workdir / "registry.log", "wb")
        self.proc = subprocess.Popen(
            [str(binary), "serve", str(self.workdir / "config.yml")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OTEL_TRACES_EXPORTER": "none"},
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RegistryError(f"registry exited {self.proc.returncode}: {self.log_tail()}")
            try:
                status = self.request("GET", "/v2/", auth=False)[0]
            except (OSError, urllib.error.URLError):
                time.sleep(0.05)
                continue
            if status in (200, 401):
                return self
        raise RegistryError(f"registry not answering on {self.address} after {timeout}s: {self.log_tail()}")

    def log_tail(self) -> str:
        path = self.workdir / "registry.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        if self.token_server is not None:
            self.token_server.stop()

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the pusher's HTTP

    def _authorization(self, scope: str) -> str | None:
        if not self.users:
            return None
        user, password = next(iter(self.users.items()))
        if self.auth == "htpasswd":
            return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        if self.auth == "token" and self.token_server is not None:
            return "Bearer " + self.token_server.token(user, scope)
        return None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        *,
        auth: bool = True,
        scope: str = "",
    ) -> tuple[int, dict[str, str], bytes]:
        url = path if path.startswith("https://") else f"https://{self.address}{path}"
        req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
        authorization = self._authorization(scope) if auth else None
        if authorization:
            req.add_header("Authorization", authorization)
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(), timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()


# --------------------------------------------------------------------------- the pusher


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer(content: bytes) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = len(content)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue(), mtime=0)


def push_blob(reg: Registry, repo: str, data: bytes) -> str:
    """spec.md "POST then PUT": open an upload, PUT the whole blob at its Location with ?digest=."""
    digest = _digest(data)
    scope = f"repository:{repo}:pull,push"
    status, headers, body = reg.request("POST", f"/v2/{repo}/blobs/uploads/", b"", scope=scope)
    if status != 202:
        raise RegistryError(f"blob upload to {repo}: HTTP {status} {body[:200]!r}")
    location = headers.get("Location") or headers.get("location") or ""
    sep = "&" if "?" in location else "?"
    target = f"{location}{sep}digest={urllib.parse.quote(digest)}"
    if target.startswith("/"):
        target = f"https://{reg.address}{target}"
    status, _, body = reg.request("PUT", target, data, {"Content-Type": "application/octet-stream"}, scope=scope)
    if status != 201:
        raise RegistryError(f"blob PUT to {repo}: HTTP {status} {body[:200]!r}")
    return digest


def push_manifest(reg: Registry, repo: str, reference: str, manifest: dict[str, Any] | bytes, media_type: str) -> str:
    """PUT a manifest (a dict is serialised compactly; bytes are sent as they are, keeping their digest)."""
    data = manifest if isinstance(manifest, bytes) else json.dumps(manifest, separators=(",", ":")).encode()
    status, _, body = reg.request(
        "PUT",
        f"/v2/{repo}/manifests/{reference}",
        data,
        {"Content-Type": media_type},
        scope=f"repository:{repo}:pull,push",
    )
    if status != 201:
        raise RegistryError(f"manifest PUT {repo}:{reference}: HTTP {status} {body[:300]!r}")
    return _digest(data)


def _image_manifest(reg: Registry, repo: str, os_: str, arch: str, content: bytes) -> tuple[dict[str, Any], bytes]:
    layer = _layer(content)
    layer_digest = push_blob(reg, repo, layer)
    diff_id = _digest(gzip.decompress(layer))
    config = json.dumps(
        {"architecture": arch, "os": os_, "rootfs": {"type": "layers", "diff_ids": [diff_id]}, "config": {}},
        separators=(",", ":"),
    ).encode()
    config_digest = push_blob(reg, repo, config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
    }
    return manifest, json.dumps(manifest, separators=(",", ":")).encode()


def push_image(reg: Registry, repo: str, tag: str, *, os_: str = "linux", arch: str = "amd64") -> str:
    """A single-arch image `repo:tag` (an OCI image manifest); returns its digest."""
    manifest, _ = _image_manifest(reg, repo, os_, arch, f"{repo}:{tag} {os_}/{arch}\n".encode())
    return push_manifest(reg, repo, tag, manifest, OCI_MANIFEST)


def push_index(
    reg: Registry, repo: str, tag: str, platforms: list[tuple[str, str]], *, entries: list[dict[str, Any]] | None = None
) -> str:
    """A multi-arch image `repo:tag`: one manifest per (os, arch), pushed by digest, and an OCI index
    over `entries` (manifests already in `repo`, e.g. :func:`manifest_entry`'s) and those."""
    entries = list(entries or [])
    for os_, arch in platforms:
        manifest, data = _image_manifest(reg, repo, os_, arch, f"{repo}:{tag} {os_}/{arch}\n".encode())
        digest = push_manifest(reg, repo, _digest(data), manifest, OCI_MANIFEST)
        entries.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": digest,
                "size": len(data),
                "platform": {"os": os_, "architecture": arch},
            }
        )
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    return push_manifest(reg, repo, tag, index, OCI_INDEX)


def _get_manifest(reg: Registry, repo: str, reference: str) -> bytes:
    status, _, body = reg.request(
        "GET",
        f"/v2/{repo}/manifests/{reference}",
        headers={"Accept": OCI_MANIFEST},
        scope=f"repository:{repo}:pull",
    )
    if status != 200:
        raise RegistryError(f"manifest GET {repo}:{reference}: HTTP {status} {body[:300]!r}")
    return body


def retag(reg: Registry, repo: str, source: str, tag: str) -> str:
    """Put the image manifest `repo:source` under `tag` too (the same bytes, so the same digest)."""
    return push_manifest(reg, repo, tag, _get_manifest(reg, repo, source), OCI_MANIFEST)


def manifest_entry(reg: Registry, repo: str, reference: str) -> dict[str, Any]:
    """The index entry (image-spec image-index.md) of the image manifest `repo:reference`: its digest,
    size, and the platform its config names (``os``, ``architecture``)."""
    body = _get_manifest(reg, repo, reference)
    config_digest = json.loads(body)["config"]["digest"]
    status, _, config = reg.request("GET", f"/v2/{repo}/blobs/{config_digest}", scope=f"repository:{repo}:pull")
    if status != 200:
        raise RegistryError(f"config blob GET {repo}@{config_digest}: HTTP {status}")
    cfg = json.loads(config)
    return {
        "mediaType": OCI_MANIFEST,
        "digest": _digest(body),
        "size": len(body),
        "platform": {"os": cfg["os"], "architecture": cfg["architecture"]},
    }


@contextmanager
def running_registry(workdir: Path, users: dict[str, str], *, auth: str = "htpasswd") -> Iterator[Registry]:
    """A started Registry with a fresh CA, stopped on exit."""
    reg = Registry(workdir, trustme.CA(), users, auth)
    with reg:
        yield reg


def containerd_hosts(reg: Registry, config_path: Path) -> Path:
    """Make containerd trust `reg` under its registry `config_path` (containerd docs/hosts.md): the
    registry's CA as ``<host:port>/ca.crt``, the Docker certificate layout containerd reads when a
    host directory has no hosts.toml (remotes/docker/config/hosts.go, loadCertFiles): one host,
    the registry itself over https, trusting that CA. Returns the CA's path there.

    Not a hosts.toml: with a ``[host."https://…"]`` table holding the CA, containerd also tries the
    top-level ``server`` last, and its resolver moves on to the next host when one answers 404, so
    every "manifest unknown" came back as "x509: certificate signed by unknown authority" from that
    second try; and a top-level ``ca`` beside ``server`` alone was not applied by the node's
    containerd (Debian's 1.6.20: every pull failed with x509), so dropping the table is no fix either."""
    if reg.host in ("127.0.0.1", "localhost", "::1"):
        # without a hosts.toml, containerd 1.6 pulls from a loopback registry over plain http (400 from TLS)
        raise RegistryError(f"containerd_hosts: start the registry on the node's bridge, not {reg.host}")
    d = config_path / reg.address
    d.mkdir(parents=True, exist_ok=True)
    (d / "hosts.toml").unlink(missing_ok=True)
    ca = d / "ca.crt"
    ca.write_bytes(reg.ca_file.read_bytes())
    return ca


#: the label :func:`push_docker_archive` adds to the config of the image it pushes (its value: the
#: repository it was pushed to), so the pushed copy has an image ID of its own
PUSHED_LABEL = "preflight.webhook.io/e2e-pushed-to"


def pushed_config(config: bytes, repo: str) -> bytes:
    """``config`` (a Docker or OCI image config) with :data:`PUSHED_LABEL` added to ``config.Labels``:
    the same platform, rootfs and layers (its ``diff_ids``), another digest, hence another image ID on
    the node (containerd's CRI reports the config digest as the image's id).

    Why: the kubelet keys its records of the images it pulled by that ID (k8s.io/kubernetes v1.37
    pkg/kubelet/images/pullmanager/image_pull_manager.go, writePulledRecordIfChanged: one
    ImagePulledRecord per imageRef, with the credentials each image name was pulled with). Under the
    default imagePullCredentialsVerificationPolicy, NeverVerifyPreloadedImages (image_pull_policies.go
    NeverVerifyPreloadedPullPolicy), an image ID with such a record is no longer "preloaded": a pod naming
    any image with that ID must then present credentials recorded for its own name, or pull again
    (MustAttemptImagePull, called by pkg/kubelet/images/image_manager.go EnsureImageExists). Were the
    pushed copy the archive's image itself, a pod pulling it from the registry with a Secret would make
    every later pod naming the copy loaded under ``localhost/`` pull ``localhost/...`` again, where no
    registry answers (KEP-2535, beta and on by default since 1.35)."""
    doc = json.loads(config)
    inner = doc.get("config") or {}
    inner["Labels"] = {**(inner.get("Labels") or {}), PUSHED_LABEL: repo}
    doc["config"] = inner
    return json.dumps(doc, separators=(",", ":")).encode()


def push_docker_archive(reg: Registry, repo: str, tag: str, archive: Path) -> str:
    """Push the first image of a `docker save` archive (the node's pause or workload image) as an OCI
    image: its config with :data:`PUSHED_LABEL` added (:func:`pushed_config`: the OCI config is the
    Docker config's format; the label gives the pushed copy an image ID of its own, so pulling it with
    credentials leaves the copy loaded on the node preloaded for the kubelet), its layers as they are,
    uncompressed (application/vnd.oci.image.layer.v1.tar: the digest is the config's diff_id). Returns
    its digest."""
    with tarfile.open(archive) as tar:

        def member(name: str) -> bytes:
            f = tar.extractfile(name)
            assert f is not None, name
            return f.read()

        entry = json.loads(member("manifest.json"))[0]
        config = pushed_config(member(entry["Config"]), repo)
        layers = [member(name) for name in entry["Layers"]]
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": push_blob(reg, repo, config), "size": len(config)},
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": push_blob(reg, repo, data),
                "size": len(data),
            }
            for data in layers
        ],
    }
    return push_manifest(reg, repo, tag, manifest, OCI_MANIFEST)
