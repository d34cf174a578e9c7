"""Image reference oracle: webhook.imageref against the kubelet's own ParseImageName.

tests/oracle/reference/main.go (built against k8s.io/kubernetes at the e2e version by
tests/oracle/reference/build.sh) runs k8s.io/kubernetes pkg/util/parsers.ParseImageName, the
call the kubelet makes before every pull, on each string; here the same strings go through
webhook.imageref.parse and every answer is compared: accepted or not, and for an accepted one
the registry, the full name, the tag and the digest.

The one difference allowed, and asserted to be the only one: a registry host longer than DNS
can resolve (over 253 characters plus a :port) is valid grammar to the kubelet, which then
fails the pull; we refuse it at once, with that reason.

    PREFLIGHT_REFERENCE_ORACLE="$(bash tests/oracle/reference/build.sh)" \\
        .venv/bin/python -m pytest tests/oracle/reference -q

`make test` builds the oracle and sets the variable; a bare `pytest tests` skips these.
"""

from __future__ import annotations

import random
from typing import Any

from tests.oracle._common import GoOracle
from webhook.imageref import HOST_MAX, ImageRef, parse

ORACLE = GoOracle("reference", "the reference oracle")
pytestmark = ORACLE.skip

SEED = 20261201
RANDOM_CASES = 30_000
HEX = "0123456789abcdef"

#: the pieces the grammar turns on; random references are strings of them
FRAGMENTS = [
    "a", "b", "z", "0", "9", "ab", "a0", "A", "Ab", ".", "_", "__", "___", "-", "--", ":", "/", "//", "@",
    "[", "]", "::1", "[::1]", "[fe80::1]", "localhost", "docker.io", "index.docker.io", "library",
    "example.com", "my_host.com", "5000", ":5000", ":port", "sha256:", "sha512:", "md5:", "sha256+b64:",
    "a" * 64, HEX * 4, HEX * 8, (HEX * 4).upper(), "latest", "v1.0", ".v1", "-rc", " ", "\t", "é", "://",
]  # fmt: skip

#: hand-picked cases: the tests' own, the normalisation edges, and the hostile shapes of issue 25
CASES = [
    "nginx", "nginx:1.27", "library/nginx", "docker.io/nginx", "index.docker.io/foo/bar", "docker.io/library/nginx",
    "localhost/foo", "localhost:5000/foo/bar:v1", "localhost:5000", "example.com", "example.com:5000",
    "[::1]:5000/foo:1", "[::1]/foo", "[::1]", "[fe80::1%eth0]/foo", "127.0.0.1:5000/a/b@sha256:" + "a" * 64,
    "nvcr.io/nvidia/aiperf@sha256:" + "a" * 64, "r.example.com:443/a/b:1.0@sha256:" + "a" * 64,
    "ghcr.io/foo/bar:v1.0_rc-1", "example.com/foo__bar", "Nginx", "library/Nginx", "ghcr.io/x/y:", "ghcr.io/foo/bar:.v1",
    "foo:" + "t" * 128, "foo:" + "t" * 129, "foo:bar:baz", "my_registry.com/foo", "my_registry.com/foo/bar:1",
    "example.com:port/foo", "foo@sha256:abc", "foo@md5:" + "a" * 32, "foo@sha256:" + "A" * 64, "foo@",
    "foo@sha384:" + "a" * 96, "foo@sha512:" + "a" * 128, "foo@sha256:" + "a" * 64 + "@x", "https://ghcr.io/foo",
    "a" * 64, "b" * 64, "foo___bar", "-foo", "foo-", "foo--bar", "foo//bar", "foo/", "/foo", "foo bar", "",
    "ghcr.io/" + "a" * 255, "ghcr.io/" + "a" * 256, "a/" * 127 + "a", "a/" * 128 + "a", "A/b", "Foo.com/bar",
    "sub.Example.COM/x", "x.-y.com/z", "x-.com/z", "a.b.c.d.e/f", "1.2.3.4/f", "foo.com:/x", "foo.com:5000:1/x",
    "foo/bar:tag@sha256:" + "a" * 64, "foo:tag@sha256:" + "a" * 64, "foo/Bar:tag", "foo/bar:TAG", "foo:1/bar",
    "a" * 64 + ":tag", "a" * 63, "localhost:5000:tag", "docker.io/" + "a" * 248, "docker.io/" + "a" * 247,
]  # fmt: skip
HOSTILE = [sep * n for sep in ("a/", "a.", "a-", "a_") for n in (1000, 16_000)] + [
    "a" * 100_000,
    "a." * 30_000 + "com/x",  # a valid host to the kubelet, longer than DNS can resolve: our one difference
    "[" + ":" * 50_000 + "]/x",
    "x@" + "sha256:" + "a" * 50_000,
    "x:" + "a" * 50_000,
]


def random_cases(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 10))) for _ in range(n)]


def ask(images: list[str]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = ORACLE.run(images)["results"]
    assert len(results) == len(images)
    return results


def ours(ref: ImageRef | None) -> dict[str, Any]:
    """Our answer in the oracle's terms: the registry and the full name as containerd pulls it."""
    if ref is None:
        return {"ok": False}
    return {"ok": True, "name": f"{ref.registry}/{ref.path}", "tag": ref.tag or "", "digest": ref.digest or ""}


def theirs(result: dict[str, Any]) -> dict[str, Any]:
    if not result["ok"]:
        return {"ok": False}
    domain, path = result.get("domain", ""), result["path"]
    return {
        "ok": True,
        "name": f"{domain}/{path}" if domain else path,
        "tag": result.get("tag", ""),
        "digest": result.get("digest", ""),
    }


def dns_too_long(image: str) -> bool:
    first = image.split("/", 1)[0]
    return "/" in image and len(first) > HOST_MAX


def test_every_case_agrees_with_the_kubelet() -> None:
    images = CASES + HOSTILE + random_cases(random.Random(SEED), RANDOM_CASES)
    disagreements = []
    accepted = 0
    for image, result in zip(images, ask(images), strict=True):
        want, got = theirs(result), ours(parse(image))
        accepted += want["ok"]
        if want != got and not (dns_too_long(image) and want["ok"] and not got["ok"]):
            disagreements.append((image[:80], len(image), want, got, result.get("error")))
    assert disagreements == []
    # the generator reaches both answers often enough for the comparison to mean something
    assert 0.05 < accepted / len(images) < 0.95


def test_the_one_allowed_difference_is_a_host_dns_cannot_resolve() -> None:
    image = "a." * 30_000 + "com/x"
    assert ask([image])[0]["ok"] is True
    assert parse(image) is None
