"""Container image references, parsed as the kubelet parses them, in time linear in their length.

The kubelet refuses an image with InvalidImageName when github.com/distribution/reference's
`ParseNormalizedNamed` does (k8s.io/kubernetes pkg/util/parsers/parsers.go `ParseImageName`,
called by pkg/kubelet/images/image_manager.go before every pull). This module follows that
code: normalize.go (`ParseNormalizedNamed`, `splitDockerDomain`), reference.go (`Parse`: the
name, tag and digest, the 255-character path bound) and regexp.go (the grammar), and
github.com/opencontainers/go-digest (`digest.Parse`: registered algorithm, lowercase hex of
the algorithm's length). tests/oracle/reference compares it with that Go code on generated
and adversarial cases.

Why not a regex: a user writes the image, and the reference grammar run by a backtracking
engine (Python's `re`, as docker-image-py does) takes time quadratic in its length: a
129 KB `"a/a/a/…/"` held the event loop for 18 s. Here every part is found by splitting on
its separator ('@', the last ':' after the last '/', '/'), each piece is checked with a
character scan or a regex whose input is already bounded by the grammar's own limits, and
nothing is looked at twice.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

#: distribution/reference: RepositoryNameTotalLengthMax (the path, after normalisation)
PATH_MAX = 255
#: regexp.go: tag = [\w][\w.-]{0,127}
TAG_MAX = 128
#: the longest host name DNS can resolve (RFC 1035), plus a bracketed IPv6 address and a :port
HOST_MAX = 253 + len(":65535")
#: go-digest: the algorithms a Go binary linked with crypto/sha256 and crypto/sha512 can verify
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
#: the longest reference that can be valid; past it a reference is refused without being read
REFERENCE_MAX = HOST_MAX + 1 + PATH_MAX + 1 + TAG_MAX + 1 + len("sha512:") + 128

DEFAULT_DOMAIN = "docker.io"
_LEGACY_DEFAULT_DOMAIN = "index.docker.io"
_OFFICIAL_REPO_PREFIX = "library/"

# each applied only to a string already bounded (a path component ≤ PATH_MAX, a host ≤ HOST_MAX);
# none has nested quantifiers over overlapping classes, so each is linear in Python's engine too
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_DOMAIN_COMPONENT = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?")
_IPV6 = re.compile(r"\[[a-fA-F0-9:]+\]")
_PORT = re.compile(r"[0-9]+")
_TAG = re.compile(r"[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}")
_DIGEST_ALGORITHM = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*")
_XDIGITS = frozenset("0123456789abcdefABCDEF")
_HEX_ID = re.compile(r"[a-f0-9]{64}")


@dataclass(frozen=True)
class ImageRef:
    """A parsed reference: registry (normalised, docker.io for Docker Hub), repository path, tag, digest."""

    registry: str
    path: str
    tag: str | None
    digest: str | None


def is_path_component(comp: str) -> bool:
    """regexp.go's pathComponent: [a-z0-9]+ ((?:[._]|__|[-]+) [a-z0-9]+)*, by one scan."""
    n = len(comp)
    if n == 0 or comp[0] not in _ALNUM or comp[-1] not in _ALNUM:
        return False
    i = 0
    while i < n:
        c = comp[i]
        if c in _ALNUM:
            i += 1
            continue
        # a separator: '.', '_', '__' or a run of '-', each followed by an alphanumeric
        if c == "-":
            while i < n and comp[i] == "-":
                i += 1
        elif c == "_" and i + 1 < n and comp[i + 1] == "_":
            i += 2
        elif c in "._":
            i += 1
        else:
            return False
        if i >= n or comp[i] not in _ALNUM:
            return False
    return True


