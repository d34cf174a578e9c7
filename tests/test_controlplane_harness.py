"""The control plane harness's pure parts (e2e/harness/controlplane.py)."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from e2e.harness.controlplane import FRONT_PROXY_CLIENT, ControlPlane, aggregation_layer_flags, escape_cel_namespace

CRD = """\
                  x-kubernetes-validations:
                  - message: namespace cannot be set for VolumeClaimPolicies templates
                    rule: self.templates.all(t, !has(t.metadata.namespace)
                      || size(t.metadata.namespace) == 0)
                  description: the pod's metadata.namespace, as fieldRef reads it
                  x-kubernetes-validations:
                  - rule: self.namespaceSelector.size() > 0 && self.ref.namespace != ''
"""


def test_only_rules_get_the_escaped_identifier_continuation_lines_included() -> None:
    out = escape_cel_namespace(CRD).splitlines()
    assert out[2].endswith("rule: self.templates.all(t, !has(t.metadata.__namespace__)")
    assert out[3].endswith("|| size(t.metadata.__namespace__) == 0)")
    assert out[4].endswith("description: the pod's metadata.namespace, as fieldRef reads it")  # not a rule
    assert out[6].endswith("rule: self.namespaceSelector.size() > 0 && self.ref.__namespace__ != ''")  # no prefix match
    assert out[1] == CRD.splitlines()[1]


def test_a_crd_without_such_a_rule_is_unchanged() -> None:
    text = "spec:\n  x-kubernetes-validations:\n  - rule: self.name.size() < 10\n"
    assert escape_cel_namespace(text) == text


def _pki(tmp_path: Path, aggregation_layer: bool) -> Path:
    cp = ControlPlane(tmp_path, build=False, aggregation_layer=aggregation_layer)
    cp.state_dir = tmp_path
    cp._write_pki()
    return tmp_path / "pki"


def test_the_aggregation_layer_gets_kubeadms_front_proxy_ca_client_and_flags(tmp_path: Path) -> None:
    pki = _pki(tmp_path, aggregation_layer=True)
    ca = x509.load_pem_x509_certificate((pki / "front-proxy-ca.crt").read_bytes())
    client = x509.load_pem_x509_certificate((pki / "front-proxy-client.crt").read_bytes())
    cluster_ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    cn = NameOID.COMMON_NAME
    assert ca.subject.get_attributes_for_oid(cn)[0].value == "front-proxy-ca"
    assert client.subject.get_attributes_for_oid(cn)[0].value == FRONT_PROXY_CLIENT == "front-proxy-client"
    assert client.issuer == ca.subject != cluster_ca.subject  # a CA of its own, not the cluster's
    client.verify_directly_issued_by(ca)
    eku = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert (pki / "front-proxy-client.key").stat().st_mode & 0o777 == 0o600
    assert aggregation_layer_flags(pki) == [
        f"--requestheader-client-ca-file={pki}/front-proxy-ca.crt",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-username-headers=X-Remote-User",
        f"--proxy-client-cert-file={pki}/front-proxy-client.crt",
        f"--proxy-client-key-file={pki}/front-proxy-client.key",
    ]


def test_the_plain_control_plane_has_no_front_proxy_certificates(tmp_path: Path) -> None:
    pki = _pki(tmp_path, aggregation_layer=False)
    assert (pki / "ca.crt").is_file()
    assert not list(pki.glob("front-proxy-*"))
