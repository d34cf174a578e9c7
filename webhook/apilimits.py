"""The apiserver's own limits on what it reads, for the CLI: request body, labels, annotations.

The webhook never sees an object that breaks these: the apiserver refuses it first. So
`preflight-webhook check` refuses such a document as input (exit 2) with the apiserver's reason,
instead of judging an object that could never be created. Each number is read from upstream:

- k8s.io/apiserver/pkg/server/config.go (NewConfig): `MaxRequestBodyBytes: int64(3 * 1024 * 1024)`,
  the most of a write request's body the apiserver reads; pkg/endpoints/handlers/rest.go
  `limitedReadBody` answers a larger one 413 Request Entity Too Large. No kube-apiserver flag changes
  it. (etcd's --max-request-bytes, 1.5 MiB by default, is the webhook's `Object Size` verdict:
  webhook.preflight, objectLimits.maxBytes.)
- k8s.io/apimachinery/pkg/api/validation/objectmeta.go: `TotalAnnotationSizeLimitB = 256 * (1 << 10)`,
  the sum of the annotations' key and value lengths (bytes) in ValidateAnnotationsSize; each key is a
  qualified name, checked lowercased.
- k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go ValidateLabels, with
  k8s.io/apimachinery/pkg/api/validate/content/kube.go IsLabelKey / IsLabelValue: a key is an optional
  DNS-1123 subdomain prefix (at most 253 characters) and `/`, then a name of at most 63 characters
  (`([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`); a value is empty or such a name.
- The apiextensions-apiserver validates a custom resource's metadata with these same functions
  (pkg/registry/customresource/strategy.go Validate → ValidateObjectMetaAccessor), and the store runs
  the strategy's validation (rest.BeforeCreate) before validating admission (createValidation):
  k8s.io/apiserver/pkg/registry/generic/registry/store.go Create.

Read at kubernetes/apiserver 24a394e and kubernetes/apimachinery eed236c (2026-07) and
kubernetes/apiextensions-apiserver of the same time. The messages follow upstream's wording (without
its regex), so a user who meets the apiserver's error recognises it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_REQUEST_BODY_BYTES",
    "TOTAL_ANNOTATION_SIZE_LIMIT",
    "LABEL_NAME_MAX",
    "LABEL_VALUE_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "label_key_problems",
    "label_value_problems",
    "metadata_problems",
]

#: k8s.io/apiserver/pkg/server/config.go: MaxRequestBodyBytes (3 MiB)
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
#: k8s.io/apimachinery/pkg/api/validation/objectmeta.go: TotalAnnotationSizeLimitB (256 KiB)
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * (1 << 10)
#: k8s.io/apimachinery/pkg/api/validate/content/kube.go: labelKeyMaxLength, LabelValueMaxLength
LABEL_NAME_MAX = 63
LABEL_VALUE_MAX = 63
#: k8s.io/apimachinery/pkg/util/validation/validation.go: DNS1123SubdomainMaxLength
DNS1123_SUBDOMAIN_MAX = 253

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_RE = re.compile(f"^{_LABEL_KEY_FMT}$")
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_RE = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")

_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character"
)
#: problems named in one message; the rest are counted
SHOWN_PROBLEMS = 3
_QUOTED = 40


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def label_key_problems(key: str) -> list[str]:
    """content.IsLabelKey's problems with `key` (empty when it is a valid label key)."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            f"a valid label key {_KEY_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > DNS1123_SUBDOMAIN_MAX:
                errs.append("prefix part " + _max_len(DNS1123_SUBDOMAIN_MAX))
            if not _SUBDOMAIN_RE.match(prefix):
                errs.append("prefix part " + _SUBDOMAIN_MSG)
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > LABEL_NAME_MAX:
        errs.append("name part " + _max_len(LABEL_NAME_MAX))
    if not _LABEL_KEY_RE.match(name):
        errs.append("name part " + _KEY_MSG)
    return errs


def label_value_problems(value: str) -> list[str]:
    """content.IsLabelValue's problems with `value` (empty when it is a valid label value)."""
    errs: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(_max_len(LABEL_VALUE_MAX))
    if value and not _LABEL_KEY_RE.match(value):
        errs.append(_VALUE_MSG)
    return errs


def _quoted(text: str) -> str:
    """A key or value quoted back: repr (control characters escaped), shortened."""
    return repr(text if len(text) <= _QUOTED else text[:_QUOTED] + "...")


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def metadata_problems(obj: dict[str, Any]) -> list[str]:
    """What the apiserver's ObjectMeta validation refuses in `obj`'s labels and annotations, each a phrase
    (`metadata.labels key 'a/b/c' ...`); empty when nothing. Entries that are not strings are left to
    the adapters (they are the object's shape, not these limits)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    out: list[str] = []
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            if not isinstance(k, str):
                continue
            for msg in label_key_problems(k):
                out.append(f"metadata.labels key {_quoted(k)}: {msg}")
            if isinstance(v, str):
                for msg in label_value_problems(v):
                    out.append(f"metadata.labels[{_quoted(k)}] value {_quoted(v)}: {msg}")
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        total = 0
        for k, v in annotations.items():
            if not isinstance(k, str):
                continue
            # the rule is QualifiedName except that case does not matter (ValidateAnnotations)
            for msg in label_key_problems(k.lower()):
                out.append(f"metadata.annotations key {_quoted(k)}: {msg}")
            total += _utf8_len(k) + (_utf8_len(v) if isinstance(v, str) else 0)
        if total > TOTAL_ANNOTATION_SIZE_LIMIT:
            out.append(
                f"metadata.annotations: Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes "
                f"(keys and values are {total:,} bytes; TotalAnnotationSizeLimitB, 256 KiB)"
            )
    return out
