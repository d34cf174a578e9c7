"""StorageClasses: which class a claim and a PersistentVolume have (k8s.io/component-helpers
storage/volume helpers.go GetPersistentVolumeClaimClass, GetPersistentVolumeClass) and the default
StorageClass (pkg/volume/util/storageclass.go GetDefaultClass, as the DefaultStorageClass admission
plugin and pv_controller.go assignDefaultStorageClass use it).
"""

from __future__ import annotations

from typing import Any

STORAGE_API = "storage.k8s.io"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
NO_PROVISIONER = "kubernetes.io/no-provisioner"
IMMEDIATE_REASON = "pod has unbound immediate PersistentVolumeClaims"
DELAYED_REASON = "node(s) didn't find available persistent volumes to bind"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def claim_class(meta: dict[str, Any], spec: dict[str, Any]) -> str | None:
    """component-helpers storage/volume helpers.go GetPersistentVolumeClaimClass; None when the claim
    has no class at all (PersistentVolumeClaimHasClass false: the default class applies)."""
    ann = _dict(meta.get("annotations"))
    if BETA_CLASS_ANNOTATION in ann:
        return _str(ann[BETA_CLASS_ANNOTATION])
    if spec.get("storageClassName") is not None:
        return _str(spec["storageClassName"])
    return None


def default_class(classes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """pkg/volume/util/storageclass.go GetDefaultClass: newest creationTimestamp, then name ascending."""
    defaults = [
        c
        for c in classes
        if any(_dict(_dict(c.get("metadata")).get("annotations")).get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS)
    ]
    if not defaults:
        return None
    # RFC 3339 UTC timestamps sort as text; newest first, then by name
    by_name = sorted(defaults, key=lambda c: _str(_dict(c.get("metadata")).get("name")))
    return sorted(by_name, key=lambda c: _str(_dict(c.get("metadata")).get("creationTimestamp")), reverse=True)[0]


def pv_class(pv: dict[str, Any]) -> str:
    """helpers.go GetPersistentVolumeClass: the beta annotation first."""
    ann = _dict(_dict(pv.get("metadata")).get("annotations"))
    if BETA_CLASS_ANNOTATION in ann:
        return _str(ann[BETA_CLASS_ANNOTATION])
    return _str(_dict(pv.get("spec")).get("storageClassName"))
