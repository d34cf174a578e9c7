"""Self-managed certificates: bootstrap, the three-step rotation, conflicts, drift, files.

The store is an in-memory fake with the apiserver's resourceVersion semantics (409 on a
stale write, on a create of an existing name); handshakes are real TLS over memory BIOs.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from webhook.certmanager import (
    CA_CRT,
    MANAGED_BY_LABEL,
    NEXT_CRT,
    PREV_CRT,
    ROTATE_REQUEST,
    TLS_CRT,
    TLS_KEY,
    CertManager,
    RotationSettings,
    bundle_certs,
    decode_data,
    parse_secret_ref,
)
from webhook.cluster.view import ApiError
from webhook.tls import service_dns_names

NS, SECRET, VWC = "preflight", "preflight-webhook-tls", "preflight-webhook"
T0 = dt.datetime.now(dt.UTC)  # certificates are issued at the real clock


class FakeStore:
    """Secrets and one VWC with resourceVersion checks, like the apiserver."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.vwc: dict[str, Any] | None = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": VWC, "resourceVersion": "1"},
            "webhooks": [
                {"name": "a.preflight.webhook.io", "clientConfig": {}},
                {"name": "b.preflight.webhook.io", "clientConfig": {}},
            ],
        }
        self.rv = 10
        self.writes = 0
        self.before_write: Any = None  # hook: runs once before the next secret write

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return obj

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        s = self.secrets.get((namespace, name))
        return copy.deepcopy(s) if s else None

    def _hook(self) -> None:
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook()

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self._hook()
        key = (namespace, body["metadata"]["name"])
        if key in self.secrets:
            raise ApiError(409, "already exists", "AlreadyExists")
        self.secrets[key] = self._bump(body)
        self.writes += 1
        return copy.deepcopy(self.secrets[key])

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._hook()
        cur = self.secrets[(namespace, name)]
        if body["metadata"].get("resourceVersion") != cur["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified", "Conflict")
        self.secrets[(namespace, name)] = self._bump(body)
        self.writes += 1
        return copy.deepcopy(self.secrets[(namespace, name)])

    async def get_webhook_config(self, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.vwc)

    async def replace_webhook_config(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.vwc is not None
        if body["metadata"].get("resourceVersion") != self.vwc["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified", "Conflict")
        self.vwc = self._bump(body)
        return copy.deepcopy(self.vwc)

    # helpers
    def data(self) -> dict[str, bytes]:
        return decode_data(self.secrets[(NS, SECRET)])

    def bundle_subjects(self) -> list[str]:
        assert self.vwc is not None
        bundles = {h["clientConfig"]["caBundle"] for h in self.vwc["webhooks"]}
        assert len(bundles) == 1, "every webhook carries the same caBundle"
        return [c.subject.rfc4514_string() + f"#{c.serial_number:x}" for c in bundle_certs(bundles.pop())]

    def bundle_pem(self) -> bytes:
        assert self.vwc is not None
        return base64.b64decode(self.vwc["webhooks"][0]["clientConfig"]["caBundle"])


def settings(**kw: Any) -> RotationSettings:
    base = dict(
        dns_names=tuple(service_dns_names("preflight-webhook", NS)),
        validity_days=365.0,
        renew_before_days=30.0,
        bundle_propagation_seconds=30.0,
        cert_propagation_seconds=180.0,
    )
    base.update(kw)
    return RotationSettings(**base)  # type: ignore[arg-type]


def manager(store: FakeStore, tmp: Path | None = None, **kw: Any) -> CertManager:
    return CertManager(store, NS, SECRET, VWC, settings(**kw), write_dir=tmp)


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _id(pem: bytes) -> str:
    c = _cert(pem)
    return c.subject.rfc4514_string() + f"#{c.serial_number:x}"


def handshake_ok(cert_pem: bytes, key_pem: bytes, bundle_pem: bytes, tmp: Path) -> bool:
    """A real TLS handshake (memory BIOs): does a client trusting `bundle_pem` accept this pair?"""
    (tmp / "c.pem").write_bytes(cert_pem)
    (tmp / "k.pem").write_bytes(key_pem)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp / "c.pem", tmp / "k.pem")
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(cadata=bundle_pem.decode())
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    cs = client.wrap_bio(c_in, c_out, server_hostname=f"preflight-webhook.{NS}.svc")
    ss = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for sock in (cs, ss):
            try:
                sock.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError:
                return False
            except ssl.SSLError:
                return False
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        try:
            if cs.version() and ss.version():
                cs.do_handshake()
                return True
        except ssl.SSLWantReadError:
            continue
    return False


