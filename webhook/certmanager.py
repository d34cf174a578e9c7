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

Step 1→2 waits `bundle_propagation` (the apiserver must see the new bundle before any
replica presents the new certificate); 2→3 waits `cert_propagation` (every replica's
mounted Secret must have been refreshed by the kubelet and reloaded before the old CA
goes). Key material is never logged.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.kube import ApiError
from webhook.tls import KeyPair, generate_ca, generate_serving_cert

log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------- pure planning


def _load_cert(pem: bytes | None) -> x509.Certificate | None:
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, Exception):  # InvalidSignature is not a ValueError
        return False
    return True


def _sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return set(ext.get_values_for_type(x509.DNSName)), {str(i) for i in ext.get_values_for_type(x509.IPAddress)}


def _key_matches(cert: x509.Certificate, key_pem: bytes | None) -> bool:
    if not key_pem:
        return False
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return False
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    return key.public_key().public_bytes(enc, pub) == cert.public_key().public_bytes(enc, pub)


def _parse_since(annotations: dict[str, str]) -> dt.datetime | None:
    raw = annotations.get(STEP_SINCE)
    if not raw:
        return None
    try:
        t = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def decode_data(secret: dict[str, Any] | None) -> dict[str, bytes]:
    """The Secret's data, base64-decoded; undecodable entries are dropped (and re-issued)."""
    out: dict[str, bytes] = {}
    for k, v in ((secret or {}).get("data") or {}).items():
        try:
            out[k] = base64.b64decode(v or "", validate=True)
        except (binascii.Error, ValueError):
            continue
    return out


def _issue(settings: RotationSettings, ca: KeyPair) -> KeyPair:
    return generate_serving_cert(
        ca,
        list(settings.dns_names),
        list(settings.ip_addresses),
        days=settings.validity_days,  # type: ignore[arg-type]
    )


def _new_ca(settings: RotationSettings) -> KeyPair:
    return generate_ca(settings.ca_common_name, days=settings.validity_days)  # type: ignore[arg-type]


def _pair_ok(data: dict[str, bytes], ca_key: str, crt_key: str, key_key: str) -> bool:
    """data[crt_key] is signed by data[ca_key] and matches data[key_key]."""
    ca, leaf = _load_cert(data.get(ca_key)), _load_cert(data.get(crt_key))
    return ca is not None and leaf is not None and _signed_by(leaf, ca) and _key_matches(leaf, data.get(key_key))


def _names_ok(cert: x509.Certificate, settings: RotationSettings) -> bool:
    dns, ips = _sans(cert)
    return dns == set(settings.dns_names) and ips == set(settings.ip_addresses)


