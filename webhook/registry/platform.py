"""Which platforms an image index offers, and whether a node can run one of them.

An index (OCI image-spec image-index.md, or Docker's manifest list) lists one manifest per
platform. containerd pulls the one its platform matcher picks (github.com/containerd/platforms
`Only(platforms.DefaultSpec())`: the same OS and architecture; the variant only narrows within
an architecture). A node advertises its OS and architecture in the labels kubernetes.io/os and
kubernetes.io/arch (k8s.io/api/core/v1 well_known_labels.go, set by the kubelet from GOOS/GOARCH),
not its variant, so a platform is matched on (os, architecture); entries whose platform is
"unknown" (attestation manifests, image-spec's "artifactType") run nowhere and are left out, and
so are those whose os or architecture is not a plain word (PLATFORM_WORD): what a registry writes
there reaches a message only then.
"""

from __future__ import annotations

import json
import re
from typing import Any

from webhook.objects import Node

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
#: what we accept, as containerd's resolver asks (remotes/docker/resolver.go): both families
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
#: the image-spec's bound on a manifest's size that registries enforce (distribution: 4 MiB)
MANIFEST_MAX = 4 * 1024 * 1024

#: what an os or architecture may be to be kept (GOOS/GOARCH values, OCI image-spec's platform
#: fields): a registry's other strings never reach a message
PLATFORM_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")

OS_LABEL = "kubernetes.io/os"
ARCH_LABEL = "kubernetes.io/arch"


def index_platforms(body: bytes) -> tuple[tuple[str, str], ...]:
    """(os, architecture) of every runnable manifest of an index, in order, without repeats.
    Raises ValueError when the body is not an index."""
    doc: Any = json.loads(body)
    manifests = doc.get("manifests") if isinstance(doc, dict) else None
    if not isinstance(manifests, list):
        raise ValueError("the index has no manifests list")
    out: list[tuple[str, str]] = []
    for m in manifests:
        p = m.get("platform") if isinstance(m, dict) else None
        if not isinstance(p, dict):
            continue
        os_, arch = p.get("os"), p.get("architecture")
        if not isinstance(os_, str) or not isinstance(arch, str) or "unknown" in (os_, arch):
            continue
        if not PLATFORM_WORD.fullmatch(os_) or not PLATFORM_WORD.fullmatch(arch):
            continue
        if (os_, arch) not in out:
            out.append((os_, arch))
    return tuple(out)


def node_platform(node: Node) -> tuple[str, str] | None:
    """(os, arch) from a Node's well-known labels; None when either is missing."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    os_, arch = labels.get(OS_LABEL), labels.get(ARCH_LABEL)
    if isinstance(os_, str) and isinstance(arch, str) and os_ and arch:
        return os_, arch
    return None


def text(platform: tuple[str, str]) -> str:
    return f"{platform[0]}/{platform[1]}"