def is_domain(host: str) -> bool:
    """regexp.go's domainAndPort: (domainName | [ipv6]) (:port)?; `host` is bounded by the caller."""
    if len(host) > HOST_MAX:
        return False
    name, port = host, None
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return False
        name, rest = host[: end + 1], host[end + 1 :]
        if not _IPV6.fullmatch(name):
            return False
        if rest:
            if not rest.startswith(":"):
                return False
            port = rest[1:]
    else:
        if ":" in host:
            name, port = host.split(":", 1)
        if not all(_DOMAIN_COMPONENT.fullmatch(part) for part in name.split(".")):
            return False
    return port is None or bool(_PORT.fullmatch(port))


def _path_ok(path: str) -> bool:
    return all(is_path_component(comp) for comp in path.split("/"))


def _split_docker_domain(name: str) -> tuple[str, str]:
    """normalize.go splitDockerDomain (v0.6.0): the registry part, or docker.io (library/ for one-part names)."""
    first, sep, rest = name.partition("/")
    if not sep:  # a one-part name is always Docker Hub's, even "localhost:5000" or "example.com"
        return DEFAULT_DOMAIN, _OFFICIAL_REPO_PREFIX + name
    if first == _LEGACY_DEFAULT_DOMAIN:
        domain, remainder = DEFAULT_DOMAIN, rest
    elif first == "localhost" or any(c in first for c in ".:") or first.lower() != first:
        domain, remainder = first, rest
    else:
        domain, remainder = DEFAULT_DOMAIN, name
    if domain == DEFAULT_DOMAIN and "/" not in remainder:
        remainder = _OFFICIAL_REPO_PREFIX + remainder
    return domain, remainder


def _digest_ok(digest: str) -> bool:
    """regexp.go's digest pattern, then go-digest's Parse (a registered algorithm, its lowercase hex)."""
    algorithm, sep, encoded = digest.partition(":")
    if not sep or len(algorithm) > 64 or not _DIGEST_ALGORITHM.fullmatch(algorithm):
        return False
    if len(encoded) < 32 or not all(c in _XDIGITS for c in encoded):
        return False
    want = DIGEST_HEX.get(algorithm)
    return want is not None and len(encoded) == want and encoded == encoded.lower()


@functools.lru_cache(maxsize=1024)
def parse(image: str) -> ImageRef | None:
    """ParseNormalizedNamed: the reference, or None when the kubelet would refuse it.

    Memoized (ImageRef is frozen): a job names a handful of images, the same on every request."""
    if len(image) > REFERENCE_MAX or _HEX_ID.fullmatch(image):
        return None
    domain, remainder = _split_docker_domain(image)
    remote = remainder.split(":", 1)[0]
    if remote.lower() != remote:
        return None
    return _parse(domain + "/" + remainder)


def _parse(ref: str) -> ImageRef | None:
    """reference.go Parse on `domain/remainder`: name[:tag][@digest]."""
    name, at, digest = ref.partition("@")
    if at and not _digest_ok(digest):
        return None  # a second '@' is not in the digest's grammar either
    tag: str | None = None
    colon, slash = name.rfind(":"), name.rfind("/")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.fullmatch(tag):
            return None
    # anchoredNameRegexp: (domainAndPort/)? path, the domain taken when the rest is a path
    first, sep, rest = name.partition("/")
    if sep and is_domain(first) and _path_ok(rest):
        registry, path = first, rest
        if len(path) > PATH_MAX:
            return None
    elif len(name) <= PATH_MAX and _path_ok(name):
        # the first part looked like a host to splitDockerDomain but is not one ("my_host.com"): Parse
        # takes the whole name as the path, and containerd takes that first part as the host to pull from
        registry, path = (first, rest) if sep else (DEFAULT_DOMAIN, name)
    else:
        return None
    return ImageRef(registry=registry, path=path, tag=tag, digest=digest if at else None)


#: a user's string quoted in a message is cut to this many characters (a 100 KB image stays out of the reply)
QUOTE_MAX = 100


def quoted(text: str) -> str:
    """`"text"`, or its first QUOTE_MAX characters and how long it is."""
    if len(text) <= QUOTE_MAX:
        return f'"{text}"'
    return f'"{text[:QUOTE_MAX]}…" ({len(text)} characters)'