def plan(
    data: dict[str, bytes],
    annotations: dict[str, str],
    now: dt.datetime,
    settings: RotationSettings,
) -> Plan:
    """Decide what the Secret must hold at `now`. Pure but for key generation.

    No CA private key is ever stored: a CA signs its one serving certificate the moment it
    is made and its key is dropped. Anything a certificate change needs is therefore a new
    CA with the three-step overlap; the Secret holds only what a serving replica holds
    anyway (its own pair) plus public CA certificates. Keys written by older versions
    (ca.key, ca-next.key) are removed on the next pass.
    """
    renew_at = dt.timedelta(days=settings.renew_before_days)
    since = _parse_since(annotations)
    rotate_requested = ROTATE_REQUEST in annotations
    ca = _load_cert(data.get(CA_CRT))
    leaf = _load_cert(data.get(TLS_CRT))
    stored_keys = [k for k in (CA_KEY, NEXT_KEY) if k in data]
    out = {k: v for k, v in data.items() if k not in (CA_KEY, NEXT_KEY)}

    if ca is None or leaf is None or not _pair_ok(data, CA_CRT, TLS_CRT, TLS_KEY):
        # nothing usable (first start, or someone broke the Secret): issue afresh
        new_ca = _new_ca(settings)
        pair = _issue(settings, new_ca)
        fresh = {CA_CRT: new_ca.cert_pem, TLS_CRT: pair.cert_pem, TLS_KEY: pair.key_pem}
        reason = (
            "issued a new CA and serving certificate"
            if not data
            else "the stored certificate was unusable; issued a new CA and serving certificate"
        )
        return Plan(fresh, STEADY, None, reason, now + renew_due(pair.cert_pem, renew_at, now), rotate_requested)

    # an in-flight rotation from an older version still holds the next CA's key: use it once
    nxt = _load_cert(data.get(NEXT_CRT))
    legacy_next = (
        nxt is not None
        and _key_matches(nxt, data.get(NEXT_KEY))
        and not _pair_ok(data, NEXT_CRT, NEXT_TLS_CRT, NEXT_TLS_KEY)
    )
    if legacy_next:
        pair = _issue(settings, KeyPair(data[NEXT_CRT], data[NEXT_KEY]))
        out[NEXT_TLS_CRT], out[NEXT_TLS_KEY] = pair.cert_pem, pair.key_pem
    if nxt is not None and _pair_ok(out, NEXT_CRT, NEXT_TLS_CRT, NEXT_TLS_KEY):
        # step 1 → 2 once the apiserver has had time to trust the new CA
        due = (since or now) + dt.timedelta(seconds=settings.bundle_propagation_seconds)
        if since is None or now >= due:
            switched = {
                PREV_CRT: out[CA_CRT],
                CA_CRT: out[NEXT_CRT],
                TLS_CRT: out[NEXT_TLS_CRT],
                TLS_KEY: out[NEXT_TLS_KEY],
            }
            nd = now + dt.timedelta(seconds=settings.cert_propagation_seconds)
            return Plan(switched, SWITCHED, now, "switched the serving certificate to the new CA", nd, rotate_requested)
        return Plan(out, CA_ADDED, since, _dropped(stored_keys), due, False)
    for k in (NEXT_CRT, NEXT_TLS_CRT, NEXT_TLS_KEY):
        out.pop(k, None)

    if PREV_CRT in data:
        due = (since or now) + dt.timedelta(seconds=settings.cert_propagation_seconds)
        if since is None or now >= due:
            out.pop(PREV_CRT)
            return Plan(out, STEADY, None, "dropped the previous CA from the bundle", None, rotate_requested)
        return Plan(out, SWITCHED, since, _dropped(stored_keys), due, False)

    # steady: rotate on request, when the CA or the leaf nears its end, or when the leaf names
    # the wrong service (re-issuing under the same CA would need its key, which is not kept)
    ca_left = ca.not_valid_after_utc - now
    leaf_left = leaf.not_valid_after_utc - now
    names_ok = _names_ok(leaf, settings)
    if rotate_requested or ca_left <= renew_at or leaf_left <= renew_at or not names_ok:
        if rotate_requested:
            why = "rotation requested"
        elif not names_ok:
            why = "the serving certificate names another service"
        else:
            why = "the certificate expires within renew-before"
        new_ca = _new_ca(settings)
        pair = _issue(settings, new_ca)  # the new CA's key goes out of scope here, unstored
        out[NEXT_CRT], out[NEXT_TLS_CRT], out[NEXT_TLS_KEY] = new_ca.cert_pem, pair.cert_pem, pair.key_pem
        nd = now + dt.timedelta(seconds=settings.bundle_propagation_seconds)
        return Plan(out, CA_ADDED, now, f"added a new CA to the bundle ({why})", nd, rotate_requested)

    nd = now + min(ca_left, leaf_left) - renew_at
    return Plan(out, STEADY, None, _dropped(stored_keys), nd, False)


def _dropped(keys: list[str]) -> str:
    return f"removed the stored CA key ({', '.join(keys)}); CA keys are never kept" if keys else ""


def renew_due(cert_pem: bytes, renew_at: dt.timedelta, now: dt.datetime) -> dt.timedelta:
    cert = x509.load_pem_x509_certificate(cert_pem)
    return max(dt.timedelta(0), cert.not_valid_after_utc - now - renew_at)


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


# --------------------------------------------------------------------------- the API it needs


