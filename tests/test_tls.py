"""TLS: certificate generation, protocol floor, and live reload while requests are in flight."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import ssl
import warnings
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from cryptography import x509

from webhook.checks.base import Check, CheckContext
from webhook.cli import main
from webhook.results import CheckResult, Status
from webhook.tls import (
    CertReloader,
    ca_bundle,
    generate_ca,
    generate_serving_cert,
    server_context,
    service_dns_names,
    write_cert_files,
)

# --------------------------------------------------------------------------- generation


def _sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return ext.get_values_for_type(x509.DNSName), [str(i) for i in ext.get_values_for_type(x509.IPAddress)]


def test_serving_cert_has_service_sans_and_is_signed_by_the_ca() -> None:
    ca = generate_ca(days=30)
    pair = generate_serving_cert(ca, service_dns_names("pw", "ops") + ["localhost"], ["127.0.0.1", "::1"], days=7)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    cert.verify_directly_issued_by(ca_cert)
    assert _sans(cert) == (
        ["pw", "pw.ops", "pw.ops.svc", "pw.ops.svc.cluster.local", "localhost"],
        ["127.0.0.1", "::1"],
    )
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    lifetime = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=6) < lifetime <= dt.timedelta(days=7)
    assert pair.key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")


def test_serving_cert_needs_a_name() -> None:
    with pytest.raises(ValueError, match="at least one DNS name or IP address"):
        generate_serving_cert(generate_ca(), [], [])


def test_write_cert_files_protects_the_key(tmp_path: Path) -> None:
    ca = generate_ca()
    files = write_cert_files(tmp_path / "out", ca, generate_serving_cert(ca, ["x"]))
    assert files.key.stat().st_mode & 0o777 == 0o600
    assert files.ca_cert.read_bytes() == ca.cert_pem


def test_certs_init_writes_files_and_prints_the_ca_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    assert (
        main(["certs", "init", "--service", "preflight", "--namespace", "ops", "--out", str(out), "--ip", "127.0.0.1"])
        == 0
    )
    printed = capsys.readouterr().out.strip()
    assert base64.b64decode(printed) == (out / "ca.crt").read_bytes()
    assert printed == ca_bundle((out / "ca.crt").read_bytes())
    cert = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert _sans(cert) == (service_dns_names("preflight", "ops"), ["127.0.0.1"])
    assert (out / "tls.key").stat().st_mode & 0o777 == 0o600
    # never overwrites by accident
    assert main(["certs", "init", "--service", "preflight", "--namespace", "ops", "--out", str(out)]) == 2
    assert "already holds ca.crt, tls.crt, tls.key; pass --force" in capsys.readouterr().err


def test_serve_without_certificates_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--offline"]) == 2
    assert "serve needs --tls-cert FILE and --tls-key FILE, or --self-signed" in capsys.readouterr().err


def test_serve_with_a_bad_config_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mode: loud\n")
    assert main(["serve", "--offline", "--self-signed", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "config file" in err and "mode:" in err


# --------------------------------------------------------------------------- protocol floor


async def _peer_serial(port: int, client_ssl: ssl.SSLContext) -> int:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ssl)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()
        await writer.wait_closed()


def _serial(leaf: trustme.LeafCert) -> int:
    return x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).serial_number


def _write_leaf(leaf: trustme.LeafCert, crt: Path, key: Path) -> None:
    # key first, as a rotation writes it: the reloader must never see a cert without its key
    key.write_bytes(leaf.private_key_pem.bytes())
    crt.write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))


async def test_tls_1_1_is_refused_and_1_2_uses_ecdhe_aead(start_webhook: Any, client_ssl: ssl.SSLContext) -> None:
    server = await start_webhook()
    assert server.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_2
    client_ssl.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer TLS 1.1: the server must refuse
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client_ssl.minimum_version = ssl.TLSVersion.TLSv1
        client_ssl.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        await asyncio.open_connection("127.0.0.1", server.port, ssl=client_ssl)
    client_ssl.set_ciphers("DEFAULT")
    client_ssl.minimum_version = client_ssl.maximum_version = ssl.TLSVersion.TLSv1_2
    _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=client_ssl)
    cipher, version, _ = writer.get_extra_info("ssl_object").cipher()
    writer.close()
    await writer.wait_closed()
    assert version == "TLSv1.2"
    assert cipher.startswith("ECDHE-") and ("GCM" in cipher or "CHACHA20" in cipher)


# --------------------------------------------------------------------------- live reload


class Gate(Check):
    name = "Gate"
    kinds = frozenset({"Widget"})

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, ctx: CheckContext) -> CheckResult:
        if ctx.workload.name == "held":
            self.started.set()
            await self.release.wait()
        return CheckResult(self.name, Status.PASS, "ok")


def _review(name: str, uid: str) -> bytes:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {}}
    req = {
        "uid": uid,
        "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
        "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
        "namespace": "ns",
        "operation": "CREATE",
        "object": obj,
    }
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode()


async def _post(session: aiohttp.ClientSession, url: str, name: str, uid: str) -> tuple[int, str]:
    async with session.post(
        url + "/validate", data=_review(name, uid), headers={"Content-Type": "application/json"}
    ) as r:
        body = await r.json()
        return r.status, body["response"]["uid"]


async def test_reload_swaps_certificate_for_new_handshakes_without_dropping_requests(
    start_webhook: Any, widget_adapter: str, ca: trustme.CA, cert_files: tuple[Path, Path], client_ssl: ssl.SSLContext
) -> None:
    crt, key = cert_files
    old_serial = x509.load_pem_x509_certificate(crt.read_bytes()).serial_number
    gate = Gate()
    server = await start_webhook(checks=[gate])
    assert await _peer_serial(server.port, client_ssl) == old_serial

    keepalive = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl, limit=1))
    async with keepalive:
        assert await _post(keepalive, server.url, "warm", "k-0") == (200, "k-0")  # opens the old-cert connection
        held_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl))
        async with held_session:
            held = asyncio.ensure_future(_post(held_session, server.url, "held", "held-1"))
            await gate.started.wait()
            burst_before = [asyncio.ensure_future(_post(keepalive, server.url, "b", f"before-{i}")) for i in range(10)]

            new_leaf = ca.issue_cert("127.0.0.1", "localhost")
            _write_leaf(new_leaf, crt, key)
            assert server.reloader.reload_now() is True
            assert server.reloader.info.serial == _serial(new_leaf)

            assert await _peer_serial(server.port, client_ssl) == _serial(new_leaf)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl)) as fresh:
                burst_after = [asyncio.ensure_future(_post(fresh, server.url, "a", f"after-{i}")) for i in range(10)]
                after = await asyncio.gather(*burst_after)
            gate.release.set()
            assert await held == (200, "held-1")
            before = await asyncio.gather(*burst_before)
        assert await _post(keepalive, server.url, "late", "k-1") == (200, "k-1")  # old connection still fine
    assert before == [(200, f"before-{i}") for i in range(10)]
    assert after == [(200, f"after-{i}") for i in range(10)]
    assert server.reloader.reload_now() is False  # nothing changed since


async def test_a_mismatched_pair_is_refused_and_the_old_certificate_kept(
    start_webhook: Any, ca: trustme.CA, cert_files: tuple[Path, Path], client_ssl: ssl.SSLContext
) -> None:
    crt, key = cert_files
    old_serial = x509.load_pem_x509_certificate(crt.read_bytes()).serial_number
    server = await start_webhook()
    other = ca.issue_cert("127.0.0.1")
    crt.write_bytes(other.cert_chain_pems[0].bytes())  # new cert, key not rotated (yet)
    assert server.reloader.reload_now() is False
    assert "SSLError" in server.reloader.last_error
    assert await _peer_serial(server.port, client_ssl) == old_serial
    key.write_bytes(other.private_key_pem.bytes())  # the key arrives: next poll picks up the pair
    assert server.reloader.reload_now() is True
    assert await _peer_serial(server.port, client_ssl) == _serial(other)


async def test_poller_reloads_on_change(ca: trustme.CA, cert_files: tuple[Path, Path]) -> None:
    crt, key = cert_files
    ctx = server_context(crt, key)
    loaded = asyncio.Event()
    reloader = CertReloader(ctx, crt, key, interval=0.01, on_reload=lambda info: loaded.set())
    reloader.load_initial()
    loaded.clear()
    reloader.start()
    try:
        new_leaf = ca.issue_cert("127.0.0.1")
        _write_leaf(new_leaf, crt, key)
        await asyncio.wait_for(loaded.wait(), timeout=10)
        assert reloader.info.serial == _serial(new_leaf)
    finally:
        await reloader.stop()


def test_ip_sans_round_trip() -> None:
    ca = generate_ca()
    pair = generate_serving_cert(ca, [], ["10.0.0.7"])
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    assert _sans(cert) == ([], ["10.0.0.7"])
    assert cert.subject.rfc4514_string() == "CN=10.0.0.7"


@pytest.mark.parametrize("when", ["expired", "not yet valid"])
async def test_an_expired_or_future_pair_is_refused_and_the_old_certificate_kept(
    start_webhook: Any, ca: trustme.CA, cert_files: tuple[Path, Path], client_ssl: ssl.SSLContext, when: str
) -> None:
    """A rotation that delivers a pair the apiserver would refuse must not replace a working one."""
    import datetime as dt

    crt, key = cert_files
    old_serial = x509.load_pem_x509_certificate(crt.read_bytes()).serial_number
    errors: list[Exception] = []
    server = await start_webhook()
    server.reloader.on_error = errors.append
    now = dt.datetime.now(dt.UTC)
    if when == "expired":
        bad = ca.issue_cert("127.0.0.1", not_before=now - dt.timedelta(days=10), not_after=now - dt.timedelta(days=1))
    else:
        bad = ca.issue_cert("127.0.0.1", not_before=now + dt.timedelta(days=1), not_after=now + dt.timedelta(days=10))
    _write_leaf(bad, crt, key)
    assert server.reloader.reload_now() is False
    assert server.reloader.last_error.startswith(
        f"CertificateNotValid: the certificate (serial {_serial(bad):x}) is {when}"
    )
    assert (
        len(errors) == 1
    )  # `serve` (webhook/cli/serve.py) counts these in preflight_webhook_certificate_reloads{result="error"}
    assert server.reloader.info.serial == old_serial
    assert await _peer_serial(server.port, client_ssl) == old_serial


# --------------------------------------------------------------------------- reading a certificate without cryptography


def _made(subject: x509.Name, serial: int, not_before: dt.datetime, not_after: dt.datetime) -> bytes:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "issuer")]))
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _name(*rdns: list[tuple[x509.ObjectIdentifier, str, Any]]) -> x509.Name:
    out = []
    for rdn in rdns:
        attrs = [
            x509.NameAttribute(oid, value, _type=kind) if kind else x509.NameAttribute(oid, value)
            for oid, value, kind in rdn
        ]
        out.append(x509.RelativeDistinguishedName(attrs))
    return x509.Name(out)


_OID = x509.NameOID
_ST = x509.name._ASN1Type
_SUBJECTS = [
    _name([(_OID.COMMON_NAME, "preflight-webhook.preflight-system.svc", None)]),
    _name([(_OID.COUNTRY_NAME, "DE", None)], [(_OID.ORGANIZATION_NAME, 'a, b + c; <d> "e" \\f', None)]),
    _name([(_OID.ORGANIZATION_NAME, "#lead", None)], [(_OID.COMMON_NAME, " both ", None)]),
    _name([(_OID.COMMON_NAME, "x", None), (_OID.ORGANIZATIONAL_UNIT_NAME, "multi", None)]),
    _name([(_OID.DOMAIN_COMPONENT, "example", None)], [(_OID.USER_ID, "jdoe", None)]),
    _name([(_OID.SERIAL_NUMBER, "1234", None)], [(_OID.EMAIL_ADDRESS, "a@b.c", None)]),
    _name([(_OID.COMMON_NAME, "ünïcödé ✓", None)], [(_OID.LOCALITY_NAME, "bmp ✓", _ST.BMPString)]),
    _name(
        [(_OID.STATE_OR_PROVINCE_NAME, "printable", _ST.PrintableString)], [(_OID.STREET_ADDRESS, "ia5", _ST.IA5String)]
    ),
    _name([(_OID.COMMON_NAME, "uni ✓", _ST.UniversalString)]),
    _name(),
]


@pytest.mark.parametrize("subject", _SUBJECTS, ids=lambda n: n.rfc4514_string() or "empty")
def test_cert_info_reads_what_cryptography_reads(subject: x509.Name) -> None:
    """webhook.tls.cert_info parses the DER itself (cryptography is not imported to serve): the same
    serial, validity and RFC 4514 subject as cryptography's own parser, UTCTime and GeneralizedTime."""
    from webhook.tls import cert_info

    cases = [
        (1, dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.UTC)),
        (2**159 - 1, dt.datetime(1999, 6, 1, tzinfo=dt.UTC), dt.datetime(2050, 1, 1, tzinfo=dt.UTC)),
        (0x80, dt.datetime(1950, 1, 1, tzinfo=dt.UTC), dt.datetime(2100, 2, 28, 12, tzinfo=dt.UTC)),
    ]
    for serial, before, after in cases:
        pem = _made(subject, serial, before, after)
        theirs = x509.load_pem_x509_certificate(pem)
        ours = cert_info(b"leading text\n" + pem + pem)
        assert (ours.serial, ours.not_before, ours.not_after, ours.subject) == (
            theirs.serial_number,
            theirs.not_valid_before_utc,
            theirs.not_valid_after_utc,
            theirs.subject.rfc4514_string(),
        )


@pytest.mark.parametrize("pem", [b"", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"])
def test_cert_info_refuses_what_is_not_a_certificate(pem: bytes) -> None:
    from webhook.tls import cert_info

    with pytest.raises(ValueError):
        cert_info(pem)