async def test_bootstrap_creates_secret_and_injects_bundle(tmp_path: Path) -> None:
    store = FakeStore()
    res = await manager(store).reconcile(T0)
    assert res.secret_changed == "issued a new CA and serving certificate"
    assert res.step == "steady" and res.bundle_changed
    secret = store.secrets[(NS, SECRET)]
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["labels"][MANAGED_BY_LABEL] == "preflight-webhook-certs"
    data = store.data()
    assert store.bundle_pem() == data[CA_CRT]
    leaf = _cert(data[TLS_CRT])
    leaf.verify_directly_issued_by(_cert(data[CA_CRT]))
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == set(service_dns_names("preflight-webhook", NS))
    assert handshake_ok(data[TLS_CRT], data[TLS_KEY], store.bundle_pem(), tmp_path)


async def test_steady_state_writes_nothing() -> None:
    store = FakeStore()
    mgr = manager(store)
    await mgr.reconcile(T0)
    writes, rv = store.writes, store.vwc["metadata"]["resourceVersion"]  # type: ignore[index]
    res = await mgr.reconcile(T0 + dt.timedelta(days=1))
    assert (res.secret_changed, res.bundle_changed) == ("", False)
    assert store.writes == writes and store.vwc["metadata"]["resourceVersion"] == rv  # type: ignore[index]


async def test_rotation_keeps_every_step_trusted(tmp_path: Path) -> None:
    """At each step the served pair verifies against the bundle before AND after the step."""
    store = FakeStore()
    mgr = manager(store)
    await mgr.reconcile(T0)
    old_ca = store.data()[CA_CRT]
    old_leaf = store.data()[TLS_CRT]

    store.secrets[(NS, SECRET)]["metadata"].setdefault("annotations", {})[ROTATE_REQUEST] = "now"
    # step 1: the new CA joins the bundle; the served certificate does not change yet
    res = await mgr.reconcile(T0 + dt.timedelta(seconds=1))
    assert res.step == "ca-added" and res.secret_changed.startswith("added a new CA to the bundle (rotation requested)")
    d1 = store.data()
    new_ca = d1[NEXT_CRT]
    assert d1[TLS_CRT] == old_leaf
    assert store.bundle_subjects() == [_id(old_ca), _id(new_ca)]
    assert ROTATE_REQUEST not in store.secrets[(NS, SECRET)]["metadata"]["annotations"]
    assert res.next_due == T0 + dt.timedelta(seconds=31)

    # nothing moves before the bundle has propagated
    res = await mgr.reconcile(T0 + dt.timedelta(seconds=30))
    assert res.step == "ca-added" and res.secret_changed == ""

    # step 2: the serving certificate switches to the new CA; the old CA stays in the bundle
    bundle_before = store.bundle_pem()
    res = await mgr.reconcile(T0 + dt.timedelta(seconds=31))
    assert (res.step, res.secret_changed) == ("switched", "switched the serving certificate to the new CA")
    d2 = store.data()
    assert d2[CA_CRT] == new_ca and d2[PREV_CRT] == old_ca and NEXT_CRT not in d2
    _cert(d2[TLS_CRT]).verify_directly_issued_by(_cert(new_ca))
    assert store.bundle_subjects() == [_id(old_ca), _id(new_ca)]
    assert handshake_ok(d2[TLS_CRT], d2[TLS_KEY], bundle_before, tmp_path)
    assert handshake_ok(d1[TLS_CRT], d1[TLS_KEY], store.bundle_pem(), tmp_path)  # a replica not yet reloaded

    res = await mgr.reconcile(T0 + dt.timedelta(seconds=31 + 179))
    assert res.step == "switched" and res.secret_changed == ""

    # step 3: after every replica can have reloaded, only the new CA remains
    res = await mgr.reconcile(T0 + dt.timedelta(seconds=31 + 180))
    assert (res.step, res.secret_changed) == ("steady", "dropped the previous CA from the bundle")
    assert store.bundle_subjects() == [_id(new_ca)]
    d3 = store.data()
    assert PREV_CRT not in d3 and d3[TLS_CRT] == d2[TLS_CRT]
    assert handshake_ok(d3[TLS_CRT], d3[TLS_KEY], store.bundle_pem(), tmp_path)
    assert not handshake_ok(old_leaf, d1[TLS_KEY], store.bundle_pem(), tmp_path)


async def test_rotation_starts_renew_before_expiry() -> None:
    store = FakeStore()
    mgr = manager(store, validity_days=10.0, renew_before_days=3.0)
    res = await mgr.reconcile(T0)
    # certificates are issued at the real clock; their expiry drives the schedule
    leaf_end = _cert(store.data()[TLS_CRT]).not_valid_after_utc
    assert res.next_due is not None
    res = await mgr.reconcile(leaf_end - dt.timedelta(days=3, seconds=1))
    assert res.step == "steady" and res.secret_changed == ""
    res = await mgr.reconcile(leaf_end - dt.timedelta(days=3) + dt.timedelta(seconds=1))
    assert res.step == "ca-added"
    assert res.secret_changed == "added a new CA to the bundle (the certificate expires within renew-before)"


async def test_concurrent_bootstrap_adopts_the_winner() -> None:
    """Two managers start together: the loser's create gets 409 and it adopts the winner's Secret."""
    store = FakeStore()
    a, b = manager(store), manager(store)
    await a.reconcile(T0)
    winners_secret = copy.deepcopy(store.secrets[(NS, SECRET)])
    winner = store.data()
    del store.secrets[(NS, SECRET)]

    def a_creates_first() -> None:  # b has read "absent"; a's create lands before b's
        store.secrets[(NS, SECRET)] = store._bump(winners_secret)

    store.before_write = a_creates_first
    res = await b.reconcile(T0)
    assert res.conflicts == 1
    assert store.data() == winner  # adopted, not overwritten
    assert store.bundle_pem() == winner[CA_CRT]


async def test_stale_replace_is_retried_on_the_fresh_object() -> None:
    store = FakeStore()
    mgr = manager(store)
    await mgr.reconcile(T0)
    store.secrets[(NS, SECRET)]["metadata"].setdefault("annotations", {})[ROTATE_REQUEST] = "1"

    def bump() -> None:  # someone else touches the Secret between our read and our write
        s = store.secrets[(NS, SECRET)]
        s["metadata"]["annotations"]["note"] = "x"
        store.secrets[(NS, SECRET)] = store._bump(s)

    store.before_write = bump
    res = await mgr.reconcile(T0 + dt.timedelta(seconds=1))
    assert res.conflicts == 1 and res.step == "ca-added"
    assert store.secrets[(NS, SECRET)]["metadata"]["annotations"]["note"] == "x"


async def test_drifted_bundle_is_repaired() -> None:
    store = FakeStore()
    mgr = manager(store)
    await mgr.reconcile(T0)
    good = store.bundle_pem()
    store.vwc["webhooks"][1]["clientConfig"]["caBundle"] = base64.b64encode(b"stale").decode()  # type: ignore[index]
    res = await mgr.reconcile(T0 + dt.timedelta(minutes=1))
    assert res.bundle_changed and res.secret_changed == ""
    assert store.bundle_pem() == good and len(store.bundle_subjects()) == 1


async def test_unmanaged_secret_is_never_overwritten() -> None:
    store = FakeStore()
    store.secrets[(NS, SECRET)] = {"metadata": {"name": SECRET, "namespace": NS, "resourceVersion": "3"}, "data": {}}
    with pytest.raises(ApiError) as err:
        await manager(store).reconcile(T0)
    assert err.value.message == (
        f'Secret "{NS}/{SECRET}" exists but is not managed by preflight-webhook-certs '
        "(label app.kubernetes.io/managed-by); refusing to overwrite it"
    )
    assert store.writes == 0


async def test_renamed_service_rotates_to_a_new_ca_with_overlap() -> None:
    """Re-issuing under the same CA would need its key, which is never kept: a new CA, three steps."""
    store = FakeStore()
    await manager(store).reconcile(T0)
    ca = store.data()[CA_CRT]
    other = CertManager(store, NS, SECRET, VWC, settings(dns_names=("other.preflight.svc",)))
    res = await other.reconcile(T0 + dt.timedelta(seconds=5))
    assert res.step == "ca-added"
    assert res.secret_changed == "added a new CA to the bundle (the serving certificate names another service)"
    assert store.data()[CA_CRT] == ca and res.bundle_changed
    await other.reconcile(T0 + dt.timedelta(seconds=5 + 30))
    sans = _cert(store.data()[TLS_CRT]).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["other.preflight.svc"]


async def test_broken_secret_is_reissued() -> None:
    store = FakeStore()
    mgr = manager(store)
    await mgr.reconcile(T0)
    s = store.secrets[(NS, SECRET)]
    s["data"]["ca.crt"] = base64.b64encode(b"garbage").decode()
    res = await mgr.reconcile(T0 + dt.timedelta(seconds=1))
    assert res.secret_changed == "the stored certificate was unusable; issued a new CA and serving certificate"


def _private_keys(data: dict[str, bytes]) -> list[str]:
    return sorted(k for k, v in data.items() if b"PRIVATE KEY" in v)


async def test_no_ca_private_key_is_ever_stored() -> None:
    """The serving ServiceAccount may read this Secret: it must hold no key but the serving one."""
    store = FakeStore()
    mgr = manager(store)
    await mgr.reconcile(T0)
    seen = [_private_keys(store.data())]
    store.secrets[(NS, SECRET)]["metadata"].setdefault("annotations", {})[ROTATE_REQUEST] = "now"
    for t in (1, 31, 31 + 180):
        await mgr.reconcile(T0 + dt.timedelta(seconds=t))
        seen.append(_private_keys(store.data()))
    assert seen == [["tls.key"], ["tls-next.key", "tls.key"], ["tls.key"], ["tls.key"]]


async def test_a_ca_key_left_by_an_older_version_is_removed(tmp_path: Path) -> None:
    from webhook.tls import generate_ca, generate_serving_cert

    store = FakeStore()
    ca = generate_ca()
    leaf = generate_serving_cert(ca, list(service_dns_names("preflight-webhook", NS)))
    store.secrets[(NS, SECRET)] = {
        "metadata": {
            "name": SECRET,
            "namespace": NS,
            "resourceVersion": "3",
            "labels": {MANAGED_BY_LABEL: "preflight-webhook-certs"},
        },
        "data": {
            k: base64.b64encode(v).decode()
            for k, v in {
                "ca.crt": ca.cert_pem,
                "ca.key": ca.key_pem,
                "tls.crt": leaf.cert_pem,
                "tls.key": leaf.key_pem,
            }.items()
        },
    }
    res = await manager(store).reconcile(T0)
    assert res.secret_changed == "removed the stored CA key (ca.key); CA keys are never kept"
    assert res.step == "steady"
    assert store.data() == {"ca.crt": ca.cert_pem, "tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem}
    assert handshake_ok(leaf.cert_pem, leaf.key_pem, store.bundle_pem(), tmp_path)


async def test_write_dir_swaps_files_atomically(tmp_path: Path) -> None:
    store = FakeStore()
    out = tmp_path / "certs"
    mgr = manager(store, out)
    await mgr.reconcile(T0)
    for name in ("tls.crt", "tls.key", "ca.crt"):
        assert (out / name).is_symlink() and str((out / name).readlink()) == f"..data/{name}"
    assert (out / "tls.crt").read_bytes() == store.data()[TLS_CRT]
    first_target = (out / "..data").readlink()
    store.secrets[(NS, SECRET)]["metadata"].setdefault("annotations", {})[ROTATE_REQUEST] = "1"
    await mgr.reconcile(T0 + dt.timedelta(seconds=1))
    assert (out / "ca.crt").read_bytes() == store.bundle_pem()
    assert (out / "..data").readlink() != first_target
    assert not (out / first_target).exists(), "the previous generation is removed"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("..")) == ["ca.crt", "tls.crt", "tls.key"]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(out / "tls.crt", out / "tls.key")


def test_settings_and_refs_are_validated() -> None:
    with pytest.raises(ValueError, match=r"renew-before \(40.0 d\) must be shorter than the validity \(30.0 d\)"):
        settings(validity_days=30.0, renew_before_days=40.0)
    assert parse_secret_ref("ns/name") == ("ns", "name")
    with pytest.raises(ValueError, match="--secret must be NAMESPACE/NAME, got 'name'"):
        parse_secret_ref("name")
    for bad in ("ns/.", "ns/..", "../name", "ns/a/b"):
        with pytest.raises(ValueError, match="must be a DNS-1123 label and the name a DNS-1123 subdomain"):
            parse_secret_ref(bad)
