"""The credentials the kubelet would pull an image with, matched to it as the kubelet matches them.

Follows k8s.io/kubernetes pkg/credentialprovider (v1.37):
- secrets/secrets.go `MakeDockerKeyring`: a Secret of type kubernetes.io/dockerconfigjson
  (key .dockerconfigjson, `{"auths": {...}}`) or kubernetes.io/dockercfg (key .dockercfg, the map
  itself) adds its entries; any other type, or the key missing or empty, adds nothing.
- config.go `DockerConfigEntry.UnmarshalJSON`: an entry's "auth" (base64 of user:password, padded
  or not) replaces its username and password.
- keyring.go `BasicDockerKeyring.Add`: an entry's key gets https:// when it has no scheme, its
  /v1/ or /v2/ path prefix is dropped, and it is indexed as host + path; the index is sorted in
  reverse, so longer (more specific) keys come first.
- keyring.go `Lookup` / `URLsMatch`: a key matches the image's repository ("host/path", as
  pkg/util/parsers ParseImageName normalises it) when the ports are equal, the host has as many
  dot-separated parts, each part matches the key's part as a glob (path/filepath.Match), and the
  image's path starts with the key's path. Every matching key's credentials are returned, in
  index order; with none, the Docker Hub key ("index.docker.io") for a Docker Hub image.
- pkg/kubelet/kuberuntime/kuberuntime_image.go `PullImage`: with no credential the image is
  pulled anonymously; otherwise each credential is tried in order, the first that works wins,
  and there is no anonymous attempt after them.

A password lives in a `Credential` only: its repr hides it, and what leaves this module to be
logged or shown is the Secret's name and a digest of the credential (for the cache key).
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"
DOCKERCFG = "kubernetes.io/dockercfg"
DOCKERCFG_KEY = ".dockercfg"
#: keyring.go defaultRegistryHost: the key Docker Hub credentials are stored under
DEFAULT_REGISTRY_HOST = "index.docker.io"


@dataclass(frozen=True)
class Credential:
    """One username/password of one pull Secret. Never printed: repr shows the Secret only."""

    secret: str
    username: str = field(repr=False)
    password: str = field(repr=False)

    @property
    def digest(self) -> str:
        """What identifies the credential in a cache key (sha256 of the pair, not reversible)."""
        h = hashlib.sha256(self.username.encode() + b"\0" + self.password.encode())
        return h.hexdigest()[:32]


class DockerConfigError(ValueError):
    """The Secret's docker config is not JSON of the expected shape (the kubelet fails the pull)."""