class CertStore(Protocol):
    """The four reads/writes the manager makes; raises ApiError (404, 409, ...)."""

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def get_webhook_config(self, name: str) -> dict[str, Any] | None: ...

    async def replace_webhook_config(self, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


class KubeCertStore:
    """CertStore over kubernetes_asyncio; objects stay plain dicts (raw JSON in and out)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        self._core = client.CoreV1Api(api_client)
        self._adm = client.AdmissionregistrationV1Api(api_client)

    async def _call(self, fn: Any, *args: Any, missing_ok: bool = False) -> dict[str, Any] | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            resp = await fn(*args, _preload_content=False)
            body = await resp.read()
            status = int(getattr(resp, "status", 200))
            # without preloading, kubernetes_asyncio hands back error responses instead of raising
            if status == 404 and missing_ok:
                return None
            if not 200 <= status < 300:
                raise ApiError(status, _status_message(body, status), str(getattr(resp, "reason", "") or ""))
            return json.loads(body)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise ApiError(exc.status or 0, _api_message(exc), exc.reason or "") from None
        except (TimeoutError, OSError) as exc:
            raise ApiError(0, f"{type(exc).__name__}: {exc}") from None

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._call(self._core.read_namespaced_secret, name, namespace, missing_ok=True)

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._core.create_namespaced_secret, namespace, body)  # type: ignore[return-value]

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._core.replace_namespaced_secret, name, namespace, body)  # type: ignore[return-value]

    async def get_webhook_config(self, name: str) -> dict[str, Any] | None:
        return await self._call(self._adm.read_validating_webhook_configuration, name, missing_ok=True)

    async def replace_webhook_config(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._adm.replace_validating_webhook_configuration, name, body)  # type: ignore[return-value]


def _status_message(body: bytes, status: int) -> str:
    try:
        return str(json.loads(body).get("message") or f"HTTP {status}")
    except (TypeError, ValueError, AttributeError):
        return f"HTTP {status}"


def _api_message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason or exc.status)


# --------------------------------------------------------------------------- the manager


@dataclass
class ReconcileResult:
    step: str
    secret_changed: str  # the reason, "" when untouched
    bundle_changed: bool
    next_due: dt.datetime | None
    conflicts: int = 0


@dataclass
class CertManager:
    """Keeps the Secret, the caBundle and (optionally) a directory of files in step."""

    store: CertStore
    namespace: str
    secret_name: str
    webhook_config: str
    settings: RotationSettings
    write_dir: Path | None = None
    max_conflicts: int = 5
    _written: bytes = field(default=b"", repr=False)

    async def reconcile(self, now: dt.datetime | None = None) -> ReconcileResult:
        """One pass: Secret first (the source of truth), then the caBundle, then the files."""
        conflicts = 0
        while True:
            t = now or dt.datetime.now(dt.UTC)
            current = await self.store.get_secret(self.namespace, self.secret_name)
            if current is not None and not _is_managed(current):
                raise ApiError(
                    409,
                    f'Secret "{self.namespace}/{self.secret_name}" exists but is not managed by {MANAGED_BY} '
                    f"(label {MANAGED_BY_LABEL}); refusing to overwrite it",
                    "NotManaged",
                )
            p = plan(decode_data(current), _annotations(current), t, self.settings)
            if not p.changed:
                break
            body = secret_body(self.secret_name, self.namespace, p, current)
            try:
                if current is None:
                    await self.store.create_secret(self.namespace, body)
                else:
                    await self.store.replace_secret(self.namespace, self.secret_name, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                # another manager wrote first: re-read and adopt what it wrote
                conflicts += 1
                log.info(
                    "Secret %s/%s changed under us (%s); re-reading",
                    self.namespace,
                    self.secret_name,
                    exc.reason or 409,
                )
                if conflicts >= self.max_conflicts:
                    raise
                continue
            log.info("Secret %s/%s: %s (step %s)", self.namespace, self.secret_name, p.reason, p.step)
            break
        bundle_changed = await self._sync_bundle(p.bundle)
        self._write_files(p)
        return ReconcileResult(p.step, p.reason, bundle_changed, p.next_due, conflicts)

    async def _sync_bundle(self, bundle: bytes) -> bool:
        for _ in range(self.max_conflicts):
            vwc = await self.store.get_webhook_config(self.webhook_config)
            if vwc is None:
                log.warning("ValidatingWebhookConfiguration %s not found; caBundle not injected", self.webhook_config)
                return False
            if not patch_ca_bundle(vwc, bundle):
                return False
            vwc.get("metadata", {}).pop("managedFields", None)
            try:
                await self.store.replace_webhook_config(self.webhook_config, vwc)
            except ApiError as exc:
                if exc.status == 409:
                    continue
                raise
            log.info(
                "ValidatingWebhookConfiguration %s: caBundle set (%d CA)",
                self.webhook_config,
                bundle.count(b"BEGIN CERTIFICATE"),
            )
            return True
        raise ApiError(409, f"ValidatingWebhookConfiguration {self.webhook_config} kept changing; caBundle not set")

    def _write_files(self, p: Plan) -> None:
        """Mirror tls.crt, tls.key and the bundle (ca.crt) into write_dir, swapped atomically."""
        if self.write_dir is None:
            return
        files = {TLS_CRT: p.data[TLS_CRT], TLS_KEY: p.data[TLS_KEY], CA_CRT: p.bundle}
        stamp = b"\0".join(files[k] for k in sorted(files))
        if stamp == self._written:
            return
        write_atomic_dir(self.write_dir, files)
        self._written = stamp

    async def run(self, check_interval: float, stop: asyncio.Event | None = None) -> None:
        """Reconcile forever: at every check interval, or sooner when a rotation step is due."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            wait = check_interval
            try:
                res = await self.reconcile()
                if res.next_due is not None:
                    until = (res.next_due - dt.datetime.now(dt.UTC)).total_seconds()
                    wait = min(check_interval, max(0.0, until) + 0.05)
            except ApiError as exc:
                log.error(
                    "certificate reconcile failed (HTTP %s): %s; retrying in %.0fs",
                    exc.status,
                    exc.message,
                    check_interval,
                )
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait)
            except TimeoutError:
                pass


