"""The control plane harness's pure parts (e2e/harness/controlplane.py)."""

from __future__ import annotations

from e2e.harness.controlplane import escape_cel_namespace

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