def _decode_auth(value: str) -> tuple[str, str]:
    """config.go decodeDockerConfigFieldAuth: padded or unpadded standard base64 of user:password."""
    text = value.strip()
    padded = text if text.endswith("=") else text + "=" * (-len(text) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        raise DockerConfigError("an entry's auth is not base64") from None
    user, sep, password = decoded.partition(":")
    if not sep:
        raise DockerConfigError("an entry's auth is not base64(username:password)")
    return user, password


def _entries(doc: Any) -> dict[str, tuple[str, str]]:
    if not isinstance(doc, dict):
        raise DockerConfigError("the docker config is not a JSON object")
    out: dict[str, tuple[str, str]] = {}
    for key, entry in doc.items():
        if not isinstance(entry, dict):
            raise DockerConfigError("an entry of the docker config is not a JSON object")
        user, password = entry.get("username") or "", entry.get("password") or ""
        if not isinstance(user, str) or not isinstance(password, str):
            raise DockerConfigError("an entry's username or password is not a string")
        auth = entry.get("auth")
        if isinstance(auth, str) and auth:
            user, password = _decode_auth(auth)
        out[str(key)] = (user, password)
    return out


def parse_pull_secret(secret_type: str, data: dict[str, Any]) -> dict[str, tuple[str, str]] | None:
    """A pull Secret's entries {registry key: (username, password)} from its `data` (base64 values,
    as the API serves them); None when the kubelet would ignore the Secret (secrets.go: wrong type,
    key missing or empty). Raises DockerConfigError when it would fail to make the keyring."""
    if secret_type == DOCKER_CONFIG_JSON:
        key = DOCKER_CONFIG_JSON_KEY
    elif secret_type == DOCKERCFG:
        key = DOCKERCFG_KEY
    else:
        return None
    raw = data.get(key)
    if not isinstance(raw, str) or not raw:
        return None
    try:
        doc = json.loads(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError):
        raise DockerConfigError(f"{key} is not base64 of JSON") from None
    if secret_type == DOCKER_CONFIG_JSON:
        if not isinstance(doc, dict):
            raise DockerConfigError(f"{key} is not a JSON object")
        return _entries(doc.get("auths") or {})
    return _entries(doc)


def _split_url(url: str) -> tuple[str, str]:
    """(host, path) of a schemeless URL, as url.Parse("https://" + url) splits it."""
    host, slash, path = url.partition("/")
    return host, slash + path


def _split_host(host: str) -> tuple[list[str], str]:
    """keyring.go SplitURL: the host's dot-separated parts and its port (net.SplitHostPort)."""
    name, port = host, ""
    if host.startswith("["):
        end = host.find("]")
        if end > 0 and host[end + 1 : end + 2] == ":":
            name, port = host[: end + 1], host[end + 2 :]
    elif host.count(":") == 1:
        name, port = host.split(":")
    return name.split("."), port


def urls_match(glob: str, target: str) -> bool:
    """keyring.go URLsMatchStr: the glob's host parts match the target's one by one (filepath.Match:
    `*` never crosses a '.', as no part holds one), equal ports, and the target's path under the glob's."""
    glob_host, glob_path = _split_url(glob)
    target_host, target_path = _split_url(target)
    glob_parts, glob_port = _split_host(glob_host)
    target_parts, target_port = _split_host(target_host)
    if glob_port != target_port or len(glob_parts) != len(target_parts):
        return False
    if not target_path.startswith(glob_path):
        return False
    return all(fnmatch.fnmatchcase(t, g) for g, t in zip(glob_parts, target_parts, strict=True))


def is_default_registry_match(image: str) -> bool:
    """keyring.go isDefaultRegistryMatch: the image pulls from Docker Hub."""
    first, sep, _ = image.partition("/")
    if not first:
        return False
    if not sep or first in ("docker.io", DEFAULT_REGISTRY_HOST):
        return True
    return not any(c in first for c in ".:")


class Keyring:
    """keyring.go BasicDockerKeyring: credentials indexed by registry key, most specific first."""

    def __init__(self) -> None:
        self._creds: dict[str, list[Credential]] = {}
        self._index: list[str] = []

    def add(self, secret: str, entries: dict[str, tuple[str, str]]) -> None:
        for repository, (user, password) in entries.items():
            url = repository
            for scheme in ("https://", "http://"):
                if url.startswith(scheme):
                    url = url[len(scheme) :]
                    break
            host, path = _split_url(url)
            if path.startswith(("/v2/", "/v1/")):
                path = path[3:]
            key = host + path if path and path != "/" else host
            self._creds.setdefault(key, []).append(Credential(secret, user, password))
        self._index = sorted(self._creds, reverse=True)

    def lookup(self, image: str) -> list[Credential]:
        """The credentials to try, in order, for a repository "host/path" (ParseImageName's form)."""
        found = [c for key in self._index if urls_match(key, image) for c in self._creds[key]]
        if not found and is_default_registry_match(image):
            found = list(self._creds.get(DEFAULT_REGISTRY_HOST, ()))
        return found


@dataclass(frozen=True)
class PullSecret:
    """What the kubelet makes of one pull Secret: its entries (None: it adds nothing, see
    `ignored`), or `error` when it cannot parse it (the kubelet then fails every pull of the pod)."""

    name: str
    type: str
    entries: dict[str, tuple[str, str]] | None = field(default=None, repr=False)
    error: str = ""

    @property
    def ignored(self) -> bool:
        return self.entries is None and not self.error


def read_pull_secret(name: str, secret: dict[str, Any]) -> PullSecret:
    """A Secret object (as the API serves it) made into a PullSecret; the caller drops the object."""
    secret_type = str(secret.get("type") or "")
    data = secret.get("data")
    try:
        entries = parse_pull_secret(secret_type, data if isinstance(data, dict) else {})
    except DockerConfigError as exc:
        return PullSecret(name, secret_type, None, str(exc))
    return PullSecret(name, secret_type, entries)