def _annotations(obj: dict[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def _is_managed(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY


def write_atomic_dir(target: Path, files: dict[str, bytes]) -> None:
    """Write files the way the kubelet updates a Secret volume: a new timestamped directory,
    then one atomic swap of the `..data` symlink, so a reader never sees a cert with the old key."""
    target.mkdir(parents=True, exist_ok=True)
    new_dir = Path(tempfile.mkdtemp(prefix="..", dir=target))
    os.chmod(new_dir, 0o700)
    for name, data in files.items():
        fd = os.open(new_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    data_link = target / "..data"
    old = os.readlink(data_link) if data_link.is_symlink() else None
    tmp_link = target / "..data_tmp"
    if tmp_link.is_symlink() or tmp_link.exists():
        tmp_link.unlink()
    os.symlink(new_dir.name, tmp_link)
    os.replace(tmp_link, data_link)
    for name in files:
        link = target / name
        if not link.is_symlink():
            if link.exists():
                link.unlink()
            os.symlink(f"..data/{name}", link)
    if old and old != new_dir.name:
        old_path = target / old
        for child in old_path.iterdir():
            child.unlink()
        old_path.rmdir()


def parse_secret_ref(ref: str) -> tuple[str, str]:
    from webhook.cluster.names import is_dns1123_label, is_dns1123_subdomain

    ns, sep, name = ref.partition("/")
    if not sep or not ns or not name:
        raise ValueError(f"--secret must be NAMESPACE/NAME, got {ref!r}")
    if not is_dns1123_label(ns) or not is_dns1123_subdomain(name):
        raise ValueError(f"--secret {ref!r}: the namespace must be a DNS-1123 label and the name a DNS-1123 subdomain")
    return ns, name


__all__: Sequence[str] = [
    "CertManager",
    "CertStore",
    "KubeCertStore",
    "Plan",
    "RotationSettings",
    "bundle_certs",
    "patch_ca_bundle",
    "plan",
    "secret_body",
    "write_atomic_dir",
]
