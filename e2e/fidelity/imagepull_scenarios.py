"""Fidelity scenarios for the Image Pull check (issue 21): images pulled from a real registry.

The runner (e2e/fidelity/run.py, :func:`e2e.fidelity.run.image_registry`) starts the CNCF
distribution registry (e2e/harness/registry.py: TLS from a CA of its own, htpasswd auth) on the
node's bridge when a scenario names :data:`REGISTRY_PLACEHOLDER`, pushes the matrix's workload image
into it as ``fidelity/workload:1.0``, gives the node's containerd its CA (a hosts.toml), writes the
registry's address where the placeholder is, and sets the webhook's ``registryAccess`` to ask only
that registry (``allowlist``, its CA as ``caFile``): every other scenario's ``localhost/`` image is
not asked, so they carry no Image Pull finding. Nothing of the workload image is loaded under the
registry's name: containerd must pull it, with the pods' pull Secret, as the kubelet does
(kuberuntime_image.go PullImage).

- a TrainJob whose image tag is not in the registry: the kubelet's pull fails (ErrImagePull, then
  ImagePullBackOff), the job never starts; the webhook denies with
  ``[Image Pull] Image "<registry>/fidelity/workload:9.9" not found: registry "<registry>" has no
  manifest for tag "9.9" of repository "fidelity/workload" (pod group "node"); tags: 1.0. Fix: use a
  tag that exists, e.g. "1.0".``
- its twin, the tag that is there: admitted with no warning, pulled by containerd, and it runs.
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


def pull_secret(name: str = PULL_SECRET) -> dict[str, Any]:
    """A kubernetes.io/dockerconfigjson Secret for the registry, as ``kubectl create secret
    docker-registry`` makes it (username, password and their base64 ``auth``)."""
    auth = base64.b64encode(f"{PULL_USER}:{PULL_PASSWORD}".encode()).decode()
    config = {"auths": {REGISTRY_PLACEHOLDER: {"username": PULL_USER, "password": PULL_PASSWORD, "auth": auth}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": json.dumps(config)},
    }


def _image(tag: str) -> str:
    return f"{REGISTRY_PLACEHOLDER}/{REGISTRY_REPOSITORY}:{tag}"


IMAGEPULL_SCENARIOS: list[Scenario] = [
    Scenario(
        "image-pull-tag-missing",
        "the image's tag is not in the (private, TLS) registry; the pods' pull Secret is right",
        trainjob(image=_image("9.9"), pod={"imagePullSecrets": [{"name": PULL_SECRET}]}),
        prereqs=[pull_secret()],
        covers="Image Pull",
    ),
    Scenario(
        "image-pull-tag-present",
        "twin of image-pull-tag-missing: the tag the registry has; containerd pulls it with the pull Secret",
        trainjob(image=_image(REGISTRY_TAG), pod={"imagePullSecrets": [{"name": PULL_SECRET}]}),
        prereqs=[pull_secret()],
        covers="Image Pull",
    ),
]


def needs_registry(scenarios: list[Scenario]) -> bool:
    """Whether a scenario's job or prerequisites name the registry (the runner then starts it)."""
    return any(REGISTRY_PLACEHOLDER in json.dumps([s.job, s.prereqs]) for s in scenarios)
