"""Pure logic of the Image Pull check's registry client: the kubelet's credential matching,
WWW-Authenticate parsing, pull-Secret parsing and index platforms (webhook/registry/).

The URLsMatch and keyring tables are taken from k8s.io/kubernetes v1.37 pkg/credentialprovider
keyring_test.go (TestURLsMatch, TestDockerKeyringForGlob, TestKeyringHitWithUnqualifiedDockerHub,
TestIsDefaultRegistryMatch); host names that are container registries are replaced by placeholders.
"""

from __future__ import annotations

import base64
import json

import pytest

from webhook.registry import challenge
from webhook.registry.keyring import (
    DOCKER_CONFIG_JSON,
    DOCKERCFG,
    Credential,
    DockerConfigError,
    Keyring,
    is_default_registry_match,
    parse_pull_secret,
    read_pull_secret,
    urls_match,
)
from webhook.registry.platform import index_platforms, node_platform

# keyring_test.go TestURLsMatch (glob, target, match)
URLS_MATCH = [
    ("*.kubernetes.io", "prefix.kubernetes.io", True),
    ("prefix.*.io", "prefix.kubernetes.io", True),
    ("prefix.kubernetes.*", "prefix.kubernetes.io", True),
    ("*-good.kubernetes.io", "prefix-good.kubernetes.io", True),
    ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", True),
    ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", True),
    ("*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", True),
    ("prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", True),
    ("*.kubernetes.io", "kubernetes.io", False),
    ("*.*.kubernetes.io", "prefix.kubernetes.io", False),
    ("*.*.kubernetes.io", "kubernetes.io", False),
    ("*kubernetes.io", "a.kubernetes.io", False),
    ("*kubernetes.io", "kubernetes.io", True),
    ("*.*.*.kubernetes.io", "a.b.c.kubernetes.io", True),
    ("kubernetes.io", "kubernetes.com", False),
    ("k*.io", "registry.io", False),  # upstream: a public registry's host
    ("*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", False),
    ("prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", False),
]


@pytest.mark.parametrize(("glob", "target", "want"), URLS_MATCH)
def test_urls_match_follows_the_kubelet(glob: str, target: str, want: bool) -> None:
    assert urls_match(glob, target) is want


# keyring_test.go TestDockerKeyringForGlob: an entry keyed by the glob (with a scheme) serves the target
FOR_GLOB = [
    ("https://hello.kubernetes.io", "hello.kubernetes.io"),
    ("https://*.registry.example", "prefix.registry.example"),
    ("https://prefix.*.example", "prefix.registry.example"),
    ("https://prefix.registry.*", "prefix.registry.example"),
    ("https://*.registry.example/path", "prefix.registry.example/path"),
    ("https://prefix.*.example/path", "prefix.registry.example/path/subpath"),
]


@pytest.mark.parametrize(("glob", "target"), FOR_GLOB)
def test_keyring_serves_a_glob_entry(glob: str, target: str) -> None:
    k = Keyring()
    k.add("s", {glob: ("foo", "bar")})
    creds = k.lookup(target)
    assert [(c.secret, c.username, c.password) for c in creds] == [("s", "foo", "bar")]


def test_longest_match_first_and_every_matching_credential_in_order() -> None:
    """keyring.go Add: the index is reverse-sorted, so "host/ns" comes before "host"; Lookup returns
    every match (the kubelet tries them in this order)."""
    k = Keyring()
    k.add("wide", {"registry.example": ("w", "1")})
    k.add("narrow", {"https://registry.example/team-a": ("n", "2")})
    k.add("other", {"other.example": ("o", "3")})
    assert [c.secret for c in k.lookup("registry.example/team-a/app")] == ["narrow", "wide"]
    assert [c.secret for c in k.lookup("registry.example/team-b/app")] == ["wide"]
    assert k.lookup("third.example/app") == []


def test_v1_v2_path_prefix_is_dropped_and_port_must_match() -> None:
    k = Keyring()
    k.add("s", {"https://registry.example:5000/v2/": ("u", "p")})
    assert [c.secret for c in k.lookup("registry.example:5000/app")] == ["s"]
    assert k.lookup("registry.example/app") == []
    assert k.lookup("registry.example:5001/app") == []


def test_docker_hub_credentials_serve_docker_hub_images_only() -> None:
    """keyring_test.go TestKeyringHitWithUnqualifiedDockerHub / TestKeyringMissWithDockerHubCredentials."""
    k = Keyring()
    k.add("hub", {"https://index.docker.io/v1/": ("u", "p")})
    assert [c.secret for c in k.lookup("docker.io/library/ubuntu")] == ["hub"]
    assert [c.secret for c in k.lookup("google/docker-registry")] == ["hub"]
    assert k.lookup("registry.example/app") == []


