"""The Secret the manager keeps and what is derived from it: annotation, label and data keys,
the rotation steps, RotationSettings, the Plan (what the Secret should hold), the Secret body
written and read back, and the caBundle of the ValidatingWebhookConfiguration."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from dataclasses import dataclass
from typing import Any

from cryptography import x509

ANNOTATION_PREFIX = "preflight.webhook.io/"
#: when the current rotation step began (RFC 3339, UTC)
STEP_SINCE = ANNOTATION_PREFIX + "rotation-step-since"
#: set it (any value) on the Secret to start a rotation now; the manager removes it
ROTATE_REQUEST = ANNOTATION_PREFIX + "rotate"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "preflight-webhook-certs"

TLS_CRT, TLS_KEY = "tls.crt", "tls.key"
CA_CRT, CA_KEY = "ca.crt", "ca.key"
NEXT_CRT = "ca-next.crt"
#: the serving pair already signed by the next CA, waiting for step 2
NEXT_TLS_CRT, NEXT_TLS_KEY = "tls-next.crt", "tls-next.key"
#: written by older versions only; removed on sight (CA keys are never kept)
NEXT_KEY = "ca-next.key"
PREV_CRT = "ca-prev.crt"

STEADY, CA_ADDED, SWITCHED = "steady", "ca-added", "switched"


@dataclass(frozen=True)
class RotationSettings:
    """How long certificates live and how long each rotation step waits."""

    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...] = ()
    validity_days: float = 365.0
    renew_before_days: float = 30.0
    bundle_propagation_seconds: float = 30.0
    cert_propagation_seconds: float = 180.0
    ca_common_name: str = "preflight-webhook-ca"

    def __post_init__(self) -> None:
        if self.renew_before_days >= self.validity_days:
            raise ValueError(
                f"renew-before ({self.renew_before_days} d) must be shorter than the validity ({self.validity_days} d)"
            )


@dataclass(frozen=True)
class Plan:
    """What the Secret should hold now, and when to look again."""

    data: dict[str, bytes]
    step: str
    since: dt.datetime | None
    reason: str  # why the Secret changes ("" when it does not)
    next_due: dt.datetime | None  # the next moment the plan changes by itself
    clear_rotate_request: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.reason)

    @property
    def bundle(self) -> bytes:
        """The caBundle: every CA a replica may present a certificate from, oldest first."""
        return b"".join(self.data[k] for k in (PREV_CRT, CA_CRT, NEXT_CRT) if k in self.data)


def decode_data(secret: dict[str, Any] | None) -> dict[str, bytes]:
    """The Secret's data, base64-decoded; undecodable entries are dropped (and re-issued)."""
    out: dict[str, bytes] = {}
    for k, v in ((secret or {}).get("data") or {}).items():
        try:
            out[k] = base64.b64decode(v or "", validate=True)
        except (binascii.Error, ValueError):
            continue
    return out


def secret_body(name: str, namespace: str, p: Plan, current: dict[str, Any] | None) -> dict[str, Any]:
    """The full Secret to write: current metadata kept (resourceVersion included), data replaced."""
    meta: dict[str, Any] = dict((current or {}).get("metadata") or {})
    meta["name"], meta["namespace"] = name, namespace
    labels = dict(meta.get("labels") or {})
    labels[MANAGED_BY_LABEL] = MANAGED_BY
    meta["labels"] = labels
    ann = dict(meta.get("annotations") or {})
    ann.pop(STEP_SINCE, None)
    if p.clear_rotate_request:
        ann.pop(ROTATE_REQUEST, None)
    if p.since is not None:
        ann[STEP_SINCE] = p.since.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    meta["annotations"] = ann
    for k in ("managedFields", "creationTimestamp", "uid"):
        meta.pop(k, None)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in sorted(p.data.items())},
    }


def patch_ca_bundle(vwc: dict[str, Any], bundle: bytes) -> bool:
    """Set every webhook's clientConfig.caBundle to `bundle`; True when something changed."""
    want = base64.b64encode(bundle).decode("ascii")
    changed = False
    for hook in vwc.get("webhooks") or []:
        cc = hook.setdefault("clientConfig", {})
        if cc.get("caBundle") != want:
            cc["caBundle"] = want
            changed = True
    return changed


def bundle_certs(ca_bundle_b64: str) -> list[x509.Certificate]:
    """The certificates of a caBundle value (for tests and `status` output)."""
    return x509.load_pem_x509_certificates(base64.b64decode(ca_bundle_b64))


def annotations_of(obj: dict[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def is_managed(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY
