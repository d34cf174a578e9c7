"""TLS: the serving SSLContext, live certificate reload, and certificate generation.

Reload never restarts the listener (kopf restarts its site and leaves a gap): the new
pair is loaded into the LIVE SSLContext with `load_cert_chain`, so new handshakes get
the new certificate and established connections keep theirs. A pair is first proven
on a scratch context from a private copy of the bytes, so a half-written rotation
(new cert, old key) never leaves the live context without a usable key.

The generators are plain functions returning PEM bytes; `certs init`, `serve
--self-signed` and the self-managed rotation (webhook/certmanager/) all use them. They import
`cryptography` when first called: serving a given pair needs only the serial, validity and subject
of its certificate, which `cert_info` reads from the DER itself (the rust bindings cost 9.2 MiB of
resident memory, docs/benchmarks/import-weight.md).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

log = logging.getLogger(__name__)

#: ECDHE key exchange with AEAD ciphers only (TLS 1.2); TLS 1.3 suites are AEAD by definition
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


# --------------------------------------------------------------------------- contexts


def server_context(
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    client_ca_file: str | os.PathLike[str] | None = None,
) -> ssl.SSLContext:
    """A server SSLContext: TLS 1.2 minimum, ECDHE+AEAD ciphers, the given pair loaded.

    With `client_ca_file`, a client certificate is requested and, when sent, verified
    against that CA (CERT_OPTIONAL: a client without one still completes the handshake,
    so the kubelet's probes work; webhook.listener.WebhookServer refuses it on /validate).
    """
    ctx = _bare_context()
    ctx.load_cert_chain(os.fspath(cert_file), os.fspath(key_file))
    if client_ca_file is not None:
        ctx.load_verify_locations(cafile=os.fspath(client_ca_file))
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def _bare_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    return ctx


@dataclass(frozen=True)
class CertInfo:
    serial: int
    not_after: dt.datetime
    subject: str
    not_before: dt.datetime | None = None

    def __str__(self) -> str:
        return f"serial {self.serial:x}, subject {self.subject}, expires {self.not_after.isoformat()}"


def cert_info(cert_pem: bytes) -> CertInfo:
    """The leaf certificate's serial, validity and subject (for logs and metrics; no key material).

    Read from the first PEM block's DER with the standard library, as cryptography's
    `load_pem_x509_certificate` gives them (`serial_number`, `not_valid_before_utc`,
    `not_valid_after_utc`, `subject.rfc4514_string()`; tests/test_tls.py compares the two).
    Raises ValueError on what is not a certificate.
    """
    try:
        tbs = _tbs_fields(ssl.PEM_cert_to_DER_cert(_first_pem_block(cert_pem)))
        serial = int.from_bytes(tbs[0], "big", signed=True)
        not_before, not_after = (_der_time(tag, value) for tag, value in _der_items(tbs[2]))
        return CertInfo(serial, not_after, _rfc4514(tbs[3]), not_before)
    except IndexError as exc:  # a DER element that ends early
        raise ValueError("truncated DER") from exc


# --------------------------------------------------------------------------- reading a certificate (RFC 5280)

#: cryptography/x509/name.py `_NAMEOID_TO_NAME`: the short names rfc4514_string uses; other OIDs are dotted
_DN_NAMES = {
    "2.5.4.3": "CN",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.6": "C",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
#: the string types of a DirectoryString and their codecs (UTF8, Printable, IA5, Teletex, Visible,
#: Numeric, Universal, BMP)
_DN_CODECS = {12: "utf-8", 19: "ascii", 22: "ascii", 20: "latin-1", 26: "ascii", 18: "ascii", 28: "utf-32-be"}
_DN_CODECS[30] = "utf-16-be"


def _first_pem_block(pem: bytes) -> str:
    text = pem.decode("ascii")
    begin = text.find("-----BEGIN CERTIFICATE-----")
    end = text.find("-----END CERTIFICATE-----", begin)
    if begin < 0 or end < 0:
        raise ValueError("no PEM certificate block")
    return text[begin : end + len("-----END CERTIFICATE-----")]


def _der_items(data: bytes) -> list[tuple[int, bytes]]:
    """The (tag, contents) of each DER element in `data`, in order (definite lengths only)."""
    out, i = [], 0
    while i < len(data):
        tag, length, i = data[i], data[i + 1], i + 2
        if length & 0x80:
            n = length & 0x7F
            if not 0 < n <= 4:
                raise ValueError("bad DER length")
            length, i = int.from_bytes(data[i : i + n], "big"), i + n
        if i + length > len(data):
            raise ValueError("truncated DER")
        out.append((tag, data[i : i + length]))
        i += length
    return out


def _tbs_fields(der: bytes) -> list[bytes]:
    """serialNumber, signature, issuer, validity, subject: TBSCertificate's fields after the version."""
    ((cert_tag, cert),) = _der_items(der)
    tbs_tag, tbs = _der_items(cert)[0]
    if cert_tag != 0x30 or tbs_tag != 0x30:
        raise ValueError("not an X.509 certificate")
    fields = [(tag, value) for tag, value in _der_items(tbs) if tag != 0xA0]  # [0] EXPLICIT version
    if len(fields) < 5 or fields[0][0] != 0x02:
        raise ValueError("not an X.509 certificate")
    return [fields[0][1], fields[1][1], fields[3][1], fields[4][1]]  # serial, sigalg, validity, subject


def _der_time(tag: int, value: bytes) -> dt.datetime:
    """UTCTime (YYMMDDHHMMSSZ, 50-99 are 19xx) or GeneralizedTime (YYYYMMDDHHMMSSZ), RFC 5280 4.1.2.5."""
    text = value.decode("ascii")
    if tag == 0x17 and len(text) == 13:
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != 0x18 or len(text) != 15:
        raise ValueError("bad certificate time")
    return dt.datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=dt.UTC)


