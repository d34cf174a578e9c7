"""Kubernetes object-name rules, for names that go into URLs and references that must resolve.

k8s.io/apimachinery/pkg/util/validation/validation.go: IsDNS1123Label / IsDNS1123Subdomain;
pkg/apis/core/validation: a Namespace name is a label (ValidateNamespaceName), a Secret,
ConfigMap, Lease ... name a subdomain (NameIsDNSSubdomain).
"""

from __future__ import annotations

import re

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(f"^{_DNS1123_LABEL}$")
_SUBDOMAIN_RE = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")


def is_dns1123_label(value: object) -> bool:
    """A DNS-1123 label: what a Namespace name must be (ValidateNamespaceName)."""
    return isinstance(value, str) and len(value) <= 63 and _LABEL_RE.match(value) is not None


def is_dns1123_subdomain(value: object) -> bool:
    """A DNS-1123 subdomain: what a Secret, ConfigMap, Lease, Pod, ... name must be (NameIsDNSSubdomain)."""
    return isinstance(value, str) and len(value) <= 253 and _SUBDOMAIN_RE.match(value) is not None


__all__ = ["is_dns1123_label", "is_dns1123_subdomain"]
