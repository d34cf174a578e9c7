"""Self-managed certificates: one Secret holds the CA certificate and the serving pair; rotation never breaks TLS.

No CA private key is stored anywhere: the serving ServiceAccount may `get` Secrets
cluster-wide (the Secrets check needs it, and RBAC has no "all but"), so whatever sits in
this Secret is readable by the serving pods. It therefore holds only what they hold anyway
(tls.crt/tls.key) and public CA certificates; a CA signs one serving certificate when it is
made and its key is dropped.

The Secret is the source of truth (as in Gatekeeper's cert-controller); the caBundle of the
ValidatingWebhookConfiguration is derived from it and repaired when it drifts. Several
managers may run at once (a rolling update): every write is conditioned on the
resourceVersion that was read, and a 409 means "re-read and adopt what the other wrote".

A rotation moves in three steps, each separated by a propagation delay, so that at every
instant the certificate a replica serves is trusted by the bundle the apiserver uses:

  steady        ca.crt signs tls.crt                      bundle = [ca]
  1 ca-added    a new CA waits in ca-next.crt with the     bundle = [ca, next]
                pair it signed in tls-next.*
  2 switched    tls.* now signed by the new CA; the old    bundle = [prev, ca]
                CA kept as ca-prev.crt
  3 steady      ca-prev.crt dropped                        bundle = [ca]

Step 1→2 waits `bundle_propagation_seconds` (the apiserver must see the new bundle before any
replica presents the new certificate); 2→3 waits `cert_propagation_seconds` (every replica's
mounted Secret must have been refreshed by the kubelet and reloaded before the old CA
goes). Key material is never logged.

The package: `layout` (the Secret's keys and annotations, RotationSettings, Plan, the Secret
body and the caBundle), `rotation` (`plan`: the step machine), `store` (CertStore and its
kubernetes_asyncio implementation) and `manager` (CertManager, the atomic file mirror, the
--secret reference). Every public name is importable from `webhook.certmanager`.
"""

from __future__ import annotations

from webhook.certmanager.layout import (
    CA_CRT,
    MANAGED_BY_LABEL,
    NEXT_CRT,
    PREV_CRT,
    ROTATE_REQUEST,
    TLS_CRT,
    TLS_KEY,
    Plan,
    RotationSettings,
    bundle_certs,
    decode_data,
    patch_ca_bundle,
    secret_body,
)
from webhook.certmanager.manager import CertManager, ReconcileResult, parse_secret_ref, write_atomic_dir
from webhook.certmanager.rotation import plan, renew_due
from webhook.certmanager.store import CertStore, KubeCertStore

__all__ = [
    "CA_CRT",
    "MANAGED_BY_LABEL",
    "NEXT_CRT",
    "PREV_CRT",
    "ROTATE_REQUEST",
    "TLS_CRT",
    "TLS_KEY",
    "CertManager",
    "CertStore",
    "KubeCertStore",
    "Plan",
    "ReconcileResult",
    "RotationSettings",
    "bundle_certs",
    "decode_data",
    "parse_secret_ref",
    "patch_ca_bundle",
    "plan",
    "renew_due",
    "secret_body",
    "write_atomic_dir",
]
