"""Fidelity scenarios for the Image Pull check (issue 21): images pulled from a real registry.

The runner (e2e/fidelity/run.py, :func:`e2e.fidelity.run.image_registry`) starts the CNCF
distribution registry (e2e/harness/registry.py: TLS from a CA of its own, htpasswd auth) on the
node's bridge when a scenario names :data:`REGISTRY_PLACEHOLDER`, pushes the matrix's workload image
into it as ``fidelity/workload:1.0``, gives the node's containerd its CA (``<address>/ca.crt``), writes the
registry's address where the placeholder is, and sets the webhook's ``registryAccess`` to ask only
that registry (``allowlist``, its CA as ``caFile``): every other scenario's ``localhost/`` image is
not asked, so they carry no Image Pull finding. Nothing of the workload image is loaded under the
registry's name: containerd must pull it, with the pods' pull Secret, as the kubelet does
(kuberuntime_image.go PullImage). What is pushed is a copy with an image ID of its own (its config
carries one more label, e2e/harness/registry.py pushed_config): the kubelet records the credentials it
pulled an image with by image ID (k8s.io/kubernetes pkg/kubelet/images/pullmanager, KEP-2535, on by
default since 1.35), and a pull of the workload's own ID with a Secret made every later pod of the
matrix naming ``localhost/preflight/workload:local`` without it pull that again (ImagePullBackOff).

- a TrainJob whose image tag is not in the registry: the kubelet's pull fails (ErrImagePull, then
  ImagePullBackOff), the job never starts; the webhook denies with
  ``[Image Pull] Image "<registry>/fidelity/workload:9.9" not found: registry "<registry>" has no
  manifest for tag "9.9" of repository "fidelity/workload" (pod group "node"); tags: 1.0. Fix: use a
  tag that exists, e.g. "1.0".``
- its twin, the tag that is there: admitted with no warning, pulled by containerd, and it runs.
- the image with no pull Secret (none on the pods, none on the namespace's ``default``
  ServiceAccount): containerd pulls anonymously and the registry answers 401 (ErrImagePull); the
  webhook denies, the registry having refused anonymous access;
- the image with a pull Secret whose password is wrong: the kubelet pulls with it and gets 401; the
  webhook denies, naming the Secret it tried;
- a multi-arch image whose OCI index offers only a platform the node cannot run (the workload's own
  platform swapped for another architecture, a hand-made manifest with a config blob): containerd's
  platform matcher finds nothing ("no match for platform in manifest"); the webhook denies, naming the
  node's platform and the index's;
- its twin, an index over the workload's own manifest and that foreign one: containerd picks the
  node's platform and it runs; admitted with no warning.

The credential rows each pull the image under a tag of their own (:data:`NO_CREDENTIALS_TAG`,
:data:`WRONG_CREDENTIALS_TAG`: the same manifest as :data:`REGISTRY_TAG`): an image already on the
node under the tag a pod names is not pulled again (imagePullPolicy IfNotPresent, the default for
a tag other than ``latest``), so a tag that ``image-pull-tag-present`` pulled with the right
credentials would let a pod without them start, whatever the registry says; with a tag no pod pulled,
every row's outcome is the registry's answer to its own credentials.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from e2e.fidelity.scenarios_base import Scenario, trainjob

#: stands for the registry's host:port in the scenarios until the runner knows it (the bridge's
#: address and a free port); ``.invalid`` (RFC 6761) can name no real host
REGISTRY_PLACEHOLDER = "fidelity-registry.invalid"
#: where the runner pushes the matrix's workload image (e2e/nodeimage/workload)
REGISTRY_REPOSITORY = "fidelity/workload"
REGISTRY_TAG = "1.0"
PULL_USER, PULL_PASSWORD = "fidelity", "fidelity-pull-3b9e71"
PULL_SECRET = "regcred"
#: a pull Secret for the registry with the right user and a wrong password
WRONG_SECRET = "stalecred"
WRONG_PASSWORD = "fidelity-pull-expired"
#: tags the runner gives the workload's manifest for the credential rows (one each, pulled by no other row)
NO_CREDENTIALS_TAG = "1.0-anonymous"
WRONG_CREDENTIALS_TAG = "1.0-stale"
#: multi-arch tags the runner pushes: an OCI index offering only :func:`foreign_arch`, and one offering
#: the workload's own platform too
FOREIGN_INDEX_TAG = "1.0-foreign"
MULTIARCH_INDEX_TAG = "1.0-multiarch"


def foreign_arch(arch: str) -> str:
    """An architecture other than ``arch`` (the node's): s390x, or ppc64le on an s390x node."""
    return "ppc64le" if arch == "s390x" else "s390x"


def pull_secret(name: str = PULL_SECRET, password: str = PULL_PASSWORD) -> dict[str, Any]:
    """A kubernetes.io/dockerconfigjson Secret for the registry, as ``kubectl create secret
    docker-registry`` makes it (username, password and their base64 ``auth``)."""
    auth = base64.b64encode(f"{PULL_USER}:{password}".encode()).decode()
    config = {"auths": {REGISTRY_PLACEHOLDER: {"username": PULL_USER, "password": password, "auth": auth}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": json.dumps(config)},
    }


def _image(tag: str) -> str:
    return f"{REGISTRY_PLACEHOLDER}/{REGISTRY_REPOSITORY}:{tag}"


def _pulled(name: str, note: str, tag: str, secret: str = PULL_SECRET, password: str = PULL_PASSWORD) -> Scenario:
    """A TrainJob on the registry's image ``tag`` whose pods pull with the Secret ``secret`` (made with ``password``)."""
    return Scenario(
        name,
        note,
        trainjob(image=_image(tag), pod={"imagePullSecrets": [{"name": secret}]}),
        prereqs=[pull_secret(secret, password)],
        covers="Image Pull",
    )


IMAGEPULL_SCENARIOS: list[Scenario] = [
    _pulled(
        "image-pull-tag-missing",
        "the image's tag is not in the (private, TLS) registry; the pods' pull Secret is right",
        "9.9",
    ),
    _pulled(
        "image-pull-tag-present",
        "twin of image-pull-tag-missing: the tag the registry has; containerd pulls it with the pull Secret",
        REGISTRY_TAG,
    ),
    Scenario(
        "image-pull-no-credentials",
        "the private registry's image with no pull Secret (none on the pods, none on the ServiceAccount)",
        trainjob(image=_image(NO_CREDENTIALS_TAG)),
        covers="Image Pull",
        # Image Reference: a registry not in publicRegistries with no imagePullSecrets "may need a login"
        warns=("Image Reference",),
    ),
    _pulled(
        "image-pull-wrong-credentials",
        "the private registry's image with a pull Secret whose password is wrong",
        WRONG_CREDENTIALS_TAG,
        WRONG_SECRET,
        WRONG_PASSWORD,
    ),
    _pulled(
        "image-pull-index-foreign-platform",
        "a multi-arch image (OCI index) offering only an architecture the node cannot run; right pull Secret",
        FOREIGN_INDEX_TAG,
    ),
    _pulled(
        "image-pull-index-node-platform",
        "twin of image-pull-index-foreign-platform: the index offers the node's platform too",
        MULTIARCH_INDEX_TAG,
    ),
]


def needs_registry(scenarios: list[Scenario]) -> bool:
    """Whether a scenario's job or prerequisites name the registry (the runner then starts it)."""
    return any(REGISTRY_PLACEHOLDER in json.dumps([s.job, s.prereqs]) for s in scenarios)