def _oid(value: bytes) -> str:
    arcs, n = [], 0
    for byte in value:
        n = (n << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(n)
            n = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def _rfc4514(name: bytes) -> str:
    """cryptography's `Name.rfc4514_string()`: the RDNs last first, joined by ",", attributes by "+"."""
    rdns = []
    for _, rdn in _der_items(name):
        attrs = []
        for _, pair in _der_items(rdn):
            (_, oid), (tag, raw) = _der_items(pair)
            dotted = _oid(oid)
            value: str | bytes = raw.decode(_DN_CODECS[tag]) if tag in _DN_CODECS else raw[1:] if tag == 3 else raw
            attrs.append(f"{_DN_NAMES.get(dotted, dotted)}={_escape_dn_value(value)}")
        rdns.append("+".join(attrs))
    return ",".join(reversed(rdns))


def _escape_dn_value(val: str | bytes) -> str:
    """cryptography/x509/name.py `_escape_dn_value` (RFC 4514 section 2.4)."""
    if not val:
        return ""
    if isinstance(val, bytes):
        return "#" + val.hex()
    for special in ("\\", '"', "+", ",", ";", "<", ">"):
        val = val.replace(special, "\\" + special)
    val = val.replace("\0", "\\00")
    if val[0] == "#" or (val[0] == " " and len(val) > 1):
        val = "\\" + val
    if val[-1] == " ":
        val = val[:-1] + "\\ "
    return val


class CertReloader:
    """Watches a cert/key pair and reloads it into a live SSLContext when the files change.

    Polls every `interval` seconds and compares the sha256 of both files (Kubernetes swaps a
    mounted Secret through a symlink, which an mtime check can miss); `reload_now()` forces a
    check. A failed reload keeps serving the previous pair and is retried on the next poll; a pair
    outside its validity period (expired, or not yet valid) counts as failed, as a mismatched one does.
    """

    def __init__(
        self,
        ctx: ssl.SSLContext,
        cert_file: str | os.PathLike[str],
        key_file: str | os.PathLike[str],
        *,
        interval: float = 10.0,
        on_reload: Callable[[CertInfo], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self.on_reload = on_reload
        self.on_error = on_error
        self._digest: str | None = None
        self._task: asyncio.Task[None] | None = None
        self.info: CertInfo | None = None
        self.last_error: str | None = None

    def load_initial(self) -> CertInfo:
        """Load the pair into the context now; raises if it cannot be loaded (start-up)."""
        if not self._load(force=True):
            raise ssl.SSLError(f"cannot load {self.cert_file} / {self.key_file}: {self.last_error}")
        assert self.info is not None
        return self.info

    def reload_now(self) -> bool:
        """Reload if the files changed since the last load. True when a new pair was loaded."""
        return self._load(force=False)

    def _load(self, *, force: bool) -> bool:
        try:
            # the pair is hashed on every poll (two small files), not compared by mtime: a same-size
            # rewrite within the filesystem's mtime granularity is still seen
            cert_pem = self.cert_file.read_bytes()
            key_pem = self.key_file.read_bytes()
            digest = hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()
            if not force and digest == self._digest:
                return False
            info = cert_info(cert_pem)
            if not force:  # at start-up there is no previous pair to keep: serve and let the logs say
                _require_valid_now(info)
            _load_pair_bytes(self.ctx, cert_pem, key_pem)
        except Exception as exc:  # a bad rotation never takes the server down
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.error("certificate reload failed; still serving the previous certificate: %s", self.last_error)
            if self.on_error is not None:
                self.on_error(exc)
            return False
        self._digest, self.info, self.last_error = digest, info, None
        log.info("serving certificate loaded: %s", info)
        if self.on_reload is not None:
            self.on_reload(info)
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.reload_now()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name="cert-reloader")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


class CertificateNotValid(ValueError):
    """A rotated certificate outside its validity period: the previous pair is kept."""


def _require_valid_now(info: CertInfo) -> None:
    """An expired (or not yet valid) pair would fail every apiserver handshake; keep the old one instead."""
    now = dt.datetime.now(dt.UTC)
    if info.not_after <= now:
        raise CertificateNotValid(
            f"the certificate (serial {info.serial:x}) is expired since {info.not_after.isoformat()}"
        )
    if info.not_before is not None and info.not_before > now:
        raise CertificateNotValid(
            f"the certificate (serial {info.serial:x}) is not yet valid until {info.not_before.isoformat()}"
        )


def _load_pair_bytes(live: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Prove the pair on a scratch context, then load the same bytes into the live one."""
    with tempfile.TemporaryDirectory(prefix="preflight-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        _bare_context().load_cert_chain(cert_path, key_path)  # raises on a mismatched pair
        live.load_cert_chain(cert_path, key_path)


# --------------------------------------------------------------------------- generation


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, days: float, *, ca: bool
) -> x509.CertificateBuilder:
    """What every certificate here shares: subject and issuer, a random serial, valid from five
    minutes ago (clock skew) for `days`, and the basic constraints and key usage of a CA (signs
    certificates, no intermediates) or of a leaf (signs nothing)."""
    from cryptography import x509

    now = _now()
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def generate_ca(common_name: str = "preflight-webhook-ca", days: int = 3650) -> KeyPair:
    """A self-signed CA (ECDSA P-256) valid for `days`, able to sign serving certificates only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(name, name, key, days, ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_cert(
    ca: KeyPair,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    dns_names: Sequence[str] = (),
    ip_addresses: Iterable[str] = (),
    server: bool = True,
    client: bool = False,
    days: int = 365,
) -> KeyPair:
    """A leaf certificate signed by `ca`: serving (SANs) and/or client (`organizations` = groups)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    key = _new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]))
    builder = (
        _builder(x509.Name(subject), ca_cert.subject, key, days, ca=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def generate_serving_cert(
    ca: KeyPair,
    dns_names: Sequence[str],
    ip_addresses: Iterable[str] = (),
    days: int = 365,
) -> KeyPair:
    """A serving certificate signed by `ca` with the given DNS and IP SANs (the first DNS name is the CN)."""
    ips = list(ip_addresses)
    if not dns_names and not ips:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    cn = dns_names[0] if dns_names else str(ipaddress.ip_address(ips[0]))
    return issue_cert(ca, cn, dns_names=dns_names, ip_addresses=ips, days=days)


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the apiserver may use for a Service: NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def ca_bundle(ca_cert_pem: bytes) -> str:
    """The base64 value for a webhook configuration's `clientConfig.caBundle`."""
    return base64.b64encode(ca_cert_pem).decode("ascii")


@dataclass(frozen=True)
class CertFiles:
    ca_cert: Path
    cert: Path
    key: Path


def write_cert_files(out_dir: str | os.PathLike[str], ca: KeyPair, serving: KeyPair) -> CertFiles:
    """Write ca.crt, tls.crt and tls.key (0600) into `out_dir`; each file is replaced atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = CertFiles(out / "ca.crt", out / "tls.crt", out / "tls.key")
    # key first: a reloader that sees the new cert always finds its key already in place
    _atomic_write(files.key, serving.key_pem, 0o600)
    _atomic_write(files.cert, serving.cert_pem, 0o644)
    _atomic_write(files.ca_cert, ca.cert_pem, 0o644)
    return files


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = [
    "CIPHERS",
    "CertFiles",
    "CertInfo",
    "CertReloader",
    "KeyPair",
    "ca_bundle",
    "cert_info",
    "generate_ca",
    "generate_serving_cert",
    "server_context",
    "service_dns_names",
    "write_cert_files",
]