@pytest.mark.parametrize(
    ("image", "want"),
    [("foo", True), ("foo/bar", True), ("docker.io/foo/bar", True), ("index.docker.io/foo", True),
     ("registry.example/foo", False), ("localhost:5000/foo", False), ("/foo", False)],
)  # fmt: skip
def test_is_default_registry_match(image: str, want: bool) -> None:
    assert is_default_registry_match(image) is want


def _b64(doc: object) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


def test_pull_secret_types_and_the_auth_field() -> None:
    """secrets.go: dockerconfigjson reads "auths", dockercfg the map; config.go: "auth" (padded or
    not) replaces username and password."""
    auth = base64.b64encode(b"alice:s3cret").decode().rstrip("=")
    got = parse_pull_secret(DOCKER_CONFIG_JSON, {".dockerconfigjson": _b64({"auths": {"r.example": {"auth": auth}}})})
    assert got == {"r.example": ("alice", "s3cret")}
    got = parse_pull_secret(DOCKERCFG, {".dockercfg": _b64({"r.example": {"username": "bob", "password": "pw"}})})
    assert got == {"r.example": ("bob", "pw")}
    assert parse_pull_secret("Opaque", {".dockerconfigjson": _b64({})}) is None
    assert parse_pull_secret(DOCKER_CONFIG_JSON, {}) is None
    with pytest.raises(DockerConfigError):
        parse_pull_secret(DOCKER_CONFIG_JSON, {".dockerconfigjson": base64.b64encode(b"{not json").decode()})
    with pytest.raises(DockerConfigError):
        parse_pull_secret(
            DOCKERCFG, {".dockercfg": _b64({"r.example": {"auth": base64.b64encode(b"nocolon").decode()}})}
        )


def test_no_password_in_repr_or_error() -> None:
    cred = Credential("regcred", "alice", "hunter2-value")
    assert "hunter2" not in repr(cred) and "alice" not in repr(cred)
    bad = read_pull_secret("regcred", {"type": DOCKER_CONFIG_JSON, "data": {".dockerconfigjson": "hunter2-value"}})
    assert bad.error and "hunter2" not in bad.error and "hunter2" not in repr(bad)
    good = read_pull_secret(
        "regcred",
        {
            "type": DOCKER_CONFIG_JSON,
            "data": {".dockerconfigjson": _b64({"auths": {"r": {"password": "hunter2-value"}}})},
        },
    )
    assert good.entries and "hunter2" not in repr(good)


@pytest.mark.parametrize(
    ("header", "want"),
    [
        (
            'Bearer realm="https://auth.registry.example/token",service="registry.example",scope="repository:a/b:pull"',
            [("bearer", {"realm": "https://auth.registry.example/token", "service": "registry.example", "scope": "repository:a/b:pull"})],
        ),
        ('Basic realm="preflight"', [("basic", {"realm": "preflight"})]),
        ('BASIC realm=x', [("basic", {"realm": "x"})]),
        ('Bearer realm="a\\"b", Basic realm="c"', [("bearer", {"realm": 'a"b'}), ("basic", {"realm": "c"})]),
        ("Bearer", [("bearer", {})]),
        ('Bearer realm="unterminated', [("bearer", {})]),
        ("", []),
    ],
)  # fmt: skip
def test_www_authenticate(header: str, want: list[tuple[str, dict[str, str]]]) -> None:
    assert [(c.scheme, c.params) for c in challenge.parse(header)] == want


def test_www_authenticate_too_long_is_not_read() -> None:
    assert challenge.parse("Bearer realm=" + "a" * 10_000) == []


def test_index_platforms_skip_unknown_and_repeats() -> None:
    body = json.dumps(
        {
            "manifests": [
                {"platform": {"os": "linux", "architecture": "amd64"}},
                {"platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
                {"platform": {"os": "linux", "architecture": "arm64", "variant": "v9"}},
                {"platform": {"os": "unknown", "architecture": "unknown"}},
                {"annotations": {}},
            ]
        }
    ).encode()
    assert index_platforms(body) == (("linux", "amd64"), ("linux", "arm64"))
    with pytest.raises(ValueError):
        index_platforms(b'{"layers": []}')


def test_node_platform_from_well_known_labels() -> None:
    node = {"metadata": {"labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}}}
    assert node_platform(node) == ("linux", "arm64")
    assert node_platform({"metadata": {"labels": {"kubernetes.io/os": "linux"}}}) is None