def diagnose(image: str) -> str | None:
    """Which part of an unparseable reference is wrong, in words (None: nothing specific found).

    Linear like `parse`: each regex below sees a piece already cut to its grammar's bound."""
    if image == "":
        return "the image is empty"
    if image.split(None, 1) != [image]:  # any whitespace (str.split: C speed, 2 ms per MB)
        return "it contains whitespace"
    if "://" in image:
        return f"it starts with a URL scheme ({image.split('://', 1)[0][:QUOTE_MAX]}://); an image reference has none"
    rest = image
    if "@" in image:
        rest, digest = image.split("@", 1)
        if "@" in digest:
            return "it contains more than one '@'"
        problem = _digest_problem(digest)
        if problem:
            return problem
    name = rest
    slash, colon = rest.rfind("/"), rest.rfind(":")
    if colon > slash:
        name, tag = rest[:colon], rest[colon + 1 :]
        if tag == "":
            return "the tag after ':' is empty"
        if len(tag) > TAG_MAX or not _TAG.fullmatch(tag):
            return (
                f"tag {quoted(tag)} is invalid: a tag is 1-128 letters, digits, '_', '.' or '-' "
                "and cannot start with '.' or '-'"
            )
    if name == "":
        return "the repository name is empty"
    if _HEX_ID.fullmatch(name):
        return "the name is a 64-character hex image ID, not a repository name"
    first, sep, remainder = name.partition("/")
    has_domain = bool(sep) and (any(c in first for c in ".:") or first == "localhost" or first.lower() != first)
    path = name
    if has_domain:
        if len(first) > HOST_MAX:
            return f"registry {quoted(first)} is {len(first)} characters; a host name DNS can resolve is at most 253"
        if not is_domain(first):
            return (
                f"registry {quoted(first)} is invalid: a registry is a host name or [IPv6] address "
                "(letters, digits, '-' and '.') with an optional numeric :port"
            )
        path = remainder
    if len(path) > PATH_MAX:
        return f"the repository path is {len(path)} characters, over the {PATH_MAX} allowed"
    if path.lower() != path:
        return f"repository {quoted(path)} contains uppercase letters; repository paths must be lowercase"
    for comp in path.split("/"):
        if comp == "":
            return f"repository {quoted(path)} has an empty path component ('//' or a leading/trailing '/')"
        if ":" in comp:
            return f"repository {quoted(path)} contains ':' outside the registry port and the tag"
        if not is_path_component(comp):
            return (
                f"path component {quoted(comp)} is invalid: use lowercase letters and digits separated by "
                "'.', '_', '__' or '-'"
            )
    return None


def _digest_problem(digest: str) -> str | None:
    algorithm, sep, encoded = digest.partition(":")
    if not sep or not encoded:
        return f"digest {quoted(digest)} is invalid: expected <algorithm>:<hex>, e.g. sha256:<64 hex characters>"
    want = DIGEST_HEX.get(algorithm)
    if want is None:
        return f"digest algorithm {quoted(algorithm)} is not supported (use sha256, sha384 or sha512)"
    if len(encoded) != want:
        return f"digest {quoted(digest)} is invalid: {algorithm} needs {want} hex characters, not {len(encoded)}"
    if not all(c in _XDIGITS for c in encoded) or encoded != encoded.lower():
        return f"digest {quoted(digest)} is invalid: the checksum must be lowercase hex"
    return None


def parse_or_explain(image: str) -> ImageRef:
    """`parse`, raising ValueError that says which part is wrong."""
    ref = parse(image)
    if ref is None:
        raise ValueError(diagnose(image) or "it does not follow [registry[:port]/]repository[:tag][@digest]")
    return ref


__all__ = [
    "QUOTE_MAX",
    "diagnose",
    "parse_or_explain",
    "quoted",
    "DIGEST_HEX",
    "PATH_MAX",
    "REFERENCE_MAX",
    "TAG_MAX",
    "ImageRef",
    "is_domain",
    "is_path_component",
    "parse",
]
