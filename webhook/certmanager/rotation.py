"""The rotation planner: what the Secret must hold at a given moment, step by step (see the
package docstring for the three steps). Pure but for key generation; no CA key is ever kept."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.certmanager.layout import (
    CA_ADDED,
    CA_CRT,
    CA_KEY,
    NEXT_CRT,
    NEXT_KEY,
    NEXT_TLS_CRT,
    NEXT_TLS_KEY,
    PREV_CRT,
    ROTATE_REQUEST,
    STEADY,
    STEP_SINCE,
    SWITCHED,
    TLS_CRT,
    TLS_KEY,
    Plan,
    RotationSettings,
)
from webhook.tls import KeyPair, generate_ca, generate_serving_cert


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

    Steps: `_afresh` when nothing usable is stored; else the rotation in flight (`_next_ca_step`: 1 → 2,
    `_previous_ca_step`: 2 → steady), else `_steady` (which may begin one: → 1).
    """
    p = _Pass(
        data=data,
        out={k: v for k, v in data.items() if k not in (CA_KEY, NEXT_KEY)},
        now=now,
        since=_parse_since(annotations),
        settings=settings,
        stored_keys=[k for k in (CA_KEY, NEXT_KEY) if k in data],
        rotate_requested=ROTATE_REQUEST in annotations,
    )
    ca = _load_cert(data.get(CA_CRT))
    leaf = _load_cert(data.get(TLS_CRT))
    if ca is None or leaf is None or not _pair_ok(data, CA_CRT, TLS_CRT, TLS_KEY):
        return _afresh(p)
    return _next_ca_step(p) or _previous_ca_step(p) or _steady(p, ca, leaf)


@dataclass
class _Pass:
    """What one `plan` reads (the stored Secret, the clock, the settings) and the data it builds up."""

    data: dict[str, bytes]
    #: the Secret's data being planned: the stored one without the CA keys older versions kept
    out: dict[str, bytes]
    now: dt.datetime
    #: when the rotation step in flight began (the Secret's annotation), if one is
    since: dt.datetime | None
    settings: RotationSettings
    #: the CA keys an older version stored, removed by this pass
    stored_keys: list[str]
    rotate_requested: bool

    def due(self, seconds: float) -> dt.datetime:
        """When the step in flight may go on: `seconds` after it began (now when that is unknown)."""
        return (self.since or self.now) + dt.timedelta(seconds=seconds)


def _afresh(p: _Pass) -> Plan:
    """Nothing usable is stored (first start, or someone broke the Secret): a new CA and serving pair."""
    renew_at = dt.timedelta(days=p.settings.renew_before_days)
    new_ca = _new_ca(p.settings)
    pair = _issue(p.settings, new_ca)
    fresh = {CA_CRT: new_ca.cert_pem, TLS_CRT: pair.cert_pem, TLS_KEY: pair.key_pem}
    reason = (
        "issued a new CA and serving certificate"
        if not p.data
        else "the stored certificate was unusable; issued a new CA and serving certificate"
    )
    return Plan(fresh, STEADY, None, reason, p.now + renew_due(pair.cert_pem, renew_at, p.now), p.rotate_requested)


def _next_ca_step(p: _Pass) -> Plan | None:
    """Step 1 → 2 when a next CA and its pair are stored: switch to them once the bundle has had time to
    propagate, else wait; None (the next CA's leftovers dropped from `p.out`) when there is none."""
    data, out = p.data, p.out
    # an in-flight rotation from an older version still holds the next CA's key: use it once
    nxt = _load_cert(data.get(NEXT_CRT))
    legacy_next = (
        nxt is not None
        and _key_matches(nxt, data.get(NEXT_KEY))
        and not _pair_ok(data, NEXT_CRT, NEXT_TLS_CRT, NEXT_TLS_KEY)
    )
    if legacy_next:
        pair = _issue(p.settings, KeyPair(data[NEXT_CRT], data[NEXT_KEY]))
        out[NEXT_TLS_CRT], out[NEXT_TLS_KEY] = pair.cert_pem, pair.key_pem
    if nxt is not None and _pair_ok(out, NEXT_CRT, NEXT_TLS_CRT, NEXT_TLS_KEY):
        # step 1 → 2 once the apiserver has had time to trust the new CA
        due = p.due(p.settings.bundle_propagation_seconds)
        if p.since is None or p.now >= due:
            switched = {
                PREV_CRT: out[CA_CRT],
                CA_CRT: out[NEXT_CRT],
                TLS_CRT: out[NEXT_TLS_CRT],
                TLS_KEY: out[NEXT_TLS_KEY],
            }
            nd = p.now + dt.timedelta(seconds=p.settings.cert_propagation_seconds)
            said = "switched the serving certificate to the new CA"
            return Plan(switched, SWITCHED, p.now, said, nd, p.rotate_requested)
        return Plan(out, CA_ADDED, p.since, _dropped(p.stored_keys), due, False)
    for k in (NEXT_CRT, NEXT_TLS_CRT, NEXT_TLS_KEY):
        out.pop(k, None)
    return None


def _previous_ca_step(p: _Pass) -> Plan | None:
    """Step 2 → steady when the previous CA is still in the bundle: drop it once the new serving certificate
    has had time to propagate, else wait; None when there is none."""
    if PREV_CRT not in p.data:
        return None
    due = p.due(p.settings.cert_propagation_seconds)
    if p.since is None or p.now >= due:
        p.out.pop(PREV_CRT)
        return Plan(p.out, STEADY, None, "dropped the previous CA from the bundle", None, p.rotate_requested)
    return Plan(p.out, SWITCHED, p.since, _dropped(p.stored_keys), due, False)


def _steady(p: _Pass, ca: x509.Certificate, leaf: x509.Certificate) -> Plan:
    """Steady: add a new CA to the bundle (step 1) on request, when the CA or the leaf nears its end, or when
    the leaf names the wrong service (re-issuing under the same CA would need its key, which is not kept)."""
    renew_at = dt.timedelta(days=p.settings.renew_before_days)
    ca_left = ca.not_valid_after_utc - p.now
    leaf_left = leaf.not_valid_after_utc - p.now
    names_ok = _names_ok(leaf, p.settings)
    if p.rotate_requested or ca_left <= renew_at or leaf_left <= renew_at or not names_ok:
        if p.rotate_requested:
            why = "rotation requested"
        elif not names_ok:
            why = "the serving certificate names another service"
        else:
            why = "the certificate expires within renew-before"
        new_ca = _new_ca(p.settings)
        pair = _issue(p.settings, new_ca)  # the new CA's key goes out of scope here, unstored
        p.out[NEXT_CRT], p.out[NEXT_TLS_CRT], p.out[NEXT_TLS_KEY] = new_ca.cert_pem, pair.cert_pem, pair.key_pem
        nd = p.now + dt.timedelta(seconds=p.settings.bundle_propagation_seconds)
        return Plan(p.out, CA_ADDED, p.now, f"added a new CA to the bundle ({why})", nd, p.rotate_requested)
    nd = p.now + min(ca_left, leaf_left) - renew_at
    return Plan(p.out, STEADY, None, _dropped(p.stored_keys), nd, False)


def _dropped(keys: list[str]) -> str:
    return f"removed the stored CA key ({', '.join(keys)}); CA keys are never kept" if keys else ""


def renew_due(cert_pem: bytes, renew_at: dt.timedelta, now: dt.datetime) -> dt.timedelta:
    cert = x509.load_pem_x509_certificate(cert_pem)
    return max(dt.timedelta(0), cert.not_valid_after_utc - now - renew_at)
